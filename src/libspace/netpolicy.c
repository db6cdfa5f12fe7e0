/* The egress policy codec (netpolicy.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "netpolicy.h"

void
netpolicy_default(struct netpolicy *p)
{
	memset(p, 0, sizeof(*p));
	p->internet = true;
}

static unsigned
addr_len(uint8_t family)
{
	return family == 4 ? 4 : 16;
}

bool
net_cidr_canonical(const struct net_cidr *c)
{
	unsigned len, i, bits;

	if (c->family != 4 && c->family != 6)
		return false;
	len = addr_len(c->family);
	if (c->prefix > len * 8)
		return false;
	for (i = 0; i < 16; i++) {
		if (i >= len) {
			if (c->addr[i] != 0)
				return false;
			continue;
		}
		/* the bits of byte i that lie past the prefix must be zero */
		bits = c->prefix > i * 8 ? c->prefix - i * 8 : 0;
		if (bits < 8 && (c->addr[i] & (uint8_t)(0xffu >> bits)) != 0)
			return false;
	}
	return true;
}

bool
net_cidr_equal(const struct net_cidr *a, const struct net_cidr *b)
{
	return a->family == b->family && a->prefix == b->prefix &&
	    memcmp(a->addr, b->addr, sizeof(a->addr)) == 0;
}

int
net_cidr_parse(const char *s, bool strict, struct net_cidr *out)
{
	char buf[NET_CIDR_STR_MAX];
	const char *slash;
	char *end;
	unsigned long n;
	size_t alen;
	unsigned i, bits, max;

	memset(out, 0, sizeof(*out));
	if (s == NULL || strlen(s) >= sizeof(buf))
		return -EINVAL;
	slash = strchr(s, '/');
	alen = slash ? (size_t)(slash - s) : strlen(s);
	memcpy(buf, s, alen);
	buf[alen] = '\0';
	if (inet_pton(AF_INET, buf, out->addr) == 1)
		out->family = 4;
	else if (inet_pton(AF_INET6, buf, out->addr) == 1)
		out->family = 6;
	else
		return -EINVAL;
	max = addr_len(out->family) * 8;
	if (slash == NULL) {
		out->prefix = (uint8_t)max;
		return 0;
	}
	/* decimal digits only, no sign, no leading zero, no spaces */
	if (slash[1] < '0' || slash[1] > '9' || (slash[1] == '0' && slash[2] != '\0'))
		return -EINVAL;
	errno = 0;
	n = strtoul(slash + 1, &end, 10);
	if (errno != 0 || *end != '\0' || n > max)
		return -EINVAL;
	out->prefix = (uint8_t)n;
	if (net_cidr_canonical(out))
		return 0;
	if (strict)
		return -EINVAL;
	for (i = 0; i < 16; i++) {
		bits = out->prefix > i * 8 ? out->prefix - i * 8 : 0;
		if (bits < 8)
			out->addr[i] &= (uint8_t)~(0xffu >> bits);
	}
	return 0;
}

void
net_cidr_format(const struct net_cidr *c, char out[NET_CIDR_STR_MAX])
{
	char a[INET6_ADDRSTRLEN];

	if (inet_ntop(c->family == 4 ? AF_INET : AF_INET6, c->addr, a, sizeof(a)) == NULL) {
		out[0] = '\0';
		return;
	}
	snprintf(out, NET_CIDR_STR_MAX, "%s/%u", a, (unsigned)c->prefix);
}

static int
list_from_json(json_t *v, struct net_cidr *dst, uint8_t *n, const char **why)
{
	size_t i;
	json_t *e;

	*n = 0;
	if (v == NULL)
		return 0;
	if (!json_is_array(v)) {
		*why = "allow and deny must be arrays";
		return -EINVAL;
	}
	if (json_array_size(v) > SPACE_NET_LIST_MAX) {
		*why = "too many entries in an egress list";
		return -EINVAL;
	}
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || net_cidr_parse(json_string_value(e), true, &dst[i]) != 0) {
			*why = "an egress list entry is not a canonical CIDR";
			return -EINVAL;
		}
	}
	*n = (uint8_t)json_array_size(v);
	return 0;
}

int
netpolicy_from_json(json_t *o, struct netpolicy *p, const char **why)
{
	const char *k;
	json_t *v;

	memset(p, 0, sizeof(*p));
	if (!json_is_object(o)) {
		*why = "network must be an object";
		return -EINVAL;
	}
	json_object_foreach(o, k, v) {
		if (strcmp(k, "internet") != 0 && strcmp(k, "allow") != 0 && strcmp(k, "deny") != 0) {
			*why = "unknown member in network";
			return -EINVAL;
		}
	}
	v = json_object_get(o, "internet");
	if (!json_is_boolean(v)) {
		*why = "network.internet must be a boolean";
		return -EINVAL;
	}
	p->internet = json_is_true(v);
	if (list_from_json(json_object_get(o, "allow"), p->allow, &p->nallow, why) != 0 ||
	    list_from_json(json_object_get(o, "deny"), p->deny, &p->ndeny, why) != 0) {
		memset(p, 0, sizeof(*p));
		return -EINVAL;
	}
	return 0;
}

static json_t *
list_to_json(const struct net_cidr *l, uint8_t n)
{
	char s[NET_CIDR_STR_MAX];
	json_t *a = json_array();
	uint8_t i;

	for (i = 0; a != NULL && i < n; i++) {
		if (!net_cidr_canonical(&l[i])) {
			json_decref(a);
			return NULL;
		}
		net_cidr_format(&l[i], s);
		if (json_array_append_new(a, json_string(s)) != 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

json_t *
netpolicy_to_json(const struct netpolicy *p)
{
	json_t *allow, *deny;

	if (p->nallow > SPACE_NET_LIST_MAX || p->ndeny > SPACE_NET_LIST_MAX)
		return NULL;
	allow = list_to_json(p->allow, p->nallow);
	deny = list_to_json(p->deny, p->ndeny);
	if (allow == NULL || deny == NULL) {
		json_decref(allow);
		json_decref(deny);
		return NULL;
	}
	return json_pack("{s:b,s:o,s:o}", "internet", p->internet, "allow", allow, "deny", deny);
}

bool
netpolicy_equal(const struct netpolicy *a, const struct netpolicy *b)
{
	uint8_t i;

	if (a->internet != b->internet || a->nallow != b->nallow || a->ndeny != b->ndeny)
		return false;
	for (i = 0; i < a->nallow && i < SPACE_NET_LIST_MAX; i++)
		if (!net_cidr_equal(&a->allow[i], &b->allow[i]))
			return false;
	for (i = 0; i < a->ndeny && i < SPACE_NET_LIST_MAX; i++)
		if (!net_cidr_equal(&a->deny[i], &b->deny[i]))
			return false;
	return true;
}

int
netpolicy_pack(const struct netpolicy *p, uint8_t out[NETPOLICY_WIRE_LEN])
{
	uint8_t *e;
	unsigned i;

	memset(out, 0, NETPOLICY_WIRE_LEN);
	if (p->nallow > SPACE_NET_LIST_MAX || p->ndeny > SPACE_NET_LIST_MAX)
		return -EINVAL;
	out[0] = 1;
	out[1] = p->internet ? 1 : 0;
	out[2] = p->nallow;
	out[3] = p->ndeny;
	for (i = 0; i < p->nallow + p->ndeny; i++) {
		const struct net_cidr *c = i < p->nallow ? &p->allow[i] : &p->deny[i - p->nallow];

		if (!net_cidr_canonical(c)) {
			memset(out, 0, NETPOLICY_WIRE_LEN);
			return -EINVAL;
		}
		e = out + 4 + (i < p->nallow ? i : SPACE_NET_LIST_MAX + i - p->nallow) *
		    NETPOLICY_ENTRY_LEN;
		e[0] = c->family;
		e[1] = c->prefix;
		memcpy(e + 2, c->addr, 16);
	}
	return 0;
}

int
netpolicy_unpack(const uint8_t *buf, size_t len, struct netpolicy *p)
{
	const uint8_t *e;
	struct net_cidr *c;
	unsigned i, k;

	memset(p, 0, sizeof(*p));
	if (buf == NULL || len != NETPOLICY_WIRE_LEN || buf[0] != 1 || (buf[1] & ~1u) != 0 ||
	    buf[2] > SPACE_NET_LIST_MAX || buf[3] > SPACE_NET_LIST_MAX)
		return -EINVAL;
	p->internet = buf[1] & 1u;
	p->nallow = buf[2];
	p->ndeny = buf[3];
	for (i = 0; i < 2 * SPACE_NET_LIST_MAX; i++) {
		bool deny = i >= SPACE_NET_LIST_MAX;
		unsigned idx = deny ? i - SPACE_NET_LIST_MAX : i;
		bool used = idx < (deny ? p->ndeny : p->nallow);

		e = buf + 4 + i * NETPOLICY_ENTRY_LEN;
		if (!used) {
			/* one encoding per policy: unused entries are zero */
			for (k = 0; k < NETPOLICY_ENTRY_LEN; k++)
				if (e[k] != 0)
					goto bad;
			continue;
		}
		c = deny ? &p->deny[idx] : &p->allow[idx];
		c->family = e[0];
		c->prefix = e[1];
		memcpy(c->addr, e + 2, 16);
		if (!net_cidr_canonical(c))
			goto bad;
	}
	return 0;
bad:
	memset(p, 0, sizeof(*p));
	return -EINVAL;
}
