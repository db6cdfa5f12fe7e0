/* The E2B listener of space-edge (e2b.h): libmicrohttpd with one thread per
 * connection, bounded bodies, the per-key clients, and the answers both
 * halves share. The control API and the sandbox API are told apart by
 * path (the sandbox API's paths are envd's: /health, /files,
 * /process.Process/..., /filesystem.Filesystem/...) and by the
 * E2b-Sandbox-Id header the SDK sends with each sandbox call. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "connectrpc.h"
#include "e2b.h"
#include "limits.h"
#include "log.h"
#include "routecache.h"
#include "util.h"

struct e2b_cfg e2b_conf;

/* ---- clients, one per API key ---- */

struct e2b_cl {
	uint8_t h[32];                  /* BLAKE2b of the key */
	struct space_client *c;
	pthread_mutex_t mu;             /* held while a request uses c */
	unsigned refs;                  /* under pool_mu: requests holding or waiting */
	time_t last;
	bool used;
};

static struct e2b_cl pool[E2B_CLIENTS_MAX];
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;

struct e2b_cl *
e2b_client(const char *key)
{
	uint8_t h[32];
	struct e2b_cl *cl = NULL, *victim = NULL;
	size_t i;

	crypto_generichash(h, sizeof(h), (const uint8_t *)key, strlen(key), NULL, 0);
	pthread_mutex_lock(&pool_mu);
	for (i = 0; i < E2B_CLIENTS_MAX; i++) {
		if (pool[i].used && sodium_memcmp(pool[i].h, h, sizeof(h)) == 0) {
			cl = &pool[i];
			break;
		}
		if (!pool[i].used && victim == NULL)
			victim = &pool[i];
	}
	if (cl == NULL) {
		/* a free slot, else the least recently used one nobody holds */
		for (i = 0; victim == NULL && i < E2B_CLIENTS_MAX; i++)
			if (pool[i].refs == 0 && (victim == NULL || pool[i].last < victim->last))
				victim = &pool[i];
		if (victim == NULL) {
			pthread_mutex_unlock(&pool_mu);
			errno = EBUSY;
			return NULL;
		}
		if (victim->used) {
			space_client_free(victim->c);
			victim->c = NULL;
			pthread_mutex_destroy(&victim->mu);
			victim->used = false;
		}
		if ((victim->c = space_client_new(e2b_conf.control, key)) == NULL) {
			pthread_mutex_unlock(&pool_mu);
			return NULL;
		}
		/* an in-memory route cache, never written to disk */
		if ((victim->c->rc = route_cache_new()) == NULL) {
			space_client_free(victim->c);
			victim->c = NULL;
			pthread_mutex_unlock(&pool_mu);
			errno = ENOMEM;
			return NULL;
		}
		route_cache_set_ttl(victim->c->rc, e2b_conf.cache_ttl);
		pthread_mutex_init(&victim->mu, NULL);
		memcpy(victim->h, h, sizeof(h));
		victim->used = true;
		victim->refs = 0;
		cl = victim;
	}
	cl->refs++;
	cl->last = time(NULL);
	pthread_mutex_unlock(&pool_mu);
	pthread_mutex_lock(&cl->mu);
	return cl;
}

struct space_client *
e2b_cl_client(struct e2b_cl *cl)
{
	return cl->c;
}

void
e2b_client_release(struct e2b_cl *cl)
{
	if (cl == NULL)
		return;
	pthread_mutex_unlock(&cl->mu);
	pthread_mutex_lock(&pool_mu);
	cl->refs--;
	pthread_mutex_unlock(&pool_mu);
}

/* ---- answers ---- */

enum MHD_Result
e2b_send(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
    size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(len, (void *)(body ? body : ""),
	    MHD_RESPMEM_MUST_COPY);
	if (resp == NULL)
		return MHD_NO;
	if (ctype)
		MHD_add_response_header(resp, "Content-Type", ctype);
	ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result
e2b_send_json(struct MHD_Connection *c, unsigned status, json_t *o)
{
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	enum MHD_Result ret;

	json_decref(o);
	if (s == NULL)
		return e2b_send(c, 500, "application/json",
		    "{\"code\":500,\"message\":\"out of memory\"}", 38);
	ret = e2b_send(c, status, "application/json", s, strlen(s));
	free(s);
	return ret;
}

enum MHD_Result
e2b_api_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
{
	char msg[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return e2b_send_json(c, status, json_pack("{s:i,s:s}", "code", (int)status, "message", msg));
}

unsigned
e2b_status_of(const struct space_answer *a)
{
	if (a->status == 0)
		return 502;             /* nothing answered */
	if (a->status < 400 || a->status > 599)
		return 502;
	return (unsigned)a->status;
}

const char *
e2b_msg_of(const struct space_answer *a)
{
	if (a->message[0])
		return a->message;
	if (a->error[0])
		return a->error;
	return "request failed";
}

bool
e2b_only_keys(const json_t *o, const char *const *keys, const char **bad)
{
	const char *k;
	json_t *v;
	size_t i;

	if (!json_is_object(o))
		return false;
	json_object_foreach((json_t *)o, k, v) {
		for (i = 0; keys[i]; i++)
			if (strcmp(keys[i], k) == 0)
				break;
		if (keys[i] == NULL) {
			if (bad)
				*bad = k;
			return false;
		}
	}
	return true;
}

json_t *
e2b_parse(const char *buf, size_t len, const char **why)
{
	return connect_json_object(buf, len, NULL, why);
}

bool
e2b_key_ok(const char *k)
{
	size_t n = 0;

	if (k == NULL)
		return false;
	for (; k[n]; n++) {
		char ch = k[n];
		if (n >= SPACE_TOKEN_MAX || !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		    (ch >= '0' && ch <= '9') || strchr("-._~+/=", ch)))
			return false;
	}
	return n > 0;
}

/* ---- requests ---- */

/* a multipart part's bytes, as they come: each "file" part is streamed
 * to the sandbox (e2b_upload.c); after a failure the rest is dropped */
static enum MHD_Result
upload_part(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
    const char *ctype, const char *enc, const char *data, uint64_t off, size_t size)
{
	struct e2b_req *r = cls;

	(void)kind; (void)ctype; (void)enc;
	if (r->upload_err[0] || r->up == NULL)
		return MHD_NO;
	if (key == NULL || strcmp(key, "file") != 0)
		return MHD_YES;         /* other fields carry nothing we use */
	if (off == 0 && e2b_upload_part(r->up, filename) < 0)
		return MHD_NO;
	if (size && e2b_upload_data(r->up, data, size) < 0)
		return MHD_NO;
	return MHD_YES;
}

static bool
is_files_post(const char *method, const char *url)
{
	return strcmp(method, "POST") == 0 && strcmp(url, "/files") == 0;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct e2b_req *r = *con_cls;
	enum MHD_Result ret;

	(void)cls; (void)version;
	if (r == NULL) {
		const char *ct, *ce;

		if ((r = calloc(1, sizeof(*r))) == NULL)
			return MHD_NO;
		r->conn = conn;
		*con_cls = r;
		if (is_files_post(method, url)) {
			/* admitted before any of the body is read, or drained
			 * and answered by e2b_envd()'s checks */
			ct = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
			ce = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Encoding");
			if ((r->up = e2b_upload_new(conn)) == NULL)
				snprintf(r->upload_err, sizeof(r->upload_err), "not admitted");
			/* (a bad head is answered by e2b_envd()'s checks) */
			else if (ce && *ce && strcasecmp(ce, "identity") != 0 &&
			    !(strcasecmp(ce, "gzip") == 0 && ct &&
			    strncasecmp(ct, "application/octet-stream", 24) == 0))
				snprintf(r->upload_err, sizeof(r->upload_err),
				    "Content-Encoding: only gzip, of an application/octet-stream upload");
			else if (ct && strncasecmp(ct, "application/octet-stream", 24) == 0) {
				r->octet = true;
				if (e2b_upload_part(r->up, NULL) == 0 &&       /* named by ?path= */
				    ce && strcasecmp(ce, "gzip") == 0)
					(void)e2b_upload_gzip(r->up);
			} else if (ct && strncasecmp(ct, "multipart/form-data", 19) == 0) {
				r->pp = MHD_create_post_processor(conn, 64u << 10, upload_part, r);
				if (r->pp == NULL)
					snprintf(r->upload_err, sizeof(r->upload_err),
					    "malformed multipart/form-data");
			} else
				snprintf(r->upload_err, sizeof(r->upload_err),
				    "an upload is multipart/form-data or application/octet-stream");
		}
		return MHD_YES;
	}
	if (*upload_size) {
		size_t n = *upload_size;

		*upload_size = 0;
		if (is_files_post(method, url)) {
			if (r->upload_err[0])
				return MHD_YES;         /* drained, answered at the end */
			if (r->octet)
				(void)e2b_upload_data(r->up, upload, n);       /* failures: answered at the end */
			else if (r->pp && MHD_post_process(r->pp, upload, n) != MHD_YES &&
			    !r->upload_err[0])
				snprintf(r->upload_err, sizeof(r->upload_err),
				    "malformed multipart/form-data");
			return MHD_YES;
		}
		if (r->too_large || n > E2B_JSON_MAX - r->body_len) {
			r->too_large = true;
			return MHD_YES;
		}
		char *nb = realloc(r->body, r->body_len + n + 1);
		if (nb == NULL)
			return MHD_NO;
		r->body = nb;
		memcpy(r->body + r->body_len, upload, n);
		r->body_len += n;
		r->body[r->body_len] = '\0';
		return MHD_YES;
	}
	r->method = method;
	r->url = url;
	if (r->too_large)
		return e2b_api_error(conn, 413, "request body larger than %u bytes", E2B_JSON_MAX);
	if (e2b_envd_route(conn, url))
		ret = e2b_envd(r);
	else if (e2b_control_route(url))
		ret = e2b_control(r);
	else
		ret = e2b_api_error(conn, 404, "no such endpoint: %s %s", method, url);
	return ret;
}

static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct e2b_req *r = *con_cls;

	(void)cls; (void)conn; (void)toe;
	if (r == NULL)
		return;
	if (r->pp)
		MHD_destroy_post_processor(r->pp);
	e2b_upload_free(r->up);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

struct MHD_Daemon *
e2b_start(const struct e2b_cfg *cfg, int listen_fd)
{
	e2b_conf = *cfg;
	return MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, NULL,
	    MHD_OPTION_LISTEN_SOCKET, listen_fd,
	    MHD_OPTION_CONNECTION_LIMIT, 256u,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, 128u,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(128u << 10),
	    MHD_OPTION_CONNECTION_TIMEOUT, 300u,
	    MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
	    MHD_OPTION_END);
}
