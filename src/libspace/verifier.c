/* Step 1 of the comparator with a cache of verified, parsed claims.
 *
 * The cache remembers one fact: "these exact token bytes carry a valid
 * signature by a key of the installed bundle, and decode to these claims".
 * It never remembers an admission. Key: BLAKE2b-256 of the token (a
 * collision would need a second preimage of a 256-bit hash). An entry lives
 * until exp + skew, after which admit() would refuse the token anyway; the
 * cache is bounded (LRU) so a flood of distinct tokens costs memory only up
 * to the bound; and it is flushed whole whenever the bundle changes, so a
 * token signed by a key the new bundle dropped is refused at once.
 *
 * Locking: one mutex around the table and the bundle, never held during
 * the Ed25519 verification or the claims decode. A verification that ran
 * concurrently with a bundle change must not insert its (now stale) result:
 * each bundle install bumps an epoch, and an insert is dropped when the
 * epoch it started under is gone. */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "admit.h"
#include "claims.h"
#include "keys.h"
#include "limits.h"
#include "paseto.h"
#include "util.h"
#include "verifier.h"

#define VC_KEY_LEN      32
#define VC_MAX_ENTRIES  (1u << 20)

struct vc_entry {
	uint8_t key[VC_KEY_LEN];
	struct capability cap;
	int64_t until;                  /* valid while now <= until */
	struct vc_entry *prev, *next;   /* LRU list; head is most recent */
	struct vc_entry *hnext;         /* hash chain */
};

struct verifier {
	pthread_mutex_t mu;
	struct key_bundle bundle;
	bool have_bundle;
	uint64_t epoch;

	size_t cap;
	struct vc_entry *slots;         /* cap entries, allocated once */
	struct vc_entry *free;          /* unused slots (chained by hnext) */
	struct vc_entry **buckets;
	size_t nbuckets;                /* power of two */
	struct vc_entry lru;            /* sentinel */
	size_t entries;
	uint64_t hits, misses, evictions;
};

static struct admit_result
deny(enum admit_reason r)
{
	struct admit_result res = { ADMIT_DENY, r };
	return res;
}

/* ---- the table (all called with v->mu held) ---- */

static struct vc_entry **
bucket_of(struct verifier *v, const uint8_t key[VC_KEY_LEN])
{
	uint64_t h;

	/* the key is a cryptographic hash: its bytes are uniform and a
	 * sender cannot aim tokens at one bucket */
	memcpy(&h, key, sizeof(h));
	return &v->buckets[h & (v->nbuckets - 1)];
}

static void
lru_unlink(struct vc_entry *e)
{
	e->prev->next = e->next;
	e->next->prev = e->prev;
}

static void
lru_push_front(struct verifier *v, struct vc_entry *e)
{
	e->next = v->lru.next;
	e->prev = &v->lru;
	v->lru.next->prev = e;
	v->lru.next = e;
}

static struct vc_entry *
table_find(struct verifier *v, const uint8_t key[VC_KEY_LEN])
{
	struct vc_entry *e;

	for (e = *bucket_of(v, key); e; e = e->hnext)
		if (memcmp(e->key, key, VC_KEY_LEN) == 0)
			return e;
	return NULL;
}

static void
table_remove(struct verifier *v, struct vc_entry *e)
{
	struct vc_entry **pp;

	for (pp = bucket_of(v, e->key); *pp; pp = &(*pp)->hnext)
		if (*pp == e) {
			*pp = e->hnext;
			break;
		}
	lru_unlink(e);
	sodium_memzero(e, sizeof(*e));
	e->hnext = v->free;
	v->free = e;
	v->entries--;
}

/* O(entries), not O(capacity): a bundle re-fetch must not stall the
 * request path behind a wipe of the whole table */
static void
table_flush(struct verifier *v)
{
	while (v->lru.next != &v->lru)
		table_remove(v, v->lru.next);
}

/* every slot on the free list, the table empty; once, at creation */
static void
table_init(struct verifier *v)
{
	size_t i;

	v->lru.next = v->lru.prev = &v->lru;
	v->free = NULL;
	for (i = v->cap; i > 0; i--) {
		v->slots[i - 1].hnext = v->free;
		v->free = &v->slots[i - 1];
	}
	v->entries = 0;
}

static void
table_insert(struct verifier *v, const uint8_t key[VC_KEY_LEN],
    const struct capability *cap, int64_t until)
{
	struct vc_entry *e, **b;

	if ((e = table_find(v, key)) != NULL) {
		/* another thread verified the same token meanwhile */
		lru_unlink(e);
		lru_push_front(v, e);
		return;
	}
	if (v->free == NULL) {
		/* full: drop the least recently used entry */
		table_remove(v, v->lru.prev);
		v->evictions++;
	}
	e = v->free;
	v->free = e->hnext;
	memcpy(e->key, key, VC_KEY_LEN);
	e->cap = *cap;
	e->until = until;
	b = bucket_of(v, key);
	e->hnext = *b;
	*b = e;
	lru_push_front(v, e);
	v->entries++;
}

/* ---- life cycle ---- */

struct verifier *
verifier_new(size_t cache_entries)
{
	struct verifier *v;

	if (cache_entries == 0)
		cache_entries = SPACE_VCACHE_ENTRIES;
	if (cache_entries > VC_MAX_ENTRIES) {
		errno = EINVAL;
		return NULL;
	}
	if (sodium_init() < 0) {
		errno = EIO;
		return NULL;
	}
	if ((v = calloc(1, sizeof(*v))) == NULL)
		return NULL;
	v->cap = cache_entries;
	v->nbuckets = 16;
	while (v->nbuckets < 2 * cache_entries)
		v->nbuckets <<= 1;
	v->slots = calloc(v->cap, sizeof(*v->slots));
	v->buckets = calloc(v->nbuckets, sizeof(*v->buckets));
	if (v->slots == NULL || v->buckets == NULL ||
	    pthread_mutex_init(&v->mu, NULL) != 0) {
		free(v->slots);
		free(v->buckets);
		free(v);
		errno = ENOMEM;
		return NULL;
	}
	table_init(v);
	return v;
}

void
verifier_free(struct verifier *v)
{
	if (v == NULL)
		return;
	pthread_mutex_destroy(&v->mu);
	free(v->slots);
	free(v->buckets);
	free(v);
}

int
verifier_set_bundle(struct verifier *v, const struct key_bundle *b)
{
	int r = 0;

	if (v == NULL || b == NULL || b->n > SPACE_BUNDLE_KEYS_MAX)
		return -EINVAL;
	pthread_mutex_lock(&v->mu);
	/* Bundles only move forward: an attacker who can replay an old,
	 * validly signed bundle (one that still lists a retired or
	 * compromised key) must not be able to reinstall it. Re-installing
	 * the same version is allowed (a re-fetch). */
	if (v->have_bundle && b->version < v->bundle.version) {
		r = -ESTALE;
		goto out;
	}
	v->bundle = *b;
	v->have_bundle = true;
	/* every cached fact was established under the old key set */
	v->epoch++;
	table_flush(v);
out:
	pthread_mutex_unlock(&v->mu);
	return r;
}

uint64_t
verifier_bundle_version(struct verifier *v)
{
	uint64_t ver;

	pthread_mutex_lock(&v->mu);
	ver = v->have_bundle ? v->bundle.version : 0;
	pthread_mutex_unlock(&v->mu);
	return ver;
}

void
verifier_stats(struct verifier *v, struct vcache_stats *st)
{
	pthread_mutex_lock(&v->mu);
	st->hits = v->hits;
	st->misses = v->misses;
	st->evictions = v->evictions;
	st->entries = v->entries;
	pthread_mutex_unlock(&v->mu);
}

/* ---- step 1 ---- */

/* footer: exactly {"kid":"k4.pid.<44>"}, nothing else. It is read before
 * the signature is checked (to pick the key), so it is parsed as hostile
 * input; the signature then covers it. */
static int
footer_kid(const char *footer, char kid[PASERK_K4_PID_LEN + 1])
{
	json_t *o, *k;
	const char *s;
	int r = -EINVAL;

	o = json_loads(footer, JSON_REJECT_DUPLICATES, NULL);
	if (o == NULL)
		return -EINVAL;
	if (!json_is_object(o) || json_object_size(o) != 1)
		goto out;
	k = json_object_get(o, "kid");
	if (!json_is_string(k))
		goto out;
	s = json_string_value(k);
	if (json_string_length(k) != PASERK_K4_PID_LEN || strncmp(s, "k4.pid.", 7) != 0)
		goto out;
	memcpy(kid, s, PASERK_K4_PID_LEN + 1);
	r = 0;
out:
	json_decref(o);
	return r;
}

int
capability_token_kid(const char *token, size_t len, char kid[PASERK_K4_PID_LEN + 1],
    char footer[SPACE_FOOTER_MAX + 1])
{
	int r;

	if (token == NULL || len == 0 || len > SPACE_TOKEN_MAX)
		return -EINVAL;
	if ((r = paseto_v4_peek(token, len, SPACE_TOKEN_MAX, footer, NULL)) < 0)
		return r;
	/* a capability always names its key */
	if (footer[0] == '\0' || footer_kid(footer, kid) < 0)
		return -EINVAL;
	return 0;
}

struct admit_result
verifier_check(struct verifier *v, const char *token, size_t len,
    enum receiver_kind kind, int64_t now, struct capability *cap)
{
	uint8_t key[VC_KEY_LEN], pk[32];
	char kid[PASERK_K4_PID_LEN + 1];
	char footer[SPACE_FOOTER_MAX + 1], *footer2 = NULL;
	uint8_t *msg = NULL;
	size_t mlen = 0;
	const struct bundle_key *bk;
	struct vc_entry *e;
	struct admit_result res;
	const char *why = NULL;
	uint64_t epoch = 0;
	int64_t key_until = 0, until;
	bool hit = false;
	int r;

	memset(cap, 0, sizeof(*cap));
	/* bounded before anything touches the bytes, hashing included */
	if (v == NULL || token == NULL || len == 0 || len > SPACE_TOKEN_MAX)
		return deny(R_MALFORMED);

	crypto_generichash(key, sizeof(key), (const unsigned char *)token, len, NULL, 0);

	pthread_mutex_lock(&v->mu);
	if ((e = table_find(v, key)) != NULL) {
		if (now <= e->until) {
			*cap = e->cap;
			lru_unlink(e);
			lru_push_front(v, e);
			v->hits++;
			hit = true;
		} else
			/* past exp + skew: no use keeping it */
			table_remove(v, e);
	}
	if (!hit)
		v->misses++;
	pthread_mutex_unlock(&v->mu);
	if (hit)
		goto profile;

	if (capability_token_kid(token, len, kid, footer) < 0) {
		res = deny(R_MALFORMED);
		goto out;
	}
	pthread_mutex_lock(&v->mu);
	bk = v->have_bundle ? bundle_find(&v->bundle, kid, now) : NULL;
	if (bk != NULL) {
		memcpy(pk, bk->pk, sizeof(pk));
		key_until = bk->not_after;
	}
	epoch = v->epoch;
	pthread_mutex_unlock(&v->mu);
	/* unknown, not yet valid (not_before) or retired (not_after) key */
	if (bk == NULL) {
		res = deny(R_UNKNOWN_KID);
		goto out;
	}

	r = paseto_v4_verify(pk, token, len, SPACE_TOKEN_MAX, CAPABILITY_IMPLICIT,
	    &msg, &mlen, &footer2);
	if (r == -EBADMSG) {
		res = deny(R_BAD_SIGNATURE);
		goto out;
	}
	if (r < 0) {
		res = deny(R_MALFORMED);
		goto out;
	}
	/* the signed footer is the one we chose the key by */
	if (footer2 == NULL || strcmp(footer, footer2) != 0) {
		res = deny(R_MALFORMED);
		goto out;
	}
	if (mlen > SPACE_CLAIMS_MAX ||
	    claims_decode(msg, mlen, cap, &why) < 0) {
		memset(cap, 0, sizeof(*cap));
		res = deny(R_BAD_CLAIMS);
		goto out;
	}

	/* Cache the authentic claims whatever the asking kind: audience,
	 * purpose and profile are re-checked below on every call, hit or
	 * miss. A token already past exp + skew is not worth an entry. */
	until = cap->exp + SPACE_CLOCK_SKEW;
	/* nor may an entry outlive its key's window: a fresh verification
	 * after not_after would refuse the token, so a cached one must too */
	if (key_until != 0 && key_until < until)
		until = key_until;
	if (now <= until) {
		pthread_mutex_lock(&v->mu);
		if (epoch == v->epoch)
			table_insert(v, key, cap, until);
		pthread_mutex_unlock(&v->mu);
	}

profile:
	res = admit_profile(cap, kind);
out:
	if (res.outcome != ADMIT_ALLOW)
		memset(cap, 0, sizeof(*cap));
	free(footer2);
	free(msg);
	return res;
}

struct admit_result
admit_token(struct verifier *v, const char *token, size_t len,
    const struct runtime_record *rec, const struct admit_request *req,
    struct capability *cap_out)
{
	struct capability cap;
	struct admit_result r;

	memset(&cap, 0, sizeof(cap));
	if (cap_out != NULL)
		memset(cap_out, 0, sizeof(*cap_out));
	if (v == NULL || req == NULL)
		return deny(R_MALFORMED);
	/* step 1, possibly answered from the cache ... */
	r = verifier_check(v, token, len, req->kind, req->now, &cap);
	if (r.outcome != ADMIT_ALLOW)
		return r;
	/* ... and steps 2-8 on every call, cached or not: the cache remembers
	 * that a token is authentic, never that it was admitted. The record
	 * may have changed since the last request with this token. */
	r = admit(&cap, rec, req);
	if (cap_out != NULL)
		*cap_out = cap;
	return r;
}
