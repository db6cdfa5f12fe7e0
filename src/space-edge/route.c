/* Routes of space-edge: a capability from space-control (with the
 * caller's API key, or with the edge credential for a public port or a
 * traffic token), the worker's gateway opened with the gateway hello, and
 * the recovery rules of DESIGN section 8 through libspace's route_call():
 * a refresh_route from the gateway resolves again with the rejected
 * route, replaces the cached entry only if it still holds that route, and
 * makes exactly one rebuilt attempt. No request byte has left when the
 * hello is refused, so the rebuilt attempt is safe for every request.
 *
 * The cache is keyed by (sandbox, port, credential): a route obtained
 * with one credential never serves another. It lives in memory only. */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sodium.h>
#include <jansson.h>

#include "client.h"
#include "edge.h"
#include "gwhello.h"
#include "log.h"
#include "util.h"

#define ROUTES_MAX      4096
#define RESOLVE_TRIES   3

int
edge_routes_init(struct edge *e)
{
	pthread_mutex_init(&e->mu, NULL);
	e->cap_routes = 64;
	e->routes = calloc(e->cap_routes, sizeof(*e->routes));
	return e->routes ? 0 : -ENOMEM;
}

void
edge_routes_free(struct edge *e)
{
	if (e->routes) {
		sodium_memzero(e->routes, e->cap_routes * sizeof(*e->routes));
		free(e->routes);
	}
	e->routes = NULL;
	pthread_mutex_destroy(&e->mu);
}

static void
cred_key(enum edge_cred kind, const char *secret, uint8_t out[32])
{
	crypto_generichash_state s;
	uint8_t k = (uint8_t)kind;

	crypto_generichash_init(&s, NULL, 0, 32);
	crypto_generichash_update(&s, &k, 1);
	if (secret)
		crypto_generichash_update(&s, (const uint8_t *)secret, strlen(secret));
	crypto_generichash_final(&s, out, 32);
}

static struct edge_route *
slot_find(struct edge *e, const char *sbx, uint16_t port, const uint8_t cred[32])
{
	for (size_t i = 0; i < e->nroutes; i++) {
		struct edge_route *r = &e->routes[i];
		if (r->used && r->port == port && strcmp(r->sandbox, sbx) == 0 &&
		    sodium_memcmp(r->cred, cred, 32) == 0)
			return r;
	}
	return NULL;
}

/* a free slot: an unused one, else an expired one, else the one closest
 * to its expiry (the table is bounded) */
static struct edge_route *
slot_new(struct edge *e, int64_t now)
{
	struct edge_route *best = NULL;
	size_t i;

	for (i = 0; i < e->nroutes; i++)
		if (!e->routes[i].used || e->routes[i].e.cache_exp <= now)
			return &e->routes[i];
	if (e->nroutes < e->cap_routes)
		return &e->routes[e->nroutes++];
	if (e->cap_routes < ROUTES_MAX) {
		size_t ncap = e->cap_routes * 2;
		struct edge_route *n = calloc(ncap, sizeof(*n));
		if (n) {
			memcpy(n, e->routes, e->cap_routes * sizeof(*n));
			sodium_memzero(e->routes, e->cap_routes * sizeof(*n));
			free(e->routes);
			e->routes = n;
			e->cap_routes = ncap;
			return &e->routes[e->nroutes++];
		}
	}
	for (i = 0; i < e->nroutes; i++)
		if (best == NULL || e->routes[i].e.cache_exp < best->e.cache_exp)
			best = &e->routes[i];
	return best;
}

struct call {
	struct edge *e;
	const char *sandbox;
	uint16_t port;
	enum edge_cred kind;
	const char *secret;
	struct edge_upstream *up;
	char gw_error[SPACE_ERROR_CODE_MAX + 1];        /* the gateway's last refusal */
	char gw_message[SPACE_ERROR_MESSAGE_MAX + 1];
	unsigned ctl_status;                            /* the control plane's refusal */
	char ctl_message[SPACE_ERROR_MESSAGE_MAX + 1];
	bool ctl_retry;
};

/* the control plane's answer, as a route entry */
static int
entry_from_answer(json_t *b, struct route_entry *out)
{
	const char *ep = json_string_value(json_object_get(b, "endpoint"));
	const char *cap = json_string_value(json_object_get(b, "capability"));
	const char *exp = json_string_value(json_object_get(b, "expires_at"));
	int64_t t;

	if (ep == NULL || cap == NULL || exp == NULL || strncmp(ep, "tcp://", 6) != 0 ||
	    strlen(ep) > SPACE_ENDPOINT_MAX || strlen(cap) > SPACE_TOKEN_MAX ||
	    route_identity_unpack(json_object_get(b, "route"), &out->route) < 0 ||
	    rfc3339_parse(exp, strlen(exp), &t) < 0)
		return -EPROTO;
	snprintf(out->endpoint, sizeof(out->endpoint), "%s", ep);
	snprintf(out->capability, sizeof(out->capability), "%s", cap);
	out->cap_exp = t;
	out->access = 0;
	return 0;
}

static int
resolve(void *ctx, const char *sandbox, const struct route_identity *rejected,
    struct route_entry *out)
{
	struct call *x = ctx;
	struct space_client *c;
	struct space_answer a;
	json_t *body;
	char path[SPACE_ID_MAX + 40];
	int rc = -EIO, tries;

	atomic_fetch_add(&x->e->st.resolves, 1);
	body = json_pack("{s:I,s:s}", "port", (json_int_t)x->port, "proto", "http");
	if (body == NULL)
		return -ENOMEM;
	if (rejected)
		json_object_set_new(body, "rejected", route_identity_pack(rejected));
	if (x->kind == CRED_KEY) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/routes", sandbox);
		c = space_client_new(x->e->cfg.control, x->secret);
	} else {
		snprintf(path, sizeof(path), "/v1/edge/routes");
		json_object_set_new(body, "sandbox", json_string(sandbox));
		if (x->kind == CRED_TOKEN)
			json_object_set_new(body, "traffic_token", json_string(x->secret));
		c = space_client_new(x->e->cfg.control, x->e->cfg.cred);
	}
	if (c == NULL) {
		json_decref(body);
		return -ENOMEM;
	}
	space_answer_init(&a);
	for (tries = 0; tries < RESOLVE_TRIES; tries++) {
		space_answer_clear(&a);
		rc = space_control(c, "POST", path, body, &a);
		/* converging (a move's new execution not serving yet): the
		 * control plane already waited; wait as it says, bounded */
		if (rc == 0 && a.status == 503 && tries + 1 < RESOLVE_TRIES) {
			sleep(a.retry_after > 0 && a.retry_after <= 2 ? (unsigned)a.retry_after : 1);
			continue;
		}
		break;
	}
	if (rc < 0) {
		x->ctl_status = 502;
		snprintf(x->ctl_message, sizeof(x->ctl_message), "control plane unreachable");
		rc = -EIO;
	} else if (!space_answer_ok(&a)) {
		x->ctl_status = (unsigned)a.status;
		x->ctl_retry = a.status == 503;
		snprintf(x->ctl_message, sizeof(x->ctl_message), "%.*s", (int)sizeof(x->ctl_message) - 1,
		    a.message);
		rc = -EREMOTEIO;
	} else if ((rc = entry_from_answer(a.body, out)) < 0) {
		x->ctl_status = 502;
		snprintf(x->ctl_message, sizeof(x->ctl_message), "malformed route answer");
	}
	space_answer_clear(&a);
	space_client_free(c);
	json_decref(body);
	return rc;
}

/* tcp://HOST:PORT, connected within the timeout; -1 when it fails */
int
gw_connect(const char *endpoint, unsigned timeout_s)
{
	char host[256], *colon;
	const char *hp = endpoint + 6;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, one = 1;

	if (strlen(hp) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%s", hp);
	if ((colon = strrchr(host, ':')) == NULL)
		return -1;
	*colon = '\0';
	if (host[0] == '[' && colon > host && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host, colon + 1, &hints, &res) != 0)
		return -1;
	for (ai = res; ai; ai = ai->ai_next) {
		struct pollfd p;
		int err = 0;
		socklen_t el = sizeof(err);

		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 && errno != EINPROGRESS)
			goto next;
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, (int)timeout_s * 1000) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err != 0)
			goto next;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		break;
next:
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* all of buf, within the deadline (ms, monotonic) */
static int
send_all(int fd, const uint8_t *buf, size_t n, uint64_t deadline_ms)
{
	while (n > 0) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t now = now_mono_ns() / 1000000;
		ssize_t w;

		if (now >= deadline_ms || poll(&p, 1, (int)(deadline_ms - now)) != 1)
			return -ETIMEDOUT;
		w = send(fd, buf, n, MSG_NOSIGNAL);
		if (w < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (w <= 0)
			return -EIO;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

static enum route_outcome
attempt(void *ctx, const struct route_entry *re)
{
	struct call *x = ctx;
	struct gw_hello h;
	struct gw_reply rep;
	uint8_t *frame = NULL, in[GWHELLO_HDR_LEN + SPACE_GWHELLO_MAX + 4096];
	size_t flen, have = 0;
	uint64_t deadline;
	const uint8_t *body;
	size_t blen;
	const char *why;
	int fd, n, rc;

	x->gw_error[0] = '\0';
	if ((fd = gw_connect(re->endpoint, x->e->cfg.connect_timeout)) < 0)
		return ROUTE_TRANSPORT_BEFORE_SEND;
	memset(&h, 0, sizeof(h));
	snprintf(h.capability, sizeof(h.capability), "%s", re->capability);
	h.port = x->port;
	h.proto = PROTO_HTTP;
	rc = gwhello_encode(&h, &frame, &flen);
	sodium_memzero(&h, sizeof(h));
	if (rc < 0) {
		close(fd);
		return ROUTE_TRANSPORT_BEFORE_SEND;
	}
	deadline = now_mono_ns() / 1000000 + x->e->cfg.connect_timeout * 1000ull;
	rc = send_all(fd, frame, flen, deadline);
	sodium_memzero(frame, flen);
	free(frame);
	if (rc < 0) {
		close(fd);
		return ROUTE_TRANSPORT_BEFORE_SEND;
	}
	/* the answer: one frame, within the deadline; bytes after it are
	 * the service's own, and no more of them are read here than early[]
	 * keeps (the rest stays in the socket for the pump) */
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = now_mono_ns() / 1000000;
		size_t lim = GWHELLO_HDR_LEN + sizeof(x->up->early);
		uint32_t fl;
		ssize_t r;

		n = gwframe_parse(in, have, &body, &blen);
		if (n != 0)
			break;
		if (have >= GWHELLO_HDR_LEN && gwframe_header(in, &fl) == 0)
			lim += fl;
		if (lim > sizeof(in))
			lim = sizeof(in);
		if (have >= lim || now >= deadline || poll(&p, 1, (int)(deadline - now)) != 1) {
			n = -ETIMEDOUT;
			break;
		}
		r = recv(fd, in + have, lim - have, 0);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0) {
			n = -EIO;
			break;
		}
		have += (size_t)r;
	}
	/* no answer: the hello may have reached the gateway, but no request
	 * byte did (the route_ops are idempotent: one retry) */
	if (n < 0 || gwreply_decode(body, blen, &rep, &why) < 0) {
		if (n >= 0)
			log_warnx("gateway %s: bad answer: %s", re->endpoint, why);
		close(fd);
		return ROUTE_TRANSPORT_AFTER_SEND;
	}
	if (rep.ok) {
		size_t rest = have - (size_t)n;

		if (rest > sizeof(x->up->early))
			rest = sizeof(x->up->early);
		memcpy(x->up->early, in + n, rest);
		x->up->nearly = rest;
		x->up->fd = fd;
		return ROUTE_OK;
	}
	close(fd);
	snprintf(x->gw_error, sizeof(x->gw_error), "%s", rep.error);
	snprintf(x->gw_message, sizeof(x->gw_message), "%s", rep.message);
	if (strcmp(rep.error, "refresh_route") == 0)
		return ROUTE_REFRESH;
	if (strcmp(rep.error, "capability_expired") == 0)
		return ROUTE_EXPIRED;
	return ROUTE_DENY;
}

static void
fail(struct edge_upstream *up, unsigned status, bool retry, const char *what, const char *arg)
{
	up->fd = -1;
	up->status = status;
	up->retry = retry;
	snprintf(up->message, sizeof(up->message), "%.120s%s%.60s%s", what, arg ? " (" : "",
	    arg ? arg : "", arg ? ")" : "");
}

void
edge_route(struct edge *e, const char *sandbox, uint16_t port, enum edge_cred kind,
    const char *secret, struct edge_upstream *up)
{
	struct call x = { .e = e, .sandbox = sandbox, .port = port, .kind = kind, .secret = secret,
	    .up = up };
	struct route_ops ops = { .resolve = resolve, .attempt = attempt, .idempotent = true };
	struct route_call_result res;
	struct route_cache *rc;
	struct route_identity held;
	struct edge_route *slot;
	const struct route_entry *now_e;
	uint8_t ck[32];
	int64_t now = now_unix(), cache_exp = 0;
	bool seeded = false;
	uint64_t gen;
	int r;

	up->fd = -1;
	up->nearly = 0;
	cred_key(kind, secret, ck);
	if ((rc = route_cache_new()) == NULL) {
		fail(up, 503, true, "out of memory", NULL);
		return;
	}
	route_cache_set_ttl(rc, e->cfg.cache_ttl);
	pthread_mutex_lock(&e->mu);
	gen = e->drop_gen;
	slot = slot_find(e, sandbox, port, ck);
	if (slot && slot->e.cache_exp > now && route_cache_put(rc, &slot->e, now) == 0) {
		held = slot->e.route;
		cache_exp = slot->e.cache_exp;
		seeded = true;
	}
	pthread_mutex_unlock(&e->mu);
	if (seeded)
		atomic_fetch_add(&e->st.cache_hits, 1);

	r = route_call(rc, sandbox, &ops, &x, &res);
	if (res.repaired && r != -EIO && r != -EREMOTEIO && r != -EPROTO && r != -ENOMEM) {
		/* the attempt after a repair is the rebuilt one (none was made
		 * when the resolution that followed the refusal failed) */
		atomic_fetch_add(&e->st.rebuilt, 1);
		if (r == -ESTALE)
			atomic_fetch_add(&e->st.refresh_failed, 1);
	}
	if (res.renewed)
		atomic_fetch_add(&e->st.renewed, 1);

	/* the cache: what route_call left, by compare-and-swap on what we
	 * seeded (another connection may have repaired it meanwhile); a
	 * repair keeps the entry's cache_exp */
	now_e = route_cache_entry(rc, 0);
	pthread_mutex_lock(&e->mu);
	slot = slot_find(e, sandbox, port, ck);
	if (r == 0 && now_e) {
		/* not seeded: none was cached, or it had expired, its slot
		 * still there: the fresh route replaces it (else every later
		 * request would resolve again), unless another connection
		 * stored a fresh one meanwhile */
		bool other = !seeded && slot != NULL && slot->e.cache_exp > now;

		/* a revocation heard meanwhile (gen moved): not kept */
		if (!seeded && !other && gen == e->drop_gen &&
		    (slot != NULL || (slot = slot_new(e, now)) != NULL)) {
			memset(slot, 0, sizeof(*slot));
			snprintf(slot->sandbox, sizeof(slot->sandbox), "%s", sandbox);
			slot->port = port;
			memcpy(slot->cred, ck, 32);
			slot->used = true;
			slot->e = *now_e;
			slot->e.cache_exp = now + e->cfg.cache_ttl;
		} else if (slot && seeded && route_identity_equal(&slot->e.route, &held)) {
			slot->e = *now_e;
			slot->e.cache_exp = cache_exp;
		}
	} else if (slot && (!seeded || route_identity_equal(&slot->e.route, &held))) {
		/* refused: nothing of it is kept */
		sodium_memzero(slot, sizeof(*slot));
	}
	pthread_mutex_unlock(&e->mu);
	route_cache_free(rc);

	if (r == 0) {
		atomic_fetch_add(&e->st.routed, 1);
		return;
	}
	if (x.ctl_status != 0 && x.gw_error[0] == '\0') {
		/* the control plane refused: its status is the answer, except
		 * that its own failures are a bad gateway here */
		unsigned s = x.ctl_status;
		if (s != 401 && s != 403 && s != 404 && s != 409 && s != 503)
			s = 502;
		fail(up, s, x.ctl_retry, x.ctl_message, NULL);
		return;
	}
	if (x.gw_error[0]) {
		if (strcmp(x.gw_error, "port_not_declared") == 0)
			fail(up, 404, false, "port not declared", NULL);
		else if (strcmp(x.gw_error, "unavailable") == 0 || strcmp(x.gw_error, "refresh_route") == 0)
			fail(up, 503, true, "sandbox unavailable", x.gw_error);
		else
			fail(up, 502, false, "gateway refused", x.gw_error);
		return;
	}
	fail(up, r == -ECONNREFUSED || r == -ECONNRESET ? 502 : 503, true, "gateway unreachable",
	    NULL);
}

/* One more request on an open connection (conn.c): its credential must
 * hold a decision for (sandbox, port) that is still fresh (at most
 * --auth-ttl old and not dropped by a revocation, revoke.c); else
 * space-control decides now, as for a new connection. The upstream
 * connection is not touched: it already goes to this sandbox port, and
 * a route change there is the gateway's to refuse. */
int
edge_authorize(struct edge *e, const char *sandbox, uint16_t port, enum edge_cred kind,
    const char *secret, struct edge_upstream *up)
{
	struct call x = { .e = e, .sandbox = sandbox, .port = port, .kind = kind, .secret = secret,
	    .up = up };
	struct route_entry fresh;
	struct edge_route *slot;
	uint8_t ck[32];
	int64_t now = now_unix();
	uint64_t gen;
	int r;

	up->fd = -1;
	up->nearly = 0;
	atomic_fetch_add(&e->st.checks, 1);
	cred_key(kind, secret, ck);
	pthread_mutex_lock(&e->mu);
	slot = slot_find(e, sandbox, port, ck);
	if (slot && slot->e.cache_exp > now) {
		pthread_mutex_unlock(&e->mu);
		atomic_fetch_add(&e->st.cache_hits, 1);
		return 0;
	}
	gen = e->drop_gen;
	pthread_mutex_unlock(&e->mu);

	memset(&fresh, 0, sizeof(fresh));
	r = resolve(&x, sandbox, NULL, &fresh);
	pthread_mutex_lock(&e->mu);
	slot = slot_find(e, sandbox, port, ck);
	if (r == 0 && gen == e->drop_gen) {
		/* kept for later requests and connections, unless a revocation
		 * came while it was asked (then the next one asks again) */
		if (slot != NULL || (slot = slot_new(e, now)) != NULL) {
			memset(slot, 0, sizeof(*slot));
			snprintf(slot->sandbox, sizeof(slot->sandbox), "%s", sandbox);
			slot->port = port;
			memcpy(slot->cred, ck, 32);
			slot->used = true;
			slot->e = fresh;
			slot->e.cache_exp = now + e->cfg.cache_ttl;
		}
	} else if (r != 0 && slot)
		sodium_memzero(slot, sizeof(*slot));
	pthread_mutex_unlock(&e->mu);
	sodium_memzero(&fresh, sizeof(fresh));
	if (r == 0)
		return 0;
	if (x.ctl_status != 0) {
		unsigned s = x.ctl_status;
		if (s != 401 && s != 403 && s != 404 && s != 409 && s != 503)
			s = 502;
		fail(up, s, x.ctl_retry, x.ctl_message, NULL);
	} else
		fail(up, 503, true, "control plane unreachable", NULL);
	return -1;
}

/* a revocation heard from space-control (revoke.c): every decision about
 * the sandbox (NULL: about every sandbox) is dropped, so the next request
 * for it is decided again */
size_t
edge_routes_drop(struct edge *e, const char *sandbox)
{
	size_t n = 0;

	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->nroutes; i++) {
		struct edge_route *r = &e->routes[i];
		if (r->used && (sandbox == NULL || strcmp(r->sandbox, sandbox) == 0)) {
			sodium_memzero(r, sizeof(*r));
			n++;
		}
	}
	e->drop_gen++;
	pthread_mutex_unlock(&e->mu);
	return n;
}
