/* Key bundles (and, through the same verifier, capabilities) on arbitrary
 * input. The first byte picks the path:
 *   0: the input is a bundle token, verified under a fixed pinned root
 *      (nobody can forge it: this exercises the token parser and must
 *      never succeed on something the root did not sign);
 *   1: the rest is a bundle payload, signed here with the root key, so the
 *      strict decoder behind the signature sees arbitrary JSON;
 *   2: the rest is a capability claims payload signed with a key of the
 *      installed bundle, run through verifier_check and admit().
 * Invariants checked on every accepted bundle: 1..SPACE_BUNDLE_KEYS_MAX
 * keys, version >= 1, every kid is the PASERK id of its key, no duplicate
 * kid, and sign(decode(x)) decodes to the same bundle. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admit.h"
#include "claims.h"
#include "keys.h"
#include "limits.h"
#include "paseto.h"
#include "verifier.h"

static struct signing_key root, issuer;
static struct verifier *ver;

static void
key_from_seed(struct signing_key *k, uint8_t fill)
{
	uint8_t seed[32];

	memset(seed, fill, sizeof(seed));
	memset(k, 0, sizeof(*k));
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	if (paserk_k4_pid(k->pk, k->kid) < 0)
		abort();
}

static void
setup(void)
{
	struct key_bundle b = { 0 };

	if (ver != NULL)
		return;
	if (sodium_init() < 0)
		abort();
	key_from_seed(&root, 0x42);
	key_from_seed(&issuer, 0x17);
	b.version = 1;
	b.n = 1;
	memcpy(b.keys[0].kid, issuer.kid, sizeof(b.keys[0].kid));
	memcpy(b.keys[0].pk, issuer.pk, 32);
	b.keys[0].not_before = 0;
	if ((ver = verifier_new(64)) == NULL || verifier_set_bundle(ver, &b) != 0)
		abort();
}

static void
check_bundle(const struct key_bundle *b)
{
	struct key_bundle again;
	char *tok = NULL;

	if (b->n == 0 || b->n > SPACE_BUNDLE_KEYS_MAX || b->version == 0)
		abort();
	for (size_t i = 0; i < b->n; i++) {
		char pid[PASERK_K4_PID_LEN + 1];

		if (paserk_k4_pid(b->keys[i].pk, pid) < 0 || strcmp(pid, b->keys[i].kid) != 0)
			abort();
		for (size_t j = 0; j < i; j++)
			if (strcmp(b->keys[i].kid, b->keys[j].kid) == 0)
				abort();
	}
	if (bundle_sign(b, &root, &tok) != 0)
		abort();
	if (bundle_verify(tok, strlen(tok), root.pk, &again) != 0 ||
	    again.version != b->version || again.n != b->n)
		abort();
	for (size_t i = 0; i < b->n; i++)
		if (memcmp(&again.keys[i], &b->keys[i], sizeof(again.keys[i])) != 0)
			abort();
	free(tok);
}

static char *
sign(const struct signing_key *k, const uint8_t *msg, size_t len, const char *implicit)
{
	char footer[96], *tok = NULL;

	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", k->kid);
	if (paseto_v4_sign(k->sk, msg, len, footer, implicit, &tok) != 0)
		return NULL;
	return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct key_bundle b;
	char *tok;

	setup();
	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (bundle_verify((const char *)data + 1, size - 1, root.pk, &b) == 0)
			check_bundle(&b);
		break;
	case 1:
		if ((tok = sign(&root, data + 1, size - 1, BUNDLE_IMPLICIT)) == NULL)
			break;
		if (bundle_verify(tok, strlen(tok), root.pk, &b) == 0)
			check_bundle(&b);
		free(tok);
		break;
	case 2: {
		struct capability cap;
		struct runtime_record rec;
		struct admit_request q;
		struct admit_result r;

		if ((tok = sign(&issuer, data + 1, size - 1, CAPABILITY_IMPLICIT)) == NULL)
			break;
		for (int kind = RECV_SBX_MANAGER; kind <= RECV_NETGTW; kind++) {
			r = verifier_check(ver, tok, strlen(tok), (enum receiver_kind)kind, 0, &cap);
			if (r.outcome != ADMIT_ALLOW && r.outcome != ADMIT_DENY)
				abort();
			if (r.outcome != ADMIT_ALLOW)
				continue;
			/* the comparator on the accepted claims, against a record
			 * equal to them: only ALLOW or a step-7 refusal are
			 * possible, since time is taken from the claims */
			memset(&rec, 0, sizeof(rec));
			rec.id = cap.route;
			rec.state = EXEC_SERVING;
			memset(&q, 0, sizeof(q));
			q.kind = (enum receiver_kind)kind;
			q.target_sandbox = cap.route.sandbox;
			q.receiver_sandbox = cap.route.sandbox;
			q.need_access = ACC_EXEC;
			q.port = cap.port;
			q.proto = cap.proto;
			q.now = cap.iat;
			r = admit(&cap, &rec, &q);
			if (r.outcome == ADMIT_REFRESH_ROUTE)
				abort();
			if (r.outcome == ADMIT_ALLOW && cap.pur == PUR_CONTROL && !(cap.acc & ACC_EXEC))
				abort();
		}
		free(tok);
		break;
	}
	}
	return 0;
}
