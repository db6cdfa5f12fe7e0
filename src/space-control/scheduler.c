/* The scheduler: where a new execution goes, which workers are alive, and
 * the wakeups of assignment long-polls. Placement runs inside the store's
 * create transaction (store_sqlite.c reads the candidates, this file
 * decides), so two concurrent creates cannot both take a worker's last
 * slot. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "log.h"
#include "util.h"

static pthread_t tick_thread;
static int tick_started;

int
scheduler_pick(const struct worker_load *w, size_t n, const char *pinned, const char **why)
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
		if (w[i].active >= w[i].capacity) {
			*why = "pinned worker has no free capacity";
			return -EAGAIN;
		}
		return (int)i;
	}
	/* fewest running executions first, then the id for a stable order */
	for (i = 0; i < n; i++) {
		if (!w[i].live || w[i].active >= w[i].capacity)
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

void
assign_notify(struct ctl *c)
{
	pthread_mutex_lock(&c->assign_mu);
	c->assign_seq++;
	pthread_cond_broadcast(&c->assign_cv);
	pthread_mutex_unlock(&c->assign_mu);
}

uint64_t
assign_seq(struct ctl *c)
{
	uint64_t s;

	pthread_mutex_lock(&c->assign_mu);
	s = c->assign_seq;
	pthread_mutex_unlock(&c->assign_mu);
	return s;
}

void
assign_wait(struct ctl *c, uint64_t seq, uint64_t deadline_ns)
{
	struct timespec ts;

	pthread_mutex_lock(&c->assign_mu);
	while (c->assign_seq == seq && !c->stopping && now_mono_ns() < deadline_ns) {
		/* the condition variable runs on CLOCK_MONOTONIC (see serve) */
		ts.tv_sec = (time_t)(deadline_ns / 1000000000ull);
		ts.tv_nsec = (long)(deadline_ns % 1000000000ull);
		pthread_cond_timedwait(&c->assign_cv, &c->assign_mu, &ts);
	}
	pthread_mutex_unlock(&c->assign_mu);
}

/* once a second: workers silent for longer than the heartbeat timeout are
 * lost (no new placements), and the keyring follows rotations */
static void *
tick(void *arg)
{
	struct ctl *c = arg;
	int n;

	while (!c->stopping) {
		n = c->st->ops->workers_reap(c->st, now_unix() - c->cfg.heartbeat_timeout);
		if (n > 0)
			log_info("scheduler: %d worker(s) missed heartbeats, marked lost", n);
		(void)keyring_refresh(&c->kr, c->st);
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
	pthread_mutex_unlock(&c->assign_mu);
	if (tick_started)
		pthread_join(tick_thread, NULL);
	tick_started = 0;
}
