/* Frames on non-blocking sockets, for the hops that relay a stream both
 * ways from one poll loop (docs/protocol.md, "Streams"): an incremental
 * reader that takes exactly one frame at a time (never a byte of the next
 * one, so nothing is read ahead of what can be passed on) and an output
 * queue of encoded frames that the caller keeps bounded. */
#ifndef SPACE_FRAMEIO_H
#define SPACE_FRAMEIO_H
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

struct frame_rd {
	uint8_t hdr[FRAME_HDR_LEN];
	size_t have;                    /* header + payload bytes so far */
	uint16_t type;
	uint32_t len;
	uint8_t *payload;               /* len + 1 bytes once the header is in */
};

/* read what the socket has of the current frame. 1: *out holds a whole
 * frame (owned by the caller, NUL-terminated payload as frame_read gives);
 * 0: not yet (EAGAIN); -ECONNRESET at EOF on a frame boundary, -EPIPE at
 * EOF inside a frame; -EPROTO / -EMSGSIZE for a bad header (frame_hdr_decode);
 * other -errno. */
int frame_rd_step(int fd, struct frame_rd *r, struct frame *out);
void frame_rd_free(struct frame_rd *r);

struct frame_q {
	uint8_t *buf;
	size_t len, off;                /* bytes queued, bytes of them written */
};

/* append one encoded frame (header + payload); 0 or -ENOMEM / -EMSGSIZE */
int frame_q_add(struct frame_q *q, uint16_t type, const void *payload, size_t len);
/* bytes still to write */
size_t frame_q_pending(const struct frame_q *q);
/* write what the socket takes: 0 when empty, 1 when bytes remain
 * (EAGAIN), -errno (EPIPE, ECONNRESET...) */
int frame_q_flush(struct frame_q *q, int fd);
void frame_q_free(struct frame_q *q);
#endif
