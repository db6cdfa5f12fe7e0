/* The MSG_STREAM payload codec (msg_stream.h) from the sender's side: each
 * kind round-trips; a kind in the wrong direction, an unknown kind, a short
 * or long fixed field, an undefined flag bit, an empty data message, bad
 * event paths and an oversized payload are each refused with a reason; the
 * frame writers split data at the bound and the frame reader takes them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "framepump.h"
#include "msg_stream.h"
#include "proto.h"
#include "tap.h"

static int
dec(const void *b, size_t n, enum stream_dir dir, struct msg_stream *m)
{
	const char *why = NULL;
	int r = msg_stream_decode(b, n, dir, m, &why);

	if (r != 0 && why == NULL)
		return -999;    /* every refusal says why */
	return r;
}

static struct msg_stream m, m2;

static void
roundtrip(void)
{
	uint8_t buf[SPACE_STREAM_PAYLOAD_MAX];
	size_t n;

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_STDOUT;
	m.data = (const uint8_t *)"hello";
	m.len = 5;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "stdout encodes");
	is_int(n, 6, "stdout is kind + bytes");
	is_int(dec(buf, n, STREAM_OUT, &m2), 0, "stdout decodes");
	ok(m2.kind == STREAM_STDOUT && m2.len == 5 && memcmp(m2.data, "hello", 5) == 0,
	    "stdout bytes kept");
	is_int(dec(buf, n, STREAM_IN, &m2), -EINVAL, "stdout refused as input");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_RESIZE;
	m.rows = 40;
	m.cols = 132;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "resize encodes");
	is_int(n, 5, "resize is 5 bytes");
	ok(buf[1] == 0 && buf[2] == 40 && buf[3] == 0 && buf[4] == 132, "resize is big-endian");
	is_int(dec(buf, n, STREAM_IN, &m2), 0, "resize decodes");
	ok(m2.rows == 40 && m2.cols == 132, "resize size kept");
	m.rows = 0;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL, "zero rows not encoded");
	m.rows = SPACE_PTY_DIM_MAX + 1;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL, "too many rows not encoded");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_SIGNAL;
	m.signo = 15;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "signal encodes");
	is_int(dec(buf, n, STREAM_IN, &m2), 0, "signal decodes");
	is_int(m2.signo, 15, "signal number kept");
	m.signo = 0;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL, "signal 0 not encoded");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_EXIT;
	m.exit.signal = 9;
	m.exit.timed_out = true;
	m.exit.oom_killed = true;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "exit encodes");
	is_int(dec(buf, n, STREAM_OUT, &m2), 0, "exit decodes");
	ok(m2.exit.signal == 9 && m2.exit.timed_out && m2.exit.oom_killed &&
	    m2.exit.exit_code == 0, "exit fields kept");
	m.exit.exit_code = 3;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL,
	    "an exit code with a signal not encoded");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_EVENT;
	m.event.type = STREAM_EV_RENAME;
	strcpy(m.event.path, "/home/user/a");
	strcpy(m.event.to, "/home/user/b");
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "rename event encodes");
	is_int(dec(buf, n, STREAM_OUT, &m2), 0, "rename event decodes");
	ok(m2.event.type == STREAM_EV_RENAME && strcmp(m2.event.path, "/home/user/a") == 0 &&
	    strcmp(m2.event.to, "/home/user/b") == 0 && !m2.event.is_dir, "rename paths kept");
	m.event.type = STREAM_EV_CREATE;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL,
	    "a target on a create not encoded");
	m.event.to[0] = '\0';
	m.event.is_dir = true;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "create of a dir encodes");
	is_int(dec(buf, n, STREAM_OUT, &m2), 0, "create decodes");
	ok(m2.event.is_dir && m2.event.to[0] == '\0', "is_dir kept");
	strcpy(m.event.path, "relative");
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), -EINVAL, "relative path not encoded");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_EVENT;
	m.event.type = STREAM_EV_OVERFLOW;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "overflow encodes");
	is_int(n, 7, "overflow is kind, type, flags and two empty lengths");
	is_int(dec(buf, n, STREAM_OUT, &m2), 0, "overflow decodes");
	is_int(m2.event.type, STREAM_EV_OVERFLOW, "overflow type kept");

	memset(&m, 0, sizeof(m));
	m.kind = STREAM_STDIN_EOF;
	is_int(msg_stream_encode(&m, buf, sizeof(buf), &n), 0, "stdin_eof encodes");
	is_int(n, 1, "stdin_eof is one byte");
	is_int(msg_stream_encode(&m, buf, 0, &n), -EMSGSIZE, "no room: -EMSGSIZE");
}

static void
refusals(void)
{
	static uint8_t big[SPACE_STREAM_PAYLOAD_MAX + 1];
	const uint8_t unknown[] = { 0 }, unknown2[] = { STREAM__MAX, 1 };
	const uint8_t empty_data[] = { STREAM_STDIN };
	const uint8_t eof_extra[] = { STREAM_STDIN_EOF, 0 };
	const uint8_t resize_short[] = { STREAM_RESIZE, 0, 24, 0 };
	const uint8_t resize_long[] = { STREAM_RESIZE, 0, 24, 0, 80, 0 };
	const uint8_t resize_zero[] = { STREAM_RESIZE, 0, 0, 0, 80 };
	const uint8_t sig_big[] = { STREAM_SIGNAL, SPACE_SIGNO_MAX + 1 };
	const uint8_t sig_long[] = { STREAM_SIGNAL, 9, 9 };
	const uint8_t exit_flag[] = { STREAM_EXIT, 4, 0, 0 };
	const uint8_t exit_short[] = { STREAM_EXIT, 0, 0 };
	const uint8_t exit_both[] = { STREAM_EXIT, 0, 9, 1 };
	const uint8_t ev_type[] = { STREAM_EVENT, STREAM_EV__MAX, 0, 0, 2, '/', 'a', 0, 0 };
	const uint8_t ev_flag[] = { STREAM_EVENT, STREAM_EV_CREATE, 2, 0, 2, '/', 'a', 0, 0 };
	const uint8_t ev_past[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 9, '/', 'a', 0, 0 };
	const uint8_t ev_trail[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 2, '/', 'a', 0, 0, 'x' };
	const uint8_t ev_nul[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 2, '/', 0, 0, 0 };
	const uint8_t ev_empty[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 0, 0, 0 };
	const uint8_t ev_to[] = { STREAM_EVENT, STREAM_EV_WRITE, 0, 0, 2, '/', 'a', 0, 2, '/', 'b' };
	const uint8_t ev_noto[] = { STREAM_EVENT, STREAM_EV_RENAME, 0, 0, 2, '/', 'a', 0, 0 };
	const uint8_t ev_ovpath[] = { STREAM_EVENT, STREAM_EV_OVERFLOW, 0, 0, 2, '/', 'a', 0, 0 };
	const uint8_t ev_short[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 2 };
	const uint8_t ok_create[] = { STREAM_EVENT, STREAM_EV_CREATE, 0, 0, 2, '/', 'a', 0, 0 };

	is_int(dec(NULL, 0, STREAM_IN, &m2), -EINVAL, "empty payload refused");
	is_int(dec(unknown, sizeof(unknown), STREAM_IN, &m2), -EINVAL, "kind 0 refused");
	is_int(dec(unknown2, sizeof(unknown2), STREAM_OUT, &m2), -EINVAL, "kind past the enum refused");
	is_int(dec(empty_data, sizeof(empty_data), STREAM_IN, &m2), -EINVAL, "empty stdin refused");
	is_int(dec(eof_extra, sizeof(eof_extra), STREAM_IN, &m2), -EINVAL, "bytes after stdin_eof refused");
	is_int(dec(resize_short, sizeof(resize_short), STREAM_IN, &m2), -EINVAL, "short resize refused");
	is_int(dec(resize_long, sizeof(resize_long), STREAM_IN, &m2), -EINVAL, "long resize refused");
	is_int(dec(resize_zero, sizeof(resize_zero), STREAM_IN, &m2), -EINVAL, "zero rows refused");
	is_int(dec(resize_zero, sizeof(resize_zero), STREAM_OUT, &m2), -EINVAL, "resize as output refused");
	is_int(dec(sig_big, sizeof(sig_big), STREAM_IN, &m2), -EINVAL, "signal past the bound refused");
	is_int(dec(sig_long, sizeof(sig_long), STREAM_IN, &m2), -EINVAL, "long signal refused");
	is_int(dec(exit_flag, sizeof(exit_flag), STREAM_OUT, &m2), -EINVAL, "undefined exit flag refused");
	is_int(dec(exit_short, sizeof(exit_short), STREAM_OUT, &m2), -EINVAL, "short exit refused");
	is_int(dec(exit_both, sizeof(exit_both), STREAM_OUT, &m2), -EINVAL, "exit code with a signal refused");
	is_int(dec(exit_flag, sizeof(exit_flag), STREAM_IN, &m2), -EINVAL, "exit as input refused");
	is_int(dec(ev_type, sizeof(ev_type), STREAM_OUT, &m2), -EINVAL, "unknown event type refused");
	is_int(dec(ev_flag, sizeof(ev_flag), STREAM_OUT, &m2), -EINVAL, "undefined event flag refused");
	is_int(dec(ev_past, sizeof(ev_past), STREAM_OUT, &m2), -EINVAL, "path past the end refused");
	is_int(dec(ev_trail, sizeof(ev_trail), STREAM_OUT, &m2), -EINVAL, "bytes after the event refused");
	is_int(dec(ev_nul, sizeof(ev_nul), STREAM_OUT, &m2), -EINVAL, "NUL in a path refused");
	is_int(dec(ev_empty, sizeof(ev_empty), STREAM_OUT, &m2), -EINVAL, "empty path refused");
	is_int(dec(ev_to, sizeof(ev_to), STREAM_OUT, &m2), -EINVAL, "target on a write refused");
	is_int(dec(ev_noto, sizeof(ev_noto), STREAM_OUT, &m2), -EINVAL, "rename without target refused");
	is_int(dec(ev_ovpath, sizeof(ev_ovpath), STREAM_OUT, &m2), -EINVAL, "overflow with a path refused");
	is_int(dec(ev_short, sizeof(ev_short), STREAM_OUT, &m2), -EINVAL, "short event refused");
	is_int(dec(ok_create, sizeof(ok_create), STREAM_OUT, &m2), 0, "the good create decodes");
	is_int(dec(ok_create, sizeof(ok_create), STREAM_IN, &m2), -EINVAL, "an event as input refused");
	memset(big, 'x', sizeof(big));
	big[0] = STREAM_STDIN;
	is_int(dec(big, SPACE_STREAM_PAYLOAD_MAX, STREAM_IN, &m2), 0, "the largest stdin decodes");
	is_int(m2.len, SPACE_STREAM_DATA_MAX, "its data is the data bound");
	is_int(dec(big, sizeof(big), STREAM_IN, &m2), -EINVAL, "one byte over refused");
	ok(stream_kind_dir(STREAM_PTY) == STREAM_OUT && stream_kind_dir(STREAM_SIGNAL) == STREAM_IN &&
	    stream_kind_dir(0) == 0, "directions");
	is_str(stream_kind_str(STREAM_STDIN_EOF), "stdin_eof", "kind names");
	is_str(stream_event_str(STREAM_EV_OVERFLOW), "overflow", "event names");
	ok(frame_max_len(MSG_STREAM) == SPACE_STREAM_PAYLOAD_MAX, "the frame bound is the payload bound");
	is_str(msg_type_str(MSG_STREAM), "STREAM", "the frame type has a name");
}

static void
frames(void)
{
	int sv[2];
	size_t total = SPACE_STREAM_DATA_MAX + 100, got = 0;
	uint8_t *src = malloc(total);
	struct frame f = { 0 };
	int nframes = 0;
	pid_t pid;

	for (size_t i = 0; i < total; i++)
		src[i] = (uint8_t)(i * 7);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
		ok(0, "socketpair");
		return;
	}
	pid = fork();
	if (pid == 0) {
		close(sv[0]);
		memset(&m, 0, sizeof(m));
		m.kind = STREAM_EXIT;
		m.exit.exit_code = 7;
		_exit(frame_write_stream_data(sv[1], STREAM_STDERR, src, total) != 0 ||
		    frame_write_stream(sv[1], &m) != 0);
	}
	close(sv[1]);
	while (frame_read(sv[0], &f) == 0) {
		if (f.type != MSG_STREAM || dec(f.payload, f.len, STREAM_OUT, &m2) != 0) {
			frame_free(&f);
			break;
		}
		nframes++;
		if (m2.kind == STREAM_STDERR && got + m2.len <= total &&
		    memcmp(src + got, m2.data, m2.len) == 0)
			got += m2.len;
		else if (m2.kind == STREAM_EXIT)
			is_int(m2.exit.exit_code, 7, "the exit frame follows the data");
		frame_free(&f);
	}
	is_int(got, total, "data split over frames arrives whole and in order");
	is_int(nframes, 3, "two data frames and the exit");
	close(sv[0]);
	free(src);
}

/* the non-blocking reader (framepump.h) takes a frame however the bytes are cut, never
 * a byte of the next one, and refuses a header over the type's limit
 * before allocating; the queue writes what the socket takes */
static void
nonblocking(void)
{
	struct frame_rd rd = { 0 };
	struct frame_wr q = { 0 };
	struct frame f = { 0 };
	uint8_t wire[64], hdr[FRAME_HDR_LEN];
	const uint8_t pay[] = { STREAM_STDIN, 'a', 'b', 'c' };
	int sv[2], r, got = 0;
	size_t n = 0;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0) {
		ok(0, "socketpair");
		return;
	}
	frame_hdr_encode(wire, MSG_STREAM, sizeof(pay));
	memcpy(wire + FRAME_HDR_LEN, pay, sizeof(pay));
	n = FRAME_HDR_LEN + sizeof(pay);
	frame_hdr_encode(wire + n, MSG_END, 0);
	n += FRAME_HDR_LEN;
	is_int(frame_rd_step(&rd, sv[1], &f), 0, "nothing yet: 0");
	/* one byte at a time */
	for (size_t i = 0; i < n; i++) {
		if (write(sv[0], wire + i, 1) != 1)
			break;
		while ((r = frame_rd_step(&rd, sv[1], &f)) == 1) {
			if (got == 0)
				ok(f.type == MSG_STREAM && f.len == sizeof(pay) &&
				    memcmp(f.payload, pay, sizeof(pay)) == 0 && i == FRAME_HDR_LEN + sizeof(pay) - 1,
				    "the first frame completes at its last byte, not before");
			else
				ok(f.type == MSG_END && f.len == 0 && i == n - 1, "then END");
			got++;
			frame_free(&f);
		}
		if (r < 0)
			break;
	}
	is_int(got, 2, "two frames read byte by byte");
	frame_hdr_encode(hdr, MSG_STREAM, SPACE_STREAM_PAYLOAD_MAX + 1);
	/* frame_hdr_encode does not check the limit: the reader must */
	if (write(sv[0], hdr, sizeof(hdr)) == (ssize_t)sizeof(hdr))
		is_int(frame_rd_step(&rd, sv[1], &f), -EMSGSIZE, "a STREAM header over the limit: -EMSGSIZE");
	frame_rd_free(&rd);
	close(sv[0]);
	is_int(frame_rd_step(&rd, sv[1], &f), -ECONNRESET, "EOF on a boundary: -ECONNRESET");
	close(sv[1]);

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) != 0)
		return;
	is_int(frame_wr_add(&q, MSG_STREAM, pay, sizeof(pay)), 0, "queue a frame");
	is_int(frame_wr_add(&q, MSG_END, NULL, 0), 0, "queue END");
	is_int(frame_wr_pending(&q), 2 * FRAME_HDR_LEN + sizeof(pay), "pending counts both");
	is_int(frame_wr_add(&q, MSG_STREAM, pay, SPACE_STREAM_PAYLOAD_MAX + 1), -EMSGSIZE,
	    "an oversized frame is not queued");
	is_int(frame_wr_flush(&q, sv[0]), 0, "flushed");
	is_int(frame_wr_pending(&q), 0, "nothing pending after the flush");
	is_int(frame_rd_step(&rd, sv[1], &f), 1, "the peer reads it");
	frame_free(&f);
	frame_rd_free(&rd);
	close(sv[1]);
	frame_wr_add(&q, MSG_END, NULL, 0);
	is_int(frame_wr_flush(&q, sv[0]), -EPIPE, "a gone peer: -EPIPE");
	frame_wr_free(&q);
	close(sv[0]);
}

int
main(void)
{
	roundtrip();
	refusals();
	frames();
	nonblocking();
	return done_testing();
}
