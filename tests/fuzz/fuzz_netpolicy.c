/* libFuzzer: the egress policy codec (netpolicy.h) on arbitrary bytes.
 * First byte even: the JSON form (as an assignment spec carries it) and
 * the CIDR text; odd: the binary block. Invariants: a policy the JSON
 * decoder accepts encodes to JSON that decodes the same, and packs to a
 * block that unpacks the same; a block the binary decoder accepts is the
 * canonical encoding of what it decoded; a CIDR parsed strictly formats to
 * text that parses back to it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
text(const uint8_t *p, size_t n)
{
	struct netpolicy a, b;
	struct net_cidr c, d;
	uint8_t w[NETPOLICY_WIRE_LEN];
	char s[NET_CIDR_STR_MAX], *buf;
	const char *why = NULL;
	json_t *j, *k;

	if ((buf = malloc(n + 1)) == NULL)
		return;
	memcpy(buf, p, n);
	buf[n] = '\0';
	if (net_cidr_parse(buf, true, &c) == 0) {
		net_cidr_format(&c, s);
		if (net_cidr_parse(s, true, &d) != 0 || !net_cidr_equal(&c, &d))
			abort();
	}
	j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, NULL);
	free(buf);
	if (j == NULL)
		return;
	if (netpolicy_from_json(j, &a, &why) == 0) {
		if ((k = netpolicy_to_json(&a)) == NULL || netpolicy_from_json(k, &b, &why) != 0 ||
		    !netpolicy_equal(&a, &b))
			abort();
		json_decref(k);
		if (netpolicy_pack(&a, w) != 0 || netpolicy_unpack(w, sizeof(w), &b) != 0 ||
		    !netpolicy_equal(&a, &b))
			abort();
	} else if (why == NULL) {
		abort();
	}
	json_decref(j);
}

static void
block(const uint8_t *p, size_t n)
{
	struct netpolicy a;
	uint8_t w[NETPOLICY_WIRE_LEN];

	if (netpolicy_unpack(p, n, &a) != 0)
		return;
	if (netpolicy_pack(&a, w) != 0 || n != sizeof(w) || memcmp(w, p, n) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		block(data + 1, size - 1);
	else
		text(data + 1, size - 1);
	return 0;
}
