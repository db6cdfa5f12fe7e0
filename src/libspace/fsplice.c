/* Frame payloads moved with splice (fsplice.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fsplice.h"
#include "limits.h"
#include "proto.h"

int
fsplice_hdr_read(int fd, uint16_t *type, uint32_t *len)
{
	uint8_t hdr[FRAME_HDR_LEN];
	size_t got = 0;

	while (got < sizeof(hdr)) {
		ssize_t n = read(fd, hdr + got, sizeof(hdr) - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return got == 0 ? -ECONNRESET : -EPROTO;
		got += (size_t)n;
	}
	return frame_hdr_decode(hdr, type, len);
}

static int
pipe_make(struct fsplice *s)
{
	int c;

	if (s->p[0] >= 0)
		return 0;
	if (pipe2(s->p, O_CLOEXEC) < 0) {
		s->p[0] = s->p[1] = -1;
		return -errno;
	}
	/* one chunk in flight; the default (16 pages) if the system's
	 * pipe limits refuse it */
	c = fcntl(s->p[1], F_SETPIPE_SZ, (int)SPACE_CHUNK);
	if (c <= 0)
		c = fcntl(s->p[1], F_GETPIPE_SZ);
	s->cap = c > 0 ? (size_t)c : 4096;
	return 0;
}

static int
write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t k = write(fd, p, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* the pipe's bytes written with write(): for a destination splice refuses */
static int
drain_copy(struct fsplice *s, int to, size_t held)
{
	while (held > 0) {
		size_t want = held < SPACE_CHUNK ? held : SPACE_CHUNK;
		ssize_t n = read(s->p[0], s->buf, want);
		int r;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		if ((r = write_all(to, s->buf, (size_t)n)) < 0)
			return r;
		held -= (size_t)n;
	}
	return 0;
}

static void
pipe_drop(struct fsplice *s)
{
	if (s->p[0] >= 0)
		close(s->p[0]);
	if (s->p[1] >= 0)
		close(s->p[1]);
	s->p[0] = s->p[1] = -1;
}

static int move(struct fsplice *s, int from, int to, size_t len);

int
fsplice_move(struct fsplice *s, int from, int to, size_t len)
{
	int r = move(s, from, to, len);

	/* bytes of a failed move may be left in the pipe: never carry
	 * them into another frame */
	if (r < 0)
		pipe_drop(s);
	return r;
}

static int
move(struct fsplice *s, int from, int to, size_t len)
{
	size_t held = 0;
	ssize_t n;
	int r;

	s->to_failed = false;
	if ((r = pipe_make(s)) < 0)
		return r;
	while (len > 0 || held > 0) {
		if (len > 0 && held < s->cap) {
			size_t want = len < s->cap - held ? len : s->cap - held;

			/* never past the frame: the next header is ours to
			 * read. With bytes held, only what the source has at
			 * hand: the held ones go out first otherwise */
			n = splice(from, NULL, s->p[1], NULL, want,
			    SPLICE_F_MOVE | (held > 0 ? SPLICE_F_NONBLOCK : 0));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0 && !(errno == EAGAIN && held > 0))
				return -errno;
			if (n == 0)
				return -EPIPE;
			if (n > 0) {
				len -= (size_t)n;
				held += (size_t)n;
				if (len > 0 && held < s->cap)
					continue;
			}
		}
		if (s->buf != NULL) {
			if ((r = drain_copy(s, to, held)) < 0) {
				s->to_failed = true;
				return r;
			}
			held = 0;
			continue;
		}
		n = splice(s->p[0], NULL, to, NULL, held, SPLICE_F_MOVE);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EINVAL) {
			/* this destination takes no spliced pages */
			if ((s->buf = malloc(SPACE_CHUNK)) == NULL)
				return -ENOMEM;
			continue;
		}
		if (n <= 0) {
			s->to_failed = true;
			return n < 0 ? -errno : -EPIPE;
		}
		held -= (size_t)n;
	}
	return 0;
}

int
fsplice_frame(struct fsplice *s, int from, int to, uint16_t type, uint32_t len)
{
	uint8_t hdr[FRAME_HDR_LEN];
	int r;

	s->to_failed = false;
	frame_hdr_encode(hdr, type, len);
	if ((r = write_all(to, hdr, sizeof(hdr))) < 0) {
		s->to_failed = true;
		return r;
	}
	return fsplice_move(s, from, to, len);
}

int
fsplice_payload_read(int fd, uint16_t type, uint32_t len, struct frame *f)
{
	uint8_t *p;
	size_t got = 0;

	memset(f, 0, sizeof(*f));
	if ((p = malloc((size_t)len + 1)) == NULL)
		return -ENOMEM;
	while (got < len) {
		ssize_t n = read(fd, p + got, len - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			free(p);
			return n < 0 ? -errno : -EPROTO;
		}
		got += (size_t)n;
	}
	p[len] = '\0';
	f->type = type;
	f->version = PROTO_VERSION;
	f->len = len;
	f->payload = p;
	return 0;
}

void
fsplice_free(struct fsplice *s)
{
	pipe_drop(s);
	free(s->buf);
	s->cap = 0;
	s->buf = NULL;
}

void
fsplice_sockbufs(int fd)
{
	int v = (int)SPACE_BULK_SOCKBUF;

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &v, sizeof(v));
}
