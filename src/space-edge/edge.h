/* space-edge: the public entry (docs/network.md, "space-edge"). One
 * thread per client connection (bounded), a strict request-head decoder
 * (libspace reqhead.c), capabilities from space-control, the worker's
 * gateway reached with the gateway hello (libspace gwhello.c), then the
 * bytes of the connection both ways. */
#ifndef SPACE_EDGE_H
#define SPACE_EDGE_H
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "limits.h"
#include "routecache.h"

#define EDGE_PROG "space-edge"

/* the reason phrase of an HTTP status the edge answers with itself */
const char *edge_reason(unsigned status);
/* send all n bytes (MSG_NOSIGNAL), retrying EINTR and short sends; 0 or -1 */
int edge_send_all(int fd, const void *p, size_t n);

struct edge_cfg {
	const char *listen;             /* ADDR:PORT */
	const char *control;            /* space-control base URL */
	const char *domain;             /* hosts are {port}-{sandbox}.{domain} */
	char   *cred;                   /* the edge credential ("ek_..."); secret */
	const char *user;               /* when started as root: whom to become */
	unsigned max_conns;
	unsigned head_timeout;          /* s: a request head must be complete within */
	unsigned idle_timeout;          /* s: no byte either way for so long closes */
	unsigned connect_timeout;       /* s: to a gateway, and its hello answer */
	unsigned cache_ttl;             /* s: an authorization decision (and its
	                                   route) is trusted: --auth-ttl */
	int verbose;
};

/* counters of /metrics; label sets are fixed here */
enum edge_refusal {
	REF_BAD_HEAD, REF_HEAD_TOO_LARGE, REF_HEAD_TIMEOUT, REF_BAD_HOST, REF_MISDIRECTED,
	REF_OTHER_HOST, REF_TOO_MANY, REF_UNAUTHENTICATED, REF_FORBIDDEN, REF_NOT_FOUND,
	REF_CONFLICT, REF_UNAVAILABLE, REF_BAD_GATEWAY, REF_N
};

struct edge_stats {
	atomic_ullong conns_total, conns_open, requests, routed;
	atomic_ullong resolves, cache_hits, rebuilt, refresh_failed, renewed;
	atomic_ullong checks;           /* later requests on a connection, checked */
	atomic_ullong revocations, dropped;     /* heard from space-control; entries dropped */
	atomic_ullong feed_errors;
	atomic_ullong refused[REF_N];
	atomic_ullong console[3];       /* the web console's: static, control, node */
};

/* one cached route: (sandbox, port, credential) -> where and with what */
struct edge_route {
	char     sandbox[SPACE_ID_MAX + 1];
	uint16_t port;
	uint8_t  cred[32];              /* BLAKE2b of the credential's kind and secret */
	struct route_entry e;
	bool     used;
};

struct edge {
	struct edge_cfg cfg;
	struct edge_stats st;
	pthread_mutex_t mu;             /* routes */
	struct edge_route *routes;
	size_t nroutes, cap_routes;
	uint64_t drop_gen;              /* bumped by every revocation (under mu) */
	int listen_fd;
};

/* how the caller asked */
enum edge_cred { CRED_NONE, CRED_KEY, CRED_TOKEN };

/* what a routing gave: an open, admitted gateway connection, or the
 * answer for the client */
struct edge_upstream {
	int fd;                         /* >= 0 on success */
	uint8_t early[4096];            /* bytes the gateway sent after its ok */
	size_t nearly;
	unsigned status;                /* for the client when fd < 0 */
	char message[200];
	bool retry;                     /* add Retry-After: 1 */
};

/* route.c */
int  edge_routes_init(struct edge *e);
void edge_routes_free(struct edge *e);
/* obtain a route (cache first), open the gateway and pass the hello,
 * with the recovery rules of DESIGN section 8 */
void edge_route(struct edge *e, const char *sandbox, uint16_t port, enum edge_cred kind,
    const char *secret, struct edge_upstream *up);
/* a later request on an open connection: 0 when its credential holds a
 * fresh decision for (sandbox, port), else -1 and the refusal in up */
int  edge_authorize(struct edge *e, const char *sandbox, uint16_t port, enum edge_cred kind,
    const char *secret, struct edge_upstream *up);
/* drop every decision about the sandbox (NULL: all); how many */
size_t edge_routes_drop(struct edge *e, const char *sandbox);
/* tcp://HOST:PORT, connected within the timeout; -1 when it fails */
int  gw_connect(const char *endpoint, unsigned timeout_s);

/* revoke.c: the revocation feed from space-control, in its own thread */
int  edge_feed_start(struct edge *e);

/* conn.c */
void *edge_conn_main(void *arg);        /* arg: struct edge_conn_arg * */
struct edge_conn_arg {
	struct edge *e;
	int fd;
	char peer[64];
};
char *edge_metrics(struct edge *e);
#endif
