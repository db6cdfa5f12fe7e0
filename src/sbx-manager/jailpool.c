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
 * never claimed. */
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
#include <sys/resource.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "egress.h"
#include "jailend.h"
#include "log.h"
#include "netns.h"
#include "sbx-manager.h"
#include "util.h"

#define JP_MAX          64
#define JP_SPAWN_MS     20000
#define JP_PIDS         256u    /* the guest's process limit is set at its start */
#define JP_RETRY_S      5
#define JP_LISTEN_WAIT_MS 5000  /* a new guest's listen on jail.sock */
#define JP_SWEEP_S      2       /* how often a full pool looks for dead guests */

static pthread_mutex_t jp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t jp_cv = PTHREAD_COND_INITIALIZER;
static struct jailpool_jail ready[JP_MAX];
static unsigned nready;
static char mark_dir[PATH_MAX];

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

/* spaced-host --pool for r, at a lower priority; 0 when it said
 * "pooled GUESTPID", with *gpid set */
static int
spawn_pool(struct mgr *m, const struct record *r, pid_t *gpid)
{
	char uidb[24], dmb[24], ns[16], nsp[PATH_MAX + 16], line[64];
	int pfd[2], st, ret = -EIO;
	size_t got = 0;
	pid_t pid;

	if (netns_ensure(r, nsp, sizeof(nsp)) != 0)
		return -EIO;
	snprintf(uidb, sizeof(uidb), "%u", r->uid_base);
	snprintf(dmb, sizeof(dmb), "%u", r->disk_mb);
	egress_nameserver(r, ns);
	char *argv[] = {
		(char *)m->cfg.spaced_host, "--sandbox", (char *)r->id.sandbox, "--generation", "1",
		"--activation", "1", "--worker", (char *)r->id.worker, "--resident",
		(char *)r->id.resident, "--substrate", "jail", "--template", "host",
		"--run-dir", (char *)r->run_dir, "--layer-dir", (char *)r->layer_dir,
		"--uid-base", uidb, "--memory-mb", "512", "--pids", "256", "--cpu-percent", "100",
		"--netns", nsp, "--disk-mb", dmb, "--pool", "--nameserver", ns, NULL
	};
	if (!ns[0])
		argv[sizeof(argv) / sizeof(argv[0]) - 3] = NULL;
	if (pipe2(pfd, O_CLOEXEC) != 0)
		return -errno;
	if ((pid = fork()) < 0) {
		close(pfd[0]);
		close(pfd[1]);
		return -errno;
	}
	if (pid == 0) {
		int nul = open("/dev/null", O_RDONLY);
		sigset_t none;

		setsid();
		if (nul < 0 || dup2(nul, 0) < 0 || dup2(pfd[1], 1) < 0)
			_exit(127);
		close_range(3, ~0u, 0);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* made ahead: the creates running now go first (the claim
		 * sets the jail's processes back to the default priority) */
		errno = 0;
		if (nice(10) == -1 && errno != 0)
			errno = 0;
		(void)syscall(SYS_ioprio_set, 1, 0, (2 << 13) | 7);
		execv(argv[0], argv);
		_exit(127);
	}
	close(pfd[1]);
	for (;;) {
		ssize_t n = read(pfd[0], line + got, sizeof(line) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
		if (got >= sizeof(line) - 1 || memchr(line, '\n', got) != NULL)
			break;
	}
	close(pfd[0]);
	line[got] = '\0';
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && strncmp(line, "pooled ", 7) == 0) {
		char *end;
		long v = strtol(line + 7, &end, 10);

		if (v > 1 && *end == '\n') {
			*gpid = (pid_t)v;
			ret = 0;
		}
	}
	return ret;
}

/* one more prepared jail; 0 or -errno (nothing of it left then) */
static int
prepare_one(struct mgr *m)
{
	uint8_t rnd[8];
	char name[SPACE_ID_MAX + 1], p[PATH_MAX + 128];
	struct record r;
	uint32_t slot;
	pid_t gpid = 0;
	int fd, ret, pidfd;

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
	(void)layerpool_claim(m, &r);
	if ((ret = spawn_pool(m, &r, &gpid)) != 0) {
		log_warnx("jail pool: cannot prepare %s", name);
		destroy(m, name, slot, true);
		return ret;
	}
	/* the guest, to see it die while it waits: it was our child's
	 * child a moment ago and nothing reaps it but its exit; the same
	 * pid must still be the guest listening on the jail's socket */
	for (int i = 0; i < JP_LISTEN_WAIT_MS / 10 && jail_guest(r.run_dir) != gpid; i++)
		usleep(10000);    /* it listens once it confined itself */
	if ((pidfd = pidfd_open(gpid, 0)) < 0 || jail_guest(r.run_dir) != gpid) {
		log_warnx("jail pool: %s: its guest is gone", name);
		if (pidfd >= 0)
			close(pidfd);
		destroy(m, name, slot, true);
		return -ESRCH;
	}
	pthread_mutex_lock(&jp_mu);
	snprintf(ready[nready].name, sizeof(ready[nready].name), "%s", name);
	ready[nready].slot = slot;
	ready[nready].pidfd = pidfd;
	nready++;
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
		close(gone[i].pidfd);
		destroy(m, gone[i].name, gone[i].slot, true);
	}
}

static void *
fill_thread(void *arg)
{
	struct mgr *m = arg;

	while (!atomic_load(&m->stopping)) {
		pthread_mutex_lock(&jp_mu);
		while (nready >= m->cfg.jail_pool && !atomic_load(&m->stopping)) {
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
		if (atomic_load(&m->stopping))
			break;
		if (prepare_one(m) != 0)
			sleep(JP_RETRY_S);
	}
	return NULL;
}

void
jailpool_start(struct mgr *m)
{
	DIR *d;
	struct dirent *e;
	pthread_t t;

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
	if (m->cfg.jail_pool == 0)
		return;
	if (pthread_create(&t, NULL, fill_thread, m) != 0)
		fatalx("pthread_create");
	pthread_detach(t);
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
	while (!ok && nready > 0) {
		*out = ready[--nready];
		pthread_cond_signal(&jp_cv);
		if (!dead(out->pidfd)) {
			ok = true;
			break;
		}
		/* died waiting: destroyed by the filler's next sweep would
		 * be later; here, out of the lock */
		pthread_mutex_unlock(&jp_mu);
		log_warnx("jail pool: the guest of %s died before any claim", out->name);
		close(out->pidfd);
		destroy(m, out->name, out->slot, true);
		pthread_mutex_lock(&jp_mu);
	}
	pthread_mutex_unlock(&jp_mu);
	if (ok) {
		close(out->pidfd);
		out->pidfd = -1;
	}
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
	metrics_inc(m, MC_JAILPOOL_CLAIMED);
	return 0;
}

void
jailpool_discard(struct mgr *m, const struct jailpool_jail *j, bool reserved)
{
	destroy(m, j->name, j->slot, reserved);
}
