/* Moving the payload of a DATA frame from one descriptor to another
 * without copying it through this process: socket -> pipe -> socket (or
 * file) with splice(2), the kernel passing page references along.
 *
 * Only the payload moves this way. The caller reads and checks the frame
 * header first (fsplice_hdr_read: magic, version, type, the type's length
 * limit, all of frame_hdr_decode), decides the frame is one it may pass on
 * (a DATA frame where DATA is due), writes the header itself, then moves
 * exactly the announced length: never a byte of the next frame, so the
 * next header is read and checked the same way. Memory per transfer: the
 * pipe, at most SPACE_CHUNK bytes of kernel pages.
 *
 * Blocking descriptors: SO_RCVTIMEO / SO_SNDTIMEO apply as to read and
 * write. A destination that cannot take spliced pages (EINVAL: some file
 * systems) is written with read/write through a buffer of one chunk, once
 * and for the rest of the transfer. The callers ignore SIGPIPE (a socket
 * written by splice gets no MSG_NOSIGNAL). */
#ifndef SPACE_FSPLICE_H
#define SPACE_FSPLICE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* payloads below this go through frame_read/frame_write: a pipe per
 * operation costs more than copying a few KiB */
#define FSPLICE_MIN (32u << 10)

struct fsplice {
	int p[2];               /* the pipe, made on first use; -1 before */
	size_t cap;             /* its capacity */
	uint8_t *buf;           /* the fallback's chunk, if it was needed */
	bool to_failed;         /* the last failure was the destination's */
};

#define FSPLICE_INIT { { -1, -1 }, 0, NULL, false }

/* the next frame header: 0 with *type and *len checked by
 * frame_hdr_decode; -ECONNRESET on EOF before a byte of it, -EPROTO on EOF
 * inside it or a bad header, -EMSGSIZE over the type's limit, -errno */
int fsplice_hdr_read(int fd, uint16_t *type, uint32_t *len);
/* exactly len bytes from `from` to `to`: 0; -EPIPE when `from` ended
 * first; -errno on failure (then neither stream is usable: close both;
 * s->to_failed says whether writing to `to` failed, as against reading
 * `from`) */
int fsplice_move(struct fsplice *s, int from, int to, size_t len);
/* frame header then payload, from `from` to `to` (the header re-encoded
 * from the checked type and length) */
int fsplice_frame(struct fsplice *s, int from, int to, uint16_t type, uint32_t len);
/* the payload of a frame whose header fsplice_hdr_read returned, into *f
 * as frame_read would have filled it: 0, -EPROTO on EOF inside, -errno */
int fsplice_payload_read(int fd, uint16_t type, uint32_t len, struct frame *f);
void fsplice_free(struct fsplice *s);
/* a socket that carries a file body gets SPACE_BULK_SOCKBUF of send and
 * receive buffer (best effort, capped by the system's maximum): fewer
 * wake-ups per MiB at every hop; kernel memory, bounded per socket */
void fsplice_sockbufs(int fd);
#endif
