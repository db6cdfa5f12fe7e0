/* Non-blocking frame I/O for relays that carry streams (node-api's
 * WebSocket endpoint, sbx-manager's stream relay). A relay that moves
 * frames both ways must never block writing one way while the other side
 * waits for it to read (a process that writes output and does not read its
 * stdin would deadlock the pair), so each direction holds at most one frame
 * in memory and the relay polls for what it can do next:
 *
 *   frame_rd: reads exactly one frame's bytes (header, then the length the
 *             header announced, refused by frame_hdr_decode's limits before
 *             any allocation), never a byte of the next frame, so
 *             memory per direction is one frame;
 *   frame_wr: the encoded bytes of frames not yet written, bounded by its
 *             caller (frame_wr_pending tells how many).
 *
 * Both use send/recv with MSG_DONTWAIT | MSG_NOSIGNAL: they work on
 * blocking sockets and never raise SIGPIPE. */
#ifndef SPACE_FRAMEPUMP_H
#define SPACE_FRAMEPUMP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct frame_rd {
	uint8_t hdr[FRAME_HDR_LEN];
	size_t got;             /* bytes of the current frame read so far */
	uint16_t type;
	uint32_t len;
	uint8_t *payload;       /* len + 1 bytes once the header is read */
};

struct frame_wr {
	uint8_t *buf;
	size_t len, off, cap;
};

/* 1 with *f filled (the caller owns f->payload: frame_free), 0 when the
 * socket has nothing more for now, -ECONNRESET on EOF at a frame boundary,
 * -EPIPE on EOF inside a frame, -EPROTO / -EMSGSIZE for a bad header,
 * other -errno on failure */
int frame_rd_step(struct frame_rd *r, int fd, struct frame *f);
void frame_rd_free(struct frame_rd *r);

/* append one frame; -EMSGSIZE over the type's limit, -ENOMEM */
int frame_wr_add(struct frame_wr *w, uint16_t type, const void *payload, size_t len);
/* write what it can: 0 when everything is written, 1 when bytes remain
 * (wait for POLLOUT), -errno on failure */
int frame_wr_flush(struct frame_wr *w, int fd);
size_t frame_wr_pending(const struct frame_wr *w);
void frame_wr_free(struct frame_wr *w);
#endif
