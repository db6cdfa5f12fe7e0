/* Prepared jails, claimed at install (docs/worker.md, "Prepared jails").
 *
 * A thread keeps up to cfg.jail_pool jails ready for sandboxes that do not
 * exist yet: for each, a uid slot reserved for it (records.c), a run
 * directory D/run/POOLID.g1 with its network namespace, a fresh layer
 * (from the layer pool when it has one) and a jail started by
 * `spaced-host --pool`: cgroup, namespaces, id maps, the layer mounted,
 * the guest running and listening on jail.sock, unbound, with no bridge
 * and no secret. Nothing of a prepared jail can be reached by a
 * capability: no record names it, it has no bridge.sock, and its
 * jail.sock is in a 0700 root directory.
 *
 * A fresh install of the host template (no record of the sandbox here, no
 * snapshot, the pool's disk size and process limit) takes one:
 * jailpool_take removes it from the pool (a jail is claimed once, by one
 * lane), the record is committed with the jail's slot as its uid range
 * (records_put_claimed), then jailpool_bind renames its run and layer
 * directories to the execution's, and the bridge is spawned with
 * --claim-from POOLID: spaced-host renames the jail's cgroup to the
 * execution's, writes its limits, sends the guest the one ATTACH that
 * binds it to the sandbox (identity and a new secret), and challenges it
 * as every bridge does. A claim that fails at any step destroys the jail
 * (spaced-host then starts a new one, as without a pool).
 *
 * Each prepared jail has a mark, D/jail-pool/POOLID, written before it is
 * made and removed when it is claimed or destroyed. At start, before any
 * install, every marked jail is destroyed (its guest killed through
 * jail.sock, its network namespace, layer mount, loop device, directories
 * and cgroups removed): a jail left by an earlier life of sbx-manager is
 * never claimed. A clean stop (SIGTERM) destroys every unclaimed jail the
 * same way (jailpool_stop).
 *
 * The filler makes a jail only in an idle moment (idle.c): no install in
 * flight and none in the last moment, checked again between its steps, so
 * a refill never runs beside a create. Its processes are started without
 * a fork of this process (vfork, as bridge.c): a fork of sbx-manager from
 * the filler's thread copied its page tables and write-protected its
 * memory while the create's thread was committing its record.
 *
 * Whether spaced-host bound the jail or fell back to a new one is read
 * after its ready, not assumed: the prepared guest, still pinned by its
 * pidfd, must be alive in the execution's cgroup (jailpool_claimed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "egress.h"
#include "jailend.h"
#include "log.h"
#include "netns.h"
#include "sbx-manager.h"
#include "util.h"

#define JP_MAX          MGR_SLOTS_MAX   /* --jail-pool at most: one uid slot each */
#define JP_PIDS         256u    /* the guest's process limit is set at its start */
#define JP_RETRY_S      5
#define JP_LISTEN_WAIT_MS 5000  /* a new guest's listen on jail.sock */
#define JP_SWEEP_S      2       /* how often a full pool looks for dead guests */

static pthread_mutex_t jp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jp_cv = PTHREAD_COND_INITIALIZER;
static struct jailpool_jail ready[JP_MAX];
static unsigned nready;
static bool jp_stopping;        /* a clean stop: no more claims */
static bool jp_filling;         /* the filler runs */
static char mark_dir[PATH_MAX];

#define JP_STOP_WAIT_S  8       /* a clean stop waits this long for the filler
                                 * (space up kills after 10 s) */

/* the record-shaped description of a prepared jail: its paths, slot and
 * uid range, as paths_for (assign.c) names an execution's */
static void
pool_record(const struct mgr *m, const char *name, uint32_t slot, struct record *r)
{
	memset(r, 0, sizeof(*r));
	snprintf(r->id.sandbox, sizeof(r->id.sandbox), "%s", name);
	r->id.generation = 1;
	r->id.activation = 1;
	snprintf(r->id.worker, sizeof(r->id.worker), "%s", m->cfg.worker_id);
	snprintf(r->id.resident, sizeof(r->id.resident), "%s", m->cfg.incarnation);
	snprintf(r->id.substrate, sizeof(r->id.substrate), "jail");
	snprintf(r->template_name, sizeof(r->template_name), "host");
	r->slot = slot;
	r->uid_base = uid_base_for(m->cfg.uid_window, slot);
	r->memory_mb = 512;
	r->pids = JP_PIDS;
	r->cpu_percent = 100;
	r->disk_mb = m->cfg.disk_mb;
	snprintf(r->run_dir, sizeof(r->run_dir), "%s/run/%s.g1", m->cfg.data_dir, name);
	snprintf(r->layer_dir, sizeof(r->layer_dir), "%s/exec/%s.g1/layer", m->cfg.data_dir, name);
}

/* the paths of space/<name> in every cgroup hierarchy sbx-manager is in
 * (where spaced-host, our child, made it); how many */
static int
cgroup_paths(const char *name, char out[][PATH_MAX], int cap)
{
	static const char *const v1[] = { "memory", "pids", "cpu" };
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
	int n = 0;

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL && n < cap) {
		char *c1 = strchr(line, ':'), *c2, *path;
		if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
			continue;
		*c2 = '\0';
		path = c2 + 1;
		path[strcspn(path, "\n")] = '\0';
		if (strcmp(path, "/") == 0)
			path = "";
		if (c1[1] == '\0') {
			if (v2)
				snprintf(out[n++], PATH_MAX, "/sys/fs/cgroup%s/space/%s", path, name);
			continue;
		}
		for (size_t i = 0; i < sizeof(v1) / sizeof(v1[0]) && n < cap; i++) {
			char ctl[256], *tok, *save;
			snprintf(ctl, sizeof(ctl), "%s", c1 + 1);
			for (tok = strtok_r(ctl, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, v1[i]) == 0 && n < cap)
					snprintf(out[n++], PATH_MAX, "/sys/fs/cgroup/%s%s/space/%s",
					    v1[i], path, name);
		}
	}
	fclose(f);
	return n;
}

/* every process left in the groups of `name` killed, then the groups
 * removed (bounded: 3 s) */
static void
cgroup_remove(const char *name)
{
	char p[4][PATH_MAX], procs[PATH_MAX + 32], buf[64];
	int n = cgroup_paths(name, p, 4), i, tries, left;

	for (tries = 0; tries < 300; tries++) {
		left = 0;
		for (i = 0; i < n; i++) {
			FILE *f;
			if ((size_t)snprintf(procs, sizeof(procs), "%s/cgroup.procs", p[i]) >= sizeof(procs))
				continue;
			if ((f = fopen(procs, "re")) == NULL)
				continue;
			while (fgets(buf, sizeof(buf), f) != NULL) {
				long pid = strtol(buf, NULL, 10);
				if (pid > 1)
					kill((pid_t)pid, SIGKILL);
			}
			fclose(f);
			if (rmdir(p[i]) != 0 && errno != ENOENT)
				left++;
		}
		if (left == 0)
			return;
		usleep(10000);
	}
	log_warnx("jail pool: cannot remove the cgroups of %s", name);
}

/* everything of the prepared jail `name` goes: guest, namespace, layer,
 * directories, cgroups, mark */
static void
destroy(struct mgr *m, const char *name, uint32_t slot, bool reserved)
{
	struct record r;
	char p[PATH_MAX + 32], cg[SPACE_ID_MAX + 8];

	pool_record(m, name, slot, &r);
	/* the guest first: its end kills every process of the jail; then
	 * whatever is left in its groups, so nothing holds its mounts */
	jail_end_dir(r.run_dir);
	snprintf(cg, sizeof(cg), "%s.g1", name);
	cgroup_remove(cg);
	netns_release_dir(r.run_dir);
	(void)layer_release(&r);
	snprintf(p, sizeof(p), "%s/rw", r.run_dir);
	(void)umount2(p, MNT_DETACH);
	(void)rmdir(p);
	snprintf(p, sizeof(p), "%s/bridge.sock", r.run_dir);
	(void)unlink(p);
	(void)rmdir(r.run_dir);
	snprintf(p, sizeof(p), "%s/disk.img", r.layer_dir);
	(void)unlink(p);
	(void)rmdir(r.layer_dir);
	snprintf(p, sizeof(p), "%s/exec/%s.g1", m->cfg.data_dir, name);
	(void)rmdir(p);
	snprintf(p, sizeof(p), "%s/%s", mark_dir, name);
	(void)unlink(p);
	if (reserved)
		records_slot_release(m, slot);
	log_info("jail pool: %s destroyed", name);
}

/* spaced-host --pool for r, kept as the jail's bridge until its claim
 * (bridge_pool_spawn); 0 when it said "pooled GUESTPID" (j->pid) */
static int
spawn_pool(struct mgr *m, const struct record *r, struct jailpool_jail *j)
{
	char uidb[24], dmb[24], ns[16], nsp[PATH_MAX + 16];

	if (netns_ensure(r, nsp, sizeof(nsp)) != 0)
		return -EIO;
	snprintf(uidb, sizeof(uidb), "%u", r->uid_base);
	snprintf(dmb, sizeof(dmb), "%u", r->disk_mb);
	egress_nameserver(r, ns);
	char *argv[] = {
		NULL, "--sandbox", (char *)r->id.sandbox, "--generation", "1",
		"--activation", "1", "--worker", (char *)r->id.worker, "--resident",
		(char *)r->id.resident, "--substrate", "jail", "--template", "host",
		"--run-dir", (char *)r->run_dir, "--layer-dir", (char *)r->layer_dir,
		"--uid-base", uidb, "--memory-mb", "512", "--pids", "256", "--cpu-percent", "100",
		"--netns", nsp, "--disk-mb", dmb, "--pool", "--nameserver", ns, NULL
	};
	if (!ns[0])
		argv[sizeof(argv) / sizeof(argv[0]) - 3] = NULL;
	return bridge_pool_spawn(m, argv, j);
}

/* one more prepared jail; 0 or -errno (nothing of it left then). Between
 * its steps it waits for an idle moment again: a create that arrived
 * meanwhile goes first (-ECANCELED when sbx-manager stops meanwhile) */
static int
prepare_one(struct mgr *m)
{
	uint8_t rnd[8];
	char name[SPACE_ID_MAX + 1], p[PATH_MAX + 128];
	struct record r;
	uint32_t slot;
	struct jailpool_jail j = { .pidfd = -1, .mon_pidfd = -1, .claim_fd = -1, .ready_fd = -1,
	    .exefd = -1 };
	int fd, ret;

	if ((ret = records_slot_reserve(m, &slot)) != 0)
		return ret;
	randombytes_buf(rnd, sizeof(rnd));
	snprintf(name, sizeof(name), "pool-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
	    rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	pool_record(m, name, slot, &r);
	/* the mark first: whatever is made after it is found again at start */
	snprintf(p, sizeof(p), "%s/%s", mark_dir, name);
	if ((fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0) {
		records_slot_release(m, slot);
		return -errno;
	}
	close(fd);
	if (mkdir(r.run_dir, 0700) != 0 || mkdir_p(r.layer_dir, 0711) != 0) {
		destroy(m, name, slot, true);
		return -EIO;
	}
	if (!idle_wait()) {
		destroy(m, name, slot, true);
		return -ECANCELED;
	}
	(void)layerpool_claim(m, &r);
	if (!idle_wait()) {
		destroy(m, name, slot, true);
		return -ECANCELED;
	}
	snprintf(j.name, sizeof(j.name), "%s", name);
	j.slot = slot;
	if ((ret = spawn_pool(m, &r, &j)) != 0) {
		log_warnx("jail pool: cannot prepare %s", name);
		destroy(m, name, slot, true);
		return ret;
	}
	/* the guest, to see it die while it waits: the kept bridge's
	 * child, whose exit only the bridge sees otherwise; the same pid
	 * must still be the guest listening on the jail's socket */
	for (int i = 0; i < JP_LISTEN_WAIT_MS / 10 && jail_guest(r.run_dir) != j.pid; i++)
		usleep(10000);    /* it listens once it confined itself */
	if ((j.pidfd = pidfd_open(j.pid, 0)) < 0 || jail_guest(r.run_dir) != j.pid) {
		log_warnx("jail pool: %s: its guest is gone", name);
		jailpool_discard(m, &j, true);
		return -ESRCH;
	}
	pthread_mutex_lock(&jp_mu);
	if (jp_stopping || nready >= JP_MAX) {
		pthread_mutex_unlock(&jp_mu);
		jailpool_discard(m, &j, true);
		return -ECANCELED;
	}
	ready[nready++] = j;
	pthread_mutex_unlock(&jp_mu);
	log_info("jail pool: %s ready (slot %u)", name, slot);
	metrics_inc(m, MC_JAILPOOL_MADE);
	return 0;
}

static bool
dead(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	return poll(&p, 1, 0) != 0;
}

/* prepared jails whose guest died (killed, out of memory) leave the pool */
static void
sweep(struct mgr *m)
{
	struct jailpool_jail gone[JP_MAX];
	unsigned i, n = 0;

	pthread_mutex_lock(&jp_mu);
	for (i = 0; i < nready;) {
		if (dead(ready[i].pidfd)) {
			gone[n++] = ready[i];
			ready[i] = ready[--nready];
		} else
			i++;
	}
	pthread_mutex_unlock(&jp_mu);
	for (i = 0; i < n; i++) {
		log_warnx("jail pool: the guest of %s died before any claim", gone[i].name);
		jailpool_discard(m, &gone[i], true);
	}
}

static void *
fill_thread(void *arg)
{
	struct mgr *m = arg;
	int r;

	while (!atomic_load(&m->stopping)) {
		pthread_mutex_lock(&jp_mu);
		while (nready >= m->cfg.jail_pool && !atomic_load(&m->stopping) && !jp_stopping) {
			struct timespec ts;

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += JP_SWEEP_S;
			if (pthread_cond_timedwait(&jp_cv, &jp_mu, &ts) != 0) {
				pthread_mutex_unlock(&jp_mu);
				sweep(m);
				pthread_mutex_lock(&jp_mu);
			}
		}
		pthread_mutex_unlock(&jp_mu);
		/* an idle moment first: never beside a create (idle.c) */
		if (atomic_load(&m->stopping) || !idle_wait())
			break;
		if ((r = prepare_one(m)) != 0 && r != -ECANCELED) {
			struct timespec ts;

			/* again later; a stop ends the wait */
			pthread_mutex_lock(&jp_mu);
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_sec += JP_RETRY_S;
			while (!jp_stopping && pthread_cond_timedwait(&jp_cv, &jp_mu, &ts) == 0)
				;
			pthread_mutex_unlock(&jp_mu);
		}
	}
	pthread_mutex_lock(&jp_mu);
	jp_filling = false;
	pthread_cond_broadcast(&jp_cv);
	pthread_mutex_unlock(&jp_mu);
	return NULL;
}

void
jailpool_start(struct mgr *m)
{
	DIR *d;
	struct dirent *e;

	snprintf(mark_dir, sizeof(mark_dir), "%s/jail-pool", m->cfg.data_dir);
	if (mkdir(mark_dir, 0700) != 0 && errno != EEXIST)
		fatal("mkdir %s", mark_dir);
	/* an earlier life's prepared jails: none is ever claimed */
	if ((d = opendir(mark_dir)) != NULL) {
		while ((e = readdir(d)) != NULL) {
			if (strncmp(e->d_name, "pool-", 5) != 0 || !id_valid(e->d_name))
				continue;
			destroy(m, e->d_name, UINT32_MAX, false);
		}
		closedir(d);
	}
}

void
jailpool_fill(struct mgr *m)
{
	pthread_t t;

	if (m->cfg.jail_pool == 0)
		return;
	jp_filling = true;
	if (pthread_create(&t, NULL, fill_thread, m) != 0)
		fatalx("pthread_create");
	pthread_detach(t);
}

void
jailpool_stop(struct mgr *m)
{
	struct jailpool_jail gone[JP_MAX];
	struct timespec ts;
	unsigned i, n;

	pthread_mutex_lock(&jp_mu);
	if (mark_dir[0] == '\0') {
		pthread_mutex_unlock(&jp_mu);
		return;
	}
	/* no claim from now on; the filler ends after its step */
	jp_stopping = true;
	pthread_cond_broadcast(&jp_cv);
	pthread_mutex_unlock(&jp_mu);
	idle_stop();
	pthread_mutex_lock(&jp_mu);
	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += JP_STOP_WAIT_S;
	while (jp_filling && pthread_cond_timedwait(&jp_cv, &jp_mu, &ts) == 0)
		;
	if (jp_filling)
		log_warnx("jail pool: the jail being prepared is left to the next start");
	n = nready;
	for (i = 0; i < n; i++)
		gone[i] = ready[i];
	nready = 0;
	pthread_mutex_unlock(&jp_mu);
	/* what no install took: destroyed as at a start (its slot is the
	 * pool's: released, though nothing takes it any more). Every guest
	 * is killed first, all at once through the pidfds the pool holds (a
	 * prepared guest holds nothing of anyone), and waited for (bounded):
	 * ending them one after another, through each jail.sock, took longer
	 * than `space up` waits for a stop once the pool held a hundred, and
	 * the jails left behind kept their guests and loop devices */
	for (i = 0; i < n; i++)
		(void)pidfd_send_signal(gone[i].pidfd, SIGKILL, NULL, 0);
	for (i = 0; i < n; i++) {
		struct pollfd p = { .fd = gone[i].pidfd, .events = POLLIN };

		while (poll(&p, 1, 2000) < 0 && errno == EINTR)
			;
	}
	/* their kept bridges saw the guests go and are leaving; told all
	 * at once too (their claim pipes closed), then each is reaped
	 * (bounded) and its jail destroyed */
	for (i = 0; i < n; i++)
		if (gone[i].claim_fd >= 0) {
			close(gone[i].claim_fd);
			gone[i].claim_fd = -1;
		}
	for (i = 0; i < n; i++)
		jailpool_discard(m, &gone[i], true);
	if (n > 0)
		log_info("jail pool: %u unclaimed prepared jail%s destroyed at the stop", n,
		    n == 1 ? "" : "s");
}

bool
jailpool_take(struct mgr *m, const struct record *r, struct jailpool_jail *out)
{
	bool ok = false;

	/* only what a prepared jail was made as: the host template, a new
	 * layer of the pool's size, its process limit */
	if (m->cfg.jail_pool == 0 || strcmp(r->template_name, "host") != 0 ||
	    r->disk_mb != m->cfg.disk_mb || r->pids != JP_PIDS)
		return false;
	pthread_mutex_lock(&jp_mu);
	while (!ok && nready > 0 && !jp_stopping) {
		*out = ready[--nready];
		pthread_cond_broadcast(&jp_cv);
		if (!dead(out->pidfd)) {
			ok = true;
			break;
		}
		/* died waiting: destroyed by the filler's next sweep would
		 * be later; here, out of the lock */
		pthread_mutex_unlock(&jp_mu);
		log_warnx("jail pool: the guest of %s died before any claim", out->name);
		jailpool_discard(m, out, true);
		pthread_mutex_lock(&jp_mu);
	}
	pthread_mutex_unlock(&jp_mu);
	/* the guest's pidfd stays with the claim: whether the bridge bound
	 * this guest is read through it (jailpool_claimed) */
	return ok;
}

int
jailpool_bind(struct mgr *m, const struct record *r, const struct jailpool_jail *j)
{
	struct record p;
	char from[PATH_MAX + 128], to[PATH_MAX + 128], *s;

	pool_record(m, j->name, j->slot, &p);
	/* the layer first (its directory's parent, D/exec/X.g1), then the
	 * run directory with the jail's socket, namespace and mount */
	snprintf(from, sizeof(from), "%s/exec/%s.g1", m->cfg.data_dir, j->name);
	snprintf(to, sizeof(to), "%s", r->layer_dir);
	if ((s = strrchr(to, '/')) == NULL)
		return -EINVAL;
	*s = '\0';
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) != 0)
		return -errno;
	if (renameat2(AT_FDCWD, p.run_dir, AT_FDCWD, r->run_dir, RENAME_NOREPLACE) != 0) {
		int e = -errno;
		(void)rename(to, from);
		return e;
	}
	snprintf(from, sizeof(from), "%s/%s", mark_dir, j->name);
	(void)unlink(from);
	return 0;
}

void
jailpool_release(struct jailpool_jail *j)
{
	/* a kept bridge not handed over (a claim that did not reach it)
	 * ends first: it holds the jail's layer */
	bridge_pool_end(j);
	if (j->pidfd >= 0)
		close(j->pidfd);
	j->pidfd = -1;
}

void
jailpool_discard(struct mgr *m, struct jailpool_jail *j, bool reserved)
{
	jailpool_release(j);
	destroy(m, j->name, j->slot, reserved);
}

bool
jailpool_claimed(struct mgr *m, const struct record *r, struct jailpool_jail *j)
{
	char path[64], line[512], want[SPACE_ID_MAX + 48];
	bool in = false;
	FILE *f;

	/* bound: the prepared guest (pinned by its pidfd, so the pid is
	 * still that process while it lives) is in the execution's cgroup,
	 * which spaced-host renamed its group to. A fallback killed it, or
	 * left it in the pool's group. */
	snprintf(want, sizeof(want), "/space/%s.g%llu", r->id.sandbox,
	    (unsigned long long)r->id.generation);
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)j->pid);
	if (j->pidfd >= 0 && !dead(j->pidfd) && (f = fopen(path, "re")) != NULL) {
		while (!in && fgets(line, sizeof(line), f) != NULL) {
			size_t l = strcspn(line, "\n"), w = strlen(want);
			line[l] = '\0';
			in = l >= w && strcmp(line + l - w, want) == 0;
		}
		fclose(f);
		/* still alive after the read: what was read was that guest */
		in = in && !dead(j->pidfd);
	}
	jailpool_release(j);
	if (in)
		metrics_inc(m, MC_JAILPOOL_CLAIMED);
	return in;
}
