/* Admission cost, side by side in one run:
 *   raw   libsodium crypto_sign_verify_detached on a 300-byte message
 *   cold  admit_token on a fresh capability token with an empty cache
 *         (footer, key lookup, PASETO verify, claims decode, cache insert,
 *         comparator)
 *   warm  admit_token on a cached token (hash, lookup, comparator)
 * Medians, p90 and p99 in microseconds, and the ratios to raw.
 *   bench_admit [cold_iterations [warm_iterations]] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "admit.h"
#include "claims.h"
#include "keys.h"
#include "limits.h"
#include "paseto.h"
#include "verifier.h"

static uint64_t
ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

struct stat3 { double p50, p90, p99; };

static struct stat3
summarize(uint64_t *d, size_t n)
{
	struct stat3 s;

	qsort(d, n, sizeof(*d), cmp_u64);
	s.p50 = (double)d[n / 2] / 1000.0;
	s.p90 = (double)d[(n * 90) / 100] / 1000.0;
	s.p99 = (double)d[(n * 99) / 100] / 1000.0;
	return s;
}

static char *
mint(const struct signing_key *k, const struct capability *c)
{
	char *json = NULL, *tok = NULL, footer[96];

	if (claims_encode(c, &json) < 0)
		return NULL;
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", k->kid);
	if (paseto_v4_sign(k->sk, json, strlen(json), footer, CAPABILITY_IMPLICIT, &tok) < 0)
		tok = NULL;
	free(json);
	return tok;
}

int
main(int argc, char **argv)
{
	size_t ncold = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
	size_t nwarm = argc > 2 ? strtoul(argv[2], NULL, 10) : 200000;
	size_t nraw = ncold;
	struct signing_key k;
	struct key_bundle b = { 0 };
	struct verifier *v;
	struct capability c;
	struct runtime_record rec;
	struct admit_request q;
	uint64_t *draw, *dpae, *dcold, *dwarm, *dver, *dclaims;
	size_t pae_len = 0;
	char **toks;
	struct stat3 sr, sp, sc, sw, sv, sl;
	int64_t now = time(NULL);
	size_t i, fails = 0;

	if (ncold < 10 || nwarm < 10 || sodium_init() < 0)
		return 2;
	if (signing_key_generate(&k) < 0)
		return 1;
	b.version = 1;
	b.n = 1;
	memcpy(b.keys[0].kid, k.kid, sizeof(b.keys[0].kid));
	memcpy(b.keys[0].pk, k.pk, sizeof(b.keys[0].pk));
	b.keys[0].not_before = now - 3600;
	/* the cache is large enough that the cold loop never evicts */
	if ((v = verifier_new(SPACE_VCACHE_ENTRIES)) == NULL || verifier_set_bundle(v, &b) < 0)
		return 1;

	/* a capability like the ones space-control issues */
	memset(&c, 0, sizeof(c));
	snprintf(c.sub, sizeof(c.sub), "usr_benchmark0000000000000");
	c.aud = AUD_NODE_API;
	c.pur = PUR_CONTROL;
	c.iat = now;
	c.exp = now + SPACE_CAP_LIFETIME;
	snprintf(c.route.sandbox, sizeof(c.route.sandbox), "sbx_abcdefghijklmnopqrstuvwxyz");
	c.route.generation = 42;
	snprintf(c.route.worker, sizeof(c.route.worker), "wrk_abcdefghijklmnopqrstuvwxyz");
	snprintf(c.route.substrate, sizeof(c.route.substrate), "jail");
	c.route.activation = 1;
	snprintf(c.route.resident, sizeof(c.route.resident), "inc_abcdefghijklmnopqrstuvwxyz");
	c.acc = ACC_EXEC | ACC_FS_R | ACC_FS_W;
	memset(&rec, 0, sizeof(rec));
	rec.id = c.route;
	rec.state = EXEC_SERVING;
	memset(&q, 0, sizeof(q));
	q.kind = RECV_SBX_MANAGER;
	q.target_sandbox = c.route.sandbox;
	q.need_access = ACC_EXEC;
	q.now = now;

	draw = calloc(nraw, sizeof(*draw));
	dcold = calloc(ncold, sizeof(*dcold));
	dwarm = calloc(nwarm, sizeof(*dwarm));
	dpae = calloc(nraw, sizeof(*dpae));
	dver = calloc(ncold, sizeof(*dver));
	dclaims = calloc(ncold, sizeof(*dclaims));
	toks = calloc(ncold + 1, sizeof(*toks));
	if (!draw || !dcold || !dwarm || !dpae || !dver || !dclaims || !toks)
		return 1;
	/* fresh real tokens, minted before the clock starts */
	for (i = 0; i <= ncold; i++) {
		snprintf(c.jti, sizeof(c.jti), "j%021zu", i);
		if ((toks[i] = mint(&k, &c)) == NULL)
			return 1;
	}

	/* raw Ed25519, one distinct (message, signature) pair per iteration
	 * as the cold path meets a distinct token each time: verifying one
	 * fixed signature over and over lets the branch predictor learn it
	 * and flatters the baseline by a few microseconds */
	{
		uint8_t (*msgs)[300] = calloc(nraw, sizeof(*msgs));
		uint8_t (*sigs)[crypto_sign_BYTES] = calloc(nraw, sizeof(*sigs));
		size_t plen = strlen(toks[0]) * 3 / 4 + 60;
		uint8_t *pms = calloc(nraw, plen);

		if (msgs == NULL || sigs == NULL || pms == NULL)
			return 1;
		randombytes_buf(msgs, nraw * sizeof(*msgs));
		for (i = 0; i < nraw; i++)
			crypto_sign_detached(sigs[i], NULL, msgs[i], sizeof(msgs[i]), k.sk);
		for (i = 0; i < nraw; i++) {
			uint64_t t0 = ns();
			if (crypto_sign_verify_detached(sigs[i], msgs[i], sizeof(msgs[i]), k.pk) != 0)
				fails++;
			draw[i] = ns() - t0;
		}
		/* the same on messages as long as the PAE a capability signs, to
		 * separate "the token is longer than 300 bytes" from our overhead */
		randombytes_buf(pms, nraw * plen);
		for (i = 0; i < nraw; i++)
			crypto_sign_detached(sigs[i], NULL, pms + i * plen, plen, k.sk);
		for (i = 0; i < nraw; i++) {
			uint64_t t0 = ns();
			if (crypto_sign_verify_detached(sigs[i], pms + i * plen, plen, k.pk) != 0)
				fails++;
			dpae[i] = ns() - t0;
		}
		pae_len = plen;
		free(msgs);
		free(sigs);
		free(pms);
	}

	/* cold: a token never seen, into an empty cache */
	for (i = 0; i < ncold; i++) {
		struct admit_result r;
		uint64_t t0;

		/* flushing is not part of the measured path */
		verifier_set_bundle(v, &b);
		t0 = ns();
		r = admit_token(v, toks[i], strlen(toks[i]), &rec, &q, NULL);
		dcold[i] = ns() - t0;
		if (r.outcome != ADMIT_ALLOW)
			fails++;
	}

	/* where the cold path goes beyond raw Ed25519: the two library calls
	 * it is made of, each on its own (medians only, for the breakdown) */
	for (i = 0; i < ncold; i++) {
		uint8_t *m = NULL;
		size_t ml = 0;
		char *f = NULL;
		uint64_t t0 = ns();

		if (paseto_v4_verify(k.pk, toks[i], strlen(toks[i]), SPACE_TOKEN_MAX,
		    CAPABILITY_IMPLICIT, &m, &ml, &f) != 0)
			fails++;
		dver[i] = ns() - t0;
		{
			struct capability out;
			const char *why;

			t0 = ns();
			if (claims_decode(m, ml, &out, &why) != 0)
				fails++;
			dclaims[i] = ns() - t0;
		}
		free(m);
		free(f);
	}

	/* warm: the same token again and again */
	admit_token(v, toks[ncold], strlen(toks[ncold]), &rec, &q, NULL);
	for (i = 0; i < nwarm; i++) {
		struct admit_result r;
		uint64_t t0 = ns();

		r = admit_token(v, toks[ncold], strlen(toks[ncold]), &rec, &q, NULL);
		dwarm[i] = ns() - t0;
		if (r.outcome != ADMIT_ALLOW)
			fails++;
	}
	{
		struct vcache_stats st;
		verifier_stats(v, &st);
		if (st.hits < nwarm)
			fails++;
	}

	sr = summarize(draw, nraw);
	sp = summarize(dpae, nraw);
	sc = summarize(dcold, ncold);
	sw = summarize(dwarm, nwarm);
	sv = summarize(dver, ncold);
	sl = summarize(dclaims, ncold);
	printf("bench_admit: token %zu bytes, %zu raw / %zu cold / %zu warm iterations\n",
	    strlen(toks[0]), nraw, ncold, nwarm);
	printf("%-44s %10s %10s %10s\n", "path (microseconds)", "median", "p90", "p99");
	printf("%-44s %10.2f %10.2f %10.2f\n", "raw crypto_sign_verify_detached (300 B)", sr.p50, sr.p90, sr.p99);
	{
		char label[64];
		snprintf(label, sizeof(label), "raw, message of the PAE's length (%zu B)", pae_len);
		printf("%-44s %10.2f %10.2f %10.2f\n", label, sp.p50, sp.p90, sp.p99);
	}
	printf("%-44s %10.2f %10.2f %10.2f\n", "cold: verifier_check (empty cache) + admit", sc.p50, sc.p90, sc.p99);
	printf("%-44s %10.2f %10.2f %10.2f\n", "warm: admit_token (cached token)", sw.p50, sw.p90, sw.p99);
	printf("ratio cold/raw (median) %.2f   warm/raw (median) %.4f   cold/raw-of-PAE-length %.2f\n",
	    sc.p50 / sr.p50, sw.p50 / sr.p50, sc.p50 / sp.p50);
	printf("cold path parts (median): paseto_v4_verify %.2f, claims_decode %.2f, rest %.2f\n",
	    sv.p50, sl.p50, sc.p50 - sv.p50 - sl.p50);
	if (fails)
		printf("bench_admit: %zu unexpected outcomes\n", fails);

	for (i = 0; i <= ncold; i++)
		free(toks[i]);
	free(toks);
	free(draw);
	free(dpae);
	free(dcold);
	free(dwarm);
	free(dver);
	free(dclaims);
	verifier_free(v);
	signing_key_wipe(&k);
	return fails ? 1 : 0;
}
