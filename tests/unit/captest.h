/* Test helpers shared by the admission tests: keys, bundles, capability
 * claims and tokens minted exactly as the issuer does (claims_encode, then
 * PASETO v4.public with the capability implicit assertion and the kid
 * footer). Header-only; every function is static. */
#ifndef SPACE_CAPTEST_H
#define SPACE_CAPTEST_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "admit.h"
#include "claims.h"
#include "keys.h"
#include "paseto.h"
#include "verifier.h"

#define T0 1800000000LL         /* a fixed "now" for the tests */

__attribute__((unused))
static void
ct_identity(struct route_identity *r, const char *sbx, uint64_t gen)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->sandbox, sizeof(r->sandbox), "%s", sbx);
	r->generation = gen;
	snprintf(r->worker, sizeof(r->worker), "w1");
	snprintf(r->substrate, sizeof(r->substrate), "jail");
	r->activation = 1;
	snprintf(r->resident, sizeof(r->resident), "inc_aaaa");
}

/* a control capability for sbx/gen issued at iat */
__attribute__((unused))
static void
ct_control(struct capability *c, const char *sbx, uint64_t gen, int64_t iat, uint32_t acc)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->sub, sizeof(c->sub), "usr_test");
	snprintf(c->jti, sizeof(c->jti), "AAAAAAAAAAAAAAAAAAAAAA");
	c->aud = AUD_NODE_API;
	c->pur = PUR_CONTROL;
	c->iat = iat;
	c->exp = iat + SPACE_CAP_LIFETIME;
	ct_identity(&c->route, sbx, gen);
	c->acc = acc;
}

__attribute__((unused))
static void
ct_service(struct capability *c, const char *sbx, uint64_t gen, int64_t iat,
    uint16_t port, enum cap_proto proto)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->sub, sizeof(c->sub), "usr_test");
	snprintf(c->jti, sizeof(c->jti), "BBBBBBBBBBBBBBBBBBBBBB");
	c->aud = AUD_NETGTW;
	c->pur = PUR_SERVICE;
	c->iat = iat;
	c->exp = iat + SPACE_CAP_LIFETIME;
	ct_identity(&c->route, sbx, gen);
	c->port = port;
	c->proto = proto;
}

/* a distinct jti per call so tokens differ (cache keys) */
__attribute__((unused))
static void
ct_unique(struct capability *c)
{
	static unsigned n;
	snprintf(c->jti, sizeof(c->jti), "jti%019u", ++n);
}

/* sign claims JSON with k as the issuer would; NULL on failure */
__attribute__((unused))
static char *
ct_sign_json(const struct signing_key *k, const char *json)
{
	char footer[96], *tok = NULL;

	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", k->kid);
	if (paseto_v4_sign(k->sk, json, strlen(json), footer, CAPABILITY_IMPLICIT, &tok) < 0)
		return NULL;
	return tok;
}

__attribute__((unused))
static char *
ct_mint(const struct signing_key *k, const struct capability *c)
{
	char *json = NULL, *tok;

	if (claims_encode(c, &json) < 0)
		return NULL;
	tok = ct_sign_json(k, json);
	free(json);
	return tok;
}

__attribute__((unused))
static void
ct_bundle_add(struct key_bundle *b, const struct signing_key *k, int64_t nb, int64_t na)
{
	struct bundle_key *bk = &b->keys[b->n++];

	memcpy(bk->kid, k->kid, sizeof(bk->kid));
	memcpy(bk->pk, k->pk, sizeof(bk->pk));
	bk->not_before = nb;
	bk->not_after = na;
}

/* a record that matches identity r and is serving */
__attribute__((unused))
static void
ct_record(struct runtime_record *rec, const struct route_identity *r)
{
	memset(rec, 0, sizeof(*rec));
	rec->id = *r;
	rec->state = EXEC_SERVING;
	rec->epoch = 1;
}

__attribute__((unused))
static void
ct_request(struct admit_request *q, enum receiver_kind kind, const char *sbx, int64_t now)
{
	memset(q, 0, sizeof(*q));
	q->kind = kind;
	q->target_sandbox = sbx;
	q->receiver_sandbox = kind == RECV_SBX_MANAGER ? NULL : sbx;
	q->need_access = ACC_EXEC;
	q->now = now;
}
#endif
