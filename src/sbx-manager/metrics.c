/* Counters of sbx-manager and the audit log of refusals.
 * sbx-manager speaks no HTTP: it rewrites D/metrics.prom (Prometheus text,
 * atomically) every few seconds and node-api appends that file to its own
 * GET /metrics. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "ratebucket.h"
#include "sbx-manager.h"
#include "util.h"
#include "verifier.h"

#define REFUSAL_KINDS 32

static const char *const counter_names[MC__COUNT] = {
	[MC_REQUESTS] = "space_sbxmgr_requests_total",
	[MC_ALLOW] = "space_sbxmgr_forwarded_total",
	[MC_BAD_REQUEST] = "space_sbxmgr_bad_requests_total",
	[MC_BRIDGE_REFUSED] = "space_sbxmgr_bridge_refused_total",
	[MC_BRIDGE_UNREACHABLE] = "space_sbxmgr_bridge_unreachable_total",
	[MC_SERVING_MISMATCH] = "space_sbxmgr_serving_mismatch_total",
	[MC_LEASES_CANCELLED] = "space_sbxmgr_leases_cancelled_total",
	[MC_INSTALLS] = "space_sbxmgr_installs_total",
	[MC_INSTALL_FAILED] = "space_sbxmgr_install_failures_total",
	[MC_RETIRES] = "space_sbxmgr_retires_total",
	[MC_RELAUNCHES] = "space_sbxmgr_relaunches_total",
	[MC_PEER_REFUSED] = "space_sbxmgr_peer_refused_total",
	[MC_CONN_LIMIT] = "space_sbxmgr_connection_limit_total",
	[MC_RECLAIMS] = "space_sbxmgr_reclaimed_executions_total",
	[MC_ARCHIVES_COLLECTED] = "space_sbxmgr_archives_collected_total",
	[MC_BRIDGE_KEPT_USED] = "space_sbxmgr_bridge_kept_used_total",
	[MC_BRIDGE_KEPT_DROPPED] = "space_sbxmgr_bridge_kept_dropped_total",
	/* records.db transactions, and the records they wrote (group commit) */
	[MC_RECORD_COMMITS] = "space_sbxmgr_record_commits_total",
	[MC_RECORDS_WRITTEN] = "space_sbxmgr_records_written_total",
	/* prepared jails made, and claimed by an install (jailpool.c) */
	[MC_JAILPOOL_MADE] = "space_sbxmgr_jail_pool_made_total",
	[MC_JAILPOOL_CLAIMED] = "space_sbxmgr_jail_pool_claimed_total",
	/* bridge connections opened at an execution's start (bridgepool.c) */
	[MC_BRIDGE_OPENED_AHEAD] = "space_sbxmgr_bridge_opened_ahead_total",
	/* incremental archives made; installs from a kept image, as it was
	 * or with a delta restored onto it; restores built fresh again
	 * after a kept image or a delta failed (kept.c, layer.c) */
	[MC_ARCHIVES_INCREMENTAL] = "space_sbxmgr_archives_incremental_total",
	[MC_KEPT_AS_IS] = "space_sbxmgr_kept_layers_used_total",
	[MC_KEPT_ONTO] = "space_sbxmgr_kept_layers_restored_onto_total",
	[MC_RESTORE_AGAIN] = "space_sbxmgr_restores_again_total",
	/* network assignments folded into one still queued (assign.c) */
	[MC_NETWORK_FOLDED] = "space_sbxmgr_network_assignments_folded_total",
	/* checkpoints of serving layers recorded, and given up (checkpoint.c) */
	[MC_CHECKPOINTS] = "space_sbxmgr_checkpoints_total",
	[MC_CHECKPOINT_FAILED] = "space_sbxmgr_checkpoints_failed_total",
};

struct mgr_metrics {
	pthread_mutex_t lock;
	uint64_t counters[MC__COUNT];
	uint64_t disk[4];       /* exec, run, snapshots, kept: bytes allocated */
	bool disk_known;
	uint64_t admissions[4][R__COUNT];
	struct { const char *why; uint64_t n; } refusals[REFUSAL_KINDS];
};

int
metrics_init(struct mgr *m)
{
	struct mgr_metrics *ms = calloc(1, sizeof(*ms));

	if (ms == NULL)
		return -ENOMEM;
	pthread_mutex_init(&ms->lock, NULL);
	m->metrics = ms;
	return 0;
}

void
metrics_inc(struct mgr *m, enum mgr_counter c)
{
	struct mgr_metrics *ms = m->metrics;

	pthread_mutex_lock(&ms->lock);
	ms->counters[c]++;
	pthread_mutex_unlock(&ms->lock);
}

void
metrics_admission(struct mgr *m, enum admit_outcome o, enum admit_reason r)
{
	struct mgr_metrics *ms = m->metrics;

	if ((unsigned)o >= 4 || (unsigned)r >= R__COUNT)
		return;
	pthread_mutex_lock(&ms->lock);
	ms->admissions[o][r]++;
	pthread_mutex_unlock(&ms->lock);
}

/* why is always a static string from bridge.c / sockdiag.c */
void
metrics_bridge_refusal(struct mgr *m, const char *why)
{
	struct mgr_metrics *ms = m->metrics;
	int i;

	pthread_mutex_lock(&ms->lock);
	for (i = 0; i < REFUSAL_KINDS; i++) {
		if (ms->refusals[i].why == NULL)
			ms->refusals[i].why = why;
		if (ms->refusals[i].why == why || strcmp(ms->refusals[i].why, why) == 0) {
			ms->refusals[i].n++;
			break;
		}
	}
	pthread_mutex_unlock(&ms->lock);
}

/* the refusal counts of the serving bridges (each monitor keeps its own
 * in RUNDIR/metrics.prom, spaced-host/audit.c): their sample lines only */
static void
bridge_refusals(struct mgr *m, FILE *f)
{
	char path[PATH_MAX + 32], *buf, *line, *save;
	struct record_brief *recs = NULL;
	size_t n, i, len;

	fprintf(f, "# TYPE space_bridge_refusals_total counter\n");
	if (records_serving_brief(m, &recs, &n) != 0)
		return;
	for (i = 0; i < n; i++) {
		/* written by a bridge at its first refusal: most have none */
		snprintf(path, sizeof(path), "%s/metrics.prom", recs[i].run_dir);
		if (read_file(path, 64u << 10, &buf, &len) != 0)
			continue;
		for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
			if (strncmp(line, "space_bridge_refusals_total{", 28) == 0)
				fprintf(f, "%s\n", line);
		free(buf);
	}
	free(recs);
}

int
metrics_write(struct mgr *m)
{
	struct mgr_metrics *ms = m->metrics;
	char path[PATH_MAX + 32], *buf = NULL;
	size_t len = 0;
	struct vcache_stats vs;
	FILE *f;
	int i, o, r, ret;

	if ((f = open_memstream(&buf, &len)) == NULL)
		return -1;
	pthread_mutex_lock(&ms->lock);
	for (i = 0; i < MC__COUNT; i++)
		fprintf(f, "# TYPE %s counter\n%s %llu\n", counter_names[i], counter_names[i],
		    (unsigned long long)ms->counters[i]);
	fprintf(f, "# TYPE space_sbxmgr_admission_total counter\n");
	for (o = 0; o < 4; o++)
		for (r = 0; r < R__COUNT; r++)
			if (ms->admissions[o][r])
				fprintf(f, "space_sbxmgr_admission_total{outcome=\"%s\",reason=\"%s\"} %llu\n",
				    admit_outcome_str((enum admit_outcome)o),
				    admit_reason_str((enum admit_reason)r),
				    (unsigned long long)ms->admissions[o][r]);
	fprintf(f, "# TYPE space_sbxmgr_bridge_refusal_total counter\n");
	for (i = 0; i < REFUSAL_KINDS && ms->refusals[i].why; i++)
		fprintf(f, "space_sbxmgr_bridge_refusal_total{why=\"%s\"} %llu\n",
		    ms->refusals[i].why, (unsigned long long)ms->refusals[i].n);
	if (ms->disk_known)
		fprintf(f, "# TYPE space_sbxmgr_disk_bytes gauge\n"
		    "space_sbxmgr_disk_bytes{area=\"layers\"} %llu\n"
		    "space_sbxmgr_disk_bytes{area=\"run\"} %llu\n"
		    "space_sbxmgr_disk_bytes{area=\"snapshots\"} %llu\n"
		    "space_sbxmgr_disk_bytes{area=\"kept\"} %llu\n",
		    (unsigned long long)ms->disk[0], (unsigned long long)ms->disk[1],
		    (unsigned long long)ms->disk[2], (unsigned long long)ms->disk[3]);
	pthread_mutex_unlock(&ms->lock);
	fprintf(f, "# TYPE space_sbxmgr_leases gauge\nspace_sbxmgr_leases %u\n", lease_count(m));
	bridge_refusals(m, f);
	refusals_metrics(f);
	if (m->verifier) {
		verifier_stats(m->verifier, &vs);
		fprintf(f, "# TYPE space_sbxmgr_vcache_hits_total counter\n"
		    "space_sbxmgr_vcache_hits_total %llu\n"
		    "# TYPE space_sbxmgr_vcache_misses_total counter\n"
		    "space_sbxmgr_vcache_misses_total %llu\n"
		    "# TYPE space_sbxmgr_bundle_version gauge\n"
		    "space_sbxmgr_bundle_version %llu\n",
		    (unsigned long long)vs.hits, (unsigned long long)vs.misses,
		    (unsigned long long)verifier_bundle_version(m->verifier));
	}
	fclose(f);
	snprintf(path, sizeof(path), "%s/metrics.prom", m->cfg.data_dir);
	/* 0644: counters only, and node-api (unprivileged) appends them */
	ret = write_file_replace(path, buf, len, 0644);
	free(buf);
	return ret;
}

void
metrics_disk_set(struct mgr *m, uint64_t exec, uint64_t run, uint64_t snapshots, uint64_t kept)
{
	struct mgr_metrics *ms = m->metrics;

	pthread_mutex_lock(&ms->lock);
	ms->disk[0] = exec;
	ms->disk[1] = run;
	ms->disk[2] = snapshots;
	ms->disk[3] = kept;
	ms->disk_known = true;
	pthread_mutex_unlock(&ms->lock);
}

bool
metrics_disk_get(struct mgr *m, uint64_t out[3])
{
	struct mgr_metrics *ms = m->metrics;
	bool known;

	pthread_mutex_lock(&ms->lock);
	known = ms->disk_known;
	/* kept images are layers, to the control plane */
	out[0] = ms->disk[0] + ms->disk[3];
	out[1] = ms->disk[1];
	out[2] = ms->disk[2];
	pthread_mutex_unlock(&ms->lock);
	return known;
}

/* every 2 s the counters; every DISK_EVERY rounds the reclamation pass
 * (what a crash or a busy mount left) and the disk use, which walks the
 * data directory */
#define DISK_EVERY 5

void *
metrics_thread(void *arg)
{
	struct mgr *m = arg;
	char dir[PATH_MAX];
	unsigned n = 0;

	while (!atomic_load(&m->stopping)) {
		if (n++ % DISK_EVERY == 0) {
			uint64_t e, r, s;

			reclaim_resume(m);
			archive_gc_pass(m);
			snprintf(dir, sizeof(dir), "%s/exec", m->cfg.data_dir);
			e = reclaim_du(dir);
			snprintf(dir, sizeof(dir), "%s/run", m->cfg.data_dir);
			r = reclaim_du(dir);
			s = reclaim_du(m->cfg.snapshot_dir);
			snprintf(dir, sizeof(dir), "%s/kept", m->cfg.data_dir);
			metrics_disk_set(m, e, r, s, reclaim_du(dir));
		}
		metrics_write(m);
		sleep(2);
	}
	return NULL;
}

static char *
identity_json(const struct route_identity *id)
{
	json_t *j;
	char *s;

	if (id == NULL || id->sandbox[0] == '\0')
		return strdup("null");
	if ((j = route_identity_pack(id)) == NULL)
		return strdup("null");
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s ? s : strdup("null");
}

/* Refusal lines a second, and at once: anyone who reaches node-api can
 * have a request refused (a token of the right shape with a bad
 * signature), and each refusal writes a line. Past the bound the lines
 * are counted, not written; the next line written says how many were
 * not. The counters of metrics.prom count every refusal. */
#define AUDIT_LINES_PER_S 50
#define AUDIT_LINES_BURST 500

static struct {
	pthread_mutex_t mu;
	struct rate_bucket b;
	uint64_t suppressed;    /* lines not written since the last one */
} audit_rate = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* may a refusal line be written now? *missed: how many were not before it */
static bool
audit_line_allowed(uint64_t *missed)
{
	bool ok;

	pthread_mutex_lock(&audit_rate.mu);
	if ((ok = rate_take(&audit_rate.b, AUDIT_LINES_PER_S, AUDIT_LINES_BURST, now_mono_ns(),
	    NULL))) {
		*missed = audit_rate.suppressed;
		audit_rate.suppressed = 0;
	} else
		audit_rate.suppressed++;
	pthread_mutex_unlock(&audit_rate.mu);
	return ok;
}

void
audit_refusal(const char *what, const char *op, const char *sandbox,
    const struct capability *cap, const struct record *rec, const char *outcome,
    const char *reason)
{
	char *capj, *recj, *fields = NULL;
	uint64_t missed = 0;
	json_t *o;

	if (!audit_line_allowed(&missed))
		return;
	if (missed > 0)
		log_warnx("refused: %llu refusal lines were not written (more than %d a second); "
		    "metrics.prom counts every refusal", (unsigned long long)missed,
		    AUDIT_LINES_PER_S);
	capj = identity_json(cap ? &cap->route : NULL);
	recj = identity_json(rec ? &rec->id : NULL);

	/* ids, op names and reasons are validated or static; json_pack
	 * escapes anyway so a hostile value cannot forge log fields */
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s?, s:s?}", "audit", what,
	    "outcome", outcome, "reason", reason, "op", op ? op : "",
	    "sandbox", sandbox ? sandbox : "",
	    "record_state", rec ? exec_state_str(rec->state) : NULL,
	    "jti", cap && cap->jti[0] ? cap->jti : NULL);
	if (o != NULL) {
		fields = json_dumps(o, JSON_COMPACT);
		json_decref(o);
	}
	if (fields != NULL && capj != NULL && recj != NULL) {
		size_t l = strlen(fields);
		char *all = malloc(l + strlen(capj) + strlen(recj) + 64);
		if (all != NULL) {
			/* strip the braces of the object and add both identities */
			fields[l - 1] = '\0';
			sprintf(all, "%s,\"cap_route\":%s,\"record_route\":%s", fields + 1, capj, recj);
			log_event("warn", "refused", all);
			free(all);
		}
	}
	free(fields);
	free(capj);
	free(recj);
}
