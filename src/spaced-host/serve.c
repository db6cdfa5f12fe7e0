/* The serving process of spaced-host (host.h): everything that reads what
 * the guest or sbx-manager sends runs here, under an uid of its own with
 * nothing a root process would have.
 *
 * Order matters:
 *   1. drop every capability from the bounding set (still root);
 *   2. setresgid/setresuid to the serving id: the kernel clears the
 *      permitted and effective sets, and we check that it did;
 *   3. parent-death signal (after the uid change, which clears it),
 *      no_new_privs, not dumpable;
 *   4. listen() on the socket the monitor bound: the listener's
 *      credentials (what SO_PEERCRED reports to sbx-manager) are taken
 *      here, so they name this process and this uid;
 *   5. the seccomp allow list (serve_filter.c, compiled at build time);
 *   6. only then the first guest frame (the challenge reply). */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <malloc.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "cgroup.h"
#include "dropuid.h"
#include "host.h"
#include "limits.h"
#include "log.h"
#include "serve_filter.h"
#include "util.h"

#define CHALLENGE_TIMEOUT_MS 15000
#define DRAIN_TIMEOUT_MS     5000       /* operations get this long to end on stop */
#define MON_TIMEOUT_S        5          /* the monitor answers a query within this */

static noreturn void
die(const char *what)
{
	log_warn("serving process: %s", what);
	/* _exit: no atexit handlers, no stdio flush of the monitor's buffers */
	_exit(1);
}

static void
drop_privileges(struct host *h, pid_t monitor)
{
	uid_t id = h->cfg.uid_base + SPACE_BRIDGE_UID_OFFSET;
	const char *why;

	/* the monitor's death (even SIGKILL) ends us, which closes the
	 * guest's control channel, which ends the guest */
	if ((why = drop_to_uid(id, id, monitor)) != NULL)
		die(why);
}

/* The serving process's filter (serve_filter.c), compiled at build time:
 * loaded as that program with our pid in the one place the build left for
 * it. The program is copied and patched, never built here. */
static void
confine(void)
{
	struct sock_filter prog[BPF_MAXINSNS];
	struct sock_fprog fp = { .len = serve_filter_bpf_len, .filter = prog };
	unsigned n = 0;

	if (serve_filter_bpf_len == 0 || serve_filter_bpf_len > BPF_MAXINSNS)
		die("seccomp filter");
	memcpy(prog, serve_filter_bpf, serve_filter_bpf_len * sizeof(prog[0]));
	/* the stand-in is compared with tgkill's first argument, once: a
	 * program that has it anywhere else, or not at all, is not loaded */
	for (unsigned i = 0; i < serve_filter_bpf_len; i++) {
		if (prog[i].k != SERVE_FILTER_SELF)
			continue;
		if (prog[i].code != (BPF_JMP | BPF_JEQ | BPF_K))
			die("seccomp filter");
		prog[i].k = (uint32_t)getpid();
		n++;
	}
	if (n != 1)
		die("seccomp filter");
	/* as seccomp_load does: no_new_privs (set already by drop_to_uid),
	 * one thread here, so no TSYNC */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
	    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) != 0)
		die("seccomp filter");
}

int
host_oom_kills(struct host *h, uint64_t *n)
{
	struct hm_msg m = { .type = HM_OOM_QUERY };
	int r;

	if (h->oomfd >= 0) {
		char buf[4096];
		ssize_t k = -1;

		pthread_mutex_lock(&h->oom_mu);
		if (lseek(h->oomfd, 0, SEEK_SET) == 0)
			k = read(h->oomfd, buf, sizeof(buf) - 1);
		pthread_mutex_unlock(&h->oom_mu);
		if (k >= 0) {
			buf[k] = '\0';
			if (cgroup_oom_parse(buf, n) == 0)
				return 0;
		}
		/* unreadable: the monitor reads it its own way */
	}

	pthread_mutex_lock(&h->mon_mu);
	if ((r = hm_send(h->mon, &m)) == 0 && (r = hm_recv(h->mon, &m)) == 0 &&
	    m.type != HM_OOM_COUNT)
		r = -EPROTO;
	pthread_mutex_unlock(&h->mon_mu);
	if (r < 0)
		return r;
	if (!m.u.oom.known)
		return -ENODATA;
	*n = m.u.oom.n;
	return 0;
}

void
host_refused(struct host *h, enum op_kind op, const char *target,
    const struct capability *cap, struct admit_result res)
{
	struct hm_msg m = { .type = HM_REFUSED };
	struct hm_refusal *f = &m.u.ref;

	f->op = (uint8_t)op;
	f->outcome = (uint8_t)res.outcome;
	f->reason = (uint8_t)res.reason;
	if (target && id_valid(target))
		snprintf(f->target, sizeof(f->target), "%s", target);
	/* claims that decoded carry valid ids; anything else is left empty */
	f->cap = cap->route;
	memcpy(f->jti, cap->jti, sizeof(f->jti));
	pthread_mutex_lock(&h->mon_mu);
	if (hm_send(h->mon, &m) < 0) {
		/* a field that would not decode: the route is dropped, the
		 * refusal itself is still counted */
		memset(&f->cap, 0, sizeof(f->cap));
		f->jti[0] = '\0';
		if (hm_send(h->mon, &m) < 0)
			log_warnx("cannot report a refusal to the monitor");
	}
	pthread_mutex_unlock(&h->mon_mu);
}

bool
host_guest_gone(struct host *h)
{
	struct pollfd p = { .fd = h->control, .events = POLLIN };

	if (atomic_load(&h->guest_dead))
		return true;
	/* the guest never writes on the control channel after the
	 * challenge: readable or hung up means it is gone */
	if (poll(&p, 1, 0) == 1 && (p.revents & (POLLIN | POLLHUP | POLLERR)))
		atomic_store(&h->guest_dead, true);
	return atomic_load(&h->guest_dead);
}

struct conn {
	struct host *h;
	int fd;
};

/* an operation's thread: its stack size */
#define CONN_STACK (256u << 10)

static void *
conn_thread(void *arg)
{
	struct conn *c = arg;
	struct host *h = c->h;
	bool idle;

	bridge_serve(h, c->fd);
	free(c);
	pthread_mutex_lock(&h->mu);
	idle = --h->active == 0;
	pthread_cond_broadcast(&h->idle);
	pthread_mutex_unlock(&h->mu);
	/* idle again: what the operations freed goes back to the kernel,
	 * not kept per sandbox (a thousand idle ones on a worker) */
	if (idle)
		(void)malloc_trim(0);
	return NULL;
}

/* true when a connection of sbx-manager went to a thread of its own */
static bool
accept_one(struct host *h, int lfd)
{
	struct ucred cred;
	socklen_t len = sizeof(cred);
	pthread_attr_t attr;
	pthread_t t;
	struct conn *c;
	int fd;

	if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return false;
	/* only sbx-manager (root) may talk to a bridge; the 0700 directory
	 * already keeps others out, this holds even if it is misconfigured */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warn("connection refused: SO_PEERCRED");
		close(fd);
		return false;
	}
	if (cred.uid != 0) {
		log_warnx("connection from uid %u (pid %d) refused", (unsigned)cred.uid,
		    (int)cred.pid);
		close(fd);
		return false;
	}
	pthread_mutex_lock(&h->mu);
	if (h->active >= SPACE_STREAMS_PER_SBX) {
		pthread_mutex_unlock(&h->mu);
		bridge_refuse(fd, 503, "unavailable", "too many operations on this sandbox");
		return false;
	}
	h->active++;
	pthread_mutex_unlock(&h->mu);
	if ((c = malloc(sizeof(*c))) == NULL)
		goto fail;
	*c = (struct conn){ h, fd };
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, CONN_STACK);
	if (pthread_create(&t, &attr, conn_thread, c) != 0) {
		pthread_attr_destroy(&attr);
		free(c);
		goto fail;
	}
	pthread_attr_destroy(&attr);
	return true;
fail:
	pthread_mutex_lock(&h->mu);
	h->active--;
	pthread_mutex_unlock(&h->mu);
	bridge_refuse(fd, 503, "unavailable", "cannot serve now");
	return false;
}

static unsigned
active_count(struct host *h)
{
	unsigned a;

	pthread_mutex_lock(&h->mu);
	a = h->active;
	pthread_mutex_unlock(&h->mu);
	return a;
}

/* what every serving process does first, as root still: the wake-up
 * pipe, jansson's seed (it reads /dev/urandom on first use: before the
 * filter takes open() away), then the serving uid */
static void
serve_prepare(struct host *h)
{
	if (pipe2(h->chan_wake, O_CLOEXEC | O_NONBLOCK) < 0)
		h->chan_wake[0] = h->chan_wake[1] = -1;
	json_object_seed(0);
	drop_privileges(h, getppid());
}

static noreturn void serve_run(struct host *h, int lfd, uint8_t secret[GUEST_SECRET_LEN],
    uint64_t t0, bool confined);

noreturn void
serve_main(struct host *h, int lfd, uint8_t secret[GUEST_SECRET_LEN])
{
	uint64_t t0 = now_mono_ns();

	serve_prepare(h);
	if (listen(lfd, 64) < 0)
		die("listen");
	serve_run(h, lfd, secret, t0, false);
}

noreturn void
serve_kept(struct host *h)
{
	struct hm_msg m;
	int fds[2], r;
	uint64_t t0;

	serve_prepare(h);
	confine();
	/* nothing is ours to serve until the claim: whom, the guest's
	 * secret, its channel, the socket. The monitor's end closing (no
	 * claim: the jail was destroyed) ends us */
	if ((r = hm_recv_claim(h->mon, &m, fds)) != 0) {
		if (r != -ECONNRESET)
			log_warnx("serving process of a prepared jail: bad claim (%s)", strerror(-r));
		_exit(r == -ECONNRESET ? 0 : 1);
	}
	t0 = now_mono_ns();
	h->rec.id = m.u.claim.id;
	h->control = fds[0];
	if (listen(fds[1], 64) < 0)
		die("listen");
	serve_run(h, fds[1], m.u.claim.secret, t0, true);
}

/* the challenge, READY, then the serving loop; the secret is wiped once
 * the challenge is checked */
static noreturn void
serve_run(struct host *h, int lfd, uint8_t secret[GUEST_SECRET_LEN], uint64_t t0, bool confined)
{
	struct hm_msg ready = { .type = HM_READY };
	struct timeval tv = { MON_TIMEOUT_S, 0 };
	struct pollfd p[4];
	const char *why = NULL;
	uint64_t until, t_conf, t_chal;
	uint8_t nonce[GUEST_NONCE_LEN];
	bool ahead = false;
	int r;

	setsockopt(h->mon, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	/* the challenge goes out before the filter is built, so the guest
	 * computes its reply meanwhile; its reply is read (the first bytes
	 * of the guest this process parses) only under the filter (a
	 * prepared jail's serving process was confined before its claim) */
	if (challenge_send(h->control, nonce, &why) < 0) {
		log_warnx("guest challenge failed: %s", why);
		_exit(1);
	}
	if (!confined)
		confine();
	t_conf = now_mono_ns();

	r = challenge_check(h->control, secret, nonce, &h->rec.id, CHALLENGE_TIMEOUT_MS, &why);
	/* the secret has served its one purpose */
	sodium_memzero(secret, GUEST_SECRET_LEN);
	if (r < 0) {
		log_warnx("guest challenge failed: %s", why);
		_exit(1);
	}
	t_chal = now_mono_ns();
	if (hm_send(h->mon, &ready) < 0)
		die("cannot tell the monitor we are ready");
	/* where the serving process's start goes (docs/benchmarks.md,
	 * "Bridge start: fixed costs") */
	log_info("start of the serving process of %s: privileges and filter %.1f ms, "
	    "guest challenge %.1f ms (its wait after the filter)%s", h->rec.id.sandbox,
	    (double)(t_conf - t0) / 1e6, (double)(t_chal - t_conf) / 1e6,
	    confined ? " (a prepared jail's: privileges and filter before the claim)" : "");

	for (;;) {
		p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = h->control, .events = POLLIN };
		/* the monitor never writes unasked: only its end closing matters */
		p[2] = (struct pollfd){ .fd = h->mon, .events = 0 };
		p[3] = (struct pollfd){ .fd = h->chan_wake[0], .events = POLLIN };
		/* the wait ends when the oldest idle channel is due */
		if (poll(p, 4, bridge_chan_expire(h)) < 0) {
			if (errno == EINTR)
				continue;
			die("poll");
		}
		if (p[3].revents & POLLIN) {
			char b[64];
			while (read(h->chan_wake[0], b, sizeof(b)) > 0)
				;
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			atomic_store(&h->guest_dead, true);
			/* no transparent reconnect: operations in flight see
			 * their sockets close and answer 503; new ones too */
			log_warnx("the guest of %s generation %" PRIu64 " is gone",
			    h->rec.id.sandbox, h->rec.id.generation);
			break;
		}
		if (p[2].revents & (POLLHUP | POLLERR)) {
			atomic_store(&h->guest_dead, true);
			log_warnx("the monitor is gone");
			break;
		}
		/* sbx-manager's first connection (it opens one as soon as the
		 * execution is committed serving): the guest forks the first
		 * operation's child while the start is reported and the
		 * client asks for its route, so the first exec pays a frame
		 * round trip, not MSG_OPEN, a fork and the uid change. Idle,
		 * it ends after SPACE_OPCHAN_IDLE_MS like any kept channel:
		 * an idle sandbox keeps no extra process */
		if ((p[0].revents & POLLIN) && accept_one(h, lfd) && !ahead) {
			ahead = true;
			if (bridge_chan_ahead(h) == 0)
				log_info("%s: an operation channel opened ahead at the first "
				    "connection", h->rec.id.sandbox);
		}
	}
	/* answer late connections with 503 while the threads end */
	until = now_mono_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000u;
	while (active_count(h) > 0 && now_mono_ns() < until) {
		p[0] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		if (poll(p, 1, 50) > 0) {
			int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd >= 0)
				bridge_refuse(fd, 503, "unavailable", "the execution ended");
		}
	}
	_exit(0);
}
