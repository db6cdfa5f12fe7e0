/* Non-blocking frame reader and writer queue (frameio.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "frameio.h"

int
frame_rd_step(int fd, struct frame_rd *r, struct frame *out)
{
	ssize_t n;
	int e;

	for (;;) {
		if (r->have < FRAME_HDR_LEN) {
			n = read(fd, r->hdr + r->have, FRAME_HDR_LEN - r->have);
		} else {
			size_t got = r->have - FRAME_HDR_LEN;

			if (got == r->len) {
				*out = (struct frame){ .type = r->type, .version = r->hdr[2],
				    .len = r->len, .payload = r->payload };
				out->payload[r->len] = '\0';
				r->payload = NULL;
				r->have = 0;
				return 1;
			}
			n = read(fd, r->payload + got, r->len - got);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		if (n == 0)
			return r->have == 0 ? -ECONNRESET : -EPIPE;
		r->have += (size_t)n;
		if (r->have == FRAME_HDR_LEN) {
			/* the type's limit is checked before anything is
			 * allocated for the payload */
			if ((e = frame_hdr_decode(r->hdr, &r->type, &r->len)) < 0)
				return e;
			if ((r->payload = malloc((size_t)r->len + 1)) == NULL)
				return -ENOMEM;
		}
	}
}

void
frame_rd_free(struct frame_rd *r)
{
	free(r->payload);
	memset(r, 0, sizeof(*r));
}

int
frame_q_add(struct frame_q *q, uint16_t type, const void *payload, size_t len)
{
	uint8_t *nb;

	if (len > frame_max_len(type))
		return -EMSGSIZE;
	/* drop what was written before growing */
	if (q->off > 0) {
		memmove(q->buf, q->buf + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
	}
	if ((nb = realloc(q->buf, q->len + FRAME_HDR_LEN + len + 1)) == NULL)
		return -ENOMEM;
	q->buf = nb;
	frame_hdr_encode(q->buf + q->len, type, (uint32_t)len);
	if (len > 0)
		memcpy(q->buf + q->len + FRAME_HDR_LEN, payload, len);
	q->len += FRAME_HDR_LEN + len;
	return 0;
}

size_t
frame_q_pending(const struct frame_q *q)
{
	return q->len - q->off;
}

int
frame_q_flush(struct frame_q *q, int fd)
{
	ssize_t n;

	while (q->off < q->len) {
		n = send(fd, q->buf + q->off, q->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 1;
			return -errno;
		}
		q->off += (size_t)n;
	}
	/* empty: give the memory back, an idle stream holds none */
	free(q->buf);
	q->buf = NULL;
	q->len = q->off = 0;
	return 0;
}

void
frame_q_free(struct frame_q *q)
{
	free(q->buf);
	memset(q, 0, sizeof(*q));
}
