/* The HTTP process's side of the signer (signer.c): start it, ask it, and
 * notice when it is gone. Requests are one at a time (a mutex), each
 * answered within SIGNER_REPLY_TIMEOUT. A signer that exits, answers late
 * or answers something malformed is killed and reaped, the request fails
 * (capability issuance answers 503: fail closed), and the next request
 * starts a new signer, at most once a second. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "sigmsg.h"
#include "util.h"

#define SIGNER_FD               3
#define SIGNER_REPLY_TIMEOUT_MS 5000
#define SIGNER_RESPAWN_NS       1000000000ull

static void
reap(struct signer_conn *sc, const char *why)
{
	int st = 0;

	if (sc->fd >= 0)
		close(sc->fd);
	sc->fd = -1;
	if (sc->pid > 0) {
		(void)kill(sc->pid, SIGKILL);
		while (waitpid(sc->pid, &st, 0) < 0 && errno == EINTR)
			;
		if (why)
			log_warnx("signer: pid %d %s (%s %d); capabilities are refused until "
			    "it is restarted", (int)sc->pid, why,
			    WIFSIGNALED(st) ? "signal" : "status",
			    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	sc->pid = -1;
}

static int
recv_reply(struct signer_conn *sc, uint16_t want, struct sig_reply *rep, int timeout_ms)
{
	uint8_t *buf;
	const char *why = NULL;
	struct pollfd p = { .fd = sc->fd, .events = POLLIN };
	ssize_t n;
	int rc;

	do
		rc = poll(&p, 1, timeout_ms);
	while (rc < 0 && errno == EINTR);
	if (rc == 0)
		return -ETIMEDOUT;
	if (rc < 0)
		return -errno;
	if ((buf = malloc(SIGMSG_MAX + 1)) == NULL)
		return -ENOMEM;
	do
		n = recv(sc->fd, buf, SIGMSG_MAX + 1, 0);
	while (n < 0 && errno == EINTR);
	if (n <= 0) {
		rc = n == 0 ? -ECONNRESET : -errno;
	} else if ((rc = sigmsg_decode_reply(buf, (size_t)n, want, rep, &why)) < 0) {
		log_warnx("signer: %s", why ? why : "bad reply");
		rc = -EPROTO;
	}
	free(buf);
	return rc;
}

static int
spawn(struct signer_conn *sc)
{
	struct sig_reply rep;
	char *argv[6];
	int sv[2], rc, i = 0;
	pid_t pid;

	sc->last_spawn = now_mono_ns();
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	argv[i++] = (char *)CONTROL_PROG;
	argv[i++] = (char *)"signer";
	argv[i++] = (char *)"--data-dir";
	argv[i++] = sc->data_dir;
	if (sc->verbose)
		argv[i++] = (char *)"--verbose";
	argv[i] = NULL;
	/* a new image, not a fork of ours: nothing of this process (requests,
	 * credentials in flight) is in the signer, and only async-signal-safe
	 * calls run between fork and exec in this threaded process */
	if ((pid = fork()) < 0) {
		rc = -errno;
		close(sv[0]);
		close(sv[1]);
		return rc;
	}
	if (pid == 0) {
		if (sv[1] == SIGNER_FD) {
			if (fcntl(SIGNER_FD, F_SETFD, 0) < 0)
				_exit(127);
		} else if (dup2(sv[1], SIGNER_FD) < 0) {
			_exit(127);
		}
		(void)syscall(SYS_close_range, SIGNER_FD + 1, ~0u, 0);
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	close(sv[1]);
	sc->fd = sv[0];
	sc->pid = pid;
	/* a slow disk or a big key directory still answers within this */
	if ((rc = recv_reply(sc, SIG_HELLO, &rep, 10 * SIGNER_REPLY_TIMEOUT_MS)) < 0 ||
	    rep.type != SIG_HELLO) {
		reap(sc, "did not start");
		return rc < 0 ? rc : -EPROTO;
	}
	/* the root key is pinned by every verifier: a signer that comes back
	 * with another one is not ours */
	if (sc->have_root && sodium_memcmp(sc->root_pk, rep.pk, 32) != 0) {
		reap(sc, "restarted with another root key");
		return -EKEYREJECTED;
	}
	memcpy(sc->root_pk, rep.pk, 32);
	sc->have_root = true;
	log_debug("signer: pid %d started", (int)pid);
	return 0;
}

int
signer_start(struct signer_conn *sc, const char *data_dir, int verbose)
{
	memset(sc, 0, sizeof(*sc));
	pthread_mutex_init(&sc->mu, NULL);
	sc->fd = -1;
	sc->pid = -1;
	sc->verbose = verbose;
	if (strlen(data_dir) >= sizeof(sc->data_dir))
		return -ENAMETOOLONG;
	strcpy(sc->data_dir, data_dir);
	return spawn(sc);
}

void
signer_stop(struct signer_conn *sc)
{
	int st;

	pthread_mutex_lock(&sc->mu);
	if (sc->fd >= 0)
		close(sc->fd);      /* EOF: the signer wipes its keys and exits */
	sc->fd = -1;
	if (sc->pid > 0)
		while (waitpid(sc->pid, &st, 0) < 0 && errno == EINTR)
			;
	sc->pid = -1;
	pthread_mutex_unlock(&sc->mu);
	pthread_mutex_destroy(&sc->mu);
}

/* caller holds sc->mu */
static int
alive(struct signer_conn *sc)
{
	int st;

	if (sc->pid > 0 && waitpid(sc->pid, &st, WNOHANG) == sc->pid) {
		sc->pid = -1;
		reap(sc, NULL);
		log_warnx("signer: exited (%s %d); capabilities are refused until it is restarted",
		    WIFSIGNALED(st) ? "signal" : "status",
		    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
	}
	if (sc->fd >= 0)
		return 0;
	if (now_mono_ns() - sc->last_spawn < SIGNER_RESPAWN_NS)
		return -EHOSTDOWN;
	if (spawn(sc) < 0)
		return -EHOSTDOWN;
	log_info("signer: restarted (pid %d)", (int)sc->pid);
	return 0;
}

void
signer_check(struct signer_conn *sc)
{
	pthread_mutex_lock(&sc->mu);
	(void)alive(sc);
	pthread_mutex_unlock(&sc->mu);
}

int
signer_call(struct signer_conn *sc, uint8_t *msg, size_t len, uint16_t want,
    struct sig_reply *rep)
{
	ssize_t w;
	int rc;

	memset(rep, 0, sizeof(*rep));
	if (msg == NULL)
		return -ENOMEM;
	pthread_mutex_lock(&sc->mu);
	if ((rc = alive(sc)) < 0)
		goto out;
	do
		w = send(sc->fd, msg, len, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)len) {
		reap(sc, "is gone");
		rc = -EHOSTDOWN;
		goto out;
	}
	if ((rc = recv_reply(sc, want, rep, SIGNER_REPLY_TIMEOUT_MS)) < 0) {
		reap(sc, rc == -ETIMEDOUT ? "did not answer in time" :
		    rc == -EPROTO ? "answered a malformed reply" : "is gone");
		rc = -EHOSTDOWN;
		goto out;
	}
	if (rep->type == SIG_ERROR) {
		log_warnx("signer: refused: %s", rep->reason);
		rc = -rep->err;
	}
out:
	pthread_mutex_unlock(&sc->mu);
	free(msg);
	return rc;
}
