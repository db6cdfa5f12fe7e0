/* The MSG_STREAM payload codec (msg_stream.h). The bytes come from a
 * sandbox (the guest runs its code) or from a client: every field is
 * checked against its bound before it is used, and a payload is one exact
 * message (nothing short, nothing left over). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "msg_stream.h"
#include "proto.h"

static const struct {
	const char *name;
	enum stream_dir dir;
} kinds[STREAM__MAX] = {
	[STREAM_STDOUT] = { "stdout", STREAM_OUT },
	[STREAM_STDERR] = { "stderr", STREAM_OUT },
	[STREAM_PTY] = { "pty", STREAM_OUT },
	[STREAM_STDIN] = { "stdin", STREAM_IN },
	[STREAM_STDIN_EOF] = { "stdin_eof", STREAM_IN },
	[STREAM_RESIZE] = { "resize", STREAM_IN },
	[STREAM_SIGNAL] = { "signal", STREAM_IN },
	[STREAM_EXIT] = { "exit", STREAM_OUT },
	[STREAM_EVENT] = { "event", STREAM_OUT },
};

static const char *const events[STREAM_EV__MAX] = {
	[STREAM_EV_CREATE] = "create",
	[STREAM_EV_WRITE] = "write",
	[STREAM_EV_REMOVE] = "remove",
	[STREAM_EV_RENAME] = "rename",
	[STREAM_EV_CHMOD] = "chmod",
	[STREAM_EV_OVERFLOW] = "overflow",
};

enum stream_dir
stream_kind_dir(enum stream_kind k)
{
	if ((int)k <= 0 || k >= STREAM__MAX)
		return 0;
	return kinds[k].dir;
}

const char *
stream_kind_str(enum stream_kind k)
{
	if ((int)k <= 0 || k >= STREAM__MAX)
		return NULL;
	return kinds[k].name;
}

const char *
stream_event_str(enum stream_event e)
{
	if ((int)e <= 0 || e >= STREAM_EV__MAX)
		return NULL;
	return events[e];
}

static bool
is_data(enum stream_kind k)
{
	return k == STREAM_STDOUT || k == STREAM_STDERR || k == STREAM_PTY ||
	    k == STREAM_STDIN;
}

/* a path of an event: absolute, no NUL, bounded (empty only where allowed) */
static bool
path_ok(const uint8_t *p, size_t n)
{
	return n >= 1 && n <= SPACE_PATH_MAX && p[0] == '/' && memchr(p, 0, n) == NULL;
}

#define FAIL(msg) do { if (why) *why = (msg); return -EINVAL; } while (0)

int
msg_stream_decode(const void *buf, size_t len, enum stream_dir dir,
    struct msg_stream *out, const char **why)
{
	const uint8_t *p = buf;
	size_t plen, tlen;
	enum stream_kind k;

	if (why)
		*why = NULL;
	if (out == NULL || (buf == NULL && len != 0))
		FAIL("no payload");
	memset(out, 0, sizeof(*out));
	if (len < 1)
		FAIL("empty stream message");
	if (len > SPACE_STREAM_PAYLOAD_MAX)
		FAIL("stream message too large");
	k = p[0];
	if (stream_kind_dir(k) == 0)
		FAIL("unknown stream message kind");
	if (stream_kind_dir(k) != dir)
		FAIL(dir == STREAM_IN ? "a process output kind sent as input"
		    : "an input kind sent as process output");
	out->kind = k;
	p++;
	len--;
	if (is_data(k)) {
		if (len == 0)
			FAIL("empty data");
		out->data = p;
		out->len = len;
		return 0;
	}
	switch (k) {
	case STREAM_STDIN_EOF:
		if (len != 0)
			FAIL("bytes after stdin_eof");
		return 0;
	case STREAM_RESIZE:
		if (len != 4)
			FAIL("resize is rows and cols, 4 bytes");
		out->rows = (uint16_t)(p[0] << 8 | p[1]);
		out->cols = (uint16_t)(p[2] << 8 | p[3]);
		if (out->rows < 1 || out->rows > SPACE_PTY_DIM_MAX ||
		    out->cols < 1 || out->cols > SPACE_PTY_DIM_MAX)
			FAIL("terminal size out of range");
		return 0;
	case STREAM_SIGNAL:
		if (len != 1)
			FAIL("signal is one byte");
		if (p[0] < 1 || p[0] > SPACE_SIGNO_MAX)
			FAIL("signal number out of range");
		out->signo = p[0];
		return 0;
	case STREAM_EXIT:
		if (len != 3)
			FAIL("exit is flags, signal and exit code, 3 bytes");
		if (p[0] & ~(STREAM_EXIT_TIMED_OUT | STREAM_EXIT_OOM_KILLED))
			FAIL("undefined exit flag");
		if (p[1] > SPACE_SIGNO_MAX)
			FAIL("signal number out of range");
		if (p[1] != 0 && p[2] != 0)
			FAIL("an exit code with a signal");
		out->exit.timed_out = (p[0] & STREAM_EXIT_TIMED_OUT) != 0;
		out->exit.oom_killed = (p[0] & STREAM_EXIT_OOM_KILLED) != 0;
		out->exit.signal = p[1];
		out->exit.exit_code = p[2];
		return 0;
	case STREAM_EVENT:
		if (len < 6)
			FAIL("event too short");
		if (p[0] < 1 || p[0] >= STREAM_EV__MAX)
			FAIL("unknown event type");
		if (p[1] & ~STREAM_EVENT_IS_DIR)
			FAIL("undefined event flag");
		out->event.type = p[0];
		out->event.is_dir = (p[1] & STREAM_EVENT_IS_DIR) != 0;
		plen = (size_t)p[2] << 8 | p[3];
		if (len < 4 + plen + 2)
			FAIL("event path runs past the message");
		tlen = (size_t)p[4 + plen] << 8 | p[4 + plen + 1];
		if (len != 4 + plen + 2 + tlen)
			FAIL("event length does not match its paths");
		if (out->event.type == STREAM_EV_OVERFLOW) {
			if (plen != 0 || tlen != 0 || out->event.is_dir)
				FAIL("an overflow event has no path");
			return 0;
		}
		if (!path_ok(p + 4, plen))
			FAIL("bad event path");
		if (out->event.type == STREAM_EV_RENAME) {
			if (!path_ok(p + 6 + plen, tlen))
				FAIL("bad rename target");
		} else if (tlen != 0)
			FAIL("a target on an event that is not a rename");
		memcpy(out->event.path, p + 4, plen);
		out->event.path[plen] = '\0';
		memcpy(out->event.to, p + 6 + plen, tlen);
		out->event.to[tlen] = '\0';
		return 0;
	default:
		FAIL("unknown stream message kind");
	}
}

#undef FAIL

/* the longest message that is not data: an event with two paths */
#define CTRL_MAX (1 + 4 + 2 * (2 + SPACE_PATH_MAX))

int
msg_stream_encode(const struct msg_stream *m, uint8_t *out, size_t cap,
    size_t *out_len)
{
	size_t n = 0, plen = 0, tlen = 0, need;
	const char *why;
	struct msg_stream *check;
	enum stream_dir dir;
	int r;

	if (m == NULL || out == NULL || out_len == NULL)
		return -EINVAL;
	if ((dir = stream_kind_dir(m->kind)) == 0)
		return -EINVAL;
	if (is_data(m->kind)) {
		if (m->len == 0 || m->len > SPACE_STREAM_DATA_MAX || m->data == NULL)
			return -EINVAL;
		if (1 + m->len > cap)
			return -EMSGSIZE;
		out[0] = (uint8_t)m->kind;
		memmove(out + 1, m->data, m->len);
		*out_len = 1 + m->len;
		return 0;
	}
	switch (m->kind) {
	case STREAM_STDIN_EOF: need = 1; break;
	case STREAM_RESIZE: need = 5; break;
	case STREAM_SIGNAL: need = 2; break;
	case STREAM_EXIT: need = 4; break;
	case STREAM_EVENT:
		plen = strnlen(m->event.path, sizeof(m->event.path));
		tlen = strnlen(m->event.to, sizeof(m->event.to));
		if (plen > SPACE_PATH_MAX || tlen > SPACE_PATH_MAX)
			return -EINVAL;
		need = 1 + 4 + plen + 2 + tlen;
		break;
	default:
		return -EINVAL;
	}
	if (need > cap)
		return -EMSGSIZE;
	out[n++] = (uint8_t)m->kind;
	switch (m->kind) {
	case STREAM_RESIZE:
		out[n++] = (uint8_t)(m->rows >> 8);
		out[n++] = (uint8_t)m->rows;
		out[n++] = (uint8_t)(m->cols >> 8);
		out[n++] = (uint8_t)m->cols;
		break;
	case STREAM_SIGNAL:
		out[n++] = m->signo;
		break;
	case STREAM_EXIT:
		out[n++] = (uint8_t)((m->exit.timed_out ? STREAM_EXIT_TIMED_OUT : 0) |
		    (m->exit.oom_killed ? STREAM_EXIT_OOM_KILLED : 0));
		out[n++] = m->exit.signal;
		out[n++] = m->exit.exit_code;
		break;
	case STREAM_EVENT:
		out[n++] = (uint8_t)m->event.type;
		out[n++] = m->event.is_dir ? STREAM_EVENT_IS_DIR : 0;
		out[n++] = (uint8_t)(plen >> 8);
		out[n++] = (uint8_t)plen;
		memcpy(out + n, m->event.path, plen);
		n += plen;
		out[n++] = (uint8_t)(tlen >> 8);
		out[n++] = (uint8_t)tlen;
		memcpy(out + n, m->event.to, tlen);
		n += tlen;
		break;
	default:
		break;
	}
	/* the encoder refuses what the decoder would: ask the decoder */
	if ((check = malloc(sizeof(*check))) == NULL)
		return -ENOMEM;
	r = msg_stream_decode(out, n, dir, check, &why);
	free(check);
	if (r != 0)
		return -EINVAL;
	*out_len = n;
	return 0;
}

/* header, kind byte and data in one writev, completed on short writes */
static int
write_data_frame(int fd, uint8_t kind, const uint8_t *p, size_t n)
{
	uint8_t hdr[FRAME_HDR_LEN];
	struct iovec iov[3];
	struct iovec *v = iov;
	int cnt = 3;
	ssize_t w;

	frame_hdr_encode(hdr, MSG_STREAM, (uint32_t)(n + 1));
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	iov[1] = (struct iovec){ &kind, 1 };
	iov[2] = (struct iovec){ (void *)(uintptr_t)p, n };
	while (cnt > 0) {
		w = writev(fd, v, cnt);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		while (cnt > 0 && (size_t)w >= v->iov_len) {
			w -= (ssize_t)v->iov_len;
			v++;
			cnt--;
		}
		if (cnt > 0) {
			v->iov_base = (uint8_t *)v->iov_base + w;
			v->iov_len -= (size_t)w;
		}
	}
	return 0;
}

int
frame_write_stream(int fd, const struct msg_stream *m)
{
	uint8_t buf[CTRL_MAX];
	size_t n;
	int r;

	if (m == NULL)
		return -EINVAL;
	if (is_data(m->kind)) {
		if (m->len == 0 || m->len > SPACE_STREAM_DATA_MAX || m->data == NULL)
			return -EINVAL;
		return write_data_frame(fd, (uint8_t)m->kind, m->data, m->len);
	}
	if ((r = msg_stream_encode(m, buf, sizeof(buf), &n)) < 0)
		return r;
	return frame_write(fd, MSG_STREAM, buf, n);
}

int
frame_write_stream_data(int fd, enum stream_kind kind, const void *data, size_t len)
{
	const uint8_t *p = data;
	size_t n;
	int r;

	if (!is_data(kind) || (len > 0 && data == NULL))
		return -EINVAL;
	while (len > 0) {
		n = len > SPACE_STREAM_DATA_MAX ? SPACE_STREAM_DATA_MAX : len;
		if ((r = write_data_frame(fd, (uint8_t)kind, p, n)) < 0)
			return r;
		p += n;
		len -= n;
	}
	return 0;
}
