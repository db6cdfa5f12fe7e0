/* The HTTP client of space (libcurl): the control plane with an API key,
 * the data plane (node-api) with a capability. Wire contracts:
 * docs/protocol.md sections 2 and 3.
 *
 * Every call fills a struct space_answer: the HTTP status, the parsed JSON
 * body, the decoded error ({"error","reason","message"}) and the identity
 * headers of the execution that served the request. A call returns 0 when an
 * HTTP answer arrived, whatever its status, and a negative errno when none
 * did (the answer's message then says why). */
#ifndef SPACE_CLIENT_H
#define SPACE_CLIENT_H
#include <stddef.h>
#include <jansson.h>

#include "limits.h"
#include "routecache.h"

struct space_client {
	char *api_url;          /* control plane base URL, no trailing slash */
	char *api_key;          /* "sk_..."; secret, wiped on free */
	long  connect_timeout;  /* seconds */
	/* The route cache (DESIGN section 8): opened by the first data-plane
	 * operation at route_cache_path (NULL: SPACE_ROUTE_CACHE, else the
	 * default location), saved by space_client_free(). */
	char *route_cache_path;
	struct route_cache *rc;
	int   verbose;          /* each attempt on stderr ("route: ...") */
	struct route_call_result last;  /* of the last space_sbx_op() */
	int   rebuilt;          /* attempts it made after a route repair (0 or 1) */
	char  refusal[160];     /* its last identity refusal, "" when none:
	                           "gen 7 on w1 refused: refresh_route (reason)" */
};

struct space_answer {
	long    status;                 /* HTTP status; 0 when no answer arrived */
	json_t *body;                   /* parsed JSON body, or NULL */
	char    error[64];              /* "error" of an error body */
	char    reason[128];            /* "reason" (comparator outcomes) */
	char    message[512];           /* "message", or the transport failure */
	long    retry_after;            /* Retry-After seconds, -1 when absent */
	char    generation[24];         /* X-Space-Generation, "" when absent */
	char    worker[SPACE_ID_MAX + 1];       /* X-Space-Worker */
	int     not_sent;               /* no answer, and the request surely
	                                   never left (connect failed) */
	long long in_read;              /* bytes taken from in_fd */
	long long out_written;          /* bytes written to out_fd */
	int     foreign;                /* a 2xx answer named another execution
	                                   than the expected one: its body was
	                                   dropped before any byte was used */
};

void space_answer_init(struct space_answer *a);
void space_answer_clear(struct space_answer *a);        /* frees the body, resets */
/* true for a 2xx answer */
int space_answer_ok(const struct space_answer *a);
/* "code: message (reason)" for a failed answer or transport failure */
const char *space_answer_strerror(const struct space_answer *a, char *buf, size_t cap);

/* NULL with errno set. api_url must be http:// or https://. */
struct space_client *space_client_new(const char *api_url, const char *api_key);
void space_client_free(struct space_client *c);

/* one request to the control plane; path starts with "/" */
int space_control(struct space_client *c, const char *method, const char *path,
    json_t *body, struct space_answer *a);

/* the caller's sandboxes (not killed only, when live), every page of
 * GET /v1/sandboxes up to max_pages of 1,000: 0 and *out (an array the
 * caller decrefs), or -1 with *a saying why (a failed answer, or one
 * that is no page) */
int space_sandboxes(struct space_client *c, bool live, unsigned max_pages, json_t **out,
    struct space_answer *a);

/* A route: where to send data-plane operations for one sandbox, and the
 * capability that admits them. */
struct space_route {
	char   *endpoint;               /* node-api base URL */
	char   *capability;             /* v4.public...; secret, wiped on free */
	char   *expires_at;             /* RFC 3339 */
	json_t *identity;               /* route identity object */
	json_t *answer;                 /* the whole answer */
};
/* POST /v1/sandboxes/{sbx}/routes with req ({"access":[..]} or
 * {"port","proto"}). 0 with r filled on a valid 2xx answer; -EPROTO for a
 * malformed 2xx answer; -EREMOTEIO for an error answer (see a). */
int space_route_get(struct space_client *c, const char *sbx, json_t *req,
    struct space_route *r, struct space_answer *a);
void space_route_free(struct space_route *r);

/* One data-plane operation. */
struct space_data_op {
	const char *access;     /* what the capability must grant: "exec", "fs:r", "fs:w",
	                           or a list ("exec,pty") */
	const char *method;     /* "GET", "POST", "PUT" */
	const char *path;       /* after /v1/sandboxes/{sbx}/, query included (escaped) */
	json_t     *body;       /* JSON request body, or NULL */
	int         in_fd;      /* >= 0: stream the request body from this fd (PUT) */
	int         in_once;    /* in_fd (a pipe or socket) is sent as it is read, never
	                           spooled: once a byte of it was taken, no attempt is
	                           made again (the answer is a 503 "unavailable") */
	int         out_fd;     /* >= 0: stream a 2xx body to this fd instead of parsing it */
	long long   out_max;    /* > 0: a streamed body longer than this is cut off, the
	                           exchange failing with -EMSGSIZE */
	long        timeout;    /* seconds for the whole exchange; 0: none, but
	                           a transfer stalled for 60 s is abandoned */
	/* a WebSocket opening instead of an HTTP exchange (streams): called
	 * with the URL, the local socket that reaches its endpoint (NULL:
	 * the URL's TCP port) and the bearer, it fills a as http would
	 * (status 101 when the stream opened, the decoded error answer
	 * otherwise), so the route repair rules apply to it unchanged */
	int (*open_ws)(void *ctx, const char *url, const char *sock, const char *bearer,
	    struct space_answer *a);
	void       *ws_ctx;
};
/* Get a route for sbx (the route cache first), then do op against its
 * endpoint through route_call(): the single place where route repair
 * (REFRESH_ROUTE: one rebuilt attempt), renewal (EXPIRED) and the
 * per-operation transport rules live (docs/recovery.md section 2). 0 when
 * an answer arrived (see a for its status); a negative errno otherwise,
 * with a->message saying why. c->last counts attempts and resolutions.
 * An answer whose X-Space-Generation / X-Space-Worker differ from the
 * execution the capability was issued for is refused (-EPROTO). */
int space_sbx_op(struct space_client *c, const char *sbx,
    const struct space_data_op *op, struct space_answer *a);
/* the route cache of c, opened on first use; NULL with errno set */
struct route_cache *space_client_routes(struct space_client *c);

/* the bare exchange: url, bearer (or NULL), method, JSON body or in_fd,
 * out_fd for a streamed 2xx body */
int space_http(const char *url, const char *bearer, const char *method,
    json_t *body, int in_fd, int out_fd, long connect_timeout, long timeout,
    struct space_answer *a);

/* percent-encode s for a path segment or query value; NULL on ENOMEM */
char *space_url_escape(const char *s);
#endif
