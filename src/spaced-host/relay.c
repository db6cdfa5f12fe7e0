/* The bridge's half of a stream (docs/protocol.md "Streams"): after the
 * RESPONSE of a streaming operation, STREAM frames both ways between
 * sbx-manager and the guest, each checked by the one codec before it is
 * passed on.
 *
 * Bounded: a frame is read from one side only when the queue towards the
 * other side is empty, so a stream holds at most one frame per direction
 * here, and a slow reader at either end stops the reads at this hop (and
 * so, through the socket buffers, the writer behind it).
 *
 * The lease: this process serves exactly one execution {sandbox,
 * generation, activation} (host.h); its streams end with it. When the
 * execution is replaced or stopped the guest's sockets close and the
 * serving process exits, so no byte of another execution can ever be
 * relayed on these connections. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "framepump.h"
#include "host.h"
#include "log.h"
#include "msg.h"
#include "msg_stream.h"
#include "proto.h"
#include "util.h"

#define FINAL_FLUSH_MS 2000     /* an ending stream's last frames get this long */

struct side {
	int fd;
	struct frame_rd rd;
	struct frame_wr q;               /* towards this side */
	bool eof;
};

static void
q_error(struct side *s, int status, const char *code, const char *message)
{
	struct msg_error m = { .status = status, .has_message = true };
	char *out;
	size_t n;

	snprintf(m.error, sizeof(m.error), "%s", code);
	snprintf(m.message, sizeof(m.message), "%s", message);
	if (msg_error_encode(&m, &out, &n) == 0) {
		frame_wr_add(&s->q, MSG_ERROR, out, n);
		free(out);
	}
}

static bool
out_kind_ok(enum op_kind op, enum stream_kind k)
{
	if (op == OP_FS_WATCH)
		return k == STREAM_EVENT;
	return k == STREAM_STDOUT || k == STREAM_STDERR || k == STREAM_PTY || k == STREAM_EXIT;
}

/* a frame from the guest; false ends the stream (after what is queued) */
static bool
from_guest(struct host *h, enum op_kind op, struct side *c, const struct frame *f,
    bool *exited, uint64_t oom_before)
{
	struct msg_stream m;
	const char *why;

	switch (f->type) {
	case MSG_STREAM:
		if (msg_stream_decode(f->payload, f->len, STREAM_OUT, &m, &why) != 0 ||
		    !out_kind_ok(op, m.kind) || *exited) {
			q_error(c, 500, "internal", "bad stream from the guest");
			return false;
		}
		if (m.kind == STREAM_EXIT) {
			uint64_t after;
			uint8_t buf[16];
			size_t n;

			*exited = true;
			/* the kernel's OOM killer sends SIGKILL; the count is
			 * the monitor's (it holds the cgroup) */
			if (m.exit.signal == 9 && host_oom_kills(h, &after) == 0 &&
			    after > oom_before) {
				m.exit.oom_killed = true;
				if (msg_stream_encode(&m, buf, sizeof(buf), &n) == 0) {
					frame_wr_add(&c->q, MSG_STREAM, buf, n);
					return true;
				}
			}
		}
		/* the codec has one encoding per message: the bytes it
		 * accepted are what it would write */
		frame_wr_add(&c->q, MSG_STREAM, f->payload, f->len);
		return true;
	case MSG_END:
		frame_wr_add(&c->q, MSG_END, NULL, 0);
		return false;
	case MSG_ERROR: {
		struct msg_error e;
		char *s;
		size_t n;

		if (msg_error_decode(f->payload, f->len, false, &e, &why) == 0 &&
		    msg_error_encode(&e, &s, &n) == 0) {
			frame_wr_add(&c->q, MSG_ERROR, s, n);
			free(s);
		} else
			q_error(c, 500, "internal", "malformed error from the guest");
		return false;
	}
	default:
		q_error(c, 500, "internal", "unexpected frame from the guest");
		return false;
	}
}

/* a frame from the client; false stops reading the client */
static bool
from_client(enum op_kind op, struct side *c, struct side *g, const struct frame *f,
    bool *fatal)
{
	struct msg_stream m;
	const char *why;

	switch (f->type) {
	case MSG_STREAM:
		if (msg_stream_decode(f->payload, f->len, STREAM_IN, &m, &why) != 0) {
			q_error(c, 400, "bad_request", why);
			*fatal = true;
			return false;
		}
		if (op == OP_FS_WATCH) {
			q_error(c, 400, "bad_request", "a watch takes no input but END");
			*fatal = true;
			return false;
		}
		frame_wr_add(&g->q, MSG_STREAM, f->payload, f->len);
		return true;
	case MSG_END:
		/* the client detaches: the guest answers END */
		frame_wr_add(&g->q, MSG_END, NULL, 0);
		return false;
	default:
		q_error(c, 400, "bad_request", "expected STREAM or END");
		*fatal = true;
		return false;
	}
}

static void
final_flush(struct side *c)
{
	uint64_t until = now_mono_ns() + (uint64_t)FINAL_FLUSH_MS * 1000000u;

	while (frame_wr_pending(&c->q) > 0 && now_mono_ns() < until) {
		struct pollfd p = { c->fd, POLLOUT, 0 };

		if (poll(&p, 1, 100) < 0 && errno != EINTR)
			break;
		if (frame_wr_flush(&c->q, c->fd) < 0)
			break;
	}
}

int
bridge_relay_stream(struct host *h, int client, int guest, enum op_kind op)
{
	struct side c = { .fd = client }, g = { .fd = guest };
	bool reading_client = true, reading_guest = true, exited = false, fatal = false;
	uint64_t oom_before = 0;
	int r = 0;

	if (op != OP_FS_WATCH)
		host_oom_kills(h, &oom_before);
	fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK);
	fcntl(guest, F_SETFL, fcntl(guest, F_GETFL) | O_NONBLOCK);
	for (;;) {
		struct pollfd p[2];
		struct frame f = { 0 };

		if (!reading_guest && !reading_client && frame_wr_pending(&g.q) == 0)
			break;
		if (!reading_guest && frame_wr_pending(&c.q) == 0 && frame_wr_pending(&g.q) == 0)
			break;
		p[0] = (struct pollfd){ client, 0, 0 };
		p[1] = (struct pollfd){ guest, 0, 0 };
		/* read a side only when what it sends has room on the other */
		if (reading_client && frame_wr_pending(&g.q) == 0)
			p[0].events |= POLLIN;
		if (frame_wr_pending(&c.q) > 0)
			p[0].events |= POLLOUT;
		if (reading_guest && frame_wr_pending(&c.q) == 0)
			p[1].events |= POLLIN;
		if (frame_wr_pending(&g.q) > 0)
			p[1].events |= POLLOUT;
		/* a hung-up side we are not reading would wake poll at once,
		 * again and again: leave it out until it can be read */
		if (p[0].events == 0)
			p[0].fd = -1;
		if (p[1].events == 0)
			p[1].fd = -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if ((p[0].revents & POLLOUT) && frame_wr_flush(&c.q, client) < 0) {
			r = -EPIPE;     /* the client is gone: the guest sees its socket close */
			break;
		}
		if ((p[1].revents & POLLOUT) && (r = frame_wr_flush(&g.q, guest)) < 0) {
			frame_wr_free(&g.q);
			if (reading_guest) {
				/* what the guest said before it closed is read below */
				reading_client = false;
			}
			r = 0;
		}
		if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) && reading_guest &&
		    frame_wr_pending(&c.q) == 0) {
			r = frame_rd_step(&g.rd, guest, &f);
			if (r == 1) {
				if (!from_guest(h, op, &c, &f, &exited, oom_before))
					reading_guest = reading_client = false;
				frame_free(&f);
			} else if (r < 0) {
				/* no END: the execution ended or the guest broke */
				q_error(&c, 503, "unavailable", host_guest_gone(h) ?
				    "the execution ended" : "the guest dropped the stream");
				reading_guest = reading_client = false;
			}
			r = 0;
		}
		if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && reading_client &&
		    frame_wr_pending(&g.q) == 0) {
			r = frame_rd_step(&c.rd, client, &f);
			if (r == 1) {
				if (!from_client(op, &c, &g, &f, &fatal))
					reading_client = false;
				frame_free(&f);
				if (fatal)
					reading_guest = false;
			} else if (r == -EPROTO || r == -EMSGSIZE) {
				q_error(&c, 400, "bad_request", r == -EMSGSIZE ?
				    "frame too large" : "bad frame");
				reading_client = reading_guest = false;
				r = 0;
			} else if (r < 0) {
				r = -ECONNRESET;        /* the client left: detach */
				break;
			}
			if (r > 0)
				r = 0;
		}
	}
	if (r == 0)
		final_flush(&c);
	frame_wr_free(&c.q);
	frame_wr_free(&g.q);
	frame_rd_free(&c.rd);
	frame_rd_free(&g.rd);
	return r;
}
