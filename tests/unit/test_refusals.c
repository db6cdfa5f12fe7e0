/* sbx-manager's refusals counted per sandbox (src/sbx-manager/refusals.c):
 * the table is bounded, ids the worker does not know count in one bucket,
 * a report is valid JSON within its buffer, and what was sent is taken
 * off once accepted while what came meanwhile is kept. */
#include <stdio.h>
#include <string.h>
#include <jansson.h>

#include "../../src/sbx-manager/refusals.c"
#include "tap.h"

static struct refusal_sent sent[600];

/* the report as JSON: its "refusals" array (caller decrefs), NULL when
 * the text is not valid */
static json_t *
report(size_t max, size_t cap, size_t *n)
{
	static char body[64 << 10];
	char wrapped[sizeof(body) + 4];
	json_t *j, *a;

	*n = refusals_report(sent, max, body, cap);
	if (*n == 0)
		return json_array();
	snprintf(wrapped, sizeof(wrapped), "{%s}", body);
	if ((j = json_loads(wrapped, 0, NULL)) == NULL)
		return NULL;
	a = json_incref(json_object_get(j, "refusals"));
	json_decref(j);
	return a;
}

static long long
count_of(json_t *a, const char *sbx, const char *k)
{
	size_t i;
	json_t *e;

	json_array_foreach(a, i, e)
		if (strcmp(json_string_value(json_object_get(e, "sandbox")), sbx) == 0)
			return json_integer_value(json_object_get(e, k));
	return -1;
}

int
main(void)
{
	char id[32];
	size_t n, i;
	json_t *a;

	refusals_count("sbx_a", true, ADMIT_REFRESH_ROUTE);
	refusals_count("sbx_a", true, ADMIT_REFRESH_ROUTE);
	refusals_count("sbx_a", true, ADMIT_DENY);
	refusals_count("sbx_b", true, ADMIT_EXPIRED);
	refusals_count("sbx_a", true, ADMIT_ALLOW);             /* not a refusal */
	for (i = 0; i < 1000; i++) {                            /* made-up ids */
		snprintf(id, sizeof(id), "made_up_%zu", i);
		refusals_count(id, false, ADMIT_DENY);
	}
	is_int(used, 2, "two known sandboxes, one entry each; 1000 unknown ids none");
	is_int(unknown[1], 1000, "the unknown ids counted in the unknown bucket");

	a = report(48, 64 << 10, &n);
	ok(a != NULL && json_array_size(a) == 2 && n == 2, "the report is valid JSON with both");
	is_int(count_of(a, "sbx_a", "refresh_route"), 2, "sbx_a: 2 refresh_route");
	is_int(count_of(a, "sbx_a", "deny"), 1, "sbx_a: 1 deny");
	is_int(count_of(a, "sbx_b", "expired"), 1, "sbx_b: 1 expired");
	json_decref(a);

	/* a refusal between the report and its acceptance is kept */
	refusals_count("sbx_a", true, ADMIT_DENY);
	refusals_sent(sent, n);
	is_int(used, 1, "after acceptance only the entry with a newer count is left");
	a = report(48, 64 << 10, &n);
	is_int(count_of(a, "sbx_a", "deny"), 1, "... with that one count");
	is_int(count_of(a, "sbx_a", "refresh_route"), 0, "... and nothing sent twice");
	json_decref(a);
	refusals_sent(sent, n);
	is_int(used, 0, "all accepted: the table is empty");

	/* bounded: the 513th sandbox counts as unattributed */
	for (i = 0; i < REFUSALS_MAX + 10; i++) {
		snprintf(id, sizeof(id), "sbx_%zu", i);
		refusals_count(id, true, ADMIT_REFRESH_ROUTE);
	}
	is_int(used, REFUSALS_MAX, "the table stops at its bound");
	is_int(unattributed[0], 10, "the sandboxes beyond it are counted unattributed");

	/* a heartbeat carries at most max, and only what fits its buffer */
	a = report(48, 64 << 10, &n);
	ok(a != NULL && n == 48 && json_array_size(a) == 48, "48 at most in one report");
	json_decref(a);
	a = report(48, 300, &n);
	ok(a != NULL && n == json_array_size(a) && n >= 1 && n < 48,
	    "a small buffer: fewer, still valid JSON (%zu)", n);
	json_decref(a);
	/* drained heartbeat after heartbeat */
	for (i = 0; i < 20 && used > 0; i++) {
		json_decref(report(48, 64 << 10, &n));
		refusals_sent(sent, n);
	}
	is_int(used, 0, "drained in 11 heartbeats");
	refusals_count("sbx_new", true, ADMIT_DENY);
	is_int(used, 1, "room again for a new sandbox");
	return done_testing();
}
