/* node-api counters: requests by route and status, refusals by reason.
 * GET /metrics renders them and appends sbx-manager's D/metrics.prom. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "node-api.h"
#include "util.h"

#define ROUTES_MAX  24
#define STATUS_MAX  600
#define REASONS_MAX 64

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct { const char *route; uint64_t by_status[STATUS_MAX]; } routes[ROUTES_MAX];
static struct { char error[32], reason[48]; uint64_t n; } reasons[REASONS_MAX];
/* WebSocket streams: open now, and closes by code (the codes ws.c uses,
 * plus what clients send: counted by class beyond those) */
static int64_t streams_open;
static uint64_t bodies[2];      /* file bodies sent: from a descriptor, from frames */
static uint64_t bodies_cut;     /* of those from a descriptor, cut short by the watch */
static const unsigned close_codes[] = { 1000, 1001, 1002, 1005, 1007, 1008, 1009, 1011, 4400, 4409, 4410, 0 };
static uint64_t closes[sizeof(close_codes) / sizeof(close_codes[0])];

void
metrics_stream_open(int delta)
{
	pthread_mutex_lock(&lock);
	streams_open += delta;
	pthread_mutex_unlock(&lock);
}

void
metrics_stream_close(unsigned code)
{
	size_t i;

	pthread_mutex_lock(&lock);
	for (i = 0; close_codes[i] && close_codes[i] != code; i++)
		;
	closes[i]++;    /* the last slot: any other code */
	pthread_mutex_unlock(&lock);
}

void
metrics_body(bool descriptor, bool cut)
{
	pthread_mutex_lock(&lock);
	bodies[descriptor ? 0 : 1]++;
	bodies_cut += cut;
	pthread_mutex_unlock(&lock);
}

/* route is always a static label from http.c */
void
metrics_request(const char *route, unsigned status)
{
	int i;

	if (status >= STATUS_MAX)
		return;
	pthread_mutex_lock(&lock);
	for (i = 0; i < ROUTES_MAX; i++) {
		if (routes[i].route == NULL)
			routes[i].route = route;
		if (strcmp(routes[i].route, route) == 0) {
			routes[i].by_status[status]++;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* error/reason come from sbx-manager; only label-safe characters are kept
 * and the table is bounded, so a peer cannot grow it */
static void
safe_copy(char *dst, size_t cap, const char *src)
{
	size_t i;

	for (i = 0; src && src[i] && i + 1 < cap; i++)
		dst[i] = ((src[i] >= 'a' && src[i] <= 'z') || src[i] == '_') ? src[i] : '_';
	dst[i] = '\0';
}

void
metrics_admission(const char *error, const char *reason)
{
	char e[32], r[48];
	int i;

	safe_copy(e, sizeof(e), error);
	safe_copy(r, sizeof(r), reason ? reason : "");
	pthread_mutex_lock(&lock);
	for (i = 0; i < REASONS_MAX; i++) {
		if (reasons[i].error[0] == '\0') {
			memcpy(reasons[i].error, e, sizeof(e));
			memcpy(reasons[i].reason, r, sizeof(r));
		}
		if (strcmp(reasons[i].error, e) == 0 && strcmp(reasons[i].reason, r) == 0) {
			reasons[i].n++;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
}

char *
metrics_render(size_t *len)
{
	char *buf = NULL, *extra = NULL;
	size_t elen = 0;
	FILE *f;
	int i, s;

	if ((f = open_memstream(&buf, len)) == NULL)
		return NULL;
	fprintf(f, "# TYPE space_nodeapi_requests_total counter\n");
	pthread_mutex_lock(&lock);
	for (i = 0; i < ROUTES_MAX && routes[i].route; i++)
		for (s = 0; s < STATUS_MAX; s++)
			if (routes[i].by_status[s])
				fprintf(f, "space_nodeapi_requests_total{route=\"%s\",status=\"%d\"} %llu\n",
				    routes[i].route, s, (unsigned long long)routes[i].by_status[s]);
	fprintf(f, "# TYPE space_nodeapi_refusals_total counter\n");
	for (i = 0; i < REASONS_MAX && reasons[i].error[0]; i++)
		fprintf(f, "space_nodeapi_refusals_total{error=\"%s\",reason=\"%s\"} %llu\n",
		    reasons[i].error, reasons[i].reason, (unsigned long long)reasons[i].n);
	fprintf(f, "# TYPE space_nodeapi_file_bodies_total counter\n"
	    "space_nodeapi_file_bodies_total{from=\"descriptor\"} %llu\n"
	    "space_nodeapi_file_bodies_total{from=\"frames\"} %llu\n"
	    "# TYPE space_nodeapi_file_bodies_cut_total counter\n"
	    "space_nodeapi_file_bodies_cut_total %llu\n",
	    (unsigned long long)bodies[0], (unsigned long long)bodies[1],
	    (unsigned long long)bodies_cut);
	fprintf(f, "# TYPE space_nodeapi_streams_open gauge\n"
	    "space_nodeapi_streams_open %lld\n", (long long)streams_open);
	fprintf(f, "# TYPE space_nodeapi_stream_closes_total counter\n");
	for (i = 0; close_codes[i]; i++)
		fprintf(f, "space_nodeapi_stream_closes_total{code=\"%u\"} %llu\n",
		    close_codes[i], (unsigned long long)closes[i]);
	fprintf(f, "space_nodeapi_stream_closes_total{code=\"other\"} %llu\n",
	    (unsigned long long)closes[i]);
	pthread_mutex_unlock(&lock);
	if (ncfg.metrics_file && read_file(ncfg.metrics_file, 1u << 20, &extra, &elen) == 0) {
		fwrite(extra, 1, elen, f);
		free(extra);
	}
	fclose(f);
	return buf;
}
