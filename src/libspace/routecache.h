/* The client route cache and its recovery rules (DESIGN section 8;
 * docs/recovery.md). One entry per sandbox: where to send its data-plane
 * operations, the execution they are bound to, and the capability that
 * admits them. Independent of HTTP: route_call() drives any transport
 * through struct route_ops, so the rules are unit-tested with a fake one. */
#ifndef SPACE_ROUTECACHE_H
#define SPACE_ROUTECACHE_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "claims.h"
#include "limits.h"

#define ROUTE_CACHE_TTL         300     /* seconds a resolution is trusted */

/* set by route_cache_get(): the capability has expired (now > cap_exp);
 * the caller renews it before use */
#define ROUTE_CAP_EXPIRED       0x1u

struct route_entry {
	struct route_identity route;            /* route.sandbox is the key */
	char     endpoint[SPACE_ENDPOINT_MAX + 1];      /* node-api base URL, or tcp://HOST:PORT of a gateway */
	char     capability[SPACE_TOKEN_MAX + 1];       /* secret: wiped, never logged */
	uint32_t access;                        /* ACC_* bits the capability grants */
	int64_t  cap_exp;                       /* the capability's exp, unix seconds */
	int64_t  cache_exp;                     /* set by route_cache_put() only */
	unsigned flags;                         /* ROUTE_CAP_EXPIRED, from get */
};

struct route_cache;

/* Opens the cache persisted at path, or at the default location when path
 * is NULL: $XDG_STATE_HOME/space/routes.json, else
 * ~/.local/state/space/routes.json. A missing file is an empty cache; a
 * corrupt one, or one others could have written (not ours, or group/world
 * writable), is ignored with a warning, never fatal. NULL with errno set
 * only for ENOMEM or when no location can be found. */
struct route_cache *route_cache_open(const char *path);
/* an in-memory cache that is never saved (tests, fuzzing) */
struct route_cache *route_cache_new(void);
void route_cache_free(struct route_cache *rc);      /* wipes capabilities */
void route_cache_set_ttl(struct route_cache *rc, int64_t seconds);
const char *route_cache_path(const struct route_cache *rc);     /* NULL in memory */

/* 0 and *out on a hit; -ENOENT when there is no entry or now >= cache_exp.
 * out->flags has ROUTE_CAP_EXPIRED when now > cap_exp. */
int route_cache_get(struct route_cache *rc, const char *sandbox, int64_t now,
    struct route_entry *out);
/* A fresh resolution: stores e with cache_exp = now + TTL, replacing any
 * entry of e->route.sandbox. -EINVAL when e is not a valid entry. */
int route_cache_put(struct route_cache *rc, const struct route_entry *e, int64_t now);
/* Route repair, compare-and-swap: replaces the entry of sandbox with fresh
 * only if it still holds exactly the rejected route, so a late rejection
 * of an older route never evicts a newer entry. Keeps the entry's
 * cache_exp: repair is not a renewal of caller authorization.
 * Returns 1 replaced, 0 not (absent or holding another route), -EINVAL. */
int route_cache_replace_if(struct route_cache *rc, const char *sandbox,
    const struct route_identity *rejected, const struct route_entry *fresh);
/* After EXPIRED: takes fresh's capability, access and cap_exp if the entry
 * still holds fresh's route; keeps cache_exp. 1 renewed, 0 not, -EINVAL. */
int route_cache_renew_capability(struct route_cache *rc, const struct route_entry *fresh);
/* Drops the entry of sandbox (only if it holds *route, when route is not
 * NULL). 1 dropped, 0 not. */
int route_cache_drop(struct route_cache *rc, const char *sandbox,
    const struct route_identity *route);
/* Persists the changes made through this handle: under an exclusive flock
 * of "<path>.lock", re-reads the file, merges (other processes' entries
 * kept; a changed entry of ours never replaces a newer route written by
 * another process), prunes expired entries and writes atomically (tmp,
 * fsync, rename; 0600; directory created 0700). 0 or a negative errno. */
int route_cache_save(struct route_cache *rc);
size_t route_cache_count(const struct route_cache *rc);

/* The file format, exposed for the fuzzer and tests: parse replaces the
 * content of rc (-EINVAL with *why on any defect, rc then unchanged);
 * serialize writes every entry (*out malloc'd, wipe it after use). */
int route_cache_parse(struct route_cache *rc, const char *buf, size_t len, const char **why);
int route_cache_serialize(const struct route_cache *rc, char **out, size_t *len);
/* entry i in key order, for comparisons; NULL past the end */
const struct route_entry *route_cache_entry(const struct route_cache *rc, size_t i);

/* ---- recovery driver ---- */

enum route_outcome {
	ROUTE_OK = 0,                   /* an answer that is not an identity refusal */
	ROUTE_REFRESH,                  /* 409 refresh_route / close 4001 */
	ROUTE_DENY,                     /* 403 deny / close 4003: final */
	ROUTE_EXPIRED,                  /* 401 capability_expired / close 4401 */
	ROUTE_TRANSPORT_BEFORE_SEND,    /* the request surely never left */
	ROUTE_TRANSPORT_AFTER_SEND,     /* it may have been received */
};

struct route_ops {
	/* Asks the control plane for the current route of sandbox, sending
	 * the rejected route when there is one. 0 with *out filled (its
	 * cache_exp is ignored), or a negative errno. */
	int (*resolve)(void *ctx, const char *sandbox,
	    const struct route_identity *rejected, struct route_entry *out);
	/* One attempt of the operation at e; the outcome class decides. */
	enum route_outcome (*attempt)(void *ctx, const struct route_entry *e);
	/* optional clock; NULL: the wall clock */
	int64_t (*now)(void *ctx);
	/* reads, stat, list, watch-open: safe to send twice */
	bool idempotent;
	/* ACC_* bits the operation needs; a cached capability without them
	 * is renewed before the first attempt */
	uint32_t access;
};

struct route_call_result {
	enum route_outcome outcome;     /* of the last attempt */
	int  attempts;
	int  resolves;
	bool from_cache;                /* the first attempt used a cached entry */
	bool repaired;                  /* a REFRESH_ROUTE was repaired */
	bool renewed;                   /* the capability was renewed */
	bool transport_retried;
	struct route_identity route;    /* of the last attempt */
};

/* Runs one operation on sandbox with the recovery rules: REFRESH_ROUTE ->
 * resolve with the rejected route, compare-and-swap, exactly one rebuilt
 * attempt; EXPIRED -> renew once; DENY -> final; a transport failure is
 * retried once (after a fresh resolution) if the request was never sent or
 * the operation is idempotent. The cache is changed in memory; the caller
 * saves it. Returns 0 when the last attempt was ROUTE_OK; otherwise
 * -EACCES (DENY), -ESTALE (REFRESH_ROUTE again), -EKEYEXPIRED (EXPIRED
 * again), -ECONNREFUSED / -ECONNRESET (transport, before / after send),
 * -EPROTO (the control plane answered for another sandbox or with an
 * invalid entry), or resolve's error. */
int route_call(struct route_cache *rc, const char *sandbox, const struct route_ops *ops,
    void *ctx, struct route_call_result *res);
#endif
