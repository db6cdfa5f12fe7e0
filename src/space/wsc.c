/* The CLI's WebSocket client (wsc.h): the session of a stream (output to
 * stdout/stderr, stdin and window sizes to the process) over wslay; the
 * opening handshake is libspace's (wsclient.c). */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <termios.h>
#include <unistd.h>

#include <sodium.h>
#include <wslay/wslay.h>

#include "client.h"
#include "msg_stream.h"
#include "space.h"
#include "util.h"
#include "wsc.h"

#define WSC_QUEUE_MAX   (256u << 10)

/* ---- the session ---- */

struct sess {
	struct wsc *w;
	const struct wsc_io *io;
	const char *verb;
	bool got_first, exited, failed;
	int status;             /* from EXIT */
	uint16_t close_code;
	char close_reason[124];  /* printable, from the close frame */
};

static volatile sig_atomic_t winch;
static void on_winch(int s) { (void)s; winch = 1; }

static ssize_t
c_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct sess *s = user;
	ssize_t n;

	(void)flags;
	if (s->w->pre_off < s->w->pre_len) {
		n = (ssize_t)(s->w->pre_len - s->w->pre_off < len ? s->w->pre_len - s->w->pre_off : len);
		memcpy(buf, s->w->pre + s->w->pre_off, (size_t)n);
		s->w->pre_off += (size_t)n;
		return n;
	}
	do
		n = recv(s->w->fd, buf, len, MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n <= 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static ssize_t
c_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
	struct sess *s = user;
	ssize_t n;

	do      /* a frame's header with MSG_MORE: one segment with its payload */
		n = send(s->w->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL |
		    ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ?
		    WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static int
c_mask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx;
	(void)user;
	randombytes_buf(buf, len);
	return 0;
}

static void
print_event(const struct sess *s, const struct msg_stream *m)
{
	const char *ev = stream_event_str(m->event.type);
	json_t *o;

	if (s->io->events_json) {
		o = json_pack("{s:s,s:s,s:b}", "event", ev ? ev : "?", "path", m->event.path,
		    "is_dir", m->event.is_dir);
		if (o && m->event.type == STREAM_EV_RENAME)
			json_object_set_new(o, "to", json_string(m->event.to));
		if (o)
			json_dumpf(o, stdout, JSON_COMPACT);
		json_decref(o);
		fputc('\n', stdout);
	} else if (m->event.type == STREAM_EV_RENAME)
		printf("%s %s -> %s\n", ev, m->event.path, m->event.to);
	else if (m->event.type == STREAM_EV_OVERFLOW)
		printf("overflow (events were lost)\n");
	else
		printf("%s %s%s\n", ev, m->event.path, m->event.is_dir ? "/" : "");
	fflush(stdout);
}

static void
c_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a, void *user)
{
	struct sess *s = user;
	struct msg_stream m;
	const char *why;

	(void)ctx;
	if (a->opcode == WSLAY_CONNECTION_CLOSE) {
		s->close_code = a->status_code;
		/* the reason follows the two bytes of the code (RFC 6455
		 * section 5.5.1); wslay checked it is UTF-8: kept printable */
		if (a->msg_length > 2) {
			size_t n = a->msg_length - 2, k = 0;
			for (size_t i = 0; i < n && k + 1 < sizeof(s->close_reason); i++)
				if (a->msg[2 + i] >= 0x20 && a->msg[2 + i] < 0x7f)
					s->close_reason[k++] = (char)a->msg[2 + i];
			s->close_reason[k] = '\0';
		}
		return;
	}
	if (!s->got_first) {
		json_t *o;

		s->got_first = true;
		o = a->opcode == WSLAY_TEXT_FRAME ? json_loadb((const char *)a->msg,
		    a->msg_length, 0, NULL) : NULL;
		if (!json_is_object(json_object_get(o, "result"))) {
			json_decref(o);
			cli_fail(s->verb, "the stream did not start with its result");
			s->failed = true;
			wslay_event_queue_close(ctx, 1002, NULL, 0);
			return;
		}
		s->w->result = json_incref(json_object_get(o, "result"));
		json_decref(o);
		if (s->io->on_result)
			s->io->on_result(s->w->result, s->io->arg);
		return;
	}
	if (a->opcode != WSLAY_BINARY_FRAME)
		return;
	if (msg_stream_decode(a->msg, a->msg_length, STREAM_OUT, &m, &why) != 0) {
		cli_fail(s->verb, "a stream message: %s", why);
		s->failed = true;
		wslay_event_queue_close(ctx, 1007, NULL, 0);
		return;
	}
	switch (m.kind) {
	case STREAM_STDOUT: case STREAM_PTY:
		fd_write_all(STDOUT_FILENO, m.data, m.len);
		break;
	case STREAM_STDERR:
		fd_write_all(STDERR_FILENO, m.data, m.len);
		break;
	case STREAM_EXIT:
		s->exited = true;
		if (m.exit.timed_out)
			s->status = 124;
		else if (m.exit.signal)
			s->status = 128 + (m.exit.signal & 0x7f);
		else
			s->status = m.exit.exit_code;
		break;
	case STREAM_EVENT:
		print_event(s, &m);
		break;
	default:
		break;
	}
}

static int
send_stream(wslay_event_context_ptr ctx, const struct msg_stream *m)
{
	uint8_t buf[SPACE_STREAM_PAYLOAD_MAX];
	struct wslay_event_msg msg;
	size_t n;

	if (msg_stream_encode(m, buf, sizeof(buf), &n) != 0)
		return -1;
	msg = (struct wslay_event_msg){ WSLAY_BINARY_FRAME, buf, n };
	return wslay_event_queue_msg(ctx, &msg) == 0 ? 0 : -1;
}

static void
send_size(wslay_event_context_ptr ctx)
{
	struct winsize ws;
	struct msg_stream m = { .kind = STREAM_RESIZE };

	if (ioctl(STDIN_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0 || ws.ws_col == 0)
		return;
	m.rows = ws.ws_row;
	m.cols = ws.ws_col;
	send_stream(ctx, &m);
}

int
wsc_run(struct wsc *w, const struct wsc_io *io, const char *verb)
{
	static const struct wslay_event_callbacks cb = {
		.recv_callback = c_recv, .send_callback = c_send, .genmask_callback = c_mask,
		.on_msg_recv_callback = c_msg,
	};
	struct sess s = { .w = w, .io = io, .verb = verb };
	wslay_event_context_ptr ctx;
	struct sigaction sa = { .sa_handler = on_winch }, old;
	struct pollfd pf[2];
	bool in_open = io->forward_stdin;
	uint8_t buf[16384];
	ssize_t n;
	int ret;

	if (wslay_event_context_client_init(&ctx, &cb, &s) != 0)
		return cli_fail(verb, "out of memory");
	wslay_event_config_set_max_recv_msg_length(ctx, 2 * SPACE_STREAM_PAYLOAD_MAX);
	if (io->tty) {
		sigemptyset(&sa.sa_mask);
		sigaction(SIGWINCH, &sa, &old);
		send_size(ctx);
	}
	while (wslay_event_want_read(ctx) || wslay_event_want_write(ctx)) {
		if (winch) {
			winch = 0;
			send_size(ctx);
		}
		pf[0] = (struct pollfd){ .fd = w->fd };
		if (wslay_event_want_read(ctx))
			pf[0].events |= POLLIN;
		if (wslay_event_want_write(ctx))
			pf[0].events |= POLLOUT;
		/* stdin only while the queue towards the endpoint is short */
		pf[1] = (struct pollfd){ .fd = in_open && !wslay_event_get_close_sent(ctx) &&
		    wslay_event_get_queued_msg_length(ctx) < WSC_QUEUE_MAX ? STDIN_FILENO : -1,
		    .events = POLLIN };
		/* bytes left from the handshake are read before waiting */
		if (w->pre_off < w->pre_len) {
			if (wslay_event_recv(ctx) != 0)
				break;
			continue;
		}
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (pf[1].revents) {
			n = read(STDIN_FILENO, buf, sizeof(buf));
			if (n > 0) {
				struct msg_stream m = { .kind = STREAM_STDIN, .data = buf,
				    .len = (size_t)n };
				send_stream(ctx, &m);
			} else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
				struct msg_stream m = { .kind = STREAM_STDIN_EOF };
				send_stream(ctx, &m);
				in_open = false;
			}
		}
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && wslay_event_recv(ctx) != 0)
			break;
		if (wslay_event_want_write(ctx) && wslay_event_send(ctx) != 0)
			break;
	}
	if (io->tty)
		sigaction(SIGWINCH, &old, NULL);
	wslay_event_context_free(ctx);
	if (s.failed)
		return 1;
	if (s.close_code == 4409) {
		fprintf(stderr, "space: %s: the sandbox's execution was replaced (moved, paused or "
		    "restarted); this stream ended with it\n", verb);
		return WSC_EXIT_REPLACED;
	}
	if (s.exited)
		return s.status;
	if (s.close_code == 1000 && s.got_first)
		return 0;
	ret = cli_fail(verb, "the stream ended (close %u%s%s)", (unsigned)s.close_code,
	    s.close_reason[0] ? ": " : "", s.close_reason);
	return ret;
}

int
wsc_stream(struct space_client *c, const char *verb, const char *sbx,
    const char *access, bool start, const char *path, const struct wsc_io *io)
{
	struct wsc w = { .fd = -1 };
	struct space_data_op op;
	struct space_answer a;
	int ret;

	space_answer_init(&a);
	memset(&op, 0, sizeof(op));
	op.access = access;
	/* the method only decides whether a transport failure after sending
	 * may be retried: a start may not (it could run twice) */
	op.method = start ? "POST" : "GET";
	op.path = path;
	op.in_fd = op.out_fd = -1;
	op.open_ws = wsc_open;
	op.ws_ctx = &w;
	if (space_sbx_op(c, sbx, &op, &a) < 0 || a.status != 101) {
		if (io->fallback_ok && (a.status == 404 ||
		    (a.status == 400 && strcmp(a.message, "op not served here") == 0))) {
			ret = WSC_NOT_SERVED;
			goto out;
		}
		ret = cli_answer_fail(verb, &a);
		goto out;
	}
	ret = wsc_run(&w, io, verb);
out:
	wsc_close(&w);
	space_answer_clear(&a);
	return ret;
}
