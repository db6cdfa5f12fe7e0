/* The E2B-compatible API of space-edge (docs/e2b.md): its own HTTP/1.1
 * listener (libmicrohttpd, one thread per connection) serving both the
 * control API (X-API-KEY: a space API key, used as it is) and the sandbox
 * API (Connect RPC with the JSON codec, /files, /health; selected by the
 * E2b-Sandbox-Id header the SDK sends). Every call is translated into
 * space-control's REST API and node-api's HTTP and WebSocket API with the
 * caller's own key, through libspace's client (route cache, one rebuilt
 * attempt). It holds no key of its own. */
#ifndef SPACE_EDGE_E2B_H
#define SPACE_EDGE_E2B_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <microhttpd.h>

#include "client.h"

#define E2B_ENVD_PORT           49983
#define E2B_ENVD_VERSION        "0.5.7"         /* what the SDK is told: multipart and octet-stream uploads, closeStdin */
#define E2B_JSON_MAX            (1u << 20)      /* a JSON or Connect request body */
#define E2B_UPLOAD_MAX          (1ull << 30)    /* one /files upload, all parts (streamed) */
#define E2B_DOWNLOAD_MAX        (64u << 20)     /* one /files download (kept while it passes) */
#define E2B_UPLOAD_FILES_MAX    64              /* parts of one multipart upload */
#define E2B_CLIENTS_MAX         128             /* API keys with a client (route cache) kept */
#define E2B_WAIT_SECS           60              /* create, pause, resume wait for their state */
#define E2B_LIST_MAX            1000            /* sandboxes per list page */
#define E2B_HOME                "/home/user"    /* relative paths are under it */

struct e2b_cfg {
	const char *control;            /* space-control base URL */
	unsigned cache_ttl;             /* s: a route resolution is trusted */
	int verbose;
};

/* starts the listener on fd (bound and listening); NULL on failure */
struct MHD_Daemon *e2b_start(const struct e2b_cfg *cfg, int listen_fd);

/* ---- shared by e2b_*.c ---- */

/* the state of one request */
struct e2b_req {
	struct MHD_Connection *conn;
	const char *method, *url;
	char *body;                     /* JSON/Connect body, NUL-terminated */
	size_t body_len;
	bool too_large;
	/* /files uploads, streamed to the sandbox (e2b_upload.c) */
	struct MHD_PostProcessor *pp;
	bool octet;                     /* application/octet-stream upload */
	struct e2b_upload *up;          /* NULL: not admitted (e2b_envd() says why) */
	char upload_err[128];
};

/* one client per API key: its route cache; held locked while in use */
struct e2b_cl;
struct e2b_cl *e2b_client(const char *key);
struct space_client *e2b_cl_client(struct e2b_cl *cl);
void e2b_client_release(struct e2b_cl *cl);

/* answers */
enum MHD_Result e2b_send(struct MHD_Connection *c, unsigned status, const char *ctype,
    const char *body, size_t len);
enum MHD_Result e2b_send_json(struct MHD_Connection *c, unsigned status, json_t *o);  /* steals o */
/* the control API's error body: {"code":status,"message":msg} */
enum MHD_Result e2b_api_error(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* the status the SDK should see for a failed space answer */
unsigned e2b_status_of(const struct space_answer *a);
const char *e2b_msg_of(const struct space_answer *a);

/* strict objects: every key of o is in the NULL-terminated list */
bool e2b_only_keys(const json_t *o, const char *const *keys, const char **bad);
json_t *e2b_parse(const char *buf, size_t len, const char **why);
/* a key as it may be sent: b64token characters, 1..SPACE_TOKEN_MAX */
bool e2b_key_ok(const char *k);

/* e2b_control.c: /sandboxes, /v2/sandboxes... true when the path is its */
bool e2b_control_route(const char *url);
enum MHD_Result e2b_control(struct e2b_req *r);

/* e2b_upload.c: a /files upload streamed to the sandbox part by part.
 * new: admitted by the request's head (NULL: not admitted, nothing is
 * sent); part: a file begins (its filename, or ?path= for the first);
 * data: its next bytes; answer: ends the last part and answers the list
 * of files written, or the first failure; free: a part still being sent
 * is cut, nothing of it kept */
struct e2b_upload;
struct e2b_upload *e2b_upload_new(struct MHD_Connection *c);
int e2b_upload_part(struct e2b_upload *u, const char *filename);
int e2b_upload_data(struct e2b_upload *u, const char *data, size_t n);
/* the body is gzip (Content-Encoding): what e2b_upload_data is given from
 * now on is inflated; a body that is not gzip, or cut short, fails */
int e2b_upload_gzip(struct e2b_upload *u);
enum MHD_Result e2b_upload_answer(struct e2b_upload *u, struct MHD_Connection *c);
bool e2b_upload_failed(const struct e2b_upload *u);      /* a part failed: its answer wins */
void e2b_upload_free(struct e2b_upload *u);

/* e2b_envd.c: the sandbox API */
bool e2b_envd_route(struct MHD_Connection *c, const char *url);
enum MHD_Result e2b_envd(struct e2b_req *r);
/* the environment of a create (envVars): every process the sandbox starts
 * through this API gets it, a command's own envs over it. Kept in the
 * sandbox, E2B_ENVS_FILE (its layer: it moves and resumes with it), by
 * e2b_envs_store once the sandbox serves; read back by each start (and
 * kept in a small cache). envs is validated by e2b_envs_valid. 0, or -1
 * with the answer saying why. */
#define E2B_ENVS_FILE           E2B_HOME "/.e2b/envs.json"
#define E2B_ENVS_MAX            64              /* variables of a create */
#define E2B_ENVS_BYTES_MAX      8192            /* their JSON (they travel in each start's URL) */
bool e2b_envs_valid(const json_t *envs, const char **why);
int e2b_envs_store(const char *key, const char *sbx, const json_t *envs, struct space_answer *a);

extern struct e2b_cfg e2b_conf;
#endif
