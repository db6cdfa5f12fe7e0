/* The scheduler: where a new execution goes, which workers are alive, and
 * the wakeups of assignment long-polls. Placement runs inside the store's
 * create transaction (lifecycle.c reads the candidates, this file
 * decides), so two concurrent creates cannot both take a worker's last
 * slot. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "templates.h"
#include "log.h"
#include "util.h"

static pthread_t tick_thread;
static int tick_started;

/* one resource: unreported (0) is not accounted; otherwise what the
 * active executions ask plus want stays within total * pct / 100 */
static bool
res_fits(int64_t total, int64_t used, int64_t want, int pct)
{
	return total <= 0 || used + want <= total * (pct > 0 ? pct : 100) / 100;
}

bool
scheduler_fits(const struct worker_load *w, const struct res *want,
    const struct overcommit *oc)
{
	static const struct res none;

	if (want == NULL)
		want = &none;
	return w->active < w->capacity &&
	    res_fits(w->total.memory_mb, w->used.memory_mb, want->memory_mb, oc->memory) &&
	    res_fits(w->total.cpu_percent, w->used.cpu_percent, want->cpu_percent, oc->cpu) &&
	    res_fits(w->total.disk_mb, w->used.disk_mb, want->disk_mb, oc->disk);
}

int
scheduler_pick(const struct worker_load *w, size_t n, const char *pinned,
    const struct res *want, const struct overcommit *oc, const char **why)
{
	size_t i;
	int best = -1;

	if (pinned != NULL) {
		for (i = 0; i < n; i++)
			if (strcmp(w[i].id, pinned) == 0)
				break;
		if (i == n) {
			*why = "pinned worker is unknown";
			return -ENOENT;
		}
		if (!w[i].live) {
			*why = "pinned worker is not live";
			return -EHOSTDOWN;
		}
		if (!scheduler_fits(&w[i], want, oc)) {
			*why = "pinned worker has no free capacity";
			return -EAGAIN;
		}
		return (int)i;
	}
	/* fewest running executions first, then the id for a stable order;
	 * a worker is a candidate only when the sandbox fits beside what it
	 * runs (slots, memory, cpu, disk) */
	for (i = 0; i < n; i++) {
		if (!w[i].live || !scheduler_fits(&w[i], want, oc))
			continue;
		if (best < 0 || w[i].active < w[best].active ||
		    (w[i].active == w[best].active && strcmp(w[i].id, w[best].id) < 0))
			best = (int)i;
	}
	if (best < 0) {
		*why = "no live worker with free capacity";
		return -EAGAIN;
	}
	return best;
}

/* the wake-up slot of sandbox's state (FNV-1a of its id) */
static unsigned
state_slot(const char *sandbox)
{
	uint32_t h = 2166136261u;

	for (; *sandbox; sandbox++)
		h = (h ^ (unsigned char)*sandbox) * 16777619u;
	return h % STATE_SLOTS;
}

/* assign_mu held */
static void
state_bump(struct ctl *c, const char *sandbox)
{
	unsigned i;

	if (sandbox != NULL) {
		i = state_slot(sandbox);
		c->state_slot[i].seq++;
		pthread_cond_broadcast(&c->state_slot[i].cv);
		return;
	}
	for (i = 0; i < STATE_SLOTS; i++) {
		c->state_slot[i].seq++;
		pthread_cond_broadcast(&c->state_slot[i].cv);
	}
}

void
assign_notify(struct ctl *c, const char *sandbox)
{
	pthread_mutex_lock(&c->assign_mu);
	c->assign_seq++;
	pthread_cond_broadcast(&c->assign_cv);
	state_bump(c, sandbox);
	pthread_mutex_unlock(&c->assign_mu);
}

void
state_notify(struct ctl *c, const char *sandbox)
{
	pthread_mutex_lock(&c->assign_mu);
	state_bump(c, sandbox);
	pthread_mutex_unlock(&c->assign_mu);
}

/* a wake-up counter (assign_seq, a state slot's) read under its lock */
static uint64_t
seq_get(struct ctl *c, const uint64_t *counter)
{
	uint64_t s;

	pthread_mutex_lock(&c->assign_mu);
	s = *counter;
	pthread_mutex_unlock(&c->assign_mu);
	return s;
}

/* waits until the counter moved past seq, the daemon stops or deadline */
static void
seq_wait(struct ctl *c, const uint64_t *counter, pthread_cond_t *cv, uint64_t seq,
    uint64_t deadline_ns)
{
	struct timespec ts;

	pthread_mutex_lock(&c->assign_mu);
	while (*counter == seq && !c->stopping && now_mono_ns() < deadline_ns) {
		/* the condition variables run on CLOCK_MONOTONIC (see serve) */
		ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
		ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
		pthread_cond_timedwait(cv, &c->assign_mu, &ts);
	}
	pthread_mutex_unlock(&c->assign_mu);
}

uint64_t
state_seq(struct ctl *c, const char *sandbox)
{
	return seq_get(c, &c->state_slot[state_slot(sandbox)].seq);
}

void
state_wait(struct ctl *c, const char *sandbox, uint64_t seq, uint64_t deadline_ns)
{
	unsigned i = state_slot(sandbox);

	seq_wait(c, &c->state_slot[i].seq, &c->state_slot[i].cv, seq, deadline_ns);
}

/* the store's wake-up (store.h, listen): another daemon on the store, or
 * this one, committed n assignments; n 0: the listener (re)connected */
static void
store_woken(void *arg, unsigned n)
{
	struct ctl *c = arg;

	if (n > 0)
		metrics_store_notifications(n);
	assign_notify(c, NULL);
}

int
assign_listen(struct ctl *c)
{
	if (c->st->ops->listen == NULL)
		return 0;
	return c->st->ops->listen(c->st, store_woken, c);
}

bool
assign_pushed(struct ctl *c)
{
	return c->st->ops->listening != NULL && c->st->ops->listening(c->st);
}

uint64_t
assign_seq(struct ctl *c)
{
	return seq_get(c, &c->assign_seq);
}

void
assign_wait(struct ctl *c, uint64_t seq, uint64_t deadline_ns)
{
	seq_wait(c, &c->assign_seq, &c->assign_cv, seq, deadline_ns);
}

void
ops_kick(struct ctl *c, const char *sandbox)
{
	int n = c->st->ops->ops_drive(c->st, c->instance, c->cfg.lease_ttl, sandbox, true);

	if (n > 0)
		assign_notify(c, sandbox);
}

/* The timeout reaper: a running sandbox past its idle or absolute timeout
 * is paused (an ordinary pause operation, so it takes the lease and can
 * lose to a concurrent one) or killed. */
static void
reap_timeouts(struct ctl *c)
{
	struct op_request rq;
	char op_id[SPACE_ID_MAX + 1], reason[32];
	json_t *due = NULL, *d, *out;
	const char *owner, *id, *action, *which, *why = NULL;
	size_t i;
	int rc;

	if (c->st->ops->timeouts_due(c->st, now_unix(), &due) < 0)
		return;
	json_array_foreach(due, i, d) {
		owner = json_string_value(json_object_get(d, "owner"));
		id = json_string_value(json_object_get(d, "id"));
		action = json_string_value(json_object_get(d, "action"));
		which = json_string_value(json_object_get(d, "which"));
		if (owner == NULL || id == NULL || action == NULL || which == NULL)
			continue;
		out = NULL;
		if (strcmp(action, "kill") == 0) {
			rc = c->st->ops->sandbox_kill(c->st, owner, id, &out);
		} else {
			if (id_random("op_", op_id, sizeof(op_id)) < 0)
				continue;
			snprintf(reason, sizeof(reason), "timeout %s", which);
			memset(&rq, 0, sizeof(rq));
			rq.kind = "pause";
			rq.op_id = op_id;
			rq.lease_owner = c->instance;
			rq.lease_ttl = c->cfg.lease_ttl;
			rq.reason = reason;
			rc = c->st->ops->op_start(c->st, owner, id, &rq, &out, &why);
			if (rc == 0)
				metrics_lifecycle("pause", "started");
		}
		json_decref(out);
		if (rc == 0) {
			log_info("sandbox %s: %s timeout passed, %s", id, which,
			    strcmp(action, "kill") == 0 ? "killed" : "pausing");
			assign_notify(c, id);
		}
	}
	json_decref(due);
}

/* the sandboxes of workers lost for longer than the grace are placed
 * elsewhere (failover.c); every daemon on the store tries, the sandbox's
 * lease and the store's transactions let one act */
static void
failover(struct ctl *c)
{
	int failed = 0, n = c->st->ops->workers_failover(c->st, c->instance, c->cfg.lease_ttl,
	    now_unix() - c->cfg.heartbeat_timeout - c->cfg.lost_grace, &failed);

	if (n > 0)
		metrics_failover("placed", n);
	if (failed > 0)
		metrics_failover("failed", failed);
	if (n > 0 || failed > 0)
		assign_notify(c, NULL);
}

/* audit rows older than --audit-keep-days go, oldest first, in batches
 * (each its own statement: the store is not held for long), at most
 * AUDIT_PRUNE_BATCHES of them a pass: 500,000 rows every 10 s, far more
 * than capabilities are issued */
#define AUDIT_PRUNE_BATCH 5000
#define AUDIT_PRUNE_BATCHES 100
static void
audit_trim(struct ctl *c)
{
	int i, n, total = 0;

	if (c->cfg.audit_keep_days <= 0)
		return;
	for (i = 0; i < AUDIT_PRUNE_BATCHES && !c->stopping; i++) {
		n = c->st->ops->audit_prune(c->st, now_unix() - c->cfg.audit_keep_days * 86400,
		    AUDIT_PRUNE_BATCH);
		if (n <= 0)
			break;
		total += n;
		if (n < AUDIT_PRUNE_BATCH)
			break;
	}
	if (total > 0) {
		metrics_audit_pruned(total);
		log_info("audit: %d row(s) older than %lld days removed", total,
		    (long long)c->cfg.audit_keep_days);
	}
}

/* once a second: workers silent for longer than the heartbeat timeout are
 * lost (no new placements), the keyring follows rotations, lifecycle
 * operations are driven (leases renewed, expired ones taken over) and
 * timeouts reaped; every 10 s, template images and snapshot archives
 * nobody references are collected and old audit rows removed */
static void *
tick(void *arg)
{
	struct ctl *c = arg;
	unsigned ticks = 0;
	int n;

	while (!c->stopping) {
		n = c->st->ops->workers_reap(c->st, now_unix() - c->cfg.heartbeat_timeout);
		if (n > 0)
			log_info("scheduler: %d worker(s) missed heartbeats, marked lost", n);
		failover(c);
		(void)keyring_refresh(&c->kr, c->st);
		ops_kick(c, NULL);
		reap_timeouts(c);
		if (++ticks % 10 == 0) {
			(void)templates_collect(c);
			(void)archive_blobs_collect(c);
			audit_trim(c);
		}
		sleep(1);
	}
	return NULL;
}

int
scheduler_start(struct ctl *c)
{
	int rc = pthread_create(&tick_thread, NULL, tick, c);

	if (rc != 0)
		return -rc;
	tick_started = 1;
	return 0;
}

void
scheduler_stop(struct ctl *c)
{
	c->stopping = 1;
	pthread_mutex_lock(&c->assign_mu);
	pthread_cond_broadcast(&c->assign_cv);
	state_bump(c, NULL);
	pthread_mutex_unlock(&c->assign_mu);
	if (tick_started)
		pthread_join(tick_thread, NULL);
	tick_started = 0;
}
