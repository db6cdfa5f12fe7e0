/* The egress policy codec: CIDR text, the JSON form, the binary block. */
#include <errno.h>
#include <string.h>

#include "netpolicy.h"
#include "tap.h"

static void
test_cidr(void)
{
	struct net_cidr c;
	char s[NET_CIDR_STR_MAX];

	ok(net_cidr_parse("203.0.113.7", true, &c) == 0 && c.family == 4 && c.prefix == 32,
	    "a bare v4 address is a /32");
	net_cidr_format(&c, s);
	is_str(s, "203.0.113.7/32", "... formatted with its prefix");
	ok(net_cidr_parse("2001:db8::/32", true, &c) == 0 && c.family == 6 && c.prefix == 32,
	    "a v6 network");
	net_cidr_format(&c, s);
	is_str(s, "2001:db8::/32", "... formatted back");
	is_int(net_cidr_parse("10.1.2.3/8", true, &c), -EINVAL, "strict: host bits refused");
	ok(net_cidr_parse("10.1.2.3/8", false, &c) == 0 && c.addr[1] == 0 && c.addr[3] == 0,
	    "lax: host bits cleared");
	is_int(net_cidr_parse("10.0.0.0/33", false, &c), -EINVAL, "v4 prefix above 32 refused");
	is_int(net_cidr_parse("::/129", false, &c), -EINVAL, "v6 prefix above 128 refused");
	is_int(net_cidr_parse("10.0.0.0/08", false, &c), -EINVAL, "a prefix with a leading zero refused");
	is_int(net_cidr_parse("10.0.0.0/+8", false, &c), -EINVAL, "a signed prefix refused");
	is_int(net_cidr_parse("10.0.0.0/", false, &c), -EINVAL, "an empty prefix refused");
	is_int(net_cidr_parse("example.com", false, &c), -EINVAL, "a name is not a CIDR");
	is_int(net_cidr_parse("10.0.0.0/8 ", false, &c), -EINVAL, "a trailing space refused");
	ok(net_cidr_parse("0.0.0.0/0", true, &c) == 0 && c.prefix == 0, "the whole v4 space");
}

static void
test_json(void)
{
	struct netpolicy p, q;
	json_t *o, *j;
	const char *why = NULL;
	uint8_t w[NETPOLICY_WIRE_LEN], w2[NETPOLICY_WIRE_LEN];
	char buf[64];
	int i;

	o = json_loads("{\"internet\":false,\"allow\":[\"198.51.100.0/24\"],\"deny\":[\"fc00::/7\"]}", 0, NULL);
	ok(netpolicy_from_json(o, &p, &why) == 0 && !p.internet && p.nallow == 1 && p.ndeny == 1,
	    "a policy decodes");
	j = netpolicy_to_json(&p);
	ok(j != NULL && json_equal(j, o), "... and encodes to the same JSON");
	json_decref(j);
	json_decref(o);
	ok(netpolicy_pack(&p, w) == 0 && netpolicy_unpack(w, sizeof(w), &q) == 0 &&
	    netpolicy_equal(&p, &q), "binary round trip");
	memcpy(w2, w, sizeof(w));
	w2[4 + 2 + 5] = 1;      /* a v4 entry's address past its 4 bytes */
	is_int(netpolicy_unpack(w2, sizeof(w2), &q), -EINVAL, "binary: bytes past a v4 address refused");
	memcpy(w2, w, sizeof(w));
	w2[4 + 18 * 5] = 4;     /* an unused allow entry */
	is_int(netpolicy_unpack(w2, sizeof(w2), &q), -EINVAL, "binary: an unused entry not zero refused");
	memcpy(w2, w, sizeof(w));
	w2[1] = 3;
	is_int(netpolicy_unpack(w2, sizeof(w2), &q), -EINVAL, "binary: unknown flag refused");
	memcpy(w2, w, sizeof(w));
	w2[2] = SPACE_NET_LIST_MAX + 1;
	is_int(netpolicy_unpack(w2, sizeof(w2), &q), -EINVAL, "binary: a count above the limit refused");
	is_int(netpolicy_unpack(w, sizeof(w) - 1, &q), -EINVAL, "binary: short block refused");

#define BAD(t, d) do { o = json_loads((t), 0, NULL); \
	is_int(netpolicy_from_json(o, &q, &why), -EINVAL, d); json_decref(o); } while (0)
	BAD("{\"allow\":[]}", "internet is required");
	BAD("{\"internet\":1}", "internet must be a boolean");
	BAD("{\"internet\":true,\"x\":1}", "unknown member refused");
	BAD("{\"internet\":true,\"allow\":\"10.0.0.0/8\"}", "a list that is not an array refused");
	BAD("{\"internet\":true,\"allow\":[\"example.com\"]}", "a name in the worker's form refused");
	BAD("{\"internet\":true,\"deny\":[\"10.0.0.1/8\"]}", "host bits in the worker's form refused");
	BAD("[]", "not an object");
	o = json_pack("{s:b,s:[]}", "internet", 1, "allow");
	for (i = 0; i <= SPACE_NET_LIST_MAX; i++) {
		snprintf(buf, sizeof(buf), "192.0.2.%d", i);
		json_array_append_new(json_object_get(o, "allow"), json_string(buf));
	}
	is_int(netpolicy_from_json(o, &q, &why), -EINVAL, "more than SPACE_NET_LIST_MAX entries refused");
	json_decref(o);
#undef BAD
}

int
main(void)
{
	test_cidr();
	test_json();
	return done_testing();
}
