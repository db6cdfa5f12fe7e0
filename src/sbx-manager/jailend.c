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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "jailend.h"
#include "jailkeep.h"
#include "log.h"

#define JAILEND_WAIT_MS 5000

void
jail_end_dir(const char *run_dir)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct pollfd p;
	int fd, pidfd = -1;

	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" JAILKEEP_SOCK, run_dir) >=
	    sizeof(sa.sun_path))
		return;
	if (access(sa.sun_path, F_OK) != 0)
		return;
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
		return;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && cr.pid > 0 &&
	    (pidfd = pidfd_open(cr.pid, 0)) >= 0) {
		p = (struct pollfd){ .fd = fd, .events = 0 };
		if (poll(&p, 1, 0) == 0 && pidfd_send_signal(pidfd, SIGKILL, NULL, 0) == 0) {
			log_info("jail: %s: the kept jail without a bridge ended (guest pid %d)",
			    run_dir, (int)cr.pid);
			p = (struct pollfd){ .fd = pidfd, .events = POLLIN };
			while (poll(&p, 1, JAILEND_WAIT_MS) < 0 && errno == EINTR)
				;
		}
	}
	if (pidfd >= 0)
		close(pidfd);
	close(fd);
	unlink(sa.sun_path);
}

bool
jail_kept(const char *run_dir)
{
	char p[PATH_MAX + 16];
	struct stat st;

	snprintf(p, sizeof(p), "%s/" JAILKEEP_SOCK, run_dir);
	return lstat(p, &st) == 0 && S_ISSOCK(st.st_mode);
}
