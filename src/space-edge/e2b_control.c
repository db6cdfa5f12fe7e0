/* The E2B control API (docs/e2b.md, "Control API"), each call translated
 * into space-control's REST API with the caller's X-API-KEY as its bearer.
 * create and connect answer a new per-sandbox access token of
 * space-control as the envdAccessToken:
 * create (/sandboxes, /v2/sandboxes), get, list (/v2/sandboxes with state
 * and metadata filters, x-next-token pages), kill, timeout, pause and
 * connect/resume. Errors are {"code":status,"message"} as the SDK reads
 * them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>

#include "e2b.h"
#include "limits.h"
#include "log.h"
#include "util.h"

static const char *
jstr(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* one control-plane call with the caller's key; 0 with a filled */
static int
ctl(const char *key, const char *method, const char *path, json_t *body, struct space_answer *a)
{
	struct space_client *c = space_client_new(e2b_conf.control, key);
	int r;

	space_answer_init(a);
	if (c == NULL) {
		snprintf(a->message, sizeof(a->message), "out of memory");
		return -ENOMEM;
	}
	c->connect_timeout = 5;
	r = space_control(c, method, path, body, a);
	space_client_free(c);
	return r;
}

static enum MHD_Result
fail(struct MHD_Connection *conn, const struct space_answer *a)
{
	unsigned st = e2b_status_of(a);

	if (st == 403)
		st = 401;       /* the key may not do this: the SDK's AuthenticationError */
	return e2b_api_error(conn, st, "%s", e2b_msg_of(a));
}

static const char *
e2b_state(const char *st)
{
	if (st == NULL)
		return NULL;
	if (!strcmp(st, "paused") || !strcmp(st, "pausing"))
		return "paused";
	if (!strcmp(st, "running") || !strcmp(st, "creating") || !strcmp(st, "resuming") ||
	    !strcmp(st, "moving"))
		return "running";
	return NULL;            /* stopping, killed, failed: not a sandbox the SDK can use */
}

/* an RFC 3339 time plus secs */
static void
time_plus(const char *rfc, long secs, char *out, size_t cap)
{
	struct tm tm;
	time_t t;

	memset(&tm, 0, sizeof(tm));
	if (rfc == NULL || strptime(rfc, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		t = time(NULL);
	else
		t = timegm(&tm);
	t += secs;
	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* the E2B view of a space sandbox object; NULL when the SDK should not
 * see it (killed, failed). token: its envdAccessToken, or NULL */
static json_t *
sandbox_info(const json_t *s, const char *token)
{
	const json_t *res = json_object_get(s, "resources"), *to = json_object_get(s, "timeouts");
	const char *st = e2b_state(jstr(s, "state")), *tpl = jstr(s, "template");
	json_t *o, *md = json_object_get(s, "metadata");
	json_int_t cpu = json_integer_value(json_object_get(res, "cpu_percent"));
	json_int_t idle = json_integer_value(json_object_get(to, "idle"));
	char started[40], end[40];

	if (st == NULL || jstr(s, "id") == NULL)
		return NULL;
	snprintf(started, sizeof(started), "%s", jstr(s, "created_at") ? jstr(s, "created_at") : "");
	time_plus(jstr(s, "created_at"), 0, started, sizeof(started));
	time_plus(NULL, idle > 0 ? (long)idle : 86400, end, sizeof(end));
	o = json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:s,s:O}",
	    "sandboxID", jstr(s, "id"), "templateID", tpl ? tpl : "base",
	    "clientID", "space", "startedAt", started, "endAt", end, "state", st,
	    "cpuCount", (json_int_t)(cpu >= 100 ? cpu / 100 : 1),
	    "memoryMB", json_integer_value(json_object_get(res, "memory_mb")),
	    "diskSizeMB", json_integer_value(json_object_get(res, "disk_mb")),
	    "envdVersion", E2B_ENVD_VERSION,
	    "metadata", json_is_object(md) ? md : json_object());
	if (o && token)
		json_object_set_new(o, "envdAccessToken", json_string(token));
	return o;
}

/* a new access token of sandbox id (space-control's, shown once): the
 * envdAccessToken create and connect answer. It obtains control
 * capabilities for this sandbox only, and dies with it. 0 and out */
static int
access_token(const char *key, const char *id, char *out, size_t cap, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 40];
	const char *t;
	json_t *b = json_object();
	int rc;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/access-token", id);
	rc = ctl(key, "POST", path, b, a);
	json_decref(b);
	if (rc < 0 || !space_answer_ok(a))
		return -1;
	if ((t = jstr(a->body, "access_token")) == NULL || strlen(t) >= cap || !e2b_key_ok(t)) {
		a->status = 502;
		snprintf(a->message, sizeof(a->message), "malformed answer of the control plane");
		return -1;
	}
	snprintf(out, cap, "%s", t);
	return 0;
}

static int
get_sandbox(const char *key, const char *id, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 32];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	return ctl(key, "GET", path, NULL, a);
}

/* waits until the sandbox is in want (running: and its execution serves):
 * space-control holds each GET until then (?until=, at most 25 s a time);
 * an answer in another state is looked at again after a pause */
/* the sandbox object is in state want (running: its execution serving) */
static bool
reached(json_t *sb, const char *want)
{
	const char *st = jstr(sb, "state"), *es = jstr(json_object_get(sb, "execution"), "state");

	return st && !strcmp(st, want) && (strcmp(want, "running") != 0 ||
	    (es && !strcmp(es, "serving")));
}

static int
wait_state(const char *key, const char *id, const char *want, struct space_answer *a)
{
	time_t t0 = time(NULL), left;
	unsigned ms = 5;
	char path[SPACE_ID_MAX + 64];

	for (;;) {
		const char *st;

		space_answer_clear(a);
		left = E2B_WAIT_SECS - (time(NULL) - t0);
		snprintf(path, sizeof(path), "/v1/sandboxes/%s?until=%s&wait=%d", id, want,
		    left > 25 ? 25 : left > 0 ? (int)left : 0);
		if (ctl(key, "GET", path, NULL, a) < 0 || !space_answer_ok(a))
			return -1;
		if (reached(a->body, want))
			return 0;
		st = jstr(a->body, "state");
		if (st && (!strcmp(st, "failed") || !strcmp(st, "killed") || !strcmp(st, "stopping"))) {
			a->status = 500;
			snprintf(a->message, sizeof(a->message), "sandbox %s is %s", id, st);
			return -1;
		}
		if (time(NULL) - t0 >= E2B_WAIT_SECS) {
			a->status = 504;
			snprintf(a->message, sizeof(a->message), "sandbox %s is still %s after %d s",
			    id, st ? st : "?", E2B_WAIT_SECS);
			return -1;
		}
		usleep(ms * 1000);
		if ((ms *= 2) > 50)
			ms = 50;
	}
}

static bool
empty_or_absent(const json_t *v)
{
	return v == NULL || json_is_null(v) || (json_is_object(v) && json_object_size(v) == 0) ||
	    (json_is_array(v) && json_array_size(v) == 0);
}

static enum MHD_Result
create(struct e2b_req *r, const char *key)
{
	static const char *const keys[] = { "templateID", "metadata", "envVars", "timeout",
	    "allow_internet_access", "autoPause", "autoPauseMemory", "autoResume", "mcp",
	    "network", "iam", "volumeMounts", "secure", "alias", NULL };
	const char *why = NULL, *tpl, *k, *id;
	char tplbuf[72];
	json_t *in, *req, *v, *md, *envs;
	json_int_t timeout = 300;
	struct space_answer a;
	bool pause = false;
	enum MHD_Result ret;

	if ((in = e2b_parse(r->body, r->body_len, &why)) == NULL)
		return e2b_api_error(r->conn, 400, "%s", why);
	if (!e2b_only_keys(in, keys, &why)) {
		ret = e2b_api_error(r->conn, 400, "unknown field \"%s\"", why);
		json_decref(in);
		return ret;
	}
	snprintf(tplbuf, sizeof(tplbuf), "%s", jstr(in, "templateID") ? jstr(in, "templateID") : "");
	tpl = tplbuf;           /* kept past json_decref(in) */
	v = json_object_get(in, "timeout");
	md = json_object_get(in, "metadata");
#define BAD(...) do { ret = e2b_api_error(r->conn, 400, __VA_ARGS__); json_decref(in); return ret; } while (0)
	if (!*tpl || strlen(jstr(in, "templateID")) > 64)
		BAD("templateID must be a template name");
	if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 86400))
		BAD("timeout must be 0..86400 seconds");
	if (v && json_is_integer(v))
		timeout = json_integer_value(v);
	if (md && !json_is_null(md)) {
		if (!json_is_object(md) || json_object_size(md) > 64)
			BAD("metadata must be an object of at most 64 strings");
		json_object_foreach(md, k, v)
			if (!json_is_string(v) || strlen(k) > 256 || strlen(json_string_value(v)) > 1024)
				BAD("metadata values must be strings (keys up to 256, values up to 1024 bytes)");
	}
	envs = json_object_get(in, "envVars");
	if (!empty_or_absent(envs) && !e2b_envs_valid(envs, &why))
		BAD("%s", why);
	if (!empty_or_absent(json_object_get(in, "mcp")) ||
	    !empty_or_absent(json_object_get(in, "volumeMounts")) ||
	    !empty_or_absent(json_object_get(in, "iam")) ||
	    !empty_or_absent(json_object_get(in, "network")))
		BAD("mcp, volumeMounts, iam and network are not supported here");
	if (json_is_true(json_object_get(in, "allow_internet_access")))
		BAD("internet access is decided by the deployment's egress policy, not at creation");
	if (json_is_true(json_object_get(in, "autoPauseMemory")))
		BAD("memory cannot be kept by a pause on this substrate: files are kept, processes are not");
	v = json_object_get(in, "autoResume");
	if (json_is_object(v) && json_is_true(json_object_get(v, "enabled")))
		BAD("autoResume is not supported: resume with Sandbox.connect()");
	pause = json_is_true(json_object_get(in, "autoPause"));
#undef BAD
	/* kept past json_decref(in), written into the sandbox once it serves */
	envs = empty_or_absent(envs) ? NULL : json_deep_copy(envs);
	/* the create itself waits until the sandbox runs (wait_state
	 * takes over only if it does not within that) */
	req = json_pack("{s:{s:I,s:i,s:s},s:i}", "timeouts", "idle", timeout, "absolute", 0,
	    "action", pause ? "pause" : "kill", "wait", 25);
	if (strcmp(tpl, "base") != 0)
		json_object_set_new(req, "template", json_string(tpl));
	if (md && json_is_object(md))
		json_object_set(req, "metadata", md);
	json_decref(in);
	if (ctl(key, "POST", "/v1/sandboxes", req, &a) < 0 || !space_answer_ok(&a)) {
		json_decref(req);
		json_decref(envs);
		ret = fail(r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	json_decref(req);
	if ((id = jstr(a.body, "id")) == NULL) {
		json_decref(envs);
		space_answer_clear(&a);
		return e2b_api_error(r->conn, 502, "malformed answer of the control plane");
	}
	char sid[SPACE_ID_MAX + 1];
	snprintf(sid, sizeof(sid), "%s", id);
	if (!reached(a.body, "running") && wait_state(key, sid, "running", &a) < 0) {
		json_decref(envs);
		ret = fail(r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	/* its environment, before anyone can start a process in it; a
	 * sandbox that cannot take it is not handed out half made */
	if (envs != NULL) {
		struct space_answer ea;
		char kpath[SPACE_ID_MAX + 16];

		if (e2b_envs_store(key, sid, envs, &ea) < 0) {
			json_decref(envs);
			ret = fail(r->conn, &ea);
			space_answer_clear(&ea);
			space_answer_clear(&a);
			snprintf(kpath, sizeof(kpath), "/v1/sandboxes/%s", sid);
			(void)ctl(key, "DELETE", kpath, NULL, &ea);
			space_answer_clear(&ea);
			return ret;
		}
		space_answer_clear(&ea);
		json_decref(envs);
	}
	json_t *sb = json_incref(a.body);
	char tok[128];
	space_answer_clear(&a);
	if (access_token(key, sid, tok, sizeof(tok), &a) < 0) {
		json_decref(sb);
		ret = fail(r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	space_answer_clear(&a);
	v = sandbox_info(sb, tok);
	sodium_memzero(tok, sizeof(tok));
	json_decref(sb);
	if (v == NULL)
		return e2b_api_error(r->conn, 500, "sandbox %s did not start", sid);
	/* templateID is the template the sandbox runs, as getInfo and list
	 * say ("base" gets the deployment's default) */
	return e2b_send_json(r->conn, 201, v);
}

static enum MHD_Result
get_info(struct e2b_req *r, const char *key, const char *id)
{
	struct space_answer a;
	enum MHD_Result ret;
	json_t *o;

	if (get_sandbox(key, id, &a) < 0 || !space_answer_ok(&a)) {
		ret = fail(r->conn, &a);
	} else if ((o = sandbox_info(a.body, NULL)) == NULL) {
		ret = e2b_api_error(r->conn, 404, "sandbox %s not found", id);
	} else
		ret = e2b_send_json(r->conn, 200, o);
	space_answer_clear(&a);
	return ret;
}

/* "k=v&k2=v2" as the SDK sends it (each key and value percent-encoded,
 * the pairs form-encoded, the whole a query value: three layers, the
 * first taken off by libmicrohttpd): true when every pair is in md */
/* one layer of form encoding off, in place: '+' is a space, %XX a byte */
static void
form_unescape(char *s)
{
	char *p;

	for (p = s; *p; p++)
		if (*p == '+')
			*p = ' ';
	MHD_http_unescape(s);
}

/* an RFC 3339 time as the SDK writes it (2026-12-05T20:45:00.123Z): its
 * whole seconds, UTC; -1 when it is none */
static int
iso_seconds(const char *v, time_t *out)
{
	struct tm tm;
	const char *rest;

	memset(&tm, 0, sizeof(tm));
	if (v == NULL || (rest = strptime(v, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	if (*rest == '.')
		for (rest++; *rest >= '0' && *rest <= '9'; rest++)
			;
	if (strcmp(rest, "Z") != 0 && strcmp(rest, "+00:00") != 0)
		return -1;
	*out = timegm(&tm);
	return 0;
}

/* whether name is one of the comma-separated names of list */
static bool
in_list(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list;

	while (*p) {
		const char *e = strchr(p, ',');
		size_t len = e ? (size_t)(e - p) : strlen(p);

		if (len == n && strncmp(p, name, n) == 0)
			return true;
		if (e == NULL)
			break;
		p = e + 1;
	}
	return false;
}

static bool
metadata_match(const char *q, const json_t *md)
{
	char *dup, *save = NULL, *pair, *eq;
	bool ok = true;

	if ((dup = strdup(q)) == NULL)
		return false;
	for (pair = strtok_r(dup, "&", &save); pair && ok; pair = strtok_r(NULL, "&", &save)) {
		const char *have;
		if ((eq = strchr(pair, '=')) == NULL) {
			ok = false;
			break;
		}
		*eq = '\0';
		form_unescape(pair);
		form_unescape(eq + 1);
		MHD_http_unescape(pair);
		MHD_http_unescape(eq + 1);
		have = jstr(md, pair);
		ok = have != NULL && strcmp(have, eq + 1) == 0;
	}
	free(dup);
	return ok;
}

static int
by_start(const void *x, const void *y)
{
	const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
	int c = strcmp(jstr(a, "startedAt"), jstr(b, "startedAt"));
	return c ? c : strcmp(jstr(a, "sandboxID"), jstr(b, "sandboxID"));
}

/* the key's sandboxes that are not killed, every page of the control
 * plane's list (1,000 each, E2B_LIST_PAGES at most): 0 and *out, or -1
 * with a saying why */
#define E2B_LIST_PAGES 20

static int
list_live(const char *key, json_t **out, struct space_answer *a)
{
	struct space_client *c = space_client_new(e2b_conf.control, key);
	int r;

	if (c == NULL) {
		space_answer_init(a);
		snprintf(a->message, sizeof(a->message), "out of memory");
		return -1;
	}
	c->connect_timeout = 5;
	r = space_sandboxes(c, true, E2B_LIST_PAGES, out, a);
	space_client_free(c);
	return r;
}

static enum MHD_Result
list(struct e2b_req *r, const char *key, bool v2)
{
	const char *state = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "state");
	const char *meta = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "metadata");
	const char *lim = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "limit");
	const char *next = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "nextToken");
	const char *tpl = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "template");
	const char *after = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "startedAfter");
	const char *order = MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, "order");
	bool want_run = true, want_pause = v2, desc = false;
	time_t after_t = 0, st_t;
	long limit = 100;
	struct space_answer a;
	json_t **items = NULL, *arr, *s, *out;
	size_t i, n = 0, start = 0;
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char *body;

	if (state) {
		want_run = strstr(state, "running") != NULL;
		want_pause = strstr(state, "paused") != NULL;
		if (!want_run && !want_pause)
			return e2b_api_error(r->conn, 400, "state must be running and/or paused");
	}
	if (lim) {
		char *end;
		limit = strtol(lim, &end, 10);
		if (*end || limit < 1 || limit > E2B_LIST_MAX)
			return e2b_api_error(r->conn, 400, "limit must be 1..%d", E2B_LIST_MAX);
	}
	if (next && !id_valid(next))
		return e2b_api_error(r->conn, 400, "malformed nextToken");
	if (after && iso_seconds(after, &after_t) < 0)
		return e2b_api_error(r->conn, 400, "startedAfter must be an RFC 3339 time in UTC");
	if (order && strcmp(order, "asc") != 0 && !(desc = strcmp(order, "desc") == 0))
		return e2b_api_error(r->conn, 400, "order must be asc or desc");
	if (list_live(key, &arr, &a) < 0) {
		ret = fail(r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	space_answer_clear(&a);
	if ((items = calloc(json_array_size(arr) + 1, sizeof(*items))) == NULL) {
		json_decref(arr);
		return MHD_NO;
	}
	json_array_foreach(arr, i, s) {
		json_t *o = sandbox_info(s, NULL);
		const char *st;
		if (o == NULL)
			continue;
		st = jstr(o, "state");
		if ((!strcmp(st, "running") && !want_run) || (!strcmp(st, "paused") && !want_pause) ||
		    (meta && !metadata_match(meta, json_object_get(o, "metadata"))) ||
		    (tpl && *tpl && !in_list(tpl, jstr(o, "templateID"))) ||
		    (after && (iso_seconds(jstr(o, "startedAt"), &st_t) < 0 || st_t < after_t))) {
			json_decref(o);
			continue;
		}
		items[n++] = o;
	}
	json_decref(arr);
	qsort(items, n, sizeof(*items), by_start);
	for (i = 0; desc && i < n / 2; i++) {
		json_t *t = items[i];

		items[i] = items[n - 1 - i];
		items[n - 1 - i] = t;
	}
	if (next) {
		for (start = 0; start < n; start++)
			if (!strcmp(jstr(items[start], "sandboxID"), next))
				break;
		start = start < n ? start + 1 : n;
	}
	out = json_array();
	for (i = start; i < n && (long)(i - start) < limit; i++)
		json_array_append(out, items[i]);
	char token[SPACE_ID_MAX + 1] = "";
	if (i < n && i > start)
		snprintf(token, sizeof(token), "%s", jstr(items[i - 1], "sandboxID"));
	for (i = 0; i < n; i++)
		json_decref(items[i]);
	free(items);
	body = json_dumps(out, JSON_COMPACT);
	json_decref(out);
	if (body == NULL)
		return MHD_NO;
	resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", "application/json");
	if (token[0])
		MHD_add_response_header(resp, "x-next-token", token);
	ret = MHD_queue_response(r->conn, 200, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result
kill_sbx(struct e2b_req *r, const char *key, const char *id)
{
	char path[SPACE_ID_MAX + 32];
	struct space_answer a;
	enum MHD_Result ret;

	/* a killed sandbox is gone for the SDK: 404 on a second kill */
	if (get_sandbox(key, id, &a) < 0 || !space_answer_ok(&a) ||
	    e2b_state(jstr(a.body, "state")) == NULL) {
		ret = a.status && a.status != 404 && !space_answer_ok(&a) ? fail(r->conn, &a) :
		    e2b_api_error(r->conn, 404, "sandbox %s not found", id);
		space_answer_clear(&a);
		return ret;
	}
	space_answer_clear(&a);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", id);
	if (ctl(key, "DELETE", path, NULL, &a) < 0 || !space_answer_ok(&a))
		ret = fail(r->conn, &a);
	else
		ret = e2b_send(r->conn, 204, NULL, NULL, 0);
	space_answer_clear(&a);
	return ret;
}

/* the body of timeout, pause, connect: only keys, with timeout checked */
static json_t *
small_body(struct e2b_req *r, const char *const *keys, const char **why)
{
	json_t *in, *v;

	if (r->body_len == 0)
		return json_object();
	if ((in = e2b_parse(r->body, r->body_len, why)) == NULL)
		return NULL;
	if (!e2b_only_keys(in, keys, why)) {
		json_decref(in);
		*why = "unknown field";
		return NULL;
	}
	v = json_object_get(in, "timeout");
	if (v && !json_is_null(v) && (!json_is_integer(v) || json_integer_value(v) < 0 ||
	    json_integer_value(v) > 86400)) {
		json_decref(in);
		*why = "timeout must be 0..86400 seconds";
		return NULL;
	}
	v = json_object_get(in, "memory");
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		json_decref(in);
		*why = "memory must be a boolean";
		return NULL;
	}
	return in;
}

static int
set_timeout(const char *key, const char *id, json_int_t secs, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 48];
	const char *action;
	json_t *b;
	int rc;

	if (get_sandbox(key, id, a) < 0 || !space_answer_ok(a))
		return -1;
	action = jstr(json_object_get(a->body, "timeouts"), "action");
	b = json_pack("{s:I,s:i,s:s}", "idle", secs, "absolute", 0, "action",
	    action && !strcmp(action, "pause") ? "pause" : "kill");
	space_answer_clear(a);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/timeouts", id);
	rc = ctl(key, "PUT", path, b, a);
	json_decref(b);
	return rc < 0 || !space_answer_ok(a) ? -1 : 0;
}

static enum MHD_Result
timeout(struct e2b_req *r, const char *key, const char *id)
{
	static const char *const keys[] = { "timeout", NULL };
	const char *why = NULL;
	struct space_answer a;
	enum MHD_Result ret;
	json_t *in;

	if ((in = small_body(r, keys, &why)) == NULL)
		return e2b_api_error(r->conn, 400, "%s", why);
	if (!json_is_integer(json_object_get(in, "timeout"))) {
		json_decref(in);
		return e2b_api_error(r->conn, 400, "timeout is required");
	}
	if (set_timeout(key, id, json_integer_value(json_object_get(in, "timeout")), &a) < 0)
		ret = fail(r->conn, &a);
	else
		ret = e2b_send(r->conn, 204, NULL, NULL, 0);
	space_answer_clear(&a);
	json_decref(in);
	return ret;
}

static enum MHD_Result
pause_sbx(struct e2b_req *r, const char *key, const char *id)
{
	static const char *const keys[] = { "memory", NULL };
	char path[SPACE_ID_MAX + 48];
	const char *why = NULL;
	struct space_answer a;
	enum MHD_Result ret;
	json_t *in;

	if ((in = small_body(r, keys, &why)) == NULL)
		return e2b_api_error(r->conn, 400, "%s", why);
	if (json_is_true(json_object_get(in, "memory"))) {
		json_decref(in);
		return e2b_api_error(r->conn, 400, "memory cannot be kept by a pause on this "
		    "substrate: files are kept, processes are not (pause without keepMemory)");
	}
	json_decref(in);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/pause", id);
	in = json_object();
	if (ctl(key, "POST", path, in, &a) < 0 || !space_answer_ok(&a)) {
		json_decref(in);
		ret = fail(r->conn, &a);
		space_answer_clear(&a);
		return ret;
	}
	json_decref(in);
	space_answer_clear(&a);
	if (wait_state(key, id, "paused", &a) < 0)
		ret = fail(r->conn, &a);
	else
		ret = e2b_send(r->conn, 204, NULL, NULL, 0);
	space_answer_clear(&a);
	return ret;
}

/* an idle timeout t longer than cur (0: none, longer than any) */
static bool
longer(json_int_t t, json_int_t cur)
{
	return cur != 0 && (t == 0 || t > cur);
}

/* connect: a running sandbox as it is (200), a paused one resumed (201) */
static enum MHD_Result
connect_sbx(struct e2b_req *r, const char *key, const char *id)
{
	static const char *const keys[] = { "timeout", "memory", "autoPause", NULL };
	char path[SPACE_ID_MAX + 48];
	const char *why = NULL, *st;
	unsigned status = 200;
	struct space_answer a;
	enum MHD_Result ret;
	json_t *in, *o;

	if ((in = small_body(r, keys, &why)) == NULL)
		return e2b_api_error(r->conn, 400, "%s", why);
	if (get_sandbox(key, id, &a) < 0 || !space_answer_ok(&a)) {
		ret = fail(r->conn, &a);
		goto out;
	}
	st = jstr(a.body, "state");
	if (e2b_state(st) == NULL) {
		ret = e2b_api_error(r->conn, 404, "sandbox %s not found", id);
		goto out;
	}
	if (!strcmp(e2b_state(st), "paused")) {
		json_t *b = json_object();
		space_answer_clear(&a);
		/* a pause still in progress ends first */
		if (wait_state(key, id, "paused", &a) < 0) {
			json_decref(b);
			ret = fail(r->conn, &a);
			goto out;
		}
		space_answer_clear(&a);
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/resume", id);
		if (ctl(key, "POST", path, b, &a) < 0 || !space_answer_ok(&a)) {
			json_decref(b);
			ret = fail(r->conn, &a);
			goto out;
		}
		json_decref(b);
		status = 201;
	}
	space_answer_clear(&a);
	if (wait_state(key, id, "running", &a) < 0) {
		ret = fail(r->conn, &a);
		goto out;
	}
	/* E2B's connect changes a running sandbox's timeout only when the new
	 * one is longer (0: none, the longest); a resumed one gets it as given */
	if (json_is_integer(json_object_get(in, "timeout")) && (status == 201 ||
	    longer(json_integer_value(json_object_get(in, "timeout")),
	    json_integer_value(json_object_get(json_object_get(a.body, "timeouts"), "idle"))))) {
		space_answer_clear(&a);
		if (set_timeout(key, id, json_integer_value(json_object_get(in, "timeout")), &a) < 0) {
			ret = fail(r->conn, &a);
			goto out;
		}
		space_answer_clear(&a);
		if (get_sandbox(key, id, &a) < 0 || !space_answer_ok(&a)) {
			ret = fail(r->conn, &a);
			goto out;
		}
	}
	{
		char tok[128];
		json_t *sb = json_incref(a.body);

		space_answer_clear(&a);
		if (access_token(key, id, tok, sizeof(tok), &a) < 0)
			ret = fail(r->conn, &a);
		else if ((o = sandbox_info(sb, tok)) == NULL)
			ret = e2b_api_error(r->conn, 404, "sandbox %s not found", id);
		else
			ret = e2b_send_json(r->conn, status, o);
		sodium_memzero(tok, sizeof(tok));
		json_decref(sb);
	}
out:
	space_answer_clear(&a);
	json_decref(in);
	return ret;
}

bool
e2b_control_route(const char *url)
{
	return !strncmp(url, "/sandboxes", 10) || !strncmp(url, "/v2/sandboxes", 13);
}

enum MHD_Result
e2b_control(struct e2b_req *r)
{
	const char *key = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "X-API-KEY");
	const char *u = r->url, *m = r->method, *rest;
	bool v2 = false;
	char id[SPACE_ID_MAX + 1];
	size_t n;

	if (key == NULL)
		return e2b_api_error(r->conn, 401, "an API key is needed (X-API-KEY)");
	if (!e2b_key_ok(key))
		return e2b_api_error(r->conn, 401, "malformed API key");
	if (!strncmp(u, "/v2", 3)) {
		v2 = true;
		u += 3;
	}
	if (!strcmp(u, "/sandboxes")) {
		if (!strcmp(m, "POST"))
			return create(r, key);
		if (!strcmp(m, "GET"))
			return list(r, key, v2);
		return e2b_api_error(r->conn, 405, "method not allowed");
	}
	if (strncmp(u, "/sandboxes/", 11) != 0)
		return e2b_api_error(r->conn, 404, "no such endpoint");
	u += 11;
	n = strcspn(u, "/");
	if (n == 0 || n > SPACE_ID_MAX)
		return e2b_api_error(r->conn, 404, "sandbox not found");
	memcpy(id, u, n);
	id[n] = '\0';
	if (!id_valid(id))
		return e2b_api_error(r->conn, 404, "sandbox %s not found", "(malformed id)");
	rest = u + n;
	if (!*rest && !v2) {
		if (!strcmp(m, "GET"))
			return get_info(r, key, id);
		if (!strcmp(m, "DELETE"))
			return kill_sbx(r, key, id);
	} else if (!strcmp(m, "POST") && !strcmp(rest, "/timeout") && !v2)
		return timeout(r, key, id);
	else if (!strcmp(m, "POST") && !strcmp(rest, "/pause") && !v2)
		return pause_sbx(r, key, id);
	else if (!strcmp(m, "POST") && ((!strcmp(rest, "/connect") && v2) ||
	    (!strcmp(rest, "/resume") && !v2)))
		return connect_sbx(r, key, id);
	return e2b_api_error(r->conn, 404, "no such endpoint: %s %s", r->method, r->url);
}
