/* The gateway hello codec: frames, the hello, the answer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gwhello.h"
#include "tap.h"

static int
dec(const char *json, struct gw_hello *h)
{
	const char *why = NULL;
	int rc = gwhello_decode(json, strlen(json), h, &why);

	if (rc != 0 && why == NULL)
		return -1000;   /* a refusal must say why */
	return rc;
}

static void
test_hello(void)
{
	struct gw_hello h, g;
	uint8_t *f;
	size_t n;
	const uint8_t *body;
	size_t blen;
	char big[SPACE_GWHELLO_MAX + 64];

	is_int(dec("{\"capability\":\"v4.public.abc\",\"port\":8080,\"proto\":\"http\"}", &h), 0,
	    "a hello decodes");
	ok(h.port == 8080 && h.proto == PROTO_HTTP && strcmp(h.capability, "v4.public.abc") == 0,
	    "... with its members");
	is_int(dec("{\"capability\":\"t\",\"port\":1,\"proto\":\"tcp\"}", &h), 0, "tcp, port 1");
	is_int(dec("{\"capability\":\"t\",\"port\":65535,\"proto\":\"tcp\"}", &h), 0, "port 65535");
	is_int(dec("{\"capability\":\"t\",\"port\":0,\"proto\":\"tcp\"}", &h), -EINVAL, "port 0 refused");
	is_int(dec("{\"capability\":\"t\",\"port\":65536,\"proto\":\"tcp\"}", &h), -EINVAL, "port 65536 refused");
	is_int(dec("{\"capability\":\"t\",\"port\":-1,\"proto\":\"tcp\"}", &h), -EINVAL, "a negative port refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80.0,\"proto\":\"tcp\"}", &h), -EINVAL, "a real port refused");
	is_int(dec("{\"capability\":\"t\",\"port\":\"80\",\"proto\":\"tcp\"}", &h), -EINVAL, "a string port refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80,\"proto\":\"udp\"}", &h), -EINVAL, "proto udp refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80,\"proto\":\"HTTP\"}", &h), -EINVAL, "proto is case-sensitive");
	is_int(dec("{\"capability\":\"\",\"port\":80,\"proto\":\"tcp\"}", &h), -EINVAL, "an empty capability refused");
	is_int(dec("{\"capability\":\"a b\",\"port\":80,\"proto\":\"tcp\"}", &h), -EINVAL, "a space in the capability refused");
	is_int(dec("{\"capability\":\"a\\u0000b\",\"port\":80,\"proto\":\"tcp\"}", &h), -EINVAL, "a NUL in the capability refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80}", &h), -EINVAL, "a missing member refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80,\"proto\":\"tcp\",\"x\":1}", &h), -EINVAL, "an unknown member refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80,\"port\":81,\"proto\":\"tcp\"}", &h), -EINVAL, "a duplicate member refused");
	is_int(dec("[1,2,3]", &h), -EINVAL, "an array refused");
	is_int(dec("{\"capability\":\"t\",\"port\":80,\"proto\":\"tcp\"} x", &h), -EINVAL, "trailing bytes refused");
	is_int(dec("", &h), -EINVAL, "empty refused");

	memset(&g, 0, sizeof(g));
	strcpy(g.capability, "v4.public.xyz");
	g.port = 3000;
	g.proto = PROTO_TCP;
	ok(gwhello_encode(&g, &f, &n) == 0 && n > GWHELLO_HDR_LEN, "a hello encodes");
	is_int(gwframe_parse(f, n, &body, &blen), (int)n, "its frame parses whole");
	is_int(gwframe_parse(f, n - 1, &body, &blen), 0, "one byte short: need more");
	is_int(gwframe_parse(f, 3, &body, &blen), 0, "three bytes of magic: need more");
	ok(gwhello_decode(body, blen, &h, &(const char *){NULL}) == 0 && h.port == 3000 &&
	    h.proto == PROTO_TCP && strcmp(h.capability, g.capability) == 0, "... and decodes back");
	free(f);
	g.port = 0;
	is_int(gwhello_encode(&g, &f, &n), -EINVAL, "port 0 is not encoded");

	/* a capability so long the JSON passes the frame bound */
	memset(&g, 0, sizeof(g));
	memset(g.capability, 'a', SPACE_TOKEN_MAX);
	g.port = 1;
	g.proto = PROTO_TCP;
	is_int(gwhello_encode(&g, &f, &n), -EINVAL, "a hello over the bound is not encoded");
	memset(big, ' ', sizeof(big));
	memcpy(big, "{\"capability\":\"t\",\"port\":80,\"proto\":\"tcp\"}", 42);
	big[sizeof(big) - 1] = '\0';
	is_int(dec(big, &h), -EINVAL, "a body over SPACE_GWHELLO_MAX refused");
}

static void
test_frame(void)
{
	uint8_t hdr[GWHELLO_HDR_LEN] = { 'S', 'G', 'W', '1', 0, 0, 0x10, 0 };
	const uint8_t *body;
	size_t blen;
	uint32_t l;

	ok(gwframe_header(hdr, &l) == 0 && l == 4096, "length 4096 accepted");
	hdr[7] = 1;
	is_int(gwframe_header(hdr, &l), -EINVAL, "length 4097 refused");
	memset(hdr + 4, 0, 4);
	is_int(gwframe_header(hdr, &l), -EINVAL, "length 0 refused");
	hdr[4] = 0x80;
	is_int(gwframe_header(hdr, &l), -EINVAL, "a huge length refused");
	is_int(gwframe_parse((const uint8_t *)"GET / HTTP/1.1\r\n", 16, &body, &blen), -EINVAL,
	    "an HTTP request is not a hello");
	is_int(gwframe_parse((const uint8_t *)"SGX", 3, &body, &blen), -EINVAL,
	    "a wrong magic is refused at its first wrong byte");
	is_int(gwframe_parse((const uint8_t *)"", 0, &body, &blen), 0, "nothing yet: need more");
}

static void
test_reply(void)
{
	struct gw_reply r;
	const char *why = NULL;
	uint8_t *f;
	size_t n;
	const uint8_t *body;
	size_t blen;

	ok(gwreply_decode("{\"ok\":true}", strlen("{\"ok\":true}"), &r, &why) == 0 && r.ok, "ok decodes");
	is_int(gwreply_decode("{\"ok\":false}", strlen("{\"ok\":false}"), &r, &why), -EINVAL, "ok false refused");
	is_int(gwreply_decode("{\"ok\":true,\"x\":1}", strlen("{\"ok\":true,\"x\":1}"), &r, &why), -EINVAL, "ok with more refused");
	ok(gwreply_decode("{\"error\":\"refresh_route\",\"message\":\"generation_mismatch\"}", strlen("{\"error\":\"refresh_route\",\"message\":\"generation_mismatch\"}"), &r, &why) == 0 &&
	    !r.ok && strcmp(r.error, "refresh_route") == 0 && strcmp(r.message, "generation_mismatch") == 0,
	    "an error decodes");
	is_int(gwreply_decode("{\"error\":\"Bad\",\"message\":\"\"}", strlen("{\"error\":\"Bad\",\"message\":\"\"}"), &r, &why), -EINVAL,
	    "an error code with capitals refused");
	is_int(gwreply_decode("{\"error\":\"x\"}", strlen("{\"error\":\"x\"}"), &r, &why), -EINVAL, "an error without message refused");
	is_int(gwreply_decode("{\"error\":\"x\",\"message\":\"a\\nb\"}", strlen("{\"error\":\"x\",\"message\":\"a\\nb\"}"), &r, &why), -EINVAL,
	    "a control character in the message refused");

	ok(gwreply_error("port_not_declared", "port 81 is not declared", &f, &n) == 0, "an error encodes");
	ok(gwframe_parse(f, n, &body, &blen) == (int)n && gwreply_decode(body, blen, &r, &why) == 0 &&
	    strcmp(r.error, "port_not_declared") == 0, "... and decodes back");
	free(f);
	memset(&r, 0, sizeof(r));
	r.ok = true;
	ok(gwreply_encode(&r, &f, &n) == 0 && n == GWHELLO_HDR_LEN + 11 &&
	    memcmp(f + GWHELLO_HDR_LEN, "{\"ok\":true}", 11) == 0, "ok encodes as {\"ok\":true}");
	free(f);
	is_int(gwreply_error("Bad Code", "x", &f, &n), -EINVAL, "a bad code is not encoded");
}

/* the check channel's numbered messages */
static void
test_check(void)
{
	static uint8_t buf[GWCHECK_HDR_LEN + SPACE_GWHELLO_MAX + 1];
	const uint8_t *body;
	size_t blen;
	uint64_t id;

	gwcheck_header(buf, GWCHECK_ASK, 0x0102030405060708ull);
	ok(memcmp(buf, "SGC1\x01\x02\x03\x04\x05\x06\x07\x08", GWCHECK_HDR_LEN) == 0,
	    "a check's header: its kind, then its number big-endian");
	memcpy(buf + GWCHECK_HDR_LEN, "{}", 2);
	ok(gwcheck_parse(GWCHECK_ASK, buf, GWCHECK_HDR_LEN + 2, &id, &body, &blen) == 0 &&
	    id == 0x0102030405060708ull && body == buf + GWCHECK_HDR_LEN && blen == 2,
	    "... parses back to its number and body");
	is_int(gwcheck_parse(GWCHECK_ANSWER, buf, GWCHECK_HDR_LEN + 2, &id, &body, &blen), -EINVAL,
	    "a check is not taken for an answer");
	is_int(gwcheck_parse(GWCHECK_ASK, buf, GWCHECK_HDR_LEN, &id, &body, &blen), -EINVAL,
	    "a check without a body refused");
	is_int(gwcheck_parse(GWCHECK_ASK, buf, 5, &id, &body, &blen), -EINVAL, "a short header refused");
	is_int(gwcheck_parse(GWCHECK_ASK, (const uint8_t *)"{\"ok\":true}", 11, &id, &body, &blen), -EINVAL,
	    "an answer without a number refused");
	gwcheck_header(buf, GWCHECK_ANSWER, 0);
	is_int(gwcheck_parse(GWCHECK_ANSWER, buf, GWCHECK_HDR_LEN + 2, &id, &body, &blen), -EINVAL,
	    "number 0 refused");
	gwcheck_header(buf, GWCHECK_ANSWER, 1);
	memset(buf + GWCHECK_HDR_LEN, ' ', SPACE_GWHELLO_MAX + 1);
	ok(gwcheck_parse(GWCHECK_ANSWER, buf, GWCHECK_HDR_LEN + SPACE_GWHELLO_MAX, &id, &body, &blen) == 0 &&
	    id == 1 && blen == SPACE_GWHELLO_MAX, "a body of the bound accepted");
	is_int(gwcheck_parse(GWCHECK_ANSWER, buf, sizeof(buf), &id, &body, &blen), -EINVAL,
	    "a body over the bound refused");
}

int
main(void)
{
	test_hello();
	test_frame();
	test_reply();
	test_check();
	return done_testing();
}
