/* The jails' base mount namespace (docs/jail.md, "The base namespace").
 *
 * A jail's mount namespace starts as a copy of the one it is cloned from.
 * Cloned from the worker's, it copied every mount of every sandbox (each
 * one's layer and its network namespace's nsfs: two thousand at a
 * thousand sandboxes), and the child then made them all private and
 * detached them with the old root: three passes over every sandbox's
 * mounts per create (docs/benchmarks.md, "Density: a layer of another
 * size").
 *
 * The base holds only what a jail's set-up reads from the host, built up
 * from binds: a small read-only tmpfs as its root, on which the host's
 * system directories (jailfs_sys), /etc (from which the child binds the
 * few files of jailfs_etc) and the /dev nodes of jailfs_dev are bound
 * read-only, the host's /proc (the child's own proc is allowed only where a whole proc is
 * visible), and three empty mount points: /tmp (where the child assembles
 * its root), /layer and /template (where spaced-host moves clones of the
 * jail's own layer and template root in a private copy of the base). Each
 * bind is of one mount, not of what is mounted under it, so the base pins
 * nothing but the host's root file system, devtmpfs and proc: a mount made
 * on the host before the worker started (another worker's layers, an
 * operator's loop device) is not kept alive by it. It is bound on
 * D/jail-mntns, made at start and unbound at a clean stop. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jailfs.h"
#include "log.h"
#include "sbx-manager.h"

/* one thing to put in the base: the host's path and where it goes */
struct entry {
	char host[256];
	char dst[PATH_MAX];
	char link[256];                 /* a symlink's target, read in the parent */
	enum { E_DIR, E_FILE, E_LINK, E_MKDIR } kind;
	bool ro;                        /* bound read-only (proc keeps its own flags) */
	bool dev;                       /* a device node: not nodev */
};

#define ENTRIES_MAX 32

static void
base_path(const struct mgr *m, char *out, size_t cap)
{
	snprintf(out, cap, "%s/jail-mntns", m->cfg.data_dir);
}

static void
stage_path(const struct mgr *m, char *out, size_t cap)
{
	snprintf(out, cap, "%s/jail-base", m->cfg.data_dir);
}

/* what the host has of path into e (kind from lstat); false when the
 * host has nothing there or it is of another kind (left out, as the
 * child's mirror leaves it out) */
static bool
entry_of(struct entry *e, const char *stage, const char *host, const char *dst)
{
	struct stat st;
	ssize_t n;

	memset(e, 0, sizeof(*e));
	if (lstat(host, &st) != 0)
		return false;
	if (snprintf(e->host, sizeof(e->host), "%s", host) >= (int)sizeof(e->host) ||
	    snprintf(e->dst, sizeof(e->dst), "%s%s", stage, dst) >= (int)sizeof(e->dst))
		return false;
	e->ro = true;
	if (S_ISLNK(st.st_mode)) {
		if ((n = readlink(host, e->link, sizeof(e->link) - 1)) < 0)
			return false;
		e->link[n] = '\0';
		e->kind = E_LINK;
	} else if (S_ISDIR(st.st_mode))
		e->kind = E_DIR;
	else if (S_ISREG(st.st_mode) || S_ISCHR(st.st_mode))
		e->kind = E_FILE;
	else
		return false;
	return true;
}

/* false when the path does not fit (the stage's length is checked
 * first, so never) */
static bool
mkdir_entry(struct entry *e, const char *stage, const char *dst)
{
	memset(e, 0, sizeof(*e));
	e->kind = E_MKDIR;
	return snprintf(e->dst, sizeof(e->dst), "%s%s", stage, dst) < (int)sizeof(e->dst);
}

/* the helper, in a mount namespace of its own: the base built up under
 * stage, then made its root with nothing else left; 0 or 1. System calls
 * only (a fork of a threaded process). */
static int
build(const char *stage, const struct entry *e, size_t n)
{
	unsigned long ro = MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV;
	size_t i;
	int fd;

	if (unshare(CLONE_NEWNS) != 0 ||
	    mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC,
	    "mode=0755,size=64k,nr_inodes=256") != 0)
		return 1;
	for (i = 0; i < n; i++) {
		switch (e[i].kind) {
		case E_MKDIR:
			if (mkdir(e[i].dst, 0755) != 0)
				return 1;
			continue;
		case E_LINK:
			if (symlink(e[i].link, e[i].dst) != 0)
				return 1;
			continue;
		case E_DIR:
			if (mkdir(e[i].dst, 0755) != 0)
				return 1;
			break;
		case E_FILE:
			if ((fd = open(e[i].dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)) < 0)
				return 1;
			close(fd);
			break;
		}
		/* this mount only: nothing mounted under the host's path */
		if (mount(e[i].host, e[i].dst, NULL, MS_BIND, NULL) != 0)
			return 1;
		/* device nodes stay usable and writable (nosuid, noexec: the
		 * child binds them again and cannot clear a flag set here); the
		 * rest read-only and nodev */
		if (e[i].ro && mount(NULL, e[i].dst, NULL, e[i].dev ?
		    MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC : ro, NULL) != 0)
			return 1;
	}
	/* the stage becomes the root; the rest of the host's tree goes */
	if (chdir(stage) != 0 || syscall(SYS_pivot_root, ".", ".") != 0 ||
	    umount2(".", MNT_DETACH) != 0 || chdir("/") != 0 ||
	    mount(NULL, "/", NULL, ro | MS_NOEXEC, NULL) != 0)
		return 1;
	return 0;
}

void
jailbase_drop(const struct mgr *m)
{
	char path[PATH_MAX];

	base_path(m, path, sizeof(path));
	while (umount2(path, MNT_DETACH) == 0)
		;
	(void)unlink(path);
}

void
jailbase_make(const struct mgr *m)
{
	char path[PATH_MAX], stage[PATH_MAX], ns[64], dst[300], c = 'n';
	struct entry *e = calloc(ENTRIES_MAX, sizeof(*e));
	int ready[2] = { -1, -1 }, done[2] = { -1, -1 }, fd, st, i;
	size_t n = 0;
	pid_t pid = -1;

	jailbase_drop(m);
	base_path(m, path, sizeof(path));
	stage_path(m, stage, sizeof(stage));
	for (i = 0; jailfs_sys[i] != NULL; i++)
		n++;
	for (i = 0; jailfs_dev[i] != NULL; i++)
		n++;
	if (n + 6 > ENTRIES_MAX)
		abort();                /* the lists of jailfs.c outgrew the room */
	n = 0;
	/* room in each entry's path for the longest name under the stage */
	if (e == NULL || strlen(stage) > PATH_MAX - 64 ||
	    (mkdir(stage, 0700) != 0 && errno != EEXIST))
		goto out;
	for (i = 0; jailfs_sys[i] != NULL; i++)
		n += entry_of(&e[n], stage, jailfs_sys[i], jailfs_sys[i]);
	/* the directory, not its files: a file bound here would stay the
	 * inode it was when the worker started, and a package upgrade or
	 * ldconfig replaces /etc files by renaming a new one over them */
	if (!entry_of(&e[n], stage, "/etc", "/etc") || e[n].kind != E_DIR)
		goto out;
	n++;
	if (!mkdir_entry(&e[n++], stage, "/dev"))
		goto out;
	for (i = 0; jailfs_dev[i] != NULL; i++) {
		snprintf(dst, sizeof(dst), "/dev/%s", jailfs_dev[i]);
		if (entry_of(&e[n], stage, dst, dst))
			e[n++].dev = true;
	}
	if (!entry_of(&e[n], stage, "/proc", "/proc") || e[n].kind != E_DIR)
		goto out;
	e[n++].ro = false;
	if (!mkdir_entry(&e[n++], stage, JAILFS_ASSEMBLY) ||
	    !mkdir_entry(&e[n++], stage, JAILFS_LAYER) ||
	    !mkdir_entry(&e[n++], stage, JAILFS_TEMPLATE))
		goto out;
	if (pipe2(ready, O_CLOEXEC) != 0 || pipe2(done, O_CLOEXEC) != 0 ||
	    (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		goto out;
	close(fd);
	if ((pid = fork()) == 0) {
		/* system calls only from here: a fork of a threaded process */
		close(ready[0]);
		close(done[1]);
		c = build(stage, e, n) == 0 ? 'y' : 'n';
		if (write(ready[1], &c, 1) != 1)
			_exit(1);
		/* held until the namespace is bound (EOF: the parent is done) */
		_exit(read(done[0], &c, 1) < 0);
	}
	if (pid < 0)
		goto out;
	close(ready[1]);
	ready[1] = -1;
	close(done[0]);
	done[0] = -1;
	snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)pid);
	if (read(ready[0], &c, 1) != 1 || c != 'y' || mount(ns, path, NULL, MS_BIND, NULL) != 0)
		c = 'n';
out:
	if (done[1] >= 0)
		close(done[1]);         /* the helper leaves */
	if (pid > 0)
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	if (c == 'y')
		log_info("jails are cloned from a base mount namespace (%s)", path);
	else {
		log_warnx("no base mount namespace for jails: each is cloned from the worker's");
		jailbase_drop(m);
	}
	int fds[] = { ready[0], ready[1], done[0] };
	for (size_t k = 0; k < sizeof(fds) / sizeof(fds[0]); k++)
		if (fds[k] >= 0)
			close(fds[k]);
	free(e);
}
