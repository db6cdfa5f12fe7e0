/* The tools of `space mcp`, one row each in mcp_tools[] at the end: name,
 * description, input and output schema, and the function that runs the
 * call (in the call's own process, cmd_mcp.c). Each talks to the platform
 * through the CLI's client: control-plane requests with the API key,
 * data-plane operations through space_sbx_op(), so the route cache and its
 * one rebuilt attempt follow a sandbox that moved or resumed elsewhere
 * between two calls without the agent seeing it.
 *
 * Schemas are written with single quotes (mcp_tool_json() turns them into
 * JSON), so their text has no apostrophe. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "client.h"
#include "limits.h"
#include "mcp.h"
#include "space.h"
#include "util.h"

#define WAIT_DEFAULT    60              /* seconds a lifecycle call waits */
#define OUTPUT_DEFAULT  65536           /* run_command: bytes of stdout, stderr each */

void
mcp_progress(struct mcp_ctx *x, const char *fmt, ...)
{
	char msg[512], *line;
	json_t *j;
	va_list ap;
	size_t n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if ((j = json_pack("{s:s}", "progress", msg)) == NULL)
		return;
	if ((line = json_dumps(j, JSON_COMPACT)) != NULL) {
		n = strlen(line);
		line[n] = '\n';         /* json_dumps leaves room for its NUL */
		(void)fd_write_all(x->out_fd, line, n + 1);
		free(line);
	}
	json_decref(j);
}

json_t *
mcp_fail(struct mcp_ctx *x, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(x->err, sizeof(x->err), fmt, ap);
	va_end(ap);
	return NULL;
}

/* ---- answers and errors ---- */

/* A failed answer in words an agent can act on. */
static json_t *
answer_fail(struct mcp_ctx *x, const char *what, const struct space_answer *a)
{
	char buf[800];

	space_answer_strerror(a, buf, sizeof(buf));
	if (a->status == 429)
		return mcp_fail(x, "%s: quota exceeded: %s%s%.0ld%s", what, a->message[0] ?
		    a->message : buf, a->retry_after > 0 ? " (retry after " : "",
		    a->retry_after > 0 ? a->retry_after : 0, a->retry_after > 0 ? " s)" : "");
	if (a->status == 404)
		return mcp_fail(x, "%s: not found: %s", what, a->message[0] ? a->message : buf);
	if (a->status == 403)
		return mcp_fail(x, "%s: denied: %s", what, buf);
	if (a->status == 401 && strcmp(a->error, "unauthenticated") == 0)
		return mcp_fail(x, "%s: the API key was refused (SPACE_API_KEY): %s", what, buf);
	return mcp_fail(x, "%s: %s", what, buf);
}

/* one control-plane request: the 2xx body (a new reference; an empty
 * object when there is none), or NULL with x->err */
static json_t *
ctl(struct mcp_ctx *x, const char *what, const char *method, const char *path, json_t *body)
{
	struct space_answer a;
	json_t *r = NULL;

	space_answer_init(&a);
	if (space_control(x->c, method, path, body, &a) < 0 || !space_answer_ok(&a))
		answer_fail(x, what, &a);
	else
		r = a.body != NULL ? json_incref(a.body) : json_object();
	space_answer_clear(&a);
	return r;
}

const char *
mcp_jstr(const json_t *o, const char *key)
{
	return json_string_value(json_object_get(o, key));
}

static json_t *
sandbox_get(struct mcp_ctx *x, const char *what, const char *sbx)
{
	char path[SPACE_ID_MAX + 32];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s", sbx);
	return ctl(x, what, "GET", path, NULL);
}

/* A data-plane operation failed: when the reason is the sandbox's state
 * (paused, killed, still starting), say that, and what to do about it. */
static json_t *
data_fail(struct mcp_ctx *x, const char *what, const char *sbx, const struct space_answer *a)
{
	char saved[sizeof(x->err)];
	const char *st;
	json_t *s;

	answer_fail(x, what, a);
	if (a->status == 404 || (a->status >= 200 && a->status < 300))
		return NULL;
	snprintf(saved, sizeof(saved), "%s", x->err);
	if ((s = sandbox_get(x, what, sbx)) == NULL) {
		/* the sandbox itself is unknown: that error says it best */
		return NULL;
	}
	snprintf(x->err, sizeof(x->err), "%s", saved);
	st = mcp_jstr(s, "state");
	if (st != NULL && (strcmp(st, "paused") == 0 || strcmp(st, "pausing") == 0))
		mcp_fail(x, "%s: sandbox %s is %s: call resume first", what, sbx, st);
	else if (st != NULL && (strcmp(st, "killed") == 0 || strcmp(st, "stopping") == 0 ||
	    strcmp(st, "failed") == 0))
		mcp_fail(x, "%s: sandbox %s is %s", what, sbx, st);
	else if (st != NULL && strcmp(st, "running") != 0)
		mcp_fail(x, "%s: sandbox %s is %s; try again shortly (%s)", what, sbx, st, saved);
	json_decref(s);
	return NULL;
}

/* one data-plane operation through the route cache: the answer in *a
 * (2xx), or -1 with x->err */
int
mcp_data_op(struct mcp_ctx *x, const char *what, const char *sbx, struct space_data_op *op,
    struct space_answer *a)
{
	if (space_sbx_op(x->c, sbx, op, a) < 0 || !space_answer_ok(a)) {
		data_fail(x, what, sbx, a);
		return -1;
	}
	return 0;
}

void
mcp_op_init(struct space_data_op *op, const char *access, const char *method, char *path)
{
	memset(op, 0, sizeof(*op));
	op->access = access;
	op->method = method;
	op->path = path;
	op->in_fd = op->out_fd = -1;
	op->timeout = 60;
}

/* "PREFIX?path=P" (and "&mode=0M"), escaped; NULL on ENOMEM */
char *
mcp_path_query(const char *prefix, const char *path, const char *mode)
{
	char *esc = space_url_escape(path), *q;
	size_t n;

	if (esc == NULL)
		return NULL;
	n = strlen(prefix) + strlen(esc) + 32;
	if ((q = malloc(n)) != NULL)
		snprintf(q, n, "%s?path=%s%s%s", prefix, esc, mode ? "&mode=" : "", mode ? mode : "");
	free(esc);
	return q;
}

/* ---- sandboxes ---- */

/* what an agent needs of a sandbox object */
static json_t *
summary(const json_t *s)
{
	const json_t *e = json_object_get(s, "execution");
	json_t *o = json_pack("{s:s,s:s}", "id", mcp_jstr(s, "id") ? mcp_jstr(s, "id") : "",
	    "state", mcp_jstr(s, "state") ? mcp_jstr(s, "state") : "");
	const char *t;

	if (o == NULL)
		return NULL;
	if ((t = mcp_jstr(s, "template")) != NULL)
		json_object_set_new(o, "template", json_string(t));
	json_object_set_new(o, "worker", mcp_jstr(e, "worker") ? json_string(mcp_jstr(e, "worker")) :
	    json_null());
	json_object_set_new(o, "generation", json_is_integer(json_object_get(e, "generation")) ?
	    json_incref(json_object_get(e, "generation")) : json_null());
	json_object_set_new(o, "execution_state", mcp_jstr(e, "state") ?
	    json_string(mcp_jstr(e, "state")) : json_null());
	if ((t = mcp_jstr(s, "created_at")) != NULL)
		json_object_set_new(o, "created_at", json_string(t));
	return o;
}

/* Waits until the sandbox is in state want ("running": and its execution
 * serves), at most secs seconds, saying each new state as progress:
 * space-control holds each GET until then (?until=, a second at a time,
 * so that a state on the way is still said). The summary, or NULL with
 * x->err. */
static json_t *
wait_state(struct mcp_ctx *x, const char *what, const char *sbx, const char *want, int secs)
{
	struct timespec t0, now;
	unsigned ms = 5;
	char last[64] = "";
	const char *st, *es;
	json_t *s, *r;

	bool lp = strcmp(want, "running") == 0 || strcmp(want, "paused") == 0 ||
	    strcmp(want, "killed") == 0;
	char path[SPACE_ID_MAX + 64];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		snprintf(path, sizeof(path), lp ? "/v1/sandboxes/%s?until=%s&wait=1" :
		    "/v1/sandboxes/%s", sbx, want);
		if ((s = ctl(x, what, "GET", path, NULL)) == NULL)
			return NULL;
		st = mcp_jstr(s, "state") ? mcp_jstr(s, "state") : "?";
		es = mcp_jstr(json_object_get(s, "execution"), "state");
		if (strcmp(st, last) != 0) {
			mcp_progress(x, "sandbox %s: %s", sbx, st);
			snprintf(last, sizeof(last), "%s", st);
		}
		if (strcmp(st, want) == 0 && (strcmp(want, "running") != 0 ||
		    (es != NULL && strcmp(es, "serving") == 0))) {
			r = summary(s);
			json_decref(s);
			return r;
		}
		if (strcmp(st, "failed") == 0 || strcmp(st, "killed") == 0 ||
		    strcmp(st, "stopping") == 0) {
			mcp_fail(x, "%s: sandbox %s is %s", what, sbx, st);
			json_decref(s);
			return NULL;
		}
		json_decref(s);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= secs)
			return mcp_fail(x, "%s: sandbox %s is still %s after %d s (want %s); "
			    "call get_sandbox later", what, sbx, last, secs, want);
		usleep(ms * 1000);
		if ((ms *= 2) > 200)
			ms = 200;
	}
}

static int
wait_secs(const json_t *args)
{
	const json_t *w = json_object_get(args, "wait_seconds");

	return json_is_integer(w) ? (int)json_integer_value(w) : WAIT_DEFAULT;
}

static int
wants_wait(const json_t *args)
{
	return !json_is_false(json_object_get(args, "wait"));
}

static json_t *
t_create(struct mcp_ctx *x, json_t *args)
{
	static const char *res[] = { "memory_mb", "cpu_percent", "disk_mb", "pids" };
	json_t *req = json_object(), *r = NULL, *s = NULL, *v, *resources, *timeouts;
	char id[SPACE_ID_MAX + 1];
	size_t i;

	resources = json_object();
	timeouts = json_object();
	if (req == NULL || resources == NULL || timeouts == NULL) {
		mcp_fail(x, "sandbox_create: out of memory");
		goto out;
	}
	if ((v = json_object_get(args, "template")) != NULL)
		json_object_set(req, "template", v);
	if ((v = json_object_get(args, "worker")) != NULL)
		json_object_set(req, "worker", v);
	if ((v = json_object_get(args, "metadata")) != NULL)
		json_object_set(req, "metadata", v);
	if ((v = json_object_get(args, "network")) != NULL)
		json_object_set(req, "network", v);
	for (i = 0; i < sizeof(res) / sizeof(res[0]); i++)
		if ((v = json_object_get(args, res[i])) != NULL)
			json_object_set(resources, res[i], v);
	if ((v = json_object_get(args, "idle_timeout")) != NULL)
		json_object_set(timeouts, "idle", v);
	if ((v = json_object_get(args, "absolute_timeout")) != NULL)
		json_object_set(timeouts, "absolute", v);
	if ((v = json_object_get(args, "timeout_action")) != NULL)
		json_object_set(timeouts, "action", v);
	if (json_object_size(resources) > 0)
		json_object_set(req, "resources", resources);
	if (json_object_size(timeouts) > 0)
		json_object_set(req, "timeouts", timeouts);
	if ((s = ctl(x, "sandbox_create", "POST", "/v1/sandboxes", req)) == NULL)
		goto out;
	if (mcp_jstr(s, "id") == NULL || !id_valid(mcp_jstr(s, "id"))) {
		mcp_fail(x, "sandbox_create: the control plane answered without a valid id");
		goto out;
	}
	snprintf(id, sizeof(id), "%s", mcp_jstr(s, "id"));
	mcp_progress(x, "sandbox %s: created", id);
	if (wants_wait(args))
		r = wait_state(x, "sandbox_create", id, "running", wait_secs(args));
	else
		r = summary(s);
out:
	json_decref(req);
	json_decref(resources);
	json_decref(timeouts);
	json_decref(s);
	return r;
}

/* pages of the control plane's list an agent's list reads at most */
#define MCP_LIST_PAGES 10

static json_t *
t_list(struct mcp_ctx *x, json_t *args)
{
	struct space_answer a;
	json_t *all, *out, *s;
	size_t i;

	(void)args;
	/* the sandboxes not killed, page after page (1,000 each) */
	if (space_sandboxes(x->c, true, MCP_LIST_PAGES, &all, &a) < 0) {
		answer_fail(x, "list_sandboxes", &a);
		space_answer_clear(&a);
		return NULL;
	}
	space_answer_clear(&a);
	if ((out = json_array()) == NULL) {
		json_decref(all);
		return NULL;
	}
	json_array_foreach(all, i, s)
		json_array_append_new(out, summary(s));
	json_decref(all);
	return json_pack("{s:o}", "sandboxes", out);
}

static json_t *
t_get(struct mcp_ctx *x, json_t *args)
{
	json_t *s = sandbox_get(x, "get_sandbox", mcp_jstr(args, "sandbox")), *r;

	if (s == NULL)
		return NULL;
	if ((r = summary(s)) != NULL) {
		if (json_is_object(json_object_get(s, "resources")))
			json_object_set(r, "resources", json_object_get(s, "resources"));
		if (json_is_object(json_object_get(s, "timeouts")))
			json_object_set(r, "timeouts", json_object_get(s, "timeouts"));
	}
	json_decref(s);
	return r;
}

/* pause and resume: start the operation, then wait for its end state */
static json_t *
lifecycle(struct mcp_ctx *x, json_t *args, const char *what, const char *verb,
    const char *done)
{
	const char *sbx = mcp_jstr(args, "sandbox");
	char path[SPACE_ID_MAX + 32];
	json_t *body, *r;

	body = json_object_get(args, "worker") ? json_pack("{s:O}", "worker",
	    json_object_get(args, "worker")) : json_object();
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", sbx, verb);
	r = ctl(x, what, "POST", path, body);
	json_decref(body);
	if (r == NULL)
		return NULL;
	json_decref(r);
	if (!wants_wait(args)) {
		if ((r = sandbox_get(x, what, sbx)) == NULL)
			return NULL;
		body = summary(r);
		json_decref(r);
		return body;
	}
	return wait_state(x, what, sbx, done, wait_secs(args));
}

static json_t *
t_pause(struct mcp_ctx *x, json_t *args)
{
	return lifecycle(x, args, "pause", "pause", "paused");
}

static json_t *
t_resume(struct mcp_ctx *x, json_t *args)
{
	return lifecycle(x, args, "resume", "resume", "running");
}

static json_t *
t_kill(struct mcp_ctx *x, json_t *args)
{
	char path[SPACE_ID_MAX + 32];
	json_t *r, *o;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s", mcp_jstr(args, "sandbox"));
	if ((r = ctl(x, "kill", "DELETE", path, NULL)) == NULL)
		return NULL;
	o = json_pack("{s:s,s:s}", "id", mcp_jstr(args, "sandbox"), "state",
	    mcp_jstr(r, "state") ? mcp_jstr(r, "state") : "killed");
	json_decref(r);
	return o;
}

/* a sandbox port declared (public or not) and its address at space-edge;
 * the edge routes by Host name (docs/network.md) */
static json_t *
t_port_url(struct mcp_ctx *x, json_t *args)
{
	char path[SPACE_ID_MAX + 32];
	const char *domain = getenv("SPACE_EDGE_DOMAIN");
	json_int_t port = json_integer_value(json_object_get(args, "port"));
	bool pub = json_is_true(json_object_get(args, "public"));
	json_t *body, *r, *o;
	char *url = NULL;

	if (domain == NULL || domain[0] == '\0')
		return mcp_fail(x, "this server has no SPACE_EDGE_DOMAIN (space up writes it into "
		    "its env file): port URLs are not known here");
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports", mcp_jstr(args, "sandbox"));
	body = json_pack("{s:I,s:b}", "port", port, "public", pub);
	r = ctl(x, "port_url", "POST", path, body);
	json_decref(body);
	if (r == NULL)
		return NULL;
	json_decref(r);
	if (asprintf(&url, "http://%lld-%s.%s/", (long long)port, mcp_jstr(args, "sandbox"),
	    domain) < 0)
		return mcp_fail(x, "out of memory");
	o = json_pack("{s:s,s:I,s:b,s:s}", "url", url, "port", port, "public", pub,
	    "access", pub ? "anyone with the URL" :
	    "the owner's API key (Authorization: Bearer) or the sandbox's traffic token");
	free(url);
	return o;
}

/* ---- commands ---- */

/* stdout or stderr of the result into out, at most max bytes: text when
 * the sandbox sent text (cut at a character boundary), else base64 of at
 * most max bytes */
static void
put_stream(json_t *out, const json_t *res, const char *name, size_t max)
{
	char key[32];
	const json_t *v = json_object_get(res, name);
	const char *s;
	size_t n;
	int cut = 0;

	snprintf(key, sizeof(key), "%s_encoding", name);
	if (json_is_string(v)) {
		s = json_string_value(v);
		n = json_string_length(v);
		if (n > max) {
			n = max;
			while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
				n--;
			cut = 1;
		}
		json_object_set_new(out, name, json_stringn(s, n));
		json_object_set_new(out, key, json_string("text"));
	} else {
		snprintf(key, sizeof(key), "%s_b64", name);
		s = json_string_value(json_object_get(res, key));
		n = s ? strlen(s) : 0;
		if (n / 4 * 3 > max) {
			n = max / 3 * 4;
			cut = 1;
		}
		json_object_set_new(out, name, json_stringn(s ? s : "", n));
		snprintf(key, sizeof(key), "%s_encoding", name);
		json_object_set_new(out, key, json_string(s ? "base64" : "text"));
	}
	snprintf(key, sizeof(key), "%s_truncated", name);
	json_object_set_new(out, key, json_boolean(cut ||
	    json_is_true(json_object_get(res, key))));
}

static json_t *
t_run(struct mcp_ctx *x, json_t *args)
{
	const char *sbx = mcp_jstr(args, "sandbox");
	json_t *argv = json_object_get(args, "argv"), *cmd = json_object_get(args, "command");
	json_t *body = NULL, *out = NULL, *res, *v;
	struct space_data_op op;
	struct space_answer a;
	json_int_t timeout = 30, max = OUTPUT_DEFAULT;
	int sig;

	space_answer_init(&a);
	if ((argv == NULL) == (cmd == NULL))
		return mcp_fail(x, "run_command: give exactly one of argv (a program and its "
		    "arguments) and command (a shell line, run by sh -c)");
	if (json_is_integer(json_object_get(args, "timeout")))
		timeout = json_integer_value(json_object_get(args, "timeout"));
	if (json_is_integer(json_object_get(args, "max_output_bytes")))
		max = json_integer_value(json_object_get(args, "max_output_bytes"));
	if (cmd != NULL)
		body = json_pack("{s:[s,s,O],s:I}", "argv", "sh", "-c", cmd, "timeout", timeout);
	else
		body = json_pack("{s:O,s:I}", "argv", argv, "timeout", timeout);
	if (body == NULL)
		return mcp_fail(x, "run_command: out of memory");
	if ((v = json_object_get(args, "cwd")) != NULL)
		json_object_set(body, "cwd", v);
	if ((v = json_object_get(args, "env")) != NULL)
		json_object_set(body, "env", v);
	if ((v = json_object_get(args, "stdin")) != NULL)
		json_object_set(body, "stdin", v);
	mcp_op_init(&op, "exec", "POST", "exec");
	op.body = body;
	/* the sandbox enforces the timeout; this bounds a backend that never
	 * answers */
	op.timeout = (long)timeout + 15;
	mcp_progress(x, "running in %s", sbx);
	if (mcp_data_op(x, "run_command", sbx, &op, &a) != 0)
		goto out;
	res = a.body;
	if (!json_is_object(res)) {
		mcp_fail(x, "run_command: malformed exec result");
		goto out;
	}
	sig = cli_signal_number(json_object_get(res, "signal"));
	out = json_pack("{s:o,s:o,s:b,s:b}",
	    "exit_code", json_is_integer(json_object_get(res, "exit_code")) ?
	    json_incref(json_object_get(res, "exit_code")) : json_null(),
	    "signal", sig > 0 ? json_integer(sig) : json_null(),
	    "timed_out", json_is_true(json_object_get(res, "timed_out")),
	    "oom_killed", json_is_true(json_object_get(res, "oom_killed")));
	if (out == NULL) {
		mcp_fail(x, "run_command: out of memory");
		goto out;
	}
	put_stream(out, res, "stdout", (size_t)max);
	put_stream(out, res, "stderr", (size_t)max);
out:
	json_decref(body);
	space_answer_clear(&a);
	return out;
}

/* ---- the table ---- */

#define SBX_ARG "'sandbox':{'type':'string','pattern':'^[A-Za-z0-9_-]{1,64}$'," \
	"'description':'the sandbox id (from sandbox_create or list_sandboxes)'}"
#define PATH_ARG "'path':{'type':'string','minLength':1,'maxLength':4096," \
	"'description':'absolute path inside the sandbox'}"
#define WAIT_ARGS "'wait':{'type':'boolean','default':true,'description':" \
	"'wait until the operation has finished'},'wait_seconds':{'type':'integer'," \
	"'minimum':1,'maximum':3600,'default':60,'description':'how long to wait at most'}"
#define SUMMARY_PROPS "'id':{'type':'string'},'state':{'type':'string','description':" \
	"'creating, running, pausing, paused, resuming, moving, stopping, killed or failed'}," \
	"'template':{'type':'string'},'worker':{'type':['string','null'],'description':" \
	"'the worker running its current execution'},'generation':{'type':['integer','null']," \
	"'description':'its current execution; a resume or a move makes a new one'}," \
	"'execution_state':{'type':['string','null']},'created_at':{'type':'string'}"
#define SUMMARY "{'type':'object','required':['id','state'],'properties':{" SUMMARY_PROPS "}}"

const struct mcp_tool mcp_tools[] = {
	{ "sandbox_create", "Create a sandbox",
	  "Create a sandbox (an isolated Linux environment with its own file system) and "
	  "wait until it runs. Returns its id, used by every other tool.",
	  "{'type':'object','additionalProperties':false,'properties':{"
	  "'template':{'type':'string','pattern':'^[A-Za-z0-9_-]{1,64}$','description':"
	  "'root file system template (default: the deployment default, host)'},"
	  "'memory_mb':{'type':'integer','minimum':1,'description':'memory limit, MiB'},"
	  "'cpu_percent':{'type':'integer','minimum':1,'description':'percent of one CPU'},"
	  "'disk_mb':{'type':'integer','minimum':16,'description':'size of the writable layer, MiB'},"
	  "'pids':{'type':'integer','minimum':1,'description':'process limit'},"
	  "'idle_timeout':{'type':'integer','minimum':0,'maximum':31622400,'description':"
	  "'seconds without use before timeout_action; 0: never'},"
	  "'absolute_timeout':{'type':'integer','minimum':0,'maximum':31622400,'description':"
	  "'seconds after start before timeout_action; 0: never'},"
	  "'timeout_action':{'type':'string','enum':['pause','kill'],'default':'pause'},"
	  "'worker':{'type':'string','pattern':'^[A-Za-z0-9_-]{1,64}$','description':"
	  "'place it on this worker'},"
	  "'metadata':{'type':'object','description':'free-form labels, at most 16 KiB'},"
	  "'network':{'type':'object','additionalProperties':false,'description':"
	  "'egress policy (default: internet on, private ranges off; the worker, the control "
	  "plane, other sandboxes, link-local and metadata addresses are always refused)',"
	  "'properties':{'internet':{'type':'boolean','description':'reach the internet at all'},"
	  "'allow':{'type':'array','maxItems':64,'items':{'type':'string','minLength':1,'maxLength':253},"
	  "'description':'CIDRs or host names let through (host names resolved now)'},"
	  "'deny':{'type':'array','maxItems':64,'items':{'type':'string','minLength':1,'maxLength':253},"
	  "'description':'CIDRs or host names refused; a deny beats an allow'}}},"
	  WAIT_ARGS "}}",
	  SUMMARY, "{'readOnlyHint':false,'destructiveHint':false,'idempotentHint':false,'openWorldHint':false}",
	  t_create },
	{ "run_command", "Run a command in a sandbox",
	  "Run a command in a sandbox and return its exit status, stdout and stderr. Give "
	  "argv (a program and its arguments) or command (a shell line, run by sh -c). "
	  "Output beyond max_output_bytes is cut and the *_truncated flag says so; output "
	  "that is not UTF-8 comes base64 (*_encoding says which).",
	  "{'type':'object','additionalProperties':false,'required':['sandbox'],'properties':{"
	  SBX_ARG ","
	  "'argv':{'type':'array','minItems':1,'maxItems':1024,'items':{'type':'string'},"
	  "'description':'program and arguments, run without a shell'},"
	  "'command':{'type':'string','minLength':1,'description':'a shell line, run by sh -c'},"
	  "'cwd':{'type':'string','maxLength':4096,'description':'working directory (default /home/user)'},"
	  "'env':{'type':'object','maxProperties':256,'additionalProperties':{'type':'string'},"
	  "'description':'environment variables'},"
	  "'stdin':{'type':'string','maxLength':1048576,'description':'text sent to its stdin'},"
	  "'timeout':{'type':'integer','minimum':1,'maximum':3600,'default':30,'description':"
	  "'seconds; then it is killed and timed_out is true'},"
	  "'max_output_bytes':{'type':'integer','minimum':1,'maximum':1048576,'default':65536,"
	  "'description':'bytes of stdout and of stderr returned at most'}}}",
	  "{'type':'object','required':['exit_code','signal','timed_out','stdout','stderr',"
	  "'stdout_truncated','stderr_truncated'],'properties':{"
	  "'exit_code':{'type':['integer','null'],'description':'null when killed by a signal'},"
	  "'signal':{'type':['integer','null']},'timed_out':{'type':'boolean'},"
	  "'oom_killed':{'type':'boolean'},"
	  "'stdout':{'type':'string'},'stderr':{'type':'string'},"
	  "'stdout_encoding':{'type':'string','enum':['text','base64']},"
	  "'stderr_encoding':{'type':'string','enum':['text','base64']},"
	  "'stdout_truncated':{'type':'boolean'},'stderr_truncated':{'type':'boolean'}}}",
	  "{'readOnlyHint':false,'destructiveHint':true,'idempotentHint':false,'openWorldHint':true}",
	  t_run },
	{ "read_file", "Read a file of a sandbox",
	  "Read a file of a sandbox: as text when it is UTF-8 and encoding is text, else "
	  "base64 (encoding in the result says which). At most max_bytes are returned; "
	  "truncated says when the file is longer.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox','path'],"
	  "'properties':{" SBX_ARG "," PATH_ARG ","
	  "'encoding':{'type':'string','enum':['text','base64'],'default':'text'},"
	  "'max_bytes':{'type':'integer','minimum':1,'maximum':8388608,'default':1048576}}}",
	  "{'type':'object','required':['path','size','encoding','content','truncated'],"
	  "'properties':{'path':{'type':'string'},'size':{'type':'integer','description':"
	  "'the file size'},'returned_bytes':{'type':'integer'},"
	  "'encoding':{'type':'string','enum':['text','base64']},'content':{'type':'string'},"
	  "'truncated':{'type':'boolean'}}}",
	  "{'readOnlyHint':true,'openWorldHint':false}",
	  mcp_read_file },
	{ "write_file", "Write a file of a sandbox",
	  "Write (create or replace) a file of a sandbox from text or base64 content; the "
	  "file is replaced only once all of it arrived.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox','path','content'],"
	  "'properties':{" SBX_ARG "," PATH_ARG ","
	  "'content':{'type':'string'},"
	  "'encoding':{'type':'string','enum':['text','base64'],'default':'text'},"
	  "'mode':{'type':'string','pattern':'^0?[0-7]{1,4}$','description':'octal permission bits, e.g. 0755'},"
	  "'make_parents':{'type':'boolean','default':false,'description':'create missing parent directories'}}}",
	  "{'type':'object','required':['path','size'],'properties':{'path':{'type':'string'},"
	  "'size':{'type':'integer','description':'bytes written'}}}",
	  "{'readOnlyHint':false,'destructiveHint':true,'idempotentHint':true,'openWorldHint':false}",
	  mcp_write_file },
	{ "list_dir", "List a directory of a sandbox",
	  "List a directory of a sandbox: name, type (file, dir, symlink, other), size, mode "
	  "and mtime of each entry.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox','path'],"
	  "'properties':{" SBX_ARG "," PATH_ARG "}}",
	  "{'type':'object','required':['path','entries'],'properties':{'path':{'type':'string'},"
	  "'entries':{'type':'array','items':{'type':'object','properties':{"
	  "'name':{'type':'string'},'type':{'type':'string'},'size':{'type':'integer'},"
	  "'mode':{'type':'integer'},'mtime':{'type':'string'}}}}}}",
	  "{'readOnlyHint':true,'openWorldHint':false}",
	  mcp_list_dir },
	{ "list_sandboxes", "List sandboxes",
	  "List the sandboxes of this API key that are not killed, with their state, worker and generation.",
	  "{'type':'object','additionalProperties':false,'properties':{}}",
	  "{'type':'object','required':['sandboxes'],'properties':{'sandboxes':{'type':'array',"
	  "'items':" SUMMARY "}}}",
	  "{'readOnlyHint':true,'openWorldHint':false}",
	  t_list },
	{ "get_sandbox", "Show a sandbox",
	  "Show a sandbox: state, worker, generation, resources and timeouts.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox'],'properties':{"
	  SBX_ARG "}}",
	  "{'type':'object','required':['id','state'],'properties':{" SUMMARY_PROPS ","
	  "'resources':{'type':'object'},'timeouts':{'type':'object'}}}",
	  "{'readOnlyHint':true,'openWorldHint':false}",
	  t_get },
	{ "pause", "Pause a sandbox",
	  "Pause a running sandbox: its files are kept in a snapshot, its processes are "
	  "stopped. resume brings it back.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox'],'properties':{"
	  SBX_ARG "," WAIT_ARGS "}}",
	  SUMMARY, "{'readOnlyHint':false,'destructiveHint':false,'idempotentHint':false,'openWorldHint':false}",
	  t_pause },
	{ "resume", "Resume a sandbox",
	  "Resume a paused sandbox with its files, as a new generation, optionally on "
	  "another worker.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox'],'properties':{"
	  SBX_ARG ",'worker':{'type':'string','pattern':'^[A-Za-z0-9_-]{1,64}$','description':"
	  "'resume on this worker (default: the previous one if it can)'}," WAIT_ARGS "}}",
	  SUMMARY, "{'readOnlyHint':false,'destructiveHint':false,'idempotentHint':false,'openWorldHint':false}",
	  t_resume },
	{ "kill", "Kill a sandbox",
	  "Kill a sandbox: its processes and files are gone and it cannot be resumed.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox'],'properties':{"
	  SBX_ARG "}}",
	  "{'type':'object','required':['id','state'],'properties':{'id':{'type':'string'},"
	  "'state':{'type':'string'}}}",
	  "{'readOnlyHint':false,'destructiveHint':true,'idempotentHint':true,'openWorldHint':false}",
	  t_kill },
	{ "port_url", "Expose a sandbox port and give its URL",
	  "Declare a TCP port a server in the sandbox listens on (on 127.0.0.1 or any "
	  "address inside it) and return the URL that reaches it through space-edge. A "
	  "private port (the default) needs the owner's API key or the sandbox's traffic "
	  "token; a public one needs nothing.",
	  "{'type':'object','additionalProperties':false,'required':['sandbox','port'],"
	  "'properties':{" SBX_ARG ",'port':{'type':'integer','minimum':1,'maximum':65535},"
	  "'public':{'type':'boolean','default':false,'description':'reachable without a credential'}}}",
	  "{'type':'object','required':['url','port','public'],'properties':{"
	  "'url':{'type':'string'},'port':{'type':'integer'},'public':{'type':'boolean'},"
	  "'access':{'type':'string','description':'who may open it'}}}",
	  "{'readOnlyHint':false,'destructiveHint':false,'idempotentHint':true,'openWorldHint':true}",
	  t_port_url },
};
const size_t mcp_ntools = sizeof(mcp_tools) / sizeof(mcp_tools[0]);
