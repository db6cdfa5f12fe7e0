/* The end of a kept jail whose bridge is gone (docs/jail.md, "The jail
 * outlives its bridge").
 *
 * A bridge killed without a successor leaves its jail waiting (bounded)
 * on RUNDIR/jail.sock for the next activation. When the execution ends
 * instead (stop, retirement, a generation change, failure, reclamation),
 * nothing of it may outlive that: connect there, learn the guest's pid
 * from SO_PEERCRED (the guest listens itself), open a pidfd while the
 * connection shows the guest alive (so the pid cannot be another's),
 * SIGKILL through the pidfd, wait a bounded time; its pid namespace ends
 * with it. A bridge stopped with SIGTERM has already done this and
 * unlinked the socket: then nothing is there. */
#include <errno.h>
#include <linux/limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jailend.h"
#include "jailkeep.h"
#include "log.h"

#define JAILEND_WAIT_MS 5000

void
jail_end_dir(const char *run_dir)
{
	char path[PATH_MAX];
	struct pollfd p;
	int fd, pidfd;
	pid_t pid;

	if ((size_t)snprintf(path, sizeof(path), "%s/" JAILKEEP_SOCK, run_dir) >= sizeof(path))
		return;
	if (access(path, F_OK) != 0)
		return;
	if (jailkeep_reach(path, &fd, &pidfd, &pid) == 0) {
		if (pidfd_send_signal(pidfd, SIGKILL, NULL, 0) == 0) {
			log_info("jail: %s: the kept jail without a bridge ended (guest pid %d)",
			    run_dir, (int)pid);
			p = (struct pollfd){ .fd = pidfd, .events = POLLIN };
			while (poll(&p, 1, JAILEND_WAIT_MS) < 0 && errno == EINTR)
				;
		}
		close(pidfd);
		close(fd);
	}
	unlink(path);
}

pid_t
jail_guest(const char *run_dir)
{
	char path[PATH_MAX];
	int fd, pidfd;
	pid_t pid;

	if ((size_t)snprintf(path, sizeof(path), "%s/" JAILKEEP_SOCK, run_dir) >= sizeof(path))
		return -1;
	if (jailkeep_reach(path, &fd, &pidfd, &pid) != 0)
		return -1;
	close(pidfd);
	close(fd);
	return pid;
}

bool
jail_kept(const char *run_dir)
{
	char p[PATH_MAX + 16];
	struct stat st;

	snprintf(p, sizeof(p), "%s/" JAILKEEP_SOCK, run_dir);
	return lstat(p, &st) == 0 && S_ISSOCK(st.st_mode);
}
