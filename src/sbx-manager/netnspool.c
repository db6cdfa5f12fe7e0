/* Network namespaces made ahead of creates (docs/worker.md, "Network
 * namespace pool").
 *
 * An execution's network namespace (netns.c) was made on its create's
 * path: a fork of this multi-threaded process that unshares, sets its
 * loopback up and binds the namespace onto RUNDIR/netns. This thread keeps
 * up to cfg.netns_pool such namespaces bound in D/netns-pool (root, 0700)
 * and netns_ensure claims one: a bind of the pooled file onto the
 * execution's RUNDIR/netns, then the pool's bind is unmounted and its file
 * removed, so the execution's bind is the only one that holds it.
 *
 * The thread makes a namespace without a fork: it unshares its own
 * network namespace (allowed in a multi-threaded process; it changes this
 * thread only), sets lo up, binds /proc/thread-self/ns/net into the pool
 * and returns to the worker's namespace with setns on a descriptor it
 * opened at start. If it cannot return, it makes nothing more (it does
 * nothing else, and no other thread is affected).
 *
 * What the pool guarantees, and how:
 *   - a namespace is claimed once: the slot is taken under the pool's lock
 *     and its bind removed after the claim's bind;
 *   - a namespace is new when claimed: made by this thread, never entered
 *     by any process (the directory is root's, 0700), lo up and nothing
 *     else in it;
 *   - nothing of an earlier run is used: everything found in the directory
 *     at start is unmounted and removed; at a clean stop the pool's binds
 *     are removed too.
 * A claim that finds the pool empty leaves netns_ensure to make one
 * itself, as before. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "netns.h"
#include "sbx-manager.h"

#define NSPOOL_MAX MGR_SLOTS_MAX

static pthread_mutex_t nsp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t nsp_cv = PTHREAD_COND_INITIALIZER;
static bool nsp_ready[NSPOOL_MAX];      /* slot i holds a complete namespace */
static bool nsp_busy[NSPOOL_MAX];       /* slot i is being made or claimed */
static bool nsp_stale[NSPOOL_MAX];      /* slot i was claimed: its bind is to go */
static unsigned nsp_n;                  /* ready slots */
static unsigned nsp_want;
static char nsp_dir[PATH_MAX];

static void
slot_path(unsigned i, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%u", nsp_dir, i);
}

static void
drop_path(const char *p)
{
	int i;

	for (i = 0; i < 4 && netns_bound(p, NULL); i++)
		(void)umount2(p, MNT_DETACH);
	(void)unlink(p);
}

/* everything in the pool directory goes (an earlier run's binds too) */
static void
pool_wipe(void)
{
	char p[PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	if ((d = opendir(nsp_dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", nsp_dir, e->d_name);
		drop_path(p);
	}
	closedir(d);
}

/* this thread: a new namespace with lo up, bound at path, and back to
 * home. 0; -errno (the pool's file removed); -EXDEV: could not go back */
static int
make_ns(const char *path, int home)
{
	struct ifreq ifr;
	int fd, s, r = 0;

	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return -errno;
	close(fd);
	if (unshare(CLONE_NEWNET) != 0) {
		r = -errno;
		unlink(path);
		return r;
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", 3);
	if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
	    ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
		r = -errno;
	if (r == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
			r = -errno;
	}
	if (s >= 0)
		close(s);
	if (r == 0 && mount("/proc/thread-self/ns/net", path, NULL, MS_BIND, NULL) != 0)
		r = -errno;
	if (setns(home, CLONE_NEWNET) != 0) {
		drop_path(path);
		return -EXDEV;
	}
	if (r != 0)
		drop_path(path);
	return r;
}

static void *
pool_thread(void *arg)
{
	struct mgr *m = arg;
	char p[PATH_MAX + 16];
	unsigned failures = 0, i;
	int home, r;

	(void)m;
	if ((home = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC)) < 0) {
		log_warn("netns pool: cannot open this thread's namespace; no pool");
		return NULL;
	}
	for (;;) {
		pthread_mutex_lock(&nsp_mu);
		for (;;) {
			for (i = 0; i < nsp_want; i++)
				if (!nsp_ready[i] && !nsp_busy[i])
					break;
			if (nsp_n < nsp_want && i < nsp_want)
				break;
			pthread_cond_wait(&nsp_cv, &nsp_mu);
		}
		nsp_busy[i] = true;
		pthread_mutex_unlock(&nsp_mu);
		/* an idle moment first, as the other pools (idle.c): a new
		 * namespace is milliseconds of the kernel's time under its
		 * network locks, and made right after a claim it ran beside
		 * the rest of that create (its commits, its report, its
		 * client's first exec) */
		if (!idle_wait()) {
			pthread_mutex_lock(&nsp_mu);
			nsp_busy[i] = false;
			pthread_mutex_unlock(&nsp_mu);
			return NULL;
		}
		slot_path(i, p, sizeof(p));
		/* a claimed slot's bind (the claim left its removal here, off
		 * the create's path: an unmount waits for an RCU grace period) */
		drop_path(p);
		pthread_mutex_lock(&nsp_mu);
		nsp_stale[i] = false;
		pthread_mutex_unlock(&nsp_mu);
		r = make_ns(p, home);
		if (r == 0 && !netns_bound(p, NULL)) {
			drop_path(p);
			r = -EIO;
		}
		pthread_mutex_lock(&nsp_mu);
		nsp_busy[i] = false;
		if (r == 0) {
			nsp_ready[i] = true;
			nsp_n++;
		}
		pthread_mutex_unlock(&nsp_mu);
		if (r == -EXDEV) {
			/* this thread is in a namespace of its own now: it
			 * makes nothing more (claims fall back to netns.c) */
			log_warnx("netns pool: cannot return to the worker's namespace; "
			    "no more pooled namespaces");
			pthread_mutex_lock(&nsp_mu);
			nsp_want = 0;
			pthread_mutex_unlock(&nsp_mu);
			return NULL;
		}
		if (r != 0) {
			if (failures++ == 0)
				log_warnx("netns pool: cannot make a namespace: %s", strerror(-r));
			sleep(failures < 6 ? 1u << failures : 60);
			continue;
		}
		failures = 0;
	}
	return NULL;
}

void
netnspool_start(struct mgr *m)
{
	pthread_t t;
	struct stat st;

	if (m->cfg.netns_pool == 0)
		return;
	if (m->cfg.netns_pool > NSPOOL_MAX)
		m->cfg.netns_pool = NSPOOL_MAX;
	snprintf(nsp_dir, sizeof(nsp_dir), "%s/netns-pool", m->cfg.data_dir);
	if (mkdir(nsp_dir, 0700) != 0 && errno != EEXIST) {
		log_warn("netns pool: mkdir %s", nsp_dir);
		m->cfg.netns_pool = 0;
		return;
	}
	if (lstat(nsp_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
	    chmod(nsp_dir, 0700) != 0) {
		log_warnx("netns pool: %s is not root's directory; no pool", nsp_dir);
		m->cfg.netns_pool = 0;
		return;
	}
	pool_wipe();
	nsp_want = m->cfg.netns_pool;
	if (pthread_create(&t, NULL, pool_thread, m) != 0) {
		log_warnx("netns pool: no thread; no pool");
		m->cfg.netns_pool = 0;
		nsp_want = 0;
		return;
	}
	pthread_detach(t);
	log_info("netns pool: keeping %u network namespaces in %s", m->cfg.netns_pool, nsp_dir);
}

int
netnspool_claim(const char *dst)
{
	char src[PATH_MAX + 16];
	unsigned long a, b;
	unsigned i;
	int r;

	pthread_mutex_lock(&nsp_mu);
	for (i = 0; i < nsp_want; i++)
		if (nsp_ready[i] && !nsp_busy[i])
			break;
	if (i >= nsp_want || nsp_n == 0) {
		pthread_mutex_unlock(&nsp_mu);
		return -ENOENT;
	}
	/* taken: no other claim and no refill touches slot i until it is
	 * given back empty */
	nsp_ready[i] = false;
	nsp_busy[i] = true;
	nsp_n--;
	pthread_mutex_unlock(&nsp_mu);
	slot_path(i, src, sizeof(src));
	r = 0;
	if (!netns_bound(src, &a))
		r = -ENOENT;
	else if (mount(src, dst, NULL, MS_BIND, NULL) != 0)
		r = -errno;
	else if (!netns_bound(dst, &b) || a != b) {
		(void)umount2(dst, MNT_DETACH);
		r = -EIO;
	}
	/* the pool's bind goes in every case, removed by the pool's thread
	 * before the slot is made again (an unmount waits for an RCU grace
	 * period: not on the create's path). Until then it is no slot's
	 * namespace (never claimed again) in a directory only root reads */
	pthread_mutex_lock(&nsp_mu);
	nsp_busy[i] = false;
	nsp_stale[i] = true;
	pthread_cond_signal(&nsp_cv);
	pthread_mutex_unlock(&nsp_mu);
	if (r != 0)
		log_warnx("netns pool: claim of %s for %s failed: %s", src, dst, strerror(-r));
	return r;
}

void
netnspool_stop(void)
{
	char p[PATH_MAX + 16];
	unsigned i;

	pthread_mutex_lock(&nsp_mu);
	if (nsp_dir[0] == '\0') {
		pthread_mutex_unlock(&nsp_mu);
		return;
	}
	nsp_want = 0;
	/* slots being made are left to the next start's wipe */
	for (i = 0; i < NSPOOL_MAX; i++) {
		if ((!nsp_ready[i] && !nsp_stale[i]) || nsp_busy[i])
			continue;
		nsp_ready[i] = nsp_stale[i] = false;
		slot_path(i, p, sizeof(p));
		drop_path(p);
	}
	nsp_n = 0;
	pthread_mutex_unlock(&nsp_mu);
}
