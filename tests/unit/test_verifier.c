/* The verification cache: it may skip the signature check, never the
 * comparison. Each test tries to make a cached "yes" outlive what it was
 * based on: the record, the clock, the bound, the key bundle. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "captest.h"
#include "keys.h"
#include "verifier.h"
#include "tap.h"

static struct signing_key K1, K2;

#define expect(res, o, rsn, ...) do { struct admit_result _r = (res); \
	if (!ok(_r.outcome == (o) && _r.reason == (rsn), __VA_ARGS__)) \
		diag("got %s/%s, want %s/%s", admit_outcome_str(_r.outcome), \
		    admit_reason_str(_r.reason), admit_outcome_str(o), admit_reason_str(rsn)); \
	} while (0)

static struct verifier *
mkverifier(size_t cap, uint64_t version, const struct signing_key *a, const struct signing_key *b)
{
	struct verifier *v = verifier_new(cap);
	struct key_bundle kb = { 0 };

	kb.version = version;
	if (a)
		ct_bundle_add(&kb, a, T0 - 86400, 0);
	if (b)
		ct_bundle_add(&kb, b, T0 - 86400, 0);
	if (v == NULL || verifier_set_bundle(v, &kb) != 0)
		ok(0, "verifier setup");
	return v;
}

static void
test_hits(void)
{
	struct verifier *v = mkverifier(16, 1, &K1, NULL);
	struct capability c, out;
	struct vcache_stats st;
	char *tok, *bad;

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	tok = ct_mint(&K1, &c);
	expect(verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0, &out), ADMIT_ALLOW, R_NONE, "first check verifies");
	verifier_stats(v, &st);
	ok(st.hits == 0 && st.misses == 1 && st.entries == 1, "first check is a miss that fills one entry");
	expect(verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0, &out), ADMIT_ALLOW, R_NONE, "second check");
	verifier_stats(v, &st);
	is_int(st.hits, 1, "second check is a cache hit");
	ok(out.route.generation == 1 && strcmp(out.route.sandbox, "sbx_a") == 0, "a hit returns the cached claims");

	/* a hit is still subject to the audience check of the asking kind */
	expect(verifier_check(v, tok, strlen(tok), RECV_NETGTW, T0, &out), ADMIT_DENY, R_WRONG_AUDIENCE,
	    "cached control token presented at a gateway: wrong_audience");
	verifier_stats(v, &st);
	is_int(st.hits, 2, "  ... and that was a hit");

	/* one changed byte is another cache key: the signature is checked */
	bad = strdup(tok);
	{
		char *ch = bad + strlen(PASETO_V4_PUBLIC_HDR) + 30;
		*ch = *ch == 'A' ? 'B' : 'A';
	}
	expect(verifier_check(v, bad, strlen(bad), RECV_SBX_MANAGER, T0, &out), ADMIT_DENY, R_BAD_SIGNATURE,
	    "a token one byte away from a cached one is verified, and refused");
	/* a prefix of a cached token is not the cached token */
	ok(verifier_check(v, tok, strlen(tok) - 1, RECV_SBX_MANAGER, T0, &out).outcome == ADMIT_DENY,
	    "a truncated cached token is verified, and refused");
	verifier_stats(v, &st);
	is_int(st.hits, 2, "neither was a hit");
	free(bad);
	free(tok);
	verifier_free(v);
}

/* the point of the whole design: a hit skips step 1 only */
static void
test_hit_still_compares(void)
{
	struct verifier *v = mkverifier(16, 1, &K1, NULL);
	struct capability c;
	struct runtime_record rec;
	struct admit_request q;
	struct vcache_stats s0, s1;
	char *tok;

	ct_control(&c, "sbx_a", 4, T0, ACC_EXEC);
	ct_record(&rec, &c.route);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	tok = ct_mint(&K1, &c);
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_ALLOW, R_NONE, "admitted at generation 4");
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_ALLOW, R_NONE, "admitted again from the cache");

	/* the receiver installs generation 5: the same, still cached token */
	verifier_stats(v, &s0);
	rec.id.generation = 5;
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_REFRESH_ROUTE, R_GENERATION,
	    "after the record moved to generation 5 the cached token gets refresh_route");
	verifier_stats(v, &s1);
	ok(s1.hits == s0.hits + 1 && s1.misses == s0.misses, "  ... and the token was served from the cache");

	rec.id.generation = 4;
	rec.state = EXEC_RETIRED;
	verifier_stats(v, &s0);
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_REFRESH_ROUTE, R_NOT_SERVING,
	    "record retired: the cached token gets refresh_route not_serving");
	verifier_stats(v, &s1);
	is_int(s1.hits, s0.hits + 1, "  ... served from the cache");

	rec.state = EXEC_SERVING;
	q.target_sandbox = "sbx_b";
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_DENY, R_TARGET_MISMATCH,
	    "cached token at another sandbox's URL: deny");
	q.target_sandbox = "sbx_a";
	q.need_access = ACC_FS_W;
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_DENY, R_ACCESS,
	    "cached exec token used to write: deny");
	q.need_access = ACC_EXEC;
	q.now = c.exp + SPACE_CLOCK_SKEW + 1;
	expect(admit_token(v, tok, strlen(tok), &rec, &q, NULL), ADMIT_EXPIRED, R_EXPIRED,
	    "cached token past exp + skew: expired");
	free(tok);
	verifier_free(v);
}

static void
test_expiry(void)
{
	struct verifier *v = mkverifier(16, 1, &K1, NULL);
	struct capability c, out;
	struct vcache_stats st;
	char *tok;

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	tok = ct_mint(&K1, &c);
	verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0, &out);
	verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, c.exp + SPACE_CLOCK_SKEW, &out);
	verifier_stats(v, &st);
	ok(st.hits == 1 && st.entries == 1, "entry still served at exactly exp + skew");
	verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, c.exp + SPACE_CLOCK_SKEW + 1, &out);
	verifier_stats(v, &st);
	ok(st.hits == 1 && st.misses == 2, "past exp + skew the entry is not served");
	is_int(st.entries, 0, "the expired entry was dropped and not re-inserted");
	free(tok);

	/* a token that is already expired is never inserted */
	ct_control(&c, "sbx_a", 1, T0 - 1000, ACC_EXEC);
	tok = ct_mint(&K1, &c);
	verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0, &out);
	verifier_stats(v, &st);
	is_int(st.entries, 0, "an already expired token takes no cache entry");
	free(tok);
	verifier_free(v);

	/* an entry does not outlive its key's not_after: a cached token of a
	 * key that has just left its window is refused like a fresh one */
	{
		struct key_bundle kb = { 0 };
		v = verifier_new(16);
		kb.version = 1;
		ct_bundle_add(&kb, &K1, T0 - 1000, T0 + 30);
		verifier_set_bundle(v, &kb);
		ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
		tok = ct_mint(&K1, &c);
		expect(verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0, &out), ADMIT_ALLOW, R_NONE,
		    "token of a key with not_after = now + 30 verifies");
		expect(verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0 + 30, &out), ADMIT_ALLOW, R_NONE,
		    "  ... and is served from the cache up to not_after");
		expect(verifier_check(v, tok, strlen(tok), RECV_SBX_MANAGER, T0 + 31, &out), ADMIT_DENY, R_UNKNOWN_KID,
		    "  ... but not after it, although exp + skew is later");
		verifier_stats(v, &st);
		is_int(st.hits, 1, "exactly one hit (inside the key window)");
		free(tok);
		verifier_free(v);
	}
}

static void
test_lru(void)
{
	enum { N = 8 };
	struct verifier *v = mkverifier(N, 1, &K1, NULL);
	struct capability c, out;
	struct vcache_stats st, s0;
	char *tok[N + 5];

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	for (int i = 0; i < N + 5; i++) {
		ct_unique(&c);
		tok[i] = ct_mint(&K1, &c);
	}
	for (int i = 0; i < N; i++)
		verifier_check(v, tok[i], strlen(tok[i]), RECV_SBX_MANAGER, T0, &out);
	/* touch token 0 so it is the most recently used */
	verifier_check(v, tok[0], strlen(tok[0]), RECV_SBX_MANAGER, T0, &out);
	for (int i = N; i < N + 5; i++)
		verifier_check(v, tok[i], strlen(tok[i]), RECV_SBX_MANAGER, T0, &out);
	verifier_stats(v, &st);
	ok(st.entries <= N, "capacity %d, %d tokens: %" PRIu64 " entries", N, N + 5, st.entries);
	is_int(st.evictions, 5, "five evictions counted");

	verifier_stats(v, &s0);
	verifier_check(v, tok[0], strlen(tok[0]), RECV_SBX_MANAGER, T0, &out);
	verifier_stats(v, &st);
	is_int(st.hits, s0.hits + 1, "the recently used token survived the evictions");
	verifier_check(v, tok[1], strlen(tok[1]), RECV_SBX_MANAGER, T0, &out);
	verifier_stats(v, &s0);
	is_int(s0.misses, st.misses + 1, "the least recently used token was evicted");
	for (int i = 0; i < N + 5; i++)
		free(tok[i]);
	verifier_free(v);
}

static void
test_bundle_change(void)
{
	struct verifier *v = mkverifier(16, 1, &K1, NULL);
	struct capability c, out;
	struct vcache_stats st;
	struct key_bundle b = { 0 };
	char *t1, *t2;

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	t1 = ct_mint(&K1, &c);
	ct_unique(&c);
	t2 = ct_mint(&K2, &c);
	verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out);
	expect(verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out), ADMIT_ALLOW, R_NONE, "K1 token cached");
	verifier_stats(v, &st);
	is_int(st.hits, 1, "it was a hit");

	b.version = 2;
	ct_bundle_add(&b, &K2, T0 - 10, 0);
	is_int(verifier_set_bundle(v, &b), 0, "install v2 without K1");
	is_int(verifier_bundle_version(v), 2, "bundle version 2 installed");
	verifier_stats(v, &st);
	is_int(st.entries, 0, "the bundle change flushed the cache");
	expect(verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out), ADMIT_DENY, R_UNKNOWN_KID,
	    "the cached K1 token is refused right after the bundle dropped K1");
	expect(verifier_check(v, t2, strlen(t2), RECV_SBX_MANAGER, T0, &out), ADMIT_ALLOW, R_NONE, "K2 token accepted");

	b.version = 1;
	b.n = 0;
	ct_bundle_add(&b, &K1, T0 - 86400, 0);
	is_int(verifier_set_bundle(v, &b), -ESTALE, "rollback to bundle v1 refused");
	is_int(verifier_bundle_version(v), 2, "still at version 2");
	expect(verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out), ADMIT_DENY, R_UNKNOWN_KID,
	    "K1 token still refused after the rollback attempt");
	b.version = 2;
	b.n = 0;
	ct_bundle_add(&b, &K2, T0 - 10, 0);
	is_int(verifier_set_bundle(v, &b), 0, "re-installing the same version is allowed");
	b.n = SPACE_BUNDLE_KEYS_MAX + 1;
	is_int(verifier_set_bundle(v, &b), -EINVAL, "a bundle struct over the key limit refused");
	free(t1);
	free(t2);
	verifier_free(v);

	v = verifier_new(4);
	t2 = ct_mint(&K2, &c);
	expect(verifier_check(v, t2, strlen(t2), RECV_SBX_MANAGER, T0, &out),
	    ADMIT_DENY, R_UNKNOWN_KID, "a verifier without a bundle knows no key");
	free(t2);
	verifier_free(v);
}

/* several threads verify while another keeps swapping bundles: no crash,
 * no race (under ASan/TSan-lite), and every answer is one of the two
 * possible ones */
struct worker_arg {
	struct verifier *v;
	char **tok;
	int n, bad;
};

static void *
worker(void *p)
{
	struct worker_arg *a = p;
	struct capability out;

	for (int i = 0; i < 3000; i++) {
		const char *t = a->tok[i % a->n];
		struct admit_result r = verifier_check(a->v, t, strlen(t), RECV_SBX_MANAGER, T0, &out);
		if (!(r.outcome == ADMIT_ALLOW || (r.outcome == ADMIT_DENY && r.reason == R_UNKNOWN_KID)))
			a->bad++;
	}
	return NULL;
}

static void
test_threads(void)
{
	struct verifier *v = mkverifier(8, 1, &K1, &K2);
	struct capability c;
	char *tok[12];
	pthread_t th[3];
	struct worker_arg a[3];
	int bad = 0;

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	for (int i = 0; i < 12; i++) {
		ct_unique(&c);
		tok[i] = ct_mint(i % 2 ? &K1 : &K2, &c);
	}
	for (int i = 0; i < 3; i++) {
		a[i] = (struct worker_arg){ v, tok, 12, 0 };
		pthread_create(&th[i], NULL, worker, &a[i]);
	}
	for (uint64_t ver = 2; ver < 200; ver++) {
		struct key_bundle b = { 0 };
		b.version = ver;
		ct_bundle_add(&b, ver % 2 ? &K1 : &K2, T0 - 10, 0);
		verifier_set_bundle(v, &b);
	}
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		bad += a[i].bad;
	}
	is_int(bad, 0, "concurrent checks during bundle swaps give only allow or unknown_kid");
	/* the last bundle holds K1 only (version 199): K2 tokens must not be
	 * answered from an entry inserted by a check that raced a swap */
	{
		struct capability out;
		int wrong = 0;
		for (int i = 0; i < 12; i += 2)
			if (verifier_check(v, tok[i], strlen(tok[i]), RECV_SBX_MANAGER, T0, &out).outcome == ADMIT_ALLOW)
				wrong++;
		is_int(wrong, 0, "no stale entry of a dropped key survived the swaps");
	}
	for (int i = 0; i < 12; i++)
		free(tok[i]);
	verifier_free(v);
}

int
main(void)
{
	signing_key_generate(&K1);
	signing_key_generate(&K2);
	test_hits();
	test_hit_still_compares();
	test_expiry();
	test_lru();
	test_bundle_change();
	test_threads();
	signing_key_wipe(&K1);
	signing_key_wipe(&K2);
	return done_testing();
}
