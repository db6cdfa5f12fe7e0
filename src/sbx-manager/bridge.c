/* spaced-host: launching it, and verifying it on every connection.
 *
 * A bridge is two processes (docs/worker.md): the monitor we spawn (root,
 * holds the substrate) and its serving process (an unprivileged uid of the
 * sandbox's range), which listens on bridge.sock and is the only process
 * that reads the frames we send. The monitor names it on its ready line,
 * "ready PID". What we record, and why each item:
 *   monitor pid + start time   the process our pidfd watches and stops;
 *   serving pid + start time   what SO_PEERCRED must report for the
 *                  listener and whose fd table must hold it (sock_diag); a
 *                  PID can be reused by an unrelated process after the
 *                  bridge dies: same pid, different start time;
 *   serving uid    uid_base + SPACE_BRIDGE_UID_OFFSET, checked at start,
 *                  then what SO_PEERCRED must report;
 *   exe dev+inode  (stat of /proc/PID/exe, the same file for both, the
 *                  serving process being a fork of the monitor) a process
 *                  that exec'd another program keeps its pid and start
 *                  time, not its exe;
 *   binary hash    what the binary was at start (the bridge is exec'd
 *                  from a descriptor of spaced-host, whose hash is kept
 *                  while the file is unchanged: exe_hash_of); checked
 *                  again when a restarted sbx-manager adopts a bridge.
 * The on-disk spaced-host must also still be the file the bridge was
 * started from: a binary replaced on disk means the code we vouch for is
 * no longer the code we would run, so we stop trusting the bridge
 * (in-place edits of a running binary fail with ETXTBSY, so dev+inode is
 * enough to see a replacement). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hostmon.h"
#include "egress.h"
#include "log.h"
#include "netns.h"
#include "poolclaim.h"
#include "sbx-manager.h"
#include "util.h"

/* field (3..) of /proc/PID/stat as a number */
static int
proc_stat_field(pid_t pid, int field, uint64_t *out)
{
	char path[64], *buf = NULL, *p, *save = NULL, *tok;
	size_t len;
	int i, ret = -EINVAL;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((ret = read_file(path, 4096, &buf, &len)) < 0)
		return ret;
	ret = -EINVAL;
	/* comm (field 2) may contain spaces and ')': parse after the last ')' */
	if ((p = strrchr(buf, ')')) == NULL)
		goto out;
	p++;
	for (i = 3, tok = strtok_r(p, " ", &save); tok; i++, tok = strtok_r(NULL, " ", &save))
		if (i == field) {
			char *end;
			errno = 0;
			*out = strtoull(tok, &end, 10);
			if (errno == 0 && end != tok)
				ret = 0;
			break;
		}
out:
	free(buf);
	return ret;
}

int
proc_start_time(pid_t pid, uint64_t *out)
{
	return proc_stat_field(pid, 22, out);
}

static bool
parent_is(pid_t pid, pid_t parent)
{
	uint64_t pp;

	return proc_stat_field(pid, 4, &pp) == 0 && pp == (uint64_t)parent;
}

static bool
same_exe(pid_t pid, uint64_t dev, uint64_t ino)
{
	char exe[64];
	struct stat st;

	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	return stat(exe, &st) == 0 && (uint64_t)st.st_dev == dev && (uint64_t)st.st_ino == ino;
}

static int
proc_euid(pid_t pid, uid_t *out)
{
	char path[64], *buf = NULL, *p;
	unsigned long r, e;
	size_t len;
	int ret;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if ((ret = read_file(path, 65536, &buf, &len)) < 0)
		return ret;
	ret = -EINVAL;
	if ((p = strstr(buf, "\nUid:")) != NULL && sscanf(p + 5, "%lu %lu", &r, &e) == 2) {
		*out = (uid_t)e;
		ret = 0;
	}
	free(buf);
	return ret;
}

static int
hash_file(const char *path, char hex[MGR_HASH_HEX + 1])
{
	crypto_generichash_state st;
	unsigned char buf[65536], h[32];
	ssize_t n;
	int fd, ret = 0;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	crypto_generichash_init(&st, NULL, 0, sizeof(h));
	while ((n = read(fd, buf, sizeof(buf))) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			ret = -errno;
			goto out;
		}
		crypto_generichash_update(&st, buf, (size_t)n);
	}
	crypto_generichash_final(&st, h, sizeof(h));
	hex_encode(h, sizeof(h), hex, MGR_HASH_HEX + 1);
out:
	close(fd);
	return ret;
}

/* The hash of spaced-host, kept between spawns. The bridge is started
 * from a descriptor of the file (execveat), so the process runs the inode
 * that descriptor names; its hash is taken again only when that inode, or
 * its size, mtime or ctime, differ from the ones the kept hash was taken
 * of. A write to the file changes its mtime and ctime (a ctime cannot be
 * set from user space), so a kept hash is of the content that runs. A
 * hash is kept only of a file whose ctime is at least EXE_SETTLED_S old
 * when it is taken: a write in the same clock tick as an earlier one
 * (timestamps are as coarse as the kernel's tick) would otherwise leave
 * the ctime unchanged. */
#define EXE_SETTLED_S 2
static struct {
	pthread_mutex_t mu;
	bool valid;
	struct stat key;
	char hex[MGR_HASH_HEX + 1];
} exe_cache = { .mu = PTHREAD_MUTEX_INITIALIZER };

static bool
same_file_state(const struct stat *a, const struct stat *b)
{
	return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
	    a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
	    a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* the hash of the file fd (which before, at *before, was in this state),
 * run by pid (its /proc/PID/exe, the same inode): the kept one when the
 * file is unchanged since it was taken, else taken now through the
 * process's exe and kept when the file has settled */
static int
exe_hash_of(int fd, const struct stat *before, pid_t pid, char hex[MGR_HASH_HEX + 1])
{
	char exe[64];
	struct stat now, after;
	struct timespec rt;
	int ret;

	if (fstat(fd, &now) != 0)
		return -errno;
	pthread_mutex_lock(&exe_cache.mu);
	if (exe_cache.valid && same_file_state(before, &now) &&
	    same_file_state(&exe_cache.key, &now)) {
		memcpy(hex, exe_cache.hex, MGR_HASH_HEX + 1);
		pthread_mutex_unlock(&exe_cache.mu);
		return 0;
	}
	pthread_mutex_unlock(&exe_cache.mu);
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if ((ret = hash_file(exe, hex)) != 0)
		return ret;
	clock_gettime(CLOCK_REALTIME, &rt);
	if (fstat(fd, &after) == 0 && same_file_state(&now, &after) &&
	    after.st_ctim.tv_sec + EXE_SETTLED_S < rt.tv_sec) {
		pthread_mutex_lock(&exe_cache.mu);
		exe_cache.key = after;
		memcpy(exe_cache.hex, hex, MGR_HASH_HEX + 1);
		exe_cache.valid = true;
		pthread_mutex_unlock(&exe_cache.mu);
	}
	return 0;
}

/* 0; -ESRCH the monitor is gone; -EPERM its pid is another process now;
 * -EACCES it is the monitor we launched but no longer a bridge we trust
 * (another binary, or its serving process gone or replaced) */
int
bridge_identity_check(const struct mgr *m, const struct record *r, const char **why)
{
	char exe[64];
	uint64_t start;
	struct stat st, disk;

	if (r->bridge_pid <= 0) {
		*why = "no bridge recorded";
		return -ESRCH;
	}
	/* a PID that was reused has another start time */
	if (proc_start_time(r->bridge_pid, &start) != 0) {
		*why = "bridge process gone";
		return -ESRCH;
	}
	if (start != r->bridge_start) {
		*why = "bridge start time differs (pid reused)";
		return -EPERM;
	}
	/* same pid and start time but another program (execve) */
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)r->bridge_pid);
	if (stat(exe, &st) != 0) {
		*why = "bridge executable unreadable";
		return -EACCES;
	}
	if ((uint64_t)st.st_dev != r->exe_dev || (uint64_t)st.st_ino != r->exe_ino) {
		*why = "bridge executable differs";
		return -EACCES;
	}
	/* the serving process: still the monitor's child we recorded,
	 * running the same file. The monitor is ours (checked above), so a
	 * missing or different serving process makes it a bridge we no
	 * longer trust (-EACCES: it may be stopped), not someone else's */
	if (r->serve_pid <= 0 || proc_start_time(r->serve_pid, &start) != 0) {
		*why = "bridge serving process gone";
		return -EACCES;
	}
	if (start != r->serve_start || !parent_is(r->serve_pid, r->bridge_pid)) {
		*why = "bridge serving process differs (pid reused)";
		return -EACCES;
	}
	if (!same_exe(r->serve_pid, r->exe_dev, r->exe_ino)) {
		*why = "bridge executable differs";
		return -EACCES;
	}
	/* the binary on disk was replaced since this bridge started */
	if (stat(m->cfg.spaced_host, &disk) != 0 || (uint64_t)disk.st_dev != r->exe_dev ||
	    (uint64_t)disk.st_ino != r->exe_ino) {
		*why = "bridge binary replaced on disk";
		return -EACCES;
	}
	return 0;
}

/* the content of the running executable against the hash taken at start;
 * read through /proc/PID/exe, so it is the file the process runs */
int
bridge_hash_check(const struct record *r, const char **why)
{
	char exe[64], hex[MGR_HASH_HEX + 1];

	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)r->bridge_pid);
	if (hash_file(exe, hex) != 0 || !ct_equal(hex, r->exe_hash, MGR_HASH_HEX)) {
		*why = "bridge binary hash differs";
		return -EACCES;
	}
	return 0;
}

/* a pidfd for the recorded bridge, only if it is still that process */
int
bridge_pidfd_open_checked(const struct record *r)
{
	uint64_t start;
	int pfd;

	if (r->bridge_pid <= 0)
		return -ESRCH;
	if ((pfd = pidfd_open(r->bridge_pid, 0)) < 0)
		return -errno;
	/* checked after opening: the pidfd pins that exact process, so if the
	 * start time matches now, the pidfd is the bridge */
	if (proc_start_time(r->bridge_pid, &start) != 0 || start != r->bridge_start) {
		close(pfd);
		return -ESRCH;
	}
	return pfd;
}

static void
u64str(char *buf, size_t cap, uint64_t v)
{
	snprintf(buf, cap, "%llu", (unsigned long long)v);
}

/* start spaced-host from exefd with argv, stdin in, stdout out, in a
 * session of its own: its pid, or -1.
 *
 * vfork: the child shares our memory until its exec, so starting it copies
 * none of this multi-threaded process's page tables (a fork did, on every
 * create: docs/benchmarks.md). Only the calling thread waits for the exec.
 * The child makes system calls only and writes nothing of ours but errno
 * (the same thread-local slot); no handler of ours can run in it
 * (sbx-manager installs none: its signals are blocked and taken by
 * sigwait). A function of its own, so no variable of the caller lives in
 * a register the child could clobber. */
static pid_t __attribute__((noinline))
spawn_bridge(int exefd, int in, int out, bool lowprio, char **argv)
{
	pid_t pid = vfork();

	if (pid != 0)
		return pid;
	/* own session: a bridge outlives a restart of sbx-manager and must
	 * not get the signals of its process group */
	setsid();
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0)
		_exit(127);
	/* a prepared jail's bridge: made ahead, behind the creates running
	 * now; its claim sets it back to the default (spaced-host) */
	if (lowprio) {
		(void)setpriority(PRIO_PROCESS, 0, 10);
		(void)syscall(SYS_ioprio_set, 1, 0, (2 << 13) | 7);
	}
	/* the binary's descriptor as 3, closed by the exec */
	if (exefd != 3 && dup3(exefd, 3, O_CLOEXEC) < 0)
		_exit(127);
	close_range(4, ~0u, 0);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	execveat(3, "", argv, environ, AT_EMPTY_PATH);
	_exit(127);
}

/* the bridge pid (pinned by pidfd, our child) says "ready PID" on rfd
 * within the time allowed, and is what we started: it runs the file exefd
 * (in the state *xst when opened), its serving process is its child with
 * the sandbox's serving uid and the same file. r gets the process
 * identity. 0 or -errno with *why */
static int
ready_checked(const struct mgr *m, struct record *r, pid_t pid, int pidfd, int rfd, int exefd,
    const struct stat *xst, uint64_t *t_ready, const char **why)
{
	char line[64], exe[64];
	size_t got = 0;
	struct stat st, disk;
	uint64_t deadline;
	struct pollfd pf[2];

	deadline = now_mono_ns() + (uint64_t)MGR_READY_TIMEOUT_MS * 1000000u;
	for (;;) {
		uint64_t now = now_mono_ns();
		ssize_t n;
		int pr;

		if (now >= deadline) {
			*why = "bridge not ready in time";
			return -ETIMEDOUT;
		}
		pf[0] = (struct pollfd){ .fd = rfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
		pr = poll(pf, 2, (int)((deadline - now) / 1000000u) + 1);
		if (pr < 0 && errno != EINTR)
			return -EIO;
		if (pr <= 0)
			continue;
		if (pf[0].revents & (POLLIN | POLLHUP)) {
			n = read(rfd, line + got, sizeof(line) - 1 - got);
			if (n <= 0) {
				*why = "bridge exited before ready";
				return -ECHILD;
			}
			got += (size_t)n;
			line[got] = '\0';
			if (memchr(line, '\n', got))
				break;
			if (got == sizeof(line) - 1) {
				*why = "bridge said something else than ready";
				return -EPROTO;
			}
			continue;
		}
		if (pf[1].revents & POLLIN) {
			*why = "bridge exited before ready";
			return -ECHILD;
		}
	}
	*t_ready = now_mono_ns();
	/* "ready PID\n": PID is the serving process */
	{
		char *end;
		long sp;
		errno = 0;
		sp = strncmp(line, "ready ", 6) == 0 ? strtol(line + 6, &end, 10) : 0;
		if (sp <= 0 || sp > INT32_MAX || errno != 0 || strcmp(end, "\n") != 0) {
			*why = "bridge said something else than ready";
			return -EPROTO;
		}
		r->serve_pid = (pid_t)sp;
	}
	r->bridge_pid = pid;
	snprintf(exe, sizeof(exe), "/proc/%d/exe", (int)pid);
	if (proc_start_time(pid, &r->bridge_start) != 0 ||
	    stat(exe, &st) != 0) {
		/* our unreaped child's /proc entries are there while it
		 * lives: failing to read them means it died */
		*why = "cannot read the bridge's process identity";
		return -ECHILD;
	}
	/* it runs the file we opened (a child that exec'd something else
	 * would show another inode), whose hash is then the bridge's */
	if (st.st_dev != xst->st_dev || st.st_ino != xst->st_ino) {
		*why = "bridge runs another executable than spaced-host";
		return -EACCES;
	}
	if (exe_hash_of(exefd, xst, pid, r->exe_hash) != 0) {
		*why = "cannot read the bridge's process identity";
		return -ECHILD;
	}
	r->exe_dev = (uint64_t)st.st_dev;
	r->exe_ino = (uint64_t)st.st_ino;
	/* the process the monitor named must be its own child (only the
	 * monitor, alive and pinned by our pidfd, can have made one), run
	 * the same file, and hold the serving uid of this sandbox's range,
	 * not root: the one that parses frames is the unprivileged one */
	if (proc_start_time(r->serve_pid, &r->serve_start) != 0 ||
	    !parent_is(r->serve_pid, pid) || proc_euid(r->serve_pid, &r->bridge_uid) != 0) {
		*why = "bridge named a serving process that is not its child";
		return -EPROTO;
	}
	if (r->bridge_uid != r->uid_base + SPACE_BRIDGE_UID_OFFSET) {
		*why = "bridge serving process has another uid";
		return -EACCES;
	}
	if (!same_exe(r->serve_pid, r->exe_dev, r->exe_ino)) {
		*why = "bridge serving process runs another executable";
		return -EACCES;
	}
	if (stat(m->cfg.spaced_host, &disk) != 0 || disk.st_dev != st.st_dev ||
	    disk.st_ino != st.st_ino) {
		*why = "spaced-host replaced while starting";
		return -EACCES;
	}
	/* still alive now, so everything read from /proc above was this child */
	pf[0] = (struct pollfd){ .fd = pidfd, .events = POLLIN };
	if (poll(pf, 1, 0) != 0) {
		*why = "bridge exited after ready";
		return -ECHILD;
	}
	return 0;
}

int
bridge_spawn(const struct mgr *m, struct record *r, int *pidfd_out, const char **why)
{
	return bridge_spawn_claim(m, r, NULL, pidfd_out, why);
}

int
bridge_spawn_claim(const struct mgr *m, struct record *r, const char *claim_from,
    int *pidfd_out, const char **why)
{
	char gen[24], act[24], uidb[24], mem[24], pids[24], cpu[24], dmb[24];
	char ns[16], img[1200], nsp[PATH_MAX + 16];
	int pfd[2] = { -1, -1 }, pidfd = -1, ret = -EIO, devnull, exefd = -1;
	pid_t pid;
	struct stat xst;
	/* where the spawn's time goes, for the log (docs/benchmarks.md) */
	uint64_t t0 = now_mono_ns(), t_ns = 0, t_tpl = 0, t_fork = 0, t_rdy = 0;

	*pidfd_out = -1;
	*why = "spawn failed";
	u64str(gen, sizeof(gen), r->id.generation);
	u64str(act, sizeof(act), r->id.activation);
	u64str(uidb, sizeof(uidb), r->uid_base);
	u64str(mem, sizeof(mem), r->memory_mb);
	u64str(pids, sizeof(pids), r->pids);
	u64str(cpu, sizeof(cpu), r->cpu_percent);
	u64str(dmb, sizeof(dmb), r->disk_mb);
	egress_nameserver(r, ns);
	/* the execution's network namespace: made by the first activation,
	 * joined by every one (netns.c) */
	if ((ret = netns_ensure(r, nsp, sizeof(nsp))) != 0) {
		*why = "cannot make the network namespace";
		return ret;
	}
	t_ns = now_mono_ns();
	char *argv[] = {
		NULL, "--claim-from", (char *)claim_from, "--sandbox", r->id.sandbox, "--generation", gen,
		"--activation", act, "--worker", r->id.worker, "--resident", r->id.resident,
		"--substrate", r->id.substrate, "--template", r->template_name,
		"--run-dir", r->run_dir, "--layer-dir", r->layer_dir, "--uid-base", uidb,
		"--memory-mb", mem, "--pids", pids, "--cpu-percent", cpu, "--netns", nsp,
		"--disk-mb", dmb, "--template-image", img, "--nameserver", ns, NULL
	};
	char **tail = &argv[sizeof(argv) / sizeof(argv[0]) - 5];
	bool host = strcmp(r->template_name, "host") == 0;
	/* --claim-from POOLID: the bridge binds that prepared jail */
	char **av = claim_from != NULL ? argv : argv + 2;

	av[0] = (char *)m->cfg.spaced_host;

	/* the optional pairs: --template-image (not for host), --nameserver */
	if (host) {
		tail[0] = tail[2];
		tail[1] = tail[3];
		tail[2] = NULL;
	}
	if (!ns[0])
		tail[host ? 0 : 2] = NULL;
	/* a template other than host is its image's digest: the image is
	 * fetched (and verified) before the bridge, which verifies it again */
	if (host) {
		;
	} else if ((ret = template_ensure(m, r->template_name, img, sizeof(img), why)) < 0) {
		return ret;
	}
	ret = -EIO;
	t_tpl = now_mono_ns();

	/* the bridge runs this descriptor's file: what is hashed (or found
	 * unchanged since it was) is what runs */
	if ((exefd = open(m->cfg.spaced_host, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fstat(exefd, &xst) != 0) {
		*why = "cannot open spaced-host";
		goto out;
	}
	if (pipe2(pfd, O_CLOEXEC) != 0 ||
	    (devnull = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0)
		goto out;
	pid = spawn_bridge(exefd, devnull, pfd[1], false, av);
	if (pid < 0) {
		close(devnull);
		goto out;
	}
	close(devnull);
	t_fork = now_mono_ns();
	close(pfd[1]);
	pfd[1] = -1;
	/* a pidfd of our own unreaped child: it cannot be another process */
	if ((pidfd = pidfd_open(pid, 0)) < 0) {
		/* still our unreaped child, so the bare pid is safe to use
		 * here; reaped at once, or it would stay a zombie */
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto out;
	}
	if ((ret = ready_checked(m, r, pid, pidfd, pfd[0], exefd, &xst, &t_rdy, why)) != 0)
		goto fail;
	*pidfd_out = pidfd;
	pidfd = -1;
	ret = 0;
	{
		uint64_t t_end = now_mono_ns();
		log_info("bridge of %s g%llu a%u spawned in %.1f ms: network namespace %.1f, "
		    "template %.1f, fork %.1f, exec to ready %.1f, checks %.1f", r->id.sandbox,
		    (unsigned long long)r->id.generation, r->id.activation,
		    (double)(t_end - t0) / 1e6, (double)(t_ns - t0) / 1e6,
		    (double)(t_tpl - t_ns) / 1e6, (double)(t_fork - t_tpl) / 1e6,
		    (double)(t_rdy - t_fork) / 1e6, (double)(t_end - t_rdy) / 1e6);
	}
	goto out;
fail:
	if (pidfd >= 0) {
		bridge_stop(pidfd);
		waitid(P_PIDFD, (id_t)pidfd, NULL, WEXITED | WNOHANG);
	}
out:
	if (exefd >= 0)
		close(exefd);
	if (pidfd >= 0)
		close(pidfd);
	if (pfd[0] >= 0)
		close(pfd[0]);
	if (pfd[1] >= 0)
		close(pfd[1]);
	return ret;
}

/* A prepared jail's kept bridge (jailpool.c; docs/jail.md, "Prepared
 * jails"): `spaced-host --pool` makes the jail and stays, with no
 * identity and no secret, reading its claim on stdin. It is started as
 * every bridge is (from a descriptor of spaced-host, in a session of its
 * own, our child), at a lower priority, and keeps that descriptor with
 * the pool so that its claim is checked against the file it runs. */
int
bridge_pool_spawn(const struct mgr *m, char **argv, struct jailpool_jail *j)
{
	int in[2] = { -1, -1 }, out[2] = { -1, -1 }, ret = -EIO;
	char line[64];
	size_t got = 0;
	uint64_t deadline;
	pid_t pid;

	j->mon = 0;
	j->mon_pidfd = j->claim_fd = j->ready_fd = j->exefd = -1;
	if ((j->exefd = open(m->cfg.spaced_host, O_RDONLY | O_CLOEXEC)) < 0 ||
	    fstat(j->exefd, &j->xst) != 0 || pipe2(in, O_CLOEXEC) != 0 ||
	    pipe2(out, O_CLOEXEC) != 0) {
		ret = -errno;
		goto fail;
	}
	argv[0] = (char *)m->cfg.spaced_host;
	if ((pid = spawn_bridge(j->exefd, in[0], out[1], true, argv)) < 0) {
		ret = -errno;
		goto fail;
	}
	if ((j->mon_pidfd = pidfd_open(pid, 0)) < 0) {
		ret = -errno;
		kill(pid, SIGKILL);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		goto fail;
	}
	j->mon = pid;
	j->claim_fd = in[1];
	j->ready_fd = out[0];
	in[1] = out[0] = -1;
	close(in[0]);
	close(out[1]);
	in[0] = out[1] = -1;
	/* "pooled GUESTPID\n" */
	deadline = now_mono_ns() + (uint64_t)MGR_READY_TIMEOUT_MS * 1000000u;
	while (memchr(line, '\n', got) == NULL) {
		struct pollfd pf[2] = { { .fd = j->ready_fd, .events = POLLIN },
		    { .fd = j->mon_pidfd, .events = POLLIN } };
		uint64_t now = now_mono_ns();
		ssize_t n;

		if (now >= deadline || got == sizeof(line) - 1) {
			ret = -ETIMEDOUT;
			goto fail;
		}
		if (poll(pf, 2, (int)((deadline - now) / 1000000u) + 1) <= 0)
			continue;
		if (!(pf[0].revents & (POLLIN | POLLHUP))) {
			if (pf[1].revents & POLLIN) {
				ret = -ECHILD;
				goto fail;
			}
			continue;
		}
		if ((n = read(j->ready_fd, line + got, sizeof(line) - 1 - got)) <= 0) {
			ret = -ECHILD;
			goto fail;
		}
		got += (size_t)n;
	}
	line[got] = '\0';
	{
		char *end;
		long v;

		errno = 0;
		v = strncmp(line, "pooled ", 7) == 0 ? strtol(line + 7, &end, 10) : 0;
		if (v <= 1 || v > INT32_MAX || errno != 0 || strcmp(end, "\n") != 0) {
			ret = -EPROTO;
			goto fail;
		}
		j->pid = (pid_t)v;
	}
	return 0;
fail:
	bridge_pool_end(j);
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0)
			close(in[i]);
		if (out[i] >= 0)
			close(out[i]);
	}
	return ret;
}

void
bridge_pool_end(struct jailpool_jail *j)
{
	/* its stdin closed: a kept bridge with no claim exits, leaving
	 * the jail as it is (the caller destroys it) */
	if (j->claim_fd >= 0)
		close(j->claim_fd);
	if (j->mon_pidfd >= 0) {
		struct pollfd pf = { .fd = j->mon_pidfd, .events = POLLIN };

		if (poll(&pf, 1, MGR_STOP_GRACE_MS) != 1) {
			pidfd_send_signal(j->mon_pidfd, SIGKILL, NULL, 0);
			poll(&pf, 1, MGR_STOP_GRACE_MS);
		}
		waitid(P_PIDFD, (id_t)j->mon_pidfd, NULL, WEXITED | WNOHANG);
		close(j->mon_pidfd);
	}
	if (j->ready_fd >= 0)
		close(j->ready_fd);
	if (j->exefd >= 0)
		close(j->exefd);
	j->mon = 0;
	j->mon_pidfd = j->claim_fd = j->ready_fd = j->exefd = -1;
}

int
bridge_pool_claim(const struct mgr *m, struct record *r, struct jailpool_jail *j,
    int *pidfd_out, const char **why)
{
	struct pool_claim c;
	uint8_t buf[POOLCLAIM_MAX];
	char nsp[PATH_MAX + 16];
	struct stat disk;
	uint64_t t0 = now_mono_ns(), t_ns, t_rdy = 0;
	int n, ret;

	*pidfd_out = -1;
	*why = "spawn failed";
	if (j->mon_pidfd < 0)
		return -ESRCH;
	/* what a --claim-from start would be given, and the kept bridge
	 * runs the spaced-host a start would (not one replaced since) */
	if (netns_ensure(r, nsp, sizeof(nsp)) != 0 || stat(m->cfg.spaced_host, &disk) != 0 ||
	    disk.st_dev != j->xst.st_dev || disk.st_ino != j->xst.st_ino)
		goto fallback;
	t_ns = now_mono_ns();
	memset(&c, 0, sizeof(c));
	c.id = r->id;
	egress_nameserver(r, c.nameserver);
	c.uid_base = r->uid_base;
	c.memory_mb = r->memory_mb;
	c.pids = r->pids;
	c.cpu_percent = r->cpu_percent;
	c.disk_mb = r->disk_mb;
	if ((size_t)snprintf(c.claim_from, sizeof(c.claim_from), "%s", j->name) >=
	    sizeof(c.claim_from) ||
	    (size_t)snprintf(c.run_dir, sizeof(c.run_dir), "%s", r->run_dir) >= sizeof(c.run_dir) ||
	    (size_t)snprintf(c.layer_dir, sizeof(c.layer_dir), "%s", r->layer_dir) >=
	    sizeof(c.layer_dir) ||
	    (size_t)snprintf(c.netns, sizeof(c.netns), "%s", nsp) >= sizeof(c.netns) ||
	    (n = poolclaim_encode(&c, buf, sizeof(buf))) < 0)
		goto fallback;
	/* one write of at most PIPE_BUF: all of it or nothing (EPIPE: the
	 * kept bridge is gone and read nothing) */
	if (write(j->claim_fd, buf, (size_t)n) != n)
		goto fallback;
	close(j->claim_fd);
	j->claim_fd = -1;
	if ((ret = ready_checked(m, r, j->mon, j->mon_pidfd, j->ready_fd, j->exefd, &j->xst,
	    &t_rdy, why)) != 0) {
		bridge_stop(j->mon_pidfd);
		bridge_pool_end(j);
		return ret;
	}
	*pidfd_out = j->mon_pidfd;
	j->mon_pidfd = -1;
	bridge_pool_end(j);
	{
		uint64_t t_end = now_mono_ns();
		log_info("bridge of %s g%llu a%u spawned in %.1f ms: network namespace %.1f, "
		    "template 0.0, fork 0.0, exec to ready %.1f, checks %.1f (the prepared "
		    "jail's kept bridge, claimed)", r->id.sandbox,
		    (unsigned long long)r->id.generation, r->id.activation,
		    (double)(t_end - t0) / 1e6, (double)(t_ns - t0) / 1e6,
		    (double)(t_rdy - t_ns) / 1e6, (double)(t_end - t_rdy) / 1e6);
	}
	return 0;
fallback:
	/* nothing was claimed: the jail is as prepared, for a bridge
	 * started to claim it once this one has let go of it */
	bridge_pool_end(j);
	return -ESRCH;
}

void
bridge_stop(int pidfd)
{
	struct pollfd pf = { .fd = pidfd, .events = POLLIN };

	if (pidfd < 0)
		return;
	if (pidfd_send_signal(pidfd, SIGTERM, NULL, 0) != 0)
		return;
	if (poll(&pf, 1, MGR_STOP_GRACE_MS) == 1)
		return;
	pidfd_send_signal(pidfd, SIGKILL, NULL, 0);
	poll(&pf, 1, MGR_STOP_GRACE_MS);
}

int
bridge_sock_id(const struct record *r, uint64_t *dev, uint64_t *ino)
{
	struct stat st;
	int dfd, ret = 0;

	/* the same private directory bridge_connect insists on */
	dfd = open(r->run_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return -errno;
	if (fstat(dfd, &st) != 0 || st.st_uid != 0 || (st.st_mode & 077) != 0 ||
	    fstatat(dfd, "bridge.sock", &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode))
		ret = -EPERM;
	close(dfd);
	if (ret == 0) {
		*dev = (uint64_t)st.st_dev;
		*ino = (uint64_t)st.st_ino;
	}
	return ret;
}

int
bridge_connect(const struct mgr *m, const struct record *r, const char **why)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 5 };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct stat st;
	int dfd = -1, fd = -1, ret, n;

	*why = "bridge unreachable";
	/* the socket lives in a 0700 root directory named after the
	 * generation; refuse a directory that someone else could have
	 * populated */
	dfd = open(r->run_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0 || fstat(dfd, &st) != 0) {
		ret = -ENOENT;
		goto fail;
	}
	if (st.st_uid != 0 || (st.st_mode & 077) != 0) {
		*why = "bridge directory not private";
		ret = -EPERM;
		goto fail;
	}
	/* through /proc/self/fd: no sun_path length limit, no re-resolution
	 * of the directory path after the check above */
	n = snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d/bridge.sock", dfd);
	if (n < 0 || (size_t)n >= sizeof(sa.sun_path)) {
		ret = -ENAMETOOLONG;
		goto fail;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0) {
		ret = -errno;
		goto fail;
	}
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		goto fail;
	}
	/* who called listen() on the socket we reached */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) != 0) {
		ret = -errno;
		goto fail;
	}
	if (cr.pid != r->serve_pid || cr.uid != r->bridge_uid) {
		*why = "peer is not the recorded bridge (SO_PEERCRED)";
		ret = -EPERM;
		goto fail;
	}
	if ((ret = bridge_identity_check(m, r, why)) != 0) {
		ret = -EPERM;
		goto fail;
	}
	/* the listener must be a socket the serving process holds (sockdiag.c) */
	if ((ret = sockdiag_peer_owned_by(fd, r->serve_pid, why)) != 0) {
		ret = -EPERM;
		goto fail;
	}
	/* again: the pid must not have changed hands while we looked */
	if ((ret = bridge_identity_check(m, r, why)) != 0) {
		ret = -EPERM;
		goto fail;
	}
	close(dfd);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	return ret < 0 ? ret : -EIO;
}
