/* The web console, on the edge's own host (the bare --domain): docs/console.md.
 *
 *   GET /, /app.js, ...           the static files built into the binary
 *                                 (scripts/embed_web.sh), with a strict
 *                                 Content-Security-Policy
 *   /v1/sandboxes..., GET /v1/workers, GET /v1/templates...
 *                                 forwarded to space-control as they came,
 *                                 the caller's Authorization included: the
 *                                 control plane decides
 *   /node/v1/sandboxes/{id}/...   forwarded to the node-api of the
 *                                 sandbox's current execution, with a
 *                                 capability the edge obtains for it with
 *                                 the caller's API key (POST
 *                                 /v1/sandboxes/{id}/routes), as it does for
 *                                 a sandbox's port. The key comes as
 *                                 "Authorization: Bearer sk_..." or, on a
 *                                 WebSocket handshake (a browser cannot set
 *                                 headers there), as the offered subprotocol
 *                                 "space-key.sk_...", which is taken out.
 *
 * Every forwarded request goes upstream with "Connection: close": one
 * client connection carries one request of the console (the caller
 * closes it after the answer, or after the WebSocket). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sodium.h>
#include <jansson.h>

#include "client.h"
#include "console.h"
#include "consolereq.h"
#include "edge.h"
#include "log.h"
#include "reqhead.h"

#define KEY_MAX         CONSOLE_KEY_MAX
#define RESOLVE_TRIES   3

/* one policy for every page: nothing inline, nothing from elsewhere */
static const char csp[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'";

/* a whole answer of the console; the connection closes after it */
static void
answer(int cfd, unsigned status, const char *ctype, const void *body, size_t len, bool head_only,
    const char *extra)
{
	char head[1024];
	int n;

	n = snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nContent-Security-Policy: %s\r\n"
	    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n"
	    "X-Frame-Options: DENY\r\nCache-Control: no-cache\r\nConnection: close\r\n%s\r\n",
	    status, edge_reason(status), ctype, len, csp, extra ? extra : "");
	if (n > 0 && (size_t)n < sizeof(head) && edge_send_all(cfd, head, (size_t)n) == 0 && !head_only)
		(void)edge_send_all(cfd, body, len);
}

/* an error as the APIs give them: {"error","message"} */
static void
answer_error(int cfd, unsigned status, const char *code, const char *msg, bool retry)
{
	json_t *o = json_pack("{s:s,s:s}", "error", code, "message", msg);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	if (s)
		answer(cfd, status, "application/json", s, strlen(s), false,
		    retry ? "Retry-After: 1\r\n" : NULL);
	free(s);
	json_decref(o);
}

static bool
method_is(const struct reqhead *h, const char *m)
{
	return h->method_len == strlen(m) && memcmp(h->method, m, h->method_len) == 0;
}

/* the target's path (up to '?') starts with p */
static bool
path_prefix(const struct reqhead *h, const char *p)
{
	size_t n = strlen(p);

	return h->target_len >= n && memcmp(h->target, p, n) == 0;
}

static size_t
path_len(const struct reqhead *h)
{
	const char *q = memchr(h->target, '?', h->target_len);

	return q ? (size_t)(q - h->target) : h->target_len;
}

static int
serve_static(int cfd, const struct reqhead *h)
{
	size_t pl = path_len(h), i;

	for (i = 0; i < console_files_n; i++) {
		const struct console_file *f = &console_files[i];
		if (strlen(f->path) == pl && memcmp(f->path, h->target, pl) == 0) {
			if (!method_is(h, "GET") && !method_is(h, "HEAD")) {
				answer_error(cfd, 405, "bad_request", "the console's files are read only",
				    false);
				return -1;
			}
			answer(cfd, 200, f->ctype, f->data, f->len, method_is(h, "HEAD"), NULL);
			return -1;
		}
	}
	return -2;
}

/* "http://HOST:PORT[/]" -> a connected socket, or -1 */
static int
dial_http(const char *url, unsigned timeout)
{
	char ep[SPACE_ENDPOINT_MAX + 8];
	size_t n;
	int fd;

	if (strncmp(url, "http://", 7) != 0 || strlen(url) > SPACE_ENDPOINT_MAX)
		return -1;
	n = (size_t)snprintf(ep, sizeof(ep), "tcp://%s", url + 7);
	if (n > 6 && ep[n - 1] == '/')
		ep[n - 1] = '\0';
	if (strchr(ep + 6, '/') != NULL || (fd = gw_connect(ep, timeout)) < 0)
		return -1;
	(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	return fd;
}

/* is field i a hop-by-hop one the console replaces? */
static bool
hop_field(const struct reqhead *h, size_t i)
{
	return reqhead_is(h, i, "connection") || reqhead_is(h, i, "keep-alive") ||
	    reqhead_is(h, i, "proxy-connection") || reqhead_is(h, i, "te") ||
	    reqhead_is(h, i, "proxy-authorization");
}

struct outbuf {
	char *p;
	size_t n, cap;
};

static int
out_add(struct outbuf *o, const void *p, size_t n)
{
	if (o->n + n > o->cap) {
		size_t cap = (o->n + n) * 2;
		char *q = malloc(cap);
		if (q == NULL)
			return -1;
		memcpy(q, o->p, o->n);
		sodium_memzero(o->p, o->cap);
		free(o->p);
		o->p = q;
		o->cap = cap;
	}
	memcpy(o->p + o->n, p, n);
	o->n += n;
	return 0;
}

static void
out_free(struct outbuf *o)
{
	if (o->p) {
		sodium_memzero(o->p, o->cap);
		free(o->p);
	}
	o->p = NULL;
	o->n = o->cap = 0;
}

/* the Sec-WebSocket-Protocol value without the key entry, into o;
 * the key (when there is one) into key */
static int
protocols_rewrite(const char *v, size_t n, struct outbuf *o, char key[KEY_MAX], int *nkeys)
{
	char *rest = malloc(2 * n + 1);
	int rc = -1;

	if (rest && console_protocols(v, n, key, nkeys, rest, 2 * n + 1) == 0)
		rc = out_add(o, rest, strlen(rest));
	free(rest);
	return rc;
}

/* the head toward the upstream: the request line with target (or the
 * original one), every field but the hop-by-hop ones, Authorization
 * unless keep_auth, the console's key subprotocol; then bearer (if any)
 * and the Connection the console wants */
static int
send_head(int ufd, const char *buf, const struct reqhead *h, const char *target, size_t tlen,
    bool keep_auth, const char *bearer)
{
	struct outbuf o = { 0 };
	char line[64];
	size_t i;
	int rc = -1, nkeys;
	char key[KEY_MAX];

	if (out_add(&o, h->method, h->method_len) < 0 || out_add(&o, " ", 1) < 0 ||
	    out_add(&o, target, tlen) < 0)
		goto out;
	snprintf(line, sizeof(line), " HTTP/1.1\r\n");
	if (out_add(&o, line, strlen(line)) < 0)
		goto out;
	for (i = 0; i < h->nf; i++) {
		const struct reqhead_field *f = &h->f[i];
		if (hop_field(h, i) || (!keep_auth && reqhead_is(h, i, "authorization")))
			continue;
		if (reqhead_is(h, i, "sec-websocket-protocol")) {
			struct outbuf v = { 0 };
			int r = protocols_rewrite(f->value, f->value_len, &v, key, &nkeys);
			if (r == 0 && v.n > 0)
				r = out_add(&o, "Sec-WebSocket-Protocol: ", 24) < 0 ||
				    out_add(&o, v.p, v.n) < 0 || out_add(&o, "\r\n", 2) < 0 ? -1 : 0;
			out_free(&v);
			if (r < 0)
				goto out;
			continue;
		}
		if (out_add(&o, buf + f->line_off, f->line_len) < 0)
			goto out;
	}
	if (bearer && (out_add(&o, "Authorization: Bearer ", 22) < 0 ||
	    out_add(&o, bearer, strlen(bearer)) < 0 || out_add(&o, "\r\n", 2) < 0))
		goto out;
	if (h->upgrade) {
		if (out_add(&o, "Connection: Upgrade\r\n\r\n", 23) < 0)
			goto out;
	} else if (out_add(&o, "Connection: close\r\n\r\n", 21) < 0)
		goto out;
	rc = edge_send_all(ufd, o.p, o.n);
out:
	sodium_memzero(key, sizeof(key));
	out_free(&o);
	return rc;
}

/* /v1/... of the control plane's user API */
static bool
control_path(const struct reqhead *h)
{
	size_t pl = path_len(h);

	if (path_prefix(h, "/v1/sandboxes") && (pl == 13 || h->target[13] == '/'))
		return true;
	if (!method_is(h, "GET"))
		return false;
	return (path_prefix(h, "/v1/workers") && pl == 11) ||
	    (path_prefix(h, "/v1/templates") && (pl == 13 || h->target[13] == '/'));
}

static int
to_control(struct edge *e, int cfd, const char *buf, const struct reqhead *h)
{
	int fd;

	if (h->upgrade) {
		answer_error(cfd, 400, "bad_request", "no WebSocket to the control plane", false);
		return -1;
	}
	if ((fd = dial_http(e->cfg.control, e->cfg.connect_timeout)) < 0) {
		answer_error(cfd, 502, "unavailable", "control plane unreachable", true);
		return -1;
	}
	if (send_head(fd, buf, h, h->target, h->target_len, true, NULL) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* the caller's API key: the bearer, or on a WebSocket handshake the key
 * subprotocol (one of the two, once); 0 with key filled, -1 answered */
static int
caller_key(int cfd, const struct reqhead *h, char key[KEY_MAX])
{
	char pkey[KEY_MAX];
	size_t i;
	int nauth = 0, nproto = 0, nkeys = 0;

	key[0] = '\0';
	for (i = 0; i < h->nf; i++) {
		const struct reqhead_field *f = &h->f[i];
		if (reqhead_is(h, i, "authorization")) {
			if (++nauth > 1 || f->value_len <= 7 || f->value_len - 7 >= KEY_MAX ||
			    strncasecmp(f->value, "bearer ", 7) != 0)
				goto bad;
			memcpy(key, f->value + 7, f->value_len - 7);
			key[f->value_len - 7] = '\0';
		} else if (reqhead_is(h, i, "sec-websocket-protocol")) {
			struct outbuf v = { 0 };
			int r = protocols_rewrite(h->f[i].value, h->f[i].value_len, &v, pkey, &nkeys);
			out_free(&v);
			if (r < 0 || ++nproto > 1)
				goto bad;
		}
	}
	if (nkeys > 0) {
		if (nauth > 0)
			goto bad;               /* a key both ways */
		memcpy(key, pkey, KEY_MAX);
	}
	sodium_memzero(pkey, sizeof(pkey));
	if ((nauth == 0 && nkeys == 0) || strncmp(key, "sk_", 3) != 0) {
		sodium_memzero(key, KEY_MAX);
		answer_error(cfd, 401, "unauthenticated", "an API key is needed (Authorization: "
		    "Bearer sk_..., or the subprotocol space-key.sk_... on a WebSocket)", false);
		return -1;
	}
	return 0;
bad:
	sodium_memzero(pkey, sizeof(pkey));
	sodium_memzero(key, KEY_MAX);
	answer_error(cfd, 401, "unauthenticated", "malformed credential", false);
	return -1;
}

/* /node/v1/sandboxes/{id}/... */
static int
to_node(struct edge *e, int cfd, const char *peer, const char *buf, const struct reqhead *h)
{
	const char *t = h->target + 5;          /* "/v1/sandboxes/{id}/..." */
	size_t tl = h->target_len - 5;
	char sbx[SPACE_ID_MAX + 1], key[KEY_MAX], path[SPACE_ID_MAX + 32];
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *req = NULL;
	const char *ep, *cap;
	int fd = -1, tries;

	if (console_node_target(h->target, h->target_len, sbx) < 0) {
		answer_error(cfd, 404, "not_found", "no such endpoint of the console", false);
		return -1;
	}
	if (caller_key(cfd, h, key) < 0)
		return -1;
	space_answer_init(&a);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/routes", sbx);
	req = json_pack("{s:[s,s,s,s,s]}", "access", "exec", "fs:r", "fs:w", "pty", "watch");
	if (req == NULL || (c = space_client_new(e->cfg.control, key)) == NULL) {
		answer_error(cfd, 503, "unavailable", "out of memory", true);
		goto out;
	}
	for (tries = 0; tries < RESOLVE_TRIES; tries++) {
		space_answer_clear(&a);
		if (space_control(c, "POST", path, req, &a) < 0) {
			answer_error(cfd, 502, "unavailable", "control plane unreachable", true);
			goto out;
		}
		/* converging (a move): the control plane already waited */
		if (a.status == 503 && tries + 1 < RESOLVE_TRIES) {
			sleep(a.retry_after > 0 && a.retry_after <= 2 ? (unsigned)a.retry_after : 1);
			continue;
		}
		break;
	}
	if (!space_answer_ok(&a)) {
		answer_error(cfd, a.status >= 400 && a.status < 600 ? (unsigned)a.status : 502,
		    a.error[0] ? a.error : "unavailable", a.message, a.status == 503);
		goto out;
	}
	ep = json_string_value(json_object_get(a.body, "endpoint"));
	cap = json_string_value(json_object_get(a.body, "capability"));
	if (ep == NULL || cap == NULL || strlen(cap) > SPACE_TOKEN_MAX) {
		answer_error(cfd, 502, "unavailable", "malformed route answer", false);
		goto out;
	}
	if ((fd = dial_http(ep, e->cfg.connect_timeout)) < 0) {
		answer_error(cfd, 502, "unavailable", "the sandbox's worker is unreachable", true);
		goto out;
	}
	if (e->cfg.verbose)
		log_info("%s: console %.*s %.*s -> %s", peer, (int)h->method_len, h->method,
		    (int)(tl > 80 ? 80 : tl), t, ep);
	if (send_head(fd, buf, h, t, tl, false, cap) < 0) {
		close(fd);
		fd = -1;
	}
out:
	sodium_memzero(key, sizeof(key));
	json_decref(req);
	space_answer_clear(&a);
	if (c)
		space_client_free(c);
	return fd;
}

int
edge_console(struct edge *e, int cfd, const char *peer, const char *buf, size_t hlen,
    const struct reqhead *h)
{
	int rc;

	(void)hlen;
	if (path_prefix(h, "/node/")) {
		atomic_fetch_add(&e->st.console[2], 1);
		return to_node(e, cfd, peer, buf, h);
	}
	if (path_prefix(h, "/v1/")) {
		atomic_fetch_add(&e->st.console[1], 1);
		if (!control_path(h)) {
			answer_error(cfd, 404, "not_found", "not an endpoint the console forwards",
			    false);
			return -1;
		}
		return to_control(e, cfd, buf, h);
	}
	if ((rc = serve_static(cfd, h)) != -2)
		atomic_fetch_add(&e->st.console[0], 1);
	return rc;
}
