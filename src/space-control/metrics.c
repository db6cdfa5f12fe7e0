/* Prometheus metrics of space-control, and the two unauthenticated
 * liveness endpoints. Label values come from fixed tables (route patterns,
 * purposes, failure kinds), never from what a peer sent, so the series
 * count stays bounded. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "http.h"

#define REQ_SERIES_MAX 256
#define AUTH_KINDS_MAX 16

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct { const char *route; unsigned status; unsigned long long n; } reqs[REQ_SERIES_MAX];
static size_t nreqs;
static unsigned long long caps[3];
static struct { const char *kind; unsigned long long n; } auths[AUTH_KINDS_MAX];
static size_t nauths;
#define LIFECYCLE_SERIES_MAX 48
static struct { const char *kind, *result; unsigned long long n; } lcs[LIFECYCLE_SERIES_MAX];
static size_t nlcs;
static double store_sum;
static unsigned long long store_count;
/* histogram buckets, seconds */
static const double store_le[] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25, 0.5, 1, 2.5 };
#define NLE (sizeof(store_le) / sizeof(store_le[0]))
static unsigned long long store_buckets[NLE];
static unsigned long long store_notifications;
static unsigned long long failovers[2];        /* placed, failed */
static unsigned long long audit_pruned;         /* audit rows past --audit-keep-days */

void
metrics_request(const char *route, unsigned status)
{
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < nreqs; i++)
		if (reqs[i].route == route && reqs[i].status == status)
			break;
	if (i == nreqs && nreqs < REQ_SERIES_MAX) {
		reqs[i].route = route;
		reqs[i].status = status;
		nreqs++;
	}
	if (i < nreqs)
		reqs[i].n++;
	pthread_mutex_unlock(&mu);
}

void
metrics_capability(enum cap_purpose pur)
{
	pthread_mutex_lock(&mu);
	if (pur == PUR_CONTROL || pur == PUR_SERVICE)
		caps[pur]++;
	pthread_mutex_unlock(&mu);
}

void
metrics_auth_failure(const char *kind)
{
	size_t i;

	if (kind == NULL)
		kind = "other";
	pthread_mutex_lock(&mu);
	for (i = 0; i < nauths; i++)
		if (strcmp(auths[i].kind, kind) == 0)
			break;
	if (i == nauths && nauths < AUTH_KINDS_MAX) {
		auths[i].kind = kind;       /* static strings of auth.c */
		nauths++;
	}
	if (i < nauths)
		auths[i].n++;
	pthread_mutex_unlock(&mu);
}

void
metrics_lifecycle(const char *kind, const char *result)
{
	size_t i;

	pthread_mutex_lock(&mu);
	for (i = 0; i < nlcs; i++)
		if (strcmp(lcs[i].kind, kind) == 0 && strcmp(lcs[i].result, result) == 0)
			break;
	if (i == nlcs && nlcs < LIFECYCLE_SERIES_MAX) {
		lcs[i].kind = kind;         /* static strings (control.h) */
		lcs[i].result = result;
		nlcs++;
	}
	if (i < nlcs)
		lcs[i].n++;
	pthread_mutex_unlock(&mu);
}

void
metrics_store_latency(double seconds)
{
	size_t i;

	pthread_mutex_lock(&mu);
	store_sum += seconds;
	store_count++;
	for (i = 0; i < NLE; i++)
		if (seconds <= store_le[i])
			store_buckets[i]++;
	pthread_mutex_unlock(&mu);
}

void
metrics_store_notifications(unsigned n)
{
	pthread_mutex_lock(&mu);
	store_notifications += n;
	pthread_mutex_unlock(&mu);
}

void
metrics_audit_pruned(int n)
{
	pthread_mutex_lock(&mu);
	audit_pruned += (unsigned long long)n;
	pthread_mutex_unlock(&mu);
}

void
metrics_failover(const char *result, int n)
{
	pthread_mutex_lock(&mu);
	failovers[strcmp(result, "placed") == 0 ? 0 : 1] += (unsigned long long)n;
	pthread_mutex_unlock(&mu);
}

char *
metrics_render(struct ctl *c)
{
	char *buf = NULL;
	size_t len = 0, i;
	int64_t live = 0, lost = 0;
	FILE *f = open_memstream(&buf, &len);

	if (f == NULL)
		return NULL;
	(void)c->st->ops->worker_counts(c->st, &live, &lost);
	pthread_mutex_lock(&mu);
	fprintf(f, "# HELP space_control_requests_total HTTP requests by route and status.\n"
	    "# TYPE space_control_requests_total counter\n");
	for (i = 0; i < nreqs; i++)
		fprintf(f, "space_control_requests_total{route=\"%s\",status=\"%u\"} %llu\n",
		    reqs[i].route, reqs[i].status, reqs[i].n);
	fprintf(f, "# HELP space_control_capabilities_issued_total Capabilities issued by purpose.\n"
	    "# TYPE space_control_capabilities_issued_total counter\n"
	    "space_control_capabilities_issued_total{purpose=\"control\"} %llu\n"
	    "space_control_capabilities_issued_total{purpose=\"service\"} %llu\n",
	    caps[PUR_CONTROL], caps[PUR_SERVICE]);
	fprintf(f, "# HELP space_control_auth_failures_total Refused credentials by kind.\n"
	    "# TYPE space_control_auth_failures_total counter\n");
	for (i = 0; i < nauths; i++)
		fprintf(f, "space_control_auth_failures_total{kind=\"%s\"} %llu\n",
		    auths[i].kind, auths[i].n);
	fprintf(f, "# HELP space_control_lifecycle_operations_total Lifecycle operations by kind and result.\n"
	    "# TYPE space_control_lifecycle_operations_total counter\n");
	for (i = 0; i < nlcs; i++)
		fprintf(f, "space_control_lifecycle_operations_total{kind=\"%s\",result=\"%s\"} %llu\n",
		    lcs[i].kind, lcs[i].result, lcs[i].n);
	fprintf(f, "# HELP space_control_store_latency_seconds Store operation latency.\n"
	    "# TYPE space_control_store_latency_seconds histogram\n");
	for (i = 0; i < NLE; i++)
		fprintf(f, "space_control_store_latency_seconds_bucket{le=\"%g\"} %llu\n",
		    store_le[i], store_buckets[i]);
	fprintf(f, "space_control_store_latency_seconds_bucket{le=\"+Inf\"} %llu\n"
	    "space_control_store_latency_seconds_sum %.6f\n"
	    "space_control_store_latency_seconds_count %llu\n",
	    store_count, store_sum, store_count);
	fprintf(f, "# HELP space_control_store_notifications_total Notifications of committed"
	    " assignments received from the store (PostgreSQL LISTEN; any replica's commits).\n"
	    "# TYPE space_control_store_notifications_total counter\n"
	    "space_control_store_notifications_total %llu\n", store_notifications);
	fprintf(f, "# HELP space_control_audit_pruned_total Audit rows removed, older than"
	    " --audit-keep-days.\n# TYPE space_control_audit_pruned_total counter\n"
	    "space_control_audit_pruned_total %llu\n", audit_pruned);
	fprintf(f, "# HELP space_control_failovers_total Sandboxes of lost workers placed"
	    " again, or failed.\n# TYPE space_control_failovers_total counter\n"
	    "space_control_failovers_total{result=\"placed\"} %llu\n"
	    "space_control_failovers_total{result=\"failed\"} %llu\n", failovers[0], failovers[1]);
	pthread_mutex_unlock(&mu);
	api_archives_metrics(f);
	fprintf(f, "# HELP space_control_workers Workers by state.\n"
	    "# TYPE space_control_workers gauge\n"
	    "space_control_workers{state=\"live\"} %lld\n"
	    "space_control_workers{state=\"lost\"} %lld\n", (long long)live, (long long)lost);
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

void
api_healthz(struct req *r)
{
	reply_json(r, 200, json_pack("{s:b}", "ok", 1));
}

void
api_metrics(struct req *r)
{
	char *t = metrics_render(r->ctl);

	if (t == NULL) {
		reply_error(r, 500, "internal", "cannot render metrics");
		return;
	}
	reply_text(r, 200, t, "text/plain; version=0.0.4");
}
