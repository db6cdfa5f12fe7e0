/* Idle moments for work done ahead of creates (docs/worker.md, "Prepared
 * jails", "Layer pool").
 *
 * The pools refill themselves with the same kinds of work a create does
 * (a jail's launch, a layer's mkfs): on two cores, done while a create
 * runs, they slowed that create down by more than they saved it (the
 * create's commits, the bridge's start, the report and the first exec all
 * waited behind the refill; docs/benchmarks.md, "Prepared jails"). So a
 * refill runs only in an idle moment: no install in flight, and none
 * started or ended in the last IDLE_QUIET_MS (a create is followed by its
 * client's route and first exec, which the refill would slow as much).
 * A refill that is under way checks again between its steps and waits
 * while a create runs.
 *
 * Installs are counted by the lanes (assign.c, idle_install_begin/end);
 * a waiter sleeps on a condition variable until the last install ends,
 * then until the quiet time has passed since it: no polling. */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "sbx-manager.h"
#include "util.h"

#define IDLE_QUIET_MS 200

static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cv;
static pthread_once_t idle_once = PTHREAD_ONCE_INIT;
static unsigned inflight;       /* installs running now */
static uint64_t last_ns;        /* the last install's start or end (monotonic) */
static bool stopped;

static void
idle_init(void)
{
	cond_init_mono(&idle_cv);
}

void
idle_install_begin(void)
{
	pthread_once(&idle_once, idle_init);
	pthread_mutex_lock(&idle_mu);
	inflight++;
	last_ns = now_mono_ns();
	pthread_mutex_unlock(&idle_mu);
}

void
idle_install_end(void)
{
	pthread_once(&idle_once, idle_init);
	pthread_mutex_lock(&idle_mu);
	if (inflight > 0)
		inflight--;
	last_ns = now_mono_ns();
	/* the waiters now wait out the quiet time */
	pthread_cond_broadcast(&idle_cv);
	pthread_mutex_unlock(&idle_mu);
}

unsigned
idle_installs(void)
{
	unsigned n;

	pthread_mutex_lock(&idle_mu);
	n = inflight;
	pthread_mutex_unlock(&idle_mu);
	return n;
}

bool
idle_wait(void)
{
	bool ok;

	pthread_once(&idle_once, idle_init);
	pthread_mutex_lock(&idle_mu);
	for (;;) {
		uint64_t now = now_mono_ns(), until = last_ns + (uint64_t)IDLE_QUIET_MS * 1000000u;
		struct timespec ts = mono_timespec(until);

		if (stopped || (inflight == 0 && now >= until))
			break;
		if (inflight > 0) {
			/* woken by the end of an install (or by the stop) */
			pthread_cond_wait(&idle_cv, &idle_mu);
			continue;
		}
		/* the quiet time after the last install: an install that
		 * starts meanwhile moves it on, seen when this wait ends */
		(void)pthread_cond_timedwait(&idle_cv, &idle_mu, &ts);
	}
	ok = !stopped;
	pthread_mutex_unlock(&idle_mu);
	return ok;
}

void
idle_stop(void)
{
	pthread_once(&idle_once, idle_init);
	pthread_mutex_lock(&idle_mu);
	stopped = true;
	pthread_cond_broadcast(&idle_cv);
	pthread_mutex_unlock(&idle_mu);
}
