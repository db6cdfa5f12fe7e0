/* Egress policies on the control plane (network.h, docs/network.md).
 *
 * Host names in a policy are resolved here, when the policy is set, with
 * the control plane's resolver; a worker receives addresses only, so no
 * privileged process of a worker ever parses a DNS answer for a policy.
 * Set the policy again to resolve again. */
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <arpa/inet.h>

#include "netpolicy.h"
#include "network.h"
#include "store_tx.h"

/* letters, digits, '-' and '.', labels of 1..63, at most 253 in all */
static bool
hostname_valid(const char *s)
{
	size_t n = strlen(s), label = 0, i;

	if (n == 0 || n > SPACE_NET_NAME_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0)
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '-') || ++label > 63)
			return false;
	}
	return label > 0 || n > 1;
}

static bool
cidr_add(struct net_cidr *list, uint8_t *n, const struct net_cidr *c)
{
	uint8_t i;

	for (i = 0; i < *n; i++)
		if (net_cidr_equal(&list[i], c))
			return true;
	if (*n >= SPACE_NET_LIST_MAX)
		return false;
	list[(*n)++] = *c;
	return true;
}

/* one list of the API form: each entry a CIDR (host bits cleared) or a
 * host name, resolved now; *given the canonical entries as given */
static int
resolve_list(json_t *in, struct net_cidr *out, uint8_t *n, json_t **given, char *why,
    size_t cap)
{
	struct addrinfo hints, *res, *ai;
	struct net_cidr c;
	char s[NET_CIDR_STR_MAX];
	json_t *e;
	size_t i;
	int rc;

	*n = 0;
	if (!json_is_array(in) || json_array_size(in) > SPACE_NET_LIST_MAX) {
		snprintf(why, cap, "\"allow\" and \"deny\" are arrays of at most %d entries",
		    SPACE_NET_LIST_MAX);
		return -EINVAL;
	}
	*given = json_array();
	json_array_foreach(in, i, e) {
		const char *v = json_is_string(e) ? json_string_value(e) : NULL;

		if (v != NULL && net_cidr_parse(v, false, &c) == 0) {
			net_cidr_format(&c, s);
			json_array_append_new(*given, json_string(s));
			if (!cidr_add(out, n, &c))
				goto too_many;
			continue;
		}
		if (v == NULL || !hostname_valid(v)) {
			snprintf(why, cap, "egress entry %zu is neither a CIDR nor a host name", i);
			return -EINVAL;
		}
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		if ((rc = getaddrinfo(v, NULL, &hints, &res)) != 0) {
			snprintf(why, cap, "cannot resolve \"%s\": %s", v, gai_strerror(rc));
			return -EINVAL;
		}
		for (ai = res; ai != NULL; ai = ai->ai_next) {
			memset(&c, 0, sizeof(c));
			if (ai->ai_family == AF_INET) {
				c.family = 4;
				c.prefix = 32;
				memcpy(c.addr, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, 4);
			} else if (ai->ai_family == AF_INET6) {
				c.family = 6;
				c.prefix = 128;
				memcpy(c.addr, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, 16);
			} else
				continue;
			if (!cidr_add(out, n, &c)) {
				freeaddrinfo(res);
				goto too_many;
			}
		}
		freeaddrinfo(res);
		json_array_append_new(*given, json_string(v));
	}
	return 0;
too_many:
	snprintf(why, cap, "an egress list resolves to more than %d addresses", SPACE_NET_LIST_MAX);
	return -EINVAL;
}

char *
net_policy_stored(json_t *in, const char *base, char *why, size_t cap)
{
	struct netpolicy p;
	json_t *b = base ? json_loads(base, 0, NULL) : NULL, *v, *allow = NULL, *deny = NULL;
	json_t *out = NULL, *resolved, *empty = json_array();
	const char *k;
	char *s = NULL;

	netpolicy_default(&p);
	if (!json_is_object(in)) {
		snprintf(why, cap, "\"network\" must be an object");
		goto out;
	}
	json_object_foreach(in, k, v) {
		if (strcmp(k, "internet") != 0 && strcmp(k, "allow") != 0 && strcmp(k, "deny") != 0) {
			snprintf(why, cap, "unknown member \"network.%s\"", k);
			goto out;
		}
	}
	v = json_object_get(in, "internet");
	if (v == NULL && b != NULL)
		v = json_object_get(b, "internet");
	if (v != NULL && !json_is_boolean(v)) {
		snprintf(why, cap, "\"network.internet\" must be a boolean");
		goto out;
	}
	p.internet = v == NULL || json_is_true(v);
	/* an absent list keeps the current one, resolved again */
	v = json_object_get(in, "allow");
	if (v == NULL)
		v = b ? json_object_get(b, "allow") : NULL;
	if (resolve_list(v ? v : empty, p.allow, &p.nallow, &allow, why, cap) != 0)
		goto out;
	v = json_object_get(in, "deny");
	if (v == NULL)
		v = b ? json_object_get(b, "deny") : NULL;
	if (resolve_list(v ? v : empty, p.deny, &p.ndeny, &deny, why, cap) != 0)
		goto out;
	if ((resolved = netpolicy_to_json(&p)) == NULL) {
		snprintf(why, cap, "invalid policy");
		goto out;
	}
	out = json_pack("{s:b,s:O,s:O,s:o}", "internet", p.internet, "allow", allow, "deny", deny,
	    "resolved", resolved);
	if (out != NULL)
		s = json_dumps(out, JSON_COMPACT);
out:
	json_decref(out);
	json_decref(allow);
	json_decref(deny);
	json_decref(b);
	json_decref(empty);
	return s;
}

int
net_spec_with_policy(struct store *s, const char *sandbox, const char *spec, char **out)
{
	char *stored = NULL;
	json_t *o, *p, *sp;
	int rc;

	*out = NULL;
	rc = R(s)->sandbox_network_get(s, NULL, sandbox, &stored);
	if (rc < 0)
		return rc;
	if (stored == NULL)
		return 0;
	p = json_loads(stored, 0, NULL);
	free(stored);
	sp = json_loads(spec, 0, NULL);
	o = p ? json_object_get(p, "resolved") : NULL;
	if (o == NULL || sp == NULL || json_object_set(sp, "network", o) != 0 ||
	    (*out = json_dumps(sp, JSON_COMPACT)) == NULL)
		rc = -EIO;
	json_decref(p);
	json_decref(sp);
	return rc < 0 ? rc : 0;
}
