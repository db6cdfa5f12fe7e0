/* The network namespace of an execution (docs/network.md, "The network
 * namespace belongs to the execution").
 *
 * Made once per execution, before its first bridge: a child of ours
 * unshares a new network namespace, sets its loopback up and binds
 * /proc/self/ns/net onto RUNDIR/netns (the run directory is 0700 root),
 * which holds the namespace while no process is in it. Every activation's
 * spaced-host joins it (--netns) instead of making its own, so a relaunch
 * of the bridge keeps the namespace, the uplink in it and the gateway
 * that works in it. Released (the bind unmounted) when the execution
 * ends: retire, stop, failure, reclamation.
 *
 * The namespace is owned by the worker's user namespace, not the jail's:
 * no process of the sandbox holds a capability in it (the guest drops
 * them all but SETUID, SETGID and KILL anyway). */
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/magic.h>
#include <linux/nsfs.h>

#include "log.h"
#include "jailend.h"
#include "netns.h"
#include "sbx-manager.h"

void
netns_path(const struct record *r, char *out, size_t cap)
{
	snprintf(out, cap, "%s/netns", r->run_dir);
}

bool
netns_bound(const char *path, unsigned long *ino)
{
	struct statfs sf;
	struct stat st;
	int fd, t;

	if (statfs(path, &sf) != 0 || sf.f_type != NSFS_MAGIC)
		return false;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	t = ioctl(fd, NS_GET_NSTYPE);
	if (ino)
		*ino = fstat(fd, &st) == 0 ? (unsigned long)st.st_ino : 0;
	close(fd);
	return t == CLONE_NEWNET;
}

int
netns_ensure(const struct record *r, char *out, size_t cap)
{
	struct ifreq ifr;
	int fd, st, s;
	pid_t pid;

	netns_path(r, out, cap);
	if (netns_bound(out, NULL))
		return 0;
	/* a leftover that is not a namespace (a crash between create and
	 * bind): made again */
	(void)umount2(out, MNT_DETACH);
	(void)unlink(out);
	if ((fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return -errno;
	close(fd);
	/* one made ahead of time (netnspool.c), if the pool has one */
	if (netnspool_claim(out) == 0 && netns_bound(out, NULL)) {
		log_info("netns: %s g%llu: network namespace from the pool", r->id.sandbox,
		    (unsigned long long)r->id.generation);
		return 0;
	}
	if ((pid = fork()) < 0)
		return -errno;
	if (pid == 0) {
		/* system calls only: we are a fork of a threaded process */
		if (unshare(CLONE_NEWNET) != 0)
			_exit(1);
		memset(&ifr, 0, sizeof(ifr));
		memcpy(ifr.ifr_name, "lo", 3);
		if ((s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0 ||
		    ioctl(s, SIOCGIFFLAGS, &ifr) != 0)
			_exit(2);
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) != 0)
			_exit(3);
		if (mount("/proc/self/ns/net", out, NULL, MS_BIND, NULL) != 0)
			_exit(4);
		_exit(0);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || !netns_bound(out, NULL)) {
		log_warnx("netns: %s g%llu: cannot make its network namespace (step %d)",
		    r->id.sandbox, (unsigned long long)r->id.generation,
		    WIFEXITED(st) ? WEXITSTATUS(st) : -1);
		(void)umount2(out, MNT_DETACH);
		(void)unlink(out);
		return -EIO;
	}
	log_info("netns: %s g%llu: network namespace made", r->id.sandbox,
	    (unsigned long long)r->id.generation);
	return 0;
}

int
netns_open(const struct record *r)
{
	char p[PATH_MAX + 16];

	netns_path(r, p, sizeof(p));
	if (!netns_bound(p, NULL))
		return -ENOENT;
	return open(p, O_RDONLY | O_CLOEXEC);
}

void
netns_release_dir(const char *run_dir)
{
	char p[PATH_MAX + 16];
	struct stat st;
	int i;

	/* the execution ends: a jail kept for a next activation goes too */
	jail_end_dir(run_dir);
	snprintf(p, sizeof(p), "%s/netns", run_dir);
	if (lstat(p, &st) != 0)
		return;
	/* a namespace bound twice (never by us) would need two */
	for (i = 0; i < 4 && netns_bound(p, NULL); i++)
		(void)umount2(p, MNT_DETACH);
	if (unlink(p) == 0)
		log_info("netns: released %s", p);
}

void
netns_release(const struct record *r)
{
	if (r->run_dir[0])
		netns_release_dir(r->run_dir);
}
