/* libmicrohttpd wrapper: one thread per connection, bounded connections
 * and bodies, a routing table, JSON answers. */
#ifndef SPACE_CONTROL_HTTP_H
#define SPACE_CONTROL_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include "limits.h"
#include "store.h"

struct ctl;
struct http;

/* AUTH_SANDBOX: an API key, or an access token of the sandbox the path
 * names (api_access.c; req.sandbox_token tells which) */
enum auth_kind { AUTH_NONE, AUTH_USER, AUTH_WORKER, AUTH_EDGE, AUTH_SANDBOX };

#define REQ_PARAMS_MAX 2

struct req {
	struct ctl *ctl;
	struct MHD_Connection *conn;
	const char *method;
	const char *url;
	char   *body;
	size_t  body_len;
	bool    too_large;
	void   *sink;           /* a streamed body's state (templates.c) */
	char    params[REQ_PARAMS_MAX][SPACE_ID_MAX + 1];   /* '*' path segments */
	char    principal[SPACE_ID_MAX + 1];                /* AUTH_USER; AUTH_EDGE: the edge's name */
	char    key_id[STORE_CREDID_LEN + 1];               /* AUTH_USER: the key's id */
	bool    sandbox_token;  /* AUTH_SANDBOX: an access token, principal its sandbox's owner */
	/* the answer */
	unsigned status;
	char   *text;           /* body (JSON or Prometheus text) */
	const char *content_type;
	int     retry_after;    /* seconds, 0 = no header */
	bool    close;          /* answer with Connection: close */
	const char *route_name;
	int     file_fd;        /* > 0: the answer is this file (owned), not text */
	uint64_t file_size;
	/* work the client need not wait for: run once the answer is sent
	 * (or the connection ended without it), with after_id */
	void  (*after_reply)(struct req *);
	char    after_id[SPACE_ID_MAX + 1];
	char    after_detail[SPACE_CAP_AUDIT_LEN];
};

typedef void (*handler_fn)(struct req *);

struct route {
	const char *method;
	const char *pattern;    /* '*' matches one id segment */
	handler_fn  handler;
	enum auth_kind auth;
};

int  http_start(struct ctl *c, const char *listen, const char *cert, const char *key,
    struct http **out);
void http_stop(struct http *h);

/* answers; reply_json steals obj */
void reply_json(struct req *r, unsigned status, json_t *obj);
void reply_error(struct req *r, unsigned status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void reply_text(struct req *r, unsigned status, char *text, const char *ctype);

/* the body as a JSON object (empty body = {} when empty_ok); on failure
 * answers 400/413 itself and returns NULL */
json_t *req_json(struct req *r, bool empty_ok);
/* 1 when every key of obj is in allowed (NULL-terminated); otherwise
 * answers 400 naming the field and returns 0 */
int json_keys_only(struct req *r, json_t *obj, const char *const *allowed);
const char *req_query(struct req *r, const char *name);
/* the query parameter name as a decimal 0..max into *out (left alone when
 * absent: 0); -EINVAL or -ERANGE for anything else */
int req_query_u(struct req *r, const char *name, uint64_t max, uint64_t *out);

/* handlers (api_*.c) */
void api_healthz(struct req *);
void api_metrics(struct req *);
void api_keys(struct req *);
void api_openapi(struct req *);
void api_sandbox_create(struct req *);
void api_sandbox_list(struct req *);
void api_sandbox_get(struct req *);
void api_sandbox_delete(struct req *);
void api_routes(struct req *);
void api_workers_list(struct req *);
void api_sandbox_pause(struct req *);
void api_sandbox_resume(struct req *);
void api_sandbox_move(struct req *);
void api_snapshot_create(struct req *);
void api_snapshot_list(struct req *);
void api_snapshot_delete(struct req *);
void api_sandbox_network_get(struct req *);
void api_sandbox_network_set(struct req *);
void api_sandbox_ports_get(struct req *);
void api_sandbox_ports_add(struct req *);
void api_sandbox_ports_remove(struct req *);
void api_sandbox_timeouts(struct req *);
/* api_edge.c */
void api_edge_routes(struct req *);
void api_traffic_token(struct req *);
void api_edge_revocations(struct req *);
/* after a handler: a 2xx of one that can take away what space-edge was
 * allowed is noted for GET /v1/edge/revocations (edge_revoke.c) */
void edge_revoke_after(struct req *r, handler_fn h);
/* api_access.c */
void api_access_token(struct req *);
void api_worker_snapshot(struct req *);
void api_worker_checkpoint(struct req *);
void api_worker_register(struct req *);
void api_worker_heartbeat(struct req *);
void api_worker_assignments(struct req *);
void api_worker_status(struct req *);
void api_worker_archives(struct req *);
/* templates.c */
void api_template_create(struct req *);
void api_template_list(struct req *);
void api_template_get(struct req *);
void api_template_delete(struct req *);
void api_template_blob_put(struct req *);
void api_template_blob_get(struct req *);
/* a streamed body: each piece as it arrives (0, or -1 to stop reading),
 * and the end of the request (answered or not) */
int  templates_sink(struct req *r, const char *p, size_t n);
void templates_sink_end(struct req *r);
/* archive_blobs.c: snapshot archives by digest (docs/recovery.md) */
void api_archive_blob_put(struct req *);
void api_archive_blob_stream(struct req *);
void api_archive_blob_get(struct req *);
int  archive_blobs_sink(struct req *r, const char *p, size_t n);
void archive_blobs_sink_end(struct req *r);
#endif
