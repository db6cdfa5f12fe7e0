/* Refusals counted per sandbox and outcome (REFRESH_ROUTE, DENY, EXPIRED),
 * for the sandbox's owner (docs/console.md, "Refused routes").
 *
 * A refusal counts for a sandbox this worker has a record of (serving,
 * retired or failed: a stale capability after a move lands on the old
 * record). Any other id a request names, valid-looking or garbage, counts
 * in one "unknown" bucket per outcome, so a caller cannot grow the table:
 * it holds at most REFUSALS_MAX sandboxes, and one more known sandbox when
 * it is full counts as unknown too (space_sbxmgr_refusals_unattributed_total
 * says how many).
 *
 * The heartbeat thread sends the counts since its last accepted report
 * (refusals_report), and takes them off once the control plane accepted
 * them (refusals_sent): an entry down to zero is dropped. A heartbeat lost
 * after the control plane committed it is sent again (counted twice), one
 * never sent is kept for the next. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "limits.h"
#include "sbx-manager.h"

#define REFUSALS_MAX 512

struct refusal_entry {
	char     sandbox[SPACE_ID_MAX + 1];
	uint64_t n[REFUSAL_OUTCOMES];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct refusal_entry table[REFUSALS_MAX];
static size_t used;
static uint64_t unknown[REFUSAL_OUTCOMES], unattributed[REFUSAL_OUTCOMES];

static const char *const outcome_key[REFUSAL_OUTCOMES] = { "refresh_route", "deny", "expired" };

static int
slot_of(enum admit_outcome o)
{
	switch (o) {
	case ADMIT_REFRESH_ROUTE: return 0;
	case ADMIT_DENY:          return 1;
	case ADMIT_EXPIRED:       return 2;
	default:                  return -1;
	}
}

void
refusals_count(const char *sandbox, bool known, enum admit_outcome o)
{
	int k = slot_of(o);
	size_t i;

	if (k < 0)
		return;
	pthread_mutex_lock(&mu);
	if (!known || sandbox == NULL || strlen(sandbox) > SPACE_ID_MAX) {
		unknown[k]++;
		goto out;
	}
	for (i = 0; i < used; i++)
		if (strcmp(table[i].sandbox, sandbox) == 0) {
			table[i].n[k]++;
			goto out;
		}
	if (used == REFUSALS_MAX) {
		unattributed[k]++;
		goto out;
	}
	memset(&table[used], 0, sizeof(table[used]));
	strcpy(table[used].sandbox, sandbox);
	table[used++].n[k] = 1;
out:
	pthread_mutex_unlock(&mu);
}

/* the first entries (at most max) as "refusals":[...] into body, a copy
 * into sent[] for refusals_sent; returns how many */
size_t
refusals_report(struct refusal_sent *sent, size_t max, char *body, size_t cap)
{
	size_t i, n = 0, off = 0;
	int w;

	pthread_mutex_lock(&mu);
	w = snprintf(body, cap, "\"refusals\":[");
	if (w < 0 || (size_t)w >= cap)
		goto full;
	off = (size_t)w;
	for (i = 0; i < used && n < max; i++) {
		w = snprintf(body + off, cap - off, "%s{\"sandbox\":\"%s\",\"refresh_route\":%llu,"
		    "\"deny\":%llu,\"expired\":%llu}", n ? "," : "", table[i].sandbox,
		    (unsigned long long)table[i].n[0], (unsigned long long)table[i].n[1],
		    (unsigned long long)table[i].n[2]);
		if (w < 0 || (size_t)w + 2 > cap - off)
			break;
		off += (size_t)w;
		memcpy(sent[n].sandbox, table[i].sandbox, sizeof(sent[n].sandbox));
		memcpy(sent[n].n, table[i].n, sizeof(sent[n].n));
		n++;
	}
	strcpy(body + off, "]");
full:
	pthread_mutex_unlock(&mu);
	if (n == 0 && cap > 0)
		body[0] = '\0';
	return n;
}

/* the control plane accepted what refusals_report put in the body */
void
refusals_sent(const struct refusal_sent *sent, size_t n)
{
	size_t i, j, k;

	pthread_mutex_lock(&mu);
	for (i = 0; i < n; i++)
		for (j = 0; j < used; j++) {
			if (strcmp(table[j].sandbox, sent[i].sandbox) != 0)
				continue;
			for (k = 0; k < REFUSAL_OUTCOMES; k++)
				table[j].n[k] -= sent[i].n[k] <= table[j].n[k] ? sent[i].n[k] : table[j].n[k];
			break;
		}
	/* drop the entries down to zero, keeping the others' order */
	for (i = j = 0; i < used; i++)
		if (table[i].n[0] || table[i].n[1] || table[i].n[2])
			table[j++] = table[i];
	used = j;
	pthread_mutex_unlock(&mu);
}

void
refusals_metrics(FILE *f)
{
	int k;

	pthread_mutex_lock(&mu);
	fprintf(f, "# TYPE space_sbxmgr_refusals_unknown_sandbox_total counter\n");
	for (k = 0; k < REFUSAL_OUTCOMES; k++)
		fprintf(f, "space_sbxmgr_refusals_unknown_sandbox_total{outcome=\"%s\"} %llu\n",
		    outcome_key[k], (unsigned long long)unknown[k]);
	fprintf(f, "# TYPE space_sbxmgr_refusals_unattributed_total counter\n");
	for (k = 0; k < REFUSAL_OUTCOMES; k++)
		fprintf(f, "space_sbxmgr_refusals_unattributed_total{outcome=\"%s\"} %llu\n",
		    outcome_key[k], (unsigned long long)unattributed[k]);
	fprintf(f, "# TYPE space_sbxmgr_refusals_pending gauge\nspace_sbxmgr_refusals_pending %zu\n",
	    used);
	pthread_mutex_unlock(&mu);
}
