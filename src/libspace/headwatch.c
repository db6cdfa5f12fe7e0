/* Request-head watchdog (headwatch.h). A table of the open connections,
 * scanned linearly: it holds at most the daemon's connection limit. */
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "headwatch.h"
#include "log.h"
#include "util.h"

/* a head pending for less than this is not closed for its address's
 * count: on a loaded machine the daemon itself may not have read the head
 * a client sent at once, and a burst of such clients must not close each
 * other's connections; an idle or trickling one is older. Up to
 * HW_YOUNG_FACTOR times the bound: past it the oldest goes whatever its
 * age, so an address opening connections faster than that never holds
 * more (and never reaches the library's own limit per address, which
 * refuses a connection before the watchdog sees it) */
#define HW_EVICT_AGE_NS 1000000000ull
#define HW_YOUNG_FACTOR 4u

struct hw_conn {
	const void *conn;       /* NULL: free slot */
	int     fd;
	uint8_t addr[16];       /* IPv4 mapped into 16 bytes */
	bool    waiting;        /* head not complete yet */
	uint64_t since;         /* monotonic ns: start of the wait */
};

struct headwatch {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	bool    stopping;
	uint64_t timeout_ns;
	unsigned per_addr, cap;
	struct hw_conn *c;
};

static void
addr_key(const struct sockaddr *sa, uint8_t out[16])
{
	memset(out, 0, 16);
	if (sa == NULL)
		return;
	if (sa->sa_family == AF_INET) {
		out[10] = out[11] = 0xff;
		memcpy(out + 12, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(out, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
	}
}

static struct hw_conn *
find(struct headwatch *hw, const void *conn)
{
	unsigned i;

	for (i = 0; i < hw->cap; i++)
		if (hw->c[i].conn == conn)
			return &hw->c[i];
	return NULL;
}

/* caller holds mu; the descriptor stays registered (and open: only the
 * library closes it, after headwatch_close) */
static void
cut(struct hw_conn *e, const char *why)
{
	log_debug("http: closing a connection %s", why);
	(void)shutdown(e->fd, SHUT_RDWR);
	e->waiting = false;
}

static void *
watch(void *arg)
{
	struct headwatch *hw = arg;
	struct timespec ts;
	unsigned i;

	pthread_mutex_lock(&hw->mu);
	while (!hw->stopping) {
		uint64_t now = now_mono_ns();

		for (i = 0; i < hw->cap; i++)
			if (hw->c[i].conn && hw->c[i].waiting && now - hw->c[i].since > hw->timeout_ns)
				cut(&hw->c[i], "whose request head did not arrive in time");
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += 250000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&hw->cv, &hw->mu, &ts);
	}
	pthread_mutex_unlock(&hw->mu);
	return NULL;
}

int
headwatch_start(unsigned timeout_s, unsigned per_addr, unsigned max_conns,
    struct headwatch **out)
{
	struct headwatch *hw;
	int rc;

	if ((hw = calloc(1, sizeof(*hw))) == NULL)
		return -ENOMEM;
	/* the library may accept a few more than its limit before refusing */
	hw->cap = max_conns + 64;
	if ((hw->c = calloc(hw->cap, sizeof(*hw->c))) == NULL) {
		free(hw);
		return -ENOMEM;
	}
	hw->timeout_ns = (uint64_t)timeout_s * 1000000000ull;
	hw->per_addr = per_addr;
	pthread_mutex_init(&hw->mu, NULL);
	cond_init_mono(&hw->cv);
	if ((rc = pthread_create(&hw->thread, NULL, watch, hw)) != 0) {
		pthread_cond_destroy(&hw->cv);
		pthread_mutex_destroy(&hw->mu);
		free(hw->c);
		free(hw);
		return -rc;
	}
	*out = hw;
	return 0;
}

void
headwatch_stop(struct headwatch *hw)
{
	if (hw == NULL)
		return;
	pthread_mutex_lock(&hw->mu);
	hw->stopping = true;
	pthread_cond_signal(&hw->cv);
	pthread_mutex_unlock(&hw->mu);
	pthread_join(hw->thread, NULL);
	pthread_cond_destroy(&hw->cv);
	pthread_mutex_destroy(&hw->mu);
	free(hw->c);
	free(hw);
}

void
headwatch_open(struct headwatch *hw, const void *conn, int fd, const struct sockaddr *sa)
{
	struct hw_conn *e, *oldest = NULL;
	uint8_t key[16];
	unsigned i, n = 0;

	if (hw == NULL || fd < 0)
		return;
	addr_key(sa, key);
	pthread_mutex_lock(&hw->mu);
	for (i = 0; i < hw->cap; i++) {
		e = &hw->c[i];
		if (e->conn && e->waiting && memcmp(e->addr, key, 16) == 0) {
			n++;
			if (oldest == NULL || e->since < oldest->since)
				oldest = e;
		}
	}
	if (oldest != NULL && n >= hw->per_addr &&
	    (now_mono_ns() - oldest->since >= HW_EVICT_AGE_NS || n >= hw->per_addr * HW_YOUNG_FACTOR))
		cut(oldest, "of an address with too many heads pending");
	if ((e = find(hw, NULL)) != NULL) {
		e->conn = conn;
		e->fd = fd;
		memcpy(e->addr, key, 16);
		e->waiting = true;
		e->since = now_mono_ns();
	}
	pthread_mutex_unlock(&hw->mu);
}

static void
set_waiting(struct headwatch *hw, const void *conn, bool waiting)
{
	struct hw_conn *e;

	if (hw == NULL)
		return;
	pthread_mutex_lock(&hw->mu);
	if ((e = find(hw, conn)) != NULL) {
		e->waiting = waiting;
		e->since = now_mono_ns();
	}
	pthread_mutex_unlock(&hw->mu);
}

void
headwatch_head_done(struct headwatch *hw, const void *conn)
{
	set_waiting(hw, conn, false);
}

void
headwatch_rearm(struct headwatch *hw, const void *conn)
{
	set_waiting(hw, conn, true);
}

void
headwatch_close(struct headwatch *hw, const void *conn)
{
	struct hw_conn *e;

	if (hw == NULL)
		return;
	pthread_mutex_lock(&hw->mu);
	if ((e = find(hw, conn)) != NULL)
		memset(e, 0, sizeof(*e));
	pthread_mutex_unlock(&hw->mu);
}
