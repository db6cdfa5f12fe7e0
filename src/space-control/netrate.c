/* The pace of a sandbox's network changes (its egress policy, its declared
 * ports: docs/network.md). Each change is an assignment row in the store
 * and a job on the sandbox's worker; the worker folds the ones queued
 * behind each other (msg_assignment_fold), but the rows stay. So each
 * principal may change each of its sandboxes at most
 * --network-changes-per-minute times a minute, a quarter of that at once
 * (a token bucket per principal and sandbox, in memory: a replica counts
 * its own). Keyed by both, a caller that names another tenant's sandbox
 * spends only its own allowance. A table of NETRATE_SLOTS buckets; a
 * bucket evicted for another comes back full. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "netrate.h"
#include "ratebucket.h"
#include "util.h"

#define NETRATE_SLOTS 4096
#define NETRATE_PROBE 8

static struct {
	pthread_mutex_t mu;
	struct bucket {
		uint64_t key;           /* 0: free */
		struct rate_bucket r;
	} b[NETRATE_SLOTS];
} nr = { .mu = PTHREAD_MUTEX_INITIALIZER };

/* FNV-1a of principal, '/', sandbox; never 0 */
static uint64_t
key_of(const char *principal, const char *sandbox)
{
	uint64_t h = 1469598103934665603ull;
	const char *p;

	for (p = principal; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	h = (h ^ '/') * 1099511628211ull;
	for (p = sandbox; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	return h ? h : 1;
}

/* true when the allowance of principal for sandbox has a change; false,
 * and the seconds until it has, when not */
static bool
netrate_take(const struct ctl *c, const char *principal, const char *sandbox, int *retry_after)
{
	int64_t per_min = c->cfg.net_changes_per_min;
	double burst, wait = 0;
	uint64_t k;
	struct bucket *b = NULL, *old = NULL;
	bool ok;
	size_t i, at;

	if (per_min <= 0)
		return true;
	burst = per_min / 4 > 0 ? (double)(per_min / 4) : 1.0;
	k = key_of(principal, sandbox);
	pthread_mutex_lock(&nr.mu);
	at = (size_t)(k % NETRATE_SLOTS);
	for (i = 0; i < NETRATE_PROBE && b == NULL; i++) {
		struct bucket *x = &nr.b[(at + i) % NETRATE_SLOTS];

		if (x->key == k)
			b = x;
		else if (old == NULL || x->key == 0 || (old->key != 0 && x->r.at < old->r.at))
			old = x;
	}
	if (b == NULL) {
		/* a new bucket, full */
		b = old;
		b->key = k;
		b->r = (struct rate_bucket){ 0 };
	}
	if (!(ok = rate_take(&b->r, (double)per_min / 60.0, burst, now_mono_ns(), &wait)))
		*retry_after = (int)wait + 1;
	pthread_mutex_unlock(&nr.mu);
	return ok;
}

bool
netrate_refused(struct req *r, const char *sandbox)
{
	if (netrate_take(r->ctl, r->principal, sandbox, &r->retry_after))
		return false;
	reply_error(r, 429, "rate_limited", "at most %lld network changes of a sandbox a minute "
	    "here (--network-changes-per-minute)", (long long)r->ctl->cfg.net_changes_per_min);
	return true;
}
