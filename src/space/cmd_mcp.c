/* space mcp: a Model Context Protocol server on stdio (docs/mcp.md).
 *
 * One process reads newline-delimited JSON-RPC 2.0 from stdin and writes
 * only protocol messages to stdout (its fd 1 is pointed at stderr, where
 * logs go, and the protocol has a private copy). Each tools/call runs in a
 * child process of its own, so that:
 *   - calls run concurrently, and the loop keeps reading stdin meanwhile;
 *   - a cancellation (notifications/cancelled) stops its call at once, in
 *     whatever blocking HTTP exchange it is (the child is killed);
 *   - a call that crashes is a tool error, never a dead server.
 * A child tells the server its progress and then its result as JSON lines
 * on a pipe. The children share the platform's route cache through its
 * file (locked and merged on save, as concurrent CLI commands do): a call
 * saves it before answering, so the next call starts from the route the
 * previous one learnt. When stdin ends, the calls still running finish
 * and are answered, then the server exits (a client that wants it gone
 * sooner sends SIGTERM, as the protocol says; the calls die with it). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "jschema.h"
#include "jsonrpc.h"
#include "limits.h"
#include "mcp.h"
#include "space.h"
#include "util.h"

#ifndef SPACE_VERSION
#define SPACE_VERSION "0.1.0"
#endif

#define USAGE "\n" \
	"  Serve the Model Context Protocol on stdin/stdout for an agent: tools to\n" \
	"  create sandboxes, run commands, read and write files, list, pause,\n" \
	"  resume and kill them (docs/mcp.md). Reads SPACE_API_URL and\n" \
	"  SPACE_API_KEY; logs go to stderr."

#define PROGRESS_EVERY_S        1       /* a running call with a progress token
                                           says so at least this often */
#define CALL_OUT_MAX            (48u << 20)     /* what one call may send back */

/* protocol revisions understood, newest first */
static const char *const versions[] = { "2025-06-18", "2025-03-26", "2024-11-05" };

struct call {
	pid_t   pid;
	int     fd;             /* read end of the child's pipe */
	json_t *id;             /* the request's id */
	json_t *token;          /* _meta.progressToken, or NULL */
	double  progress;       /* last progress value sent */
	struct timespec last;   /* when progress was last sent */
	struct timespec start;
	const struct mcp_tool *tool;
	char   *buf;            /* what the child sent, not yet a whole line */
	size_t  len, cap;
	json_t *result;         /* the CallToolResult the child sent */
	int     cancelled;
};

struct server {
	int     out;            /* the protocol's stdout */
	int     initialized;    /* answered initialize */
	char    version[16];    /* the negotiated protocol revision */
	json_t *tools;          /* the tools/list answer's "tools" */
	json_t *schemas[64];    /* input schema per tool, parsed */
	struct call calls[SPACE_MCP_CALLS_MAX];
	size_t  ncalls;
	/* stdin */
	char   *in;
	size_t  inlen, incap;
	int     discarding;     /* skipping the rest of an oversized line */
	int     eof;
};

static void
logm(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
logm(const char *fmt, ...)
{
	va_list ap;

	fputs("space mcp: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

/* one message on stdout; a client that went away ends the server */
static void
send_msg(struct server *s, json_t *msg)
{
	size_t len;
	char *line;

	if (msg == NULL) {
		logm("out of memory building an answer");
		return;
	}
	line = jrpc_line(msg, &len);
	json_decref(msg);
	if (line == NULL) {
		logm("cannot encode an answer");
		return;
	}
	if (fd_write_all(s->out, line, len) != 0) {
		logm("stdout: %s; exiting", strerror(errno));
		free(line);
		exit(1);
	}
	free(line);
}

static void
send_error(struct server *s, json_t *id, int code, const char *msg)
{
	send_msg(s, jrpc_error(id, code, msg));
}

/* single quotes to double: the tool table's schemas */
static json_t *
sq_json(const char *sq)
{
	char *t = strdup(sq), *p;
	json_error_t e;
	json_t *j;

	if (t == NULL)
		return NULL;
	for (p = t; *p; p++)
		if (*p == '\'')
			*p = '"';
	j = json_loads(t, JSON_REJECT_DUPLICATES, &e);
	if (j == NULL)
		logm("tool schema: %s at %d", e.text, e.position);
	free(t);
	return j;
}

static int
tools_load(struct server *s)
{
	json_t *in, *out, *ann, *t;
	size_t i;

	if ((s->tools = json_array()) == NULL || mcp_ntools > 64)
		return -1;
	for (i = 0; i < mcp_ntools; i++) {
		in = sq_json(mcp_tools[i].input_schema);
		out = sq_json(mcp_tools[i].output_schema);
		ann = sq_json(mcp_tools[i].annotations);
		if (in == NULL || out == NULL || ann == NULL) {
			logm("tool %s: bad schema", mcp_tools[i].name);
			json_decref(in);
			json_decref(out);
			json_decref(ann);
			return -1;
		}
		s->schemas[i] = json_incref(in);
		t = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o}", "name", mcp_tools[i].name,
		    "title", mcp_tools[i].title, "description", mcp_tools[i].description,
		    "inputSchema", in, "outputSchema", out, "annotations", ann);
		if (t == NULL || json_array_append_new(s->tools, t) != 0)
			return -1;
	}
	return 0;
}

static json_t *
tool_error(const char *msg)
{
	return json_pack("{s:[{s:s,s:s}],s:b}", "content", "type", "text", "text", msg,
	    "isError", 1);
}

/* ---- requests ---- */

static void
on_initialize(struct server *s, const struct jrpc_msg *m)
{
	const char *want = json_string_value(json_object_get(m->params, "protocolVersion"));
	const char *v = versions[0];
	size_t i;

	if (s->initialized) {
		send_error(s, m->id, JRPC_INVALID_REQUEST, "already initialized");
		return;
	}
	if (!json_is_object(m->params) || want == NULL) {
		send_error(s, m->id, JRPC_INVALID_PARAMS,
		    "initialize needs params with a protocolVersion string");
		return;
	}
	/* the client's revision when it is one we speak, else our newest:
	 * the client then decides whether it can go on */
	for (i = 0; i < sizeof(versions) / sizeof(versions[0]); i++)
		if (strcmp(want, versions[i]) == 0)
			v = versions[i];
	snprintf(s->version, sizeof(s->version), "%s", v);
	s->initialized = 1;
	send_msg(s, jrpc_result(m->id, json_pack("{s:s,s:{s:{s:b}},s:{s:s,s:s,s:s},s:s}",
	    "protocolVersion", v,
	    "capabilities", "tools", "listChanged", 0,
	    "serverInfo", "name", "space", "title", "space sandboxes", "version", SPACE_VERSION,
	    "instructions", "Sandboxes are isolated Linux environments. Create one with "
	    "sandbox_create, then use its id with run_command, read_file, write_file and "
	    "list_dir; kill it when done.")));
}

static struct call *
find_call(struct server *s, const json_t *id)
{
	size_t i;

	for (i = 0; i < s->ncalls; i++)
		if (json_equal(s->calls[i].id, id))
			return &s->calls[i];
	return NULL;
}

/* the child: run the tool, save the route cache, send the result, exit */
static void __attribute__((noreturn))
call_child(struct server *s, const struct mcp_tool *t, json_t *args, int wfd)
{
	struct mcp_ctx x;
	json_t *res, *msg;
	char *text;
	size_t i;
	int fd;

	/* the protocol is the server's alone: nothing of a call may reach
	 * stdout, and stdin stays with the server */
	close(s->out);
	for (i = 0; i < s->ncalls; i++)
		close(s->calls[i].fd);
	if ((fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0) {
		dup2(fd, STDIN_FILENO);
		close(fd);
	}
	signal(SIGPIPE, SIG_DFL);
	/* a call never outlives its server (killed by the client after it
	 * closed stdin, say) */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 1)
		_exit(1);
	memset(&x, 0, sizeof(x));
	x.out_fd = wfd;
	x.c = space_client_new(getenv("SPACE_API_URL"), getenv("SPACE_API_KEY"));
	if (getenv("SPACE_API_URL") == NULL || getenv("SPACE_API_URL")[0] == '\0')
		res = mcp_fail(&x, "SPACE_API_URL is not set in the environment of space mcp");
	else if (getenv("SPACE_API_KEY") == NULL || getenv("SPACE_API_KEY")[0] == '\0')
		res = mcp_fail(&x, "SPACE_API_KEY is not set in the environment of space mcp");
	else if (x.c == NULL)
		res = mcp_fail(&x, "bad SPACE_API_URL (want http://HOST:PORT): %s", strerror(errno));
	else
		res = t->run(&x, args);
	/* saves the route cache: the next call starts from what this one learnt */
	space_client_free(x.c);
	if (res != NULL) {
		text = json_dumps(res, JSON_COMPACT);
		msg = json_pack("{s:{s:[{s:s,s:s?}],s:o,s:b}}", "result", "content",
		    "type", "text", "text", text, "structuredContent", res, "isError", 0);
		free(text);
	} else
		msg = json_pack("{s:o}", "result", tool_error(x.err[0] ? x.err : "failed"));
	if (msg != NULL && (text = json_dumps(msg, JSON_COMPACT)) != NULL) {
		(void)fd_write_all(wfd, text, strlen(text));
		(void)fd_write_all(wfd, "\n", 1);
	}
	_exit(0);
}

static void
on_call(struct server *s, const struct jrpc_msg *m)
{
	const char *name = json_string_value(json_object_get(m->params, "name"));
	json_t *args = json_object_get(m->params, "arguments"), *empty = NULL, *meta;
	const struct mcp_tool *t = NULL;
	struct call *c;
	char err[512], msg[600];
	int p[2];
	size_t i;
	pid_t pid;

	if (!json_is_object(m->params) || name == NULL) {
		send_error(s, m->id, JRPC_INVALID_PARAMS, "tools/call needs params with a name");
		return;
	}
	if (args != NULL && !json_is_object(args)) {
		send_error(s, m->id, JRPC_INVALID_PARAMS, "arguments must be an object");
		return;
	}
	for (i = 0; i < mcp_ntools; i++)
		if (strcmp(mcp_tools[i].name, name) == 0)
			t = &mcp_tools[i];
	if (t == NULL) {
		snprintf(msg, sizeof(msg), "unknown tool: %.128s", name);
		send_error(s, m->id, JRPC_INVALID_PARAMS, msg);
		return;
	}
	if (find_call(s, m->id) != NULL) {
		send_error(s, m->id, JRPC_INVALID_REQUEST, "a request with this id is running");
		return;
	}
	if (args == NULL)
		args = empty = json_object();
	/* arguments the schema refuses are a tool error, so that the model
	 * reads what to correct */
	if (jschema_check(s->schemas[t - mcp_tools], args, err, sizeof(err)) != 0) {
		snprintf(msg, sizeof(msg), "%s: bad arguments: %s", name, err);
		send_msg(s, jrpc_result(m->id, tool_error(msg)));
		goto out;
	}
	if (s->ncalls >= SPACE_MCP_CALLS_MAX) {
		snprintf(msg, sizeof(msg), "%s: %d calls are running already; wait for one",
		    name, SPACE_MCP_CALLS_MAX);
		send_msg(s, jrpc_result(m->id, tool_error(msg)));
		goto out;
	}
	if (pipe2(p, O_CLOEXEC) != 0) {
		send_error(s, m->id, JRPC_INTERNAL_ERROR, strerror(errno));
		goto out;
	}
	fflush(stderr);
	if ((pid = fork()) < 0) {
		close(p[0]);
		close(p[1]);
		send_error(s, m->id, JRPC_INTERNAL_ERROR, strerror(errno));
		goto out;
	}
	if (pid == 0) {
		close(p[0]);
		call_child(s, t, args, p[1]);
	}
	close(p[1]);
	c = &s->calls[s->ncalls++];
	memset(c, 0, sizeof(*c));
	c->pid = pid;
	c->fd = p[0];
	c->id = json_incref(m->id);
	c->tool = t;
	meta = json_object_get(m->params, "_meta");
	if (json_is_string(json_object_get(meta, "progressToken")) ||
	    json_is_integer(json_object_get(meta, "progressToken")))
		c->token = json_incref(json_object_get(meta, "progressToken"));
	clock_gettime(CLOCK_MONOTONIC, &c->start);
	c->last = c->start;
out:
	json_decref(empty);
}

static void
on_cancelled(struct server *s, const struct jrpc_msg *m)
{
	struct call *c = find_call(s, json_object_get(m->params, "requestId"));

	/* a cancellation of a request that already ended, or never was, is
	 * ignored, as the protocol says */
	if (c == NULL || c->cancelled)
		return;
	c->cancelled = 1;
	kill(c->pid, SIGKILL);
	logm("%s cancelled: %s", c->tool->name,
	    json_string_value(json_object_get(m->params, "reason")) ?
	    json_string_value(json_object_get(m->params, "reason")) : "no reason given");
}

static void
on_message(struct server *s, const char *line, size_t len)
{
	struct jrpc_msg m;
	const char *why;
	json_t *id;
	int code;

	if ((code = jrpc_decode(line, len, &m, &why, &id)) != 0) {
		send_error(s, id, code, why);
		json_decref(id);
		return;
	}
	if (m.kind == JRPC_RESPONSE) {
		/* this server sends no requests: nothing is waiting for it */
		logm("ignoring a response to a request never sent");
	} else if (m.kind == JRPC_NOTIFICATION) {
		if (strcmp(m.method, "notifications/cancelled") == 0)
			on_cancelled(s, &m);
		/* notifications/initialized and others: nothing to do, and a
		 * notification is never answered */
	} else if (strcmp(m.method, "initialize") == 0) {
		on_initialize(s, &m);
	} else if (strcmp(m.method, "ping") == 0) {
		send_msg(s, jrpc_result(m.id, json_object()));
	} else if (!s->initialized) {
		send_error(s, m.id, JRPC_INVALID_REQUEST,
		    "not initialized: the first request must be initialize");
	} else if (strcmp(m.method, "tools/list") == 0) {
		if (m.params != NULL && !json_is_object(m.params))
			send_error(s, m.id, JRPC_INVALID_PARAMS, "params must be an object");
		else
			send_msg(s, jrpc_result(m.id, json_pack("{s:O}", "tools", s->tools)));
	} else if (strcmp(m.method, "tools/call") == 0) {
		on_call(s, &m);
	} else {
		send_error(s, m.id, JRPC_METHOD_NOT_FOUND, "method not found");
	}
	jrpc_msg_clear(&m);
}

/* ---- stdin ---- */

static void
read_stdin(struct server *s)
{
	char *nl, *p;
	size_t off, n;
	ssize_t r;

	if (s->incap - s->inlen < 65536) {
		size_t cap = s->incap ? s->incap * 2 : 131072;
		if (cap > SPACE_MCP_LINE_MAX + 65536)
			cap = SPACE_MCP_LINE_MAX + 65536;
		if (cap > s->incap) {
			if ((p = realloc(s->in, cap)) == NULL) {
				logm("out of memory reading stdin");
				exit(1);
			}
			s->in = p;
			s->incap = cap;
		}
	}
	r = read(STDIN_FILENO, s->in + s->inlen, s->incap - s->inlen);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return;
	if (r <= 0) {
		/* a last message without its newline is still one */
		if (r == 0 && s->inlen > 0 && !s->discarding)
			on_message(s, s->in, s->inlen);
		s->inlen = 0;
		s->eof = 1;
		return;
	}
	s->inlen += (size_t)r;
	off = 0;
	while ((nl = memchr(s->in + off, '\n', s->inlen - off)) != NULL) {
		n = (size_t)(nl - (s->in + off));
		if (s->discarding)
			s->discarding = 0;
		else {
			if (n > 0 && s->in[off + n - 1] == '\r')
				n--;
			/* blank lines between messages carry nothing */
			if (strspn(s->in + off, " \t") < n)
				on_message(s, s->in + off, n);
		}
		off += (size_t)(nl - (s->in + off)) + 1;
	}
	memmove(s->in, s->in + off, s->inlen - off);
	s->inlen -= off;
	if (s->inlen > SPACE_MCP_LINE_MAX) {
		/* no newline within the limit: refuse the message, skip to the
		 * next line */
		if (!s->discarding)
			send_error(s, NULL, JRPC_INVALID_REQUEST, "message too large");
		s->discarding = 1;
		s->inlen = 0;
	}
}

/* ---- calls ---- */

static double
secs_since(const struct timespec *t, const struct timespec *now)
{
	return (double)(now->tv_sec - t->tv_sec) + (now->tv_nsec - t->tv_nsec) / 1e9;
}

static void
progress(struct server *s, struct call *c, const char *msg)
{
	if (c->token == NULL || c->cancelled)
		return;
	c->progress += 1;
	clock_gettime(CLOCK_MONOTONIC, &c->last);
	send_msg(s, jrpc_notification("notifications/progress", json_pack("{s:O,s:f,s:s}",
	    "progressToken", c->token, "progress", c->progress, "message", msg)));
}

static void
call_line(struct server *s, struct call *c, const char *line, size_t len)
{
	json_t *j = json_loadb(line, len, 0, NULL), *v;

	if ((v = json_object_get(j, "progress")) != NULL && json_is_string(v))
		progress(s, c, json_string_value(v));
	else if ((v = json_object_get(j, "result")) != NULL && c->result == NULL)
		c->result = json_incref(v);
	json_decref(j);
}

static void
call_end(struct server *s, struct call *c)
{
	char msg[160];
	int st = 0;

	while (waitpid(c->pid, &st, 0) < 0 && errno == EINTR)
		;
	if (c->cancelled) {
		/* a cancelled request is not answered */
	} else if (c->result != NULL) {
		send_msg(s, jrpc_result(c->id, json_incref(c->result)));
	} else {
		if (WIFSIGNALED(st))
			snprintf(msg, sizeof(msg), "%s: the call's process died (signal %d)",
			    c->tool->name, WTERMSIG(st));
		else
			snprintf(msg, sizeof(msg), "%s: the call ended without a result",
			    c->tool->name);
		logm("%s", msg);
		send_msg(s, jrpc_result(c->id, tool_error(msg)));
	}
	close(c->fd);
	json_decref(c->id);
	json_decref(c->token);
	json_decref(c->result);
	free(c->buf);
	*c = s->calls[--s->ncalls];
}

/* what the child sent; 1 when the call has ended (c is gone) */
static int
read_call(struct server *s, struct call *c)
{
	size_t off = 0;
	char *nl, *p;
	ssize_t r;

	if (c->cap - c->len < 65536) {
		size_t cap = c->cap ? c->cap * 2 : 65536;
		if (cap > CALL_OUT_MAX + 65536 || (p = realloc(c->buf, cap)) == NULL) {
			logm("%s: result too large", c->tool->name);
			kill(c->pid, SIGKILL);
			c->len = 0;
			call_end(s, c);
			return 1;
		}
		c->buf = p;
		c->cap = cap;
	}
	r = read(c->fd, c->buf + c->len, c->cap - c->len);
	if (r < 0 && (errno == EINTR || errno == EAGAIN))
		return 0;
	if (r <= 0) {
		call_end(s, c);
		return 1;
	}
	c->len += (size_t)r;
	while ((nl = memchr(c->buf + off, '\n', c->len - off)) != NULL) {
		call_line(s, c, c->buf + off, (size_t)(nl - (c->buf + off)));
		off = (size_t)(nl - c->buf) + 1;
	}
	memmove(c->buf, c->buf + off, c->len - off);
	c->len -= off;
	return 0;
}

/* a call with a progress token that said nothing for a while says it runs */
static void
heartbeat(struct server *s)
{
	struct timespec now;
	char msg[128];
	size_t i;

	clock_gettime(CLOCK_MONOTONIC, &now);
	for (i = 0; i < s->ncalls; i++) {
		struct call *c = &s->calls[i];
		if (c->token == NULL || secs_since(&c->last, &now) < PROGRESS_EVERY_S)
			continue;
		snprintf(msg, sizeof(msg), "%s: running for %.0f s", c->tool->name,
		    secs_since(&c->start, &now));
		progress(s, c, msg);
	}
}

static int
serve(struct server *s)
{
	struct pollfd pfd[1 + SPACE_MCP_CALLS_MAX];
	struct call *order[SPACE_MCP_CALLS_MAX];
	size_t i, n;
	int timeout, any_token, r;

	for (;;) {
		if (s->eof && s->ncalls == 0)
			return 0;
		n = 0;
		any_token = 0;
		if (!s->eof) {
			pfd[n].fd = STDIN_FILENO;
			pfd[n].events = POLLIN;
			n++;
		}
		for (i = 0; i < s->ncalls; i++) {
			pfd[n].fd = s->calls[i].fd;
			pfd[n].events = POLLIN;
			order[i] = &s->calls[i];
			any_token |= s->calls[i].token != NULL;
			n++;
		}
		timeout = any_token ? 250 : -1;
		r = poll(pfd, n, timeout);
		if (r < 0 && errno != EINTR) {
			logm("poll: %s", strerror(errno));
			return 1;
		}
		heartbeat(s);
		if (r <= 0)
			continue;
		/* calls first: reading stdin may end calls (and reorder the
		 * table); one event per round is enough */
		for (i = s->eof ? 0 : 1; i < n; i++)
			if (pfd[i].revents & (POLLIN | POLLHUP | POLLERR)) {
				read_call(s, order[i - (s->eof ? 0 : 1)]);
				break;
			}
		if (i == n && !s->eof && (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))
			read_stdin(s);
	}
}

int
cmd_mcp(int argc, char **argv)
{
	static const struct option lo[] = { CLI_API_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct cli_api api = { NULL, NULL };
	struct server s;
	size_t i;
	int ch, ret;

	optind = 0;
	if ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1)
		return cli_usage("mcp", USAGE, ch == 'h');
	if (optind != argc)
		return cli_usage("mcp", USAGE, 0);
	/* --api-url / --api-key reach the calls through the environment */
	if (api.url)
		setenv("SPACE_API_URL", api.url, 1);
	if (api.key)
		setenv("SPACE_API_KEY", api.key, 1);
	memset(&s, 0, sizeof(s));
	if ((s.out = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)) < 0 ||
	    dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
		return cli_fail("mcp", "stdout: %s", strerror(errno));
	signal(SIGPIPE, SIG_IGN);
	if (tools_load(&s) != 0)
		return cli_fail("mcp", "cannot load the tool table");
	if (getenv("SPACE_API_URL") == NULL || getenv("SPACE_API_KEY") == NULL)
		logm("SPACE_API_URL or SPACE_API_KEY is not set: every tool call will fail");
	ret = serve(&s);
	for (i = 0; i < mcp_ntools; i++)
		json_decref(s.schemas[i]);
	json_decref(s.tools);
	free(s.in);
	return ret;
}
