/* fsplice: frame payloads moved with splice stop exactly at the frame's
 * end, report which side failed, and refuse bad headers before a byte of
 * payload moves. Real sockets, pipes and files; a writer thread plays the
 * sending peer. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fsplice.h"
#include "limits.h"
#include "proto.h"
#include "tap.h"

#define BIG (3u * SPACE_CHUNK + 12345u)

struct feed {
	int fd;
	const uint8_t *buf;
	size_t len;
	bool close_after;
};

static void *
feeder(void *arg)
{
	struct feed *f = arg;
	size_t off = 0;

	while (off < f->len) {
		ssize_t n = write(f->fd, f->buf + off, f->len - off);
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (f->close_after)
		shutdown(f->fd, SHUT_WR);
	return NULL;
}

/* the receiving peer: everything from fd until EOF */
struct sink {
	int fd;
	uint8_t *buf;
	size_t n;
};

static void *
sinker(void *arg)
{
	struct sink *s = arg;
	size_t cap = BIG * 2 + 4096;
	ssize_t k;

	s->buf = malloc(cap);
	s->n = 0;
	while (s->buf && s->n < cap && (k = read(s->fd, s->buf + s->n, cap - s->n)) > 0)
		s->n += (size_t)k;
	return NULL;
}

int
main(void)
{
	uint8_t *payload = malloc(BIG), *wire, *out;
	int a[2], b[2], r;
	struct fsplice sp = FSPLICE_INIT;
	struct feed fd_feed;
	struct sink sk;
	pthread_t t, ts;
	uint16_t type;
	uint32_t len;

	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; i < BIG; i++)
		payload[i] = (uint8_t)(i * 131u + (i >> 9));
	/* a DATA frame, then an END frame: the move must stop between them */
	wire = malloc(BIG + 2 * FRAME_HDR_LEN);
	frame_hdr_encode(wire, MSG_DATA, BIG);
	memcpy(wire + FRAME_HDR_LEN, payload, BIG);
	frame_hdr_encode(wire + FRAME_HDR_LEN + BIG, MSG_END, 0);

	socketpair(AF_UNIX, SOCK_STREAM, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM, 0, b);
	fd_feed = (struct feed){ a[0], wire, BIG + 2 * FRAME_HDR_LEN, true };
	pthread_create(&t, NULL, feeder, &fd_feed);
	sk = (struct sink){ .fd = b[1] };
	pthread_create(&ts, NULL, sinker, &sk);
	r = fsplice_hdr_read(a[1], &type, &len);
	is_int(r, 0, "a good DATA header is read");
	is_int(type, MSG_DATA, "... its type");
	is_int(len, BIG, "... its length");
	r = fsplice_frame(&sp, a[1], b[0], type, len);
	is_int(r, 0, "the frame (header re-encoded, payload spliced) moved");
	r = fsplice_hdr_read(a[1], &type, &len);
	ok(r == 0 && type == MSG_END && len == 0, "the next frame's header is still there, whole");
	is_int(fsplice_hdr_read(a[1], &type, &len), -ECONNRESET, "then EOF at a frame boundary");
	pthread_join(t, NULL);
	shutdown(b[0], SHUT_WR);
	pthread_join(ts, NULL);
	ok(sk.n == BIG + FRAME_HDR_LEN && memcmp(sk.buf + FRAME_HDR_LEN, payload, BIG) == 0,
	    "the destination got the header and exactly the payload, byte for byte");
	free(sk.buf);
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);

	/* bad headers are refused before anything is read past them */
	{
		uint8_t h[FRAME_HDR_LEN];
		socketpair(AF_UNIX, SOCK_STREAM, 0, a);
		frame_hdr_encode(h, MSG_DATA, SPACE_FRAME_MAX);
		h[11]++;        /* one byte over the DATA limit */
		h[10] += (h[11] == 0);
		ok(write(a[0], h, sizeof(h)) == (ssize_t)sizeof(h), "header sent");
		is_int(fsplice_hdr_read(a[1], &type, &len), -EMSGSIZE, "DATA over its limit: -EMSGSIZE");
		frame_hdr_encode(h, MSG_DATA, 10);
		h[0] ^= 1;
		ok(write(a[0], h, sizeof(h)) == (ssize_t)sizeof(h), "header sent");
		is_int(fsplice_hdr_read(a[1], &type, &len), -EPROTO, "a bad magic: -EPROTO");
		ok(write(a[0], h, 5) == 5, "part of a header sent");
		shutdown(a[0], SHUT_WR);
		is_int(fsplice_hdr_read(a[1], &type, &len), -EPROTO, "EOF inside a header: -EPROTO");
		close(a[0]); close(a[1]);
	}

	/* the source ends inside the payload: -EPIPE, the source's fault */
	socketpair(AF_UNIX, SOCK_STREAM, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM, 0, b);
	fd_feed = (struct feed){ a[0], payload, 100000, true };
	pthread_create(&t, NULL, feeder, &fd_feed);
	sk = (struct sink){ .fd = b[1] };
	pthread_create(&ts, NULL, sinker, &sk);
	r = fsplice_move(&sp, a[1], b[0], BIG);
	pthread_join(t, NULL);
	shutdown(b[0], SHUT_WR);
	pthread_join(ts, NULL);
	free(sk.buf);
	ok(r == -EPIPE && !sp.to_failed, "a source cut inside the frame: -EPIPE, not the destination");
	close(a[0]); close(a[1]); close(b[0]); close(b[1]);

	/* the destination is gone: a failure of the destination; what was
	 * left in the pipe must not reach the next move (the file below) */
	socketpair(AF_UNIX, SOCK_STREAM, 0, a);
	socketpair(AF_UNIX, SOCK_STREAM, 0, b);
	close(b[1]);
	fd_feed = (struct feed){ a[0], payload, BIG, true };
	pthread_create(&t, NULL, feeder, &fd_feed);
	r = fsplice_move(&sp, a[1], b[0], BIG);
	ok(r < 0 && sp.to_failed, "a destination that closed: an error, the destination's");
	close(a[1]);
	pthread_join(t, NULL);
	close(a[0]); close(b[0]);

	/* into a file (the guest's fs.write) */
	{
		char tmpl[] = "/tmp/test_fsplice.XXXXXX";
		int f = mkstemp(tmpl);

		unlink(tmpl);
		socketpair(AF_UNIX, SOCK_STREAM, 0, a);
		fd_feed = (struct feed){ a[0], payload, BIG, false };
		pthread_create(&t, NULL, feeder, &fd_feed);
		r = fsplice_move(&sp, a[1], f, BIG);
		pthread_join(t, NULL);
		is_int(r, 0, "socket -> file");
		out = malloc(BIG);
		ok(pread(f, out, BIG, 0) == (ssize_t)BIG && memcmp(out, payload, BIG) == 0,
		    "the file holds the payload");
		free(out);
		close(f);
		close(a[0]); close(a[1]);
	}
	fsplice_free(&sp);
	ok(sp.p[0] == -1 && sp.p[1] == -1, "fsplice_free closes the pipe");
	free(payload);
	free(wire);
	return done_testing();
}
