/* The E2B sandbox API (envd's protocol, docs/e2b.md "Sandbox API"):
 * Connect RPC with the JSON codec (unary: application/json; server
 * streaming: application/connect+json envelopes), /files and /health.
 * Each call becomes one node-api operation through space_sbx_op() with
 * the caller's X-Access-Token (the per-sandbox access token this API
 * handed out as envdAccessToken, or an API key), so the route cache rules
 * hold: one rebuilt attempt on refresh_route, never a second send of a
 * start, write, rename or remove after a transport failure. Process and
 * watch streams are node-api WebSockets (wslay) turned into Connect
 * envelopes. The Connect calls are one table (rpcs[]): the fields of each
 * message, decoded strictly by one shared path (rpc_call), and the
 * handler that answers it. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <sodium.h>
#include <wslay/wslay.h>

#include "connectrpc.h"
#include "e2b.h"
#include "limits.h"
#include "log.h"
#include "msg_stream.h"
#include "util.h"
#include "wsclient.h"

#define KEEPALIVE_MS    30000   /* a keepalive event when a stream is quiet so long */
#define WS_QUEUE_MAX    (1u << 20)
#define LIST_MAX        10000   /* entries of one ListDir, all depths */

/* one sandbox API call */
struct envd {
	struct e2b_req *r;
	char sbx[SPACE_ID_MAX + 1];
	const char *key;
};

static const char *
jstr(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---- Connect errors ---- */

static unsigned
code_http(const char *code)
{
	static const struct { const char *c; unsigned s; } t[] = {
		{ "invalid_argument", 400 }, { "failed_precondition", 400 }, { "out_of_range", 400 },
		{ "unauthenticated", 401 }, { "permission_denied", 403 }, { "not_found", 404 },
		{ "already_exists", 409 }, { "aborted", 409 }, { "resource_exhausted", 429 },
		{ "canceled", 499 }, { "unimplemented", 501 }, { "unavailable", 503 },
		{ "deadline_exceeded", 504 },
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (!strcmp(t[i].c, code))
			return t[i].s;
	return 500;
}

/* the Connect code of a failed node-api or control-plane answer */
static const char *
code_of(const struct space_answer *a)
{
	switch (a->status) {
	case 0: return "unavailable";
	case 400: return "invalid_argument";
	case 401: return "unauthenticated";
	case 403: return "permission_denied";
	case 404: return "not_found";
	case 409: return !strcmp(a->error, "exists") ? "already_exists" : "failed_precondition";
	case 413: case 429: case 507: return "resource_exhausted";
	case 503: return "unavailable";
	case 504: return "deadline_exceeded";
	default: return "internal";
	}
}

static enum MHD_Result
rpc_error(struct MHD_Connection *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result
rpc_error(struct MHD_Connection *c, const char *code, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return e2b_send_json(c, code_http(code), json_pack("{s:s,s:s}", "code", code,
	    "message", msg));
}

static enum MHD_Result
rpc_fail(struct MHD_Connection *c, const struct space_answer *a)
{
	return rpc_error(c, code_of(a), "%s", e2b_msg_of(a));
}

/* ---- paths and data operations ---- */

/* an absolute path inside the sandbox: relative ones are under the home */
static int
abs_path(const char *p, char *out, size_t cap)
{
	int n;

	if (p == NULL || !*p)
		n = snprintf(out, cap, "%s", E2B_HOME);
	else if (p[0] == '/')
		n = snprintf(out, cap, "%s", p);
	else
		n = snprintf(out, cap, "%s/%s", E2B_HOME, p);
	return n < 0 || (size_t)n >= cap || (size_t)n > SPACE_PATH_MAX ? -1 : 0;
}

static int
dop(struct envd *x, const char *access, const char *method, const char *path, json_t *body,
    int in_fd, int out_fd, long long out_max, struct space_answer *a)
{
	struct space_data_op op;
	struct e2b_cl *cl;
	int r;

	space_answer_init(a);
	if ((cl = e2b_client(x->key)) == NULL) {
		a->status = 503;
		snprintf(a->message, sizeof(a->message), "too many clients at once");
		return -EBUSY;
	}
	memset(&op, 0, sizeof(op));
	op.access = access;
	op.method = method;
	op.path = path;
	op.body = body;
	op.in_fd = in_fd;
	op.out_fd = out_fd;
	op.out_max = out_max;
	op.timeout = 120;
	r = space_sbx_op(e2b_cl_client(cl), x->sbx, &op, a);
	e2b_client_release(cl);
	return r;
}

/* "PREFIX?path=ESC" */
static char *
path_query(const char *prefix, const char *path)
{
	char *esc = space_url_escape(path), *q = NULL;

	if (esc && asprintf(&q, "%s?path=%s", prefix, esc) < 0)
		q = NULL;
	free(esc);
	return q;
}

/* ---- filesystem entries ---- */

static void
perm_string(const char *type, unsigned mode, char out[11])
{
	static const char rwx[] = "rwxrwxrwx";
	int i;

	out[0] = !strcmp(type, "dir") ? 'd' : !strcmp(type, "symlink") ? 'l' : '-';
	for (i = 0; i < 9; i++)
		out[1 + i] = (mode & (0400u >> i)) ? rwx[i] : '-';
	out[10] = '\0';
}

/* space's stat object -> EntryInfo */
static json_t *
entry_info(const json_t *st, const char *path)
{
	const char *type = jstr(st, "type") ? jstr(st, "type") : "other", *slash;
	unsigned mode = (unsigned)json_integer_value(json_object_get(st, "mode")) & 07777;
	char perm[11];
	json_t *o;

	perm_string(type, mode, perm);
	slash = strrchr(path, '/');
	o = json_pack("{s:s,s:s,s:s,s:I,s:I,s:s,s:s,s:s}",
	    "name", jstr(st, "name") ? jstr(st, "name") : (slash ? slash + 1 : path),
	    "type", !strcmp(type, "file") ? "FILE_TYPE_FILE" : !strcmp(type, "dir") ?
	    "FILE_TYPE_DIRECTORY" : !strcmp(type, "symlink") ? "FILE_TYPE_SYMLINK" :
	    "FILE_TYPE_UNSPECIFIED",
	    "path", path, "size", json_integer_value(json_object_get(st, "size")),
	    "mode", (json_int_t)mode, "permissions", perm, "owner", "user", "group", "user");
	if (o && jstr(st, "mtime"))
		json_object_set_new(o, "modifiedTime", json_string(jstr(st, "mtime")));
	return o;
}

static int
stat_path(struct envd *x, const char *path, struct space_answer *a)
{
	char *q = path_query("fs/stat", path);
	int r;

	if (q == NULL) {
		space_answer_init(a);
		return -ENOMEM;
	}
	r = dop(x, "fs:r", "GET", q, NULL, -1, -1, 0, a);
	free(q);
	return r < 0 || !space_answer_ok(a) ? -1 : 0;
}

/* ---- unary calls ----
 * Each handler gets the call's message, already decoded strictly with the
 * fields its row of the table allows (rpcs[] below), and answers. */

/* the message of a unary call: a JSON object with only keys */
static json_t *
unary_in(struct envd *x, const char *const *keys, enum MHD_Result *ret)
{
	const char *ct = MHD_lookup_connection_value(x->r->conn, MHD_HEADER_KIND, "Content-Type");
	const char *why = NULL;
	json_t *in;

	if (ct == NULL || strncasecmp(ct, "application/json", 16) != 0) {
		*ret = e2b_send_json(x->r->conn, 415, json_pack("{s:s,s:s}", "code",
		    "invalid_argument", "message", "a unary call is application/json"));
		return NULL;
	}
	if ((in = e2b_parse(x->r->body, x->r->body_len, &why)) == NULL) {
		*ret = rpc_error(x->r->conn, "invalid_argument", "%s", why);
		return NULL;
	}
	if (!e2b_only_keys(in, keys, &why)) {
		*ret = rpc_error(x->r->conn, "invalid_argument", "unknown field \"%s\"", why);
		json_decref(in);
		return NULL;
	}
	return in;
}

/* the path in field key of in, made absolute: 0, or -1 (absent when
 * required, or too long) */
static int
arg_path(const json_t *in, const char *key, bool required, char out[SPACE_PATH_MAX + 1])
{
	const char *p = jstr(in, key);

	if (required && p == NULL)
		return -1;
	return abs_path(p, out, SPACE_PATH_MAX + 1);
}

/* after a change: the entry at path, as the answer's "entry" */
static enum MHD_Result
entry_answer(struct envd *x, const char *path)
{
	struct space_answer a;
	enum MHD_Result ret;

	if (stat_path(x, path, &a) < 0)
		ret = rpc_fail(x->r->conn, &a);
	else
		ret = e2b_send_json(x->r->conn, 200, json_pack("{s:o}", "entry",
		    entry_info(a.body, path)));
	space_answer_clear(&a);
	return ret;
}

/* one node-api change (body stolen), answered with the entry at
 * entry_of, or with {} when entry_of is NULL */
static enum MHD_Result
op_answer(struct envd *x, const char *access, const char *path, json_t *body,
    const char *entry_of)
{
	struct space_answer a;
	enum MHD_Result ret;

	if (dop(x, access, "POST", path, body, -1, -1, 0, &a) < 0 || !space_answer_ok(&a))
		ret = rpc_fail(x->r->conn, &a);
	else if (entry_of)
		ret = entry_answer(x, entry_of);
	else
		ret = e2b_send(x->r->conn, 200, "application/json", "{}", 2);
	json_decref(body);
	space_answer_clear(&a);
	return ret;
}

static enum MHD_Result
fs_stat(struct envd *x, const json_t *in)
{
	char path[SPACE_PATH_MAX + 1];

	if (arg_path(in, "path", false, path) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "path too long");
	return entry_answer(x, path);
}

static int
list_into(struct envd *x, const char *dir, unsigned depth, json_t *out, struct space_answer *a)
{
	char *q = path_query("fs/list", dir);
	json_t *ents, *e, *body;
	size_t i;
	int r;

	if (q == NULL)
		return -1;
	r = dop(x, "fs:r", "GET", q, NULL, -1, -1, 0, a);
	free(q);
	if (r < 0 || !space_answer_ok(a))
		return -1;
	body = json_incref(a->body);
	space_answer_clear(a);
	ents = json_object_get(body, "entries");
	json_array_foreach(ents, i, e) {
		char p[SPACE_PATH_MAX + 1];
		const char *name = jstr(e, "name");
		int n;

		if (name == NULL || json_array_size(out) >= LIST_MAX)
			continue;
		n = snprintf(p, sizeof(p), "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/",
		    name);
		if (n < 0 || (size_t)n >= sizeof(p))
			continue;
		json_array_append_new(out, entry_info(e, p));
		if (depth > 1 && jstr(e, "type") && !strcmp(jstr(e, "type"), "dir") &&
		    list_into(x, p, depth - 1, out, a) < 0) {
			json_decref(body);
			return -1;
		}
	}
	json_decref(body);
	return 0;
}

static enum MHD_Result
fs_list(struct envd *x, const json_t *in)
{
	const json_t *d = json_object_get(in, "depth");
	char path[SPACE_PATH_MAX + 1];
	struct space_answer a;
	enum MHD_Result ret;
	json_int_t depth = 1;
	json_t *out;

	if (d && !(json_is_integer(d) && json_integer_value(d) >= 0 && json_integer_value(d) <= 16))
		return rpc_error(x->r->conn, "invalid_argument", "depth must be 1..16");
	if (d && json_integer_value(d) > 0)
		depth = json_integer_value(d);
	if (arg_path(in, "path", false, path) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "path too long");
	space_answer_init(&a);
	out = json_array();
	if (list_into(x, path, (unsigned)depth, out, &a) < 0)
		ret = rpc_fail(x->r->conn, &a);
	else
		ret = e2b_send_json(x->r->conn, 200, json_pack("{s:O}", "entries", out));
	json_decref(out);
	space_answer_clear(&a);
	return ret;
}

static enum MHD_Result
fs_mkdir(struct envd *x, const json_t *in)
{
	char path[SPACE_PATH_MAX + 1];
	struct space_answer a;
	enum MHD_Result ret;

	if (arg_path(in, "path", false, path) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "path too long");
	/* envd's MakeDir: parents made, an existing one is already_exists */
	if (stat_path(x, path, &a) == 0) {
		space_answer_clear(&a);
		return rpc_error(x->r->conn, "already_exists", "%s already exists", path);
	}
	if (a.status != 404) {
		ret = rpc_fail(x->r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	space_answer_clear(&a);
	return op_answer(x, "fs:w", "fs/mkdir", json_pack("{s:s,s:b}", "path", path, "parents", 1),
	    path);
}

static enum MHD_Result
fs_move(struct envd *x, const json_t *in)
{
	char from[SPACE_PATH_MAX + 1], to[SPACE_PATH_MAX + 1];

	if (arg_path(in, "source", true, from) < 0 || arg_path(in, "destination", true, to) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "source and destination are paths");
	return op_answer(x, "fs:w", "fs/rename", json_pack("{s:s,s:s}", "from", from, "to", to), to);
}

static enum MHD_Result
fs_remove(struct envd *x, const json_t *in)
{
	char path[SPACE_PATH_MAX + 1];

	if (arg_path(in, "path", true, path) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "path is required");
	return op_answer(x, "fs:w", "fs/remove", json_pack("{s:s,s:b}", "path", path,
	    "recursive", 1), NULL);
}

/* ProcessSelector -> pid; only pids (space's processes have no tags) */
static long
selector_pid(const json_t *in)
{
	const json_t *p = json_object_get(in, "process"), *pid;
	static const char *const keys[] = { "pid", "tag", NULL };

	if (!e2b_only_keys(p, keys, NULL))
		return -1;
	pid = json_object_get(p, "pid");
	if (!json_is_integer(pid) || json_integer_value(pid) < 1 ||
	    json_integer_value(pid) > 2147483647)
		return -1;
	return (long)json_integer_value(pid);
}

static enum MHD_Result
proc_list(struct envd *x, const json_t *in)
{
	struct space_answer a;
	enum MHD_Result ret;
	json_t *out, *p;
	size_t i;

	(void)in;
	if (dop(x, "exec", "GET", "processes", NULL, -1, -1, 0, &a) < 0 || !space_answer_ok(&a)) {
		ret = rpc_fail(x->r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	out = json_array();
	json_array_foreach(json_object_get(a.body, "processes"), i, p) {
		const json_t *argv = json_object_get(p, "argv"), *v;
		json_t *args = json_array(), *cfg;
		size_t j;

		if (!jstr(p, "state") || strcmp(jstr(p, "state"), "running") != 0 ||
		    !json_is_array(argv) || json_array_size(argv) == 0) {
			json_decref(args);
			continue;
		}
		json_array_foreach(argv, j, v)
			if (j > 0 && json_is_string(v))
				json_array_append(args, (json_t *)v);
		cfg = json_pack("{s:O,s:o,s:{}}", "cmd", json_array_get(argv, 0), "args", args,
		    "envs");
		json_array_append_new(out, json_pack("{s:o,s:O}", "config", cfg, "pid",
		    json_object_get(p, "pid")));
	}
	space_answer_clear(&a);
	return e2b_send_json(x->r->conn, 200, json_pack("{s:o}", "processes", out));
}

/* SendInput, CloseStdin, SendSignal, Update: one POST on processes/{pid},
 * the selected process; *pid, or an answer */
static bool
proc_selected(struct envd *x, const json_t *in, long *pid, enum MHD_Result *ret)
{
	if ((*pid = selector_pid(in)) >= 0)
		return true;
	*ret = rpc_error(x->r->conn, json_object_get(json_object_get(in, "process"), "tag") ?
	    "not_found" : "invalid_argument", "a process is selected by its pid");
	return false;
}

static enum MHD_Result
proc_input(struct envd *x, const json_t *in)
{
	const json_t *inp = json_object_get(in, "input"), *v;
	enum MHD_Result ret;
	char path[64];
	long pid;

	if (!proc_selected(x, in, &pid, &ret))
		return ret;
	v = json_object_get(inp, "stdin") ? json_object_get(inp, "stdin") :
	    json_object_get(inp, "pty");
	if (!json_is_string(v) || json_object_size(inp) != 1)
		return rpc_error(x->r->conn, "invalid_argument", "input is stdin or pty bytes");
	snprintf(path, sizeof(path), "processes/%ld/stdin", pid);
	return op_answer(x, "exec", path, json_pack("{s:O}", "data_b64", v), NULL);
}

static enum MHD_Result
proc_close_stdin(struct envd *x, const json_t *in)
{
	enum MHD_Result ret;
	char path[64];
	long pid;

	if (!proc_selected(x, in, &pid, &ret))
		return ret;
	snprintf(path, sizeof(path), "processes/%ld/stdin", pid);
	return op_answer(x, "exec", path, json_pack("{s:b}", "eof", 1), NULL);
}

static enum MHD_Result
proc_signal(struct envd *x, const json_t *in)
{
	const json_t *v = json_object_get(in, "signal");
	enum MHD_Result ret;
	char path[64];
	int sig = 0;
	long pid;

	if (!proc_selected(x, in, &pid, &ret))
		return ret;
	if (json_is_string(v))
		sig = !strcmp(json_string_value(v), "SIGNAL_SIGKILL") ? 9 :
		    !strcmp(json_string_value(v), "SIGNAL_SIGTERM") ? 15 : 0;
	else if (json_is_integer(v) && (json_integer_value(v) == 9 || json_integer_value(v) == 15))
		sig = (int)json_integer_value(v);
	if (sig == 0)
		return rpc_error(x->r->conn, "invalid_argument", "signal is SIGKILL or SIGTERM");
	snprintf(path, sizeof(path), "processes/%ld/signal", pid);
	return op_answer(x, "exec", path, json_pack("{s:i}", "signal", sig), NULL);
}

/* pty.size {rows, cols}: 0, or -1 out of 1..4096 */
static int
pty_size(const json_t *sz, json_int_t *rows, json_int_t *cols)
{
	*rows = json_integer_value(json_object_get(sz, "rows"));
	*cols = json_integer_value(json_object_get(sz, "cols"));
	return *rows < 1 || *rows > 4096 || *cols < 1 || *cols > 4096 ? -1 : 0;
}

static enum MHD_Result
proc_update(struct envd *x, const json_t *in)
{
	json_int_t rows, cols;
	enum MHD_Result ret;
	char path[64];
	long pid;

	if (!proc_selected(x, in, &pid, &ret))
		return ret;
	if (pty_size(json_object_get(json_object_get(in, "pty"), "size"), &rows, &cols) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "pty.size rows and cols are 1..4096");
	snprintf(path, sizeof(path), "processes/%ld/resize", pid);
	return op_answer(x, "exec", path, json_pack("{s:I,s:I}", "rows", rows, "cols", cols), NULL);
}

/* ---- server streams: node-api WebSocket -> Connect envelopes ---- */

struct qmsg {
	struct qmsg *next;
	bool text;
	size_t len;
	uint8_t data[];
};

struct wstream {
	struct wsc w;
	wslay_event_context_ptr ctx;
	struct qmsg *head, *tail;
	size_t queued;
	bool closed, watch, started, ended;
	uint16_t close_code;
	char watch_root[SPACE_PATH_MAX + 1];
	/* output not yet given to MHD */
	uint8_t *out;
	size_t out_len, out_off;
	char early_err[600];            /* the open failed: its end-stream error JSON */
};

static ssize_t
ws_recv(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *user)
{
	struct wstream *s = user;
	ssize_t n;

	(void)flags;
	if (s->queued > WS_QUEUE_MAX) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (s->w.pre_off < s->w.pre_len) {
		n = (ssize_t)(s->w.pre_len - s->w.pre_off < len ? s->w.pre_len - s->w.pre_off : len);
		memcpy(buf, s->w.pre + s->w.pre_off, (size_t)n);
		s->w.pre_off += (size_t)n;
		return n;
	}
	n = recv(s->w.fd, buf, len, MSG_DONTWAIT);
	if (n > 0)
		return n;
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static ssize_t
ws_send(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags, void *user)
{
	struct wstream *s = user;
	ssize_t n;

	(void)flags;
	n = send(s->w.fd, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n >= 0)
		return n;
	wslay_event_set_error(ctx, errno == EAGAIN || errno == EWOULDBLOCK ?
	    WSLAY_ERR_WOULDBLOCK : WSLAY_ERR_CALLBACK_FAILURE);
	return -1;
}

static int
ws_mask(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *user)
{
	(void)ctx; (void)user;
	randombytes_buf(buf, len);
	return 0;
}

static void
ws_msg(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg, void *user)
{
	struct wstream *s = user;
	struct qmsg *m;

	(void)ctx;
	if (arg->opcode == WSLAY_CONNECTION_CLOSE) {
		s->closed = true;
		s->close_code = arg->status_code;
		return;
	}
	if (arg->opcode != WSLAY_TEXT_FRAME && arg->opcode != WSLAY_BINARY_FRAME)
		return;
	if ((m = malloc(sizeof(*m) + arg->msg_length + 1)) == NULL) {
		s->closed = true;
		return;
	}
	m->next = NULL;
	m->text = arg->opcode == WSLAY_TEXT_FRAME;
	m->len = arg->msg_length;
	memcpy(m->data, arg->msg, arg->msg_length);
	m->data[m->len] = '\0';
	if (s->tail)
		s->tail->next = m;
	else
		s->head = m;
	s->tail = m;
	s->queued += m->len;
}

/* waits for the next message: 0 one is queued, 1 quiet for KEEPALIVE_MS,
 * -1 the stream is closed */
static int
ws_next(struct wstream *s)
{
	while (s->head == NULL) {
		if (s->closed)
			return -1;
		if (s->w.pre_off >= s->w.pre_len) {
			struct pollfd pfd = { .fd = s->w.fd, .events = POLLIN };
			int n = poll(&pfd, 1, KEEPALIVE_MS);
			if (n == 0)
				return 1;
			if (n < 0 && errno != EINTR)
				s->closed = true;
		}
		if (wslay_event_recv(s->ctx) != 0 || !wslay_event_want_read(s->ctx))
			s->closed = true;
		(void)wslay_event_send(s->ctx);
	}
	return 0;
}

/* appends one envelope (connectrpc.h) of o's JSON to s->out */
static int
envelope(struct wstream *s, uint8_t flags, json_t *o)
{
	char *j = json_dumps(o, JSON_COMPACT);
	uint8_t *env = NULL, *nb;
	size_t n;

	json_decref(o);
	if (j == NULL || connect_env_encode(flags, j, strlen(j), &env, &n) < 0) {
		free(j);
		return -1;
	}
	free(j);
	if ((nb = realloc(s->out, s->out_len + n)) == NULL) {
		free(env);
		return -1;
	}
	s->out = nb;
	memcpy(nb + s->out_len, env, n);
	s->out_len += n;
	free(env);
	return 0;
}

static void
end_stream(struct wstream *s, const char *code, const char *msg)
{
	if (s->ended)
		return;
	s->ended = true;
	if (code)
		envelope(s, 2, json_pack("{s:{s:s,s:s}}", "error", "code", code, "message", msg));
	else
		envelope(s, 2, json_object());
}

static json_t *
b64_of(const uint8_t *d, size_t n)
{
	size_t cap = sodium_base64_encoded_len(n, sodium_base64_VARIANT_ORIGINAL);
	char *b = malloc(cap);
	json_t *j;

	if (b == NULL)
		return NULL;
	sodium_bin2base64(b, cap, d, n, sodium_base64_VARIANT_ORIGINAL);
	j = json_string(b);
	free(b);
	return j;
}

static const char *
event_type(enum stream_event t)
{
	switch (t) {
	case STREAM_EV_CREATE: return "EVENT_TYPE_CREATE";
	case STREAM_EV_WRITE: return "EVENT_TYPE_WRITE";
	case STREAM_EV_REMOVE: return "EVENT_TYPE_REMOVE";
	case STREAM_EV_RENAME: return "EVENT_TYPE_RENAME";
	case STREAM_EV_CHMOD: return "EVENT_TYPE_CHMOD";
	default: return NULL;
	}
}

/* a watch event's path relative to the watched directory */
static const char *
rel(const struct wstream *s, const char *p)
{
	size_t n = strlen(s->watch_root);

	if (strncmp(p, s->watch_root, n) == 0 && p[n] == '/')
		return p + n + 1;
	return p;
}

/* a file the guest writes goes into a temporary one beside it: an
 * anonymous one first (O_TMPFILE, whose events the kernel names #INODE),
 * linked as .NAME.space-XXXXXX, renamed into place once whole (op_fs.c) */
static bool
is_temp(const char *path)
{
	const char *b = strrchr(path, '/'), *suf;
	size_t n, i;

	b = b ? b + 1 : path;
	n = strlen(b);
	if (b[0] == '#' && n > 1 && strspn(b + 1, "0123456789") == n - 1)
		return true;
	if (b[0] != '.' || n < 1 + 1 + 7 + 6)
		return false;
	suf = b + n - 13;
	if (strncmp(suf, ".space-", 7) != 0)
		return false;
	for (i = 7; i < 13; i++)
		if (!((suf[i] >= 'a' && suf[i] <= 'z') || (suf[i] >= 'A' && suf[i] <= 'Z') ||
		    (suf[i] >= '0' && suf[i] <= '9')))
			return false;
	return true;
}

/* one event of the guest as E2B's events ({"name","type"}) into out: a
 * file written through the API is what envd reports for it (a create,
 * a write), not the temporary file's create, change and rename */
static void
watch_events(const struct wstream *s, const struct msg_stream *ms, json_t *out)
{
	const char *t = event_type(ms->event.type);

	if (is_temp(ms->event.path)) {
		if (ms->event.type == STREAM_EV_RENAME && ms->event.to[0] && !is_temp(ms->event.to)) {
			json_array_append_new(out, json_pack("{s:s,s:s}", "name",
			    rel(s, ms->event.to), "type", "EVENT_TYPE_CREATE"));
			json_array_append_new(out, json_pack("{s:s,s:s}", "name",
			    rel(s, ms->event.to), "type", "EVENT_TYPE_WRITE"));
		}
		return;
	}
	if (t)
		json_array_append_new(out, json_pack("{s:s,s:s}", "name", rel(s, ms->event.path),
		    "type", t));
	if (ms->event.type == STREAM_EV_RENAME && ms->event.to[0])
		json_array_append_new(out, json_pack("{s:s,s:s}", "name", rel(s, ms->event.to),
		    "type", "EVENT_TYPE_CREATE"));
}

/* turns the next message (or a quiet spell) into envelopes */
static void
produce(struct wstream *s)
{
	struct qmsg *m;
	int r;

	if (s->ended)
		return;
	if ((r = ws_next(s)) == 1) {
		envelope(s, 0, s->watch ? json_pack("{s:{}}", "keepalive") :
		    json_pack("{s:{s:{}}}", "event", "keepalive"));
		return;
	}
	if (r < 0) {
		if (s->close_code == 4409)
			end_stream(s, "unavailable", "the sandbox's execution was replaced (moved, "
			    "paused or killed); connect again");
		else if (s->close_code == 1000 || s->close_code == 4410)
			end_stream(s, NULL, NULL);
		else
			end_stream(s, "unavailable", "the stream ended unexpectedly");
		return;
	}
	m = s->head;
	s->head = m->next;
	if (s->head == NULL)
		s->tail = NULL;
	s->queued -= m->len;
	if (m->text) {
		/* the first message: {"result":{...}} */
		json_t *o = json_loadb((const char *)m->data, m->len, JSON_REJECT_DUPLICATES, NULL);
		json_t *res = json_object_get(o, "result");
		if (!s->started && json_is_object(res)) {
			s->started = true;
			if (s->watch)
				envelope(s, 0, json_pack("{s:{}}", "start"));
			else if (json_is_integer(json_object_get(res, "pid")))
				envelope(s, 0, json_pack("{s:{s:{s:O}}}", "event", "start", "pid",
				    json_object_get(res, "pid")));
			else
				end_stream(s, "internal", "no pid in the start answer");
		}
		json_decref(o);
	} else {
		struct msg_stream ms;
		const char *why = NULL;

		if (msg_stream_decode(m->data, m->len, STREAM_OUT, &ms, &why) < 0)
			end_stream(s, "internal", "a malformed stream message from the sandbox");
		else if (ms.kind == STREAM_STDOUT || ms.kind == STREAM_STDERR || ms.kind == STREAM_PTY)
			envelope(s, 0, json_pack("{s:{s:{s:o}}}", "event", "data",
			    ms.kind == STREAM_STDOUT ? "stdout" : ms.kind == STREAM_STDERR ? "stderr" :
			    "pty", b64_of(ms.data, ms.len)));
		else if (ms.kind == STREAM_EXIT) {
			char st[64];
			json_t *end;
			if (ms.exit.signal)
				snprintf(st, sizeof(st), "signal: %u", ms.exit.signal);
			else
				snprintf(st, sizeof(st), "exit status %u", ms.exit.exit_code);
			end = json_pack("{s:i,s:b,s:s}", "exitCode", ms.exit.signal ? -1 :
			    (int)ms.exit.exit_code, "exited", ms.exit.signal == 0, "status", st);
			if (ms.exit.timed_out)
				json_object_set_new(end, "error", json_string("timed out"));
			else if (ms.exit.oom_killed)
				json_object_set_new(end, "error", json_string("killed: out of memory"));
			else if (ms.exit.signal)
				json_object_set_new(end, "error", json_string(st));
			envelope(s, 0, json_pack("{s:{s:o}}", "event", "end", end));
		} else if (ms.kind == STREAM_EVENT && s->watch) {
			json_t *evs = json_array(), *e;
			size_t i;

			if (evs != NULL)
				watch_events(s, &ms, evs);
			json_array_foreach(evs, i, e)
				envelope(s, 0, json_pack("{s:O}", "filesystem", e));
			json_decref(evs);
		}
	}
	free(m);
}

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct wstream *s = cls;
	size_t n;

	(void)pos;
	while (s->out_off >= s->out_len) {
		s->out_off = s->out_len = 0;
		if (s->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		produce(s);
	}
	n = s->out_len - s->out_off < max ? s->out_len - s->out_off : max;
	memcpy(buf, s->out + s->out_off, n);
	s->out_off += n;
	return (ssize_t)n;
}

static void
stream_free(void *cls)
{
	struct wstream *s = cls;
	struct qmsg *m;

	if (s->ctx)
		wslay_event_context_free(s->ctx);
	wsc_close(&s->w);
	while ((m = s->head) != NULL) {
		s->head = m->next;
		free(m);
	}
	free(s->out);
	free(s);
}

static enum MHD_Result
stream_answer(struct MHD_Connection *c, struct wstream *s)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32u << 10, stream_read, s,
	    stream_free);
	if (resp == NULL) {
		stream_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/connect+json");
	ret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* the one message of a server-streaming call, from its envelope */
static json_t *
stream_in(struct envd *x, const char *const *keys, const char **why)
{
	const char *ct = MHD_lookup_connection_value(x->r->conn, MHD_HEADER_KIND, "Content-Type");
	const uint8_t *b = (const uint8_t *)x->r->body, *msg = NULL;
	size_t len = 0;

	if (ct == NULL || strncasecmp(ct, "application/connect+json", 24) != 0) {
		*why = "a streaming call is application/connect+json";
		return NULL;
	}
	if (connect_env_decode(b, x->r->body_len, &msg, &len, why) < 0)
		return NULL;
	return connect_json_object(msg, len, keys, why);
}

/* opens a node-api WebSocket at path into s: 0, or -1 with a filled */
static int
ws_connect(struct envd *x, const char *access, bool start, const char *path,
    struct wstream *s, struct space_answer *a)
{
	static const struct wslay_event_callbacks cb = { ws_recv, ws_send, ws_mask, NULL, NULL,
	    NULL, ws_msg };
	struct space_data_op op;
	struct e2b_cl *cl;
	int r;

	space_answer_init(a);
	if ((cl = e2b_client(x->key)) == NULL) {
		a->status = 503;
		snprintf(a->message, sizeof(a->message), "too many clients at once");
		return -1;
	}
	memset(&op, 0, sizeof(op));
	op.access = access;
	op.method = start ? "POST" : "GET";     /* a start is never sent twice */
	op.path = path;
	op.in_fd = op.out_fd = -1;
	op.open_ws = wsc_open;
	op.ws_ctx = &s->w;
	r = space_sbx_op(e2b_cl_client(cl), x->sbx, &op, a);
	e2b_client_release(cl);
	if (r < 0 || a->status != 101) {
		if (a->status == 101)
			a->status = 0;
		return -1;
	}
	if (wslay_event_context_client_init(&s->ctx, &cb, s) != 0) {
		s->ctx = NULL;
		a->status = 500;
		snprintf(a->message, sizeof(a->message), "out of memory");
		return -1;
	}
	return 0;
}

/* opens a node-api stream at path; the answer is the Connect stream */
static enum MHD_Result
open_stream(struct envd *x, const char *access, bool start, const char *path, bool watch,
    const char *root)
{
	struct wstream *s = calloc(1, sizeof(*s));
	struct space_answer a;

	if (s == NULL)
		return MHD_NO;
	s->w.fd = -1;
	s->watch = watch;
	if (root)
		snprintf(s->watch_root, sizeof(s->watch_root), "%s", root);
	if (ws_connect(x, access, start, path, s, &a) < 0)
		end_stream(s, code_of(&a), e2b_msg_of(&a));
	space_answer_clear(&a);
	return stream_answer(x->r->conn, s);
}

static int envs_of(struct envd *x, json_t **out, struct space_answer *a);

static enum MHD_Result
proc_start(struct envd *x, const json_t *in)
{
	static const char *const pkeys[] = { "cmd", "args", "envs", "cwd", NULL };
	const char *why = NULL, *k;
	char cwd[SPACE_PATH_MAX + 1], *args_s = NULL, *esc = NULL, *path = NULL;
	const json_t *p = json_object_get(in, "process"), *v, *env, *size;
	json_t *argv, *args, *menv = NULL;
	json_int_t rows = 0, cols = 0;
	bool pty = false;
	enum MHD_Result ret;
	size_t i;

	if (!e2b_only_keys(p, pkeys, &why) || !jstr(p, "cmd") || !*jstr(p, "cmd"))
		return rpc_error(x->r->conn, "invalid_argument", "process.cmd is required");
	json_array_foreach(json_object_get(p, "args"), i, v)
		if (!json_is_string(v))
			return rpc_error(x->r->conn, "invalid_argument", "process.args are strings");
	env = json_object_get(p, "envs");
	json_object_foreach((json_t *)env, k, v)
		if (!json_is_string(v))
			return rpc_error(x->r->conn, "invalid_argument", "envs are strings");
	if (jstr(p, "cwd") && *jstr(p, "cwd") && arg_path(p, "cwd", true, cwd) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "cwd too long");
	size = json_object_get(json_object_get(in, "pty"), "size");
	if (size && pty_size(size, &rows, &cols) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "pty.size rows and cols are 1..4096");
	/* the sandbox's environment of its create, the command's over it */
	{
		struct space_answer ea;
		json_t *base;

		if (envs_of(x, &base, &ea) < 0) {
			ret = rpc_fail(x->r->conn, &ea);
			space_answer_clear(&ea);
			return ret;
		}
		space_answer_clear(&ea);
		if (base != NULL) {
			json_t *m = json_deep_copy(base);

			json_decref(base);
			if (m == NULL || (json_is_object(env) && json_object_update(m, (json_t *)env) < 0)) {
				json_decref(m);
				return rpc_error(x->r->conn, "internal", "out of memory");
			}
			menv = m;
		}
	}
	argv = json_array();
	json_array_append_new(argv, json_string(jstr(p, "cmd")));
	json_array_foreach(json_object_get(p, "args"), i, v)
		json_array_append(argv, (json_t *)v);
	args = json_pack("{s:o}", "argv", argv);
	if (menv != NULL) {
		if (json_object_size(menv) > 0)
			json_object_set(args, "env", menv);
		json_decref(menv);
	} else if (json_is_object(env) && json_object_size(env) > 0)
		json_object_set(args, "env", (json_t *)env);
	if (jstr(p, "cwd") && *jstr(p, "cwd"))
		json_object_set_new(args, "cwd", json_string(cwd));
	if (json_is_true(json_object_get(in, "stdin")))
		json_object_set_new(args, "stdin", json_true());
	if (size) {
		json_object_set_new(args, "pty", json_pack("{s:I,s:I}", "rows", rows, "cols", cols));
		pty = true;
	}
	args_s = json_dumps(args, JSON_COMPACT);
	json_decref(args);
	if (args_s == NULL || (esc = space_url_escape(args_s)) == NULL ||
	    asprintf(&path, "processes/stream?args=%s", esc) < 0)
		path = NULL;
	free(args_s);
	free(esc);
	if (path == NULL)
		return rpc_error(x->r->conn, "internal", "out of memory");
	ret = open_stream(x, pty ? "exec,pty" : "exec", true, path, false, NULL);
	free(path);
	return ret;
}

static enum MHD_Result
proc_connect(struct envd *x, const json_t *in)
{
	char path[64];
	long pid;

	if ((pid = selector_pid(in)) < 0)
		return rpc_error(x->r->conn, "invalid_argument", "a process is selected by its pid");
	snprintf(path, sizeof(path), "processes/%ld/stream", pid);
	return open_stream(x, "exec", false, path, false, NULL);
}

/* "watch?path=ROOT[&recursive=true]" of a WatchDir or CreateWatcher
 * message; NULL with *why */
static char *
watch_query(const json_t *in, char root[SPACE_PATH_MAX + 1], const char **why)
{
	char *q = NULL, *esc;

	if (arg_path(in, "path", false, root) < 0) {
		*why = "path too long";
		return NULL;
	}
	if ((esc = space_url_escape(root)) == NULL ||
	    asprintf(&q, "watch?path=%s%s", esc, json_is_true(json_object_get(in, "recursive")) ?
	    "&recursive=true" : "") < 0)
		q = NULL;
	free(esc);
	if (q == NULL)
		*why = "out of memory";
	return q;
}

static enum MHD_Result
fs_watch(struct envd *x, const json_t *in)
{
	char root[SPACE_PATH_MAX + 1], *q;
	const char *why = NULL;
	enum MHD_Result ret;

	if ((q = watch_query(in, root, &why)) == NULL)
		return rpc_error(x->r->conn, strcmp(why, "out of memory") ? "invalid_argument" :
		    "internal", "%s", why);
	ret = open_stream(x, "watch", false, q, true, root);
	free(q);
	return ret;
}
/* ---- the polling watcher: CreateWatcher, GetWatcherEvents, RemoveWatcher ----
 * A watcher is a node-api watch stream that space-edge reads in a thread
 * of its own into a bounded queue; the caller collects the queue. It is
 * bound to the key and sandbox that made it (another key's id is
 * not_found) and ends with RemoveWatcher, its stream, or space-edge. */

#define WATCHERS_MAX            64
#define WATCHERS_PER_KEY        8
#define WATCHERS_PER_SBX        8       /* keys cost nothing to make: a sandbox's bound too */
#define WATCHER_EVENTS_MAX      1024
#define WATCHER_IDLE_MS         (300 * 1000)    /* not asked for its events that long: abandoned */

struct watcher {
	char id[33];
	uint8_t key[32];
	char sbx[SPACE_ID_MAX + 1];
	struct wstream *s;
	json_t *events;                 /* array, at most WATCHER_EVENTS_MAX */
	bool overflow, ended, removed, used;
	uint16_t close_code;
	uint64_t polled;                /* made or last asked for its events (monotonic ms) */
};

static struct watcher watchers[WATCHERS_MAX];
static pthread_mutex_t watch_mu = PTHREAD_MUTEX_INITIALIZER;

static void
key_hash(const char *key, uint8_t out[32])
{
	crypto_generichash(out, 32, (const uint8_t *)key, strlen(key), NULL, 0);
}

static void
watcher_push(struct watcher *w, json_t *ev)
{
	if (json_array_size(w->events) >= WATCHER_EVENTS_MAX) {
		w->overflow = true;
		json_decref(ev);
		return;
	}
	json_array_append_new(w->events, ev);
}

static void *
watcher_main(void *arg)
{
	struct watcher *w = arg;
	struct wstream *s = w->s;
	struct qmsg *m;
	int r;

	for (;;) {
		if ((r = ws_next(s)) == 1)
			continue;
		if (r < 0)
			break;
		m = s->head;
		s->head = m->next;
		if (s->head == NULL)
			s->tail = NULL;
		s->queued -= m->len;
		if (!m->text) {
			struct msg_stream ms;
			const char *why = NULL;
			if (msg_stream_decode(m->data, m->len, STREAM_OUT, &ms, &why) == 0 &&
			    ms.kind == STREAM_EVENT) {
				json_t *evs = json_array(), *e;
				size_t i;

				if (evs != NULL)
					watch_events(s, &ms, evs);
				pthread_mutex_lock(&watch_mu);
				json_array_foreach(evs, i, e)
					watcher_push(w, json_incref(e));
				if (ms.event.type == STREAM_EV_OVERFLOW)
					w->overflow = true;
				pthread_mutex_unlock(&watch_mu);
				json_decref(evs);
			}
		}
		free(m);
	}
	pthread_mutex_lock(&watch_mu);
	w->ended = true;
	w->close_code = s->close_code;
	if (w->removed) {
		json_decref(w->events);
		memset(w, 0, sizeof(*w));
	}
	pthread_mutex_unlock(&watch_mu);
	stream_free(s);
	return NULL;
}

static struct watcher *
watcher_find(struct envd *x, const char *id)
{
	uint8_t h[32];
	size_t i;

	key_hash(x->key, h);
	/* a slot reserved by a create still connecting has no id nor
	 * stream yet: nobody else's call may find it (its empty id) */
	for (i = 0; i < WATCHERS_MAX; i++)
		if (watchers[i].used && watchers[i].s != NULL && watchers[i].id[0] != '\0' &&
		    !watchers[i].removed && !strcmp(watchers[i].id, id) &&
		    sodium_memcmp(watchers[i].key, h, 32) == 0 && !strcmp(watchers[i].sbx, x->sbx))
			return &watchers[i];
	return NULL;
}

static enum MHD_Result
watcher_create(struct envd *x, const json_t *in)
{
	char root[SPACE_PATH_MAX + 1], *q;
	const char *why = NULL;
	struct watcher *w = NULL;
	struct wstream *s;
	struct space_answer a;
	enum MHD_Result ret;
	unsigned mine = 0, here = 0;
	uint8_t h[32], rnd[16];
	uint64_t now;
	pthread_attr_t attr;
	pthread_t t;
	size_t i;

	if ((q = watch_query(in, root, &why)) == NULL)
		return rpc_error(x->r->conn, strcmp(why, "out of memory") ? "invalid_argument" :
		    "internal", "%s", why);
	key_hash(x->key, h);
	now = now_mono_ns() / 1000000;
	pthread_mutex_lock(&watch_mu);
	/* a watcher nobody asked for its events for WATCHER_IDLE_MS was
	 * abandoned: removed as RemoveWatcher would (its slot frees when its
	 * thread ends) */
	for (i = 0; i < WATCHERS_MAX; i++) {
		struct watcher *o = &watchers[i];

		if (!o->used || o->removed || o->s == NULL || now - o->polled < WATCHER_IDLE_MS)
			continue;
		o->removed = true;
		if (o->ended) {
			json_decref(o->events);
			memset(o, 0, sizeof(*o));
		} else
			shutdown(o->s->w.fd, SHUT_RDWR);
	}
	for (i = 0; i < WATCHERS_MAX; i++) {
		if (watchers[i].used && !watchers[i].removed &&
		    sodium_memcmp(watchers[i].key, h, 32) == 0)
			mine++;
		if (watchers[i].used && !watchers[i].removed && !strcmp(watchers[i].sbx, x->sbx))
			here++;
		if (!watchers[i].used && w == NULL)
			w = &watchers[i];
	}
	if (w == NULL || mine >= WATCHERS_PER_KEY || here >= WATCHERS_PER_SBX) {
		pthread_mutex_unlock(&watch_mu);
		free(q);
		return rpc_error(x->r->conn, "resource_exhausted", "too many watchers (at most %d "
		    "per key and %d per sandbox); remove one first", WATCHERS_PER_KEY,
		    WATCHERS_PER_SBX);
	}
	/* reserved, counted for its key and sandbox from now on */
	w->used = true;
	memcpy(w->key, h, 32);
	snprintf(w->sbx, sizeof(w->sbx), "%s", x->sbx);
	w->polled = now;
	pthread_mutex_unlock(&watch_mu);
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		pthread_mutex_lock(&watch_mu);
		w->used = false;
		pthread_mutex_unlock(&watch_mu);
		free(q);
		return MHD_NO;
	}
	s->w.fd = -1;
	s->watch = true;
	snprintf(s->watch_root, sizeof(s->watch_root), "%s", root);
	if (ws_connect(x, "watch", false, q, s, &a) < 0) {
		ret = rpc_fail(x->r->conn, &a);
		space_answer_clear(&a);
		free(q);
		stream_free(s);
		pthread_mutex_lock(&watch_mu);
		w->used = false;
		pthread_mutex_unlock(&watch_mu);
		return ret;
	}
	space_answer_clear(&a);
	free(q);
	randombytes_buf(rnd, sizeof(rnd));
	pthread_mutex_lock(&watch_mu);
	hex_encode(rnd, sizeof(rnd), w->id, sizeof(w->id));
	memcpy(w->key, h, 32);
	snprintf(w->sbx, sizeof(w->sbx), "%s", x->sbx);
	w->s = s;
	w->events = json_array();
	w->overflow = w->ended = w->removed = false;
	pthread_mutex_unlock(&watch_mu);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	if (pthread_create(&t, &attr, watcher_main, w) != 0) {
		pthread_mutex_lock(&watch_mu);
		json_decref(w->events);
		memset(w, 0, sizeof(*w));
		pthread_mutex_unlock(&watch_mu);
		stream_free(s);
		return rpc_error(x->r->conn, "resource_exhausted", "cannot watch now");
	}
	return e2b_send_json(x->r->conn, 200, json_pack("{s:s}", "watcherId", w->id));
}

static enum MHD_Result
watcher_call(struct envd *x, const json_t *in, bool remove)
{
	const char *id = jstr(in, "watcherId");
	struct watcher *w;
	json_t *ev;

	pthread_mutex_lock(&watch_mu);
	if (id == NULL || (w = watcher_find(x, id)) == NULL) {
		pthread_mutex_unlock(&watch_mu);
		return rpc_error(x->r->conn, "not_found", "no such watcher");
	}
	if (remove) {
		w->removed = true;
		if (w->ended) {
			json_decref(w->events);
			memset(w, 0, sizeof(*w));
		} else
			shutdown(w->s->w.fd, SHUT_RDWR);       /* its thread ends and frees it */
		pthread_mutex_unlock(&watch_mu);
		return e2b_send(x->r->conn, 200, "application/json", "{}", 2);
	}
	if (json_array_size(w->events) == 0 && w->ended) {
		uint16_t cc = w->close_code;
		json_decref(w->events);         /* told once, then forgotten */
		memset(w, 0, sizeof(*w));
		pthread_mutex_unlock(&watch_mu);
		return rpc_error(x->r->conn, "unavailable", cc == 4409 ?
		    "the sandbox's execution was replaced; create the watcher again" :
		    "the watch ended");
	}
	ev = w->events;
	w->events = json_array();
	w->polled = now_mono_ns() / 1000000;
	pthread_mutex_unlock(&watch_mu);
	return e2b_send_json(x->r->conn, 200, json_pack("{s:o}", "events", ev));
}

static enum MHD_Result
watcher_events(struct envd *x, const json_t *in)
{
	return watcher_call(x, in, false);
}

static enum MHD_Result
watcher_remove(struct envd *x, const json_t *in)
{
	return watcher_call(x, in, true);
}

/* ---- /files ---- */

static enum MHD_Result
files_get(struct envd *x)
{
	const char *p = MHD_lookup_connection_value(x->r->conn, MHD_GET_ARGUMENT_KIND, "path");
	char path[SPACE_PATH_MAX + 1], *q;
	struct MHD_Response *resp;
	struct space_answer a;
	enum MHD_Result ret;
	struct stat sb;
	int fd;

	if (p == NULL || abs_path(p, path, sizeof(path)) < 0)
		return e2b_api_error(x->r->conn, 400, "path is required");
	if (stat_path(x, path, &a) < 0) {
		ret = e2b_api_error(x->r->conn, e2b_status_of(&a), "%s", e2b_msg_of(&a));
		space_answer_clear(&a);
		return ret;
	}
	if (json_integer_value(json_object_get(a.body, "size")) > (json_int_t)E2B_DOWNLOAD_MAX) {
		space_answer_clear(&a);
		return e2b_api_error(x->r->conn, 400, "a download is at most %u MiB here",
		    E2B_DOWNLOAD_MAX >> 20);
	}
	space_answer_clear(&a);
	if ((q = path_query("files", path)) == NULL ||
	    (fd = memfd_create("e2b-download", MFD_CLOEXEC)) < 0) {
		free(q);
		return e2b_api_error(x->r->conn, 500, "out of memory");
	}
	/* the size above was the path's own (a link's, or the file's before
	 * it grew): the bytes kept are bounded while they arrive */
	if (dop(x, "fs:r", "GET", q, NULL, -1, fd, E2B_DOWNLOAD_MAX, &a) < 0 || !space_answer_ok(&a)) {
		if (a.status == 413 && strcmp(a.error, "too_large") == 0)
			ret = e2b_api_error(x->r->conn, 400, "a download is at most %u MiB here",
			    E2B_DOWNLOAD_MAX >> 20);
		else
			ret = e2b_api_error(x->r->conn, e2b_status_of(&a), "%s", e2b_msg_of(&a));
		close(fd);
	} else if (fstat(fd, &sb) < 0 || (size_t)sb.st_size > E2B_DOWNLOAD_MAX) {
		ret = e2b_api_error(x->r->conn, 500, "the download could not be kept");
		close(fd);
	} else if ((resp = MHD_create_response_from_fd((uint64_t)sb.st_size, fd)) == NULL) {
		close(fd);
		ret = MHD_NO;
	} else {
		MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
		ret = MHD_queue_response(x->r->conn, 200, resp);
		MHD_destroy_response(resp);
	}
	free(q);
	space_answer_clear(&a);
	return ret;
}

/* the upload went to the sandbox while it arrived (e2b_upload.c): the
 * answer is its list of files, or its first failure */
static enum MHD_Result
files_post(struct envd *x)
{
	struct e2b_req *r = x->r;

	if (r->up == NULL)
		return e2b_api_error(r->conn, 503, "cannot take the upload now");
	if (r->upload_err[0] && !e2b_upload_failed(r->up))
		return e2b_api_error(r->conn, 400, "%s", r->upload_err);
	return e2b_upload_answer(r->up, r->conn);
}

/* ---- dispatch ---- */

bool
e2b_envd_route(struct MHD_Connection *c, const char *url)
{
	return MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Id") != NULL ||
	    !strcmp(url, "/health") || !strcmp(url, "/files") ||
	    !strncmp(url, "/process.Process/", 17) || !strncmp(url, "/filesystem.Filesystem/", 23);
}

/* the Connect calls: their message's fields, and the handler that answers
 * the decoded message */
enum call_kind { UNARY, STREAM };

struct rpc {
	const char *path;
	enum call_kind kind;
	const char *const *keys;
	enum MHD_Result (*fn)(struct envd *, const json_t *);
};

#define KEYS(...) ((const char *const []){ __VA_ARGS__, NULL })
static const char *const no_keys[] = { NULL };

static const struct rpc rpcs[] = {
	{ "/process.Process/Start", STREAM, KEYS("process", "pty", "tag", "stdin"), proc_start },
	{ "/process.Process/Connect", STREAM, KEYS("process"), proc_connect },
	{ "/process.Process/List", UNARY, no_keys, proc_list },
	{ "/process.Process/SendInput", UNARY, KEYS("process", "input"), proc_input },
	{ "/process.Process/CloseStdin", UNARY, KEYS("process"), proc_close_stdin },
	{ "/process.Process/SendSignal", UNARY, KEYS("process", "signal"), proc_signal },
	{ "/process.Process/Update", UNARY, KEYS("process", "pty"), proc_update },
	{ "/filesystem.Filesystem/Stat", UNARY, KEYS("path"), fs_stat },
	{ "/filesystem.Filesystem/ListDir", UNARY, KEYS("path", "depth"), fs_list },
	{ "/filesystem.Filesystem/MakeDir", UNARY, KEYS("path"), fs_mkdir },
	{ "/filesystem.Filesystem/Move", UNARY, KEYS("source", "destination"), fs_move },
	{ "/filesystem.Filesystem/Remove", UNARY, KEYS("path"), fs_remove },
	{ "/filesystem.Filesystem/WatchDir", STREAM,
	    KEYS("path", "recursive", "includeEntry", "allowNetworkMounts"), fs_watch },
	{ "/filesystem.Filesystem/CreateWatcher", UNARY,
	    KEYS("path", "recursive", "includeEntry", "allowNetworkMounts"), watcher_create },
	{ "/filesystem.Filesystem/GetWatcherEvents", UNARY, KEYS("watcherId"), watcher_events },
	{ "/filesystem.Filesystem/RemoveWatcher", UNARY, KEYS("watcherId"), watcher_remove },
};

/* one Connect call: its message decoded as its row says, then its handler */
static enum MHD_Result
rpc_call(struct envd *x, const struct rpc *c)
{
	const char *why = NULL;
	enum MHD_Result ret = MHD_NO;
	json_t *in;

	if (c->kind == UNARY)
		in = unary_in(x, c->keys, &ret);
	else if ((in = stream_in(x, c->keys, &why)) == NULL)
		ret = rpc_error(x->r->conn, "invalid_argument", "%s", why);
	if (in == NULL)
		return ret;
	ret = c->fn(x, in);
	json_decref(in);
	return ret;
}

/* ---- the environment of a create (e2b.h) ---- */

#define ENVS_CACHE 1024         /* sandboxes whose environment is kept here */

static struct {
	pthread_mutex_t mu;
	struct envs_entry {
		char sbx[SPACE_ID_MAX + 1];
		json_t *envs;           /* NULL: the sandbox has none */
	} e[ENVS_CACHE];
	size_t next;            /* the slot a new entry takes (the oldest) */
} envs_cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* a name a shell takes, and a value without a NUL */
bool
e2b_envs_valid(const json_t *envs, const char **why)
{
	const char *k;
	json_t *v;
	char *text;
	size_t n;

	if (!json_is_object(envs) || json_object_size(envs) > E2B_ENVS_MAX)
		return *why = "envVars must be an object of at most 64 strings", false;
	json_object_foreach((json_t *)envs, k, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return *why = "envVars values must be strings without NUL", false;
		n = strlen(k);
		if (n == 0 || n > 128 || !((k[0] >= 'A' && k[0] <= 'Z') ||
		    (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_') ||
		    strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != n)
			return *why = "envVars names are letters, digits and _ (not first a digit), at most 128", false;
	}
	text = json_dumps(envs, JSON_COMPACT);
	n = text ? strlen(text) : SIZE_MAX;
	free(text);
	if (n > E2B_ENVS_BYTES_MAX)
		return *why = "envVars are at most 8 KiB in all", false;
	return true;
}

/* a new reference to the cached environment of sbx (NULL: none); false
 * when it is not cached */
static bool
envs_cached(const char *sbx, json_t **out)
{
	size_t i;

	pthread_mutex_lock(&envs_cache.mu);
	for (i = 0; i < ENVS_CACHE; i++)
		if (envs_cache.e[i].sbx[0] && strcmp(envs_cache.e[i].sbx, sbx) == 0) {
			*out = json_incref(envs_cache.e[i].envs);
			pthread_mutex_unlock(&envs_cache.mu);
			return true;
		}
	pthread_mutex_unlock(&envs_cache.mu);
	return false;
}

static void
envs_cache_put(const char *sbx, json_t *envs)
{
	struct envs_entry *e = NULL;
	size_t i;

	pthread_mutex_lock(&envs_cache.mu);
	for (i = 0; i < ENVS_CACHE && e == NULL; i++)
		if (envs_cache.e[i].sbx[0] && strcmp(envs_cache.e[i].sbx, sbx) == 0)
			e = &envs_cache.e[i];
	if (e == NULL) {
		e = &envs_cache.e[envs_cache.next];
		envs_cache.next = (envs_cache.next + 1) % ENVS_CACHE;
	}
	json_decref(e->envs);
	snprintf(e->sbx, sizeof(e->sbx), "%s", sbx);
	e->envs = json_incref(envs);
	pthread_mutex_unlock(&envs_cache.mu);
}

int
e2b_envs_store(const char *key, const char *sbx, const json_t *envs, struct space_answer *a)
{
	struct envd x = { .key = key };
	char *text = json_dumps(envs, JSON_COMPACT), *q = path_query("files", E2B_ENVS_FILE);
	json_t *b = json_pack("{s:s,s:b}", "path", E2B_HOME "/.e2b", "parents", 1);
	int fd = -1, r = -1;

	snprintf(x.sbx, sizeof(x.sbx), "%s", sbx);
	space_answer_init(a);
	if (text == NULL || q == NULL || b == NULL ||
	    (fd = memfd_create("e2b-envs", MFD_CLOEXEC)) < 0 ||
	    fd_write_all(fd, text, strlen(text)) < 0 || lseek(fd, 0, SEEK_SET) != 0) {
		snprintf(a->message, sizeof(a->message), "cannot keep the environment");
		goto out;
	}
	if (dop(&x, "fs:w", "POST", "fs/mkdir", b, -1, -1, 0, a) < 0 || !space_answer_ok(a))
		goto out;
	space_answer_clear(a);
	if (dop(&x, "fs:w", "PUT", q, NULL, fd, -1, 0, a) < 0 || !space_answer_ok(a))
		goto out;
	envs_cache_put(sbx, (json_t *)envs);
	r = 0;
out:
	if (fd >= 0)
		close(fd);
	json_decref(b);
	free(text);
	free(q);
	return r;
}

/* the environment of x's sandbox: *out a new reference, NULL when it has
 * none; -1 when it cannot be read (a answers why) */
static int
envs_of(struct envd *x, json_t **out, struct space_answer *a)
{
	char buf[E2B_ENVS_BYTES_MAX + 1], *q;
	const char *why;
	json_t *e;
	ssize_t n;
	int fd, r;

	space_answer_init(a);
	*out = NULL;
	if (envs_cached(x->sbx, out))
		return 0;
	if ((q = path_query("files", E2B_ENVS_FILE)) == NULL ||
	    (fd = memfd_create("e2b-envs", MFD_CLOEXEC)) < 0) {
		free(q);
		snprintf(a->message, sizeof(a->message), "out of memory");
		return -1;
	}
	r = dop(x, "fs:r", "GET", q, NULL, -1, fd, E2B_ENVS_BYTES_MAX, a);
	free(q);
	if (r >= 0 && a->status == 404) {
		/* none: the sandbox was made without envVars */
		close(fd);
		space_answer_clear(a);
		space_answer_init(a);
		envs_cache_put(x->sbx, NULL);
		return 0;
	}
	if (r < 0 || !space_answer_ok(a)) {
		close(fd);
		return -1;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	e = n > 0 ? json_loads(buf, JSON_REJECT_DUPLICATES, NULL) : NULL;
	if (e == NULL || !e2b_envs_valid(e, &why)) {
		/* the sandbox's own file, changed from inside: not applied */
		json_decref(e);
		space_answer_clear(a);
		space_answer_init(a);
		a->status = 400;
		snprintf(a->message, sizeof(a->message), "%s is not an environment of envVars",
		    E2B_ENVS_FILE);
		return -1;
	}
	envs_cache_put(x->sbx, e);
	*out = e;
	return 0;
}

/* GET /health of a sandbox (the SDK's isRunning, and its probe after a
 * failed call): 204 when the sandbox serves (its root answers a stat
 * through its route), 502 when it does not: paused, killed, or its
 * access token no longer valid (a killed sandbox's tokens are gone),
 * which the SDK reads as "not running" */
static enum MHD_Result
health(struct envd *x)
{
	struct space_answer a;
	enum MHD_Result ret;
	int r = stat_path(x, "/", &a);

	if (r == 0)
		ret = e2b_send(x->r->conn, 204, NULL, NULL, 0);
	else if (a.status == 503)
		ret = e2b_api_error(x->r->conn, 503, "%s", e2b_msg_of(&a));
	else
		ret = e2b_api_error(x->r->conn, 502, "the sandbox is not running");
	space_answer_clear(&a);
	return ret;
}

enum MHD_Result
e2b_envd(struct e2b_req *r)
{
	struct MHD_Connection *c = r->conn;
	const char *sbx = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *port = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Access-Token");
	const char *u = r->url;
	struct envd x = { .r = r };
	bool rpc = u[0] == '/' && strchr(u + 1, '/') != NULL;
	size_t i;

	/* a bare probe of the edge */
	if (!strcmp(u, "/health") && sbx == NULL)
		return e2b_send(c, 204, NULL, NULL, 0);
	if (key == NULL)
		key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-KEY");
	if (sbx == NULL || !id_valid(sbx))
		return rpc ? rpc_error(c, "invalid_argument", "E2b-Sandbox-Id names the sandbox") :
		    e2b_api_error(c, 400, "E2b-Sandbox-Id names the sandbox");
	if (port && strcmp(port, "49983") != 0)
		return rpc ? rpc_error(c, "invalid_argument", "this endpoint serves port 49983; "
		    "other ports are reached through their host name") :
		    e2b_api_error(c, 400, "this endpoint serves port 49983");
	if (!e2b_key_ok(key))
		return rpc ? rpc_error(c, "unauthenticated", "an access token is needed (X-Access-Token)") :
		    e2b_api_error(c, 401, "an access token is needed (X-Access-Token)");
	snprintf(x.sbx, sizeof(x.sbx), "%s", sbx);
	x.key = key;
	if (!strcmp(u, "/health"))
		return health(&x);
	if (!strcmp(u, "/files")) {
		if (!strcmp(r->method, "GET"))
			return files_get(&x);
		if (!strcmp(r->method, "POST"))
			return files_post(&x);
		return e2b_api_error(c, 405, "method not allowed");
	}
	if (strcmp(r->method, "POST") != 0)
		return rpc_error(c, "unimplemented", "Connect calls are POST");
	for (i = 0; i < sizeof(rpcs) / sizeof(rpcs[0]); i++)
		if (!strcmp(u, rpcs[i].path))
			return rpc_call(&x, &rpcs[i]);
	return rpc_error(c, "unimplemented", "%s is not served here", u);
}
