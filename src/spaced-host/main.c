/* spaced-host: the bridge of one execution (DESIGN sections 6 and 10).
 *
 * Started by sbx-manager as root, one per execution. Launches the guest on
 * its substrate, challenges it, says "ready" on stdout, then serves
 * sbx-manager's connections on RUNDIR/bridge.sock, one thread each. It
 * never relaunches its guest: when the guest is gone, operations fail with
 * 503 and the bridge exits non-zero so sbx-manager sees it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <inttypes.h>
#include <linux/limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "host.h"
#include "limits.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#define CHALLENGE_TIMEOUT_MS 15000
#define DRAIN_TIMEOUT_MS     5000       /* operations get this long to end on stop */

static noreturn void
usage(void)
{
	fprintf(stderr,
	    "usage: spaced-host --sandbox S --generation G --activation A --worker W\n"
	    "    --resident R --substrate jail --template host --run-dir DIR\n"
	    "    --layer-dir DIR --uid-base N [--memory-mb 512] [--pids 256]\n"
	    "    [--cpu-percent 100] [--disk-mb 4096] [--guest PATH] [-v]\n");
	exit(2);
}

static uint64_t
num_arg(const char *name, const char *s, uint64_t min, uint64_t max)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *s == '\0' || *s == '-' || *end != '\0' || v < min || v > max) {
		fprintf(stderr, "spaced-host: --%s: not a number in %" PRIu64 "..%" PRIu64 "\n",
		    name, min, max);
		usage();
	}
	return v;
}

static void
copy_id(char *dst, size_t cap, const char *name, const char *v)
{
	if (!id_valid(v) || strlen(v) >= cap) {
		fprintf(stderr, "spaced-host: --%s: not a valid id\n", name);
		usage();
	}
	memcpy(dst, v, strlen(v) + 1);
}

struct opts {
	const char *guest, *substrate;
	char guest_buf[PATH_MAX];
	int verbose;
};

static void
parse_args(struct host *h, struct opts *o, int argc, char **argv)
{
	enum { O_SBX = 1, O_GEN, O_ACT, O_WRK, O_RES, O_SST, O_TPL, O_RUN, O_LAYER,
	    O_UID, O_MEM, O_PIDS, O_CPU, O_DISK, O_GUEST, O_T_SBX, O_T_SECRET };
	static const struct option opts[] = {
		{ "sandbox", required_argument, NULL, O_SBX },
		{ "generation", required_argument, NULL, O_GEN },
		{ "activation", required_argument, NULL, O_ACT },
		{ "worker", required_argument, NULL, O_WRK },
		{ "resident", required_argument, NULL, O_RES },
		{ "substrate", required_argument, NULL, O_SST },
		{ "template", required_argument, NULL, O_TPL },
		{ "run-dir", required_argument, NULL, O_RUN },
		{ "layer-dir", required_argument, NULL, O_LAYER },
		{ "uid-base", required_argument, NULL, O_UID },
		{ "memory-mb", required_argument, NULL, O_MEM },
		{ "pids", required_argument, NULL, O_PIDS },
		{ "cpu-percent", required_argument, NULL, O_CPU },
		{ "disk-mb", required_argument, NULL, O_DISK },
		{ "guest", required_argument, NULL, O_GUEST },
		/* test-only, documented in docs/jail.md: make the guest lie,
		 * so tests can show the challenge refuses it */
		{ "test-guest-sandbox", required_argument, NULL, O_T_SBX },
		{ "test-guest-bad-secret", no_argument, NULL, O_T_SECRET },
		{ NULL, 0, NULL, 0 }
	};
	struct substrate_config *c = &h->cfg;
	struct route_identity *id = &h->rec.id;
	int ch;

	c->memory_mb = 512;
	c->pids = 256;
	c->cpu_percent = 100;
	c->disk_mb = 4096;
	while ((ch = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (ch) {
		case O_SBX: copy_id(id->sandbox, sizeof(id->sandbox), "sandbox", optarg); break;
		case O_GEN: id->generation = num_arg("generation", optarg, 1, INT64_MAX); break;
		case O_ACT: id->activation = (uint32_t)num_arg("activation", optarg, 1, UINT32_MAX); break;
		case O_WRK: copy_id(id->worker, sizeof(id->worker), "worker", optarg); break;
		case O_RES: copy_id(id->resident, sizeof(id->resident), "resident", optarg); break;
		case O_SST: o->substrate = optarg; break;
		case O_TPL: c->template_name = optarg; break;
		case O_RUN: c->run_dir = optarg; break;
		case O_LAYER: c->layer_dir = optarg; break;
		/* uid 0 must never be mapped: root inside must not be root outside */
		case O_UID: c->uid_base = (uid_t)num_arg("uid-base", optarg, 65536, UINT32_MAX - 65536); break;
		case O_MEM: c->memory_mb = (unsigned)num_arg("memory-mb", optarg, 16, 1u << 20); break;
		case O_PIDS: c->pids = (unsigned)num_arg("pids", optarg, 8, 1u << 22); break;
		case O_CPU: c->cpu_percent = (unsigned)num_arg("cpu-percent", optarg, 1, 100000); break;
		case O_DISK: c->disk_mb = (unsigned)num_arg("disk-mb", optarg, 16, 1u << 24); break;
		case O_GUEST: o->guest = optarg; break;
		case O_T_SBX: c->guest_sandbox_override = optarg; break;
		case O_T_SECRET: c->guest_secret_corrupt = true; break;
		case 'v': o->verbose = 1; break;
		default: usage();
		}
	}
	if (optind != argc || !id->sandbox[0] || !id->generation || !id->activation ||
	    !id->worker[0] || !id->resident[0] || !o->substrate || !c->template_name ||
	    !c->run_dir || !c->layer_dir || !c->uid_base)
		usage();
	if (strlen(o->substrate) > SPACE_SUBSTRATE_MAX)
		usage();
	snprintf(id->substrate, sizeof(id->substrate), "%s", o->substrate);
	c->sandbox = id->sandbox;
	c->generation = id->generation;
	c->activation = id->activation;
	if (o->guest == NULL) {
		/* next to our own binary: both come from the same build */
		char self[PATH_MAX - 32];
		ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		char *slash;
		if (n <= 0)
			fatal("readlink /proc/self/exe");
		self[n] = '\0';
		if ((slash = strrchr(self, '/')) != NULL)
			*slash = '\0';
		snprintf(o->guest_buf, sizeof(o->guest_buf), "%s/spaced-guest", self);
		o->guest = o->guest_buf;
	}
	c->guest_path = o->guest;
}

static int
listen_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	/* a socket left by a previous bridge of this directory: the
	 * directory is ours (0700, root), so nobody else can have put it */
	unlink(path);
	old = umask(077);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	/* connecting needs write permission: only the owner (root) has it */
	if (r < 0 || chmod(path, 0600) < 0 || listen(fd, 64) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

struct conn {
	struct host *h;
	int fd;
};

static void *
conn_thread(void *arg)
{
	struct conn *c = arg;
	struct host *h = c->h;

	bridge_serve(h, c->fd);
	free(c);
	pthread_mutex_lock(&h->mu);
	h->active--;
	pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->mu);
	return NULL;
}

static void
accept_one(struct host *h, int lfd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	pthread_attr_t attr;
	pthread_t t;
	struct conn *c;
	int fd;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return;
	/* only sbx-manager (root) may talk to a bridge; the 0700 directory
	 * already keeps others out, this holds even if it is misconfigured */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.uid != 0) {
		log_warnx("connection from uid %d refused", (int)cred.uid);
		close(fd);
		return;
	}
	pthread_mutex_lock(&h->mu);
	if (h->active >= SPACE_STREAMS_PER_SBX) {
		pthread_mutex_unlock(&h->mu);
		bridge_refuse(fd, 503, "unavailable", "too many operations on this sandbox");
		return;
	}
	h->active++;
	pthread_mutex_unlock(&h->mu);
	if ((c = malloc(sizeof(*c))) == NULL)
		goto fail;
	*c = (struct conn){ h, fd };
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	if (pthread_create(&t, &attr, conn_thread, c) != 0) {
		pthread_attr_destroy(&attr);
		free(c);
		goto fail;
	}
	pthread_attr_destroy(&attr);
	return;
fail:
	pthread_mutex_lock(&h->mu);
	h->active--;
	pthread_mutex_unlock(&h->mu);
	bridge_refuse(fd, 503, "unavailable", "cannot serve now");
}

/* wait up to ms for every connection thread to finish */
static void
drain(struct host *h, int ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&h->mu);
	while (h->active > 0)
		if (pthread_cond_timedwait(&h->idle, &h->mu, &ts) != 0)
			break;
	pthread_mutex_unlock(&h->mu);
}

int
main(int argc, char **argv)
{
	static struct host h;
	struct opts o = { 0 };
	uint8_t secret[GUEST_SECRET_LEN];
	char sock[PATH_MAX];
	const char *why = NULL;
	struct pollfd p[3];
	sigset_t mask;
	int lfd = -1, sigfd, r, rc = 1, nul;
	bool stopping = false;

	parse_args(&h, &o, argc, argv);
	log_init("spaced-host", o.verbose);
	if (geteuid() != 0)
		fatalx("must run as root (it builds namespaces and cgroups)");
	if (sodium_init() < 0)
		fatalx("sodium_init");
	if ((h.ops = substrate_find(h.rec.id.substrate)) == NULL)
		fatalx("substrate %s cannot run on this machine", h.rec.id.substrate);
	h.rec.state = EXEC_SERVING;
	h.control = -1;
	pthread_mutex_init(&h.control_mu, NULL);
	pthread_mutex_init(&h.mu, NULL);
	pthread_cond_init(&h.idle, NULL);
	/* the guest inherits our supplementary groups, and setgroups is
	 * denied in its user namespace: it must not carry root's group */
	if (setgroups(0, NULL) < 0)
		fatal("setgroups");
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGCHLD);
	sigprocmask(SIG_BLOCK, &mask, NULL);
	if ((sigfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK)) < 0)
		fatal("signalfd");

	randombytes_buf(secret, sizeof(secret));
	r = h.ops->launch(&h.cfg, secret, &h.sub, &h.control);
	if (r < 0) {
		sodium_memzero(secret, sizeof(secret));
		fatalx("cannot launch the guest (%s): %s", h.ops->name, strerror(-r));
	}
	r = challenge_guest(h.control, secret, &h.rec.id, CHALLENGE_TIMEOUT_MS, &why);
	/* the secret has served its one purpose */
	sodium_memzero(secret, sizeof(secret));
	if (r < 0) {
		log_warnx("guest challenge failed: %s", why);
		goto stop;
	}
	snprintf(sock, sizeof(sock), "%s/bridge.sock", h.cfg.run_dir);
	if ((lfd = listen_socket(sock)) < 0) {
		log_warnx("cannot listen on %s: %s", sock, strerror(-lfd));
		goto stop;
	}
	if (write(1, "ready\n", 6) != 6) {
		log_warn("cannot say ready");
		goto stop;
	}
	/* nothing else goes to sbx-manager's ready pipe */
	if ((nul = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0) {
		dup2(nul, 1);
		close(nul);
	}
	log_info("serving %s generation %" PRIu64 " activation %" PRIu32 " on %s",
	    h.rec.id.sandbox, h.rec.id.generation, h.rec.id.activation, sock);

	while (!stopping) {
		p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		/* the guest never writes on the control channel after the
		 * challenge: readable or hung up means it is gone */
		p[2] = (struct pollfd){ .fd = h.control, .events = POLLIN };
		if (poll(p, atomic_load(&h.guest_dead) ? 2 : 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_warn("poll");
			break;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					pid_t gp = h.ops->guest_pid(h.sub);
					int st;
					if (gp > 0 && waitpid(gp, &st, WNOHANG) == gp) {
						h.ops->guest_reaped(h.sub, st);
						atomic_store(&h.guest_dead, true);
					}
				} else {
					log_info("stopping on signal %u", si.ssi_signo);
					stopping = true;
					rc = 0;
				}
			}
		}
		if (!atomic_load(&h.guest_dead) && (p[2].revents & (POLLIN | POLLHUP | POLLERR)))
			atomic_store(&h.guest_dead, true);
		if (atomic_load(&h.guest_dead) && !stopping) {
			/* no transparent reconnect: operations in flight see
			 * their sockets close and answer 503; new ones too */
			log_warnx("the guest of %s generation %" PRIu64 " is gone",
			    h.rec.id.sandbox, h.rec.id.generation);
			stopping = true;
			rc = 1;
		}
		if (!stopping && (p[0].revents & POLLIN))
			accept_one(&h, lfd);
	}
	/* stop the guest first: operations in flight end with it */
	h.ops->stop(h.sub);
	{
		uint64_t until = now_mono_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000u;
		/* answer late connections with 503 while the threads end */
		while (now_mono_ns() < until) {
			unsigned active;
			pthread_mutex_lock(&h.mu);
			active = h.active;
			pthread_mutex_unlock(&h.mu);
			if (active == 0)
				break;
			p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
			if (poll(p, 1, 50) > 0) {
				int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
				if (fd >= 0)
					bridge_refuse(fd, 503, "unavailable", "the execution ended");
			}
		}
		drain(&h, 100);
	}
	unlink(sock);
	close(lfd);
	goto out;
stop:
	h.ops->stop(h.sub);
out:
	if (h.control >= 0)
		close(h.control);
	/* a thread still running past the drain may look at the substrate:
	 * the process exit frees it then */
	pthread_mutex_lock(&h.mu);
	if (h.active == 0)
		h.ops->free(h.sub);
	pthread_mutex_unlock(&h.mu);
	close(sigfd);
	return rc;
}
