/* The jail substrate: Linux namespaces, a pivot_root'ed rootfs built from
 * the `host` template, cgroup limits and a size-bounded writable layer
 * (DESIGN section 10, docs/jail.md).
 *
 * Parent (spaced-host, real root)          child (becomes spaced-guest, PID 1)
 *   cgroup, disk image mounted at RUNDIR/rw
 *   clone(NEWUSER|NEWNS|NEWPID|...) ------> waits on the sync pipe
 *   uid_map, setgroups deny, gid_map
 *   cgroup.procs <- child
 *   "go" + secret ----------------------->  setresuid(0) in the new user ns
 *                                           NEWCGROUP, rootfs, mask /proc, pivot_root
 *                                           lo up, hostname, exec guest
 *   error pipe EOF = exec happened  <-----  (or an error line, then exit)
 *
 * What the guest does to itself after exec (capabilities, no_new_privs,
 * seccomp, rlimits) is in src/spaced-guest/confine.c.
 *
 * The jail outlives its bridge (docs/jail.md): the first bridge binds
 * RUNDIR/jail.sock and hands it to the guest, which listens there. A
 * later bridge of the same execution (the next activation) finds the
 * guest listening, takes the layer's lock, and attaches: a new control
 * channel, identity and secret (jailkeep.h) instead of a new jail. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <linux/nsfs.h>
#include <linux/openat2.h>
#include <unistd.h>

#include <sodium.h>

#include "cgroup.h"
#include "jailfs.h"
#include "jailkeep.h"
#include "layer.h"
#include "limits.h"
#include "log.h"
#include "substrate.h"
#include "template.h"
#include "util.h"

#define JAIL_ROOT       JAILFS_ASSEMBLY /* where the new root is assembled, inside the child's mount ns */
#define GUEST_FD_CONTROL 3
#define GUEST_FD_SECRET  4
#define GUEST_FD_KEEP    5
/* how long the stop of a kept jail waits for its guest to exit */
#define KEPT_STOP_WAIT_MS 5000

struct substrate {
	pid_t pid;                      /* host pid of the guest; 0 once reaped */
	struct cgroup cg;
	struct layer layer;
	struct tpl_mount tpl;           /* a template other than host */
	bool templated;
	bool adopted;                   /* the jail of a previous bridge (not our child) */
	int pidfd;                      /* the adopted guest's; -1 */
	unsigned cpu_percent;           /* the quota written at serving */
	char keep[1100];                /* RUNDIR/jail.sock */
};

/* ---- child side: runs in the new namespaces, reports errors on a pipe ---- */

static int child_err_fd = -1;

static noreturn void __attribute__((format(printf, 1, 2)))
child_die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int e = errno, n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	n += snprintf(msg + n, sizeof(msg) - (size_t)n, ": %s", strerror(e));
	if ((size_t)n >= sizeof(msg))
		n = sizeof(msg) - 1;
	if (write(child_err_fd, msg, (size_t)n) < 0) {
		/* nothing left to tell */
	}
	_exit(1);
}

/* flags a remount must keep: in a user namespace the kernel refuses to
 * clear the ones it locked on a mount inherited from the host */
static unsigned long
locked_flags(const char *path)
{
	struct statvfs sv;
	unsigned long f = 0;

	if (statvfs(path, &sv) < 0)
		return 0;
	if (sv.f_flag & ST_NOSUID)
		f |= MS_NOSUID;
	if (sv.f_flag & ST_NODEV)
		f |= MS_NODEV;
	if (sv.f_flag & ST_NOEXEC)
		f |= MS_NOEXEC;
	if (sv.f_flag & ST_NOATIME)
		f |= MS_NOATIME;
	if (sv.f_flag & ST_NODIRATIME)
		f |= MS_NODIRATIME;
	if (sv.f_flag & ST_RELATIME)
		f |= MS_RELATIME;
	return f;
}

/* bind src onto dst (which exists), then make it read-only or not;
 * never suid, never device nodes unless dev */
static void
bind_path(const char *src, const char *dst, bool ro, bool dev)
{
	unsigned long f;

	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		child_die("bind %s", src);
	f = MS_REMOUNT | MS_BIND | MS_NOSUID | locked_flags(dst);
	if (ro)
		f |= MS_RDONLY;
	if (!dev)
		f |= MS_NODEV;
	if (mount(NULL, dst, NULL, f, NULL) < 0)
		child_die("remount %s", dst);
}

static void
make_file(const char *path, const char *content, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	size_t n = content ? strlen(content) : 0;

	if (fd < 0)
		child_die("create %s", path);
	if (n && write(fd, content, n) != (ssize_t)n)
		child_die("write %s", path);
	close(fd);
}

/* A limit of our user namespace (JAIL_ROOT/proc/sys/user/NAME, ours since
 * we are its root): what the sandbox's users may take of a count the kernel
 * also charges, up the chain of namespaces, to the host uid that made
 * ours (root), whose own bound every sandbox and host daemon share. A
 * kernel without it: skipped. */
static void
userns_limit(const char *name, unsigned v)
{
	char path[256], val[32];
	int fd, n;

	snprintf(path, sizeof(path), JAIL_ROOT "/proc/sys/user/%s", name);
	if ((fd = open(path, O_WRONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return;
		child_die("open %s", path);
	}
	n = snprintf(val, sizeof(val), "%u\n", v);
	if (write(fd, val, (size_t)n) != n)
		child_die("write %s", path);
	close(fd);
}

static void
make_dir(const char *path, mode_t mode)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		child_die("mkdir %s", path);
}

/* host path -> same path in the new root: a symlink stays a symlink (usrmerge:
 * /bin -> usr/bin), a directory or file is bound read-only */
static void
mirror_ro(const char *host)
{
	char dst[512], target[512];
	struct stat st;
	ssize_t n;

	if (lstat(host, &st) < 0)
		return;                 /* not on this host: not in the template */
	snprintf(dst, sizeof(dst), JAIL_ROOT "%s", host);
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(host, target, sizeof(target) - 1)) < 0)
			child_die("readlink %s", host);
		target[n] = '\0';
		if (symlink(target, dst) < 0)
			child_die("symlink %s", dst);
	} else if (S_ISDIR(st.st_mode)) {
		make_dir(dst, 0755);
		bind_path(host, dst, true, false);
	} else if (S_ISREG(st.st_mode)) {
		make_file(dst, NULL, 0644);
		bind_path(host, dst, true, false);
	}
}

/* What the sandbox's own /proc still shows of the kernel, the host and
 * the other sandboxes (docs/jail.md, "/proc"): what the common container
 * runtimes mask, plus every file that names the host's disks (other
 * sandboxes' loop devices), its boot command line or its configuration.
 * Files become /dev/null (read: empty), directories an empty read-only
 * tmpfs. Done before the pivot, while the host's /dev/null is reachable;
 * the guest then has no capability to unmount them and no umount call. */
static void
mask_proc(void)
{
	static const char *const files[] = {
		"cmdline", "config.gz", "diskstats", "partitions", "swaps",
		"mdstat", "locks", "kcore", "kmsg", "kallsyms", "modules",
		"keys", "key-users", "latency_stats", "timer_list",
		"timer_stats", "sched_debug", "interrupts", "softirqs", "iomem",
		"ioports", "vmallocinfo", "slabinfo", "pagetypeinfo",
		"zoneinfo", "buddyinfo", "kpagecount", "kpageflags",
		"kpagecgroup", "mtrr", "sysrq-trigger", NULL
	};
	static const char *const dirs[] = {
		"acpi", "asound", "bus", "driver", "fs", "irq", "pressure",
		"scsi", "dynamic_debug", NULL
	};
	char p[128], first[128] = "";
	struct stat st;
	int i;

	for (i = 0; files[i]; i++) {
		snprintf(p, sizeof(p), JAIL_ROOT "/proc/%s", files[i]);
		if (lstat(p, &st) == 0)         /* absent on this kernel: nothing to hide */
			bind_path("/dev/null", p, true, true);
	}
	/* one empty tmpfs, bound over each directory: a file system per
	 * directory would be a superblock each, and the kernel visits every
	 * superblock's lists when any memory cgroup goes (each sandbox's,
	 * at every stop) */
	for (i = 0; dirs[i]; i++) {
		snprintf(p, sizeof(p), JAIL_ROOT "/proc/%s", dirs[i]);
		if (lstat(p, &st) != 0)
			continue;
		if (first[0] != '\0')
			bind_path(first, p, true, false);
		else if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    "mode=0555,size=4k,nr_inodes=1") < 0)
			child_die("mask %s", p);
		else
			snprintf(first, sizeof(first), "%s", p);
	}
	/* kernel settings: readable as in any container, never writable
	 * (the netns' own net.* would otherwise be root-writable inside) */
	bind_path(JAIL_ROOT "/proc/sys", JAIL_ROOT "/proc/sys", true, false);
}

/* the template's overlay, opened by the child while it still has the
 * host's root ids (RUNDIR is 0700 root); -1 for the host template */
static int root_fd = -1;

/* a directory at rel under the new root that is no link: created when
 * missing. The tree is the sandbox's (its upper layer, from its last run
 * or a snapshot), so a planted symlink must not steer a mount; nothing
 * else runs in it now (the layer is locked), so checking then using the
 * path is not racy. */
static void
template_dir(const char *rel, mode_t mode)
{
	struct open_how how = { .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	char p[512];
	int fd;

	snprintf(p, sizeof(p), JAIL_ROOT "/%s", rel);
	fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
	if (fd < 0 && errno == ENOENT) {
		make_dir(p, mode);
		fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
	}
	if (fd < 0)
		child_die("template path /%s (must be a directory, not a link)", rel);
	close(fd);
}

/* the root is the template's overlay (template.c); the sandbox's home and
 * /tmp stay where they are for `host`: in the layer, bound */
static void
template_rootfs(void)
{
	char src[64];

	snprintf(src, sizeof(src), "/proc/self/fd/%d", root_fd);
	if (mount(src, JAIL_ROOT, NULL, MS_BIND | MS_REC, NULL) < 0)
		child_die("bind the template root");
	close(root_fd);
	/* from here on root_fd names the bound root, for template_dir */
	if ((root_fd = open(JAIL_ROOT, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		child_die("open the template root");
	template_dir("home", 0755);
	template_dir("home/user", 0755);
	bind_path("home", JAIL_ROOT "/home/user", false, false);
	template_dir("tmp", 01777);
	bind_path("tmp", JAIL_ROOT "/tmp", false, false);
	template_dir("dev", 0755);
	template_dir("proc", 0555);
}

static void
build_rootfs(const struct substrate_config *cfg)
{
	char p[512], q[512];
	int i;

	/* nothing we mount may propagate back to the host */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		child_die("make / private");
	if (root_fd >= 0) {
		template_rootfs();
		goto devices;
	}
	/* a fresh tmpfs is the new root: only what we put in it is visible */
	if (mount("tmpfs", JAIL_ROOT, "tmpfs", MS_NOSUID | MS_NODEV,
	    "mode=0755,size=1m,nr_inodes=4096") < 0)
		child_die("mount root tmpfs");
	for (i = 0; jailfs_sys[i]; i++)
		mirror_ro(jailfs_sys[i]);
	make_dir(JAIL_ROOT "/etc", 0755);
	for (i = 0; jailfs_etc[i]; i++)
		mirror_ro(jailfs_etc[i]);
	make_file(JAIL_ROOT "/etc/passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "user:x:1000:1000:user:/home/user:/bin/sh\n"
	    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", 0644);
	make_file(JAIL_ROOT "/etc/group",
	    "root:x:0:\nuser:x:1000:\nnogroup:x:65534:\n", 0644);
	make_file(JAIL_ROOT "/etc/hosts",
	    "127.0.0.1\tlocalhost sandbox\n::1\tlocalhost ip6-localhost\n", 0644);
	make_file(JAIL_ROOT "/etc/hostname", "sandbox\n", 0644);
	/* the worker's end of the sandbox's uplink, when it has one */
	snprintf(p, sizeof(p), "nameserver %s\n", cfg->nameserver);
	make_file(JAIL_ROOT "/etc/resolv.conf", cfg->nameserver[0] ? p : "", 0644);

	/* the writable layer: the child's cwd is the layer's root (the
	 * parent chdir'ed there before clone), so these relative binds work
	 * although RUNDIR itself is 0700 and closed to the sandbox's ids */
	make_dir(JAIL_ROOT "/home", 0755);
	make_dir(JAIL_ROOT "/home/user", 0755);
	bind_path("home", JAIL_ROOT "/home/user", false, false);
	make_dir(JAIL_ROOT "/tmp", 01777);
	bind_path("tmp", JAIL_ROOT "/tmp", false, false);
	make_dir(JAIL_ROOT "/root", 0700);

devices:
	/* minimal /dev: a few harmless character devices and a private devpts */
	make_dir(JAIL_ROOT "/dev", 0755);
	if (mount("tmpfs", JAIL_ROOT "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC,
	    "mode=0755,size=64k,nr_inodes=64") < 0)
		child_die("mount /dev tmpfs");
	for (i = 0; jailfs_dev[i]; i++) {
		snprintf(p, sizeof(p), "/dev/%s", jailfs_dev[i]);
		snprintf(q, sizeof(q), JAIL_ROOT "/dev/%s", jailfs_dev[i]);
		make_file(q, NULL, 0666);
		bind_path(p, q, false, true);
	}
	make_dir(JAIL_ROOT "/dev/pts", 0755);
	/* newinstance: the sandbox's ptys are its own, not the host's; max:
	 * every devpts instance draws on one pool (kernel.pty.max less the
	 * reserve), which one sandbox must not empty for all the others
	 * (sbx-manager raises kernel.pty.max for its capacity) */
	snprintf(p, sizeof(p), "newinstance,ptmxmode=0666,mode=0620,max=%u", SPACE_JAIL_PTYS_MAX);
	if (mount("devpts", JAIL_ROOT "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, p) < 0)
		child_die("mount devpts");
	if (symlink("pts/ptmx", JAIL_ROOT "/dev/ptmx") < 0 ||
	    symlink("/proc/self/fd", JAIL_ROOT "/dev/fd") < 0 ||
	    symlink("/proc/self/fd/0", JAIL_ROOT "/dev/stdin") < 0 ||
	    symlink("/proc/self/fd/1", JAIL_ROOT "/dev/stdout") < 0 ||
	    symlink("/proc/self/fd/2", JAIL_ROOT "/dev/stderr") < 0)
		child_die("/dev symlinks");
	if (mount(NULL, JAIL_ROOT "/dev", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY |
	    MS_NOSUID | MS_NOEXEC, NULL) < 0)
		child_die("remount /dev read-only");

	/* a proc of our own pid namespace: host processes do not exist here */
	make_dir(JAIL_ROOT "/proc", 0555);
	if (mount("proc", JAIL_ROOT "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		child_die("mount proc");
	/* through our own proc, before its /proc/sys is made read-only:
	 * one sandbox cannot take every inotify instance or watch of the
	 * host's root (sbx-manager raises root's bound for its capacity) */
	userns_limit("max_inotify_instances", SPACE_JAIL_INOTIFY_INSTANCES);
	userns_limit("max_inotify_watches", SPACE_JAIL_INOTIFY_WATCHES);
	mask_proc();

	/* pivot_root(".", ".") stacks the old root under the new one; the
	 * detach then drops every host mount from this namespace */
	if (chdir(JAIL_ROOT) < 0)
		child_die("chdir new root");
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		child_die("pivot_root");
	if (umount2(".", MNT_DETACH) < 0)
		child_die("detach old root");
	if (chdir("/") < 0)
		child_die("chdir /");
	/* a template's root is its overlay: writable, into the layer */
	if (root_fd < 0 &&
	    mount(NULL, "/", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		child_die("remount / read-only");
}

static void
loopback_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0)
		child_die("socket");
	memset(&ifr, 0, sizeof(ifr));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0)
		child_die("SIOCGIFFLAGS lo");
	ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
	if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
		child_die("SIOCSIFFLAGS lo");
	close(s);
}

/* move fd to exactly target, without O_CLOEXEC */
static void
place_fd(int fd, int target)
{
	if (fd == target) {
		if (fcntl(fd, F_SETFD, 0) < 0)
			child_die("fcntl");
		return;
	}
	if (dup2(fd, target) < 0)
		child_die("dup2");
}

struct child_args {
	const struct substrate_config *cfg;
	int sync_fd, err_fd, control_fd, secret_fd, exe_fd, keep_fd;
	const char *root_path;          /* the template's overlay, or NULL */
};

static noreturn void
child_main(struct child_args *a)
{
	const struct substrate_config *cfg = a->cfg;
	char gen[24], act[16], nproc[16], fsize[24], nofile[16], orphan[16], c;
	char *argv[24];
	char *envp[] = { "PATH=/usr/local/bin:/usr/bin:/bin", NULL };
	int n = 0, nul;

	child_err_fd = a->err_fd;
	/* wait until the parent has written our id maps and cgroup */
	if (read(a->sync_fd, &c, 1) != 1)
		_exit(1);
	close(a->sync_fd);
	if (a->root_path != NULL &&
	    (root_fd = open(a->root_path, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		child_die("open %s", a->root_path);
	/* we were created with the parent's (host root) ids, which are not
	 * mapped here; become the namespace's root, i.e. host uid_base */
	if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
		child_die("become root of the user namespace");

	/* now that we are in the execution's cgroup, make it our root */
	if (unshare(CLONE_NEWCGROUP) < 0)
		child_die("unshare cgroup");
	build_rootfs(cfg);
	if (sethostname("sandbox", 7) < 0)
		child_die("sethostname");
	/* a kept namespace is the worker's: its loopback is up already,
	 * and we hold no capability there */
	if (cfg->netns == NULL)
		loopback_up();

	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		child_die("open /dev/null");
	/* fds 0..2: stdin null, stdout and stderr both to our stderr (the
	 * log); our own stdout is the "ready" pipe of sbx-manager */
	if (dup2(nul, 0) < 0 || dup2(2, 1) < 0)
		child_die("dup2");
	/* move everything we keep above the target numbers first */
	a->control_fd = fcntl(a->control_fd, F_DUPFD_CLOEXEC, 10);
	a->secret_fd = fcntl(a->secret_fd, F_DUPFD_CLOEXEC, 10);
	a->exe_fd = fcntl(a->exe_fd, F_DUPFD_CLOEXEC, 10);
	a->keep_fd = fcntl(a->keep_fd, F_DUPFD_CLOEXEC, 10);
	child_err_fd = fcntl(a->err_fd, F_DUPFD_CLOEXEC, 10);
	if (a->control_fd < 0 || a->secret_fd < 0 || a->exe_fd < 0 || a->keep_fd < 0 ||
	    child_err_fd < 0)
		child_die("dup");
	place_fd(a->control_fd, GUEST_FD_CONTROL);
	place_fd(a->secret_fd, GUEST_FD_SECRET);
	place_fd(a->keep_fd, GUEST_FD_KEEP);

	snprintf(gen, sizeof(gen), "%" PRIu64, cfg->generation);
	snprintf(act, sizeof(act), "%" PRIu32, cfg->activation);
	snprintf(nproc, sizeof(nproc), "%u", cfg->pids);
	/* a file may not grow past the disk: over-large writes fail with
	 * ENOSPC from the image first; this is the second fence */
	snprintf(fsize, sizeof(fsize), "%u", cfg->disk_mb + 1);
	snprintf(nofile, sizeof(nofile), "%u", 1024u);
	snprintf(orphan, sizeof(orphan), "%u", cfg->orphan_wait_s);
	argv[n++] = "spaced-guest";
	argv[n++] = "--sandbox";        argv[n++] = (char *)cfg->sandbox;
	argv[n++] = "--generation";     argv[n++] = gen;
	argv[n++] = "--activation";     argv[n++] = act;
	argv[n++] = "--control-fd";     argv[n++] = "3";
	argv[n++] = "--secret-fd";      argv[n++] = "4";
	argv[n++] = "--keep-fd";        argv[n++] = "5";
	argv[n++] = "--orphan-wait-s";  argv[n++] = orphan;
	argv[n++] = "--nproc";          argv[n++] = nproc;
	argv[n++] = "--fsize-mb";       argv[n++] = fsize;
	argv[n++] = "--nofile";         argv[n++] = nofile;
	if (cfg->pool)
		argv[n++] = "--pool";
	argv[n] = NULL;
	/* the binary was opened on the host before the pivot: it need not
	 * (and does not) exist inside the rootfs */
	syscall(SYS_execveat, a->exe_fd, "", argv, envp, AT_EMPTY_PATH);
	child_die("exec spaced-guest");
}

/* ---- parent side ---- */

static int
write_proc(pid_t pid, const char *file, const char *val)
{
	char p[64];
	int fd, r = 0;
	size_t n = strlen(val);

	snprintf(p, sizeof(p), "/proc/%d/%s", (int)pid, file);
	if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (write(fd, val, n) != (ssize_t)n)
		r = -errno;
	close(fd);
	return r;
}


/* kill a kept guest we are not the parent of and wait (bounded) for its
 * exit; its parent (the service manager, or init) reaps it */
static void
kept_kill(int pidfd)
{
	struct pollfd p = { .fd = pidfd, .events = POLLIN };

	if (pidfd_send_signal(pidfd, SIGKILL, NULL, 0) < 0 && errno != ESRCH)
		log_warn("kill the kept guest");
	while (poll(&p, 1, KEPT_STOP_WAIT_MS) < 0 && errno == EINTR)
		;
}

/* Attach to the jail a previous bridge of this execution left (its guest
 * listening on RUNDIR/jail.sock). 0: *control is the new channel; -ENOENT:
 * no jail to attach to (launch one); other -errno: fail. A jail found but
 * not usable is killed, and -ENOENT returned, so a new one is launched. */
static int
jail_attach(const struct substrate_config *cfg, const uint8_t secret[GUEST_SECRET_LEN],
    struct substrate *s, int *control)
{
	struct jailkeep_attach at;
	char name[SPACE_ID_MAX + 32];
	pid_t gpid = 0;
	int conn = -1, pidfd = -1, sv[2] = { -1, -1 }, r;

	/* the layer's lock first: held, a live bridge owns the jail */
	if ((r = layer_adopt(&s->layer, cfg)) < 0)
		return r == -EBUSY ? r : -ENOENT;
	/* the listener: the guest (PID 1 of the jail), in our pid namespace;
	 * nobody there: the jail is gone */
	if ((r = jailkeep_reach(s->keep, &conn, &pidfd, &gpid)) < 0) {
		if (cfg->claim_from != NULL) {
			/* the prepared jail died before its claim: what is
			 * left of it (its cgroup) goes, a new jail is made */
			char pname[SPACE_ID_MAX + 32];

			snprintf(pname, sizeof(pname), "%s.g1", cfg->claim_from);
			log_warnx("prepared jail %s for %s g%" PRIu64 " is gone; a new jail",
			    cfg->claim_from, cfg->sandbox, cfg->generation);
			if (cgroup_adopt(&s->cg, pname) == 0)
				cgroup_destroy(&s->cg);
			r = -ENOENT;
		}
		goto out;
	}
	snprintf(name, sizeof(name), "%s.g%" PRIu64, cfg->sandbox, cfg->generation);
	if (cfg->claim_from != NULL) {
		/* a prepared jail: its group under the pool's name becomes
		 * this execution's, with this execution's limits */
		struct cgroup_limits lim = { cfg->memory_mb, cfg->pids, 0 };
		char pname[SPACE_ID_MAX + 32];

		snprintf(pname, sizeof(pname), "%s.g1", cfg->claim_from);
		if (cgroup_adopt(&s->cg, pname) < 0 || cgroup_rename(&s->cg, name) < 0 ||
		    cgroup_set_limits(&s->cg, &lim) < 0) {
			log_warnx("prepared jail %s for %s g%" PRIu64 ": its cgroup cannot be "
			    "bound; destroyed, a new jail", cfg->claim_from, cfg->sandbox,
			    cfg->generation);
			kept_kill(pidfd);
			cgroup_destroy(&s->cg);
			r = -ENOENT;
			goto out;
		}
		cgroup_renice(&s->cg);
	} else if (cgroup_adopt(&s->cg, name) < 0) {
		log_warnx("kept jail of %s g%" PRIu64 ": its cgroup is gone; a new jail",
		    cfg->sandbox, cfg->generation);
		kept_kill(pidfd);
		r = -ENOENT;
		goto out;
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		r = -errno;
		goto out;
	}
	memset(&at, 0, sizeof(at));
	snprintf(at.sandbox, sizeof(at.sandbox), "%s", cfg->sandbox);
	at.generation = cfg->generation;
	at.activation = cfg->activation;
	memcpy(at.secret, secret, GUEST_SECRET_LEN);
	r = jailkeep_send(conn, &at, sv[1]);
	sodium_memzero(&at, sizeof(at));
	if (r < 0 && cfg->claim_from != NULL) {
		/* a half-done bind: the jail is nobody's, it goes */
		log_warnx("prepared jail %s: cannot bind it (%s); destroyed, a new jail",
		    cfg->claim_from, strerror(-r));
		kept_kill(pidfd);
		cgroup_destroy(&s->cg);
		r = -ENOENT;
		goto out;
	}
	if (r < 0) {
		log_warnx("kept jail of %s g%" PRIu64 ": cannot attach (%s); a new jail",
		    cfg->sandbox, cfg->generation, strerror(-r));
		kept_kill(pidfd);
		memset(&s->cg, 0, sizeof(s->cg));
		r = -ENOENT;
		goto out;
	}
	if (s->templated)
		template_adopt(&s->tpl, cfg);
	s->adopted = true;
	s->pid = gpid;
	s->pidfd = pidfd;
	pidfd = -1;
	*control = sv[0];
	sv[0] = -1;
	if (cfg->claim_from != NULL)
		log_info("jail of %s g%" PRIu64 " claimed: prepared jail %s bound to activation %"
		    PRIu32 " (guest pid %d)", cfg->sandbox, cfg->generation, cfg->claim_from,
		    cfg->activation, (int)gpid);
	else
		log_info("jail of %s g%" PRIu64 " kept: activation %" PRIu32 " attached to its guest "
		    "(pid %d)", cfg->sandbox, cfg->generation, cfg->activation, (int)gpid);
	r = 0;
out:
	if (r < 0) {
		/* the lock only: a mount left behind is the new launch's
		 * (layer_open detaches a dead bridge's mounts) */
		s->layer.mounted = false;
		layer_close(&s->layer);
	}
	if (pidfd >= 0)
		close(pidfd);
	if (conn >= 0)
		close(conn);
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	return r;
}

/* A new jail is cloned from a private copy of the worker's base mount
 * namespace (sbx-manager jailbase.c: a read-only tmpfs root holding binds
 * of only the host paths a jail's set-up reads, jailfs.h), into which
 * clones of this jail's own layer and template root are moved at
 * JAILFS_LAYER and JAILFS_TEMPLATE, rather than from the worker's namespace,
 * whose mounts the clone would copy and the child make private and
 * detach, two per sandbox on the worker. Returns the worker's mount
 * namespace to go back to once the child is cloned, or -1 (no base under
 * DATA/jail-mntns: a bridge outside a worker, or a worker that could not
 * make one; then the jail is cloned from the worker's namespace as it
 * always was). Called with the layer (and template) mounted; the working
 * directory is the namespace's root on return. */
static int
base_enter(const struct substrate_config *cfg, const struct substrate *s)
{
	char path[1100], *sl;
	int base = -1, host = -1, fl = -1, ft = -1, i;

	/* RUNDIR is DATA/run/NAME */
	snprintf(path, sizeof(path), "%s", cfg->run_dir);
	for (i = 0; i < 2; i++) {
		if ((sl = strrchr(path, '/')) == NULL || sl == path)
			return -1;
		*sl = '\0';
	}
	if (strlen(path) + sizeof("/jail-mntns") > sizeof(path))
		return -1;
	strcat(path, "/jail-mntns");
	if ((base = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	/* a mount namespace bound there (only root binds one), nothing else */
	if (ioctl(base, NS_GET_NSTYPE) != CLONE_NEWNS) {
		log_warnx("jail of %s: no base mount namespace (%s is not one)", cfg->sandbox, path);
		goto no;
	}
	if ((fl = (int)syscall(SYS_open_tree, AT_FDCWD, s->layer.rw,
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0 ||
	    (s->templated && (ft = (int)syscall(SYS_open_tree, AT_FDCWD, s->tpl.root,
	    OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE)) < 0) ||
	    (host = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC)) < 0 ||
	    setns(base, CLONE_NEWNS) != 0) {
		log_warn("jail of %s: no base mount namespace (%s)", cfg->sandbox, path);
		goto no;
	}
	/* a copy of our own (the base is every jail's), holding this jail's
	 * layer and template root only */
	if (unshare(CLONE_NEWNS) != 0 ||
	    syscall(SYS_move_mount, fl, "", AT_FDCWD, JAILFS_LAYER, MOVE_MOUNT_F_EMPTY_PATH) != 0 ||
	    (ft >= 0 && syscall(SYS_move_mount, ft, "", AT_FDCWD, JAILFS_TEMPLATE,
	    MOVE_MOUNT_F_EMPTY_PATH) != 0)) {
		log_warn("jail of %s: cannot use the base mount namespace", cfg->sandbox);
		if (setns(host, CLONE_NEWNS) != 0) {
			/* nowhere to go back to: this monitor cannot go on */
			log_warn("return to the worker's mount namespace");
			_exit(1);
		}
		goto no;
	}
	close(base);
	close(fl);
	if (ft >= 0)
		close(ft);
	return host;
no:
	if (base >= 0)
		close(base);
	if (fl >= 0)
		close(fl);
	if (ft >= 0)
		close(ft);
	if (host >= 0)
		close(host);
	return -1;
}

/* back to the worker's mount namespace after base_enter */
static void
base_leave(int *host)
{
	if (*host < 0)
		return;
	if (setns(*host, CLONE_NEWNS) != 0) {
		log_warn("return to the worker's mount namespace");
		_exit(1);
	}
	close(*host);
	*host = -1;
}

static int
jail_launch(const struct substrate_config *cfg, const uint8_t secret[GUEST_SECRET_LEN],
    struct substrate **out, int *control)
{
	struct substrate *s;
	/* no CPU quota before the bridge serves: jail_serving */
	struct cgroup_limits lim = { cfg->memory_mb, cfg->pids, 0 };
	struct child_args a;
	uint8_t sec[GUEST_SECRET_LEN];
	char name[SPACE_ID_MAX + 32], map[64], errbuf[512];
	int sv[2] = { -1, -1 }, syncp[2] = { -1, -1 }, errp[2] = { -1, -1 };
	int secp[2] = { -1, -1 }, exe = -1, cwd = -1, r, st, keep = -1, home = -1, kfd = -1;
	int hostns = -1;
	bool based = false;
	ssize_t n;
	pid_t pid;
	/* where the start's time goes, for the log (docs/benchmarks.md) */
	uint64_t t0 = now_mono_ns(), t_cg, t_layer, t_clone;

	*out = NULL;
	*control = -1;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return -ENOMEM;
	s->layer.lock_fd = -1;
	s->pidfd = -1;
	s->cpu_percent = cfg->cpu_percent;
	s->templated = strcmp(cfg->template_name, "host") != 0;
	snprintf(s->keep, sizeof(s->keep), "%s/" JAILKEEP_SOCK, cfg->run_dir);
	if (cfg->pool)
		r = -ENOENT;    /* a new jail, whatever is there */
	else if ((r = jail_attach(cfg, secret, s, control)) == 0) {
		*out = s;
		return 0;
	}
	if (r != -ENOENT) {
		free(s);
		return r;
	}
	s->templated = false;
	snprintf(name, sizeof(name), "%s.g%" PRIu64, cfg->sandbox, cfg->generation);
	/* the layer's lock first: holding it, a group still in use is a
	 * jail no live bridge serves (cgroup.c) */
	if ((r = layer_open(&s->layer, cfg)) < 0)
		goto fail;
	t_cg = now_mono_ns();
	if ((r = cgroup_create(&s->cg, name, &lim)) < 0)
		goto fail;
	if (strcmp(cfg->template_name, "host") != 0) {
		s->templated = true;
		if ((r = template_mount(&s->tpl, cfg, s->layer.rw)) < 0)
			goto fail;
	}
	t_layer = now_mono_ns();
	if ((exe = open(cfg->guest_path, O_RDONLY | O_CLOEXEC)) < 0) {
		r = -errno;
		log_warn("open guest %s", cfg->guest_path);
		goto fail;
	}
	/* the guest end of this pair is the only way to reach the guest:
	 * there is no path anyone else could bind or connect to */
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
	    pipe2(syncp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
	    pipe2(secp, O_CLOEXEC) < 0) {
		r = -errno;
		goto fail;
	}
	/* bound, not listening: the guest listens, so that a connecting
	 * bridge's SO_PEERCRED names the guest; only root of the host can
	 * connect (outside the jail's mount namespace) */
	if ((kfd = unix_bind_private(s->keep, SOCK_SEQPACKET)) < 0) {
		r = kfd;
		log_warnx("cannot bind %s: %s", s->keep, strerror(-r));
		goto fail;
	}
	/* the execution's network namespace, kept across activations
	 * (sbx-manager made it): the child is cloned in it, we go back */
	if (cfg->netns != NULL &&
	    ((keep = open(cfg->netns, O_RDONLY | O_CLOEXEC)) < 0 ||
	    (home = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC)) < 0 ||
	    setns(keep, CLONE_NEWNET) < 0)) {
		r = -errno;
		log_warn("join the network namespace %s", cfg->netns);
		goto fail;
	}
	if ((cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = -errno;
		goto fail;
	}
	hostns = base_enter(cfg, s);
	based = hostns >= 0;
	if (chdir(based ? JAILFS_LAYER : s->layer.rw) < 0) {
		r = -errno;
		base_leave(&hostns);
		goto fail;
	}
	a = (struct child_args){ cfg, syncp[0], errp[1], sv[1], secp[0], exe, kfd,
	    !s->templated ? NULL : based ? JAILFS_TEMPLATE : s->tpl.root };
	/* raw clone without a stack argument behaves like fork(); the child
	 * only runs child_main, which ends in exec or _exit */
	pid = (pid_t)syscall(SYS_clone, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID |
	    (cfg->netns != NULL ? 0 : CLONE_NEWNET) | CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD,
	    NULL, NULL, NULL, 0);
	if (pid == 0) {
		close(syncp[1]);
		close(errp[0]);
		close(sv[0]);
		close(secp[1]);
		child_main(&a);
	}
	r = pid < 0 ? -errno : 0;
	base_leave(&hostns);
	if (fchdir(cwd) < 0 && r == 0)
		r = -errno;
	/* the monitor and its serving process stay in the worker's
	 * namespace (sbx-manager's socket evidence is per namespace) */
	if (home >= 0 && setns(home, CLONE_NEWNET) < 0) {
		log_warn("return to the worker's network namespace");
		if (r == 0)
			r = -EIO;
	}
	if (r < 0)
		goto fail;
	s->pid = pid;
	close(syncp[0]);
	syncp[0] = -1;
	close(errp[1]);
	errp[1] = -1;
	close(sv[1]);
	sv[1] = -1;
	close(secp[0]);
	secp[0] = -1;
	/* the listening end is the guest's alone */
	close(kfd);
	kfd = -1;

	/* uid/gid 0..65534 inside are uid_base.. on the host: root inside is
	 * an unprivileged host uid, distinct per sandbox (the last id of the
	 * range is the serving process's, see layer.h) */
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)cfg->uid_base, JAIL_IDS);
	if ((r = write_proc(pid, "uid_map", map)) < 0 ||
	    (r = write_proc(pid, "setgroups", "deny")) < 0 ||
	    (r = write_proc(pid, "gid_map", map)) < 0) {
		log_warnx("cannot write the id maps: %s", strerror(-r));
		goto fail;
	}
	if ((r = cgroup_add(&s->cg, pid)) < 0) {
		log_warnx("cannot join the cgroup: %s", strerror(-r));
		goto fail;
	}
	t_clone = now_mono_ns();
	memcpy(sec, secret, sizeof(sec));
	/* 32 bytes fit in any pipe buffer: this cannot block */
	n = write(secp[1], sec, sizeof(sec));
	sodium_memzero(sec, sizeof(sec));
	if (n != (ssize_t)sizeof(sec) || write(syncp[1], "g", 1) != 1) {
		r = -EIO;
		goto fail;
	}
	close(secp[1]);
	secp[1] = -1;
	close(syncp[1]);
	syncp[1] = -1;
	/* EOF on the error pipe: the exec happened (O_CLOEXEC closed it) */
	do
		n = read(errp[0], errbuf, sizeof(errbuf) - 1);
	while (n < 0 && errno == EINTR);
	if (n > 0) {
		errbuf[n] = '\0';
		log_warnx("jail setup failed: %s", errbuf);
		r = -EIO;
		goto fail;
	}
	close(errp[0]);
	close(exe);
	close(cwd);
	if (keep >= 0)
		close(keep);
	if (home >= 0)
		close(home);
	{
		uint64_t t_exec = now_mono_ns();
		log_info("jail of %s g%" PRIu64 " in %.1f ms: layer %.1f (mkfs %.1f), cgroup "
		    "%.1f, clone and id maps %.1f, jail setup to the guest's exec %.1f; cloned "
		    "from %s", cfg->sandbox, cfg->generation, (double)(t_exec - t0) / 1e6,
		    (double)(t_cg - t0) / 1e6, (double)s->layer.mkfs_ns / 1e6,
		    (double)(t_layer - t_cg) / 1e6, (double)(t_clone - t_layer) / 1e6,
		    (double)(t_exec - t_clone) / 1e6,
		    based ? "the base mount namespace" : "the worker's mount namespace");
	}
	*out = s;
	*control = sv[0];
	return 0;
fail:
	if (home >= 0)
		(void)setns(home, CLONE_NEWNET);
	if (s->pid > 0) {
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
			;
		s->pid = 0;
	}
	{
		int fds[] = { sv[0], sv[1], syncp[0], syncp[1], errp[0], errp[1],
		    secp[0], secp[1], exe, cwd, keep, home, kfd };
		for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
			if (fds[i] >= 0)
				close(fds[i]);
	}
	if (s->templated)
		template_unmount(&s->tpl);
	layer_close(&s->layer);
	cgroup_destroy(&s->cg);
	unlink(s->keep);
	free(s);
	return r;
}

static pid_t
jail_guest_pid(const struct substrate *s)
{
	return s->pid;
}

static void
jail_guest_reaped(struct substrate *s, int wstatus)
{
	(void)wstatus;
	s->pid = 0;
}

/* a kept guest is not our child (no SIGCHLD): its pidfd, readable when
 * it exits */
static int
jail_guest_fd(const struct substrate *s)
{
	return s->adopted && s->pid > 0 ? s->pidfd : -1;
}

static int
jail_serving(struct substrate *s)
{
	int r;

	if ((r = cgroup_set_cpu(&s->cg, s->cpu_percent)) < 0)
		log_warnx("cannot set the CPU quota of the jail: %s", strerror(-r));
	return r;
}

static int
jail_oom_kills(const struct substrate *s, uint64_t *n)
{
	return cgroup_oom_kills(&s->cg, n);
}

static int
jail_oom_fd(const struct substrate *s)
{
	return cgroup_oom_fd(&s->cg);
}

static int
jail_stop(struct substrate *s)
{
	int st;

	if (s->pid > 0 && s->adopted) {
		/* the kept guest: by its pidfd, never a bare pid */
		kept_kill(s->pidfd);
		/* a prepared jail's guest bound by the bridge that made it
		 * (a kept prepared bridge) is our child: reaped here */
		(void)waitid(P_PIDFD, (id_t)s->pidfd, NULL, WEXITED | WNOHANG);
		s->pid = 0;
	} else if (s->pid > 0) {
		/* killing PID 1 of the namespace kills every process in it */
		kill(s->pid, SIGKILL);
		while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR)
			;
		s->pid = 0;
	}
	/* no later bridge may attach to what is being torn down */
	unlink(s->keep);
	cgroup_destroy(&s->cg);
	if (s->templated)
		template_unmount(&s->tpl);
	layer_close(&s->layer);
	return 0;
}

/* our handles only: what the jail is (its guest, mounts, cgroup) stays.
 * The layer's lock goes too, so a kept prepared bridge can bind its jail
 * after releasing what it made it with (main.c, pool_hold) */
static void
jail_free(struct substrate *s)
{
	if (s->pidfd >= 0)
		close(s->pidfd);
	if (s->layer.lock_fd >= 0)
		close(s->layer.lock_fd);
	free(s);
}

const struct substrate_ops substrate_jail = {
	.name = "jail",
	.passes_fds = true,
	.launch = jail_launch,
	.guest_pid = jail_guest_pid,
	.guest_reaped = jail_guest_reaped,
	.guest_fd = jail_guest_fd,
	.oom_kills = jail_oom_kills,
	.oom_fd = jail_oom_fd,
	.serving = jail_serving,
	.stop = jail_stop,
	.free = jail_free,
};

const struct substrate_ops *
substrate_find(const char *name)
{
	if (strcmp(name, substrate_jail.name) == 0)
		return &substrate_jail;
	return NULL;
}
