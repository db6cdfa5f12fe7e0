/* spaced-guest: PID 1 of a jail (DESIGN sections 6 and 10).
 *
 * Launched by spaced-host with the control socket on fd 3 and the
 * per-activation secret on the pipe at fd 4 (never argv or environment).
 * It confines itself, answers the bridge's challenge, then for every
 * MSG_OPEN on the control channel forks a child that becomes the sandbox
 * user and serves that one operation on the passed socket. As PID 1 it
 * reaps every orphan of the namespace; SIGTERM is forwarded to all
 * processes, then it exits, which makes the kernel kill what is left.
 *
 * The jail outlives its bridge (docs/jail.md): with --keep-fd, the bound
 * RUNDIR/jail.sock, it listens there; when the control channel ends it
 * waits (at most --orphan-wait-s) for the next activation's bridge to
 * connect with an ATTACH (jailkeep.h): a new control channel, identity
 * and secret, then the same challenge. Nobody came in time: it exits and
 * the jail ends.
 *
 * A prepared jail of the worker's pool (--pool, docs/worker.md "Prepared
 * jails") answers no challenge at its start and serves nobody: it closes
 * its first control channel and waits, without a time limit, for the one
 * ATTACH that binds it to a sandbox (any sandbox and generation, once).
 * From that ATTACH on it is that sandbox's jail like any other; a bind
 * whose challenge fails ends the jail (a half-bound jail serves nobody). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "guest.h"
#include "tplimage.h"
#include "guestmac.h"
#include "jailkeep.h"
#include "limits.h"
#include "log.h"
#include "msg.h"
#include "proto.h"
#include "util.h"

#if defined(__SANITIZE_ADDRESS__)
/* Sanitizer builds only. LeakSanitizer checks for leaks at exit by stopping
 * every thread with ptrace, which this process's own seccomp filter denies
 * (on purpose): the check could only fail with a fatal error, so it is
 * turned off for the guest. ASan's other checks stay on. */
int __lsan_is_turned_off(void);
int
__lsan_is_turned_off(void)
{
	return 1;
}
#endif

/* seconds a bridge has to send its challenge on a new control channel */
#define GUEST_CHALLENGE_WAIT_S 30

struct guest {
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	uint32_t activation;
	int control, secret_fd;
	int keep;                       /* listening RUNDIR/jail.sock, or -1 */
	unsigned orphan_wait_s;         /* how long to wait for a new bridge */
	uint64_t orphan_until;          /* monotonic ns; 0 while a bridge is attached */
	bool pooled;                    /* prepared, not bound to a sandbox yet */
	struct guest_limits lim;
};

static noreturn void
usage(void)
{
	fprintf(stderr, "usage: spaced-guest --sandbox S --generation G --activation A "
	    "--control-fd N --secret-fd N [--keep-fd N] [--orphan-wait-s N]\n"
	    "    [--nproc N] [--nofile N] [--fsize-mb N] [--pool]\n");
	exit(2);
}

static uint64_t
num_arg(const char *s, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *s == '\0' || *end != '\0' || *s == '-' || v > max)
		usage();
	return v;
}

static void
parse_args(struct guest *g, int argc, char **argv)
{
	static const struct option opts[] = {
		{ "sandbox", required_argument, NULL, 's' },
		{ "generation", required_argument, NULL, 'g' },
		{ "activation", required_argument, NULL, 'a' },
		{ "control-fd", required_argument, NULL, 'c' },
		{ "secret-fd", required_argument, NULL, 'k' },
		{ "nproc", required_argument, NULL, 'p' },
		{ "nofile", required_argument, NULL, 'n' },
		{ "fsize-mb", required_argument, NULL, 'f' },
		{ "keep-fd", required_argument, NULL, 'K' },
		{ "orphan-wait-s", required_argument, NULL, 'o' },
		{ "pool", no_argument, NULL, 'P' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;

	g->control = g->secret_fd = g->keep = -1;
	g->orphan_wait_s = SPACE_JAIL_ORPHAN_WAIT;
	g->lim = (struct guest_limits){ 256, 1024, 1025 };
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!id_valid(optarg))
				usage();
			snprintf(g->sandbox, sizeof(g->sandbox), "%s", optarg);
			break;
		case 'g': g->generation = num_arg(optarg, UINT64_MAX); break;
		case 'a': g->activation = (uint32_t)num_arg(optarg, UINT32_MAX); break;
		case 'c': g->control = (int)num_arg(optarg, 1024); break;
		case 'k': g->secret_fd = (int)num_arg(optarg, 1024); break;
		case 'p': g->lim.nproc = (unsigned)num_arg(optarg, 1u << 22); break;
		case 'n': g->lim.nofile = (unsigned)num_arg(optarg, 1u << 20); break;
		case 'f': g->lim.fsize_mb = (unsigned)num_arg(optarg, 1u << 30); break;
		case 'K': g->keep = (int)num_arg(optarg, 1024); break;
		case 'o': g->orphan_wait_s = (unsigned)num_arg(optarg, 86400); break;
		case 'P': g->pooled = true; break;
		default: usage();
		}
	}
	if (optind != argc || g->sandbox[0] == '\0' || g->generation == 0 ||
	    g->activation == 0 || g->control < 0 || g->secret_fd < 0)
		usage();
	/* a pool jail is reached only through jail.sock */
	if (g->pooled && g->keep < 0)
		usage();
}

static int
read_secret(int fd, uint8_t secret[GUEST_SECRET_LEN])
{
	size_t got = 0;
	ssize_t n;

	while (got < GUEST_SECRET_LEN) {
		n = read(fd, secret + got, GUEST_SECRET_LEN - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EPROTO;
		got += (size_t)n;
	}
	return 0;
}

/* CHALLENGE {"nonce"} -> CHALLENGE_REPLY {"sandbox","generation","activation","mac"} */
static int
answer_challenge(struct guest *g, const uint8_t secret[GUEST_SECRET_LEN])
{
	struct frame f = { 0 };
	struct msg_challenge ch;
	struct msg_challenge_reply rep;
	const char *why;
	char *out = NULL;
	size_t n;
	int r;

	memset(&rep, 0, sizeof(rep));
	/* a bridge that never challenges must not hold PID 1 forever */
	struct timeval tv = { .tv_sec = GUEST_CHALLENGE_WAIT_S }, none = { 0 };
	(void)setsockopt(g->control, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = frame_read(g->control, &f);
	(void)setsockopt(g->control, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof(none));
	if (r < 0)
		return r;
	r = -EPROTO;
	if (f.type != MSG_CHALLENGE || msg_challenge_decode(f.payload, f.len, &ch, &why) != 0)
		goto out;
	if (strlen(g->sandbox) >= sizeof(rep.sandbox)) {
		r = -EINVAL;
		goto out;
	}
	strcpy(rep.sandbox, g->sandbox);
	rep.generation = g->generation;
	rep.activation = g->activation;
	if ((r = guest_mac(secret, ch.nonce, g->sandbox, g->generation, g->activation,
	    rep.mac)) < 0 || (r = msg_challenge_reply_encode(&rep, &out, &n)) < 0)
		goto out;
	r = frame_write(g->control, MSG_CHALLENGE_REPLY, out, n);
out:
	sodium_memzero(&rep, sizeof(rep));
	if (out != NULL)
		msg_wipe_free(out);
	frame_free(&f);
	return r;
}

/* the next activation's bridge connected to RUNDIR/jail.sock: take its
 * control channel if it names this execution and a later activation, and
 * answer its challenge with its secret. Only root of the host can reach
 * the socket (a 0700 root directory outside the jail's mount namespace). */
static void
attach(struct guest *g)
{
	struct jailkeep_attach a;
	struct timeval tv = { .tv_sec = 2 };
	const char *why = NULL;
	bool binding = g->pooled;
	int conn, fd = -1, r;

	if ((conn = accept4(g->keep, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return;
	(void)setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	r = jailkeep_recv(conn, &a, &fd, &why);
	close(conn);
	if (r < 0) {
		log_warnx("jail.sock: refused: %s", why != NULL ? why : strerror(-r));
		return;
	}
	if (g->pooled) {
		/* the bind: once, whatever it names; from here on this jail
		 * is that execution's and answers to nothing else */
		log_info("prepared jail bound to %s generation %" PRIu64 " activation %" PRIu32,
		    a.sandbox, a.generation, a.activation);
		g->pooled = false;
		snprintf(g->sandbox, sizeof(g->sandbox), "%s", a.sandbox);
		g->generation = a.generation;
		g->activation = 0;
	}
	if (strcmp(a.sandbox, g->sandbox) != 0 || a.generation != g->generation ||
	    a.activation <= g->activation) {
		log_warnx("jail.sock: refused %s generation %" PRIu64 " activation %" PRIu32
		    " (this is %s generation %" PRIu64 " activation %" PRIu32 ")",
		    a.sandbox, a.generation, a.activation, g->sandbox, g->generation,
		    g->activation);
		sodium_memzero(&a, sizeof(a));
		close(fd);
		return;
	}
	if (g->control >= 0) {
		log_info("activation %" PRIu32 " takes over from %" PRIu32,
		    a.activation, g->activation);
		close(g->control);
	}
	g->control = fd;
	g->activation = a.activation;
	r = answer_challenge(g, a.secret);
	sodium_memzero(&a, sizeof(a));
	if (r < 0) {
		log_warnx("activation %" PRIu32 ": challenge failed: %s", g->activation,
		    strerror(-r));
		close(g->control);
		g->control = -1;
		if (binding)
			fatalx("the bind of a prepared jail failed: the jail ends");
		if (g->orphan_until == 0)
			g->orphan_until = now_mono_ns() +
			    (uint64_t)g->orphan_wait_s * 1000000000u;
		return;
	}
	g->orphan_until = 0;
	log_info("serving activation %" PRIu32 " (the jail was kept)", g->activation);
}

static pid_t procman_pid = -1;
static int procman_restarts;

/* the process manager (procman.c): a child that becomes the sandbox user
 * and owns the processes of proc.start. PID 1 keeps one end of a
 * SOCK_SEQPACKET pair; operation children inherit it to hand proc.*
 * requests over, one message each. */
static void
procman_start(struct guest *g, int sigfd)
{
	int sv[2];
	pid_t pid;

	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
		log_warn("process manager socket");
		return;
	}
	if ((pid = fork()) < 0) {
		log_warn("fork the process manager");
		close(sv[0]);
		close(sv[1]);
		return;
	}
	if (pid == 0) {
		if (g->control >= 0)
			close(g->control);
		if (g->keep >= 0)
			close(g->keep);
		close(sigfd);
		close(sv[0]);
		if (guest_procman_fd >= 0)
			close(guest_procman_fd);
		if (become_user() < 0 || chdir(GUEST_HOME) < 0)
			_exit(1);
		umask(022);
		procman_main(sv[1]);
	}
	close(sv[1]);
	if (guest_procman_fd >= 0)
		close(guest_procman_fd);
	guest_procman_fd = sv[0];
	procman_pid = pid;
}

static void
reap(struct guest *g, int sigfd)
{
	pid_t pid;
	int st;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
		/* the sandbox user can kill it (it runs as that user): start a
		 * new one, with an empty table; the processes of the old one
		 * run on as orphans of PID 1 */
		if (pid == procman_pid) {
			log_warnx("the process manager ended; starting another");
			procman_pid = -1;
			if (g != NULL && procman_restarts++ < 100)
				procman_start(g, sigfd);
		}
}

/* an operation: fork a child that serves it as the sandbox user */
static void
start_op(struct guest *g, int opfd, int sigfd)
{
	sigset_t none;
	pid_t pid = fork();

	if (pid < 0) {
		log_warn("fork for an operation");
		send_error(opfd, 503, "unavailable", "cannot start the operation");
		return;
	}
	if (pid > 0)
		return;
	close(g->control);
	if (g->keep >= 0)
		close(g->keep);
	close(sigfd);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	op_serve(opfd);
	_exit(0);
}

int
main(int argc, char **argv)
{
	struct guest g;
	uint8_t secret[GUEST_SECRET_LEN];
	struct pollfd pfd[3];
	sigset_t mask;
	int sigfd, r, quit = 0;

	memset(&g, 0, sizeof(g));
	log_init("spaced-guest", 0);
	parse_args(&g, argc, argv);
	if (getpid() != 1)
		fatalx("must run as PID 1 of its own pid namespace");
	/* memory holding the secret is not readable through /proc/1/mem,
	 * and no core dump can carry it */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	if (sodium_init() < 0)
		fatalx("sodium_init");
	r = read_secret(g.secret_fd, secret);
	close(g.secret_fd);
	if (r < 0)
		fatalx("cannot read the activation secret: %s", strerror(-r));
	if ((r = confine_guest(&g.lim)) < 0)
		fatalx("cannot confine: %s", strerror(-r));
	/* the rendezvous of later activations: listened on by PID 1 itself,
	 * so a connecting bridge's SO_PEERCRED names this process */
	if (g.keep >= 0 && listen(g.keep, 4) < 0) {
		log_warn("listen on jail.sock: the jail ends with this bridge");
		close(g.keep);
		g.keep = -1;
	}

	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		fatal("signalfd");

	if (g.pooled) {
		/* prepared ahead of its sandbox: nothing to prove yet, nobody
		 * to serve; the bind (attach) brings the channel and secret */
		close(g.control);
		g.control = -1;
		r = 0;
		log_info("prepared jail: waiting on jail.sock for its sandbox");
	} else
		r = answer_challenge(&g, secret);
	sodium_memzero(secret, sizeof(secret));
	/* after the secret is gone: the file is the sandbox's to change */
	if (r == 0 && guest_template_load() < 0)
		log_warnx("template file " TPL_META_PATH " is malformed: ignored");
	if (r < 0)
		fatalx("challenge failed: %s", strerror(-r));
	/* the set-up's heap (the seccomp filter's build above all) is free
	 * now: give its pages back before the process manager and every
	 * operation fork from us, or each idle sandbox keeps them */
	(void)malloc_trim(0);
	procman_start(&g, sigfd);

	while (!quit) {
		int n = 0, ci = -1, ki = -1, timeout = -1;

		pfd[n++] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		if (g.control >= 0) {
			ci = n;
			pfd[n++] = (struct pollfd){ .fd = g.control, .events = POLLIN };
		}
		if (g.keep >= 0) {
			ki = n;
			pfd[n++] = (struct pollfd){ .fd = g.keep, .events = POLLIN };
		}
		if (g.control < 0 && !g.pooled) {
			uint64_t now = now_mono_ns();
			if (now >= g.orphan_until) {
				log_warnx("no bridge came back within %u s: the jail ends",
				    g.orphan_wait_s);
				break;
			}
			timeout = (int)((g.orphan_until - now) / 1000000u) + 1;
		}
		if (poll(pfd, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (pfd[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					reap(&g, sigfd);
				else
					quit = 1;
				if (quit)
					break;
			}
		}
		if (!quit && ci >= 0 && (pfd[ci].revents & (POLLIN | POLLHUP | POLLERR))) {
			struct frame f = { 0 };
			int opfd = -1;

			r = frame_read_fd(g.control, &f, &opfd);
			if (r < 0 && g.keep >= 0) {
				/* the bridge is gone; the jail waits for the
				 * next activation's (bounded) */
				log_info("control channel of activation %" PRIu32 " closed (%s): "
				    "waiting up to %u s for the next bridge", g.activation,
				    strerror(-r), g.orphan_wait_s);
				close(g.control);
				g.control = -1;
				g.orphan_until = now_mono_ns() +
				    (uint64_t)g.orphan_wait_s * 1000000000u;
			} else if (r < 0) {
				/* the bridge is gone: without it nobody can
				 * reach this execution, so it ends */
				log_info("control channel closed: %s", strerror(-r));
				quit = 1;
			} else if (f.type != MSG_OPEN || opfd < 0) {
				log_warnx("unexpected %s on the control channel",
				    msg_type_str(f.type));
				quit = 1;
			} else
				start_op(&g, opfd, sigfd);
			if (opfd >= 0)
				close(opfd);
			frame_free(&f);
		}
		if (!quit && ki >= 0 && (pfd[ki].revents & POLLIN))
			attach(&g);
	}
	/* forward the stop to every process of the namespace, give them a
	 * moment, then our exit kills the rest */
	kill(-1, SIGTERM);
	for (int i = 0; i < 20; i++) {
		struct timespec ts = { 0, 50 * 1000 * 1000 };
		reap(NULL, -1);
		if (waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD)
			break;
		nanosleep(&ts, NULL);
	}
	close(sigfd);
	if (g.control >= 0)
		close(g.control);
	if (g.keep >= 0)
		close(g.keep);
	return 0;
}
