/* Non-blocking frame I/O (framepump.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "framepump.h"

int
frame_rd_step(struct frame_rd *r, int fd, struct frame *f)
{
	ssize_t n;
	int ret;

	for (;;) {
		if (r->got < FRAME_HDR_LEN) {
			n = recv(fd, r->hdr + r->got, FRAME_HDR_LEN - r->got, MSG_DONTWAIT);
		} else {
			size_t want = (size_t)r->len - (r->got - FRAME_HDR_LEN);

			if (want == 0)
				goto done;
			n = recv(fd, r->payload + (r->got - FRAME_HDR_LEN), want, MSG_DONTWAIT);
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -errno;
		}
		if (n == 0)
			return r->got == 0 ? -ECONNRESET : -EPIPE;
		r->got += (size_t)n;
		if (r->got == FRAME_HDR_LEN) {
			/* the limits of the type, before anything is allocated */
			if ((ret = frame_hdr_decode(r->hdr, &r->type, &r->len)) < 0)
				return ret;
			if ((r->payload = malloc((size_t)r->len + 1)) == NULL)
				return -ENOMEM;
		}
		if (r->got >= FRAME_HDR_LEN && r->got - FRAME_HDR_LEN == r->len)
			goto done;
	}
done:
	r->payload[r->len] = '\0';
	f->type = r->type;
	f->version = r->hdr[2];
	f->len = r->len;
	f->payload = r->payload;
	r->payload = NULL;
	r->got = 0;
	return 1;
}

void
frame_rd_free(struct frame_rd *r)
{
	free(r->payload);
	memset(r, 0, sizeof(*r));
}

int
frame_wr_add(struct frame_wr *w, uint16_t type, const void *payload, size_t len)
{
	size_t need;
	uint8_t *nb;

	if (len > frame_max_len(type))
		return -EMSGSIZE;
	if (w->off > 0 && w->off == w->len)
		w->off = w->len = 0;
	need = w->len + FRAME_HDR_LEN + len;
	if (need > w->cap) {
		/* compact first: what was written is gone */
		if (w->off > 0) {
			memmove(w->buf, w->buf + w->off, w->len - w->off);
			w->len -= w->off;
			w->off = 0;
			need = w->len + FRAME_HDR_LEN + len;
		}
		if (need > w->cap) {
			if ((nb = realloc(w->buf, need)) == NULL)
				return -ENOMEM;
			w->buf = nb;
			w->cap = need;
		}
	}
	frame_hdr_encode(w->buf + w->len, type, (uint32_t)len);
	if (len)
		memcpy(w->buf + w->len + FRAME_HDR_LEN, payload, len);
	w->len += FRAME_HDR_LEN + len;
	return 0;
}

int
frame_wr_flush(struct frame_wr *w, int fd)
{
	ssize_t n;

	while (w->off < w->len) {
		n = send(fd, w->buf + w->off, w->len - w->off, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 1;
			return -errno;
		}
		w->off += (size_t)n;
	}
	w->off = w->len = 0;
	return 0;
}

size_t
frame_wr_pending(const struct frame_wr *w)
{
	return w->len - w->off;
}

void
frame_wr_free(struct frame_wr *w)
{
	free(w->buf);
	memset(w, 0, sizeof(*w));
}
