/* Egress policies on the control plane (docs/network.md): the API form
 * with host names, the stored form with the addresses they resolved to
 * when the policy was set, and what goes into a worker's assignments. */
#ifndef SPACE_CONTROL_NETWORK_H
#define SPACE_CONTROL_NETWORK_H
#include <jansson.h>
#include "store.h"

/* The stored form: {"internet":b,"allow":[as given],"deny":[as given],
 * "resolved":{"internet":b,"allow":[cidr],"deny":[cidr]}}; "resolved" is
 * exactly the worker's form (netpolicy.h). in: the API object (members
 * internet, allow, deny; absent ones are taken from base, the stored form
 * of the current policy, or the default: internet on, empty lists).
 * Names are resolved here, at policy time. Returns malloc'd JSON text or
 * NULL with *why (a message for a 400). */
char *net_policy_stored(json_t *in, const char *base, char *why, size_t why_cap);
/* spec (an install spec) with "network" set to the sandbox's resolved
 * policy; *out NULL when the sandbox has none (the worker's default) */
int net_spec_with_policy(struct store *s, const char *sandbox, const char *spec, char **out);
#endif
