/* One client connection of space-edge, in its own thread:
 *   1. the first request head, complete within --head-timeout of the
 *      accept, at most REQHEAD_MAX bytes, decoded strictly (reqhead.c);
 *   2. its Host names the sandbox and port; its credential (the owner's
 *      API key as a bearer, or X-Space-Traffic-Token, or none) obtains a
 *      route (route.c), which opens the worker's gateway;
 *   3. then the connection's bytes both ways. Toward the gateway each
 *      request head is decoded again (its Host must be the first one's,
 *      else 421 and close: an upstream connection serves one sandbox port
 *      and never another), the credential fields are taken out, and the
 *      body is passed by its framing (Content-Length or chunked) so that
 *      the next head is found. Every request is authorized, not only
 *      the first: its own credential must hold a fresh decision for the
 *      sandbox port (route.c edge_authorize: at most --auth-ttl old, and
 *      dropped at once by a revocation heard from space-control); one
 *      refused is answered after the answers before it (the gateway
 *      side is half-closed and drained first) and ends the connection.
 *      After an Upgrade request answered 101 both
 *      directions are raw (WebSocket); an Upgrade answered otherwise ends
 *      the connection after that answer. Answers flow back as they come. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <sys/time.h>
#include <sodium.h>

#include "console.h"
#include "edge.h"
#include "log.h"
#include "reqhead.h"
#include "util.h"

#define CBUF_CAP        (REQHEAD_MAX + 1)
#define UBUF_CAP        65536
#define CRED_MAX        128     /* an API key or traffic token is 46 bytes */

enum state { S_HEAD, S_BODY_CL, S_CHUNK, S_UPGRADE_WAIT, S_RAW, S_DRAIN, S_REFUSE };

struct conn {
	struct edge *e;
	int cfd, ufd;
	const char *peer;
	char *cbuf;                     /* client bytes not yet passed on */
	size_t chave;
	char host[256];                 /* the first request's Host */
	size_t host_len;
	char sbx[SPACE_ID_MAX + 1];     /* ... naming this sandbox port */
	uint16_t port;
	struct edge_upstream *refusal;  /* S_REFUSE: said once the gateway is done */
	uint64_t refuse_dl;             /* ms: by when the gateway must be done */
	enum state state;
	bool upgrade_pending;
	int64_t body_left;
	struct chunkscan ch;
	uint64_t head_start;            /* ms; 0 when no head byte waits */
	uint64_t last_io;
	char sniff[12];
	size_t nsniff;
	bool client_eof, up_eof;
	bool one_request;               /* the console's: one request, then close */
	char *ubuf;                     /* the gateway's bytes on their way to the client */
};

static int upstream_bytes(struct conn *c, const char *p, size_t n);

static uint64_t
now_ms(void)
{
	return now_mono_ns() / 1000000;
}

const char *
edge_reason(unsigned s)
{
	switch (s) {
	case 200: return "OK";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 408: return "Request Timeout";
	case 409: return "Conflict";
	case 421: return "Misdirected Request";
	case 431: return "Request Header Fields Too Large";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	default:  return "Error";
	}
}

int
edge_send_all(int fd, const void *p, size_t n)
{
	const char *b = p;

	while (n > 0) {
		ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		b += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Client bytes to the gateway. While the gateway takes no more (its
 * service is busy writing an answer), what it sends is read and passed
 * to the client: a send that only waited would wait on a service that
 * waits on us, both until the idle timeout (a pipelined client, a
 * WebSocket echo). */
static int
up_send(struct conn *c, const void *p, size_t n)
{
	const char *b = p;

	while (n > 0) {
		struct pollfd pf;
		ssize_t w = send(c->ufd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		int r;

		if (w > 0) {
			b += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno == EINTR)
			continue;
		if (w == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			return -1;
		pf = (struct pollfd){ .fd = c->ufd, .events = POLLOUT | (c->up_eof ? 0 : POLLIN) };
		r = poll(&pf, 1, c->e->cfg.idle_timeout * 1000);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;      /* nothing moved for the idle timeout */
		if (!c->up_eof && (pf.revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = recv(c->ufd, c->ubuf, UBUF_CAP, MSG_DONTWAIT);

			if (k < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (k <= 0)
				return -1;      /* the gateway is done: so is the client */
			c->last_io = now_ms();
			if (upstream_bytes(c, c->ubuf, (size_t)k) < 0)
				return -1;
		}
	}
	return 0;
}

/* a whole answer of the edge itself; the connection closes after it */
static void
reply(struct conn *c, unsigned status, const char *ctype, const char *body, bool retry)
{
	char head[512];
	int n;

	n = snprintf(head, sizeof(head), "HTTP/1.1 %u %s\r\nContent-Type: %s\r\n"
	    "Content-Length: %zu\r\nConnection: close\r\n%s%s\r\n", status, edge_reason(status), ctype,
	    strlen(body), retry ? "Retry-After: 1\r\n" : "",
	    status == 401 ? "WWW-Authenticate: Bearer\r\n" : "");
	if (n > 0 && (size_t)n < sizeof(head) && edge_send_all(c->cfd, head, (size_t)n) == 0)
		(void)edge_send_all(c->cfd, body, strlen(body));
}

static void
refuse(struct conn *c, enum edge_refusal why, unsigned status, const char *msg, bool retry)
{
	char body[256];

	atomic_fetch_add(&c->e->st.refused[why], 1);
	snprintf(body, sizeof(body), "%s\n", msg);
	reply(c, status, "text/plain; charset=utf-8", body, retry);
	if (c->e->cfg.verbose)
		log_info("%s: %u %s", c->peer, status, msg);
}

static enum edge_refusal
refusal_of(unsigned status)
{
	switch (status) {
	case 401: return REF_UNAUTHENTICATED;
	case 403: return REF_FORBIDDEN;
	case 404: return REF_NOT_FOUND;
	case 409: return REF_CONFLICT;
	case 421: return REF_OTHER_HOST;
	case 431: return REF_HEAD_TOO_LARGE;
	case 503: return REF_UNAVAILABLE;
	default:  return REF_BAD_GATEWAY;
	}
}

/* a send blocked for the idle timeout ends the connection */
static void
send_timeout(int fd, unsigned s)
{
	struct timeval tv = { .tv_sec = s };

	(void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

static void
consume(struct conn *c, size_t n)
{
	memmove(c->cbuf, c->cbuf + n, c->chave - n);
	c->chave -= n;
}

/* the value of field i, trimmed, as a NUL-terminated copy; false when
 * longer than cap - 1 */
static bool
field_copy(const struct reqhead *h, size_t i, char *out, size_t cap)
{
	if (h->f[i].value_len >= cap)
		return false;
	memcpy(out, h->f[i].value, h->f[i].value_len);
	out[h->f[i].value_len] = '\0';
	return true;
}

/* "Bearer sk_..." : the owner's API key, which the edge consumes */
static bool
is_api_key_bearer(const struct reqhead *h, size_t i)
{
	const struct reqhead_field *f = &h->f[i];

	return reqhead_is(h, i, "authorization") && f->value_len > 10 &&
	    strncasecmp(f->value, "bearer ", 7) == 0 && strncmp(f->value + 7, "sk_", 3) == 0;
}

/* the head toward the gateway: the request line and every field but the
 * edge's credentials */
static int
forward_head(struct conn *c, const char *buf, size_t len, const struct reqhead *h)
{
	char *out = malloc(len);
	size_t n = 0, i;
	int rc;

	if (out == NULL)
		return -1;
	memcpy(out, buf, h->line_len);
	n = h->line_len;
	for (i = 0; i < h->nf; i++) {
		if (is_api_key_bearer(h, i) || reqhead_is(h, i, "x-space-traffic-token"))
			continue;
		memcpy(out + n, buf + h->f[i].line_off, h->f[i].line_len);
		n += h->f[i].line_len;
	}
	memcpy(out + n, "\r\n", 2);
	n += 2;
	rc = up_send(c, out, n);
	sodium_memzero(out, len);
	free(out);
	return rc;
}

static void
after_body(struct conn *c)
{
	c->state = c->upgrade_pending ? S_UPGRADE_WAIT : S_HEAD;
	c->upgrade_pending = false;
	c->nsniff = 0;
}

static void
framing(struct conn *c, const struct reqhead *h)
{
	c->upgrade_pending = h->upgrade;
	if (h->chunked) {
		c->state = S_CHUNK;
		chunkscan_init(&c->ch);
	} else if (h->content_length > 0) {
		c->state = S_BODY_CL;
		c->body_left = h->content_length;
	} else
		after_body(c);
}

/* the credential of the first request: kind and the secret (buffer of
 * CRED_MAX); -1 when malformed */
static int
credential(const struct reqhead *h, enum edge_cred *kind, char *secret)
{
	size_t i;
	int auth = 0, tok = 0;

	*kind = CRED_NONE;
	secret[0] = '\0';
	for (i = 0; i < h->nf; i++) {
		if (reqhead_is(h, i, "authorization"))
			auth++;
		if (reqhead_is(h, i, "x-space-traffic-token"))
			tok++;
	}
	if (auth > 1 || tok > 1)
		return -1;
	for (i = 0; i < h->nf; i++) {
		if (is_api_key_bearer(h, i)) {
			struct reqhead_field f = h->f[i];
			if (f.value_len - 7 >= CRED_MAX)
				return -1;
			memcpy(secret, f.value + 7, f.value_len - 7);
			secret[f.value_len - 7] = '\0';
			*kind = CRED_KEY;
			return 0;
		}
	}
	for (i = 0; i < h->nf; i++) {
		if (reqhead_is(h, i, "x-space-traffic-token")) {
			if (!field_copy(h, i, secret, CRED_MAX))
				return -1;
			*kind = CRED_TOKEN;
			return 0;
		}
	}
	return 0;
}

/* the edge's own endpoints, on its bare domain */
static void
serve_self(struct conn *c, const struct reqhead *h)
{
	char *m;

	if (h->method_len == 3 && memcmp(h->method, "GET", 3) == 0 && h->target_len == 8 &&
	    memcmp(h->target, "/metrics", 8) == 0 && (m = edge_metrics(c->e)) != NULL) {
		reply(c, 200, "text/plain; version=0.0.4", m, false);
		free(m);
	} else if (h->method_len == 3 && memcmp(h->method, "GET", 3) == 0 && h->target_len == 8 &&
	    memcmp(h->target, "/healthz", 8) == 0)
		reply(c, 200, "text/plain", "ok\n", false);
	else
		refuse(c, REF_NOT_FOUND, 404, "no such endpoint of the edge; sandbox ports are "
		    "{port}-{sandbox}.{domain}", false);
}

/* the Host value ends with the domain: malformed (400); otherwise it
 * names another site (421) */
static bool
ours(const struct conn *c, const char *v, size_t n)
{
	size_t dl = strlen(c->e->cfg.domain);

	return n >= dl && strncasecmp(v + n - dl, c->e->cfg.domain, dl) == 0;
}

/* an address literal ("10.0.0.5:8080", "[::1]:80"): never a sandbox's
 * host; a probe that names the edge by its address (a load balancer's or
 * an orchestrator's health check) reaches the edge's own endpoints */
static bool
ip_literal(const char *v, size_t n)
{
	char a[64];
	const char *end = v + n, *colon;
	unsigned char buf[16];

	if (n == 0 || n >= sizeof(a))
		return false;
	if (v[0] == '[') {
		const char *rb = memchr(v, ']', n);
		if (rb == NULL || (rb + 1 != end && rb[1] != ':'))
			return false;
		memcpy(a, v + 1, (size_t)(rb - v - 1));
		a[rb - v - 1] = '\0';
		return inet_pton(AF_INET6, a, buf) == 1;
	}
	colon = memchr(v, ':', n);
	memcpy(a, v, (size_t)((colon ? colon : end) - v));
	a[(colon ? colon : end) - v] = '\0';
	return inet_pton(AF_INET, a, buf) == 1;
}

/* 1 routed, 0 answered (close) */
static int
first_request(struct conn *c, size_t hlen)
{
	struct reqhead *h = malloc(sizeof(*h));
	struct edge_upstream *up = malloc(sizeof(*up));
	char sbx[SPACE_ID_MAX + 1], secret[CRED_MAX];
	const struct reqhead_field *hf;
	enum edge_cred kind;
	const char *why;
	uint16_t port;
	int rc, ret = 0;

	if (h == NULL || up == NULL) {
		refuse(c, REF_UNAVAILABLE, 503, "out of memory", true);
		goto out;
	}
	atomic_fetch_add(&c->e->st.requests, 1);
	if (reqhead_parse(c->cbuf, hlen, h, &why) < 0) {
		refuse(c, REF_BAD_HEAD, 400, why, false);
		goto out;
	}
	hf = &h->f[h->host];
	rc = edgehost_parse(hf->value, hf->value_len, c->e->cfg.domain, &port, sbx);
	if (rc < 0 && ip_literal(hf->value, hf->value_len))
		rc = 0;
	if (rc < 0) {
		if (ours(c, hf->value, hf->value_len))
			refuse(c, REF_BAD_HOST, 400, "the host must be {port}-{sandbox}.{domain}", false);
		else
			refuse(c, REF_MISDIRECTED, 421, "this edge serves another domain", false);
		goto out;
	}
	if (rc == 0) {
		int fd = edge_console(c->e, c->cfd, c->peer, c->cbuf, hlen, h);
		if (fd == -2)
			serve_self(c, h);
		if (fd < 0)
			goto out;
		c->ufd = fd;
		c->one_request = true;
		send_timeout(c->ufd, c->e->cfg.idle_timeout);
		framing(c, h);
		consume(c, hlen);
		ret = 1;
		goto out;
	}
	if (credential(h, &kind, secret) < 0) {
		refuse(c, REF_BAD_HEAD, 400, "malformed credential fields", false);
		goto out;
	}
	memcpy(c->host, hf->value, hf->value_len);
	c->host_len = hf->value_len;
	snprintf(c->sbx, sizeof(c->sbx), "%s", sbx);
	c->port = port;
	edge_route(c->e, sbx, port, kind, kind == CRED_NONE ? NULL : secret, up);
	if (up->fd < 0) {
		refuse(c, refusal_of(up->status), up->status, up->message, up->retry);
		goto out;
	}
	c->ufd = up->fd;
	(void)fcntl(c->ufd, F_SETFL, fcntl(c->ufd, F_GETFL) & ~O_NONBLOCK);
	send_timeout(c->ufd, c->e->cfg.idle_timeout);
	if (c->e->cfg.verbose)
		log_info("%s: %.*s %.*s -> %s port %u", c->peer, (int)h->method_len, h->method,
		    (int)(h->target_len > 80 ? 80 : h->target_len), h->target, sbx, port);
	if (forward_head(c, c->cbuf, hlen, h) < 0 ||
	    (up->nearly && edge_send_all(c->cfd, up->early, up->nearly) < 0))
		goto out;
	framing(c, h);
	consume(c, hlen);
	ret = 1;
out:
	sodium_memzero(secret, sizeof(secret));
	free(h);
	free(up);
	return ret;
}

/* a refusal said once the answers before it are out: the gateway is
 * half-closed and read to its end (S_REFUSE); up is the connection's */
static void
defer_refusal(struct conn *c, struct edge_upstream *up)
{
	c->refusal = up;
	c->state = S_REFUSE;
	c->refuse_dl = now_ms() + c->e->cfg.head_timeout * 1000ull;
	(void)shutdown(c->ufd, SHUT_WR);
}

/* a later request refused by the edge itself, said once the answers
 * before it are out (never in the middle of one): 0, -1 close now */
static int
defer_status(struct conn *c, unsigned status, const char *msg)
{
	struct edge_upstream *up = calloc(1, sizeof(*up));

	if (up == NULL)
		return -1;
	up->status = status;
	snprintf(up->message, sizeof(up->message), "%s", msg);
	defer_refusal(c, up);
	return 0;
}

/* a later request's own credential, checked (route.c edge_authorize):
 * 0 admitted; 1 refused, its answer waiting for the answers before it
 * (S_REFUSE: the gateway is half-closed, read to its end, then the
 * refusal is said and the connection ends); -1 close now */
static int
authorize(struct conn *c, const struct reqhead *h)
{
	char secret[CRED_MAX];
	enum edge_cred kind;
	struct edge_upstream *up;
	int rc = 0;

	if (credential(h, &kind, secret) < 0) {
		sodium_memzero(secret, sizeof(secret));
		if ((up = calloc(1, sizeof(*up))) == NULL)
			return -1;
		up->status = 400;
		snprintf(up->message, sizeof(up->message), "malformed credential fields");
	} else {
		if ((up = calloc(1, sizeof(*up))) == NULL) {
			sodium_memzero(secret, sizeof(secret));
			return -1;
		}
		rc = edge_authorize(c->e, c->sbx, c->port, kind, kind == CRED_NONE ? NULL : secret, up);
		sodium_memzero(secret, sizeof(secret));
		if (rc == 0) {
			free(up);
			return 0;
		}
	}
	defer_refusal(c, up);
	return 1;
}

/* the refusal of S_REFUSE, once the answers before it are out */
static void
say_refusal(struct conn *c)
{
	struct edge_upstream *up = c->refusal;

	refuse(c, up->status == 400 ? REF_BAD_HEAD : refusal_of(up->status), up->status,
	    up->message, up->retry);
}

/* the client's bytes, as far as they can go: 0 go on, -1 close */
static int
client_bytes(struct conn *c)
{
	for (;;) {
		switch (c->state) {
		case S_HEAD: {
			struct reqhead *h;
			const char *why;
			size_t end;
			int ok = 1;

			if (c->chave == 0)
				return 0;
			if (c->one_request)
				return -1;
			if (c->head_start == 0)
				c->head_start = now_ms();
			end = reqhead_end(c->cbuf, c->chave < REQHEAD_MAX ? c->chave : REQHEAD_MAX);
			if (end == 0) {
				/* the edge's own refusals of a later request wait
				 * for the answers before it: said at once, they
				 * would land inside one still streaming */
				if (c->chave >= REQHEAD_MAX)
					return defer_status(c, 431, "request head too large");
				return 0;
			}
			if ((h = malloc(sizeof(*h))) == NULL)
				return -1;
			atomic_fetch_add(&c->e->st.requests, 1);
			if (reqhead_parse(c->cbuf, end, h, &why) != 0) {
				free(h);
				return defer_status(c, 400, why);
			}
			if (h->f[h->host].value_len != c->host_len ||
			    strncasecmp(h->f[h->host].value, c->host, c->host_len) != 0) {
				/* never another sandbox on this upstream */
				free(h);
				return defer_status(c, 421, "one connection serves one host");
			}
			if (h->upgrade) {
				/* a protocol switch opens its own connection: as
				 * a later request, the gateway's next bytes could be
				 * an earlier answer still on its way, and one whose
				 * body reads "HTTP/1.1 101" would turn the rest of
				 * the connection raw, unchecked */
				free(h);
				return defer_status(c, 400,
				    "a protocol upgrade must be the first request of its connection");
			} else {
				int a = authorize(c, h);
				if (a > 0) {
					/* refused: nothing of it goes on */
					free(h);
					return 0;
				}
				if (a < 0 || forward_head(c, c->cbuf, end, h) < 0)
					ok = false;
			}
			if (ok)
				framing(c, h);
			free(h);
			if (!ok)
				return -1;
			c->head_start = 0;
			consume(c, end);
			break;
		}
		case S_BODY_CL: {
			size_t k = (int64_t)c->chave < c->body_left ? c->chave : (size_t)c->body_left;
			if (k == 0)
				return 0;
			if (up_send(c, c->cbuf, k) < 0)
				return -1;
			consume(c, k);
			c->body_left -= (int64_t)k;
			if (c->body_left == 0)
				after_body(c);
			break;
		}
		case S_CHUNK: {
			bool done;
			ssize_t k;

			if (c->chave == 0)
				return 0;
			if ((k = chunkscan(&c->ch, c->cbuf, c->chave, &done)) < 0) {
				/* part of the body may have gone: no answer can
				 * be put in front of the sandbox's */
				log_warnx("%s: malformed chunked body", c->peer);
				atomic_fetch_add(&c->e->st.refused[REF_BAD_HEAD], 1);
				return -1;
			}
			if (k > 0 && up_send(c, c->cbuf, (size_t)k) < 0)
				return -1;
			consume(c, (size_t)k);
			if (done)
				after_body(c);
			break;
		}
		case S_RAW:
			if (c->chave == 0)
				return 0;
			if (up_send(c, c->cbuf, c->chave) < 0)
				return -1;
			c->chave = 0;
			return 0;
		case S_UPGRADE_WAIT:
		case S_DRAIN:
		case S_REFUSE:
			return 0;
		}
	}
}

/* the gateway's bytes to the client; while an upgrade waits, its answer's
 * status decides: 101 makes both directions raw, anything else ends the
 * connection after that answer */
static int
upstream_bytes(struct conn *c, const char *p, size_t n)
{
	if (c->state == S_UPGRADE_WAIT) {
		size_t k = sizeof(c->sniff) - c->nsniff < n ? sizeof(c->sniff) - c->nsniff : n;

		memcpy(c->sniff + c->nsniff, p, k);
		c->nsniff += k;
		if (c->nsniff == sizeof(c->sniff)) {
			if ((memcmp(c->sniff, "HTTP/1.1 101", 12) == 0 ||
			    memcmp(c->sniff, "HTTP/1.0 101", 12) == 0)) {
				c->state = S_RAW;
			} else {
				c->state = S_DRAIN;
				(void)shutdown(c->ufd, SHUT_WR);
			}
		}
	}
	return edge_send_all(c->cfd, p, n);
}

static void
pump(struct conn *c, char *ubuf)
{
	for (;;) {
		struct pollfd p[2];
		uint64_t now = now_ms(), dl;
		bool want_client = !c->client_eof && c->state != S_UPGRADE_WAIT &&
		    c->state != S_DRAIN && c->state != S_REFUSE && c->chave < CBUF_CAP;
		int t, r;

		if (c->client_eof && c->up_eof)
			return;
		dl = c->last_io + c->e->cfg.idle_timeout * 1000ull;
		if (c->state == S_REFUSE && c->refuse_dl < dl)
			dl = c->refuse_dl;      /* then closed without a word: an
		                                   answer may be half out */
		if (c->state == S_HEAD && c->head_start &&
		    c->head_start + c->e->cfg.head_timeout * 1000ull < dl)
			dl = c->head_start + c->e->cfg.head_timeout * 1000ull;
		if (now >= dl) {
			if (c->state == S_HEAD && c->head_start)
				atomic_fetch_add(&c->e->st.refused[REF_HEAD_TIMEOUT], 1);
			return;
		}
		t = dl - now > 60000 ? 60000 : (int)(dl - now);
		p[0].fd = want_client ? c->cfd : -1;
		p[0].events = POLLIN;
		p[1].fd = c->up_eof ? -1 : c->ufd;
		p[1].events = POLLIN;
		p[0].revents = p[1].revents = 0;
		r = poll(p, 2, t);
		if (r < 0 && errno != EINTR)
			return;
		if (r <= 0)
			continue;
		c->last_io = now_ms();
		if (p[1].revents) {
			ssize_t k = recv(c->ufd, ubuf, UBUF_CAP, 0);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0) {
				/* the gateway is done: so is the client */
				if (k == 0 && c->state == S_REFUSE)
					say_refusal(c);
				return;
			}
			if (upstream_bytes(c, ubuf, (size_t)k) < 0)
				return;
			if (c->state == S_RAW && client_bytes(c) < 0)
				return;
		}
		if (p[0].revents) {
			ssize_t k = recv(c->cfd, c->cbuf + c->chave, CBUF_CAP - c->chave, 0);
			if (k < 0 && errno == EINTR)
				continue;
			if (k < 0)
				return;
			if (k == 0) {
				c->client_eof = true;
				(void)shutdown(c->ufd, SHUT_WR);
				continue;
			}
			c->chave += (size_t)k;
			if (client_bytes(c) < 0)
				return;
		}
	}
}

/* the first head: 0 and *len, or -1 (answered or gone) */
static int
first_head(struct conn *c, size_t *len)
{
	uint64_t dl = now_ms() + c->e->cfg.head_timeout * 1000ull;

	for (;;) {
		struct pollfd p = { .fd = c->cfd, .events = POLLIN };
		uint64_t now = now_ms();
		size_t end;
		ssize_t k;

		end = reqhead_end(c->cbuf, c->chave < REQHEAD_MAX ? c->chave : REQHEAD_MAX);
		if (end) {
			*len = end;
			return 0;
		}
		if (c->chave >= REQHEAD_MAX) {
			refuse(c, REF_HEAD_TOO_LARGE, 431, "request head too large", false);
			return -1;
		}
		if (now >= dl || poll(&p, 1, (int)(dl - now)) == 0) {
			if (c->chave > 0)
				refuse(c, REF_HEAD_TIMEOUT, 408, "request head not complete in time", false);
			return -1;
		}
		k = recv(c->cfd, c->cbuf + c->chave, CBUF_CAP - c->chave, 0);
		if (k < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (k <= 0)
			return -1;
		c->chave += (size_t)k;
	}
}

void *
edge_conn_main(void *arg)
{
	struct edge_conn_arg *a = arg;
	struct conn c;
	char *ubuf = NULL;
	size_t hlen;

	memset(&c, 0, sizeof(c));
	c.e = a->e;
	c.cfd = a->fd;
	c.ufd = -1;
	c.peer = a->peer;
	send_timeout(c.cfd, c.e->cfg.idle_timeout);
	if ((c.cbuf = malloc(CBUF_CAP)) == NULL || (ubuf = malloc(UBUF_CAP)) == NULL)
		goto out;
	c.ubuf = ubuf;
	if (first_head(&c, &hlen) < 0 || first_request(&c, hlen) <= 0)
		goto out;
	c.last_io = now_ms();
	if (client_bytes(&c) == 0)
		pump(&c, ubuf);
out:
	if (c.ufd >= 0)
		close(c.ufd);
	close(c.cfd);
	if (c.cbuf) {
		sodium_memzero(c.cbuf, CBUF_CAP);
		free(c.cbuf);
	}
	free(ubuf);
	free(c.refusal);
	atomic_fetch_sub(&a->e->st.conns_open, 1);
	free(a);
	return NULL;
}
