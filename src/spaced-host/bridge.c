/* One connection of sbx-manager: HELLO, REQUEST, the comparator on our own
 * record, then the operation relayed to the guest on an operation channel:
 * a fresh socket passed with MSG_OPEN (the guest forks a child that
 * becomes the user), or, for a file operation or an exec, an idle channel
 * kept from an earlier one, whose child is still waiting for its next
 * REQUEST.
 *
 * The bridge trusts neither side's frames: sbx-manager's request is checked
 * again (defence in depth, DESIGN section 6) and the guest runs code of the
 * sandbox, so every frame it sends is checked against what the operation
 * allows at that point before it is passed on. */
#include <errno.h>
#include <malloc.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>

#include "claims.h"
#include "fsplice.h"
#include "host.h"
#include "limits.h"
#include "log.h"
#include "msg.h"
#include "proto.h"
#include "util.h"

/* an idle peer (no frame for this long in a phase where one is due) is
 * dropped, so a stalled upload cannot hold an operation slot forever */
#define BRIDGE_IDLE_SECONDS 120

void
bridge_refuse(int fd, int status, const char *code, const char *message)
{
	frame_write_error(fd, status, code, NULL, message);
	close(fd);
}

static void
set_timeouts(int fd, int seconds)
{
	struct timeval tv = { seconds, 0 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* an idle channel, or -1. One that is readable or hung up is dropped: its
 * child ended (the user may kill it: it runs as the user) or sent frames
 * nobody asked for, which the next operation must never read. */
static int
chan_take(struct host *h)
{
	struct pollfd p;
	int fd;

	for (;;) {
		pthread_mutex_lock(&h->chan_mu);
		fd = h->chan_nidle ? h->chan_idle[--h->chan_nidle] : -1;
		pthread_mutex_unlock(&h->chan_mu);
		if (fd < 0)
			return -1;
		p = (struct pollfd){ .fd = fd, .events = POLLIN };
		if (poll(&p, 1, 0) == 0)
			return fd;
		close(fd);
	}
}

/* after a reusable operation ended cleanly on both sides */
static void
chan_give(struct host *h, int fd)
{
	bool wake = false;

	pthread_mutex_lock(&h->chan_mu);
	if (h->chan_nidle < SPACE_OPCHAN_IDLE_MAX && !atomic_load(&h->guest_dead)) {
		h->chan_since[h->chan_nidle] = now_mono_ns();
		h->chan_idle[h->chan_nidle++] = fd;
		fd = -1;
		/* the serving loop is woken only when its wait has no end;
		 * one with an end looks again when it ends */
		wake = !h->chan_armed;
		h->chan_armed = true;
	}
	pthread_mutex_unlock(&h->chan_mu);
	if (fd >= 0)
		close(fd);
	else if (wake && h->chan_wake[1] >= 0)
		(void)!write(h->chan_wake[1], "", 1);  /* full: a wake-up is pending */
}

/* An idle channel is a waiting process of the user in the guest: it is
 * worth keeping while operations come in a burst, not for the sandbox's
 * idle hours (docs/jail.md "Kept channels"). The oldest are at the
 * bottom of the stack (chan_take takes the newest). */
int
bridge_chan_expire(struct host *h)
{
	uint64_t now = now_mono_ns(), ttl = (uint64_t)SPACE_OPCHAN_IDLE_MS * 1000000u;
	int old[SPACE_OPCHAN_IDLE_MAX], nold = 0, next = -1;
	unsigned i, k = 0;

	pthread_mutex_lock(&h->chan_mu);
	for (i = 0; i < h->chan_nidle; i++) {
		if (now - h->chan_since[i] >= ttl) {
			old[nold++] = h->chan_idle[i];
			continue;
		}
		h->chan_since[k] = h->chan_since[i];
		h->chan_idle[k++] = h->chan_idle[i];
	}
	h->chan_nidle = k;
	if (k > 0)
		next = (int)((h->chan_since[0] + ttl - now) / 1000000u) + 1;
	h->chan_armed = next >= 0;
	pthread_mutex_unlock(&h->chan_mu);
	while (nold > 0)
		close(old[--nold]);
	return next;
}

/* a socket of its own per operation, passed over the verified control
 * channel: nothing else can ever connect to the guest; -1 if it cannot */
static int
chan_open(struct host *h)
{
	char open_json[48];
	int sp[2], r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) < 0)
		return -1;
	snprintf(open_json, sizeof(open_json), "{\"op_id\":%llu}",
	    (unsigned long long)atomic_fetch_add(&h->op_seq, 1) + 1);
	pthread_mutex_lock(&h->control_mu);
	r = frame_write_fd(h->control, MSG_OPEN, open_json, strlen(open_json), sp[1]);
	pthread_mutex_unlock(&h->control_mu);
	close(sp[1]);
	if (r < 0) {
		close(sp[0]);
		return -1;
	}
	return sp[0];
}

int
bridge_chan_ahead(struct host *h)
{
	int fd = chan_open(h);

	if (fd < 0)
		return -1;
	chan_give(h, fd);
	return 0;
}

/* Frames for the client, gathered while the guest has more ready and
 * written together: a small read's RESPONSE, DATA and END reach
 * sbx-manager in one write (one wake-up, not three). Bounded by OBUF_MAX;
 * a larger frame is written on its own. */
#define OBUF_MAX (64u << 10)

struct obuf {
	uint8_t *p;
	size_t n;
};

static int
obuf_flush(struct obuf *o, int fd)
{
	size_t off = 0;
	ssize_t k;

	while (off < o->n) {
		k = send(fd, o->p + off, o->n - off, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -errno;
		off += (size_t)k;
	}
	o->n = 0;
	return 0;
}

static int
obuf_add(struct obuf *o, int fd, uint16_t type, const void *payload, size_t len)
{
	int r;

	if (o->n + FRAME_HDR_LEN + len > OBUF_MAX && (r = obuf_flush(o, fd)) < 0)
		return r;
	if (FRAME_HDR_LEN + len > OBUF_MAX)
		return frame_write(fd, type, payload, len);
	if (o->p == NULL && (o->p = malloc(OBUF_MAX)) == NULL)
		return frame_write(fd, type, payload, len);
	frame_hdr_encode(o->p + o->n, type, (uint32_t)len);
	if (len)
		memcpy(o->p + o->n + FRAME_HDR_LEN, payload, len);
	o->n += FRAME_HDR_LEN + len;
	return 0;
}

/* the guest's RESPONSE {"status":200,"result":{...}} -> ours, with
 * "serving" (and oom_killed for an exec whose command the kernel killed);
 * into o when there is one, else written at once */
static int
relay_response(struct host *h, int client, const struct frame *f, bool check_oom,
    uint64_t oom_before, struct obuf *o, int gfd)
{
	struct msg_response m;
	const char *why;
	char *s = NULL;
	uint64_t size;
	size_t n;
	int r;

	if (msg_response_decode(f->payload, f->len, MSG_FORM_GUEST, &m, &why) != 0)
		return -EPROTO;
	/* a descriptor came exactly when the answer says the body is one,
	 * and it is a file we may pass on; its size is the one we see */
	if (json_is_true(json_object_get(m.result, "descriptor")) != (gfd >= 0) ||
	    (gfd >= 0 && (fd_file_passable(gfd, &size, &why) != 0 ||
	    json_object_set_new(m.result, "size", json_integer((json_int_t)size)) != 0))) {
		msg_response_free(&m);
		return -EPROTO;
	}
	if (check_oom) {
		uint64_t after;
		json_t *sig = json_object_get(m.result, "signal");
		/* the count is the monitor's (it holds the cgroup) */
		/* asked only when the command died of SIGKILL: the one
		 * way an OOM kill ends it */
		if (json_is_integer(sig) && json_integer_value(sig) == 9 &&
		    host_oom_kills(h, &after) == 0 && after > oom_before)
			json_object_set_new(m.result, "oom_killed", json_true());
	}
	m.serving = h->rec.id;
	r = msg_response_encode(&m, MSG_FORM_CLAIMS, &s, &n);
	msg_response_free(&m);
	if (r == 0 && gfd >= 0)
		r = frame_write_fd(client, MSG_RESPONSE, s, n, gfd);
	else if (r == 0)
		r = o ? obuf_add(o, client, MSG_RESPONSE, s, n) : frame_write(client, MSG_RESPONSE, s, n);
	free(s);
	return r;
}

/* the guest's ERROR, passed on only if it is the message it should be
 * (and re-encoded: what reaches sbx-manager is what the codec wrote);
 * -EPROTO when it was not (after answering the client with a 500) */
static int
relay_error(int client, const struct frame *f)
{
	struct msg_error m;
	const char *why;
	char *s = NULL;
	size_t n;
	int r;

	if (msg_error_decode(f->payload, f->len, false, &m, &why) != 0 ||
	    msg_error_encode(&m, &s, &n) != 0) {
		frame_write_error(client, 500, "internal", NULL,
		    "malformed error from the guest");
		return -EPROTO;
	}
	r = frame_write(client, MSG_ERROR, s, n);
	free(s);
	return r;
}

/* the guest side broke before it answered */
static void
guest_lost(struct host *h, int client)
{
	if (host_guest_gone(h))
		frame_write_error(client, 503, "unavailable", NULL, "the execution ended");
	else
		frame_write_error(client, 500, "internal", NULL, "the guest dropped the operation");
}

/* fs.write: client DATA* END -> guest, watching the guest for an early ERROR */
static int
relay_upload(struct host *h, int client, int guest, struct fsplice *sp, bool *answered)
{
	struct frame f = { 0 };
	struct pollfd p[2];
	uint16_t type;
	uint32_t len;
	int r;

	for (;;) {
		p[0] = (struct pollfd){ .fd = client, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = guest, .events = POLLIN };
		r = poll(p, 2, BRIDGE_IDLE_SECONDS * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			frame_write_error(client, 400, "bad_request", NULL, "upload stalled");
			*answered = true;
			return -ETIMEDOUT;
		}
		if (p[1].revents) {
			/* the guest ends the operation early (no space, no such
			 * directory): that answer is final, stop the upload */
			if ((r = frame_read(guest, &f)) < 0) {
				guest_lost(h, client);
			} else if (f.type == MSG_ERROR) {
				relay_error(client, &f);
			} else {
				frame_write_error(client, 500, "internal", NULL,
				    "unexpected frame from the guest");
			}
			*answered = true;
			frame_free(&f);
			return -EPROTO;
		}
		if ((r = fsplice_hdr_read(client, &type, &len)) < 0)
			return r;       /* the client left: closing the guest side aborts */
		if (type != MSG_DATA && type != MSG_END) {
			frame_write_error(client, 400, "bad_request", NULL, "expected DATA or END");
			*answered = true;
			return -EPROTO;
		}
		if (type == MSG_DATA && len >= FSPLICE_MIN) {
			/* the header is checked: its bytes go through the kernel */
			if ((r = fsplice_frame(sp, client, guest, type, len)) < 0 && !sp->to_failed)
				return r;       /* the client left inside the frame */
			if (r < 0)
				return 0;       /* the guest side closed: its answer is read next */
			continue;
		}
		if ((r = fsplice_payload_read(client, type, len, &f)) < 0)
			return r;
		r = frame_write(guest, f.type, f.payload, f.len);
		if (f.type == MSG_END || r < 0) {
			/* done, or the guest side closed: either way its answer
			 * (or its absence) is read next */
			frame_free(&f);
			return 0;
		}
		frame_free(&f);
	}
}

/* fs.read after RESPONSE: DATA* then END (or ERROR) from the guest;
 * *clean once the guest's side of the operation is over (END or a
 * well-formed ERROR read), so that its channel may serve another; *whole
 * once the client's side is (that END or ERROR written to it) */
static int
relay_download(struct host *h, int client, int guest, struct fsplice *sp, bool *clean,
    bool *whole, struct obuf *o)
{
	struct frame f = { 0 };
	struct pollfd p;
	uint16_t type;
	uint32_t len;
	int r;

	for (;;) {
		/* what is gathered goes out once the guest has nothing more ready */
		p = (struct pollfd){ .fd = guest, .events = POLLIN };
		if (o->n > 0 && poll(&p, 1, 0) == 0 && (r = obuf_flush(o, client)) < 0)
			return r;
		if ((r = fsplice_hdr_read(guest, &type, &len)) < 0) {
			obuf_flush(o, client);
			return r;       /* no END: the client sees a cut stream */
		}
		if (type == MSG_DATA && len >= FSPLICE_MIN) {
			/* a DATA frame where DATA is due, its length within
			 * the limit: the payload goes guest -> client through
			 * a pipe, never through this process (after what was
			 * gathered before it) */
			if ((r = obuf_flush(o, client)) < 0 ||
			    (r = fsplice_frame(sp, guest, client, type, len)) < 0)
				return r;
			continue;
		}
		if ((r = fsplice_payload_read(guest, type, len, &f)) < 0) {
			obuf_flush(o, client);
			return r;
		}
		if (f.type == MSG_DATA) {
			r = obuf_add(o, client, MSG_DATA, f.payload, f.len);
		} else if (f.type == MSG_END) {
			*clean = true;
			if ((r = obuf_add(o, client, MSG_END, NULL, 0)) == 0)
				r = obuf_flush(o, client);
			*whole = r == 0;
			frame_free(&f);
			return r;
		} else if (f.type == MSG_ERROR) {
			if ((r = obuf_flush(o, client)) == 0)
				r = relay_error(client, &f);
			*clean = r != -EPROTO;
			*whole = r == 0;
			frame_free(&f);
			return r < 0 ? r : -EIO;
		} else
			r = -EPROTO;
		frame_free(&f);
		if (r < 0) {
			obuf_flush(o, client);
			return r;
		}
	}
}

/* Wait for the first byte of the connection's next REQUEST: 1 when there
 * is one (or the peer closed: the read that follows says which), 0 when
 * the connection should end: idle too long, or the execution ended (the
 * guest's control channel or the monitor hung up), so that a kept
 * connection never holds up the serving process's exit. Never after a
 * byte of a request was read: sbx-manager may send a REQUEST again on a
 * fresh connection only because a kept one closes with nothing read. */
static int
wait_next(struct host *h, int client)
{
	struct pollfd p[3];
	bool trimmed = false;
	int r;

	for (;;) {
		p[0] = (struct pollfd){ .fd = client, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = h->control, .events = POLLIN };
		p[2] = (struct pollfd){ .fd = h->mon, .events = 0 };
		/* a kept connection that idles a second gives the heap the
		 * operations freed back to the kernel (an idle sandbox keeps
		 * its connection, not its buffers), then waits the rest */
		r = poll(p, 3, trimmed ? (BRIDGE_IDLE_SECONDS - 1) * 1000 : 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0 && !trimmed) {
			(void)malloc_trim(0);
			trimmed = true;
			continue;
		}
		if (r <= 0 || atomic_load(&h->guest_dead) ||
		    (p[1].revents & (POLLIN | POLLHUP | POLLERR)) ||
		    (p[2].revents & (POLLHUP | POLLERR)))
			return 0;
		return (p[0].revents & (POLLIN | POLLHUP | POLLERR)) ? 1 : 0;
	}
}

/* One REQUEST of the connection (frame f, read by the caller). True when
 * the connection may carry another: the operation was one whose frames
 * end with its answer (not an upload, not a stream) and that answer
 * reached sbx-manager whole, so nothing of it is left on the connection. */
static bool
serve_op(struct host *h, int client, struct frame *f)
{
	struct frame g = { 0 };
	struct fsplice sp = FSPLICE_INIT;
	struct obuf o = { 0 };
	struct msg_request req = { 0 };
	struct admit_request ar;
	struct admit_result res;
	const char *why = NULL;
	size_t slen;
	char *s = NULL;
	int chan = -1, gfd = -1, r;
	uint64_t oom_before = 0;
	bool answered = false, reuse = false, pooled = false, clean = false, whole = false;
	bool want_fd;

	if (f->type != MSG_REQUEST) {
		frame_write_error(client, 400, "bad_request", NULL, "expected REQUEST");
		goto out;
	}
	r = msg_request_decode(f->payload, f->len, MSG_FORM_CLAIMS, &req, &why);
	if (r == -EACCES) {
		/* claims we cannot read are refused like a bad token */
		struct admit_error e = admit_error_code((struct admit_result){ ADMIT_DENY,
		    R_BAD_CLAIMS });

		memset(&req.claims, 0, sizeof(req.claims));
		host_refused(h, req.op, req.sandbox, &req.claims,
		    (struct admit_result){ ADMIT_DENY, R_BAD_CLAIMS });
		frame_write_error(client, e.status, e.code, e.reason, why);
		goto out;
	}
	if (r < 0) {
		frame_write_error(client, 400, "bad_request", NULL, why);
		goto out;
	}
	/* the one comparator, against our own record: sbx-manager admitted
	 * this request already, but a confused or compromised forwarder
	 * must still not reach another sandbox, generation or activation */
	ar = (struct admit_request){
		.kind = RECV_BRIDGE,
		.target_sandbox = req.sandbox,
		.receiver_sandbox = h->rec.id.sandbox,
		.need_access = msg_request_access(&req),
		.now = now_unix(),
	};
	res = admit(&req.claims, &h->rec, &ar);
	if (res.outcome != ADMIT_ALLOW) {
		/* counted and audited with both identities by the monitor */
		host_refused(h, req.op, req.sandbox, &req.claims, res);
		frame_write_refusal(client, res);
		goto out;
	}
	if (host_guest_gone(h)) {
		frame_write_error(client, 503, "unavailable", NULL, "the execution ended");
		goto out;
	}
	/* a file operation or an exec takes an idle channel when there is
	 * one; every other operation (and those when none is idle) gets a
	 * fresh one */
	reuse = op_reusable(req.op);
	if (reuse)
		pooled = (chan = chan_take(h)) >= 0;
	if (chan < 0 && (chan = chan_open(h)) < 0) {
		frame_write_error(client, 503, "unavailable", NULL,
		    host_guest_gone(h) ? "the execution ended" : "cannot open an operation socket");
		goto out;
	}
	/* a file body as its descriptor (asked by node-api) only where the
	 * guest's channel can carry one; elsewhere the body streams */
	want_fd = req.op == OP_FS_READ && json_is_true(json_object_get(req.args, "descriptor"));
	if (want_fd && !h->ops->passes_fds) {
		json_object_del(req.args, "descriptor");
		want_fd = false;
	}
	if (msg_request_encode(&req, MSG_FORM_GUEST, &s, &slen) != 0) {
		frame_write_error(client, 500, "internal", NULL, "out of memory");
		goto out;
	}
	if (req.op == OP_EXEC)
		host_oom_kills(h, &oom_before);
	r = frame_write(chan, MSG_REQUEST, s, slen);
	if (r < 0 && pooled) {
		/* the idle child ended after chan_take looked: nothing of
		 * this request reached the guest, so a fresh channel may
		 * carry it */
		close(chan);
		if ((chan = chan_open(h)) >= 0)
			r = frame_write(chan, MSG_REQUEST, s, slen);
	}
	if (r < 0) {
		guest_lost(h, client);
		goto out;
	}
	if (req.op == OP_FS_READ || req.op == OP_FS_WRITE) {
		fsplice_sockbufs(client);
		fsplice_sockbufs(chan);
	}
	if (req.op == OP_FS_WRITE) {
		set_timeouts(chan, BRIDGE_IDLE_SECONDS);
		if (relay_upload(h, client, chan, &sp, &answered) < 0 || answered)
			goto out;
	}
	/* an exec may run for its whole timeout: no idle limit on the answer */
	if (req.op == OP_EXEC || msg_request_streams(&req)) {
		struct timeval tv = { 0, 0 };
		setsockopt(chan, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	if ((want_fd ? frame_read_fd(chan, &g, &gfd) : frame_read(chan, &g)) < 0) {
		guest_lost(h, client);
		goto out;
	}
	if (g.type == MSG_ERROR) {
		r = relay_error(client, &g);
		clean = r != -EPROTO;
		whole = r == 0;
		goto out;
	}
	if (g.type != MSG_RESPONSE ||
	    (r = relay_response(h, client, &g, req.op == OP_EXEC, oom_before,
	    req.op == OP_FS_READ ? &o : NULL, gfd)) == -EPROTO) {
		frame_write_error(client, 500, "internal", NULL, "bad answer from the guest");
		goto out;
	}
	if (r < 0) {
		/* the client left; the guest's side of an answer-only
		 * operation is over all the same */
		clean = reuse && req.op != OP_FS_READ;
		goto out;
	}
	if (gfd >= 0)
		clean = whole = true;   /* the body is the descriptor: nothing follows */
	else if (req.op == OP_FS_READ)
		relay_download(h, client, chan, &sp, &clean, &whole, &o);
	else if (reuse)
		clean = whole = true;   /* its answer was the RESPONSE: nothing follows */
	else if (req.op == OP_EXEC && !msg_request_streams(&req))
		whole = true;   /* the same, on a channel that is not kept */
	else if (msg_request_streams(&req)) {
		/* a stream may stay idle for hours (a shell): no idle limit */
		struct timeval tv = { 0, 0 };

		setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		bridge_relay_stream(h, client, chan, req.op);
	}
out:
	if (gfd >= 0)
		close(gfd);
	fsplice_free(&sp);
	free(o.p);
	free(s);
	msg_request_free(&req);
	frame_free(&g);
	if (chan >= 0 && reuse && clean)
		chan_give(h, chan);
	else if (chan >= 0)
		close(chan);
	return whole && req.op != OP_FS_WRITE && !msg_request_streams(&req);
}

/* One connection of sbx-manager: the peer's HELLO once, then one REQUEST
 * after another while each ends cleanly (sbx-manager keeps such a
 * connection for the next operation of the same execution, docs/jail.md
 * "Kept connections"). Every REQUEST is decoded and admitted on its own. */
void
bridge_serve(struct host *h, int client)
{
	struct frame f = { 0 };
	enum proto_role peer;

	set_timeouts(client, BRIDGE_IDLE_SECONDS);
	if (proto_hello_server(client, ROLE_SPACED_HOST, &peer) < 0)
		goto out;
	if (peer != ROLE_SBX_MANAGER) {
		frame_write_error(client, 403, "forbidden", NULL,
		    "only sbx-manager talks to a bridge");
		goto out;
	}
	/* the first REQUEST is waited for as every next one is: sbx-manager
	 * may open a connection before it has an operation for it (at the
	 * execution's start, docs/jail.md "Kept connections"), and an idle
	 * one must not hold up the serving process's end */
	while (wait_next(h, client) != 0) {
		bool again;

		if (frame_read(client, &f) < 0)
			break;
		again = serve_op(h, client, &f);
		frame_free(&f);
		if (!again)
			break;
	}
out:
	frame_free(&f);
	close(client);
}
