/* Refusals at the bridge (DESIGN section 4: every non-ALLOW outcome is
 * counted and written to an audit line with both identities).
 *
 * The serving process runs the comparator and reports each refusal as a
 * typed message (hostmon.h); the monitor writes the audit line, with the
 * capability's route as reported and the record's route as the monitor
 * itself knows it (from its arguments, not from the serving process), and
 * keeps the counts in RUNDIR/metrics.prom (Prometheus text, rewritten
 * atomically on each refusal), which sbx-manager folds into its own. */
#include <inttypes.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "host.h"
#include "log.h"
#include "util.h"

static uint64_t counts[ADMIT_REFRESH_ROUTE + 1][R__COUNT];

static void
write_metrics(const struct host *h)
{
	char path[PATH_MAX], *buf = NULL;
	size_t len = 0;
	FILE *f;
	int o, r;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return;
	fprintf(f, "# TYPE space_bridge_refusals_total counter\n");
	for (o = ADMIT_DENY; o <= ADMIT_REFRESH_ROUTE; o++)
		for (r = 0; r < R__COUNT; r++)
			if (counts[o][r])
				fprintf(f, "space_bridge_refusals_total{sandbox=\"%s\",generation=\"%"
				    PRIu64 "\",activation=\"%" PRIu32 "\",outcome=\"%s\",reason=\"%s\"} %"
				    PRIu64 "\n", h->rec.id.sandbox, h->rec.id.generation,
				    h->rec.id.activation, admit_outcome_str((enum admit_outcome)o),
				    admit_reason_str((enum admit_reason)r), counts[o][r]);
	fclose(f);
	snprintf(path, sizeof(path), "%s/metrics.prom", h->cfg.run_dir);
	if (buf && write_file_replace(path, buf, len, 0600) < 0)
		log_warnx("cannot write %s", path);
	free(buf);
}

static json_t *
route_or_null(const struct route_identity *id)
{
	json_t *j;

	if (id->sandbox[0] == '\0' || (j = route_identity_pack(id)) == NULL)
		return json_null();
	return j;
}

void
refusal_record(const struct host *h, const struct hm_refusal *f)
{
	json_t *o;
	char *s;

	counts[f->outcome][f->reason]++;
	write_metrics(h);
	/* the same shape as sbx-manager's audit lines; json_pack escapes */
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:o, s:o}",
	    "audit", "bridge_admission",
	    "outcome", admit_outcome_str((enum admit_outcome)f->outcome),
	    "reason", admit_reason_str((enum admit_reason)f->reason),
	    "op", op_name((enum op_kind)f->op), "sandbox", f->target,
	    "jti", f->jti[0] ? f->jti : NULL,
	    "cap_route", route_or_null(&f->cap), "record_route", route_or_null(&h->rec.id));
	if (o == NULL || (s = json_dumps(o, JSON_COMPACT)) == NULL) {
		json_decref(o);
		return;
	}
	/* strip the braces: log_event appends fields to its own object */
	s[strlen(s) - 1] = '\0';
	log_event("warn", "refused", s + 1);
	free(s);
	json_decref(o);
}
