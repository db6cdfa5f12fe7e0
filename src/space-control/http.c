/* The HTTP edge of space-control: libmicrohttpd in thread-per-connection
 * mode. Everything a peer sends is bounded here before a handler sees it:
 * URL length, body size (buffered, at most SPACE_HTTP_BODY_MAX), number of
 * connections overall and per address. Authentication runs before the body
 * is read, so an unauthenticated peer cannot make us buffer anything. */
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <microhttpd.h>
#include <sodium.h>

#include "bearer.h"
#include "control.h"
#include "filebody.h"
#include "headwatch.h"
#include "http.h"
#include "httpedge.h"
#include "log.h"
#include "util.h"

/* the longest secret auth.c accepts, and its NUL; anything longer is
 * malformed without being copied */
#define BEARER_BUF (3 + SECRET_BODY_LEN + 1)

struct http {
	struct MHD_Daemon *d;
	struct headwatch *heads;        /* request-head watchdog (headwatch.h) */
	struct ctl *c;
	char   *cert, *key;
};

static const struct route routes[] = {
	{ "GET",    "/healthz",                     api_healthz,            AUTH_NONE },
	{ "GET",    "/metrics",                     api_metrics,            AUTH_NONE },
	{ "GET",    "/v1/keys",                     api_keys,               AUTH_NONE },
	{ "GET",    "/openapi.json",                api_openapi,            AUTH_NONE },
	{ "POST",   "/v1/sandboxes",                api_sandbox_create,     AUTH_USER },
	{ "GET",    "/v1/sandboxes",                api_sandbox_list,       AUTH_USER },
	{ "GET",    "/v1/sandboxes/*",              api_sandbox_get,        AUTH_USER },
	{ "DELETE", "/v1/sandboxes/*",              api_sandbox_delete,     AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/routes",       api_routes,             AUTH_SANDBOX },
	{ "POST",   "/v1/sandboxes/*/pause",        api_sandbox_pause,      AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/resume",       api_sandbox_resume,     AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/move",         api_sandbox_move,       AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/snapshots",    api_snapshot_create,    AUTH_USER },
	{ "GET",    "/v1/sandboxes/*/snapshots",    api_snapshot_list,      AUTH_USER },
	{ "DELETE", "/v1/sandboxes/*/snapshots/*",  api_snapshot_delete,    AUTH_USER },
	{ "GET",    "/v1/sandboxes/*/network",      api_sandbox_network_get, AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/network",      api_sandbox_network_set, AUTH_USER },
	{ "PATCH",  "/v1/sandboxes/*/network",      api_sandbox_network_set, AUTH_USER },
	{ "GET",    "/v1/sandboxes/*/ports",        api_sandbox_ports_get,  AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/ports",        api_sandbox_ports_add,  AUTH_USER },
	{ "DELETE", "/v1/sandboxes/*/ports/*",      api_sandbox_ports_remove, AUTH_USER },
	{ "PUT",    "/v1/sandboxes/*/timeouts",     api_sandbox_timeouts,   AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/traffic-token", api_traffic_token,     AUTH_USER },
	{ "POST",   "/v1/sandboxes/*/access-token", api_access_token,       AUTH_USER },
	{ "POST",   "/v1/edge/routes",              api_edge_routes,        AUTH_EDGE },
	{ "GET",    "/v1/edge/revocations",         api_edge_revocations,   AUTH_EDGE },
	{ "GET",    "/v1/workers",                  api_workers_list,       AUTH_USER },
	{ "POST",   "/v1/workers/*/register",       api_worker_register,    AUTH_WORKER },
	{ "POST",   "/v1/workers/*/heartbeat",      api_worker_heartbeat,   AUTH_WORKER },
	{ "GET",    "/v1/workers/*/assignments",    api_worker_assignments, AUTH_WORKER },
	{ "POST",   "/v1/workers/*/status",         api_worker_status,      AUTH_WORKER },
	{ "POST",   "/v1/workers/*/snapshots",      api_worker_snapshot,    AUTH_WORKER },
	{ "POST",   "/v1/workers/*/checkpoints",    api_worker_checkpoint,  AUTH_WORKER },
	{ "POST",   "/v1/workers/*/archives",       api_worker_archives,    AUTH_WORKER },
	{ "POST",   "/v1/workers/*/archives/stream", api_archive_blob_stream, AUTH_WORKER },
	{ "PUT",    "/v1/workers/*/archives/*",     api_archive_blob_put,   AUTH_WORKER },
	{ "GET",    "/v1/workers/*/archives/*",     api_archive_blob_get,   AUTH_WORKER },
	{ "POST",   "/v1/templates",                api_template_create,    AUTH_USER },
	{ "GET",    "/v1/templates",                api_template_list,      AUTH_USER },
	{ "PUT",    "/v1/templates/blobs/*",        api_template_blob_put,  AUTH_USER },
	{ "GET",    "/v1/workers/*/templates/*",    api_template_blob_get,  AUTH_WORKER },
	{ "GET",    "/v1/templates/*",              api_template_get,       AUTH_USER },
	{ "DELETE", "/v1/templates/*",              api_template_delete,    AUTH_USER },
};

/* the routes whose body is streamed to a file instead of buffered: a
 * template image (templates_sink), a snapshot archive (archive_blobs_sink) */
static bool
route_streams(const struct route *rt)
{
	return rt->handler == api_template_blob_put || rt->handler == api_archive_blob_put ||
	    rt->handler == api_archive_blob_stream;
}

static int
route_sink(const struct route *rt, struct req *r, const char *p, size_t n)
{
	return rt->handler == api_archive_blob_put || rt->handler == api_archive_blob_stream ?
	    archive_blobs_sink(r, p, n) : templates_sink(r, p, n);
}

void
reply_text(struct req *r, unsigned status, char *text, const char *ctype)
{
	free(r->text);
	r->status = status;
	r->text = text;
	r->content_type = ctype;
}

void
reply_json(struct req *r, unsigned status, json_t *obj)
{
	char *s = NULL;

	if (obj != NULL)
		s = json_dumps(obj, JSON_COMPACT);
	json_decref(obj);
	if (s == NULL) {
		reply_text(r, 500, strdup("{\"error\":\"internal\",\"message\":\"out of memory\"}"),
		    "application/json");
		return;
	}
	reply_text(r, status, s, "application/json");
}

void
reply_error(struct req *r, unsigned status, const char *code, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	reply_json(r, status, json_pack("{s:s,s:s}", "error", code, "message", msg));
}

json_t *
req_json(struct req *r, bool empty_ok)
{
	json_error_t jerr;
	json_t *o;

	if (r->too_large) {
		reply_error(r, 413, "too_large", "request body exceeds %u bytes",
		    SPACE_HTTP_BODY_MAX);
		return NULL;
	}
	if (r->body_len == 0 && empty_ok)
		return json_object();
	/* duplicate keys are refused: two readers could otherwise disagree
	 * about which value was meant */
	o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL) {
		reply_error(r, 400, "bad_request", "malformed JSON: %s", jerr.text);
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		reply_error(r, 400, "bad_request", "body must be a JSON object");
		return NULL;
	}
	return o;
}

int
json_keys_only(struct req *r, json_t *obj, const char *const *allowed)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(obj, k, v) {
		for (i = 0; allowed[i] != NULL; i++)
			if (strcmp(k, allowed[i]) == 0)
				break;
		if (allowed[i] == NULL) {
			reply_error(r, 400, "bad_request", "unknown field \"%.64s\"", k);
			return 0;
		}
	}
	return 1;
}

const char *
req_query(struct req *r, const char *name)
{
	return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

int
req_query_u(struct req *r, const char *name, uint64_t max, uint64_t *out)
{
	const char *s = req_query(r, name);
	uint64_t v = 0;

	if (s == NULL)
		return 0;
	/* strict: 1 to 19 decimal digits, nothing else */
	if (*s == '\0' || strlen(s) > 19)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	if (v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/* match url against pattern; 1 match, 0 no match, -1 shape matches but a
 * '*' segment is not a valid id */
static int
match(const char *pattern, const char *url, struct req *r)
{
	const char *p = pattern, *u = url;
	int np = 0, bad = 0;

	while (*p && *u) {
		if (*p == '*') {
			size_t n = strcspn(u, "/");
			if (n == 0)
				return 0;
			if (np < REQ_PARAMS_MAX) {
				if (n > SPACE_ID_MAX) {
					bad = 1;
				} else {
					memcpy(r->params[np], u, n);
					r->params[np][n] = '\0';
					if (!id_valid(r->params[np]))
						bad = 1;
				}
				np++;
			}
			p++;
			u += n;
			continue;
		}
		if (*p != *u)
			return 0;
		p++;
		u++;
	}
	if (*p || *u)
		return 0;
	return bad ? -1 : 1;
}

/* The secret of the Authorization header, copied NUL-terminated into buf
 * for auth.c. bearer.c decides what a bearer is, for node-api as well; a
 * header that carries none gives NULL ("missing"), a malformed one or one
 * longer than any secret gives "" (refused as malformed by auth.c). The
 * header itself stays in libmicrohttpd's connection pool, which we cannot
 * wipe; our copy is wiped by the caller. */
static const char *
bearer(struct MHD_Connection *conn, char buf[BEARER_BUF])
{
	const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_AUTHORIZATION);
	const char *tok;
	size_t len;
	int rc;

	buf[0] = '\0';
	rc = space_bearer(h, &tok, &len);
	if (rc == -ENOENT)
		return NULL;
	if (rc < 0 || len >= BEARER_BUF)
		return buf;
	memcpy(buf, tok, len);
	buf[len] = '\0';
	return buf;
}

/* authentication of a route: 0, or -1 with the error answer set */
static int
authenticate(struct req *r, const struct route *rt)
{
	struct ctl *c = r->ctl;
	char buf[BEARER_BUF];
	const char *tok, *kind = NULL;
	int rc, ret = -1;

	tok = bearer(r->conn, buf);
	switch (rt->auth) {
	case AUTH_NONE:
		rc = 0;
		break;
	case AUTH_USER:
		rc = auth_user(c, tok, r->principal, r->key_id, &kind);
		break;
	case AUTH_WORKER:
		rc = auth_worker(c, tok, r->params[0], &kind);
		break;
	case AUTH_EDGE:
		rc = auth_edge(c, tok, r->principal, &kind);
		break;
	case AUTH_SANDBOX:
		/* an access token speaks for one sandbox, here only */
		if (tok != NULL && strncmp(tok, "at_", 3) == 0) {
			r->sandbox_token = true;
			rc = auth_access_token(c, tok, r->params[0], r->principal, &kind);
		} else
			rc = auth_user(c, tok, r->principal, r->key_id, &kind);
		break;
	default:
		rc = -EINVAL;   /* a route without a known auth kind serves nobody */
		break;
	}
	if (rc == -EIO) {
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "credential store unavailable");
		goto out;
	}
	if (rc == -ENOSYS) {
		reply_error(r, 501, "not_implemented", "edge credentials need the SQLite store for now");
		goto out;
	}
	if (rc < 0) {
		metrics_auth_failure(kind);
		if (rt->auth == AUTH_WORKER && rc == -EPERM)
			reply_error(r, 403, "forbidden", "credential belongs to another worker");
		else if (rt->auth == AUTH_SANDBOX && rc == -EPERM)
			reply_error(r, 403, "forbidden", "the access token is another sandbox's");
		else
			reply_error(r, 401, "unauthenticated", rt->auth == AUTH_WORKER ?
			    "a valid worker credential is required" : rt->auth == AUTH_EDGE ?
			    "a valid edge credential is required" : "a valid API key is required");
		goto out;
	}
	ret = 0;
out:
	sodium_memzero(buf, sizeof(buf));
	return ret;
}

static enum MHD_Result
send_reply(struct req *r)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;
	char ra[16];
	char *t = r->text;
	size_t len = t ? strlen(t) : 0;

	r->text = NULL;
	if (r->file_fd > 0) {
		/* the response owns the descriptor from here */
		free(t);
		t = NULL;
		resp = filebody_response(r->file_fd, r->file_size);
		r->file_fd = 0;
	} else {
		resp = MHD_create_response_from_buffer(len, t ? t : (char *)"",
		    t ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
	}
	if (resp == NULL) {
		free(t);
		return MHD_NO;
	}
	if (r->content_type)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
	if (r->close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	if (r->retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", r->retry_after);
		MHD_add_response_header(resp, MHD_HTTP_HEADER_RETRY_AFTER, ra);
	}
	MHD_add_response_header(resp, "Cache-Control", "no-store");
	ret = MHD_queue_response(r->conn, r->status, resp);
	MHD_destroy_response(resp);
	metrics_request(r->route_name ? r->route_name : "unmatched", r->status);
	log_debug("%s %s -> %u", r->method, r->route_name ? r->route_name : "-", r->status);
	return ret;
}

/* first call: route, limits and authentication, before any body byte */
static int
admit_request(struct req *r, const struct route **rt_out)
{
	const struct route *rt = NULL;
	const char *cl;
	size_t i;
	int m, shape = 0, badid = 0;

	if (strlen(r->url) > SPACE_HTTP_URL_MAX) {
		reply_error(r, 414, "too_large", "URL longer than %d bytes", SPACE_HTTP_URL_MAX);
		return -1;
	}
	for (i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		m = match(routes[i].pattern, r->url, r);
		if (m == 0)
			continue;
		shape = 1;
		if (m < 0) {
			badid = 1;
			r->route_name = routes[i].pattern;
			continue;
		}
		if (strcmp(routes[i].method, r->method) == 0) {
			rt = &routes[i];
			break;
		}
		r->route_name = routes[i].pattern;
	}
	if (rt == NULL) {
		if (badid)
			reply_error(r, 400, "bad_request", "invalid id in path");
		else if (shape)
			reply_error(r, 405, "bad_request", "method %s not allowed here", r->method);
		else
			reply_error(r, 404, "not_found", "no such endpoint");
		return -1;
	}
	r->route_name = rt->pattern;
	cl = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_CONTENT_LENGTH);
	/* a streamed body (a template image, an archive) is bounded by its sink */
	if (!route_streams(rt) && cl != NULL && strtoull(cl, NULL, 10) > SPACE_HTTP_BODY_MAX) {
		reply_error(r, 413, "too_large", "request body exceeds %u bytes",
		    SPACE_HTTP_BODY_MAX);
		return -1;
	}
	/* the routes anyone may call take no body: an unauthenticated peer
	 * never makes us buffer one (it is read and dropped once answered) */
	if (rt->auth == AUTH_NONE && ((cl != NULL && strcmp(cl, "0") != 0) ||
	    MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND,
	    MHD_HTTP_HEADER_TRANSFER_ENCODING) != NULL)) {
		reply_error(r, 400, "bad_request", "%s takes no request body", rt->pattern);
		r->close = true;
		return -1;
	}
	if (authenticate(r, rt) < 0)
		return -1;
	*rt_out = rt;
	return 0;
}

struct conn_state {
	struct req r;
	const struct route *rt;
	bool started;
	bool bad_target;        /* a control byte in the raw target */
	int answered;
};

static enum MHD_Result
count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	(void)value;
	http_framing_count(cls, key);
	return MHD_YES;
}

/* first: the head as a whole, before the route is even looked at */
static int
check_head(struct conn_state *cs)
{
	struct http_framing fr = { 0, 0 };

	/* a request whose end is ambiguous, and whatever follows it on the
	 * connection, is answered by nobody */
	MHD_get_connection_values(cs->r.conn, MHD_HEADER_KIND, count_framing, &fr);
	if (!http_framing_ok(&fr)) {
		cs->r.close = true;
		reply_error(&cs->r, 400, "bad_request",
		    "Content-Length with Transfer-Encoding, or twice");
		return -1;
	}
	if (cs->bad_target) {
		reply_error(&cs->r, 400, "bad_request", "control character in the request target");
		return -1;
	}
	return 0;
}

/* every request starts here, with its raw target (libmicrohttpd decodes
 * the path before access_cb sees it) */
static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct conn_state *cs = calloc(1, sizeof(*cs));

	(void)cls;
	(void)conn;
	if (cs != NULL)
		cs->bad_target = !http_target_clean(uri);
	return cs;
}

static enum MHD_Result
access_cb(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct http *h = cls;
	struct conn_state *cs = *con_cls;

	if (cs == NULL)
		return MHD_NO;  /* uri_cb could not allocate */
	if (!cs->started) {
		cs->started = true;
		headwatch_head_done(h->heads, conn);
		cs->r.ctl = h->c;
		cs->r.conn = conn;
		cs->r.method = method;
		cs->r.url = url;
		if (check_head(cs) < 0 || admit_request(&cs->r, &cs->rt) < 0) {
			cs->answered = 1;
			return send_reply(&cs->r);
		}
		return MHD_YES;
	}
	if (cs->answered) {
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size > 0 && route_streams(cs->rt)) {
		if (route_sink(cs->rt, &cs->r, upload, *upload_size) < 0) {
			cs->answered = 1;
			cs->r.close = true;
			*upload_size = 0;
			return send_reply(&cs->r);
		}
		*upload_size = 0;
		return MHD_YES;
	}
	if (*upload_size > 0) {
		/* a body without Content-Length (chunked) is bounded here; the
		 * rest is read and dropped, then answered 413 */
		if (!cs->r.too_large && cs->r.body_len + *upload_size <= SPACE_HTTP_BODY_MAX) {
			char *nb = realloc(cs->r.body, cs->r.body_len + *upload_size + 1);
			if (nb == NULL)
				return MHD_NO;
			memcpy(nb + cs->r.body_len, upload, *upload_size);
			cs->r.body_len += *upload_size;
			nb[cs->r.body_len] = '\0';
			cs->r.body = nb;
		} else {
			cs->r.too_large = true;
		}
		*upload_size = 0;
		return MHD_YES;
	}
	cs->answered = 1;
	cs->rt->handler(&cs->r);
	if (cs->r.status == 0)
		reply_error(&cs->r, 500, "internal", "no answer");
	edge_revoke_after(&cs->r, cs->rt->handler);     /* edge_revoke.c */
	return send_reply(&cs->r);
}

static void
completed_cb(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http *h = cls;
	struct conn_state *cs = *con_cls;

	/* a kept-alive connection waits for its next head under the same bound */
	headwatch_rearm(h->heads, conn);
	if (cs == NULL)
		return;
	if (cs->r.after_reply != NULL)
		cs->r.after_reply(&cs->r);
	if (cs->rt != NULL && (cs->rt->handler == api_archive_blob_put ||
	    cs->rt->handler == api_archive_blob_stream))
		archive_blobs_sink_end(&cs->r);
	else
		templates_sink_end(&cs->r);
	if (cs->r.file_fd > 0)
		close(cs->r.file_fd);
	free(cs->r.body);
	free(cs->r.text);
	free(cs);
	*con_cls = NULL;
}

static void
conn_cb(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode code)
{
	struct http *h = cls;
	const union MHD_ConnectionInfo *fd, *sa;

	(void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED) {
		fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
		sa = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
		if (fd != NULL)
			headwatch_open(h->heads, conn, fd->connect_fd, sa ? sa->client_addr : NULL);
	} else {
		headwatch_close(h->heads, conn);    /* before the library closes the socket */
	}
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	log_warnx("http: %s", buf);
}

static int
parse_listen(const char *listen, struct sockaddr_storage *ss, socklen_t *sl)
{
	char host[128], *colon;
	const char *port;
	struct addrinfo hints, *ai = NULL;

	if (strlen(listen) >= sizeof(host))
		return -EINVAL;
	strcpy(host, listen);
	if (host[0] == '[') {
		char *end = strchr(host, ']');
		if (end == NULL || end[1] != ':')
			return -EINVAL;
		*end = '\0';
		port = end + 2;
		memmove(host, host + 1, strlen(host + 1) + 1);
	} else {
		colon = strrchr(host, ':');
		if (colon == NULL)
			return -EINVAL;
		*colon = '\0';
		port = colon + 1;
	}
	memset(&hints, 0, sizeof(hints));
	hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(host, port, &hints, &ai) != 0 || ai == NULL)
		return -EINVAL;
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*sl = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

int
http_start(struct ctl *c, const char *listen, const char *cert, const char *key,
    struct http **out)
{
	struct http *h;
	struct sockaddr_storage ss;
	socklen_t sl;
	unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
	    MHD_USE_ERROR_LOG;
	size_t len;
	int rc;

	if ((rc = parse_listen(listen, &ss, &sl)) < 0)
		return rc;
	if ((h = calloc(1, sizeof(*h))) == NULL)
		return -ENOMEM;
	h->c = c;
	if ((rc = headwatch_start((unsigned)c->cfg.http_head_timeout,
	    (unsigned)c->cfg.http_heads_per_ip, SPACE_HTTP_CONN_MAX, &h->heads)) < 0) {
		free(h);
		return rc;
	}
	if (ss.ss_family == AF_INET6)
		flags |= MHD_USE_IPv6;
	if (cert && *cert) {
		if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
			http_stop(h);
			return -ENOTSUP;
		}
		if ((rc = read_file(cert, 1 << 20, &h->cert, &len)) < 0 ||
		    (rc = read_file(key, 1 << 20, &h->key, &len)) < 0) {
			http_stop(h);
			return rc;
		}
		flags |= MHD_USE_TLS;
		h->d = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, h,
		    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,     /* first, or MHD warns */
		    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)SPACE_HTTP_CONN_MAX,
		    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)c->cfg.http_conns_per_ip,
		    MHD_OPTION_NOTIFY_CONNECTION, conn_cb, h,
		    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(SPACE_LONGPOLL_MAX + 30),
		    MHD_OPTION_NOTIFY_COMPLETED, completed_cb, h,
		    MHD_OPTION_URI_LOG_CALLBACK, uri_cb, h,
		    MHD_OPTION_HTTPS_MEM_CERT, h->cert,
		    MHD_OPTION_HTTPS_MEM_KEY, h->key,
		    MHD_OPTION_END);
	} else {
		h->d = MHD_start_daemon(flags, 0, NULL, NULL, access_cb, h,
		    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, h,     /* first, or MHD warns */
		    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
		    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)SPACE_HTTP_CONN_MAX,
		    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)c->cfg.http_conns_per_ip,
		    MHD_OPTION_NOTIFY_CONNECTION, conn_cb, h,
		    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(SPACE_LONGPOLL_MAX + 30),
		    MHD_OPTION_NOTIFY_COMPLETED, completed_cb, h,
		    MHD_OPTION_URI_LOG_CALLBACK, uri_cb, h,
		    MHD_OPTION_END);
	}
	if (h->d == NULL) {
		http_stop(h);
		return -EADDRINUSE;
	}
	*out = h;
	return 0;
}

void
http_stop(struct http *h)
{
	if (h == NULL)
		return;
	if (h->d)
		MHD_stop_daemon(h->d);
	headwatch_stop(h->heads);
	if (h->key)     /* the TLS private key */
		sodium_memzero(h->key, strlen(h->key));
	free(h->cert);
	free(h->key);
	free(h);
}
