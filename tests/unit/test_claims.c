/* Capability claims from the attacker's side: every claim missing,
 * duplicated, unknown, of the wrong type or out of range; claims of the
 * other purpose; then round trips and the route identity object. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "claims.h"
#include "util.h"
#include "tap.h"

struct kv { const char *k, *v; };

static const struct kv control_claims[] = {
	{ "iss", "\"space-control\"" }, { "sub", "\"prn_alice\"" },
	{ "jti", "\"AAECAwQFBgcICQoLDA0ODw\"" }, { "aud", "\"node-api\"" },
	{ "pur", "\"control\"" }, { "iat", "\"2026-01-01T00:00:00Z\"" },
	{ "exp", "\"2026-01-01T00:02:00Z\"" }, { "sbx", "\"sbx_one\"" }, { "gen", "7" },
	{ "wrk", "\"wrk_a\"" }, { "sst", "\"jail\"" }, { "act", "1" }, { "res", "\"inc_1\"" },
	{ "acc", "[\"exec\",\"fs:r\"]" },
};
#define NCONTROL (sizeof(control_claims) / sizeof(control_claims[0]))

static const struct kv service_claims[] = {
	{ "iss", "\"space-control\"" }, { "sub", "\"prn_alice\"" },
	{ "jti", "\"AAECAwQFBgcICQoLDA0ODw\"" }, { "aud", "\"netgtw\"" },
	{ "pur", "\"service\"" }, { "iat", "\"2026-01-01T00:00:00Z\"" },
	{ "exp", "\"2026-01-01T00:02:00Z\"" }, { "sbx", "\"sbx_one\"" }, { "gen", "7" },
	{ "wrk", "\"wrk_a\"" }, { "sst", "\"jail\"" }, { "act", "1" }, { "res", "\"inc_1\"" },
	{ "port", "8080" }, { "proto", "\"http\"" },
};
#define NSERVICE (sizeof(service_claims) / sizeof(service_claims[0]))

/* build a claims object from base, replacing key `rk` by raw value `rv`
 * (NULL: omit it), then appending `extra` raw members if not NULL */
static char *
build(const struct kv *base, size_t n, const char *rk, const char *rv, const char *extra)
{
	static char buf[8192];
	size_t o = 0, i;

	o += (size_t)snprintf(buf + o, sizeof(buf) - o, "{");
	for (i = 0; i < n; i++) {
		const char *v = base[i].v;

		if (rk && strcmp(base[i].k, rk) == 0) {
			if (rv == NULL)
				continue;
			v = rv;
		}
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s\"%s\":%s", o > 1 ? "," : "", base[i].k, v);
	}
	if (extra)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", o > 1 ? "," : "", extra);
	snprintf(buf + o, sizeof(buf) - o, "}");
	return buf;
}

static int
decode(const char *s, struct capability *c, const char **why)
{
	*why = NULL;
	return claims_decode(s, strlen(s), c, why);
}

static void
refused(const char *s, const char *what)
{
	struct capability c;
	const char *why = NULL;
	int r = decode(s, &c, &why);

	ok(r == -EINVAL && why != NULL, "refused: %s (%s)", what, why ? why : "-");
	if (r != -EINVAL)
		diag("input: %s", s);
}

static void
accepted(const char *s, struct capability *c, const char *what)
{
	const char *why = NULL;
	int r = decode(s, c, &why);

	ok(r == 0, "accepted: %s", what);
	if (r != 0)
		diag("why: %s; input: %s", why ? why : "-", s);
}

static void
test_valid(void)
{
	struct capability c;

	accepted(build(control_claims, NCONTROL, NULL, NULL, NULL), &c, "control capability");
	is_int(c.pur, PUR_CONTROL, "pur control");
	is_int(c.aud, AUD_NODE_API, "aud node-api");
	is_str(c.sub, "prn_alice", "sub");
	is_str(c.jti, "AAECAwQFBgcICQoLDA0ODw", "jti");
	is_int(c.iat, 1767225600, "iat");
	is_int(c.exp, 1767225720, "exp");
	is_str(c.route.sandbox, "sbx_one", "sbx");
	ok(c.route.generation == 7, "gen");
	is_str(c.route.worker, "wrk_a", "wrk");
	is_str(c.route.substrate, "jail", "sst");
	is_int(c.route.activation, 1, "act");
	is_str(c.route.resident, "inc_1", "res");
	is_int(c.acc, ACC_EXEC | ACC_FS_R, "acc");
	is_int(c.port, 0, "no port on control");

	accepted(build(service_claims, NSERVICE, NULL, NULL, NULL), &c, "service capability");
	is_int(c.pur, PUR_SERVICE, "pur service");
	is_int(c.aud, AUD_NETGTW, "aud netgtw");
	is_int(c.port, 8080, "port");
	is_int(c.proto, PROTO_HTTP, "proto http");
	is_int(c.acc, 0, "no acc on service");
	accepted(build(service_claims, NSERVICE, "proto", "\"tcp\"", NULL), &c, "proto tcp");
	is_int(c.proto, PROTO_TCP, "proto tcp decoded");
	accepted(build(service_claims, NSERVICE, "port", "65535", NULL), &c, "port 65535");
	is_int(c.port, 65535, "port 65535 decoded");

	/* gen across the whole u64 range, written as plain JSON integers */
	accepted(build(control_claims, NCONTROL, "gen", "18446744073709551615", NULL), &c, "gen 2^64-1");
	ok(c.route.generation == UINT64_MAX, "gen 2^64-1 exact");
	accepted(build(control_claims, NCONTROL, "gen", "9223372036854775808", NULL), &c, "gen 2^63");
	ok(c.route.generation == 9223372036854775808ull, "gen 2^63 exact");
	accepted(build(control_claims, NCONTROL, "gen", "18446744073709551614", NULL), &c, "gen 2^64-2");
	ok(c.route.generation == UINT64_MAX - 1, "gen 2^64-2 exact (not rounded through a double)");
	accepted(build(control_claims, NCONTROL, "gen", "1", NULL), &c, "gen 1");
	ok(c.route.generation == 1, "gen 1 exact");
	accepted(build(control_claims, NCONTROL, "act", "4294967295", NULL), &c, "act 2^32-1");
	ok(c.route.activation == UINT32_MAX, "act 2^32-1 exact");
	accepted(build(control_claims, NCONTROL, "acc", "[\"exec\",\"fs:r\",\"fs:w\",\"pty\",\"watch\"]", NULL),
	    &c, "acc with every access");
	is_int(c.acc, ACC_ALL, "ACC_ALL");
	accepted(build(control_claims, NCONTROL, "iat", "\"2026-01-01T01:00:00+01:00\"", NULL), &c,
	    "iat with an offset");
	is_int(c.iat, 1767225600, "offset applied");

	/* members in another order: numbers still land on the right claims */
	accepted("{\"act\":3,\"acc\":[\"pty\"],\"gen\":18446744073709551615,\"res\":\"r\",\"sst\":\"jail\","
	    "\"wrk\":\"w\",\"sbx\":\"s\",\"exp\":\"2026-01-01T00:02:00Z\",\"iat\":\"2026-01-01T00:00:00Z\","
	    "\"pur\":\"control\",\"aud\":\"node-api\",\"jti\":\"j\",\"sub\":\"p\",\"iss\":\"space-control\"}",
	    &c, "reordered members");
	ok(c.route.activation == 3 && c.route.generation == UINT64_MAX && c.acc == ACC_PTY,
	    "reordered numbers decoded exactly");
	accepted("{\"port\":443,\"gen\":5,\"act\":9,\"proto\":\"tcp\",\"res\":\"r\",\"sst\":\"jail\","
	    "\"wrk\":\"w\",\"sbx\":\"s\",\"exp\":\"2026-01-01T00:02:00Z\",\"iat\":\"2026-01-01T00:00:00Z\","
	    "\"pur\":\"service\",\"aud\":\"netgtw\",\"jti\":\"j\",\"sub\":\"p\",\"iss\":\"space-control\"}",
	    &c, "reordered service members");
	ok(c.port == 443 && c.route.generation == 5 && c.route.activation == 9, "reordered service numbers");
	/* whitespace is JSON */
	accepted(" { \"iss\" : \"space-control\" , \"sub\":\"p\",\"jti\":\"j\",\"aud\":\"node-api\","
	    "\"pur\":\"control\",\"iat\":\"2026-01-01T00:00:00Z\",\"exp\":\"2026-01-01T00:02:00Z\","
	    "\"sbx\":\"s\",\"gen\":\n1 ,\"wrk\":\"w\",\"sst\":\"jail\",\"act\":1,\"res\":\"r\",\"acc\":[ \"exec\" ] } ",
	    &c, "with whitespace");
}

static void
test_missing_duplicate_unknown(void)
{
	char what[128];
	size_t i;

	for (i = 0; i < NCONTROL; i++) {
		snprintf(what, sizeof(what), "control without %s", control_claims[i].k);
		refused(build(control_claims, NCONTROL, control_claims[i].k, NULL, NULL), what);
	}
	for (i = 0; i < NSERVICE; i++) {
		snprintf(what, sizeof(what), "service without %s", service_claims[i].k);
		refused(build(service_claims, NSERVICE, service_claims[i].k, NULL, NULL), what);
	}
	for (i = 0; i < NCONTROL; i++) {
		char extra[256];

		/* the same value twice, and a different value the second time */
		snprintf(extra, sizeof(extra), "\"%s\":%s", control_claims[i].k, control_claims[i].v);
		snprintf(what, sizeof(what), "duplicate %s (same value)", control_claims[i].k);
		refused(build(control_claims, NCONTROL, NULL, NULL, extra), what);
	}
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"sbx\":\"sbx_other\""), "duplicate sbx, other value");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"gen\":8"), "duplicate gen, other value");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"g\\u0065n\":8"), "duplicate gen, escaped key");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"nbf\":\"2026-01-01T00:00:00Z\""), "unknown nbf");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"admin\":true"), "unknown admin");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"\":1"), "empty key");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"Gen\":1"), "key of other case");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"gen \":1"), "key with a space");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"x\":{\"gen\":1}"), "unknown nested object");
	/* claims of the other purpose */
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"port\":8080"), "control with port");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"proto\":\"http\""), "control with proto");
	refused(build(control_claims, NCONTROL, NULL, NULL, "\"port\":8080,\"proto\":\"http\""),
	    "control with port and proto");
	refused(build(service_claims, NSERVICE, NULL, NULL, "\"acc\":[\"exec\"]"), "service with acc");
	refused(build(control_claims, NCONTROL, "pur", "\"service\"", NULL), "control claims relabelled service");
	refused(build(service_claims, NSERVICE, "pur", "\"control\"", NULL), "service claims relabelled control");
}

static void
test_types_and_ranges(void)
{
	static const struct { const char *k, *v, *what; } bad[] = {
		{ "iss", "\"space-contro\"", "other issuer" },
		{ "iss", "\"Space-Control\"", "issuer of other case" },
		{ "iss", "\"space-control\\u0000x\"", "issuer with NUL" },
		{ "iss", "null", "iss null" },
		{ "sub", "\"a/b\"", "sub not an id" },
		{ "sub", "\"\"", "sub empty" },
		{ "sub", "7", "sub a number" },
		{ "sub", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "sub of 65 chars" },
		{ "jti", "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"", "jti of 33 chars" },
		{ "jti", "\"a b\"", "jti with a space" },
		{ "jti", "[]", "jti an array" },
		{ "aud", "\"node-api \"", "aud with a space" },
		{ "aud", "\"space-control\"", "aud of the issuer" },
		{ "aud", "[\"node-api\"]", "aud an array" },
		{ "pur", "\"admin\"", "unknown purpose" },
		{ "pur", "1", "pur a number" },
		{ "iat", "\"2026-01-01\"", "iat a date" },
		{ "iat", "1767225600", "iat a number" },
		{ "exp", "\"2026-02-30T00:00:00Z\"", "exp on Feb 30" },
		{ "exp", "\"2025-12-31T23:59:59Z\"", "exp before iat" },
		{ "sbx", "\"../x\"", "sbx a path" },
		{ "sbx", "\"\"", "sbx empty" },
		{ "sbx", "true", "sbx a boolean" },
		{ "wrk", "\"w k\"", "wrk with a space" },
		{ "res", "null", "res null" },
		{ "sst", "\"Jail\"", "sst upper case" },
		{ "sst", "\"firecrackerfire1\"", "sst of 16 chars" },
		{ "sst", "\"\"", "sst empty" },
		{ "sst", "\"ja_il\"", "sst with underscore" },
		{ "gen", "18446744073709551616", "gen 2^64" },
		{ "gen", "99999999999999999999999", "gen far above 2^64" },
		{ "gen", "-1", "gen -1" },
		{ "gen", "-0", "gen -0" },
		{ "gen", "0", "gen 0" },
		{ "gen", "\"7\"", "gen a string" },
		{ "gen", "7.0", "gen 7.0" },
		{ "gen", "7.5", "gen 7.5" },
		{ "gen", "7e0", "gen 7e0" },
		{ "gen", "1E1", "gen 1E1" },
		{ "gen", "07", "gen with a leading zero" },
		{ "gen", "+7", "gen with a plus" },
		{ "gen", "true", "gen a boolean" },
		{ "gen", "null", "gen null" },
		{ "gen", "[7]", "gen an array" },
		{ "gen", "{\"v\":7}", "gen an object" },
		{ "act", "0", "act 0" },
		{ "act", "4294967296", "act 2^32" },
		{ "act", "-1", "act -1" },
		{ "act", "1.0", "act 1.0" },
		{ "act", "\"1\"", "act a string" },
		{ "acc", "[]", "acc empty" },
		{ "acc", "\"exec\"", "acc a string" },
		{ "acc", "[\"exec\",\"exec\"]", "acc repeated" },
		{ "acc", "[\"root\"]", "acc unknown" },
		{ "acc", "[\"EXEC\"]", "acc of other case" },
		{ "acc", "[1]", "acc of numbers" },
		{ "acc", "[[\"exec\"]]", "acc nested" },
		{ "acc", "{\"exec\":true}", "acc an object" },
		{ "acc", "null", "acc null" },
	};
	static const struct { const char *k, *v, *what; } bad_service[] = {
		{ "port", "0", "port 0" },
		{ "port", "65536", "port 65536" },
		{ "port", "-80", "port negative" },
		{ "port", "80.0", "port 80.0" },
		{ "port", "\"80\"", "port a string" },
		{ "proto", "\"udp\"", "proto udp" },
		{ "proto", "\"HTTP\"", "proto upper case" },
		{ "proto", "1", "proto a number" },
		{ "aud", "\"nowhere\"", "service aud unknown" },
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		refused(build(control_claims, NCONTROL, bad[i].k, bad[i].v, NULL), bad[i].what);
	for (i = 0; i < sizeof(bad_service) / sizeof(bad_service[0]); i++)
		refused(build(service_claims, NSERVICE, bad_service[i].k, bad_service[i].v, NULL), bad_service[i].what);

	/* not an object, not JSON, too large */
	refused("", "empty input");
	refused("[]", "an array");
	refused("\"claims\"", "a string");
	refused("null", "null");
	refused("{", "truncated JSON");
	refused(build(control_claims, NCONTROL, NULL, NULL, NULL) + 1, "missing opening brace");
	{
		char two[8192];
		const char *one = build(control_claims, NCONTROL, NULL, NULL, NULL);

		snprintf(two, sizeof(two), "%s%s", one, one);
		refused(two, "two objects");
		snprintf(two, sizeof(two), "%s x", one);
		refused(two, "trailing garbage");
	}
	{
		char *big = malloc(SPACE_CLAIMS_MAX + 64);
		const char *base = build(control_claims, NCONTROL, NULL, NULL, NULL);
		size_t n = strlen(base);

		memcpy(big, base, n - 1);
		memset(big + n - 1, ' ', SPACE_CLAIMS_MAX + 1 - n);
		strcpy(big + SPACE_CLAIMS_MAX, "}");
		refused(big, "over SPACE_CLAIMS_MAX with padding spaces");
		free(big);
	}
	/* a string containing digits and quotes does not confuse the number scan */
	{
		struct capability c;

		refused(build(control_claims, NCONTROL, "sub", "\"1 2 3 \\\" 4\"", NULL), "sub with digits and an escaped quote");
		accepted(build(control_claims, NCONTROL, "jti", "\"123-456\"", NULL), &c, "jti of digits");
		ok(c.route.generation == 7 && c.route.activation == 1, "numbers after a digit string");
	}
}

static void
test_roundtrip(void)
{
	struct capability c, d;
	char *json = NULL, *json2 = NULL;
	const char *why;

	accepted(build(control_claims, NCONTROL, "gen", "18446744073709551615", NULL), &c, "control for round trip");
	ok(claims_encode(&c, &json) == 0, "encode control");
	ok(json && strncmp(json, "{\"iss\":\"space-control\",\"sub\":\"prn_alice\",\"jti\":", 45) == 0,
	    "fixed order begins with iss, sub, jti");
	ok(json && claims_decode(json, strlen(json), &d, &why) == 0 && memcmp(&c, &d, sizeof(c)) == 0,
	    "decode(encode(c)) == c");
	ok(json && claims_encode(&d, &json2) == 0 && strcmp(json, json2) == 0, "encoding is stable");
	is_str(json, "{\"iss\":\"space-control\",\"sub\":\"prn_alice\",\"jti\":\"AAECAwQFBgcICQoLDA0ODw\","
	    "\"aud\":\"node-api\",\"pur\":\"control\",\"iat\":\"2026-01-01T00:00:00Z\","
	    "\"exp\":\"2026-01-01T00:02:00Z\",\"sbx\":\"sbx_one\",\"gen\":18446744073709551615,"
	    "\"wrk\":\"wrk_a\",\"sst\":\"jail\",\"act\":1,\"res\":\"inc_1\",\"acc\":[\"exec\",\"fs:r\"]}",
	    "exact encoding");
	free(json);
	free(json2);
	json = json2 = NULL;

	accepted(build(service_claims, NSERVICE, "proto", "\"tcp\"", NULL), &c, "service for round trip");
	ok(claims_encode(&c, &json) == 0, "encode service");
	memset(&d, 0xaa, sizeof(d));
	ok(json && claims_decode(json, strlen(json), &d, &why) == 0 && memcmp(&c, &d, sizeof(c)) == 0,
	    "service decode(encode(c)) == c");
	ok(json && strstr(json, "\"port\":8080,\"proto\":\"tcp\"}") != NULL, "port and proto last");
	free(json);
	json = NULL;

	/* the encoder refuses what the decoder would refuse */
	d = c;
	strcpy(d.sub, "a\"b");
	is_int(claims_encode(&d, &json), -EINVAL, "encode refuses a sub that would need escaping");
	d = c;
	d.route.generation = 0;
	is_int(claims_encode(&d, &json), -EINVAL, "encode refuses gen 0");
	d = c;
	d.port = 0;
	is_int(claims_encode(&d, &json), -EINVAL, "encode refuses port 0");
	d = c;
	d.pur = PUR_CONTROL;
	d.acc = 0;
	is_int(claims_encode(&d, &json), -EINVAL, "encode refuses control without access");
	d.acc = 0x40;
	is_int(claims_encode(&d, &json), -EINVAL, "encode refuses unknown access bits");
	ok(json == NULL, "nothing allocated on refusal");
}

static void
test_acc(void)
{
	uint32_t b = 0;

	is_str(acc_name(ACC_FS_W), "fs:w", "acc_name");
	ok(acc_name(ACC_EXEC | ACC_PTY) == NULL, "acc_name of two bits");
	ok(acc_name(0) == NULL, "acc_name of none");
	ok(acc_parse("watch", &b) == 0 && b == ACC_WATCH, "acc_parse watch");
	is_int(acc_parse("Watch", &b), -EINVAL, "acc_parse case-sensitive");
	ok(acc_parse_list("exec,fs:r", &b) == 0 && b == (ACC_EXEC | ACC_FS_R), "acc_parse_list");
	ok(acc_parse_list("exec,fs:r,fs:w,pty,watch", &b) == 0 && b == ACC_ALL, "acc_parse_list all");
	is_int(acc_parse_list("", &b), -EINVAL, "empty list");
	is_int(acc_parse_list("exec,", &b), -EINVAL, "trailing comma");
	is_int(acc_parse_list(",exec", &b), -EINVAL, "leading comma");
	is_int(acc_parse_list("exec,,pty", &b), -EINVAL, "empty element");
	is_int(acc_parse_list("exec,exec", &b), -EINVAL, "repeated element");
	is_int(acc_parse_list("exec,root", &b), -EINVAL, "unknown element");
	is_int(acc_parse_list("exec pty", &b), -EINVAL, "space separated");
}

static void
test_route_identity(void)
{
	struct route_identity a = { "sbx_1", 42, "wrk_a", "jail", 3, "inc_x" }, b;
	json_t *o, *o2;

	ok(route_identity_equal(&a, &a), "equal to itself");
	b = a;
	b.generation++;
	ok(!route_identity_equal(&a, &b), "generation differs");
	b = a;
	b.activation++;
	ok(!route_identity_equal(&a, &b), "activation differs");
	b = a;
	strcpy(b.resident, "inc_y");
	ok(!route_identity_equal(&a, &b), "resident differs");
	b = a;
	strcpy(b.worker, "wrk_b");
	ok(!route_identity_equal(&a, &b), "worker differs");
	b = a;
	strcpy(b.substrate, "fc");
	ok(!route_identity_equal(&a, &b), "substrate differs");
	b = a;
	strcpy(b.sandbox, "sbx_2");
	ok(!route_identity_equal(&a, &b), "sandbox differs");

	o = route_identity_pack(&a);
	ok(o != NULL && json_object_size(o) == 6, "pack: six members");
	memset(&b, 0, sizeof(b));
	ok(route_identity_unpack(o, &b) == 0 && route_identity_equal(&a, &b), "unpack(pack(r)) == r");

	o2 = json_deep_copy(o);
	json_object_set_new(o2, "extra", json_true());
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses an extra member");
	json_decref(o2);
	o2 = json_deep_copy(o);
	json_object_del(o2, "resident");
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a missing member");
	json_object_set_new(o2, "residnet", json_string("inc_x"));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a misspelt member");
	json_decref(o2);
	o2 = json_deep_copy(o);
	json_object_set_new(o2, "generation", json_string("42"));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses generation as a string");
	json_object_set_new(o2, "generation", json_real(42.0));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses generation as a real");
	json_object_set_new(o2, "generation", json_integer(0));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses generation 0");
	json_object_set_new(o2, "generation", json_integer(-5));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses negative generation");
	json_decref(o2);
	o2 = json_deep_copy(o);
	json_object_set_new(o2, "activation", json_integer(4294967296LL));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses activation 2^32");
	json_object_set_new(o2, "activation", json_integer(0));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses activation 0");
	json_decref(o2);
	o2 = json_deep_copy(o);
	json_object_set_new(o2, "sandbox", json_string("../etc"));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a bad sandbox id");
	json_object_set_new(o2, "sandbox", json_integer(1));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a numeric sandbox");
	json_decref(o2);
	o2 = json_deep_copy(o);
	json_object_set_new(o2, "substrate", json_string("JAIL"));
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a bad substrate");
	json_decref(o2);
	o2 = json_array();
	is_int(route_identity_unpack(o2, &b), -EINVAL, "unpack refuses a non-object");
	json_decref(o2);
	json_decref(o);

	a.generation = (uint64_t)INT64_MAX + 1;
	ok(route_identity_pack(&a) == NULL, "pack refuses a generation beyond json_int_t");
}

int
main(void)
{
	test_valid();
	test_missing_duplicate_unknown();
	test_types_and_ranges();
	test_roundtrip();
	test_acc();
	test_route_identity();
	return done_testing();
}
