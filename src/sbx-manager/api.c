/* The node-api socket: THE authoritative admission, then the relay to a
 * verified bridge. One operation per connection, one thread per
 * connection (bounded).
 *
 *   node-api --HELLO, REQUEST{op,sandbox,token,args}--> here  (msg.h)
 *   admit_token() against the committed record     (non-ALLOW: ERROR, stop)
 *   lease; a kept connection of this execution (bridgepool.c), or
 *   connect + verify the bridge (bridge.c)          (failure: 503, stop)
 *   and HELLO; REQUEST{op,sandbox,claims,args} --> bridge
 *   relay frames both ways, checking their types and the "serving"
 *   identity of the RESPONSE against the record. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <sodium.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bearer.h"
#include "fsplice.h"
#include "log.h"
#include "msg.h"
#include "proto.h"
#include "sbx-manager.h"
#include "util.h"

/* one accepted connection, handed to its thread */
struct conn {
	struct mgr *m;
	int fd;
};

/* what check_response() found of a RESPONSE */
enum resp_check {
	RESP_OK,
	RESP_SERVING,           /* not from the execution we admitted for (or no RESPONSE) */
	RESP_DESCRIPTOR,        /* an fs.read's descriptor refused */
};

/* The RESPONSE must come from the execution we admitted for; an fs.read's
 * (read) carries a descriptor exactly when its result says the body is
 * one, only when node-api asked for it, and a file that may be passed on
 * (fd_file_passable). One decode for both. */
static enum resp_check
check_response(const struct frame *f, const struct route_identity *want, bool read, int fd,
    bool asked)
{
	struct msg_response m;
	enum resp_check c = RESP_OK;
	const char *why;
	uint64_t size;

	if (msg_response_decode(f->payload, f->len, MSG_FORM_CLAIMS, &m, &why) != 0)
		return RESP_SERVING;
	if (!route_identity_equal(&m.serving, want))
		c = RESP_SERVING;
	else if (read && (json_is_true(json_object_get(m.result, "descriptor")) != (fd >= 0) ||
	    (fd >= 0 && (!asked || fd_file_passable(fd, &size, &why) != 0))))
		c = RESP_DESCRIPTOR;
	msg_response_free(&m);
	return c;
}

/* A body passed as its descriptor is sent by node-api, which holds this
 * connection until it is done (then closes it). The lease stays held
 * meanwhile: a replacement cancels it, and node-api learns it here
 * (CANCEL) and cuts the transfer, as a streamed body is cut. */
static void
hold_descriptor(struct mgr *m, int cfd, struct lease *l)
{
	struct pollfd p = { .fd = cfd, .events = POLLIN };

	while (poll(&p, 1, -1) < 0 && errno == EINTR)
		;
	if (lease_cancelled(m, l))
		frame_write_json(cfd, MSG_CANCEL, "{\"reason\":\"execution_replaced\"}");
}

static int
forward(int to, const struct frame *f)
{
	return frame_write(to, f->type, f->payload, f->len);
}

/* an ERROR from the bridge, with "serving" set to the admitted (and
 * verified) execution; a malformed one becomes a 503 of our own */
static int
forward_error(int to, const struct frame *f, const struct route_identity *id)
{
	struct msg_error m;
	const char *why;
	char *s = NULL;
	size_t n;
	int ret;

	/* the bridge never names the execution itself: that is ours to say */
	if (msg_error_decode(f->payload, f->len, false, &m, &why) != 0)
		return frame_write_error(to, 503, "unavailable", NULL,
		    "bad answer from the bridge");
	m.has_serving = true;
	m.serving = *id;
	if ((ret = msg_error_encode(&m, &s, &n)) != 0)
		return frame_write_error(to, 502, "internal", NULL, "answer too large");
	ret = frame_write(to, MSG_ERROR, s, n);
	free(s);
	return ret;
}

/* A large DATA frame where one is due (data_due), spliced from -> to
 * after its header was checked (fsplice.h): 1 when one was moved; 0 when
 * the next frame is something else, left unread for frame_read (peeked,
 * not consumed); -errno when a side failed (sp->to_failed says which;
 * -EPIPE for the destination). *cut: the failure came after the header
 * went to `to`, so `to` stands inside a payload and no frame of ours
 * (CANCEL, ERROR) may follow there: its reader would take it for file
 * bytes. */
static int
relay_data(int from, int to, struct fsplice *sp, bool data_due, bool *cut)
{
	uint8_t hdr[FRAME_HDR_LEN];
	uint16_t type;
	uint32_t len;
	ssize_t n;
	int r;

	sp->to_failed = false;
	if (!data_due)
		return 0;
	n = recv(from, hdr, sizeof(hdr), MSG_PEEK | MSG_WAITALL);
	if (n != (ssize_t)sizeof(hdr) || frame_hdr_decode(hdr, &type, &len) != 0 ||
	    type != MSG_DATA || len < FSPLICE_MIN)
		return 0;       /* frame_read reads (and refuses) it as before */
	if ((r = fsplice_hdr_read(from, &type, &len)) < 0)
		return r;
	if ((r = fsplice_frame(sp, from, to, type, len)) < 0) {
		*cut = true;
		return sp->to_failed ? -EPIPE : r;
	}
	return 1;
}

/* what relay() left of the bridge connection */
enum relay_end {
	RELAY_CLOSE,    /* close it */
	RELAY_KEEP,     /* the operation's frames ended with its answer: it may carry another */
	RELAY_RETRY,    /* a kept connection the bridge had closed: nothing was read or sent */
};

/* relay one operation; both fds are verified and the lease is held.
 * kept: bfd is a kept connection (bridgepool.c). The bridge closes a kept
 * connection only while it waits for the first byte of a REQUEST, and
 * answers every REQUEST it read; so a kept connection that ends before
 * any frame of an answer did not carry this operation to the bridge, and
 * the operation (not an upload: nothing of the client was read) may go
 * on a fresh one. */
static enum relay_end
relay(struct mgr *m, int cfd, int bfd, struct lease *l, enum op_kind op, bool streams,
    const struct record *rec, const struct capability *cap, const char *what, struct fsplice *sp,
    bool kept, bool want_fd, bool *passed)
{
	bool upload = op == OP_FS_WRITE, upload_done = !upload, got_resp = false;
	bool bridge_broken = false, any = false, cut = false;
	/* an upload cut inside a frame to the bridge: nothing more goes to bfd
	 * anyway (bridge_broken, or the relay ends) */
	bool bcut = false;
	enum relay_end end = RELAY_CLOSE;
	struct pollfd pf[2];
	struct frame f;
	enum resp_check rc;
	int r, gfd = -1;

	for (;;) {
		pf[0] = (struct pollfd){ .fd = bfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = cfd, .events = bridge_broken ? 0 : POLLIN };
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (lease_cancelled(m, l))
			goto cancelled;
		if (pf[0].revents) {
			memset(&f, 0, sizeof(f));
			if ((r = relay_data(bfd, cfd, sp, op == OP_FS_READ && got_resp, &cut)) == 1)
				continue;       /* a DATA frame, spliced through */
			if (cut)        /* inside a payload to node-api: closing cfd is all it may see */
				return RELAY_CLOSE;
			if (r == 0)
				r = want_fd && !got_resp ? frame_read_fd(bfd, &f, &gfd) :
				    frame_read(bfd, &f);
			if (r != 0) {
				if (lease_cancelled(m, l))
					goto cancelled;
				if (kept && !any && !upload && r == -ECONNRESET)
					return RELAY_RETRY;
				if (!got_resp)
					frame_write_error(cfd, 503, "unavailable", NULL,
					    "bridge connection lost");
				break;
			}
			any = true;
			switch (f.type) {
			case MSG_RESPONSE:
				if (got_resp || !upload_done)
					goto bridge_violation;
				rc = check_response(&f, &rec->id, op == OP_FS_READ, gfd, want_fd);
				if (rc == RESP_SERVING) {
					metrics_inc(m, MC_SERVING_MISMATCH);
					audit_refusal("serving_mismatch", what, rec->id.sandbox, cap,
					    rec, "unavailable", "serving identity differs from the record");
					frame_write_error(cfd, 503, "unavailable", NULL,
					    "execution identity mismatch");
					frame_free(&f);
					goto out;
				}
				if (rc == RESP_DESCRIPTOR) {
					frame_free(&f);
					log_warnx("relay %s: a file body's descriptor refused",
					    rec->id.sandbox);
					frame_write_error(cfd, 502, "internal", NULL,
					    "bad answer from the bridge");
					goto out;
				}
				got_resp = true;
				if (gfd >= 0) {
					/* the whole answer: the bridge's side is over */
					r = frame_write_fd(cfd, f.type, f.payload, f.len, gfd);
					frame_free(&f);
					*passed = r == 0;
					end = RELAY_KEEP;
					goto out;
				}
				r = forward(cfd, &f);
				frame_free(&f);
				/* a streaming operation goes on as a stream (stream.c) */
				if (r == 0 && streams) {
					stream_relay(m, cfd, bfd, l, rec->id.sandbox);
					goto out;
				}
				/* an answer-only operation ends with it */
				if (op != OP_FS_READ && !upload)
					end = RELAY_KEEP;
				if (r != 0 || op != OP_FS_READ)
					goto out;
				continue;
			case MSG_DATA:
			case MSG_END:
				if (op != OP_FS_READ || !got_resp)
					goto bridge_violation;
				r = forward(cfd, &f);
				if (f.type == MSG_END)
					end = RELAY_KEEP;
				if (r != 0 || f.type == MSG_END) {
					frame_free(&f);
					goto out;
				}
				frame_free(&f);
				continue;
			case MSG_ERROR:
				if (gfd >= 0)
					goto bridge_violation;
				/* an answer of the execution: say which one, so
				 * node-api can set X-Space-Generation / -Worker */
				forward_error(cfd, &f, &rec->id);
				frame_free(&f);
				if (!upload && !streams)
					end = RELAY_KEEP;
				goto out;
			case MSG_CANCEL:
				forward(cfd, &f);
				frame_free(&f);
				goto out;
			default:
				goto bridge_violation;
			}
		}
		if (pf[1].revents) {
			memset(&f, 0, sizeof(f));
			r = 0;
			if (upload && !upload_done &&
			    (r = relay_data(cfd, bfd, sp, true, &bcut)) == 1)
				continue;
			if (r == -EPIPE && sp->to_failed) {
				/* the bridge ended the upload: its ERROR is read next */
				bridge_broken = true;
				continue;
			}
			if (r == 0)
				r = frame_read(cfd, &f);
			if (r != 0) {
				if (lease_cancelled(m, l))
					goto cancelled;
				break;          /* client gone: the bridge sees EOF */
			}
			if (upload && !upload_done && (f.type == MSG_DATA || f.type == MSG_END)) {
				if (f.type == MSG_END)
					upload_done = true;
				/* a write failure: the bridge may have answered
				 * with an ERROR already; read it before giving up */
				if (forward(bfd, &f) != 0)
					bridge_broken = true;
				frame_free(&f);
				continue;
			}
			frame_free(&f);
			frame_write_error(cfd, 400, "bad_request", NULL,
			    "unexpected frame from client");
			break;
		}
	}
	goto out;
bridge_violation:
	log_warnx("relay %s: bridge sent %s out of order", rec->id.sandbox, msg_type_str(f.type));
	frame_free(&f);
	if (!got_resp)
		frame_write_error(cfd, 503, "unavailable", NULL, "bridge protocol violation");
	goto out;
cancelled:
	frame_write_json(cfd, MSG_CANCEL, "{\"reason\":\"execution_replaced\"}");
	end = RELAY_CLOSE;
out:
	if (gfd >= 0)
		close(gfd);
	return streams || upload ? RELAY_CLOSE : end;
}

/* a fresh connection to the verified bridge of rec, HELLO done; -EPERM
 * when it is not the bridge we recorded, -EPROTO when it refused us,
 * another -errno when unreachable (*why set) */
int
bridge_open(struct mgr *m, const struct record *rec, const char **why)
{
	struct timeval btv = { .tv_sec = MGR_IO_TIMEOUT_S }, stv = { .tv_sec = 120 };
	enum proto_role peer;
	int bfd;

	if ((bfd = bridge_connect(m, rec, why)) < 0)
		return bfd;
	setsockopt(bfd, SOL_SOCKET, SO_RCVTIMEO, &btv, sizeof(btv));
	setsockopt(bfd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof(stv));
	if (proto_hello_client(bfd, ROLE_SBX_MANAGER, &peer) < 0 || peer != ROLE_SPACED_HOST) {
		close(bfd);
		return -EPROTO;
	}
	return bfd;
}

static void
handle(struct mgr *m, int cfd)
{
	struct timeval tv = { .tv_sec = MGR_IO_TIMEOUT_S }, stv = { .tv_sec = 120 };
	struct msg_request req = { 0 }, fwd_req;
	struct fsplice sp = FSPLICE_INIT;
	struct frame f = { 0 };
	struct record rec, now_rec;
	struct runtime_record rr;
	struct admit_request ar;
	struct admit_result res;
	struct capability cap;
	struct lease *l = NULL;
	enum proto_role peer;
	char *fwd_s = NULL;
	size_t fwd_len;
	const char *why;
	bool have, kept, keepable = false, fresh_only = false, counted = false;
	bool want_fd, passed = false;
	uint64_t sock_dev = 0, sock_ino = 0;
	int bfd = -1, r;

	setsockopt(cfd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(cfd, SOL_SOCKET, SO_SNDTIMEO, &stv, sizeof(stv));
	if (proto_hello_server(cfd, ROLE_SBX_MANAGER, &peer) < 0 || peer != ROLE_NODE_API)
		goto out;
	if (frame_read(cfd, &f) != 0)
		goto out;
	metrics_inc(m, MC_REQUESTS);
	if (f.type != MSG_REQUEST) {
		metrics_inc(m, MC_BAD_REQUEST);
		goto out;               /* an unexpected frame closes the connection */
	}
	/* The token is a bearer secret: req.token is wiped by
	 * msg_request_free, the raw frame right here, jansson's own copies
	 * (its lexer buffer, the string value) by the free function
	 * api_listen installs. */
	r = msg_request_decode(f.payload, f.len, MSG_FORM_TOKEN, &req, &why);
	sodium_memzero(f.payload, f.len);
	frame_free(&f);
	if (r != 0) {
		metrics_inc(m, MC_BAD_REQUEST);
		frame_write_error(cfd, 400, "bad_request", NULL, why);
		goto out;
	}

	/* admission against the committed record, on every operation: the
	 * cache inside the verifier only skips the signature check */
	memset(&cap, 0, sizeof(cap));
	have = records_get(m, req.sandbox, &rec) == 0;
	if (have)
		rr = (struct runtime_record){ .id = rec.id, .state = rec.state, .epoch = rec.epoch };
	ar = (struct admit_request){ .kind = RECV_SBX_MANAGER, .target_sandbox = req.sandbox,
	    .receiver_sandbox = NULL, .need_access = msg_request_access(&req), .now = now_unix() };
	res = admit_token(m->verifier, req.token, req.token_len, have ? &rr : NULL, &ar, &cap);
	metrics_admission(m, res.outcome, res.reason);
	if (res.outcome != ADMIT_ALLOW) {
		refusals_count(req.sandbox, have, res.outcome);
		audit_refusal("admission", op_name(req.op), req.sandbox, &cap, have ? &rec : NULL,
		    admit_outcome_str(res.outcome), admit_reason_str(res.reason));
		frame_write_refusal(cfd, res);
		goto out;
	}

	/* the lease first, then re-read the durable record: a replacement
	 * committed in between either shows here or cancels the lease. It
	 * also bounds the operations of one sandbox before the bridge is
	 * even contacted. */
	if ((l = lease_add(m, &rec.id, rec.epoch, cfd, -1)) == NULL) {
		frame_write_error(cfd, 503, "unavailable", NULL, errno == EBUSY ?
		    "too many concurrent operations on this sandbox" : "out of memory");
		goto out;
	}
	if (records_get(m, req.sandbox, &now_rec) != 0 || now_rec.epoch != rec.epoch) {
		have = records_get(m, req.sandbox, &now_rec) == 0;
		if (have)
			rr = (struct runtime_record){ .id = now_rec.id, .state = now_rec.state,
			    .epoch = now_rec.epoch };
		res = admit(&cap, have ? &rr : NULL, &ar);
		if (res.outcome == ADMIT_ALLOW) {
			res.outcome = ADMIT_REFRESH_ROUTE;
			res.reason = R_NOT_SERVING;
		}
		metrics_admission(m, res.outcome, res.reason);
		refusals_count(req.sandbox, have, res.outcome);
		audit_refusal("admission", op_name(req.op), req.sandbox, &cap, have ? &now_rec : NULL,
		    admit_outcome_str(res.outcome), admit_reason_str(res.reason));
		frame_write_refusal(cfd, res);
		goto out;
	}
	/* node-api takes a large file body as its descriptor */
	want_fd = req.op == OP_FS_READ && json_is_true(json_object_get(req.args, "descriptor"));
	/* the claims travel as the claims object, verified here once */
	fwd_req = (struct msg_request){ .op = req.op, .claims = cap, .args = req.args };
	memcpy(fwd_req.sandbox, req.sandbox, sizeof(fwd_req.sandbox));
	if ((r = msg_request_encode(&fwd_req, MSG_FORM_CLAIMS, &fwd_s, &fwd_len)) != 0) {
		if (r == -EMSGSIZE)
			frame_write_error(cfd, 413, "too_large", NULL, "request too large");
		else
			frame_write_error(cfd, 500, "internal", NULL, "cannot build request");
		goto out;
	}
again:
	/* a kept connection of exactly this execution (bridgepool.c), or a
	 * fresh one, verified and greeted */
	kept = !fresh_only && (bfd = bpool_take(m, &rec, &sock_dev, &sock_ino)) >= 0;
	if (kept) {
		keepable = true;
	} else if ((bfd = bridge_open(m, &rec, &why)) >= 0) {
		/* the socket file reached; a kept connection is tied to it */
		keepable = bridge_sock_id(&rec, &sock_dev, &sock_ino) == 0;
	}
	if (!kept && bfd < 0) {
		if (bfd == -EPROTO) {
			/* the verified bridge refused us (at its own limit, stopping) */
			frame_write_error(cfd, 503, "unavailable", NULL,
			    "the execution refused the operation");
			bfd = -1;
			goto out;
		}
		metrics_inc(m, bfd == -EPERM ? MC_BRIDGE_REFUSED : MC_BRIDGE_UNREACHABLE);
		metrics_bridge_refusal(m, why);
		audit_refusal("bridge", op_name(req.op), req.sandbox, &cap, &rec, "unavailable", why);
		frame_write_error(cfd, 503, "unavailable", NULL, "execution unavailable");
		bfd = -1;
		goto out;
	}
	/* a cancellation that came while we connected could not shut this
	 * socket down: the lease learns it now and is checked again */
	lease_set_bridge(m, l, bfd);
	if (lease_cancelled(m, l)) {
		frame_write_json(cfd, MSG_CANCEL, "{\"reason\":\"execution_replaced\"}");
		goto out;
	}
	if (frame_write_json(bfd, MSG_REQUEST, fwd_s) != 0) {
		if (kept)
			goto retry;     /* the bridge had closed it: nothing reached it */
		frame_write_error(cfd, 503, "unavailable", NULL, "bridge connection lost");
		goto out;
	}
	if (!counted)
		metrics_inc(m, MC_ALLOW);
	counted = true;
	if (req.op == OP_FS_READ || req.op == OP_FS_WRITE) {
		fsplice_sockbufs(cfd);
		fsplice_sockbufs(bfd);
	}
	switch (relay(m, cfd, bfd, l, req.op, msg_request_streams(&req), &rec, &cap,
	    op_name(req.op), &sp, kept, want_fd, &passed)) {
	case RELAY_KEEP:
		if (!keepable)
			break;
		lease_set_bridge(m, l, -1);
		bpool_give(m, &rec, bfd, sock_dev, sock_ino);
		bfd = -1;
		break;
	case RELAY_RETRY:
		goto retry;
	case RELAY_CLOSE:
		break;
	}
	if (passed)
		hold_descriptor(m, cfd, l);
	goto out;
retry:
	lease_set_bridge(m, l, -1);
	close(bfd);
	bfd = -1;
	fresh_only = true;
	goto again;
out:
	fsplice_free(&sp);
	/* the lease goes before the fds: a canceller never touches a
	 * descriptor number that was closed and reused */
	lease_remove(m, l);
	if (bfd >= 0)
		close(bfd);
	free(fwd_s);
	frame_free(&f);
	msg_request_free(&req);
	close(cfd);
}

static void *
conn_thread(void *arg)
{
	struct conn c = *(struct conn *)arg;

	free(arg);
	handle(c.m, c.fd);
	atomic_fetch_sub(&c.m->nconns, 1);
	return NULL;
}

/* the binding directories (".apiXXXXXX", mkdtemp's six characters) an
 * earlier life of ours left in dir when it was killed between making
 * one and removing it: their socket, then themselves */
static void
api_sweep(const char *dir)
{
	struct dirent *de;
	DIR *d;

	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		int cfd;

		if (strncmp(de->d_name, ".api", 4) != 0 || strlen(de->d_name) != 10 ||
		    de->d_type != DT_DIR)
			continue;
		if ((cfd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC)) < 0)
			continue;
		(void)unlinkat(cfd, "s", 0);
		close(cfd);
		if (unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR) == 0)
			log_info("removed %s/%s, left by an earlier life", dir, de->d_name);
	}
	closedir(d);
}

int
api_listen(struct mgr *m, const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char dir[sizeof(sa.sun_path)], *s;
	int fd, r;

	/* bound in a 0700 directory of its own beside PATH, given its owner
	 * and mode there, listening, then moved to PATH: never
	 * world-connectable, and the umask is left alone. The umask is the
	 * process's: the pools' fillers (jailpool.c, layerpool.c) already
	 * run and make their directories now, and a narrower one for the
	 * bind made a prepared jail's run directory 0600 instead of 0700. */
	if (strlen(path) >= sizeof(sa.sun_path) ||
	    (size_t)snprintf(dir, sizeof(dir), "%s", path) >= sizeof(dir) ||
	    (s = strrchr(dir, '/')) == NULL ||
	    (size_t)(s - dir) + sizeof("/.apiXXXXXX/s") > sizeof(dir))
		return -ENAMETOOLONG;
	memcpy(s, "/.apiXXXXXX", sizeof("/.apiXXXXXX"));
	/* from here on capabilities arrive as JSON: jansson wipes what it
	 * frees (bearer.h); what was allocated before is freed by the same
	 * free() */
	space_json_wipe_frees();
	unlink(path);
	*s = '\0';
	api_sweep(dir);
	*s = '/';
	if (mkdtemp(dir) == NULL)
		return -errno;
	/* fits: checked above */
	memcpy(sa.sun_path, dir, strlen(dir));
	memcpy(sa.sun_path + strlen(dir), "/s", sizeof("/s"));
	r = 0;
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		r = -errno;
	else if (m->cfg.api_gid != (gid_t)-1 ?
	    chown(sa.sun_path, 0, m->cfg.api_gid) != 0 || chmod(sa.sun_path, 0660) != 0 :
	    chmod(sa.sun_path, 0600) != 0)
		r = -errno;
	else if (listen(fd, 128) != 0 || rename(sa.sun_path, path) != 0)
		r = -errno;
	if (r != 0) {
		if (fd >= 0)
			close(fd);
		(void)unlink(sa.sun_path);
		(void)rmdir(dir);
		return r;
	}
	(void)rmdir(dir);
	m->api_fd = fd;
	return 0;
}

void *
api_accept_thread(void *arg)
{
	struct mgr *m = arg;
	struct ucred cr;
	socklen_t crl;
	pthread_attr_t attr;
	struct conn *c;
	pthread_t t;
	int fd;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	while (!atomic_load(&m->stopping)) {
		fd = accept4(m->api_fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno != EINTR && errno != ECONNABORTED)
				usleep(10000);
			continue;
		}
		/* the file mode already limits who connects; the kernel's
		 * word on the peer is checked as well */
		crl = sizeof(cr);
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0) {
			/* no credentials to name: say why, never read cr */
			metrics_inc(m, MC_PEER_REFUSED);
			log_warn("api: refused a peer: SO_PEERCRED");
			close(fd);
			continue;
		}
		if (!(cr.uid == 0 || (m->cfg.api_gid != (gid_t)-1 && cr.gid == m->cfg.api_gid))) {
			metrics_inc(m, MC_PEER_REFUSED);
			log_warnx("api: refused peer uid %u gid %u", (unsigned)cr.uid, (unsigned)cr.gid);
			close(fd);
			continue;
		}
		if (atomic_fetch_add(&m->nconns, 1) >= m->cfg.api_conns) {
			atomic_fetch_sub(&m->nconns, 1);
			metrics_inc(m, MC_CONN_LIMIT);
			close(fd);
			continue;
		}
		if ((c = malloc(sizeof(*c))) == NULL) {
			atomic_fetch_sub(&m->nconns, 1);
			close(fd);
			continue;
		}
		*c = (struct conn){ .m = m, .fd = fd };
		if (pthread_create(&t, &attr, conn_thread, c) != 0) {
			free(c);
			atomic_fetch_sub(&m->nconns, 1);
			close(fd);
		}
	}
	pthread_attr_destroy(&attr);
	return NULL;
}
