/* The CLI's WebSocket client (wsc.h). The opening handshake is written
 * here (an HTTP/1.1 GET with the RFC 6455 headers; the answer's head is
 * read whole, at most WSC_HEAD_MAX bytes, and its Sec-WebSocket-Accept
 * checked); everything after it is wslay's. */
#include <errno.h>
#include <netdb.h>
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
#include "wskey.h"

#define WSC_HEAD_MAX    (16u << 10)
#define WSC_BODY_MAX    (64u << 10)
#define WSC_QUEUE_MAX   (256u << 10)
#define WSC_IO_TIMEOUT  30

static void
fail_msg(struct space_answer *a, const char *what, const char *arg)
{
	snprintf(a->message, sizeof(a->message), "%s%s", what, arg ? arg : "");
}

/* http://HOST[:PORT]/PATH -> host, port, path */
static int
split_url(const char *url, char *host, size_t hcap, char *port, size_t pcap, const char **path)
{
	const char *h, *e, *colon;

	if (strncmp(url, "http://", 7) != 0)
		return -EPROTONOSUPPORT;
	h = url + 7;
	if ((e = strchr(h, '/')) == NULL)
		return -EINVAL;
	*path = e;
	colon = memchr(h, ':', (size_t)(e - h));
	if (h[0] == '[') {
		const char *rb = memchr(h, ']', (size_t)(e - h));
		if (rb == NULL)
			return -EINVAL;
		colon = rb[1] == ':' ? rb + 1 : NULL;
		if ((size_t)(rb - h - 1) >= hcap)
			return -EINVAL;
		memcpy(host, h + 1, (size_t)(rb - h - 1));
		host[rb - h - 1] = '\0';
	} else {
		size_t hl = (size_t)((colon ? colon : e) - h);
		if (hl == 0 || hl >= hcap)
			return -EINVAL;
		memcpy(host, h, hl);
		host[hl] = '\0';
	}
	if (colon) {
		if ((size_t)(e - colon - 1) >= pcap || e - colon - 1 == 0)
			return -EINVAL;
		memcpy(port, colon + 1, (size_t)(e - colon - 1));
		port[e - colon - 1] = '\0';
	} else
		snprintf(port, pcap, "80");
	return 0;
}

static int
tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
			break;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd < 0 ? -ECONNREFUSED : fd;
}

/* the value of header name in head (lines after the status line), copied */
static int
head_value(const char *head, const char *name, char *out, size_t cap)
{
	const char *p = strstr(head, "\r\n"), *e;
	size_t nl = strlen(name), vl;

	while (p && p[2] != '\r') {
		p += 2;
		e = strstr(p, "\r\n");
		if (e == NULL)
			return -1;
		if ((size_t)(e - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			vl = (size_t)(e - v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl >= cap)
				return -1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return 0;
		}
		p = e;
	}
	return -1;
}

int
wsc_open(void *ctx, const char *url, const char *bearer, struct space_answer *a)
{
	struct wsc *w = ctx;
	char host[256], port[16], key[WS_KEY_LEN + 1], want[WS_ACCEPT_LEN + 1], v[128];
	char *req = NULL, *buf = NULL, *end;
	const char *path;
	struct timeval tv = { .tv_sec = WSC_IO_TIMEOUT };
	size_t len = 0, hl;
	ssize_t n;
	int fd, r, status;

	space_answer_clear(a);
	wsc_close(w);
	if ((r = split_url(url, host, sizeof(host), port, sizeof(port), &path)) < 0) {
		fail_msg(a, "streams need an http:// endpoint, not ", url);
		a->not_sent = 1;
		return r;
	}
	if ((fd = tcp_connect(host, port)) < 0) {
		fail_msg(a, "cannot connect to ", host);
		a->not_sent = 1;
		return fd;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ws_key_new(key);
	if (asprintf(&req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Protocol: space.v1\r\nAuthorization: Bearer %s\r\n\r\n",
	    path, host, port, key, bearer) < 0) {
		close(fd);
		return -ENOMEM;
	}
	r = fd_write_all(fd, req, strlen(req));
	sodium_memzero(req, strlen(req));
	free(req);
	if (r < 0) {
		fail_msg(a, "sending the request: ", strerror(-r));
		a->not_sent = 1;
		close(fd);
		return -ECONNRESET;
	}
	if ((buf = malloc(WSC_HEAD_MAX + WSC_BODY_MAX + 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	/* the head, whole */
	for (;;) {
		n = recv(fd, buf + len, WSC_HEAD_MAX - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fail_msg(a, "no answer from the endpoint", NULL);
			goto fail;
		}
		len += (size_t)n;
		buf[len] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) != NULL)
			break;
		if (len >= WSC_HEAD_MAX) {
			fail_msg(a, "answer head too large", NULL);
			goto fail;
		}
	}
	hl = (size_t)(end - buf) + 4;
	end[2] = '\0';          /* head_value stops at the blank line */
	if (sscanf(buf, "HTTP/1.%*1d %3d", &status) != 1) {
		fail_msg(a, "not an HTTP answer", NULL);
		goto fail;
	}
	a->status = status;
	head_value(buf, "X-Space-Generation", a->generation, sizeof(a->generation));
	head_value(buf, "X-Space-Worker", a->worker, sizeof(a->worker));
	if (status != 101) {
		/* an HTTP answer: its JSON error body, as any request's */
		size_t cl = 0;
		json_t *o;

		if (head_value(buf, "Content-Length", v, sizeof(v)) == 0)
			cl = strtoul(v, NULL, 10);
		if (cl > WSC_BODY_MAX)
			cl = WSC_BODY_MAX;
		memmove(buf, buf + hl, len - hl);
		len -= hl;
		while (len < cl) {
			n = recv(fd, buf + len, cl - len, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		if ((o = json_loadb(buf, len < cl ? len : cl, 0, NULL)) != NULL) {
			const char *s;
			if ((s = json_string_value(json_object_get(o, "error"))))
				snprintf(a->error, sizeof(a->error), "%s", s);
			if ((s = json_string_value(json_object_get(o, "reason"))))
				snprintf(a->reason, sizeof(a->reason), "%s", s);
			if ((s = json_string_value(json_object_get(o, "message"))))
				snprintf(a->message, sizeof(a->message), "%s", s);
			a->body = o;
		}
		if (a->message[0] == '\0')
			snprintf(a->message, sizeof(a->message), "HTTP %d", status);
		free(buf);
		close(fd);
		return 0;
	}
	/* RFC 6455 4.1: the client checks the server's proof */
	ws_accept_of(key, want);
	if (head_value(buf, "Sec-WebSocket-Accept", v, sizeof(v)) != 0 || strcmp(v, want) != 0) {
		a->status = 0;
		fail_msg(a, "the endpoint did not accept the WebSocket properly", NULL);
		goto fail;
	}
	w->fd = fd;
	w->pre_len = len - hl;
	w->pre_off = 0;
	if (w->pre_len) {
		memmove(buf, buf + hl, w->pre_len);
		w->pre = (uint8_t *)buf;
	} else
		free(buf);
	tv.tv_sec = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
fail:
	free(buf);
	close(fd);
	return -ECONNRESET;
}

void
wsc_close(struct wsc *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->pre);
	w->pre = NULL;
	w->pre_len = w->pre_off = 0;
	json_decref(w->result);
	w->result = NULL;
}

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

	(void)flags;
	do
		n = send(s->w->fd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL);
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
