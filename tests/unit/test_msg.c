/* The payload codec from the sender's side (msg.h): for every message a
 * good one decodes, and an extra key, a missing key, a wrong type, an
 * oversized field, a duplicate key and trailing bytes are each refused;
 * what the encoders write decodes to the same struct. Then the assignment
 * hand-off form, the one refusal table and the one token grammar. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "admit.h"
#include "msg.h"
#include "paseto.h"
#include "util.h"
#include "verifier.h"
#include "tap.h"

#define CLAIMS "{\"iss\":\"space-control\",\"sub\":\"prn_a\",\"jti\":\"AAECAwQFBgcICQoLDA0ODw\"," \
	"\"aud\":\"node-api\",\"pur\":\"control\",\"iat\":\"2026-01-01T00:00:00Z\"," \
	"\"exp\":\"2026-01-01T00:02:00Z\",\"sbx\":\"sbx_1\",\"gen\":7,\"wrk\":\"w1\",\"sst\":\"jail\"," \
	"\"act\":2,\"res\":\"inc_1\",\"acc\":[\"exec\",\"fs:r\"]}"
#define IDENT "{\"sandbox\":\"sbx_1\",\"generation\":7,\"worker\":\"w1\",\"substrate\":\"jail\"," \
	"\"activation\":2,\"resident\":\"inc_1\"}"

static char buf[1 << 16];

static const char *
fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
static const char *
fmt(const char *f, ...)
{
	va_list ap;

	va_start(ap, f);
	vsnprintf(buf, sizeof(buf), f, ap);
	va_end(ap);
	return buf;
}

static int
req(const char *s, enum msg_form form, struct msg_request *m)
{
	const char *why = NULL;
	int r = msg_request_decode(s, strlen(s), form, m, &why);

	if (r != 0 && why == NULL)
		return -999;    /* every refusal says why */
	return r;
}

static void
test_request(void)
{
	struct msg_request m, m2;
	char *s = NULL, big[SPACE_TOKEN_MAX + 2];
	size_t n;

	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"token\":\"v4.public.x\",\"args\":{\"argv\":[\"true\"]}}",
	    MSG_FORM_TOKEN, &m), 0, "REQUEST (token form) decodes");
	ok(m.op == OP_EXEC && strcmp(m.sandbox, "sbx_1") == 0 && m.token_len == 11 &&
	    strcmp(m.token, "v4.public.x") == 0 && json_is_object(m.args), "... op, sandbox, token, args");
	ok(msg_request_encode(&m, MSG_FORM_TOKEN, &s, &n) == 0 && n == strlen(s), "... and encodes");
	is_int(req(s, MSG_FORM_TOKEN, &m2), 0, "... to what decodes again");
	ok(m2.op == m.op && strcmp(m2.token, m.token) == 0 && json_equal(m2.args, m.args),
	    "... to the same request");
	msg_wipe_free(s);
	msg_request_free(&m2);
	msg_request_free(&m);
	ok(m.token == NULL && m.args == NULL, "free leaves nothing behind");

	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"token\":\"t\",\"args\":{},\"extra\":1}",
	    MSG_FORM_TOKEN, &m), -EINVAL, "extra key refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"args\":{}}", MSG_FORM_TOKEN, &m), -EINVAL,
	    "missing token refused");
	is_int(req("{\"op\":\"exec\",\"token\":\"t\",\"args\":{}}", MSG_FORM_TOKEN, &m), -EINVAL,
	    "missing sandbox refused");
	is_int(req("{\"sandbox\":\"s\",\"token\":\"t\",\"args\":{}}", MSG_FORM_TOKEN, &m), -EINVAL,
	    "missing op refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\"}", MSG_FORM_TOKEN, &m), -EINVAL,
	    "missing args refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":7,\"args\":{}}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "token of the wrong type refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\",\"args\":[]}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "args of the wrong type refused");
	is_int(req("{\"op\":1,\"sandbox\":\"s\",\"token\":\"t\",\"args\":{}}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "op of the wrong type refused");
	is_int(req("{\"op\":\"format\",\"sandbox\":\"s\",\"token\":\"t\",\"args\":{}}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "unknown op refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"a/b\",\"token\":\"t\",\"args\":{}}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "sandbox that is not an id refused");
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	is_int(req(fmt("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"%s\",\"args\":{}}", big),
	    MSG_FORM_TOKEN, &m), -EINVAL, "token over SPACE_TOKEN_MAX refused");
	big[SPACE_ID_MAX + 1] = '\0';
	is_int(req(fmt("{\"op\":\"exec\",\"sandbox\":\"%s\",\"token\":\"t\",\"args\":{}}", big),
	    MSG_FORM_TOKEN, &m), -EINVAL, "sandbox over SPACE_ID_MAX refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\",\"token\":\"u\",\"args\":{}}",
	    MSG_FORM_TOKEN, &m), -EINVAL, "duplicate key refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\",\"args\":{}} {}", MSG_FORM_TOKEN, &m),
	    -EINVAL, "trailing bytes refused");
	is_int(req("[{\"op\":\"exec\"}]", MSG_FORM_TOKEN, &m), -EINVAL, "an array is not a REQUEST");
	{
		/* args nested: the bound counts args itself as 1 */
		char deep[4 * SPACE_ARGS_DEPTH_MAX + 128];
		size_t o = 0;
		int d;

		o += (size_t)snprintf(deep + o, sizeof(deep) - o,
		    "{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\",\"args\":{\"x\":");
		for (d = 0; d < SPACE_ARGS_DEPTH_MAX - 1; d++)
			deep[o++] = '[';
		for (d = 0; d < SPACE_ARGS_DEPTH_MAX - 1; d++)
			deep[o++] = ']';
		o += (size_t)snprintf(deep + o, sizeof(deep) - o, "}}");
		is_int(req(deep, MSG_FORM_TOKEN, &m), 0, "args nested SPACE_ARGS_DEPTH_MAX deep decode");
		msg_request_free(&m);
		o = 0;
		o += (size_t)snprintf(deep + o, sizeof(deep) - o,
		    "{\"op\":\"exec\",\"sandbox\":\"s\",\"token\":\"t\",\"args\":{\"x\":");
		for (d = 0; d < SPACE_ARGS_DEPTH_MAX; d++)
			deep[o++] = '[';
		for (d = 0; d < SPACE_ARGS_DEPTH_MAX; d++)
			deep[o++] = ']';
		o += (size_t)snprintf(deep + o, sizeof(deep) - o, "}}");
		is_int(req(deep, MSG_FORM_TOKEN, &m), -EINVAL, "... one level more refused");
	}

	/* the claims form: the claims object, one spelling */
	is_int(req("{\"op\":\"fs.read\",\"sandbox\":\"sbx_1\",\"claims\":" CLAIMS ",\"args\":{}}",
	    MSG_FORM_CLAIMS, &m), 0, "REQUEST (claims form) decodes");
	ok(m.op == OP_FS_READ && m.claims.route.generation == 7 && m.claims.acc == (ACC_EXEC | ACC_FS_R),
	    "... with the claims decoded");
	ok(msg_request_encode(&m, MSG_FORM_CLAIMS, &s, &n) == 0 && strstr(s, "\"claims\":{") != NULL,
	    "... encodes the claims as an object");
	is_int(req(s, MSG_FORM_CLAIMS, &m2), 0, "... which decodes again");
	ok(memcmp(&m.claims, &m2.claims, sizeof(m.claims)) == 0, "... to the same claims");
	free(s);
	msg_request_free(&m);
	msg_request_free(&m2);
	is_int(req(fmt("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"claims\":\"%s\",\"args\":{}}",
	    "{}"), MSG_FORM_CLAIMS, &m), -EINVAL, "claims as a string (the old second spelling) refused");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"claims\":{\"iss\":\"space-control\"},\"args\":{}}",
	    MSG_FORM_CLAIMS, &m), -EACCES, "claims that are not claims: -EACCES (bad_claims)");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"claims\":{\"iss\":\"space-control\",\"adm\":1},"
	    "\"args\":{}}", MSG_FORM_CLAIMS, &m), -EACCES, "an unknown claim: -EACCES");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"claims\":{\"gen\":7.0},\"args\":{}}",
	    MSG_FORM_CLAIMS, &m), -EACCES, "a real where an integer claim goes: -EACCES");
	is_int(req("{\"op\":\"exec\",\"sandbox\":\"sbx_1\",\"token\":\"t\",\"claims\":" CLAIMS ",\"args\":{}}",
	    MSG_FORM_CLAIMS, &m), -EINVAL, "a token in the claims form refused");

	/* the guest form */
	is_int(req("{\"op\":\"fs.stat\",\"args\":{\"path\":\"/x\"}}", MSG_FORM_GUEST, &m), 0,
	    "REQUEST (guest form) decodes");
	msg_request_free(&m);
	is_int(req("{\"op\":\"fs.stat\",\"sandbox\":\"s\",\"args\":{}}", MSG_FORM_GUEST, &m), -EINVAL,
	    "a sandbox in the guest form refused");

	memset(&m, 0, sizeof(m));
	m.op = OP_EXEC;
	strcpy(m.sandbox, "bad id");
	m.args = json_object();
	ok(msg_request_encode(&m, MSG_FORM_CLAIMS, &s, &n) == -EINVAL && s == NULL,
	    "the encoder refuses what the decoder would");
	json_decref(m.args);
}

static void
test_response(void)
{
	struct msg_response m;
	const char *why;
	char *s;
	size_t n;
	const char *served = "{\"status\":200,\"result\":{\"size\":3},\"serving\":" IDENT "}";

#define RESP(t, form) msg_response_decode((t), strlen(t), (form), &m, &why)
	is_int(RESP(served, MSG_FORM_CLAIMS), 0, "RESPONSE (served) decodes");
	ok(m.serving.generation == 7 && json_integer_value(json_object_get(m.result, "size")) == 3,
	    "... serving and result");
	ok(msg_response_encode(&m, MSG_FORM_CLAIMS, &s, &n) == 0, "... encodes");
	msg_response_free(&m);
	is_int(RESP(s, MSG_FORM_CLAIMS), 0, "... and decodes again");
	msg_response_free(&m);
	free(s);
	is_int(RESP("{\"status\":200,\"result\":{}}", MSG_FORM_GUEST), 0, "RESPONSE (guest) decodes");
	msg_response_free(&m);
	is_int(RESP(served, MSG_FORM_GUEST), -EINVAL, "serving from the guest refused");
	is_int(RESP("{\"status\":200,\"result\":{}}", MSG_FORM_CLAIMS), -EINVAL, "missing serving refused");
	is_int(RESP("{\"status\":200}", MSG_FORM_GUEST), -EINVAL, "missing result refused");
	is_int(RESP("{\"status\":200,\"result\":{},\"x\":1}", MSG_FORM_GUEST), -EINVAL, "extra key refused");
	is_int(RESP("{\"status\":201,\"result\":{}}", MSG_FORM_GUEST), -EINVAL, "status other than 200 refused");
	is_int(RESP("{\"status\":\"200\",\"result\":{}}", MSG_FORM_GUEST), -EINVAL, "status as a string refused");
	is_int(RESP("{\"status\":200,\"result\":[]}", MSG_FORM_GUEST), -EINVAL, "result as an array refused");
	is_int(RESP("{\"status\":200,\"result\":{},\"result\":{}}", MSG_FORM_GUEST), -EINVAL,
	    "duplicate key refused");
	is_int(RESP("{\"status\":200,\"result\":{}}x", MSG_FORM_GUEST), -EINVAL, "trailing bytes refused");
	is_int(RESP("{\"status\":200,\"result\":{},\"serving\":{\"sandbox\":\"s\"}}", MSG_FORM_CLAIMS),
	    -EINVAL, "a partial serving identity refused");
#undef RESP
}

static void
test_error(void)
{
	struct msg_error m;
	const char *why;
	char *s, msg[SPACE_ERROR_MESSAGE_MAX + 2];
	size_t n;
	int sv[2];
	struct frame f;

#define ERR(t, srv) msg_error_decode((t), strlen(t), (srv), &m, &why)
	is_int(ERR("{\"status\":403,\"error\":\"deny\",\"reason\":\"bad_claims\",\"message\":\"no\"}", false),
	    0, "ERROR decodes");
	ok(m.status == 403 && strcmp(m.error, "deny") == 0 && strcmp(m.reason, "bad_claims") == 0 &&
	    m.has_message && strcmp(m.message, "no") == 0 && !m.has_serving, "... all its members");
	is_int(ERR("{\"status\":503,\"error\":\"unavailable\"}", false), 0, "reason and message are optional");
	ok(m.reason[0] == '\0' && !m.has_message, "... and absent when left out");
	is_int(ERR("{\"status\":409,\"error\":\"refresh_route\",\"serving\":" IDENT "}", true), 0,
	    "serving where sbx-manager adds it");
	ok(m.has_serving && m.serving.activation == 2, "... decoded");
	ok(msg_error_encode(&m, &s, &n) == 0, "... encodes");
	is_int(ERR(s, true), 0, "... and decodes again");
	free(s);
	is_int(ERR("{\"status\":409,\"error\":\"refresh_route\",\"serving\":" IDENT "}", false), -EINVAL,
	    "serving below sbx-manager refused");
	is_int(ERR("{\"status\":400,\"error\":\"x\",\"extra\":1}", false), -EINVAL, "extra key refused");
	is_int(ERR("{\"status\":400}", false), -EINVAL, "missing error refused");
	is_int(ERR("{\"error\":\"x\"}", false), -EINVAL, "missing status refused");
	is_int(ERR("{\"status\":200,\"error\":\"x\"}", false), -EINVAL, "status outside 400..599 refused");
	is_int(ERR("{\"status\":400.0,\"error\":\"x\"}", false), -EINVAL, "status as a real refused");
	is_int(ERR("{\"status\":400,\"error\":7}", false), -EINVAL, "error of the wrong type refused");
	is_int(ERR("{\"status\":400,\"error\":\"Bad Request\"}", false), -EINVAL,
	    "error that is not a code refused");
	is_int(ERR("{\"status\":400,\"error\":\"x\",\"reason\":null}", false), -EINVAL,
	    "reason null refused (left out, not null)");
	memset(msg, 'm', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	is_int(ERR(fmt("{\"status\":400,\"error\":\"x\",\"message\":\"%s\"}", msg), false), -EINVAL,
	    "message over SPACE_ERROR_MESSAGE_MAX refused");
	msg[SPACE_ERROR_MESSAGE_MAX] = '\0';
	is_int(ERR(fmt("{\"status\":400,\"error\":\"x\",\"message\":\"%s\"}", msg), false), 0,
	    "message of exactly SPACE_ERROR_MESSAGE_MAX accepted");
	is_int(ERR("{\"status\":400,\"error\":\"x\",\"error\":\"y\"}", false), -EINVAL, "duplicate key refused");
	is_int(ERR("{\"status\":400,\"error\":\"x\"}\n{}", false), -EINVAL, "trailing bytes refused");
	is_int(ERR("{\"status\":400,\"error\":\"x\",\"message\":\"a\\u0000b\"}", false), -EINVAL,
	    "a NUL inside the message refused");

	/* frame_write_error cuts an overlong message at a character boundary */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
		char long_msg[SPACE_ERROR_MESSAGE_MAX + 8];

		memset(long_msg, 'a', SPACE_ERROR_MESSAGE_MAX - 1);
		strcpy(long_msg + SPACE_ERROR_MESSAGE_MAX - 1, "\xc3\xa9zz");     /* é straddles the bound */
		is_int(frame_write_error(sv[0], 500, "internal", NULL, long_msg), 0,
		    "frame_write_error with an overlong message");
		if (frame_read(sv[1], &f) == 0) {
			is_int(ERR((char *)f.payload, false), 0, "... sends an ERROR that decodes");
			is_int(strlen(m.message), SPACE_ERROR_MESSAGE_MAX - 1, "... cut before the split character");
			frame_free(&f);
		} else
			ok(0, "read it");
		ok(frame_write_error(sv[0], 500, "Not A Code", NULL, NULL) == -EINVAL,
		    "frame_write_error refuses a code the decoder would refuse");
		close(sv[0]);
		close(sv[1]);
	}
#undef ERR
}

static void
test_challenge(void)
{
	struct msg_challenge_reply r, r2;
	struct msg_challenge c, c2;
	const char *why;
	char *s;
	size_t n;
	const char *mac = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8";

#define REP(t) msg_challenge_reply_decode((t), strlen(t), &r, &why)
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":2,\"mac\":\"%s\"}", mac)), 0,
	    "CHALLENGE_REPLY decodes");
	ok(strcmp(r.sandbox, "sbx_1") == 0 && r.generation == 7 && r.activation == 2 && r.mac[31] == 31,
	    "... its members");
	ok(msg_challenge_reply_encode(&r, &s, &n) == 0 && msg_challenge_reply_decode(s, n, &r2, &why) == 0 &&
	    memcmp(&r, &r2, sizeof(r)) == 0, "... round trip");
	msg_wipe_free(s);
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":2,\"mac\":\"%s\",\"x\":0}", mac)),
	    -EINVAL, "extra key refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"mac\":\"%s\"}", mac)), -EINVAL,
	    "missing activation refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":\"7\",\"activation\":2,\"mac\":\"%s\"}", mac)),
	    -EINVAL, "generation as a string refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":0,\"activation\":2,\"mac\":\"%s\"}", mac)),
	    -EINVAL, "generation 0 refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":4294967296,\"mac\":\"%s\"}", mac)),
	    -EINVAL, "activation over 2^32-1 refused");
	is_int(REP("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":2,\"mac\":\"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHg\"}"),
	    -EINVAL, "a MAC of 31 bytes refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":2,\"mac\":\"%sAA\"}", mac)),
	    -EINVAL, "an oversized MAC refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"sandbox\":\"sbx_2\",\"generation\":7,\"activation\":2,"
	    "\"mac\":\"%s\"}", mac)), -EINVAL, "duplicate key refused");
	is_int(REP(fmt("{\"sandbox\":\"sbx_1\",\"generation\":7,\"activation\":2,\"mac\":\"%s\"} ]", mac)),
	    -EINVAL, "trailing bytes refused");
#undef REP
	memset(&c, 7, sizeof(c));
	ok(msg_challenge_encode(&c, &s, &n) == 0 && msg_challenge_decode(s, n, &c2, &why) == 0 &&
	    memcmp(&c, &c2, sizeof(c)) == 0, "CHALLENGE round trip");
	free(s);
	ok(msg_challenge_decode("{\"nonce\":\"AA\",\"x\":1}", 20, &c2, &why) == -EINVAL,
	    "CHALLENGE with an extra key refused");
}

#define A_INSTALL "{\"revision\":5,\"action\":\"install\",\"identity\":" IDENT "," \
	"\"spec\":{\"template\":\"host\",\"resources\":{\"memory_mb\":256,\"pids\":64,\"cpu_percent\":50}," \
	"\"snapshot\":null}}"
#define A_RETIRE "{\"revision\":6,\"action\":\"retire\",\"identity\":" IDENT ",\"spec\":{\"snapshot\":true}}"
#define A_NET1 "{\"revision\":8,\"action\":\"network\",\"identity\":" IDENT "," \
	"\"spec\":{\"network\":{\"internet\":true,\"allow\":[\"10.0.0.0/8\"]}}}"
#define A_NET2 "{\"revision\":9,\"action\":\"network\",\"identity\":" IDENT "," \
	"\"spec\":{\"network\":{\"internet\":false}}}"
#define A_NET3 "{\"revision\":10,\"action\":\"network\",\"identity\":" IDENT "," \
	"\"spec\":{\"ports\":[8080,9000]}}"
#define A_NETOTHER "{\"revision\":11,\"action\":\"network\",\"identity\":" \
	"{\"sandbox\":\"sbx_1\",\"generation\":8,\"worker\":\"w1\",\"substrate\":\"jail\"," \
	"\"activation\":1,\"resident\":\"inc_1\"},\"spec\":{\"network\":{\"internet\":true}}}"
#define A_SNAP "{\"revision\":7,\"action\":\"snapshot\",\"identity\":" IDENT "," \
	"\"spec\":{\"snapshot_id\":\"snp_1\",\"name\":null}}"

static void
test_assignments(void)
{
	struct msg_assignments m, m2;
	struct msg_assignment a, a2;
	uint8_t w[MSG_ASSIGNMENT_WIRE_LEN], w2[MSG_ASSIGNMENT_WIRE_LEN];
	const char *why;
	char *s, *list;
	size_t n, i, o;

#define ANS(t) msg_assignments_decode((t), strlen(t), &m, &why)
	is_int(ANS("{\"revision\":7,\"assignments\":[" A_INSTALL "," A_RETIRE "," A_SNAP "]}"), 0,
	    "an assignments answer decodes");
	ok(m.revision == 7 && m.n == 3, "... three assignments at revision 7");
	ok(m.a[0].action == ASSIGN_INSTALL && !m.a[0].invalid && m.a[0].memory_mb == 256 &&
	    m.a[0].disk_mb == 0 && strcmp(m.a[0].template_name, "host") == 0 && m.a[0].snapshot[0] == 0,
	    "... install: template and resources, defaults left 0");
	ok(m.a[1].action == ASSIGN_RETIRE && m.a[1].want_snapshot && m.a[1].revision == 6,
	    "... retire with a snapshot");
	ok(m.a[2].action == ASSIGN_SNAPSHOT && strcmp(m.a[2].snapshot_id, "snp_1") == 0 &&
	    m.a[2].id.generation == 7, "... snapshot with its id");
	ok(msg_assignments_encode(&m, &s, &n) == 0, "... encodes");
	is_int(msg_assignments_decode(s, n, &m2, &why), 0, "... and decodes again");
	ok(m2.n == 3 && memcmp(m.a, m2.a, 3 * sizeof(*m.a)) == 0, "... to the same assignments");
	free(s);
	msg_assignments_free(&m2);

	/* the hand-off form */
	for (i = 0; i < 3; i++) {
		ok(msg_assignment_pack(&m.a[i], w) == 0 &&
		    msg_assignment_unpack(w, sizeof(w), &a, &why) == 0 &&
		    memcmp(&a, &m.a[i], sizeof(a)) == 0, "pack/unpack round trip (%zu)", i);
	}
	msg_assignment_pack(&m.a[0], w);
	is_int(msg_assignment_unpack(w, sizeof(w) - 1, &a, &why), -EINVAL, "unpack: short record refused");
	memcpy(w2, w, sizeof(w));
	w2[0] = MSG_ASSIGNMENT_WIRE_VERSION + 1;
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL, "unpack: other version refused");
	memcpy(w2, w, sizeof(w));
	w2[600] = 1;            /* a policy block without the network flag */
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: network bytes without the flag refused");
	memcpy(w2, w, sizeof(w));
	w2[40 + 10] = 'x';      /* after the NUL of the sandbox id */
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: bytes after a string's NUL refused");
	memcpy(w2, w, sizeof(w));
	memset(w2 + 40, 'a', SPACE_ID_MAX + 1);
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: a string without its NUL refused");
	memcpy(w2, w, sizeof(w));
	w2[1] = ASSIGN_RETIRE;  /* an install's fields in a retire */
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: fields of another action refused");
	memcpy(w2, w, sizeof(w));
	w2[40] = '/';
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: an identity that is not valid refused");
	msg_assignments_free(&m);

	/* network assignments queued one behind the other fold into one */
	is_int(ANS("{\"revision\":9,\"assignments\":[" A_NET1 "," A_NET2 "," A_NET3 "," A_NETOTHER "," A_RETIRE "]}"), 0,
	    "network assignments decode");
	a = m.a[0];
	ok(msg_assignment_fold(&a, &m.a[1]), "a policy change folds into the one queued before it");
	ok(a.revision == 8 && a.has_network && a.network.internet == false && !a.has_ports,
	    "... which keeps its revision and takes the later policy");
	ok(msg_assignment_fold(&a, &m.a[2]), "declared ports fold in too");
	ok(a.has_network && a.network.internet == false && a.has_ports && a.nports == 2 &&
	    a.ports[0] == 8080 && a.ports[1] == 9000, "... the policy kept, the ports taken");
	memcpy(&a2, &a, sizeof(a2));
	ok(!msg_assignment_fold(&a, &m.a[3]) && memcmp(&a, &a2, sizeof(a)) == 0,
	    "another generation's change does not fold, and changes nothing");
	ok(!msg_assignment_fold(&a, &m.a[4]) && memcmp(&a, &a2, sizeof(a)) == 0,
	    "a retirement does not fold");
	a2 = m.a[4];
	ok(!msg_assignment_fold(&a2, &m.a[1]), "nor into a retirement");
	msg_assignments_free(&m);

	is_int(ANS("{\"revision\":7,\"assignments\":[],\"x\":1}"), -EINVAL, "answer: extra key refused");
	is_int(ANS("{\"revision\":7}"), -EINVAL, "answer: missing assignments refused");
	is_int(ANS("{\"revision\":\"7\",\"assignments\":[]}"), -EINVAL, "answer: revision as a string refused");
	is_int(ANS("{\"revision\":7,\"revision\":8,\"assignments\":[]}"), -EINVAL, "answer: duplicate key refused");
	is_int(ANS("{\"revision\":7,\"assignments\":[]}7"), -EINVAL, "answer: trailing bytes refused");
	list = malloc((SPACE_ASSIGNMENTS_MAX + 1) * 3 + 64);
	o = (size_t)sprintf(list, "{\"revision\":1,\"assignments\":[");
	for (i = 0; i <= SPACE_ASSIGNMENTS_MAX; i++)
		o += (size_t)sprintf(list + o, "%s1", i ? "," : "");
	strcpy(list + o, "]}");
	is_int(ANS(list), -EINVAL, "answer: more than SPACE_ASSIGNMENTS_MAX refused");
	free(list);

	/* one bad assignment is kept as invalid, with what could be read */
	is_int(ANS("{\"revision\":9,\"assignments\":["
	    "{\"revision\":8,\"action\":\"install\",\"identity\":" IDENT ",\"spec\":{\"resources\":{\"memory_mb\":\"big\"}}},"
	    "{\"revision\":9,\"action\":\"install\",\"identity\":" IDENT ",\"spec\":{\"snapshot\":\"abc\"}},"
	    "{\"revision\":10,\"action\":\"retire\",\"identity\":" IDENT ",\"spec\":{},\"x\":1},"
	    "{\"revision\":11,\"action\":\"install\",\"identity\":null,\"spec\":{}},"
	    "{\"revision\":12,\"action\":\"format\",\"identity\":" IDENT ",\"spec\":{}},"
	    "{\"revision\":13,\"action\":\"install\",\"identity\":" IDENT ",\"spec\":{\"template\":\"host\",\"gpu\":1}},"
	    "{\"revision\":14,\"action\":\"retire\",\"identity\":" IDENT ",\"spec\":{\"snapshot\":\"yes\"}},"
	    "{\"revision\":15,\"action\":\"snapshot\",\"identity\":" IDENT ",\"spec\":{}}"
	    "]}"), 0, "an answer with bad assignments still decodes");
	ok(m.n == 8, "... all eight kept");
	ok(m.a[0].invalid && strcmp(m.a[0].invalid, "invalid spec") == 0 && m.a[0].action == ASSIGN_INSTALL &&
	    m.a[0].id.generation == 7 && m.a[0].revision == 8 && m.a[0].memory_mb == 0,
	    "resources of the wrong type: invalid spec, identity kept to report it");
	ok(m.a[1].invalid && strcmp(m.a[1].invalid, "invalid snapshot digest") == 0,
	    "a short snapshot digest: invalid snapshot digest");
	ok(m.a[2].invalid && m.a[2].revision == 10, "extra key in an assignment: invalid, revision kept");
	ok(m.a[3].invalid && m.a[3].id.sandbox[0] == '\0', "identity null: invalid, no identity");
	ok(m.a[4].invalid && m.a[4].action == ASSIGN_INVALID, "unknown action: invalid");
	ok(m.a[5].invalid && strcmp(m.a[5].invalid, "invalid spec") == 0, "unknown spec member: invalid");
	ok(m.a[6].invalid != NULL, "retire snapshot of the wrong type: invalid");
	ok(m.a[7].invalid != NULL, "snapshot without snapshot_id: invalid");
	ok(msg_assignment_pack(&m.a[0], w) == 0 && msg_assignment_unpack(w, sizeof(w), &a, &why) == 0 &&
	    a.invalid && strcmp(a.invalid, "invalid spec") == 0 && a.action == ASSIGN_INSTALL &&
	    a.id.generation == 7, "an invalid one crosses the hand-off with its reason and identity");
	msg_assignments_free(&m);

	/* network policies: with an install, and as their own action */
	is_int(ANS("{\"revision\":3,\"assignments\":["
	    "{\"revision\":2,\"action\":\"install\",\"identity\":" IDENT ",\"spec\":{\"network\":"
	    "{\"internet\":false,\"allow\":[\"203.0.113.0/24\",\"2001:db8::/32\"],\"deny\":[\"203.0.113.7/32\"]}}},"
	    "{\"revision\":3,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{\"network\":{\"internet\":true}}},"
	    "{\"revision\":4,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{}},"
	    "{\"revision\":5,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{\"network\":"
	    "{\"internet\":true,\"allow\":[\"10.0.0.1/8\"]}}},"
	    "{\"revision\":6,\"action\":\"retire\",\"identity\":" IDENT ",\"spec\":{\"network\":{\"internet\":true}}}"
	    "]}"), 0, "assignments with network policies decode");
	ok(m.n == 5 && !m.a[0].invalid && m.a[0].has_network && !m.a[0].network.internet &&
	    m.a[0].network.nallow == 2 && m.a[0].network.ndeny == 1 &&
	    m.a[0].network.allow[1].family == 6 && m.a[0].network.deny[0].prefix == 32,
	    "... install with internet off, two allowed, one denied");
	ok(!m.a[1].invalid && m.a[1].action == ASSIGN_NETWORK && m.a[1].network.internet &&
	    m.a[1].network.nallow == 0, "... a network action with internet on");
	ok(m.a[2].invalid && strcmp(m.a[2].invalid, "invalid network policy") == 0,
	    "... a network action without a policy: invalid");
	ok(m.a[3].invalid != NULL, "... a CIDR with host bits set: invalid");
	ok(m.a[4].invalid != NULL, "... a network member in a retire: invalid");
	for (i = 0; i < 2; i++)
		ok(msg_assignment_pack(&m.a[i], w) == 0 &&
		    msg_assignment_unpack(w, sizeof(w), &a, &why) == 0 &&
		    memcmp(&a, &m.a[i], sizeof(a)) == 0, "network pack/unpack round trip (%zu)", i);
	ok(msg_assignment_pack(&m.a[2], w) == 0 && msg_assignment_unpack(w, sizeof(w), &a, &why) == 0 &&
	    a.invalid && strcmp(a.invalid, "invalid network policy") == 0,
	    "an invalid network action crosses with its reason");
	msg_assignment_pack(&m.a[0], w);
	memcpy(w2, w, sizeof(w));
	w2[512 + 4 + 1] = 33;   /* first allow entry: a v4 prefix of 33 */
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: a policy entry that is not a canonical CIDR refused");
	memcpy(w2, w, sizeof(w));
	w2[2047] = 1;
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: a byte in the trailing padding refused");
	ok(msg_assignments_encode(&m, &s, &n) != 0, "an answer holding invalid ones does not encode");
	m.n = 2;
	ok(msg_assignments_encode(&m, &s, &n) == 0 && msg_assignments_decode(s, n, &m2, &why) == 0 &&
	    m2.n == 2 && memcmp(m.a, m2.a, 2 * sizeof(*m.a)) == 0, "network assignments encode and decode again");
	free(s);
	msg_assignments_free(&m2);
	m.n = 5;
	msg_assignments_free(&m);

	/* declared service ports: with an install, alone in a network action */
	is_int(ANS("{\"revision\":9,\"assignments\":["
	    "{\"revision\":7,\"action\":\"install\",\"identity\":" IDENT ",\"spec\":{\"ports\":[80,8080]}},"
	    "{\"revision\":8,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{\"ports\":[]}},"
	    "{\"revision\":9,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{\"ports\":[8080,80]}},"
	    "{\"revision\":10,\"action\":\"network\",\"identity\":" IDENT ",\"spec\":{\"ports\":[0]}},"
	    "{\"revision\":11,\"action\":\"retire\",\"identity\":" IDENT ",\"spec\":{\"ports\":[80]}}"
	    "]}"), 0, "assignments with declared ports decode");
	ok(m.n == 5 && !m.a[0].invalid && m.a[0].has_ports && m.a[0].nports == 2 &&
	    m.a[0].ports[0] == 80 && m.a[0].ports[1] == 8080 && !m.a[0].has_network,
	    "... install with two ports");
	ok(!m.a[1].invalid && m.a[1].action == ASSIGN_NETWORK && m.a[1].has_ports &&
	    m.a[1].nports == 0 && !m.a[1].has_network, "... a network action with no port left");
	ok(m.a[2].invalid && strcmp(m.a[2].invalid, "invalid ports") == 0, "... ports not ascending: invalid");
	ok(m.a[3].invalid != NULL, "... port 0: invalid");
	ok(m.a[4].invalid != NULL, "... ports in a retire: invalid");
	for (i = 0; i < 2; i++)
		ok(msg_assignment_pack(&m.a[i], w) == 0 &&
		    msg_assignment_unpack(w, sizeof(w), &a, &why) == 0 &&
		    memcmp(&a, &m.a[i], sizeof(a)) == 0, "ports pack/unpack round trip (%zu)", i);
	msg_assignment_pack(&m.a[0], w);
	memcpy(w2, w, sizeof(w));
	w2[1668 + 1 + 2] = 0;   /* second port below the first */
	w2[1668 + 1 + 3] = 1;
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: ports out of order refused");
	memcpy(w2, w, sizeof(w));
	w2[1668 + 1 + 2 * 5] = 1;  /* a port after the count */
	is_int(msg_assignment_unpack(w2, sizeof(w2), &a, &why), -EINVAL,
	    "unpack: a port past the count refused");
	m.n = 2;
	ok(msg_assignments_encode(&m, &s, &n) == 0 && msg_assignments_decode(s, n, &m2, &why) == 0 &&
	    m2.n == 2 && memcmp(m.a, m2.a, 2 * sizeof(*m.a)) == 0, "ports assignments encode and decode again");
	free(s);
	msg_assignments_free(&m2);
	m.n = 5;
	msg_assignments_free(&m);
#undef ANS
}

static void
test_admit_error(void)
{
	struct admit_error e;

	e = admit_error_code((struct admit_result){ ADMIT_DENY, R_BAD_SIGNATURE });
	ok(e.status == 403 && strcmp(e.code, "deny") == 0 && strcmp(e.reason, "bad_signature") == 0,
	    "deny -> 403 deny with its reason");
	e = admit_error_code((struct admit_result){ ADMIT_EXPIRED, R_EXPIRED });
	ok(e.status == 401 && strcmp(e.code, "capability_expired") == 0 && strcmp(e.reason, "expired") == 0,
	    "expired -> 401 capability_expired");
	e = admit_error_code((struct admit_result){ ADMIT_REFRESH_ROUTE, R_GENERATION });
	ok(e.status == 409 && strcmp(e.code, "refresh_route") == 0 &&
	    strcmp(e.reason, "generation_mismatch") == 0, "refresh_route -> 409 refresh_route");
	e = admit_error_code((struct admit_result){ (enum admit_outcome)42, R_NONE });
	ok(e.status == 403 && strcmp(e.code, "deny") == 0 && e.reason == NULL,
	    "an unknown outcome -> 403 deny (one default, never success)");
	e = admit_error_code((struct admit_result){ ADMIT_ALLOW, R_NONE });
	ok(e.status == 403 && strcmp(e.code, "deny") == 0, "ALLOW asked for as an error -> 403 deny");
}

/* a capability-shaped token signed by sk with footer f (NULL: none) */
static char *
token(const uint8_t sk[64], const char *f)
{
	char *t = NULL;

	paseto_v4_sign(sk, "{}", 2, f, CAPABILITY_IMPLICIT, &t);
	return t;
}

static void
test_token_grammar(void)
{
	uint8_t pk[32], sk[64];
	char pid[PASERK_K4_PID_LEN + 1], kid[PASERK_K4_PID_LEN + 1], foot[SPACE_FOOTER_MAX + 1];
	char f[256], *t;

	crypto_sign_keypair(pk, sk);
	paserk_k4_pid(pk, pid);
	snprintf(f, sizeof(f), "{\"kid\":\"%s\"}", pid);
	t = token(sk, f);
	ok(t && capability_token_kid(t, strlen(t), kid, foot) == 0 && strcmp(kid, pid) == 0,
	    "a capability token: its kid");
	free(t);
	/* the footers the old node-api grammar let through and the
	 * verifier refused: now both refuse them */
	snprintf(f, sizeof(f), "{\"kid\":\"%s\",\"x\":1}", pid);
	t = token(sk, f);
	ok(t && capability_token_kid(t, strlen(t), kid, foot) == -EINVAL, "footer with an extra key refused");
	free(t);
	t = token(sk, "{\"kid\":\"anything\"}");
	ok(t && capability_token_kid(t, strlen(t), kid, foot) == -EINVAL, "kid that is not a k4.pid refused");
	free(t);
	t = token(sk, NULL);
	ok(t && capability_token_kid(t, strlen(t), kid, foot) == -EINVAL, "no footer refused");
	free(t);
	snprintf(f, sizeof(f), "{\"kid\":\"%s\"}", pid);
	t = token(sk, f);
	if (t) {
		size_t n = strlen(t);
		char *u = malloc(n + 3);

		memcpy(u, t, n);
		memcpy(u + n, ".x", 3);         /* a fourth part */
		ok(capability_token_kid(u, n + 2, kid, foot) != 0, "a token with a fourth part refused");
		u[10] = '!';                    /* not base64url */
		ok(capability_token_kid(u, n, kid, foot) != 0, "a body that is not base64url refused");
		free(u);
	}
	free(t);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	test_request();
	test_response();
	test_error();
	test_challenge();
	test_assignments();
	test_admit_error();
	test_token_grammar();
	return done_testing();
}
