/* libFuzzer: the worker assignment codecs (msg.h) on arbitrary bytes.
 * First byte even: the control plane's long-poll answer (JSON); odd: the
 * fixed-size record of the hand-off between the worker's processes.
 * Invariants: every assignment the JSON decoder keeps crosses the hand-off
 * unchanged; an answer whose assignments are all valid re-encodes to one
 * that decodes the same; a record the binary decoder accepts is the
 * canonical encoding of what it decoded (pack gives the input back). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* field by field: struct padding is not part of the value */
static bool
same(const struct msg_assignment *a, const struct msg_assignment *b)
{
	if ((a->invalid == NULL) != (b->invalid == NULL) ||
	    (a->invalid != NULL && strcmp(a->invalid, b->invalid) != 0))
		return false;
	return a->revision == b->revision && a->action == b->action &&
	    route_identity_equal(&a->id, &b->id) &&
	    strcmp(a->template_name, b->template_name) == 0 && a->memory_mb == b->memory_mb &&
	    a->pids == b->pids && a->cpu_percent == b->cpu_percent && a->disk_mb == b->disk_mb &&
	    strcmp(a->snapshot, b->snapshot) == 0 && a->want_snapshot == b->want_snapshot &&
	    strcmp(a->snapshot_id, b->snapshot_id) == 0 && strcmp(a->name, b->name) == 0 &&
	    a->has_network == b->has_network && netpolicy_equal(&a->network, &b->network) &&
	    a->has_ports == b->has_ports && a->nports == b->nports &&
	    memcmp(a->ports, b->ports, sizeof(a->ports)) == 0;
}

static void
answer(const uint8_t *p, size_t n)
{
	struct msg_assignments m, m2;
	struct msg_assignment back;
	uint8_t w[MSG_ASSIGNMENT_WIRE_LEN];
	const char *why = NULL;
	bool all_valid = true;
	char *s = NULL;
	size_t i, len;

	if (msg_assignments_decode(p, n, &m, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (m.n > SPACE_ASSIGNMENTS_MAX)
		abort();
	for (i = 0; i < m.n; i++) {
		if (m.a[i].invalid != NULL)
			all_valid = false;
		if (msg_assignment_pack(&m.a[i], w) != 0 ||
		    msg_assignment_unpack(w, sizeof(w), &back, &why) != 0 || !same(&m.a[i], &back))
			abort();
	}
	if (all_valid) {
		if (msg_assignments_encode(&m, &s, &len) != 0 ||
		    msg_assignments_decode(s, len, &m2, &why) != 0 || m2.n != m.n ||
		    m2.revision != m.revision)
			abort();
		for (i = 0; i < m.n; i++)
			if (!same(&m.a[i], &m2.a[i]))
				abort();
		free(s);
		msg_assignments_free(&m2);
	}
	msg_assignments_free(&m);
}

static void
record(const uint8_t *p, size_t n)
{
	struct msg_assignment a;
	uint8_t w[MSG_ASSIGNMENT_WIRE_LEN];
	const char *why = NULL;

	if (msg_assignment_unpack(p, n, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (msg_assignment_pack(&a, w) != 0 || n != sizeof(w) || memcmp(w, p, n) != 0)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		record(data + 1, size - 1);
	else
		answer(data + 1, size - 1);
	return 0;
}
