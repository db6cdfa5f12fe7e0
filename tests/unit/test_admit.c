/* The comparator from the attacker's side: each test tries to get a request
 * past one rule, then a table checks which rule decides when several fail
 * at once (the order is part of the contract: it tells the client whether
 * to give up, renew, or repair its route). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "captest.h"
#include "keys.h"
#include "verifier.h"
#include "tap.h"

static struct signing_key K, rogue;
static struct verifier *V;

#define expect(res, o, rsn, ...) do { struct admit_result _r = (res); \
	if (!ok(_r.outcome == (o) && _r.reason == (rsn), __VA_ARGS__)) \
		diag("got %s/%s, want %s/%s", admit_outcome_str(_r.outcome), \
		    admit_reason_str(_r.reason), admit_outcome_str(o), admit_reason_str(rsn)); \
	} while (0)

/* mint c with K and run it through admit_token */
static struct admit_result
run(const struct capability *c, const struct runtime_record *rec, const struct admit_request *q)
{
	char *tok = ct_mint(&K, c);
	struct admit_result r = { ADMIT_ALLOW, R_NONE };
	struct capability out;

	if (tok == NULL) {
		ok(0, "mint");
		return r;
	}
	r = admit_token(V, tok, strlen(tok), rec, q, &out);
	free(tok);
	return r;
}

static struct admit_result
run_token(const char *tok, const struct runtime_record *rec, const struct admit_request *q)
{
	struct capability out;
	return admit_token(V, tok, strlen(tok), rec, q, &out);
}

/* ---- step 1 ---- */

static void
test_step1(void)
{
	struct capability c;
	struct runtime_record rec;
	struct admit_request q;
	char *tok, *json = NULL, footer[96], *bad;
	static char big[SPACE_TOKEN_MAX + 2];

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	ct_record(&rec, &c.route);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	expect(run(&c, &rec, &q), ADMIT_ALLOW, R_NONE, "baseline: a valid capability is allowed");

	expect(run_token("garbage", &rec, &q), ADMIT_DENY, R_MALFORMED, "garbage token: malformed");
	expect(run_token("v4.local.AAAA", &rec, &q), ADMIT_DENY, R_MALFORMED, "v4.local token: malformed");
	expect(run_token("v3.public.AAAA", &rec, &q), ADMIT_DENY, R_MALFORMED, "v3 token: malformed");
	expect(admit_token(V, "", 0, &rec, &q, NULL), ADMIT_DENY, R_MALFORMED, "empty token: malformed");
	memset(big, 'A', sizeof(big) - 1);
	memcpy(big, "v4.public.", 10);
	expect(admit_token(V, big, SPACE_TOKEN_MAX + 1, &rec, &q, NULL), ADMIT_DENY, R_MALFORMED,
	    "token over %d bytes: malformed", SPACE_TOKEN_MAX);

	/* a key we never published */
	tok = ct_mint(&rogue, &c);
	expect(run_token(tok, &rec, &q), ADMIT_DENY, R_UNKNOWN_KID, "token signed by a key not in the bundle: unknown_kid");
	free(tok);

	/* a key we never published, claiming to be our key */
	claims_encode(&c, &json);
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", K.kid);
	tok = NULL;
	paseto_v4_sign(rogue.sk, json, strlen(json), footer, CAPABILITY_IMPLICIT, &tok);
	expect(run_token(tok, &rec, &q), ADMIT_DENY, R_BAD_SIGNATURE, "rogue key using our kid: bad_signature");
	free(tok);

	/* our key, but without the capability domain separation */
	tok = NULL;
	paseto_v4_sign(K.sk, json, strlen(json), footer, BUNDLE_IMPLICIT, &tok);
	expect(run_token(tok, &rec, &q), ADMIT_DENY, R_BAD_SIGNATURE, "signed with another implicit assertion: bad_signature");
	free(tok);

	/* a footer that is not exactly {"kid":...} */
	tok = NULL;
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\",\"x\":1}", K.kid);
	paseto_v4_sign(K.sk, json, strlen(json), footer, CAPABILITY_IMPLICIT, &tok);
	expect(run_token(tok, &rec, &q), ADMIT_DENY, R_MALFORMED, "footer with an extra field: malformed");
	free(tok);
	tok = NULL;
	paseto_v4_sign(K.sk, json, strlen(json), NULL, CAPABILITY_IMPLICIT, &tok);
	expect(run_token(tok, &rec, &q), ADMIT_DENY, R_MALFORMED, "no footer: malformed");
	free(tok);

	/* tampering with the signed payload */
	tok = ct_mint(&K, &c);
	bad = strdup(tok);
	/* another base64url letter in the middle of the signed payload */
	bad[strlen(PASETO_V4_PUBLIC_HDR) + 30] = bad[strlen(PASETO_V4_PUBLIC_HDR) + 30] == 'A' ? 'B' : 'A';
	expect(run_token(bad, &rec, &q), ADMIT_DENY, R_BAD_SIGNATURE, "tampered token: bad_signature");
	expect(run_token(tok, &rec, &q), ADMIT_ALLOW, R_NONE, "the untampered original still passes");
	free(bad);
	free(tok);

	/* signed by our key but with claims outside the schema */
	{
		char buf[4096];
		size_t l = strlen(json);
		snprintf(buf, sizeof(buf), "{\"admin\":true,%s", json + 1);
		tok = ct_sign_json(&K, buf);
		expect(run_token(tok, &rec, &q), ADMIT_DENY, R_BAD_CLAIMS, "unknown claim: bad_claims");
		free(tok);
		snprintf(buf, sizeof(buf), "%.*s,\"sbx\":\"sbx_b\"}", (int)(l - 1), json);
		tok = ct_sign_json(&K, buf);
		expect(run_token(tok, &rec, &q), ADMIT_DENY, R_BAD_CLAIMS, "duplicate claim (second sbx): bad_claims");
		free(tok);
		tok = ct_sign_json(&K, "{}");
		expect(run_token(tok, &rec, &q), ADMIT_DENY, R_BAD_CLAIMS, "empty claims: bad_claims");
		free(tok);
	}
	free(json);

	/* audience / purpose per receiver kind */
	{
		struct capability s;
		ct_service(&s, "sbx_a", 1, T0, 8080, PROTO_HTTP);
		ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
		expect(run(&s, &rec, &q), ADMIT_DENY, R_WRONG_AUDIENCE, "service capability at sbx-manager: wrong_audience");
		ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
		expect(run(&s, &rec, &q), ADMIT_DENY, R_WRONG_AUDIENCE, "service capability at the bridge: wrong_audience");
		ct_request(&q, RECV_NETGTW, "sbx_a", T0);
		q.port = 8080;
		q.proto = PROTO_HTTP;
		expect(run(&c, &rec, &q), ADMIT_DENY, R_WRONG_AUDIENCE, "control capability at the gateway: wrong_audience");
		expect(run(&s, &rec, &q), ADMIT_ALLOW, R_NONE, "service capability at the gateway: allowed");

		/* combinations the issuer never makes, checked on the struct
		 * (the claims decoder may already refuse them on the wire) */
		struct capability m = c;
		m.pur = PUR_SERVICE;
		ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_WRONG_PURPOSE, "node-api audience with service purpose: wrong_purpose");
		m = s;
		m.pur = PUR_CONTROL;
		ct_request(&q, RECV_NETGTW, "sbx_a", T0);
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_WRONG_PURPOSE, "netgtw audience with control purpose: wrong_purpose");
		m = s;
		m.port = 0;
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_BAD_PROFILE, "service port 0: invalid_port_profile");
		m = s;
		m.proto = PROTO_NONE;
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_BAD_PROFILE, "service without protocol: invalid_port_profile");
		m = s;
		m.acc = ACC_EXEC;
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_BAD_PROFILE, "service capability carrying access: invalid_port_profile");
		m = c;
		m.acc = 0;
		ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_BAD_PROFILE, "control capability with no access: invalid_port_profile");
		m = c;
		m.port = 22;
		expect(admit(&m, &rec, &q), ADMIT_DENY, R_BAD_PROFILE, "control capability carrying a port: invalid_port_profile");
		q.kind = (enum receiver_kind)99;
		ok(admit(&c, &rec, &q).outcome == ADMIT_DENY, "an unknown receiver kind admits nothing");
	}
}

/* ---- step 2 ---- */

static void
test_step2(void)
{
	struct capability c;
	struct runtime_record rec;
	struct admit_request q;

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	ct_record(&rec, &c.route);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", c.exp + SPACE_CLOCK_SKEW);
	expect(run(&c, &rec, &q), ADMIT_ALLOW, R_NONE, "at exactly exp + 15: still allowed (skew)");
	q.now = c.exp + SPACE_CLOCK_SKEW + 1;
	expect(run(&c, &rec, &q), ADMIT_EXPIRED, R_EXPIRED, "at exp + 16: expired");
	q.now = T0 + 100000;
	expect(run(&c, &rec, &q), ADMIT_EXPIRED, R_EXPIRED, "a day later: expired");

	ct_control(&c, "sbx_a", 1, T0 + SPACE_CLOCK_SKEW, ACC_EXEC);
	q.now = T0;
	expect(run(&c, &rec, &q), ADMIT_ALLOW, R_NONE, "iat at now + 15: allowed (skew)");
	ct_control(&c, "sbx_a", 1, T0 + SPACE_CLOCK_SKEW + 1, ACC_EXEC);
	expect(run(&c, &rec, &q), ADMIT_EXPIRED, R_NOT_YET_VALID, "iat at now + 16: issued_in_future");
	/* a forged lifetime: iat far in the future would keep the token
	 * alive long after any legitimate one */
	ct_control(&c, "sbx_a", 1, T0 + 86400, ACC_EXEC);
	expect(run(&c, &rec, &q), ADMIT_EXPIRED, R_NOT_YET_VALID, "iat a day ahead: issued_in_future");
}

/* ---- step 3 ---- */

static void
test_step3(void)
{
	struct capability a;
	struct runtime_record rec_a, rec_b;
	struct route_identity rb;
	struct admit_request q;

	ct_control(&a, "sbx_a", 1, T0, ACC_EXEC);
	ct_record(&rec_a, &a.route);
	ct_identity(&rb, "sbx_b", 1);
	ct_record(&rec_b, &rb);

	/* A's capability at B's URL: sbx-manager would look up B's record */
	ct_request(&q, RECV_SBX_MANAGER, "sbx_b", T0);
	expect(run(&a, &rec_b, &q), ADMIT_DENY, R_TARGET_MISMATCH, "A's capability at B's URL: sandbox_mismatch");
	expect(run(&a, &rec_a, &q), ADMIT_DENY, R_TARGET_MISMATCH, "  ... even with A's record at hand");
	ct_request(&q, RECV_SBX_MANAGER, NULL, T0);
	expect(run(&a, &rec_a, &q), ADMIT_DENY, R_TARGET_MISMATCH, "request naming no sandbox: sandbox_mismatch");

	/* URL and token agree on A, but the request reached B's bridge */
	ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
	q.receiver_sandbox = "sbx_b";
	expect(run(&a, &rec_b, &q), ADMIT_DENY, R_RECEIVER_MISMATCH, "A's request at B's bridge: receiver_sandbox_mismatch");
	ct_request(&q, RECV_NETGTW, "sbx_a", T0);
	q.receiver_sandbox = "sbx_b";
	{
		struct capability s;
		ct_service(&s, "sbx_a", 1, T0, 80, PROTO_TCP);
		q.port = 80;
		q.proto = PROTO_TCP;
		expect(run(&s, &rec_b, &q), ADMIT_DENY, R_RECEIVER_MISMATCH, "A's service capability at B's gateway: receiver_sandbox_mismatch");
	}
	ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
	q.receiver_sandbox = NULL;
	expect(run(&a, &rec_a, &q), ADMIT_DENY, R_RECEIVER_MISMATCH, "per-sandbox receiver that names no sandbox: refused");

	/* a record of another sandbox handed to the comparator (lookup bug) */
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	expect(run(&a, &rec_b, &q), ADMIT_DENY, R_RECEIVER_MISMATCH, "record of B for A's request: refused, never forwarded");
	/* prefix tricks: "sbx_a" vs "sbx_ab" */
	ct_request(&q, RECV_SBX_MANAGER, "sbx_ab", T0);
	expect(run(&a, &rec_a, &q), ADMIT_DENY, R_TARGET_MISMATCH, "URL sbx_ab with a capability for sbx_a: sandbox_mismatch");
}

/* ---- steps 4-6 ---- */

static void
test_step4_6(void)
{
	struct capability c, n1;
	struct runtime_record rec;
	struct admit_request q;
	static const enum exec_state bad_states[] = {
		EXEC_PENDING, EXEC_STARTING, EXEC_RETIRING, EXEC_RETIRED, EXEC_FAILED, EXEC_PAUSED,
	};

	ct_control(&c, "sbx_a", 5, T0, ACC_EXEC);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	expect(run(&c, NULL, &q), ADMIT_REFRESH_ROUTE, R_NO_RECORD, "sbx-manager without a record: refresh_route no_record");
	ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
	expect(run(&c, NULL, &q), ADMIT_DENY, R_RECEIVER_MISMATCH, "bridge without its record: deny (never sends the client back to itself)");

	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	/* generation N token, record already at N+1 */
	ct_record(&rec, &c.route);
	rec.id.generation = 6;
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_GENERATION, "unexpired token of generation N at a record holding N+1: refresh_route");
	/* generation N+1 token, record still at N */
	ct_control(&n1, "sbx_a", 6, T0, ACC_EXEC);
	ct_record(&rec, &c.route);
	expect(run(&n1, &rec, &q), ADMIT_REFRESH_ROUTE, R_GENERATION, "token of N+1 at a record still holding N: refresh_route");
	ct_record(&rec, &c.route);
	rec.id.generation = 4;
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_GENERATION, "token of N at an older record N-1: refresh_route");

	ct_record(&rec, &c.route);
	snprintf(rec.id.worker, sizeof(rec.id.worker), "w2");
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_WORKER, "worker mismatch: refresh_route");
	ct_record(&rec, &c.route);
	snprintf(rec.id.worker, sizeof(rec.id.worker), "w1x");
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_WORKER, "worker w1 vs w1x (prefix): refresh_route");
	ct_record(&rec, &c.route);
	snprintf(rec.id.substrate, sizeof(rec.id.substrate), "firecracker");
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_SUBSTRATE, "substrate mismatch: refresh_route");
	ct_record(&rec, &c.route);
	snprintf(rec.id.resident, sizeof(rec.id.resident), "inc_bbbb");
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_RESIDENT, "re-created worker (new incarnation): resident_mismatch");

	for (size_t i = 0; i < sizeof(bad_states) / sizeof(bad_states[0]); i++) {
		ct_record(&rec, &c.route);
		rec.state = bad_states[i];
		expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_NOT_SERVING, "record %s: refresh_route not_serving",
		    exec_state_str(bad_states[i]));
	}

	/* activation */
	ct_record(&rec, &c.route);
	rec.id.activation = 2;
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_ACTIVATION, "sbx-manager, activation changed: refresh_route");
	ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
	q.established_stream = true;
	expect(run(&c, &rec, &q), ADMIT_REFRESH_ROUTE, R_ACTIVATION, "bridge gives no established-stream grace: refresh_route");
	{
		struct capability s;
		ct_service(&s, "sbx_a", 5, T0, 8080, PROTO_HTTP);
		ct_request(&q, RECV_NETGTW, "sbx_a", T0);
		q.port = 8080;
		q.proto = PROTO_HTTP;
		expect(run(&s, &rec, &q), ADMIT_REFRESH_ROUTE, R_ACTIVATION, "gateway, new open after an activation change: refresh_route");
		q.established_stream = true;
		expect(run(&s, &rec, &q), ADMIT_ALLOW, R_NONE, "gateway, established stream after an activation change: kept");
		rec.id.generation = 6;
		expect(run(&s, &rec, &q), ADMIT_REFRESH_ROUTE, R_GENERATION, "gateway, established stream after a generation change: refused");
	}
}

/* ---- step 7 ---- */

static void
test_step7(void)
{
	struct capability c, s;
	struct runtime_record rec;
	struct admit_request q;

	ct_control(&c, "sbx_a", 1, T0, ACC_FS_R);
	ct_record(&rec, &c.route);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	q.need_access = ACC_FS_R;
	expect(run(&c, &rec, &q), ADMIT_ALLOW, R_NONE, "fs:r capability reads");
	q.need_access = ACC_EXEC;
	expect(run(&c, &rec, &q), ADMIT_DENY, R_ACCESS, "fs:r capability cannot exec: access_denied");
	q.need_access = ACC_FS_W;
	expect(run(&c, &rec, &q), ADMIT_DENY, R_ACCESS, "fs:r capability cannot write: access_denied");
	q.need_access = ACC_FS_R | ACC_FS_W;
	expect(run(&c, &rec, &q), ADMIT_DENY, R_ACCESS, "needing fs:r+fs:w with only fs:r: access_denied");
	q.need_access = 0;
	expect(run(&c, &rec, &q), ADMIT_DENY, R_ACCESS, "an operation needing nothing is refused (fail closed)");
	ct_request(&q, RECV_BRIDGE, "sbx_a", T0);
	q.need_access = ACC_PTY;
	expect(run(&c, &rec, &q), ADMIT_DENY, R_ACCESS, "at the bridge too: pty with fs:r refused");

	ct_service(&s, "sbx_a", 1, T0, 8080, PROTO_HTTP);
	ct_request(&q, RECV_NETGTW, "sbx_a", T0);
	q.port = 8080;
	q.proto = PROTO_HTTP;
	expect(run(&s, &rec, &q), ADMIT_ALLOW, R_NONE, "service port and proto match: allowed");
	q.port = 22;
	expect(run(&s, &rec, &q), ADMIT_DENY, R_PORT, "capability for 8080 used on 22: port_mismatch");
	q.port = 8080;
	q.proto = PROTO_TCP;
	expect(run(&s, &rec, &q), ADMIT_DENY, R_PROTO, "http capability used for raw tcp: proto_mismatch");
}

/* ---- the order of the rules ---- */

enum keymode { KEY_GOOD, KEY_ROGUE, KEY_FORGED };

struct combo {
	const char *what;
	enum keymode key;
	enum receiver_kind kind;
	const char *url;                /* target sandbox */
	const char *recv;               /* per-sandbox receiver's sandbox (NULL: same as url) */
	const char *cap_sbx;
	uint64_t cap_gen, rec_gen;
	int64_t iat_off;                /* cap iat = T0 + iat_off */
	int64_t now_off;                /* now = T0 + now_off */
	const char *rec_worker;         /* NULL: w1 */
	enum exec_state state;
	uint32_t rec_act;
	int no_record;
	uint32_t cap_acc, need;         /* control */
	uint16_t req_port;              /* service: capability is 8080/http */
	enum cap_proto req_proto;
	int established;
	enum admit_outcome o;
	enum admit_reason r;
};

#define LATE (SPACE_CAP_LIFETIME + SPACE_CLOCK_SKEW + 1)

static const struct combo combos[] = {
	{ "bad signature beats everything", KEY_FORGED, RECV_SBX_MANAGER, "sbx_b", NULL, "sbx_a", 1, 2, 0, LATE,
	  "w9", EXEC_RETIRED, 3, 0, ACC_FS_R, ACC_EXEC, 0, 0, 0, ADMIT_DENY, R_BAD_SIGNATURE },
	{ "unknown kid beats expiry and a wrong sandbox", KEY_ROGUE, RECV_SBX_MANAGER, "sbx_b", NULL, "sbx_a", 1, 1, 0, LATE,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_DENY, R_UNKNOWN_KID },
	{ "wrong audience beats expiry", KEY_GOOD, RECV_NETGTW, "sbx_a", NULL, "sbx_a", 1, 1, 0, LATE,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 8080, PROTO_HTTP, 0, ADMIT_DENY, R_WRONG_AUDIENCE },
	{ "expired token for the wrong sandbox is EXPIRED", KEY_GOOD, RECV_SBX_MANAGER, "sbx_b", NULL, "sbx_a", 1, 1, 0, LATE,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_EXPIRED, R_EXPIRED },
	{ "expired token with a stale generation is EXPIRED", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 2, 0, LATE,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_EXPIRED, R_EXPIRED },
	{ "future iat at a retired record is EXPIRED", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 1, 100, 0,
	  NULL, EXEC_RETIRED, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_EXPIRED, R_NOT_YET_VALID },
	{ "wrong sandbox with a stale generation is DENY, not REFRESH_ROUTE", KEY_GOOD, RECV_SBX_MANAGER, "sbx_b", NULL, "sbx_a", 1, 2, 0, 0,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_DENY, R_TARGET_MISMATCH },
	{ "wrong sandbox with no record is DENY", KEY_GOOD, RECV_SBX_MANAGER, "sbx_b", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_SERVING, 1, 1, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_DENY, R_TARGET_MISMATCH },
	{ "foreign bridge with a stale generation is DENY", KEY_GOOD, RECV_BRIDGE, "sbx_a", "sbx_b", "sbx_a", 1, 2, 0, 0,
	  NULL, EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_DENY, R_RECEIVER_MISMATCH },
	{ "no record beats access", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_SERVING, 1, 1, ACC_FS_R, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_NO_RECORD },
	{ "generation checked before worker", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 2, 0, 0,
	  "w9", EXEC_SERVING, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_GENERATION },
	{ "worker checked before state", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  "w9", EXEC_RETIRED, 1, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_WORKER },
	{ "state checked before activation", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_PAUSED, 2, 0, ACC_EXEC, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_NOT_SERVING },
	{ "stale generation beats missing access (repair first)", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 1, 2, 0, 0,
	  NULL, EXEC_SERVING, 1, 0, ACC_FS_R, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_GENERATION },
	{ "activation checked before access", KEY_GOOD, RECV_BRIDGE, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_SERVING, 2, 0, ACC_FS_R, ACC_EXEC, 0, 0, 0, ADMIT_REFRESH_ROUTE, R_ACTIVATION },
	{ "established gateway stream: activation tolerated, port still checked", KEY_GOOD, RECV_NETGTW, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_SERVING, 2, 0, 0, 0, 9090, PROTO_HTTP, 1, ADMIT_DENY, R_PORT },
	{ "port checked before proto", KEY_GOOD, RECV_NETGTW, "sbx_a", NULL, "sbx_a", 1, 1, 0, 0,
	  NULL, EXEC_SERVING, 1, 0, 0, 0, 9090, PROTO_TCP, 0, ADMIT_DENY, R_PORT },
	{ "everything right at the edge of the skew: ALLOW", KEY_GOOD, RECV_SBX_MANAGER, "sbx_a", NULL, "sbx_a", 7, 7, 0,
	  SPACE_CAP_LIFETIME + SPACE_CLOCK_SKEW, NULL, EXEC_SERVING, 1, 0, ACC_ALL, ACC_FS_W, 0, 0, 0, ADMIT_ALLOW, R_NONE },
};

static void
test_order(void)
{
	for (size_t i = 0; i < sizeof(combos) / sizeof(combos[0]); i++) {
		const struct combo *t = &combos[i];
		struct capability c;
		struct runtime_record rec;
		struct admit_request q;
		char *tok = NULL, *json = NULL, footer[96];

		if (t->kind == RECV_NETGTW && t->cap_acc == 0)
			ct_service(&c, t->cap_sbx, t->cap_gen, T0 + t->iat_off, 8080, PROTO_HTTP);
		else
			ct_control(&c, t->cap_sbx, t->cap_gen, T0 + t->iat_off, t->cap_acc);
		ct_record(&rec, &c.route);
		rec.id.generation = t->rec_gen;
		if (t->rec_worker)
			snprintf(rec.id.worker, sizeof(rec.id.worker), "%s", t->rec_worker);
		rec.state = t->state;
		rec.id.activation = t->rec_act;
		ct_request(&q, t->kind, t->url, T0 + t->now_off);
		if (t->recv)
			q.receiver_sandbox = t->recv;
		q.need_access = t->need;
		q.port = t->req_port;
		q.proto = t->req_proto;
		q.established_stream = t->established;

		switch (t->key) {
		case KEY_GOOD:
			tok = ct_mint(&K, &c);
			break;
		case KEY_ROGUE:
			tok = ct_mint(&rogue, &c);
			break;
		case KEY_FORGED:
			claims_encode(&c, &json);
			snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", K.kid);
			paseto_v4_sign(rogue.sk, json, strlen(json), footer, CAPABILITY_IMPLICIT, &tok);
			free(json);
			break;
		}
		expect(run_token(tok, t->no_record ? NULL : &rec, &q), t->o, t->r, "order: %s", t->what);
		free(tok);
	}
}

static void
test_strings(void)
{
	is_int(admit_http_status(ADMIT_ALLOW), 200, "ALLOW is 200");
	is_int(admit_http_status(ADMIT_DENY), 403, "DENY is 403");
	is_int(admit_http_status(ADMIT_EXPIRED), 401, "EXPIRED is 401");
	is_int(admit_http_status(ADMIT_REFRESH_ROUTE), 409, "REFRESH_ROUTE is 409");
	ok(admit_http_status((enum admit_outcome)42) != 200, "an unknown outcome never maps to 200");
	is_str(admit_outcome_str(ADMIT_REFRESH_ROUTE), "refresh_route", "outcome string");
	is_str(admit_reason_str(R_BAD_PROFILE), "invalid_port_profile", "reason string of the profile rule");
	is_str(admit_reason_str(R_NOT_YET_VALID), "issued_in_future", "reason string of a future iat");
	is_str(admit_reason_str(R_RECEIVER_MISMATCH), "receiver_sandbox_mismatch", "reason string of a foreign receiver");
	for (int r = 0; r < R__COUNT; r++)
		if (strcmp(admit_reason_str((enum admit_reason)r), "unknown") == 0)
			ok(0, "reason %d has a name", r);
	is_str(admit_reason_str(R__COUNT), "unknown", "out-of-range reason");
	for (int s = EXEC_PENDING; s <= EXEC_PAUSED; s++) {
		enum exec_state back;
		ok(exec_state_parse(exec_state_str((enum exec_state)s), &back) == 0 && (int)back == s,
		    "state %s round trips", exec_state_str((enum exec_state)s));
	}
	enum exec_state st;
	is_int(exec_state_parse("Serving", &st), -EINVAL, "state names are exact");
}

static void
test_cap_out(void)
{
	struct capability c, out;
	struct runtime_record rec;
	struct admit_request q;
	char *tok;

	ct_control(&c, "sbx_a", 3, T0, ACC_EXEC | ACC_FS_R);
	ct_record(&rec, &c.route);
	ct_request(&q, RECV_SBX_MANAGER, "sbx_a", T0);
	tok = ct_mint(&K, &c);
	expect(admit_token(V, tok, strlen(tok), &rec, &q, &out), ADMIT_ALLOW, R_NONE, "allowed");
	ok(out.route.generation == 3 && strcmp(out.route.sandbox, "sbx_a") == 0 &&
	    out.acc == (ACC_EXEC | ACC_FS_R), "verified claims handed to the caller on ALLOW");
	free(tok);
	tok = ct_mint(&rogue, &c);
	admit_token(V, tok, strlen(tok), &rec, &q, &out);
	ok(out.route.generation == 0 && out.route.sandbox[0] == '\0', "nothing of an unverified token reaches the caller");
	free(tok);
}

int
main(void)
{
	struct key_bundle b = { 0 };

	signing_key_generate(&K);
	signing_key_generate(&rogue);
	V = verifier_new(256);
	b.version = 1;
	ct_bundle_add(&b, &K, T0 - 86400, 0);
	if (verifier_set_bundle(V, &b) != 0)
		return 1;

	test_step1();
	test_step2();
	test_step3();
	test_step4_6();
	test_step7();
	test_order();
	test_strings();
	test_cap_out();

	verifier_free(V);
	signing_key_wipe(&K);
	signing_key_wipe(&rogue);
	return done_testing();
}
