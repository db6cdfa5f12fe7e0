/* cgroup v1 and v2 handling for one execution.
 *
 * The execution's group is made under the cgroup spaced-host itself runs
 * in (read from /proc/self/cgroup), never at the hierarchy root: limits
 * then nest inside whatever the operator gave the worker, and nothing is
 * moved out of a parent's accounting. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "log.h"

#define CG_ROOT "/sys/fs/cgroup"
/* how long a relaunched bridge waits for a dead jail to leave its group */
#define CG_BUSY_WAIT_MS 2000

static const char *const cg_v1_name[CG__N] = { "memory", "pids", "cpu" };

static int
write_str(const char *dir, const char *file, const char *val)
{
	char p[1100];
	int fd, r = 0;
	size_t n = strlen(val);

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		r = -errno;
	close(fd);
	return r;
}

static int
read_str(const char *dir, const char *file, char *buf, size_t cap)
{
	char p[1100];
	int fd;
	ssize_t n;

	snprintf(p, sizeof(p), "%s/%s", dir, file);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

/* fn(pid, arg) for every process listed in dir/cgroup.procs, read whole
 * and line by line: a single read of a fixed buffer may end inside a pid,
 * and its first digits are another process */
static void
each_pid(const char *dir, void (*fn)(pid_t, void *), void *arg)
{
	char p[1100], *line = NULL, *e;
	size_t cap = 0;
	ssize_t len;
	FILE *f;

	snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
	if ((f = fopen(p, "re")) == NULL)
		return;
	while ((len = getline(&line, &cap, f)) > 0) {
		long pid;

		if (line[len - 1] != '\n')
			break;          /* not a whole line */
		errno = 0;
		pid = strtol(line, &e, 10);
		if (e == line || *e != '\n' || errno != 0 || pid <= 1 || pid > INT32_MAX)
			continue;
		fn((pid_t)pid, arg);
	}
	free(line);
	fclose(f);
}

/* this process's cgroup path in the hierarchy holding ctrl ("" = v2) */
static int
own_path(const char *ctrl, char *out, size_t cap)
{
	FILE *f = fopen("/proc/self/cgroup", "re");
	char line[1024];
	int r = -ENOENT;

	if (f == NULL)
		return -errno;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *c1 = strchr(line, ':'), *c2, *tok, *save;
		if (c1 == NULL || (c2 = strchr(c1 + 1, ':')) == NULL)
			continue;
		*c2 = '\0';
		line[strcspn(c2 + 1, "\n") + (size_t)(c2 + 1 - line)] = '\0';
		if (*ctrl == '\0') {
			if (c1[1] != '\0')
				continue;
		} else {
			bool hit = false;
			for (tok = strtok_r(c1 + 1, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
				if (strcmp(tok, ctrl) == 0)
					hit = true;
			if (!hit)
				continue;
		}
		snprintf(out, cap, "%s", strcmp(c2 + 1, "/") == 0 ? "" : c2 + 1);
		r = 0;
		break;
	}
	fclose(f);
	return r;
}

static int
mkdir_one(const char *p)
{
	if (mkdir(p, 0755) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static void kill_all(const char *dir);

/* the execution's own group: a leftover of a crashed bridge may be
 * reused when empty. A bridge relaunched right after the previous one
 * died finds the dead jail's processes still there for a few milliseconds
 * (the kernel tears the pid namespace down after its init): wait a
 * bounded time for that. Still busy: a jail kept for a next activation
 * that this bridge could not attach to (docs/jail.md). The caller holds
 * the layer's lock, so no live bridge owns it: it is killed. */
static int
mkdir_exec(const char *p)
{
	char buf[16];
	int r, i;

	if (mkdir(p, 0755) == 0)
		return 0;
	if (errno != EEXIST)
		return -errno;
	for (i = 0; i < 2 * CG_BUSY_WAIT_MS / 5; i++) {
		if ((r = read_str(p, "cgroup.procs", buf, sizeof(buf))) < 0)
			return r;
		if (buf[0] == '\0')
			return 0;
		if (i == CG_BUSY_WAIT_MS / 5) {
			log_warnx("cgroup %s still holds a jail no bridge serves: killed", p);
			kill_all(p);
		}
		usleep(5000);
	}
	log_warnx("cgroup %s is still in use", p);
	return -EBUSY;
}

int
cgroup_set_limits(const struct cgroup *cg, const struct cgroup_limits *l)
{
	char v[64];
	int r;

	if (cg->v2) {
		snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_mb << 20);
		if ((r = write_str(cg->path[0], "memory.max", v)) < 0)
			return r;
		/* no swap: the memory limit is the memory limit */
		(void)write_str(cg->path[0], "memory.swap.max", "0");
		snprintf(v, sizeof(v), "%u", l->pids);
		if ((r = write_str(cg->path[0], "pids.max", v)) < 0)
			return r;
		return cgroup_set_cpu(cg, l->cpu_percent);
	}
	snprintf(v, sizeof(v), "%llu", (unsigned long long)l->memory_mb << 20);
	/* a live group: memory+swap may not go below memory, so it goes
	 * first when lowering and last when raising; both tried */
	(void)write_str(cg->path[CG_MEMORY], "memory.memsw.limit_in_bytes", v);
	if ((r = write_str(cg->path[CG_MEMORY], "memory.limit_in_bytes", v)) < 0)
		return r;
	/* memory+swap too when the kernel accounts swap */
	(void)write_str(cg->path[CG_MEMORY], "memory.memsw.limit_in_bytes", v);
	/* socket buffers: v1 charges them only once this limit is set, and
	 * then apart from memory.limit_in_bytes (v2 counts them in
	 * memory.max). Unset, a sandbox's TCP buffers grew to the host's
	 * tcp_mem, every other process's pressure */
	if (write_str(cg->path[CG_MEMORY], "memory.kmem.tcp.limit_in_bytes", v) < 0)
		log_warnx("%s: socket buffers not limited (memory.kmem.tcp.limit_in_bytes)",
		    cg->path[CG_MEMORY]);
	snprintf(v, sizeof(v), "%u", l->pids);
	if ((r = write_str(cg->path[CG_PIDS], "pids.max", v)) < 0)
		return r;
	return cgroup_set_cpu(cg, l->cpu_percent);
}

int
cgroup_set_cpu(const struct cgroup *cg, unsigned cpu_percent)
{
	char v[64];
	int r;

	if (cg->v2) {
		if (cpu_percent == 0)
			snprintf(v, sizeof(v), "max 100000");
		else
			snprintf(v, sizeof(v), "%u 100000", cpu_percent * 1000);
		return write_str(cg->path[0], "cpu.max", v);
	}
	/* every write of the period or the quota walks the machine's whole
	 * tree of CPU groups (the kernel checks the hierarchy's bandwidth),
	 * a thousand sandboxes' worth: the period, 100 ms, is the kernel's
	 * default and is written only when a group's differs */
	if ((read_str(cg->path[CG_CPU], "cpu.cfs_period_us", v, sizeof(v)) < 0 ||
	    strtoul(v, NULL, 10) != 100000) &&
	    (r = write_str(cg->path[CG_CPU], "cpu.cfs_period_us", "100000")) < 0)
		return r;
	if (cpu_percent == 0)
		snprintf(v, sizeof(v), "-1");
	else
		snprintf(v, sizeof(v), "%u", cpu_percent * 1000);
	return write_str(cg->path[CG_CPU], "cpu.cfs_quota_us", v);
}

int
cgroup_rename(struct cgroup *cg, const char *name)
{
	char to[CG__N][1024], *slash;
	int i, done;

	for (i = 0; i < CG__N; i++) {
		if (!cg->made[i])
			continue;
		snprintf(to[i], sizeof(to[i]), "%s", cg->path[i]);
		if ((slash = strrchr(to[i], '/')) == NULL)
			return -EINVAL;
		snprintf(slash + 1, sizeof(to[i]) - (size_t)(slash + 1 - to[i]), "%s", name);
	}
	for (done = 0; done < CG__N; done++) {
		if (!cg->made[done])
			continue;
		if (rename(cg->path[done], to[done]) < 0) {
			int r = -errno;
			/* the ones moved already go back: one name for all */
			for (i = 0; i < done; i++)
				if (cg->made[i])
					(void)rename(to[i], cg->path[i]);
			return r;
		}
	}
	for (i = 0; i < CG__N; i++)
		if (cg->made[i])
			memcpy(cg->path[i], to[i], sizeof(to[i]));
	return 0;
}

static void
renice_one(pid_t pid, void *arg)
{
	(void)setpriority(PRIO_PROCESS, (id_t)pid, 0);
	/* IOPRIO_WHO_PROCESS, class best-effort, level 4 (the default) */
	(void)syscall(SYS_ioprio_set, 1, (int)pid, (2 << 13) | 4);
}

void
cgroup_renice(const struct cgroup *cg)
{
	each_pid(cg->path[cg->v2 ? 0 : CG_PIDS], renice_one, NULL);
}

int
cgroup_create(struct cgroup *cg, const char *name, const struct cgroup_limits *l)
{
	char own[300], base[400];
	int r, i;

	memset(cg, 0, sizeof(*cg));
	cg->v2 = access(CG_ROOT "/cgroup.controllers", F_OK) == 0;
	if (cg->v2) {
		if ((r = own_path("", own, sizeof(own))) < 0)
			return r;
		snprintf(base, sizeof(base), CG_ROOT "%s", own);
		/* v2 only lets a group use the controllers its parent delegates;
		 * a parent holding processes cannot delegate ("no internal
		 * processes"), which the operator must arrange (e.g. systemd
		 * Delegate=yes): report it instead of running unlimited */
		if ((r = write_str(base, "cgroup.subtree_control", "+memory +pids +cpu")) < 0)
			log_warnx("cgroup v2: cannot delegate controllers in %s: %s", base, strerror(-r));
		snprintf(cg->path[0], sizeof(cg->path[0]), "%s/space", base);
		if ((r = mkdir_one(cg->path[0])) < 0)
			return r;
		if ((r = write_str(cg->path[0], "cgroup.subtree_control", "+memory +pids +cpu")) < 0)
			return r;
		snprintf(cg->path[0], sizeof(cg->path[0]), "%s/space/%s", base, name);
		if ((r = mkdir_exec(cg->path[0])) < 0)
			return r;
		cg->made[0] = true;
		if ((r = cgroup_set_limits(cg, l)) < 0)
			goto fail;
		return 0;
	}
	for (i = 0; i < CG__N; i++) {
		if ((r = own_path(cg_v1_name[i], own, sizeof(own))) < 0)
			goto fail;
		snprintf(base, sizeof(base), CG_ROOT "/%s%s/space", cg_v1_name[i], own);
		if ((r = mkdir_one(base)) < 0)
			goto fail;
		snprintf(cg->path[i], sizeof(cg->path[i]), "%s/%s", base, name);
		if ((r = mkdir_exec(cg->path[i])) < 0)
			goto fail;
		cg->made[i] = true;
	}
	if ((r = cgroup_set_limits(cg, l)) < 0)
		goto fail;
	return 0;
fail:
	log_warnx("cgroup setup failed: %s", strerror(-r));
	cgroup_destroy(cg);
	return r;
}

/* the execution's group as a previous bridge made it, still holding the
 * kept jail (docs/jail.md, "The jail outlives its bridge"): the same
 * paths cgroup_create computes, nothing made or written */
int
cgroup_adopt(struct cgroup *cg, const char *name)
{
	char own[300];
	int r, i;

	memset(cg, 0, sizeof(*cg));
	cg->v2 = access(CG_ROOT "/cgroup.controllers", F_OK) == 0;
	for (i = 0; i < (cg->v2 ? 1 : CG__N); i++) {
		if ((r = own_path(cg->v2 ? "" : cg_v1_name[i], own, sizeof(own))) < 0)
			goto fail;
		if (cg->v2)
			snprintf(cg->path[0], sizeof(cg->path[0]), CG_ROOT "%s/space/%s", own, name);
		else
			snprintf(cg->path[i], sizeof(cg->path[i]), CG_ROOT "/%s%s/space/%s",
			    cg_v1_name[i], own, name);
		if (access(cg->path[i], F_OK) < 0) {
			r = -errno;
			goto fail;
		}
		cg->made[i] = true;
	}
	return 0;
fail:
	memset(cg, 0, sizeof(*cg));
	return r;
}

int
cgroup_add(const struct cgroup *cg, pid_t pid)
{
	char v[32];
	int i, r;

	snprintf(v, sizeof(v), "%d", (int)pid);
	for (i = 0; i < CG__N; i++) {
		if (!cg->made[i])
			continue;
		if ((r = write_str(cg->path[i], "cgroup.procs", v)) < 0)
			return r;
	}
	return 0;
}

int
cgroup_oom_parse(const char *buf, uint64_t *n)
{
	const char *p;

	/* at a line's start: not the "oom_kill_disable" of cgroup v1 */
	for (p = buf; (p = strstr(p, "oom_kill ")) != NULL; p++)
		if (p == buf || p[-1] == '\n')
			break;
	if (p == NULL)
		return -ENOTSUP;
	*n = strtoull(p + 9, NULL, 10);
	return 0;
}

int
cgroup_oom_kills(const struct cgroup *cg, uint64_t *n)
{
	char buf[4096];
	int r;

	if (cg->v2)
		r = read_str(cg->path[0], "memory.events", buf, sizeof(buf));
	else
		r = read_str(cg->path[CG_MEMORY], "memory.oom_control", buf, sizeof(buf));
	if (r < 0)
		return r;
	return cgroup_oom_parse(buf, n);
}

int
cgroup_oom_fd(const struct cgroup *cg)
{
	char p[1100];
	int fd;

	if (cg->v2)
		snprintf(p, sizeof(p), "%s/memory.events", cg->path[0]);
	else
		snprintf(p, sizeof(p), "%s/memory.oom_control", cg->path[CG_MEMORY]);
	if ((fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	return fd;
}

static void
kill_one(pid_t pid, void *arg)
{
	kill(pid, SIGKILL);
}

/* SIGKILL every process of the group at dir: cgroup.kill where the
 * kernel has it (v2 from 5.14: the kernel's own walk, no pid read and
 * used later), else each pid of its whole list */
static void
kill_all(const char *dir)
{
	char p[1100];
	int fd;

	snprintf(p, sizeof(p), "%s/cgroup.kill", dir);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) >= 0) {
		ssize_t w = write(fd, "1", 1);

		close(fd);
		if (w == 1)
			return;
	}
	each_pid(dir, kill_one, NULL);
}

void
cgroup_destroy(struct cgroup *cg)
{
	struct timespec ts = { 0, 10 * 1000 * 1000 };
	int i, tries;

	for (i = 0; i < CG__N; i++) {
		if (!cg->made[i])
			continue;
		/* a process that escaped the guest's process group is still
		 * in the group: the group is the execution's boundary */
		for (tries = 0; tries < 300; tries++) {
			kill_all(cg->path[i]);
			if (rmdir(cg->path[i]) == 0 || errno == ENOENT)
				break;
			nanosleep(&ts, NULL);
		}
		if (tries == 300)
			log_warn("cannot remove cgroup %s", cg->path[i]);
		cg->made[i] = false;
	}
}
