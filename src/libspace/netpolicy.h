/* A sandbox's egress policy (DESIGN section 15, docs/network.md): internet
 * on or off, an allow list and a deny list of CIDRs. Host names are
 * resolved by the control plane when the policy is set; what crosses to a
 * worker is addresses only.
 *
 * Three encodings, one codec: the JSON object of the API and of the
 * assignment spec ({"internet": bool, "allow": [cidr...], "deny":
 * [cidr...]}), the fixed-size binary block inside an assignment record
 * (msg_assign.c), and the text a CIDR is written as. Every decoder is
 * strict: unknown members, non-canonical CIDRs (host bits set), too many
 * entries are refused. */
#ifndef SPACE_NETPOLICY_H
#define SPACE_NETPOLICY_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "limits.h"

#define NET_CIDR_STR_MAX 64             /* "ffff:...:ffff/128" + NUL, with room */

struct net_cidr {
	uint8_t family;                 /* 4 or 6 */
	uint8_t prefix;                 /* 0..32 or 0..128 */
	uint8_t addr[16];               /* network address, host bits zero */
};

struct netpolicy {
	bool internet;                  /* default true */
	uint8_t nallow, ndeny;
	struct net_cidr allow[SPACE_NET_LIST_MAX];
	struct net_cidr deny[SPACE_NET_LIST_MAX];
};

/* internet on, empty lists */
void netpolicy_default(struct netpolicy *p);

/* "a.b.c.d", "a.b.c.d/n", "x::y", "x::y/n". strict: host bits must be
 * zero (the canonical form); otherwise they are cleared. 0 or -EINVAL. */
int net_cidr_parse(const char *s, bool strict, struct net_cidr *out);
void net_cidr_format(const struct net_cidr *c, char out[NET_CIDR_STR_MAX]);
bool net_cidr_canonical(const struct net_cidr *c);
bool net_cidr_equal(const struct net_cidr *a, const struct net_cidr *b);

/* the JSON form. from_json: exactly the members internet (required),
 * allow and deny (optional arrays of canonical CIDR strings); 0 or -EINVAL
 * with *why. to_json: NULL on an invalid policy. */
int netpolicy_from_json(json_t *o, struct netpolicy *p, const char **why);
json_t *netpolicy_to_json(const struct netpolicy *p);
bool netpolicy_equal(const struct netpolicy *a, const struct netpolicy *b);

/* The binary block: byte 0 version (1), byte 1 flags (bit 0 internet),
 * bytes 2, 3 nallow, ndeny, then SPACE_NET_LIST_MAX allow entries and as
 * many deny entries of 18 bytes each (family, prefix, 16 address bytes).
 * Unused entries and the bytes of a v4 address past 4 are zero. */
#define NETPOLICY_ENTRY_LEN 18
#define NETPOLICY_WIRE_LEN  (4 + 2 * SPACE_NET_LIST_MAX * NETPOLICY_ENTRY_LEN)
int netpolicy_pack(const struct netpolicy *p, uint8_t out[NETPOLICY_WIRE_LEN]);
int netpolicy_unpack(const uint8_t *buf, size_t len, struct netpolicy *p);
#endif
