/* HTTP routes of node-api (docs/protocol.md section 2) on libmicrohttpd,
 * thread per connection.
 *
 * Everything that can be refused without a key is refused here, before a
 * byte reaches sbx-manager: unknown routes, oversized URLs and bodies, bad
 * sandbox ids, a missing bearer (401) or one that is not shaped like a
 * v4.public capability (403 malformed_token). Admission itself (signature,
 * expiry, identity) is sbx-manager's; its ERROR frames are mapped to HTTP
 * with the statuses of DESIGN section 4.
 *
 * File bodies stream: GET reads DATA frames into the response as the client
 * takes them, PUT turns each piece of the upload into DATA frames as it
 * arrives. Neither holds more than one chunk. */
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bearer.h"
#include "fsplice.h"
#include "claims.h"
#include "headwatch.h"
#include "httpedge.h"
#include "log.h"
#include "node-api.h"
#include "msg.h"
#include "proto.h"
#include "util.h"
#include "verifier.h"
#include "wskey.h"

enum kind { K_JSON, K_QUERY, K_DOWNLOAD, K_UPLOAD, K_NOARGS, K_WS };

struct route {
	const char *method, *suffix, *op, *label;
	enum kind kind;
	size_t body_max;        /* K_JSON: the buffered body, bytes */
};

/* a proc.stdin body: its bytes as base64, and room for the rest */
#define PROC_STDIN_BODY_MAX ((SPACE_PROC_STDIN_MAX + 2) / 3 * 4 + 4096)

static const struct route routes[] = {
	/* an exec body carries stdin whole (SPACE_EXEC_STDIN_MAX, base64 at
	 * worst) beside argv and env */
	{ "POST", "exec",      "exec",      "exec",      K_JSON, SPACE_EXEC_BODY_MAX },
	{ "GET",  "files",     "fs.read",   "files_get", K_DOWNLOAD, 0 },
	{ "PUT",  "files",     "fs.write",  "files_put", K_UPLOAD, 0 },
	{ "GET",  "fs/list",   "fs.list",   "fs_list",   K_QUERY, 0 },
	{ "GET",  "fs/stat",   "fs.stat",   "fs_stat",   K_QUERY, 0 },
	{ "POST", "fs/mkdir",  "fs.mkdir",  "fs_mkdir",  K_JSON, SPACE_HTTP_BODY_MAX },
	{ "POST", "fs/remove", "fs.remove", "fs_remove", K_JSON, SPACE_HTTP_BODY_MAX },
	{ "POST", "fs/rename", "fs.rename", "fs_rename", K_JSON, SPACE_HTTP_BODY_MAX },
	/* processes and watches (ws.c for the WebSocket ones); "*" is a
	 * process id, passed on as args "pid" */
	{ "GET",  "processes", "proc.list", "proc_list", K_NOARGS, 0 },
	{ "POST", "processes", "proc.start", "proc_start", K_JSON, SPACE_EXEC_BODY_MAX },
	{ "GET",  "processes/stream", "proc.start", "proc_stream", K_WS, 0 },
	{ "GET",  "processes/*/stream", "proc.attach", "proc_attach", K_WS, 0 },
	{ "POST", "processes/*/signal", "proc.signal", "proc_signal", K_JSON, SPACE_HTTP_BODY_MAX },
	{ "POST", "processes/*/stdin", "proc.stdin", "proc_stdin", K_JSON, PROC_STDIN_BODY_MAX },
	{ "POST", "processes/*/resize", "proc.resize", "proc_resize", K_JSON, SPACE_HTTP_BODY_MAX },
	{ "GET",  "watch", "fs.watch", "fs_watch", K_WS, 0 },
};

struct req {
	size_t uri_len;
	bool bad_target;        /* a control byte in the raw target */
	bool close;             /* answer with Connection: close */
	bool started;
	const struct route *rt;
	const char *label;
	char sbx[SPACE_ID_MAX + 1];
	char *token;
	size_t token_len;
	/* K_JSON */
	char *body;
	size_t blen;
	bool too_large;
	/* manager connection */
	int mfd;
	bool upload_broken;
	uint8_t *ubuf;          /* K_UPLOAD: the DATA frame being gathered, SPACE_CHUNK */
	size_t ulen;
	/* routes with a process id in the path */
	bool has_pid;
	uint32_t pid;
	/* K_WS: the client's key, the subprotocol chosen, the stream once
	 * the backend answered (until the upgrade hands it to ws.c) */
	char ws_key[32];
	const char *ws_proto;
	struct ws_stream *ws;
	/* K_DOWNLOAD */
	uint64_t size, sent;
	uint32_t cur_left;      /* payload bytes of the current DATA frame not yet read */
	bool cut;               /* the body ends short once what was taken is out */
	/* K_DOWNLOAD whose body is a passed descriptor: the watch of the
	 * manager's connection while libmicrohttpd sends it (dl_watch) */
	int wake;               /* eventfd ending the watch; -1: no watch */
	int csock;              /* the client's socket */
	pthread_t watch;
	atomic_bool dcut;       /* the watch cut the transfer */
};

#define PREFIX "/v1/sandboxes/"

/* the request-head watchdog of this daemon (headwatch.h) */
static struct headwatch *heads;

/* generated at build time from docs/openapi/node-api.json (scripts/embed.sh, build/gen/) */
extern const char node_api_openapi[];
extern const size_t node_api_openapi_len;

static enum MHD_Result
queue(struct MHD_Connection *c, struct req *r, unsigned status, struct MHD_Response *resp)
{
	enum MHD_Result ret;

	MHD_add_response_header(resp, "Cache-Control", "no-store");
	if (r && r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	metrics_request(r && r->label ? r->label : "other", status);
	return ret;
}

static enum MHD_Result
respond_text(struct MHD_Connection *c, struct req *r, unsigned status, const char *ctype,
    const char *body, size_t len, const struct route_identity *serving)
{
	struct MHD_Response *resp;
	char gen[24];

	resp = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	MHD_add_response_header(resp, "Content-Type", ctype);
	if (serving) {
		snprintf(gen, sizeof(gen), "%llu", (unsigned long long)serving->generation);
		MHD_add_response_header(resp, "X-Space-Generation", gen);
		MHD_add_response_header(resp, "X-Space-Worker", serving->worker);
	}
	return queue(c, r, status, resp);
}

static enum MHD_Result
respond_error_from(struct MHD_Connection *c, struct req *r, unsigned status, const char *code,
    const char *reason, const char *message, const struct route_identity *serving);

static enum MHD_Result
respond_error(struct MHD_Connection *c, struct req *r, unsigned status, const char *code,
    const char *reason, const char *message)
{
	return respond_error_from(c, r, status, code, reason, message, NULL);
}

static enum MHD_Result
respond_error_from(struct MHD_Connection *c, struct req *r, unsigned status, const char *code,
    const char *reason, const char *message, const struct route_identity *serving)
{
	json_t *o = json_pack("{s:s}", "error", code);
	char *s;
	enum MHD_Result ret;

	if (o == NULL)
		return MHD_NO;
	if (reason)
		json_object_set_new(o, "reason", json_string(reason));
	if (message)
		json_object_set_new(o, "message", json_string(message));
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return MHD_NO;
	if (strcmp(code, "unauthenticated") == 0 || strcmp(code, "deny") == 0 ||
	    strcmp(code, "refresh_route") == 0 || strcmp(code, "capability_expired") == 0)
		metrics_admission(code, reason);
	ret = respond_text(c, r, status, "application/json", s, strlen(s), serving);
	free(s);
	return ret;
}

/* map the manager's first reply frame; for K_DOWNLOAD a RESPONSE starts the
 * streamed body instead, for K_WS the WebSocket */
static ssize_t dl_reader(void *cls, uint64_t pos, char *buf, size_t max);
/* A download's piece: what libmicrohttpd allocates per response and hands
 * to one send(). At 1 MiB, each call filling it from what already waits,
 * node-api's CPU per GiB sent was 330 to 350 ms against 550 to 610 with
 * one read of at most SPACE_CHUNK per call (docs/benchmarks.md, "Large
 * reads: the last hop's pieces"). */
#define DL_PIECE SPACE_FRAME_MAX
static enum MHD_Result ws_upgrade(struct MHD_Connection *c, struct req *r,
    const struct msg_response *resp);

/* While libmicrohttpd sends a body from its descriptor, sbx-manager holds
 * the operation (and its lease) on r->mfd and says nothing more unless
 * the execution is replaced (CANCEL) or it goes away: either makes mfd
 * readable, and the transfer is cut where it stands by shutting the
 * client's socket down (libmicrohttpd then ends the connection), as a
 * streamed body is cut. done_cb ends the watch before the socket can
 * close, so the socket shut down is always this request's. */
static void *
dl_watch(void *arg)
{
	struct req *r = arg;
	struct pollfd p[2] = {
		{ .fd = r->mfd, .events = POLLIN },
		{ .fd = r->wake, .events = POLLIN },
	};

	while (poll(p, 2, -1) < 0 && errno == EINTR)
		;
	if (!(p[1].revents & POLLIN)) {
		atomic_store(&r->dcut, true);
		(void)shutdown(r->csock, SHUT_RDWR);
	}
	return NULL;
}

static int
dl_watch_start(struct req *r, int csock)
{
	pthread_attr_t at;
	int e;

	if ((r->wake = eventfd(0, EFD_CLOEXEC)) < 0)
		return -1;
	r->csock = csock;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 64u << 10);
	e = pthread_create(&r->watch, &at, dl_watch, r);
	pthread_attr_destroy(&at);
	if (e != 0) {
		close(r->wake);
		r->wake = -1;
		return -1;
	}
	return 0;
}

static void
dl_watch_end(struct req *r)
{
	uint64_t one = 1;

	if (r->wake < 0)
		return;
	if (write(r->wake, &one, sizeof(one)) != sizeof(one))
		log_warnx("node-api: cannot end a download's watch");
	pthread_join(r->watch, NULL);
	close(r->wake);
	r->wake = -1;
	metrics_body(true, atomic_load(&r->dcut));
}

/* a download's headers, whichever way its body comes */
static enum MHD_Result
download_queue(struct MHD_Connection *c, struct req *r, struct MHD_Response *mr,
    const struct msg_response *resp)
{
	char gen[24];

	MHD_add_response_header(mr, "Content-Type", "application/octet-stream");
	snprintf(gen, sizeof(gen), "%llu", (unsigned long long)resp->serving.generation);
	MHD_add_response_header(mr, "X-Space-Generation", gen);
	MHD_add_response_header(mr, "X-Space-Worker", resp->serving.worker);
	return queue(c, r, 200, mr);
}

/* A body as the descriptor the guest opened (fs.read with "descriptor"):
 * checked here as at every hop (fd_file_passable), and sent by
 * libmicrohttpd with sendfile, from the page cache to the client's socket
 * without a copy through this process. Its length is the file's size
 * now; a file that shrinks meanwhile ends the transfer short. Owns fd. */
static enum MHD_Result
reply_descriptor(struct MHD_Connection *c, struct req *r, const struct msg_response *resp,
    int fd)
{
	const union MHD_ConnectionInfo *ci;
	struct MHD_Response *mr;
	int bulk = (int)SPACE_BULK_SOCKBUF;
	const char *why;
	uint64_t size;

	if (fd_file_passable(fd, &size, &why) != 0) {
		log_warnx("node-api: a file body's descriptor refused: %s", why);
		close(fd);
		return respond_error(c, r, 502, "internal", NULL, "bad answer from the worker");
	}
	if ((mr = MHD_create_response_from_fd64(size, fd)) == NULL) {
		close(fd);
		return MHD_NO;
	}
	if ((ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) == NULL ||
	    dl_watch_start(r, ci->connect_fd) != 0) {
		MHD_destroy_response(mr);
		return respond_error(c, r, 503, "unavailable", NULL, "cannot watch the transfer");
	}
	(void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &bulk, sizeof(bulk));
	return download_queue(c, r, mr, resp);
}

/* fd: a descriptor that came with the frame (-1: none); owned */
static enum MHD_Result
reply(struct MHD_Connection *c, struct req *r, const struct frame *f, int fd)
{
	struct msg_response resp = { 0 };
	const union MHD_ConnectionInfo *ci;
	struct msg_error err;
	struct MHD_Response *mr;
	int bulk = (int)SPACE_BULK_SOCKBUF;
	size_t piece;
	const char *why;
	char *s;
	enum MHD_Result ret;
	json_t *sz;

	if (fd >= 0 && (f->type != MSG_RESPONSE || r->rt->kind != K_DOWNLOAD)) {
		close(fd);
		goto bad;
	}
	if (f->type == MSG_CANCEL) {
		/* replaced after the request was forwarded: a transport failure
		 * for the client (retry rules per operation), not a route signal */
		return respond_error(c, r, 503, "unavailable", "execution_replaced", NULL);
	}
	if (f->type == MSG_ERROR) {
		/* "serving": the error came from an execution (sbx-manager
		 * adds it to what the bridge answered) */
		if (msg_error_decode(f->payload, f->len, true, &err, &why) != 0)
			goto bad;
		/* DESIGN section 4: an expired capability is just that */
		if (strcmp(err.error, "capability_expired") == 0)
			err.reason[0] = '\0';
		return respond_error_from(c, r, (unsigned)err.status, err.error,
		    err.reason[0] ? err.reason : NULL, err.has_message ? err.message : NULL,
		    err.has_serving ? &err.serving : NULL);
	}
	if (f->type != MSG_RESPONSE ||
	    msg_response_decode(f->payload, f->len, MSG_FORM_CLAIMS, &resp, &why) != 0)
		goto bad;
	if (r->rt->kind == K_WS) {
		ret = ws_upgrade(c, r, &resp);
		msg_response_free(&resp);
		return ret;
	}
	if (r->rt->kind == K_DOWNLOAD &&
	    json_is_true(json_object_get(resp.result, "descriptor")) != (fd >= 0)) {
		if (fd >= 0)
			close(fd);
		goto bad;
	}
	if (fd >= 0) {
		ret = reply_descriptor(c, r, &resp, fd);
		msg_response_free(&resp);
		return ret;
	}
	if (r->rt->kind == K_DOWNLOAD) {
		sz = json_object_get(resp.result, "size");
		if (!json_is_integer(sz) || json_integer_value(sz) < 0)
			goto bad;
		r->size = (uint64_t)json_integer_value(sz);
		/* a large body: a fixed send buffer, so its pieces go out in
		 * few sends, and it bounds the kernel's memory of the
		 * transfer (autotuning may grow an unset one to tcp_wmem's
		 * maximum); a small one: a piece of its size (a 1 MiB
		 * buffer is a mapping made and unmade per answer) */
		piece = DL_PIECE;
		if (r->size < DL_PIECE)
			piece = r->size < 4096 ? 4096 : (size_t)r->size;
		else if ((ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) != NULL)
			(void)setsockopt(ci->connect_fd, SOL_SOCKET, SO_SNDBUF, &bulk, sizeof(bulk));
		mr = MHD_create_response_from_callback(r->size, piece, dl_reader, r, NULL);
		if (mr == NULL)
			goto bad;
		metrics_body(false, false);
		ret = download_queue(c, r, mr, &resp);
		msg_response_free(&resp);
		return ret;
	}
	s = json_dumps(resp.result, JSON_COMPACT);
	if (s == NULL) {
		msg_response_free(&resp);
		return MHD_NO;
	}
	ret = respond_text(c, r, 200, "application/json", s, strlen(s), &resp.serving);
	free(s);
	msg_response_free(&resp);
	return ret;
bad:
	msg_response_free(&resp);
	log_warnx("node-api: unexpected %s from sbx-manager", msg_type_str(f->type));
	return respond_error(c, r, 502, "internal", NULL, "bad answer from the worker");
}

/* The body straight from the manager's socket into MHD's buffer: each
 * header is read and checked (a DATA frame, its length within the type's
 * limit, frame_hdr_decode), then its payload is read where MHD wants it,
 * with no frame buffer of ours in between. One call waits for the first
 * bytes only, then takes whatever more already waits (across frames) up to
 * the piece's size: a slow body is forwarded as it comes, a fast one in
 * large sends. */
static ssize_t
dl_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct req *r = cls;
	struct pollfd pfd = { .fd = r->mfd, .events = POLLIN };
	uint16_t type;
	uint32_t len;
	size_t want, have = 0;
	ssize_t n;

	(void)pos;
	if (r->cut)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	while (have < max) {
		if (r->cur_left == 0) {
			/* the next header is read only when bytes of it
			 * wait, or when nothing was taken yet */
			if (have > 0 && (r->sent == r->size || poll(&pfd, 1, 0) != 1))
				break;
			/* END (a full body stops above, so here it comes
			 * early), CANCEL (execution replaced), anything but
			 * DATA, a lost connection: the body is cut short
			 * after what was taken, and the client sees an
			 * incomplete transfer */
			if (fsplice_hdr_read(r->mfd, &type, &len) != 0 ||
			    (type != MSG_DATA && !(type == MSG_END && r->sent == r->size))) {
				r->cut = true;
				break;
			}
			if (type == MSG_END)
				return MHD_CONTENT_READER_END_OF_STREAM;
			r->cur_left = len;
			continue;
		}
		want = r->cur_left < max - have ? r->cur_left : max - have;
		if (r->sent + want > r->size) { /* more than announced */
			r->cut = true;
			break;
		}
		do
			n = recv(r->mfd, buf + have, want, have > 0 ? MSG_DONTWAIT : 0);
		while (n < 0 && errno == EINTR);
		if (n < 0 && have > 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			break;
		if (n <= 0) {
			r->cut = true;
			break;
		}
		r->cur_left -= (size_t)n;
		r->sent += (uint64_t)n;
		have += (size_t)n;
	}
	if (have == 0)          /* cut with nothing taken */
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return (ssize_t)have;
}

/* read the manager's first answer and map it */
static enum MHD_Result
finish(struct MHD_Connection *c, struct req *r)
{
	struct frame f = { 0 };
	enum MHD_Result ret;
	int fd = -1;

	if ((r->rt->kind == K_DOWNLOAD ? frame_read_fd(r->mfd, &f, &fd) : frame_read(r->mfd, &f)) != 0)
		return respond_error(c, r, 503, "unavailable", NULL, "worker connection lost");
	ret = reply(c, r, &f, fd);
	frame_free(&f);
	return ret;
}

static enum MHD_Result
open_manager(struct MHD_Connection *c, struct req *r, json_t *args)
{
	r->mfd = manager_open(r->rt->op, r->sbx, r->token, args);
	if (r->mfd == -EMSGSIZE)
		return respond_error(c, r, 413, "too_large", NULL, "request too large");
	if (r->mfd < 0)
		return respond_error(c, r, 503, "unavailable", NULL, NULL);
	if (r->rt->kind == K_DOWNLOAD || r->rt->kind == K_UPLOAD)
		fsplice_sockbufs(r->mfd);
	return MHD_YES;
}

static json_t *
path_args(struct MHD_Connection *c, bool with_mode, const char **why)
{
	const char *p = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
	const char *m = with_mode ? MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode") : NULL;
	unsigned long mode;
	char *end;
	json_t *a;

	if (p == NULL || p[0] == '\0' || strlen(p) > SPACE_PATH_MAX) {
		*why = "path query parameter missing or too long";
		return NULL;
	}
	if ((a = json_pack("{s:s}", "path", p)) == NULL)
		return NULL;
	if (m != NULL) {
		errno = 0;
		mode = strtoul(m, &end, 8);
		if (errno || end == m || *end || mode > 07777) {
			*why = "mode must be octal, at most 07777";
			json_decref(a);
			return NULL;
		}
		json_object_set_new(a, "mode", json_integer((json_int_t)mode));
	}
	return a;
}

/* a route suffix against the request's; "*" matches a process id
 * (1..10 digits, no leading zero, at most 2^31-1), stored in r */
static bool
suffix_match(const char *pat, const char *s, struct req *r)
{
	const char *star = strchr(pat, '*');
	unsigned long long v = 0;
	size_t n = 0;

	if (star == NULL)
		return strcmp(pat, s) == 0;
	if (strncmp(pat, s, (size_t)(star - pat)) != 0)
		return false;
	s += star - pat;
	while (s[n] >= '0' && s[n] <= '9' && n < 11)
		v = v * 10 + (unsigned)(s[n++] - '0');
	if (n == 0 || n > 10 || (n > 1 && s[0] == '0') || v == 0 || v > 0x7fffffffULL)
		return false;
	if (strcmp(star + 1, s + n) != 0)
		return false;
	r->has_pid = true;
	r->pid = (uint32_t)v;
	return true;
}

/* the arguments of a WebSocket route, from its query: a process start
 * takes its args as one JSON object in "args" (a browser cannot send a
 * body with the opening handshake), an attach its pid, a watch "path" and
 * "recursive" */
static json_t *
ws_args(struct MHD_Connection *c, struct req *r, const char **why)
{
	const char *q;
	json_error_t je;
	json_t *a;

	if (strcmp(r->rt->op, "proc.start") == 0) {
		q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "args");
		if (q == NULL || strlen(q) > SPACE_HTTP_BODY_MAX) {
			*why = "args query parameter (a JSON object) missing or too long";
			return NULL;
		}
		a = json_loads(q, JSON_REJECT_DUPLICATES, &je);
		if (!json_is_object(a) || json_object_get(a, "attach") != NULL ||
		    !msg_json_depth_ok(a, SPACE_ARGS_DEPTH_MAX)) {
			json_decref(a);
			*why = "args must be a JSON object without \"attach\", not nested too deep";
			return NULL;
		}
		return a;
	}
	if (strcmp(r->rt->op, "proc.attach") == 0)
		return json_pack("{s:I}", "pid", (json_int_t)r->pid);
	/* fs.watch */
	if ((a = path_args(c, false, why)) == NULL)
		return NULL;
	q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "recursive");
	if (q != NULL) {
		if (strcmp(q, "true") != 0 && strcmp(q, "false") != 0 && strcmp(q, "1") != 0 &&
		    strcmp(q, "0") != 0) {
			json_decref(a);
			*why = "recursive is true or false";
			return NULL;
		}
		json_object_set_new(a, "recursive", json_boolean(q[0] == 't' || q[0] == '1'));
	}
	return a;
}

/* RFC 6455 section 4.2.1: what makes a request an opening handshake. A
 * request on a WebSocket route that is not one is answered 400 (426 for
 * another version, with the one we speak). Returns NULL when it is. */
static const char *
ws_handshake_bad(struct MHD_Connection *c, struct req *r, const char *method, unsigned *status)
{
	const char *up = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Upgrade");
	const char *conn = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Connection");
	const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Version");
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Key");
	const char *proto = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Sec-WebSocket-Protocol");

	*status = 400;
	if (strcmp(method, "GET") != 0)
		return "a WebSocket opens with GET";
	if (up == NULL || strcasecmp(up, "websocket") != 0 || conn == NULL ||
	    strcasestr(conn, "upgrade") == NULL)
		return "this route is a WebSocket (Upgrade: websocket)";
	if (ver == NULL || strcmp(ver, "13") != 0) {
		*status = 426;
		return "Sec-WebSocket-Version must be 13";
	}
	if (!ws_key_valid(key))
		return "Sec-WebSocket-Key must be base64 of 16 bytes";
	strcpy(r->ws_key, key);
	/* binary messages unless the client asks for the JSON text form;
	 * a client that offers nothing gets binary (and no header) */
	r->ws_proto = NULL;
	if (proto != NULL) {
		if (strstr(proto, "space.v1.json") != NULL)
			r->ws_proto = "space.v1.json";
		else if (strstr(proto, "space.v1") != NULL)
			r->ws_proto = "space.v1";
		else
			return "Sec-WebSocket-Protocol: offer space.v1 or space.v1.json";
	}
	return NULL;
}

/* the backend took the stream: switch protocols */
static void
upgrade_cb(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
    size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
	struct req *r = con_cls;
	struct ws_stream *ws = cls;

	/* from here the socket is ours: the head watchdog lets go of it */
	headwatch_close(heads, c);
	if (r != NULL && r->ws == ws)
		r->ws = NULL;
	ws_start(ws, sock, urh, extra_in, extra_in_size);
}

static enum MHD_Result
ws_upgrade(struct MHD_Connection *c, struct req *r, const struct msg_response *resp)
{
	struct MHD_Response *mr;
	char accept[WS_ACCEPT_LEN + 1], gen[24];

	if ((r->ws = ws_new(r->mfd, resp->result,
	    r->ws_proto && strcmp(r->ws_proto, "space.v1.json") == 0)) == NULL)
		return respond_error(c, r, 500, "internal", NULL, "out of memory");
	r->mfd = -1;    /* the stream's now */
	if ((mr = MHD_create_response_for_upgrade(upgrade_cb, r->ws)) == NULL)
		return MHD_NO;
	ws_accept_of(r->ws_key, accept);
	MHD_add_response_header(mr, MHD_HTTP_HEADER_UPGRADE, "websocket");
	MHD_add_response_header(mr, "Sec-WebSocket-Accept", accept);
	if (r->ws_proto)
		MHD_add_response_header(mr, "Sec-WebSocket-Protocol", r->ws_proto);
	snprintf(gen, sizeof(gen), "%llu", (unsigned long long)resp->serving.generation);
	MHD_add_response_header(mr, "X-Space-Generation", gen);
	MHD_add_response_header(mr, "X-Space-Worker", resp->serving.worker);
	return queue(c, r, MHD_HTTP_SWITCHING_PROTOCOLS, mr);
}

/* first call: everything that needs no body */
static enum MHD_Result
count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	http_framing_count(cls, key);
	return MHD_YES;
}

static enum MHD_Result
start_request(struct MHD_Connection *c, struct req *r, const char *url, const char *method)
{
	struct http_framing fr = { 0, 0 };
	const char *rest, *slash, *auth, *tok, *why, *cl;
	size_t i, idlen;
	int rc;
	json_t *args;
	enum MHD_Result ret;

	r->started = true;
	r->mfd = -1;
	headwatch_head_done(heads, c);
	if (r->uri_len > SPACE_HTTP_URL_MAX)
		return respond_error(c, r, 414, "too_large", NULL, "URL too long");
	/* before any route: a request whose end is ambiguous, and whatever
	 * follows it on the connection, is answered by nobody */
	MHD_get_connection_values(c, MHD_HEADER_KIND, count_framing, &fr);
	if (!http_framing_ok(&fr)) {
		r->close = true;
		return respond_error(c, r, 400, "bad_request", NULL,
		    "Content-Length with Transfer-Encoding, or twice");
	}
	if (r->bad_target)
		return respond_error(c, r, 400, "bad_request", NULL,
		    "control character in the request target");
	if (strcmp(url, "/healthz") == 0 && strcmp(method, "GET") == 0) {
		r->label = "healthz";
		return respond_text(c, r, 200, "application/json", "{\"ok\":true}", 11, NULL);
	}
	if (strcmp(url, "/metrics") == 0 && strcmp(method, "GET") == 0) {
		size_t len;
		char *m = metrics_render(&len);
		r->label = "metrics";
		if (m == NULL)
			return respond_error(c, r, 500, "internal", NULL, NULL);
		ret = respond_text(c, r, 200, "text/plain; version=0.0.4", m, len, NULL);
		free(m);
		return ret;
	}
	/* the API's description, built into the binary; holds no data */
	if (strcmp(url, "/openapi.json") == 0 && strcmp(method, "GET") == 0) {
		r->label = "openapi";
		return respond_text(c, r, 200, "application/json", node_api_openapi,
		    node_api_openapi_len, NULL);
	}
	if (strncmp(url, PREFIX, strlen(PREFIX)) != 0)
		return respond_error(c, r, 404, "not_found", NULL, "no such route");
	rest = url + strlen(PREFIX);
	if ((slash = strchr(rest, '/')) == NULL)
		return respond_error(c, r, 404, "not_found", NULL, "no such route");
	idlen = (size_t)(slash - rest);
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
		if (suffix_match(routes[i].suffix, slash + 1, r) && strcmp(method, routes[i].method) == 0)
			r->rt = &routes[i];
	if (r->rt == NULL) {
		for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
			if (suffix_match(routes[i].suffix, slash + 1, r))
				return respond_error(c, r, 405, "bad_request", NULL, "method not allowed");
		return respond_error(c, r, 404, "not_found", NULL, "no such route");
	}
	r->label = r->rt->label;

	/* the bearer: present (bearer.c, the parser space-control uses too),
	 * and shaped like a capability. A Bearer whose token is not one
	 * b64token, or an overlong header, is a malformed capability (403);
	 * no bearer at all is 401. */
	auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	rc = space_bearer(auth, &tok, &r->token_len);
	if (rc == -ENOENT)
		return respond_error(c, r, 401, "unauthenticated", NULL, "a capability bearer is required");
	if (rc < 0)
		return respond_error(c, r, 403, "deny", "malformed_token", NULL);
	/* The shape of a capability, by the grammar the verifier applies
	 * (capability_token_kid): garbage is refused here without a
	 * signature check. The signature is verified once, in sbx-manager,
	 * through its cache; doing it here too would double the cost of every
	 * request and decide nothing (sbx-manager is the authority). A token
	 * that passes may still be forged. */
	{
		char kid[PASERK_K4_PID_LEN + 1], foot[SPACE_FOOTER_MAX + 1];
		struct admit_error e;

		if (capability_token_kid(tok, r->token_len, kid, foot) != 0) {
			e = admit_error_code((struct admit_result){ ADMIT_DENY, R_MALFORMED });
			return respond_error(c, r, (unsigned)e.status, e.code, e.reason, NULL);
		}
	}
	/* our copy is wiped in req_free; the header itself stays in
	 * libmicrohttpd's connection pool, which we cannot wipe */
	if ((r->token = strndup(tok, r->token_len)) == NULL)
		return MHD_NO;

	if (idlen == 0 || idlen > SPACE_ID_MAX)
		return respond_error(c, r, 400, "bad_request", NULL, "invalid sandbox id");
	memcpy(r->sbx, rest, idlen);
	r->sbx[idlen] = '\0';
	if (!id_valid(r->sbx))
		return respond_error(c, r, 400, "bad_request", NULL, "invalid sandbox id");

	switch (r->rt->kind) {
	case K_WS: {
		unsigned st;

		if ((why = ws_handshake_bad(c, r, method, &st)) != NULL) {
			if (st == 426) {
				struct MHD_Response *mr = MHD_create_response_from_buffer(0, NULL,
				    MHD_RESPMEM_PERSISTENT);
				if (mr == NULL)
					return MHD_NO;
				MHD_add_response_header(mr, "Sec-WebSocket-Version", "13");
				return queue(c, r, 426, mr);
			}
			return respond_error(c, r, st, "bad_request", NULL, why);
		}
		if ((args = ws_args(c, r, &why)) == NULL)
			return respond_error(c, r, 400, "bad_request", NULL, why);
		ret = open_manager(c, r, args);
		json_decref(args);
		if (r->mfd < 0)
			return ret;
		return finish(c, r);
	}
	case K_NOARGS:
		if ((args = json_object()) == NULL)
			return MHD_NO;
		ret = open_manager(c, r, args);
		json_decref(args);
		if (r->mfd < 0)
			return ret;
		return finish(c, r);
	case K_JSON:
		cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > r->rt->body_max)
			return respond_error(c, r, 413, "too_large", NULL, "body too large");
		return MHD_YES;         /* body follows */
	case K_QUERY:
	case K_DOWNLOAD:
		if ((args = path_args(c, false, &why)) == NULL)
			return respond_error(c, r, 400, "bad_request", NULL, why);
		/* a large file's body comes as its descriptor (reply_descriptor) */
		if (r->rt->kind == K_DOWNLOAD)
			json_object_set_new(args, "descriptor", json_true());
		ret = open_manager(c, r, args);
		json_decref(args);
		if (r->mfd < 0)
			return ret;
		return finish(c, r);
	case K_UPLOAD:
		if ((args = path_args(c, true, &why)) == NULL)
			return respond_error(c, r, 400, "bad_request", NULL, why);
		ret = open_manager(c, r, args);
		json_decref(args);
		return ret;     /* either an error was queued, or the body follows */
	}
	return MHD_NO;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct req *r = *con_cls;
	size_t n = *upload_data_size, off, chunk;
	json_error_t je;
	json_t *args;
	enum MHD_Result ret;

	(void)cls;
	(void)version;
	if (r == NULL)
		return MHD_NO;
	if (!r->started)
		return start_request(c, r, url, method);
	if (r->rt == NULL)
		return MHD_NO;
	if (r->rt->kind == K_UPLOAD) {
		if (n) {
			/* the pieces MHD hands us (a few KiB to tens of KiB)
			 * are gathered into DATA frames of one chunk: every
			 * hop behind moves a chunk per frame (spliced, see
			 * fsplice.h) instead of a frame per piece */
			if (r->ubuf == NULL && !r->upload_broken &&
			    (r->ubuf = malloc(SPACE_CHUNK)) == NULL)
				r->upload_broken = true;
			for (off = 0; off < n && !r->upload_broken; off += chunk) {
				chunk = SPACE_CHUNK - r->ulen;
				if (chunk > n - off)
					chunk = n - off;
				memcpy(r->ubuf + r->ulen, upload_data + off, chunk);
				r->ulen += chunk;
				if (r->ulen == SPACE_CHUNK) {
					if (frame_write(r->mfd, MSG_DATA, r->ubuf, r->ulen) != 0)
						r->upload_broken = true;
					r->ulen = 0;
				}
			}
			/* after a refusal the rest of the body is read and
			 * dropped: MHD cannot answer in the middle of a body */
			*upload_data_size = 0;
			return MHD_YES;
		}
		if (!r->upload_broken && r->ulen > 0 &&
		    frame_write(r->mfd, MSG_DATA, r->ubuf, r->ulen) != 0)
			r->upload_broken = true;
		if (!r->upload_broken)
			frame_write(r->mfd, MSG_END, NULL, 0);
		return finish(c, r);
	}
	if (r->rt->kind == K_JSON) {
		if (n) {
			if (!r->too_large && r->blen + n <= r->rt->body_max) {
				char *nb = realloc(r->body, r->blen + n + 1);
				if (nb == NULL)
					return MHD_NO;
				r->body = nb;
				memcpy(r->body + r->blen, upload_data, n);
				r->blen += n;
			} else
				r->too_large = true;
			*upload_data_size = 0;
			return MHD_YES;
		}
		if (r->too_large)
			return respond_error(c, r, 413, "too_large", NULL, "body too large");
		args = json_loadb(r->body ? r->body : "", r->blen, JSON_REJECT_DUPLICATES, &je);
		if (args == NULL || !json_is_object(args)) {
			json_decref(args);
			return respond_error(c, r, 400, "bad_request", NULL, "body must be a JSON object");
		}
		if (!msg_json_depth_ok(args, SPACE_ARGS_DEPTH_MAX)) {
			json_decref(args);
			return respond_error(c, r, 400, "bad_request", NULL,
			    "body nests arrays and objects too deep");
		}
		/* the process named by the path; one in the body is refused
		 * rather than silently chosen between */
		if (r->has_pid) {
			if (json_object_get(args, "pid") != NULL) {
				json_decref(args);
				return respond_error(c, r, 400, "bad_request", NULL,
				    "the process id is the path's");
			}
			json_object_set_new(args, "pid", json_integer((json_int_t)r->pid));
		}
		/* a start without a WebSocket runs in the background */
		if (strcmp(r->rt->op, "proc.start") == 0) {
			if (json_object_get(args, "attach") != NULL) {
				json_decref(args);
				return respond_error(c, r, 400, "bad_request", NULL,
				    "\"attach\" is not a member here: POST starts in the background");
			}
			json_object_set_new(args, "attach", json_false());
		}
		ret = open_manager(c, r, args);
		json_decref(args);
		if (r->mfd < 0)
			return ret;
		return finish(c, r);
	}
	return MHD_NO;
}

static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req *r = calloc(1, sizeof(*r));

	(void)cls;
	(void)c;
	if (r != NULL) {
		r->uri_len = strlen(uri);
		r->bad_target = !http_target_clean(uri);
		r->mfd = -1;
		r->wake = -1;
	}
	return r;
}

static void
done_cb(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct req *r = *con_cls;

	(void)cls;
	(void)toe;
	/* a kept-alive connection waits for its next head under the same bound */
	headwatch_rearm(heads, c);
	if (r == NULL)
		return;
	dl_watch_end(r);        /* before mfd closes: sbx-manager then lets the lease go */
	if (r->mfd >= 0)
		close(r->mfd);
	ws_free(r->ws);         /* answered, never upgraded */
	free(r->body);
	free(r->ubuf);
	if (r->token) {
		sodium_memzero(r->token, r->token_len);
		free(r->token);
	}
	free(r);
	*con_cls = NULL;
}

static void
conn_cb(void *cls, struct MHD_Connection *c, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	const union MHD_ConnectionInfo *fd, *sa;

	(void)cls;
	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		fd = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		sa = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (fd != NULL) {
			/* a stream to a client that vanished would otherwise
			 * hold its place (and one of the sandbox's operations)
			 * for ever: nothing is read or sent on an idle one */
			(void)tcp_keepalive(fd->connect_fd, ncfg.tcp_keepalive);
			headwatch_open(heads, c, fd->connect_fd, sa ? sa->client_addr : NULL);
		}
	} else {
		headwatch_close(heads, c);      /* before the library closes the socket */
	}
}

struct MHD_Daemon *
http_start(int listen_fd)
{
	/* one watch for both listeners (the TCP port, the local socket):
	 * each takes up to SPACE_HTTP_CONN_MAX connections */
	if (heads == NULL && headwatch_start(ncfg.head_timeout, ncfg.heads_per_ip,
	    2 * SPACE_HTTP_CONN_MAX, &heads) < 0)
		return NULL;
	/* poll(), not select(): an open stream holds two descriptors here,
	 * and select() refuses every connection past FD_SETSIZE (1024), so
	 * streams stopped at about 510 */
	return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_POLL | MHD_USE_ERROR_LOG | MHD_ALLOW_UPGRADE, 0, NULL, NULL, handler, NULL,
	    MHD_OPTION_LISTEN_SOCKET, listen_fd,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)SPACE_HTTP_CONN_MAX,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, ncfg.conns_per_ip,
	    MHD_OPTION_NOTIFY_CONNECTION, conn_cb, NULL,
	    /* bounds the request line and headers too: MHD answers 414/431 */
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64u << 10),
	    MHD_OPTION_CONNECTION_TIMEOUT, 120u,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL,
	    MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
	    MHD_OPTION_END);
}
