/* WebSocket streams of node-api (docs/protocol.md section 2, "Streams").
 *
 * The opening handshake is an ordinary request of http.c: route, bearer,
 * sandbox id, then the streaming operation goes to sbx-manager, and its
 * first answer decides. A refusal (409 refresh_route, 403 deny, 401
 * capability_expired, 404 ...) is an HTTP answer before any upgrade, so a
 * client repairs its route as for any request. A RESPONSE turns the
 * connection into a WebSocket (101, libmicrohttpd's upgrade) and this file
 * takes the socket and the sbx-manager connection over, in a thread of its
 * own.
 *
 * Framing is wslay's (RFC 6455: masking, fragments, control frames, close
 * handshake, UTF-8 of close reasons); this file only maps messages:
 *   - first, one text message: {"result":{...}} of the RESPONSE;
 *   - server to client: each MSG_STREAM payload as one binary message
 *     (the same bytes the guest wrote), or as the JSON text of
 *     stream_json.h when the client chose subprotocol space.v1.json;
 *   - client to server: a binary message is one MSG_STREAM payload of the
 *     "in" direction, checked by msg_stream_decode; a text message is the
 *     JSON form (stream_json.h). Either reaches sbx-manager as the same
 *     MSG_STREAM bytes.
 * Close codes: 1000 when the stream ended (a process exited, a watch
 * ended), 1002 for a protocol error (wslay), 1007 for a message that does
 * not decode, 1009 for one over SPACE_STREAM_PAYLOAD_MAX (wslay), 4400 for
 * a well-formed message that has no place on this stream (an "out" kind
 * from the client), 4409 when the backend cancelled the stream's lease
 * (its execution was replaced: move, pause, retire), 1011 when the backend
 * went away otherwise.
 *
 * Memory per stream is bounded: sbx-manager is read only while wslay's
 * send queue holds less than WS_QUEUE_MAX bytes, and the client is read
 * only while nothing is waiting to go to sbx-manager (what one read of
 * wslay's 4 KiB buffer holds at most, bounded by WS_TO_MGR_MAX) and
 * while that queue holds less than WS_QUEUE_MAX bytes and WS_QUEUE_MSGS
 * messages (wslay answers each ping with a pong it queues: a client that
 * pings and never reads would grow it without end). */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <wslay/wslay.h>

#include "framepump.h"
#include "log.h"
#include "msg.h"
#include "msg_stream.h"
#include "node-api.h"
#include "proto.h"
#include "stream_json.h"

#define WS_QUEUE_MAX    (256u << 10)    /* bytes queued towards the client */
#define WS_QUEUE_MSGS   1024u           /* messages queued towards it (pongs) */
#define WS_TO_MGR_MAX   (SPACE_STREAM_PAYLOAD_MAX + (64u << 10))
#define WS_CLOSE_WAIT_MS 5000           /* for the client's close after ours */
#define WS_LINGER_MS    2000            /* draining the client after our FIN */
#define WS_LINGER_MAX   (4u * SPACE_STREAM_PAYLOAD_MAX)

struct ws_stream {
	int sfd, mfd;
	struct MHD_UpgradeResponseHandle *urh;
	wslay_event_context_ptr ctx;
	struct frame_rd mrd;
	struct frame_wr mwr;
	bool json_out;          /* subprotocol space.v1.json */
	bool mgr_done;          /* no more from sbx-manager */
	bool saw_exit;          /* the process's EXIT went by: an EOF is the end */
	bool mgr_wdead;         /* sbx-manager stopped reading: input is dropped */
	int sock_err;           /* the client's connection failed with it (errno) */
	char *first;            /* the first text message */
	uint8_t *extra;         /* bytes the client sent after its head */
	size_t extra_len, extra_off;
};

struct ws_stream *
ws_new(int mfd, const json_t *result, bool json_out)
{
	struct ws_stream *ws = calloc(1, sizeof(*ws));
	json_t *o;

	if (ws == NULL)
		return NULL;
	o = json_pack("{s:O}", "result", (json_t *)result);
	ws->first = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (ws->first == NULL) {
		free(ws);
		return NULL;
	}
	ws->sfd = -1;
	ws->mfd = mfd;
	ws->json_out = json_out;
	return ws;
}

void
ws_free(struct ws_stream *ws)
{
	if (ws == NULL)
		return;
	if (ws->ctx)
		wslay_event_context_free(ws->ctx);
	if (ws->mfd >= 0)
		close(ws->mfd);
	frame_rd_free(&ws->mrd);
	frame_wr_free(&ws->mwr);
	free(ws->first);
	free(ws->extra);
	free(ws);
}

/* the client's queue, what wslay has to send it, is as full as it may be */
static bool
client_queue_full(wslay_event_context_ptr ctx)
{
	return wslay_event_get_queued_msg_length(ctx) >= WS_QUEUE_MAX ||
	    wslay_event_get_queued_msg_count(ctx) >= WS_QUEUE_MSGS;
}

static ssize_t
recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct ws_stream *ws = user;
	ssize_t n;

	(void)flags;
	/* flow control: nothing more from the client while what it sent
	 * before has not gone on to sbx-manager, nor while what we have to
	 * send it (its pongs, too) waits for it to read */
	if (frame_wr_pending(&ws->mwr) > 0 || client_queue_full(ctx)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (ws->extra_off < ws->extra_len) {
		n = (ssize_t)(ws->extra_len - ws->extra_off < len ? ws->extra_len - ws->extra_off : len);
		memcpy(buf, ws->extra + ws->extra_off, (size_t)n);
		ws->extra_off += (size_t)n;
		return n;
	}
	for (;;) {
		n = recv(ws->sfd, buf, len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			ws->sock_err = errno;
		wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ?
		    WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	if (n == 0) {
		wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static ssize_t
send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
	struct ws_stream *ws = user;
	ssize_t n;

	for (;;) {
		/* a frame's header is sent with MSG_MORE, so that it leaves in
		 * one segment with its payload */
		n = send(ws->sfd, data, len, MSG_DONTWAIT | MSG_NOSIGNAL |
		    ((flags & WSLAY_MSG_MORE) ? MSG_MORE : 0));
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	if (n < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			ws->sock_err = errno;
		wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ?
		    WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
		return -1;
	}
	return n;
}

static void
ws_close(struct ws_stream *ws, uint16_t code, const char *reason)
{
	if (!wslay_event_get_close_sent(ws->ctx))
		wslay_event_queue_close(ws->ctx, code, (const uint8_t *)reason, strlen(reason));
	wslay_event_shutdown_read(ws->ctx);
	metrics_stream_close(code);
}

/* one message of the client */
static void
msg_cb(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *a, void *user)
{
	struct ws_stream *ws = user;
	uint8_t buf[SPACE_STREAM_PAYLOAD_MAX];
	struct msg_stream m;
	const uint8_t *p;
	const char *why;
	size_t n;

	(void)ctx;
	if (a->opcode == WSLAY_CONNECTION_CLOSE) {
		/* wslay answers the close; the process runs on */
		metrics_stream_close(a->status_code ? a->status_code : 1005);
		return;
	}
	if (a->opcode == WSLAY_TEXT_FRAME) {
		if (stream_json_to_payload((const char *)a->msg, a->msg_length, buf, sizeof(buf),
		    &n, &why) != 0) {
			ws_close(ws, 1007, why);
			return;
		}
		p = buf;
	} else if (a->opcode == WSLAY_BINARY_FRAME) {
		if (a->msg_length > SPACE_STREAM_PAYLOAD_MAX) {
			ws_close(ws, 1009, "message too big");
			return;
		}
		p = a->msg;
		n = a->msg_length;
	} else
		return;         /* ping, pong: wslay's */
	if (msg_stream_decode(p, n, STREAM_IN, &m, &why) != 0) {
		/* a kind that travels the other way is well-formed but has no
		 * place here: 4400; anything else does not decode: 1007 */
		if (n > 0 && stream_kind_dir((enum stream_kind)p[0]) == STREAM_OUT)
			ws_close(ws, 4400, "not a message a client sends");
		else
			ws_close(ws, 1007, why);
		return;
	}
	if (ws->mgr_wdead)
		return;         /* nobody to give it to; the reading side decides the close */
	if (frame_wr_pending(&ws->mwr) + FRAME_HDR_LEN + n > WS_TO_MGR_MAX ||
	    frame_wr_add(&ws->mwr, MSG_STREAM, p, n) != 0)
		ws_close(ws, 1008, "too much input at once");
}

/* one frame of sbx-manager */
static void
mgr_frame(struct ws_stream *ws, const struct frame *f)
{
	struct wslay_event_msg msg;
	struct msg_stream m;
	const char *why;
	char *t = NULL;

	switch (f->type) {
	case MSG_STREAM:
		if (msg_stream_decode(f->payload, f->len, STREAM_OUT, &m, &why) != 0) {
			log_warnx("ws: a stream message from the backend: %s", why);
			ws->mgr_done = true;
			ws_close(ws, 1011, "bad message from the backend");
			return;
		}
		if (m.kind == STREAM_EXIT)
			ws->saw_exit = true;
		if (ws->json_out) {
			if ((t = stream_json_of(&m)) == NULL) {
				ws->mgr_done = true;
				ws_close(ws, 1011, "out of memory");
				return;
			}
			msg = (struct wslay_event_msg){ WSLAY_TEXT_FRAME, (const uint8_t *)t, strlen(t) };
		} else
			msg = (struct wslay_event_msg){ WSLAY_BINARY_FRAME, f->payload, f->len };
		/* wslay copies the message */
		if (wslay_event_queue_msg(ws->ctx, &msg) != 0) {
			ws->mgr_done = true;
			ws_close(ws, 1011, "cannot queue");
		}
		free(t);
		return;
	case MSG_CANCEL:
		/* the lease was cancelled: the execution was replaced */
		ws->mgr_done = true;
		ws_close(ws, 4409, "execution_replaced");
		return;
	case MSG_END:
		ws->mgr_done = true;
		ws_close(ws, 1000, "end");
		return;
	case MSG_ERROR: {
		struct msg_error e;

		ws->mgr_done = true;
		/* the guest refused a message of the client (400, or 409
		 * not_a_tty: 4400), or another client attached to the process
		 * (409 attached_elsewhere: 4410); the process runs on */
		if (msg_error_decode(f->payload, f->len, true, &e, &why) != 0)
			ws_close(ws, 1011, "backend error");
		else if (strcmp(e.error, "attached_elsewhere") == 0 ||
		    strcmp(e.reason, "attached_elsewhere") == 0)
			ws_close(ws, 4410, "attached_elsewhere");
		else if (e.status == 400 || e.status == 409)
			ws_close(ws, 4400, e.reason[0] ? e.reason : e.error);
		else
			ws_close(ws, 1011, e.error);
		return;
	}
	default:
		ws->mgr_done = true;
		ws_close(ws, 1011, "unexpected frame from the backend");
		return;
	}
}

/* A write to sbx-manager failed: it closed its side, maybe right after
 * the process's EXIT and END (a client's STDIN_EOF can cross them). What
 * it sent before closing is still to be read, and that decides the close
 * code (1000 after an EXIT, 1011 otherwise); what the client sends from
 * now on is dropped. */
static void
mgr_write_failed(struct ws_stream *ws)
{
	ws->mgr_wdead = true;
	ws->mwr.len = ws->mwr.off = 0;
}

/* The last frames we sent (the close with its code, a process's EXIT
 * before it) may still be in the socket's send queue or in flight. A TCP
 * socket closed with unread bytes in its receive queue answers with a
 * reset at once, and a reset can overtake them: the client then sees
 * "connection reset" instead of 1009, or a stream without its exit status.
 * So the close is a lingering one: FIN after everything we sent, then what
 * the client still sends (the rest of a refused message, input that
 * crossed our close) is read and dropped until it closes its side, for a
 * bounded time and count of bytes. */
static void
ws_linger(int fd)
{
	uint8_t buf[16384];
	struct pollfd pf = { .fd = fd, .events = POLLIN };
	struct timespec t0, now;
	size_t dropped = 0;
	ssize_t n;
	long left;

	if (shutdown(fd, SHUT_WR) < 0)
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (dropped < WS_LINGER_MAX) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		left = WS_LINGER_MS - ((now.tv_sec - t0.tv_sec) * 1000 +
		    (now.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			break;
		n = poll(&pf, 1, (int)left);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n <= 0)
			break;
		dropped += (size_t)n;
	}
}

static void *
ws_thread(void *arg)
{
	struct ws_stream *ws = arg;
	struct pollfd pf[2];
	struct frame f;
	int r, timeout;
	bool closing;

	for (;;) {
		closing = wslay_event_get_close_sent(ws->ctx);
		if (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx))
			break;
		pf[0] = (struct pollfd){ .fd = ws->sfd };
		if (wslay_event_want_read(ws->ctx) && frame_wr_pending(&ws->mwr) == 0 &&
		    !client_queue_full(ws->ctx))
			pf[0].events |= POLLIN;
		if (wslay_event_want_write(ws->ctx))
			pf[0].events |= POLLOUT;
		pf[1] = (struct pollfd){ .fd = ws->mgr_done ? -1 : ws->mfd };
		if (!closing && wslay_event_get_queued_msg_length(ws->ctx) < WS_QUEUE_MAX)
			pf[1].events |= POLLIN;
		if (frame_wr_pending(&ws->mwr))
			pf[1].events |= POLLOUT;
		/* sbx-manager's side asked for nothing now: not polled, or its
		 * hang-up (always reported) would return at once, every time */
		if (pf[1].events == 0)
			pf[1].fd = -1;
		timeout = closing ? WS_CLOSE_WAIT_MS : -1;
		r = poll(pf, 2, timeout);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;          /* the client never finished the close */
		/* the client's connection is gone while we were not reading it
		 * (what it sent waits for sbx-manager): nothing more can reach
		 * it, and its hang-up would wake this loop at once forever */
		if ((pf[0].revents & (POLLHUP | POLLERR)) && !(pf[0].events & POLLIN))
			break;
		if (pf[1].revents & POLLOUT) {
			if (frame_wr_flush(&ws->mwr, ws->mfd) < 0)
				mgr_write_failed(ws);
		}
		if ((pf[1].revents & (POLLIN | POLLHUP | POLLERR)) && (pf[1].events & POLLIN)) {
			memset(&f, 0, sizeof(f));
			r = frame_rd_step(&ws->mrd, ws->mfd, &f);
			if (r == 1) {
				mgr_frame(ws, &f);
				frame_free(&f);
			} else if (r < 0) {
				ws->mgr_done = true;
				if (r == -ECONNRESET && ws->saw_exit)
					ws_close(ws, 1000, "end");
				else
					ws_close(ws, 1011, "backend gone");
			}
		}
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && (pf[0].events & POLLIN)) {
			if (wslay_event_recv(ws->ctx) != 0)
				break;
		}
		if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0)
			break;
		/* what the client sent may be ready for sbx-manager now */
		if (frame_wr_pending(&ws->mwr) && !ws->mgr_done &&
		    frame_wr_flush(&ws->mwr, ws->mfd) < 0)
			mgr_write_failed(ws);
	}
	/* a client that vanished (its host, the link): the keepalive
	 * probes went unanswered (http.c, tcp_keepalive) */
	if (ws->sock_err == ETIMEDOUT)
		log_info("ws: the client's connection timed out: stream closed, its place freed");
	/* the process (if any) runs on: closing our side of sbx-manager
	 * only ends this stream's relay */
	ws_linger(ws->sfd);
	MHD_upgrade_action(ws->urh, MHD_UPGRADE_ACTION_CLOSE);
	metrics_stream_open(-1);
	ws_free(ws);
	return NULL;
}

int
ws_start(struct ws_stream *ws, int sock, struct MHD_UpgradeResponseHandle *urh,
    const char *extra, size_t extra_len)
{
	static const struct wslay_event_callbacks cb = {
		.recv_callback = recv_cb,
		.send_callback = send_cb,
		.on_msg_recv_callback = msg_cb,
	};
	struct wslay_event_msg first;
	pthread_attr_t attr;
	pthread_t t;
	int ret, one;

	ws->sfd = sock;
	ws->urh = urh;
	/* a stream is interactive: without this, a small message written
	 * after another not yet acknowledged waits for the peer's delayed
	 * ACK (40 ms on Linux) */
	one = 1;
	(void)setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (extra_len) {
		if ((ws->extra = malloc(extra_len)) == NULL)
			goto fail;
		memcpy(ws->extra, extra, extra_len);
		ws->extra_len = extra_len;
	}
	if (wslay_event_context_server_init(&ws->ctx, &cb, ws) != 0)
		goto fail;
	/* a message over this is refused with 1009 by wslay itself; text
	 * may be up to twice as long (base64, escapes) */
	wslay_event_config_set_max_recv_msg_length(ws->ctx, 2 * SPACE_STREAM_PAYLOAD_MAX);
	first = (struct wslay_event_msg){ WSLAY_TEXT_FRAME, (const uint8_t *)ws->first,
	    strlen(ws->first) };
	if (wslay_event_queue_msg(ws->ctx, &first) != 0)
		goto fail;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	ret = pthread_create(&t, &attr, ws_thread, ws);
	pthread_attr_destroy(&attr);
	if (ret != 0)
		goto fail;
	metrics_stream_open(1);
	return 0;
fail:
	MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
	ws_free(ws);
	return -1;
}
