/* sockdiag.c from the attacker's side: a listener whose listen() was
 * called by the recorded process (so SO_PEERCRED names it) but which
 * another process holds is refused; the process that holds the listener,
 * with our connection queued, or the socket accept() returned, is
 * accepted; a process holding neither is refused. Real sockets, real
 * processes, the kernel's UNIX_DIAG. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sockdiag.h"
#include "tap.h"

static int
connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

static int
owned(int fd, pid_t pid, const char **why)
{
	*why = "";
	return sockdiag_peer_owned_by(fd, pid, why);
}

int
main(void)
{
	char dir[] = "/tmp/sockdiag.XXXXXX", path[108], c;
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	int lfd, cfd, cmd[2], ack[2], quit[2], r, st;
	pid_t holder, idle;
	const char *why;

	alarm(60);       /* a lost wake-up fails the test, it does not hang it */
	if (mkdtemp(dir) == NULL || pipe(cmd) != 0 || pipe(ack) != 0 || pipe(quit) != 0) {
		printf("Bail out! set-up: %s\n", strerror(errno));
		return 1;
	}
	snprintf(path, sizeof(path), "%s/bridge.sock", dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	/* the listener: listen() called here, by the "recorded" process */
	lfd = socket(AF_UNIX, SOCK_STREAM, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 8) != 0) {
		printf("Bail out! listener: %s\n", strerror(errno));
		return 1;
	}
	/* ... handed to another process, which alone keeps it */
	if ((holder = fork()) == 0) {
		int a;

		close(cmd[1]);
		close(ack[0]);
		close(quit[0]);
		close(quit[1]);
		if (read(cmd[0], &c, 1) != 1)
			_exit(1);
		a = accept(lfd, NULL, NULL);
		close(lfd);             /* from here on only the accepted socket */
		c = a >= 0 ? 'a' : 'e';
		if (write(ack[1], &c, 1) != 1)
			_exit(1);
		if (read(cmd[0], &c, 1) < 0)  /* until told to go */
			_exit(1);
		_exit(0);
	}
	if ((idle = fork()) == 0) {     /* holds no socket of ours at all */
		close(lfd);
		close(cmd[0]);
		close(cmd[1]);
		close(ack[0]);
		close(ack[1]);
		close(quit[1]);
		if (read(quit[0], &c, 1) < 0)   /* until told to go (EOF) */
			_exit(1);
		_exit(0);
	}
	close(lfd);
	close(cmd[0]);
	close(ack[1]);
	close(quit[0]);

	cfd = connect_to(path);
	ok(cfd >= 0, "connected to the listener's path");
	ok(getsockopt(cfd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) == 0 && cr.pid == getpid(),
	    "premise: SO_PEERCRED names the process that called listen() (us), not the one holding it");

	/* queued: the connection waits on a listener only the holder has */
	r = owned(cfd, getpid(), &why);
	is_int(r, -EPERM, "queued, asked of the process that called listen() but gave the listener away: refused");
	is_str(why, "socket not held by the bridge", "... and why says so");
	is_int(owned(cfd, idle, &why), -EPERM, "queued, asked of a process holding no socket of it: refused");
	is_int(owned(cfd, holder, &why), 0, "queued, asked of the process holding the listener: accepted");

	/* accepted: the holder took the connection and dropped the listener */
	c = 'g';
	ok(write(cmd[1], &c, 1) == 1 && read(ack[0], &c, 1) == 1 && c == 'a', "the holder accepted and closed its listener");
	is_int(owned(cfd, holder, &why), 0, "accepted, asked of the process holding the accepted socket: accepted");
	is_int(owned(cfd, getpid(), &why), -EPERM, "accepted, asked of the process that called listen(): refused");
	is_int(owned(cfd, idle, &why), -EPERM, "accepted, asked of a process holding nothing: refused");

	/* the holder gone: nobody holds our peer any more */
	close(cmd[1]);
	waitpid(holder, &st, 0);
	is_int(owned(cfd, holder, &why), -ENOENT, "the holder exited: its fd table cannot be read");
	ok(why != NULL && strstr(why, "fd table") != NULL, "... and why says so (%s)", why);

	close(cfd);
	close(quit[1]);
	waitpid(idle, &st, 0);
	unlink(path);
	rmdir(dir);
	return done_testing();
}
