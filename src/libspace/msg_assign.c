/* Worker assignments (msg.h): the control plane's long-poll answer, read
 * by sbx-manager's control client, and the fixed-size binary form in which
 * one decoded assignment crosses from an unprivileged process of the
 * worker to its privileged one. */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "msg.h"
#include "util.h"

static const char *const action_names[] = {
	[ASSIGN_INSTALL] = "install",
	[ASSIGN_RETIRE] = "retire",
	[ASSIGN_SNAPSHOT] = "snapshot",
	[ASSIGN_NETWORK] = "network",
};
#define ACTION_COUNT (sizeof(action_names) / sizeof(action_names[0]))

static bool
only_members(json_t *o, const char *const *names, size_t n)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(o, k, v) {
		for (i = 0; i < n; i++)
			if (strcmp(k, names[i]) == 0)
				break;
		if (i == n)
			return false;
	}
	return true;
}

/* a snapshot digest: lowercase hex of SNAPSHOT_DIGEST_LEN bytes, the
 * spelling the snapshot store gives */
static bool
digest_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return i == SNAPSHOT_DIGEST_HEX;
}

/* resources: each given one an integer 1..2^32-1 (the worker applies its
 * own maxima and defaults) */
static bool
take_resources(json_t *res, struct msg_assignment *a)
{
	static const char *const names[] = { "memory_mb", "pids", "cpu_percent", "disk_mb" };
	uint32_t *dst[] = { &a->memory_mb, &a->pids, &a->cpu_percent, &a->disk_mb };
	json_t *v;
	size_t i;

	if (res == NULL || json_is_null(res))
		return true;
	if (!json_is_object(res) || !only_members(res, names, 4))
		return false;
	for (i = 0; i < 4; i++) {
		if ((v = json_object_get(res, names[i])) == NULL || json_is_null(v))
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > (json_int_t)UINT32_MAX)
			return false;
		*dst[i] = (uint32_t)json_integer_value(v);
	}
	return true;
}

/* "ports": strictly ascending integers 1..65535, at most
 * SPACE_PORTS_MAX: one encoding per list. Absent or null: none given. */
static bool
take_ports(json_t *v, struct msg_assignment *a)
{
	json_t *e;
	size_t i;
	json_int_t p, last = 0;

	if (v == NULL || json_is_null(v))
		return true;
	if (!json_is_array(v) || json_array_size(v) > SPACE_PORTS_MAX)
		return false;
	json_array_foreach(v, i, e) {
		if (!json_is_integer(e) || (p = json_integer_value(e)) < 1 || p > 65535 || p <= last)
			return false;
		a->ports[i] = (uint16_t)p;
		last = p;
	}
	a->nports = (uint8_t)json_array_size(v);
	a->has_ports = true;
	return true;
}

static json_t *
ports_json(const struct msg_assignment *a)
{
	json_t *l = json_array();
	uint8_t i;

	for (i = 0; l != NULL && i < a->nports; i++)
		if (json_array_append_new(l, json_integer(a->ports[i])) != 0) {
			json_decref(l);
			return NULL;
		}
	return l;
}

static const char *
take_spec(json_t *spec, struct msg_assignment *a)
{
	static const char *const install[] = { "template", "resources", "snapshot", "network",
	    "ports" };
	static const char *const network[] = { "network", "ports" };
	static const char *const retire[] = { "snapshot" };
	static const char *const snapshot[] = { "snapshot_id", "name" };
	json_t *v;

	/* a null spec is an empty one */
	if (spec != NULL && json_is_null(spec))
		spec = NULL;
	if (spec != NULL && !json_is_object(spec))
		return "invalid spec";
	switch (a->action) {
	case ASSIGN_INSTALL:
		if (spec == NULL)
			return NULL;
		if (!only_members(spec, install, 5))
			return "invalid spec";
		if (!take_ports(json_object_get(spec, "ports"), a))
			return "invalid ports";
		if ((v = json_object_get(spec, "network")) != NULL && !json_is_null(v)) {
			const char *nwhy;

			if (netpolicy_from_json(v, &a->network, &nwhy) != 0)
				return "invalid network policy";
			a->has_network = true;
		}
		if ((v = json_object_get(spec, "template")) != NULL &&
		    !msg_take_id(v, a->template_name, sizeof(a->template_name)))
			return "invalid spec";
		if (!take_resources(json_object_get(spec, "resources"), a))
			return "invalid spec";
		if ((v = json_object_get(spec, "snapshot")) != NULL && !json_is_null(v)) {
			if (!json_is_string(v) || json_string_length(v) != SNAPSHOT_DIGEST_HEX ||
			    !digest_valid(json_string_value(v)))
				return "invalid snapshot digest";
			memcpy(a->snapshot, json_string_value(v), SNAPSHOT_DIGEST_HEX + 1);
		}
		return NULL;
	case ASSIGN_RETIRE:
		if (spec == NULL)
			return NULL;
		if (!only_members(spec, retire, 1))
			return "invalid spec";
		if ((v = json_object_get(spec, "snapshot")) != NULL) {
			if (!json_is_boolean(v))
				return "invalid spec";
			a->want_snapshot = json_is_true(v);
		}
		return NULL;
	case ASSIGN_SNAPSHOT:
		if (spec == NULL || !only_members(spec, snapshot, 2) ||
		    !msg_take_id(json_object_get(spec, "snapshot_id"), a->snapshot_id,
		    sizeof(a->snapshot_id)))
			return "snapshot assignment without a valid snapshot_id";
		if ((v = json_object_get(spec, "name")) != NULL && !json_is_null(v) &&
		    !msg_take_id(v, a->name, sizeof(a->name)))
			return "invalid spec";
		return NULL;
	case ASSIGN_NETWORK: {
		const char *nwhy;

		json_t *n;

		if (spec == NULL || !only_members(spec, network, 2))
			return "invalid network policy";
		if (!take_ports(json_object_get(spec, "ports"), a))
			return "invalid ports";
		if ((n = json_object_get(spec, "network")) == NULL && a->has_ports)
			return NULL;
		if (netpolicy_from_json(n, &a->network, &nwhy) != 0)
			return "invalid network policy";
		a->has_network = true;
		return NULL;
	}
	default:
		return "unknown action";
	}
}

/* One assignment. Whatever could be read stays in *a (revision, action,
 * identity), so that the worker can skip it, or report an install it
 * cannot do as failed; the rest is cleared. */
static void
take_assignment(json_t *e, struct msg_assignment *a)
{
	static const char *const names[] = { "revision", "action", "identity", "spec" };
	json_t *v;
	const char *why = NULL;
	size_t i;

	memset(a, 0, sizeof(*a));
	if (!json_is_object(e)) {
		a->invalid = "assignment is not an object";
		return;
	}
	v = json_object_get(e, "revision");
	if (!json_is_integer(v) || json_integer_value(v) < 1) {
		a->invalid = "assignment without a revision";
		return;
	}
	a->revision = (uint64_t)json_integer_value(v);
	if (!only_members(e, names, 4)) {
		a->invalid = "unknown member in assignment";
		return;
	}
	v = json_object_get(e, "action");
	for (i = 1; v != NULL && json_is_string(v) && i < ACTION_COUNT; i++)
		if (strcmp(json_string_value(v), action_names[i]) == 0)
			a->action = (enum assign_action)i;
	if (a->action == ASSIGN_INVALID) {
		a->invalid = "unknown action";
		return;
	}
	if (route_identity_unpack(json_object_get(e, "identity"), &a->id) != 0) {
		memset(&a->id, 0, sizeof(a->id));
		a->invalid = "assignment without a valid identity";
		return;
	}
	if ((why = take_spec(json_object_get(e, "spec"), a)) != NULL) {
		enum assign_action act = a->action;
		struct route_identity id = a->id;
		uint64_t rev = a->revision;

		memset(a, 0, sizeof(*a));
		a->revision = rev;
		a->action = act;
		a->id = id;
		a->invalid = why;
	}
}

int
msg_assignments_decode(const void *buf, size_t len, struct msg_assignments *out,
    const char **why)
{
	json_error_t e;
	json_t *o, *v, *list;
	size_t i;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (buf == NULL || len == 0) {
		*why = "empty payload";
		return -EINVAL;
	}
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (o == NULL) {
		*why = json_error_code(&e) == json_error_duplicate_key ? "duplicate key" :
		    "not valid JSON";
		return -EINVAL;
	}
	if (!json_is_object(o) || json_object_size(o) != 2) {
		*why = "answer must hold exactly revision and assignments";
		goto out;
	}
	v = json_object_get(o, "revision");
	list = json_object_get(o, "assignments");
	if (!json_is_integer(v) || json_integer_value(v) < 0 || !json_is_array(list)) {
		*why = "answer must hold exactly revision and assignments";
		goto out;
	}
	if (json_array_size(list) > SPACE_ASSIGNMENTS_MAX) {
		*why = "too many assignments";
		goto out;
	}
	out->revision = (uint64_t)json_integer_value(v);
	out->n = json_array_size(list);
	if (out->n > 0 && (out->a = calloc(out->n, sizeof(*out->a))) == NULL) {
		*why = "out of memory";
		out->n = 0;
		r = -ENOMEM;
		goto out;
	}
	for (i = 0; i < out->n; i++)
		take_assignment(json_array_get(list, i), &out->a[i]);
	r = 0;
out:
	json_decref(o);
	return r;
}

/* one valid assignment as the control plane writes it */
static json_t *
assignment_json(const struct msg_assignment *a)
{
	json_t *o, *spec = NULL, *res;

	if (a->invalid != NULL || a->action <= ASSIGN_INVALID || a->action >= ACTION_COUNT ||
	    a->revision < 1 || a->revision > (uint64_t)INT64_MAX)
		return NULL;
	switch (a->action) {
	case ASSIGN_INSTALL:
		if ((a->template_name[0] && !id_valid(a->template_name)) ||
		    (a->snapshot[0] && !digest_valid(a->snapshot)))
			return NULL;
		spec = json_object();
		res = json_object();
		if (spec == NULL || res == NULL ||
		    (a->memory_mb && json_object_set_new(res, "memory_mb", json_integer(a->memory_mb))) ||
		    (a->pids && json_object_set_new(res, "pids", json_integer(a->pids))) ||
		    (a->cpu_percent &&
		    json_object_set_new(res, "cpu_percent", json_integer(a->cpu_percent))) ||
		    (a->disk_mb && json_object_set_new(res, "disk_mb", json_integer(a->disk_mb))) ||
		    (a->template_name[0] &&
		    json_object_set_new(spec, "template", json_string(a->template_name))) ||
		    json_object_set_new(spec, "resources", res) ||
		    (a->snapshot[0] && json_object_set_new(spec, "snapshot", json_string(a->snapshot)))) {
			json_decref(spec);
			return NULL;
		}
		if (a->has_network) {
			json_t *n = netpolicy_to_json(&a->network);

			if (n == NULL || json_object_set_new(spec, "network", n) != 0) {
				json_decref(spec);
				return NULL;
			}
		}
		if (a->has_ports) {
			json_t *n = ports_json(a);

			if (n == NULL || json_object_set_new(spec, "ports", n) != 0) {
				json_decref(spec);
				return NULL;
			}
		}
		break;
	case ASSIGN_NETWORK: {
		json_t *n = a->has_network ? netpolicy_to_json(&a->network) : NULL;

		if ((a->has_network && n == NULL) || (!a->has_network && !a->has_ports) ||
		    (spec = json_object()) == NULL) {
			json_decref(n);
			return NULL;
		}
		if ((n != NULL && json_object_set_new(spec, "network", n) != 0) ||
		    (a->has_ports && json_object_set_new(spec, "ports", ports_json(a)) != 0)) {
			json_decref(spec);
			return NULL;
		}
		break;
	}
	case ASSIGN_RETIRE:
		spec = json_pack("{s:b}", "snapshot", a->want_snapshot);
		break;
	case ASSIGN_SNAPSHOT:
		if (!id_valid(a->snapshot_id) || (a->name[0] && !id_valid(a->name)))
			return NULL;
		spec = a->name[0] ? json_pack("{s:s,s:s}", "snapshot_id", a->snapshot_id,
		    "name", a->name) : json_pack("{s:s}", "snapshot_id", a->snapshot_id);
		break;
	default:
		return NULL;
	}
	if (spec == NULL)
		return NULL;
	o = json_pack("{s:I,s:s,s:o,s:o}", "revision", (json_int_t)a->revision,
	    "action", action_names[a->action], "identity", route_identity_pack(&a->id),
	    "spec", spec);
	return o;
}

int
msg_assignments_encode(const struct msg_assignments *m, char **out, size_t *out_len)
{
	json_t *o, *list, *e;
	char *s;
	size_t i;

	*out = NULL;
	if (m->n > SPACE_ASSIGNMENTS_MAX || m->revision > (uint64_t)INT64_MAX)
		return -EINVAL;
	if ((list = json_array()) == NULL)
		return -ENOMEM;
	for (i = 0; i < m->n; i++) {
		if ((e = assignment_json(&m->a[i])) == NULL || json_array_append_new(list, e) != 0) {
			json_decref(list);
			return -EINVAL;
		}
	}
	if ((o = json_pack("{s:I,s:o}", "revision", (json_int_t)m->revision, "assignments",
	    list)) == NULL)
		return -ENOMEM;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return -ENOMEM;
	*out = s;
	if (out_len)
		*out_len = strlen(s);
	return 0;
}

void
msg_assignments_free(struct msg_assignments *m)
{
	if (m == NULL)
		return;
	free(m->a);
	m->a = NULL;
	m->n = 0;
}

/* ---- the fixed-size binary form ----
 *
 *   off  len
 *     0    1  version (MSG_ASSIGNMENT_WIRE_VERSION)
 *     1    1  action (enum assign_action; 0 when it was not readable)
 *     2    1  flags: bit 0 want_snapshot, bit 1 identity present
 *     3    1  0 = valid, else why it is invalid (an index into invalid_why)
 *     4    8  revision (0 only for an invalid one without a readable revision)
 *    12    8  generation
 *    20    4  activation
 *    24   16  memory_mb, pids, cpu_percent, disk_mb (4 each)
 *    40  471  strings, NUL-padded: sandbox 65, worker 65, substrate 16,
 *             resident 65, template 65, snapshot 65, snapshot_id 65, name 65
 *   511    1  zero
 *   512 1156  the network policy (netpolicy_pack) when flag bit 2 is set,
 *             else zero
 *  1668    1  declared ports: their count when flag bit 3 is set, else zero
 *  1669   64  SPACE_PORTS_MAX ports (2 each), strictly ascending, unused zero
 *  1733  315  zero
 * An invalid assignment carries its revision, action and identity (what
 * the worker needs to skip it or report it) and nothing else.
 */
#define F_WANT_SNAPSHOT 0x01u
#define F_IDENTITY      0x02u
#define F_NETWORK       0x04u
#define OFF_NETWORK     512
#define F_PORTS         0x08u
#define OFF_PORTS       1668
#define END_PORTS       (OFF_PORTS + 1 + 2 * SPACE_PORTS_MAX)
_Static_assert(OFF_NETWORK + NETPOLICY_WIRE_LEN <= OFF_PORTS, "ports overlap the policy");
_Static_assert(END_PORTS <= MSG_ASSIGNMENT_WIRE_LEN, "assignment record too small");
_Static_assert(OFF_NETWORK + NETPOLICY_WIRE_LEN <= MSG_ASSIGNMENT_WIRE_LEN, "assignment record too small");
#define OFF_STRINGS     40

/* every reason take_assignment() can give, so that one crosses as a byte */
static const char *const invalid_why[] = {
	NULL,
	"assignment is not an object",
	"assignment without a revision",
	"unknown member in assignment",
	"unknown action",
	"assignment without a valid identity",
	"invalid spec",
	"invalid snapshot digest",
	"snapshot assignment without a valid snapshot_id",
	"invalid network policy",
	"invalid ports",
};
#define NWHY (sizeof(invalid_why) / sizeof(invalid_why[0]))

static const struct {
	size_t off;                     /* into struct msg_assignment */
	size_t len;                     /* field size, NUL included */
} strs[] = {
	{ offsetof(struct msg_assignment, id.sandbox), SPACE_ID_MAX + 1 },
	{ offsetof(struct msg_assignment, id.worker), SPACE_ID_MAX + 1 },
	{ offsetof(struct msg_assignment, id.substrate), SPACE_SUBSTRATE_MAX + 1 },
	{ offsetof(struct msg_assignment, id.resident), SPACE_ID_MAX + 1 },
	{ offsetof(struct msg_assignment, template_name), SPACE_ID_MAX + 1 },
	{ offsetof(struct msg_assignment, snapshot), SNAPSHOT_DIGEST_HEX + 1 },
	{ offsetof(struct msg_assignment, snapshot_id), SPACE_ID_MAX + 1 },
	{ offsetof(struct msg_assignment, name), SPACE_ID_MAX + 1 },
};
#define NSTRS (sizeof(strs) / sizeof(strs[0]))

static void
be_put(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

static uint64_t
be_get(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++)
		v = (v << 8) | p[i];
	return v;
}

static size_t
why_index(const char *why)
{
	size_t i;

	if (why == NULL)
		return 0;
	for (i = 1; i < NWHY; i++)
		if (strcmp(why, invalid_why[i]) == 0)
			return i;
	return NWHY;
}

static bool
identity_valid(const struct route_identity *id)
{
	json_t *j = route_identity_pack(id);
	struct route_identity back;
	int r = j ? route_identity_unpack(j, &back) : -EINVAL;

	json_decref(j);
	return r == 0;
}

/* the rules of msg_assignments_decode, on an assignment in memory */
static const char *
assignment_check(const struct msg_assignment *a, bool has_id)
{
	bool install_fields = a->template_name[0] || a->snapshot[0] || a->memory_mb ||
	    a->pids || a->cpu_percent || a->disk_mb;
	bool snapshot_fields = a->snapshot_id[0] || a->name[0];

	if ((unsigned)a->action >= ACTION_COUNT)
		return "unknown action";
	if (a->revision > (uint64_t)INT64_MAX || (a->revision == 0 && a->invalid == NULL))
		return "assignment without a revision";
	if (has_id && !identity_valid(&a->id))
		return "assignment without a valid identity";
	if (a->invalid != NULL) {
		/* what an invalid one carries, and no more */
		if (install_fields || snapshot_fields || a->want_snapshot || a->has_network ||
		    a->has_ports || a->nports)
			return "fields in an invalid assignment";
		return NULL;
	}
	if (a->action == ASSIGN_INVALID)
		return "unknown action";
	if (!has_id)
		return "assignment without a valid identity";
	if (a->action != ASSIGN_INSTALL && install_fields)
		return "install fields in another action";
	if (a->action != ASSIGN_RETIRE && a->want_snapshot)
		return "retire fields in another action";
	if (a->action != ASSIGN_SNAPSHOT && snapshot_fields)
		return "snapshot fields in another action";
	if (a->has_network && a->action != ASSIGN_INSTALL && a->action != ASSIGN_NETWORK)
		return "network fields in another action";
	if (a->action == ASSIGN_NETWORK && !a->has_network && !a->has_ports)
		return "invalid network policy";
	if (a->has_ports && a->action != ASSIGN_INSTALL && a->action != ASSIGN_NETWORK)
		return "network fields in another action";
	{
		uint8_t i;

		if (a->nports > SPACE_PORTS_MAX || (!a->has_ports && a->nports))
			return "invalid ports";
		for (i = 0; i < a->nports; i++)
			if (a->ports[i] == 0 || (i > 0 && a->ports[i] <= a->ports[i - 1]))
				return "invalid ports";
		for (; i < SPACE_PORTS_MAX; i++)
			if (a->ports[i] != 0)
				return "invalid ports";
	}
	if (!a->has_network) {
		static const struct netpolicy zero;

		if (memcmp(&a->network, &zero, sizeof(zero)) != 0)
			return "network fields without the network flag";
	}
	if (a->template_name[0] && !id_valid(a->template_name))
		return "invalid spec";
	if (a->snapshot[0] && !digest_valid(a->snapshot))
		return "invalid snapshot digest";
	if (a->action == ASSIGN_SNAPSHOT && !id_valid(a->snapshot_id))
		return "snapshot assignment without a valid snapshot_id";
	if (a->name[0] && !id_valid(a->name))
		return "invalid spec";
	return NULL;
}

bool
msg_assignment_fold(struct msg_assignment *into, const struct msg_assignment *next)
{
	if (into->action != ASSIGN_NETWORK || next->action != ASSIGN_NETWORK ||
	    into->invalid != NULL || next->invalid != NULL ||
	    !route_identity_equal(&into->id, &next->id))
		return false;
	if (next->has_network) {
		into->has_network = true;
		into->network = next->network;
	}
	if (next->has_ports) {
		into->has_ports = true;
		into->nports = next->nports;
		memcpy(into->ports, next->ports, sizeof(into->ports));
	}
	return true;
}

int
msg_assignment_pack(const struct msg_assignment *a, uint8_t out[MSG_ASSIGNMENT_WIRE_LEN])
{
	bool has_id = a->id.sandbox[0] != '\0';
	size_t i, off = OFF_STRINGS, n, w = why_index(a->invalid);
	const char *s;

	memset(out, 0, MSG_ASSIGNMENT_WIRE_LEN);
	if (w == NWHY || assignment_check(a, has_id) != NULL)
		return -EINVAL;
	out[0] = MSG_ASSIGNMENT_WIRE_VERSION;
	out[1] = (uint8_t)a->action;
	out[2] = (uint8_t)((a->want_snapshot ? F_WANT_SNAPSHOT : 0) | (has_id ? F_IDENTITY : 0) |
	    (a->has_network ? F_NETWORK : 0) | (a->has_ports ? F_PORTS : 0));
	out[3] = (uint8_t)w;
	be_put(out + 4, a->revision, 8);
	be_put(out + 12, a->id.generation, 8);
	be_put(out + 20, a->id.activation, 4);
	be_put(out + 24, a->memory_mb, 4);
	be_put(out + 28, a->pids, 4);
	be_put(out + 32, a->cpu_percent, 4);
	be_put(out + 36, a->disk_mb, 4);
	for (i = 0; i < NSTRS; i++) {
		s = (const char *)a + strs[i].off;
		n = strnlen(s, strs[i].len);
		if (n == strs[i].len) {
			memset(out, 0, MSG_ASSIGNMENT_WIRE_LEN);
			return -EINVAL;
		}
		memcpy(out + off, s, n);
		off += strs[i].len;
	}
	if (a->has_network && netpolicy_pack(&a->network, out + OFF_NETWORK) != 0) {
		memset(out, 0, MSG_ASSIGNMENT_WIRE_LEN);
		return -EINVAL;
	}
	if (a->has_ports) {
		out[OFF_PORTS] = a->nports;
		for (i = 0; i < a->nports; i++)
			be_put(out + OFF_PORTS + 1 + 2 * i, a->ports[i], 2);
	}
	return 0;
}

int
msg_assignment_unpack(const uint8_t *buf, size_t len, struct msg_assignment *out,
    const char **why)
{
	struct msg_assignment a;
	bool has_id;
	size_t i, off = OFF_STRINGS, n, j;
	const char *bad;

	memset(out, 0, sizeof(*out));
	memset(&a, 0, sizeof(a));
	*why = "malformed assignment record";
	if (buf == NULL || len != MSG_ASSIGNMENT_WIRE_LEN || buf[0] != MSG_ASSIGNMENT_WIRE_VERSION ||
	    buf[1] >= ACTION_COUNT ||
	    (buf[2] & ~(F_WANT_SNAPSHOT | F_IDENTITY | F_NETWORK | F_PORTS)) != 0 ||
	    buf[3] >= NWHY || buf[OFF_NETWORK - 1] != 0)
		return -EINVAL;
	for (j = OFF_NETWORK + NETPOLICY_WIRE_LEN; j < OFF_PORTS; j++)
		if (buf[j] != 0)
			return -EINVAL;
	for (j = END_PORTS; j < MSG_ASSIGNMENT_WIRE_LEN; j++)
		if (buf[j] != 0)
			return -EINVAL;
	/* the list is checked (ascending, zero after it) by assignment_check */
	if (buf[OFF_PORTS] > SPACE_PORTS_MAX)
		return -EINVAL;
	a.has_ports = (buf[2] & F_PORTS) != 0;
	a.nports = buf[OFF_PORTS];
	for (j = 0; j < SPACE_PORTS_MAX; j++)
		a.ports[j] = (uint16_t)be_get(buf + OFF_PORTS + 1 + 2 * j, 2);
	if (buf[2] & F_NETWORK) {
		if (netpolicy_unpack(buf + OFF_NETWORK, NETPOLICY_WIRE_LEN, &a.network) != 0)
			return -EINVAL;
		a.has_network = true;
	} else {
		for (j = OFF_NETWORK; j < OFF_NETWORK + NETPOLICY_WIRE_LEN; j++)
			if (buf[j] != 0)
				return -EINVAL;
	}
	has_id = (buf[2] & F_IDENTITY) != 0;
	a.action = (enum assign_action)buf[1];
	a.want_snapshot = (buf[2] & F_WANT_SNAPSHOT) != 0;
	a.invalid = invalid_why[buf[3]];
	a.revision = be_get(buf + 4, 8);
	a.id.generation = be_get(buf + 12, 8);
	a.id.activation = (uint32_t)be_get(buf + 20, 4);
	a.memory_mb = (uint32_t)be_get(buf + 24, 4);
	a.pids = (uint32_t)be_get(buf + 28, 4);
	a.cpu_percent = (uint32_t)be_get(buf + 32, 4);
	a.disk_mb = (uint32_t)be_get(buf + 36, 4);
	for (i = 0; i < NSTRS; i++) {
		/* NUL-terminated inside its field and zero after it: one
		 * encoding per value, no stale bytes carried along */
		n = strnlen((const char *)buf + off, strs[i].len);
		if (n == strs[i].len)
			return -EINVAL;
		for (j = n; j < strs[i].len; j++)
			if (buf[off + j] != 0)
				return -EINVAL;
		memcpy((char *)&a + strs[i].off, buf + off, n + 1);
		off += strs[i].len;
	}
	if (!has_id && (a.id.generation || a.id.activation || a.id.sandbox[0] ||
	    a.id.worker[0] || a.id.substrate[0] || a.id.resident[0]))
		return -EINVAL;
	if ((bad = assignment_check(&a, has_id)) != NULL) {
		*why = bad;
		return -EINVAL;
	}
	*out = a;
	*why = NULL;
	return 0;
}
