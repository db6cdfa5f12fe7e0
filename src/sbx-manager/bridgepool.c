/* Kept bridge connections (docs/jail.md "Kept connections"). A connection
 * to a bridge that carried an operation cleanly to its end (api.c) may
 * carry the next operation of the same execution: the connect, the
 * checks of the bridge's identity (SO_PEERCRED, /proc, sock_diag) and the
 * HELLO are then paid once per connection instead of once per operation.
 * Every operation is still admitted here against the committed record and
 * again by the bridge against its own.
 *
 * A kept connection is tied to the execution it was verified for: the
 * record's identity {sandbox, generation, worker, resident, activation},
 * its epoch and the serving process (pid and start time). It is handed out
 * only for an operation admitted on a record equal in all of these, and
 * only after the checks of a fresh connection that need no connect pass
 * again (bpool_take), so a
 * connection of an older execution (a move, a bridge relaunch, a retire)
 * never carries an operation of a newer one; lease_cancel_before (every
 * replacement and retire) also closes those of the sandbox at once. A kept
 * connection that became readable or hung up (the bridge ended, or sent
 * something nobody asked for) is closed, never used. Bounded: at most
 * BPOOL_PER_SBX per sandbox and BPOOL_MAX in all, each idle at most
 * BPOOL_IDLE_S (less than the bridge's own idle limit, so a bridge never
 * closes a connection we are about to use for having been idle). */
#include <errno.h>
#include <stdatomic.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx-manager.h"
#include "log.h"
#include "util.h"

#define BPOOL_MAX     64
#define BPOOL_PER_SBX 2
#define BPOOL_IDLE_S  30

struct bpool_entry {
	struct route_identity id;
	uint64_t epoch;
	pid_t serve_pid;
	uint64_t serve_start;
	uint64_t sock_dev, sock_ino;    /* the socket file it was connected through */
	uint64_t since;         /* monotonic ns, when it went idle */
	int fd;
};

struct mgr_bpool {
	pthread_mutex_t lock;
	struct bpool_entry e[BPOOL_MAX];
	unsigned n;
};

int
bpool_init(struct mgr *m)
{
	struct mgr_bpool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	m->bpool = p;
	return 0;
}

/* the execution a connection was opened to: what entry_for compares */
static struct bpool_entry
entry_of(const struct record *r)
{
	return (struct bpool_entry){ .id = r->id, .epoch = r->epoch,
	    .serve_pid = r->serve_pid, .serve_start = r->serve_start, .fd = -1 };
}

static bool
entry_for(const struct bpool_entry *e, const struct record *r)
{
	return route_identity_equal(&e->id, &r->id) && e->epoch == r->epoch &&
	    e->serve_pid == r->serve_pid && e->serve_start == r->serve_start;
}

static bool
entry_stale(const struct bpool_entry *e, uint64_t now)
{
	return now - e->since > (uint64_t)BPOOL_IDLE_S * 1000000000u;
}

/* entry i leaves the pool (the last one takes its place); its fd is returned */
static int
entry_remove(struct mgr_bpool *p, unsigned i)
{
	int fd = p->e[i].fd;

	p->e[i] = p->e[--p->n];
	return fd;
}

int
bpool_take(struct mgr *m, const struct record *r, uint64_t *sock_dev, uint64_t *sock_ino)
{
	struct mgr_bpool *p = m->bpool;
	int closing[BPOOL_MAX], nclose = 0, fd = -1;
	uint64_t now = now_mono_ns(), sdev = 0, sino = 0, dev, ino;
	const char *why;
	unsigned i;

	if (p == NULL)
		return -1;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n;) {
		struct bpool_entry *e = &p->e[i];
		struct pollfd pf;

		if (strcmp(e->id.sandbox, r->id.sandbox) != 0) {
			i++;
			continue;
		}
		/* another execution of this sandbox, or idle too long: closed */
		if (!entry_for(e, r) || entry_stale(e, now)) {
			closing[nclose++] = entry_remove(p, i);
			continue;
		}
		pf = (struct pollfd){ .fd = e->fd, .events = POLLIN };
		if (poll(&pf, 1, 0) != 0) {
			closing[nclose++] = entry_remove(p, i);
			continue;
		}
		sdev = e->sock_dev;
		sino = e->sock_ino;
		fd = entry_remove(p, i);
		break;
	}
	pthread_mutex_unlock(&p->lock);
	/* what a fresh connection would check of the bridge, but the
	 * connect: the recorded processes still the bridge, running the
	 * recorded binary, not replaced on disk; and the socket file on its
	 * path still the one this connection reached (someone else's
	 * listener there is refused on a fresh connection, and must not be
	 * hidden by a kept one) */
	if (fd >= 0 && (bridge_identity_check(m, r, &why) != 0 ||
	    bridge_sock_id(r, &dev, &ino) != 0 || dev != sdev || ino != sino)) {
		closing[nclose++] = fd;
		fd = -1;
	}
	while (nclose > 0) {
		metrics_inc(m, MC_BRIDGE_KEPT_DROPPED);
		close(closing[--nclose]);
	}
	if (fd >= 0) {
		metrics_inc(m, MC_BRIDGE_KEPT_USED);
		*sock_dev = sdev;
		*sock_ino = sino;
	}
	return fd;
}

void
bpool_give(struct mgr *m, const struct record *r, int fd, uint64_t sock_dev, uint64_t sock_ino)
{
	struct mgr_bpool *p = m->bpool;
	int closing[BPOOL_MAX + 1], nclose = 0;
	uint64_t now = now_mono_ns();
	unsigned i, same = 0;

	if (p == NULL || atomic_load(&m->stopping)) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n;) {
		/* idle too long, whichever sandbox: closed here too, or the
		 * connections of sandboxes that had no operation since would
		 * hold the pool's places (those opened at a start, mostly) */
		if (entry_stale(&p->e[i], now)) {
			closing[nclose++] = entry_remove(p, i);
			continue;
		}
		if (strcmp(p->e[i].id.sandbox, r->id.sandbox) == 0)
			same++;
		i++;
	}
	if (same >= BPOOL_PER_SBX) {
		closing[nclose++] = fd;
	} else {
		/* full: the connection idle longest makes room (the newest
		 * is the likeliest to carry the next operation: a burst of
		 * starts must not keep out the connections of the sandboxes
		 * that are used after it) */
		if (p->n >= BPOOL_MAX) {
			unsigned old = 0;

			for (i = 1; i < p->n; i++)
				if (p->e[i].since < p->e[old].since)
					old = i;
			closing[nclose++] = entry_remove(p, old);
		}
		p->e[p->n] = entry_of(r);
		p->e[p->n].sock_dev = sock_dev;
		p->e[p->n].sock_ino = sock_ino;
		p->e[p->n].since = now;
		p->e[p->n++].fd = fd;
		fd = -1;
	}
	pthread_mutex_unlock(&p->lock);
	while (nclose > 0) {
		if (closing[nclose - 1] != fd)
			metrics_inc(m, MC_BRIDGE_KEPT_DROPPED);
		close(closing[--nclose]);
	}
}

/* The first operation of an execution used to pay the connect, the checks
 * of the bridge and the HELLO (about half of a first exec's cost above a
 * second one's, docs/benchmarks.md). They are paid here instead, while the
 * report of the start travels and the client asks for its route: exactly
 * the checks of bridge_open, on the record just committed serving, and the
 * connection is then what a kept one is (bpool_take checks it again when
 * it is taken). On a thread of its own: a bridge that does not answer its
 * HELLO holds that thread (MGR_IO_TIMEOUT_S at most), never the lane that
 * started it; at most AHEAD_MAX at once, beyond that the first operation
 * opens its own connection as before. */
#define AHEAD_MAX     16
#define AHEAD_STACK   (256u << 10)

static atomic_uint ahead_running;

struct ahead {
	struct mgr *m;
	struct record r;
};

static void *
ahead_thread(void *arg)
{
	struct ahead *a = arg;
	struct mgr *m = a->m;
	const struct record *r = &a->r;
	struct record now;
	struct bpool_entry opened = entry_of(r);
	uint64_t dev, ino;
	const char *why = NULL;
	int fd;

	if (atomic_load(&m->stopping))
		goto out;
	if ((fd = bridge_open(m, r, &why)) < 0) {
		/* what a first operation would meet, and count, itself */
		log_debug("no connection opened ahead to the bridge of %s: %s", r->id.sandbox,
		    fd == -EPROTO ? "refused" : why ? why : "error");
		goto out;
	}
	if (bridge_sock_id(r, &dev, &ino) != 0) {
		close(fd);
		goto out;
	}
	bpool_give(m, r, fd, dev, ino);
	metrics_inc(m, MC_BRIDGE_OPENED_AHEAD);
	/* a replacement or retire committed while we connected dropped the
	 * sandbox's kept connections before this one was in: it goes now
	 * (bpool_take would refuse it anyway, but it would hold a place) */
	if (records_get(m, r->id.sandbox, &now) != 0 || now.state != EXEC_SERVING ||
	    !entry_for(&opened, &now))
		bpool_drop(m, r->id.sandbox);
out:
	free(a);
	atomic_fetch_sub(&ahead_running, 1);
	return NULL;
}

void
bpool_open_ahead(struct mgr *m, const struct record *r)
{
	pthread_attr_t attr;
	pthread_t t;
	struct ahead *a;
	int e;

	if (m->bpool == NULL || atomic_load(&m->stopping) || r->state != EXEC_SERVING)
		return;
	if (atomic_fetch_add(&ahead_running, 1) >= AHEAD_MAX) {
		atomic_fetch_sub(&ahead_running, 1);
		return;
	}
	if ((a = malloc(sizeof(*a))) == NULL) {
		atomic_fetch_sub(&ahead_running, 1);
		return;
	}
	*a = (struct ahead){ .m = m, .r = *r };
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, AHEAD_STACK);
	e = pthread_create(&t, &attr, ahead_thread, a);
	pthread_attr_destroy(&attr);
	if (e != 0) {
		free(a);
		atomic_fetch_sub(&ahead_running, 1);
	}
}

void
bpool_drop(struct mgr *m, const char *sandbox)
{
	struct mgr_bpool *p = m->bpool;
	int closing[BPOOL_MAX], nclose = 0;
	unsigned i;

	if (p == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	for (i = 0; i < p->n;) {
		if (strcmp(p->e[i].id.sandbox, sandbox) == 0)
			closing[nclose++] = entry_remove(p, i);
		else
			i++;
	}
	pthread_mutex_unlock(&p->lock);
	while (nclose > 0) {
		metrics_inc(m, MC_BRIDGE_KEPT_DROPPED);
		close(closing[--nclose]);
	}
}
