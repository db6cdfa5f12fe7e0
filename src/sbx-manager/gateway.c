/* netgtw on this worker (docs/network.md "netgtw"): the listener
 * process, one gateway process per serving execution, and the
 * authoritative admission check they ask for.
 *
 * - gateway_init binds --gateway-listen and starts `netgtw listen` under
 *   --gateway-uid with it; the listener hands each connection to
 *   D/gw/SANDBOX.sock.
 * - gateway_attach (after an execution serves, when it declares a port;
 *   or when its first port is declared) binds D/gw/SANDBOX.sock
 *   (replacing the previous execution's atomically), then starts `netgtw
 *   gateway` inside the sandbox's network namespace under --gateway-uid,
 *   no capabilities, no_new_privs, with that socket and a SEQPACKET pair
 *   to us. We send it the key bundle first.
 * - the check thread answers each gateway's hello: the comparator
 *   (admit_token, receiver kind netgtw) against our committed record,
 *   then the sandbox's declared ports (the seed's second check), kept in
 *   D/ports/SANDBOX as the assignments carry them.
 * - a relaunch of the bridge (a new activation of the same execution)
 *   keeps the gateway and its connections: the namespace is the
 *   execution's (netns.c); gateway_attach tells the gateway the new
 *   activation ({"activation":N} on its channel), so its own check
 *   refuses the old activation's capabilities from then on (ours does
 *   from the record's commit on).
 * - gateway_detach (retire, replacement, failure, stop, the last port
 *   removed) stops the gateway: its connections end there (a leased
 *   stream).
 * - a gateway that dies on its own is started again (a log line), once
 *   its channel hung up, if its execution still serves.
 * The gateway's uid is one per worker, not per sandbox: gateways are not
 * dumpable, so one cannot attach to another (docs/network.md). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <libgen.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "egress.h"
#include "gateway.h"
#include "gwhello.h"
#include "log.h"
#include "msg.h"
#include "netns.h"
#include "sbx-manager.h"
#include "util.h"

struct gw {
	bool used, closing, dead;       /* dead: hung up on its own */
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	uint32_t activation;
	pid_t pid;
	int pidfd, ctl;
	ino_t sock_ino;
	uint64_t sent_version;          /* key bundle version it holds */
};

static struct {
	bool on;
	char host[64];
	unsigned port;
	uid_t uid;
	char endpoint[128];
	char exe[PATH_MAX];
	char dir[PATH_MAX];             /* D/gw */
	char ports_dir[PATH_MAX];       /* D/ports */
	char root_hex[65];
	struct mgr *m;
	pthread_mutex_t lock;
	struct gw gws[MGR_CAPACITY_MAX];
	int wake;
	/* one attach or detach at a time (a lane, the restart of a dead
	 * gateway); never taken by the check thread */
	pthread_mutex_t attach_mu;
} gt = { .uid = 65534, .lock = PTHREAD_MUTEX_INITIALIZER, .wake = -1,
	.attach_mu = PTHREAD_MUTEX_INITIALIZER };

static void detach_locked(const char *sandbox);
static int reidentify(const struct record *r);
static int attach_locked(const struct record *r);

int
gateway_option(const char *name, const char *arg)
{
	char *end;
	const char *colon;
	unsigned long v;

	if (strcmp(name, "gateway-listen") == 0) {
		colon = strrchr(arg, ':');
		if (colon == NULL || colon == arg || (size_t)(colon - arg) >= sizeof(gt.host))
			return -EINVAL;
		v = strtoul(colon + 1, &end, 10);
		if (*end || v < 1 || v > 65535)
			return -EINVAL;
		memcpy(gt.host, arg, (size_t)(colon - arg));
		gt.host[colon - arg] = '\0';
		gt.port = (unsigned)v;
		gt.on = true;
		/* set now: the control-plane client process, forked before
		 * gateway_init, registers it */
		snprintf(gt.endpoint, sizeof(gt.endpoint), "tcp://%s:%u", gt.host, gt.port);
		return 0;
	}
	if (strcmp(name, "gateway-uid") == 0) {
		v = strtoul(arg, &end, 10);
		if (*end || v == 0 || v >= 0xffffffffu)
			return -EINVAL;
		gt.uid = (uid_t)v;
		return 0;
	}
	return -ENOENT;
}

const char *
gateway_endpoint(void)
{
	return gt.on ? gt.endpoint : NULL;
}

/* ---- declared ports: D/ports/SANDBOX, one port per line, ascending ---- */

static void
ports_path(const char *sandbox, char *p, size_t cap)
{
	snprintf(p, cap, "%s/%s", gt.ports_dir, sandbox);
}

static void
ports_save(const char *sandbox, const struct msg_assignment *a)
{
	char p[PATH_MAX + 80], buf[SPACE_PORTS_MAX * 7 + 1];
	size_t o = 0;
	uint8_t i;

	if (!gt.on || !id_valid(sandbox))
		return;
	ports_path(sandbox, p, sizeof(p));
	if (!a->has_ports) {
		(void)unlink(p);
		return;
	}
	for (i = 0; i < a->nports; i++)
		o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%u\n", a->ports[i]);
	if (write_file_atomic(p, buf, o, 0600) != 0)
		log_warnx("gateway: %s: cannot save its declared ports", sandbox);
}

/* port 0: any declared port at all */
static bool
port_declared(const char *sandbox, uint16_t port)
{
	char p[PATH_MAX + 80], *buf = NULL, *s, *end;
	size_t n;
	unsigned long v;
	bool found = false;

	ports_path(sandbox, p, sizeof(p));
	if (read_file(p, SPACE_PORTS_MAX * 7, &buf, &n) != 0)
		return false;
	for (s = buf; *s; s = end + (*end == '\n')) {
		v = strtoul(s, &end, 10);
		if (end == s || (*end != '\n' && *end != '\0'))
			break;
		if (port == 0 ? v > 0 : v == port) {
			found = true;
			break;
		}
	}
	free(buf);
	return found;
}

void
gateway_ports_install(const struct msg_assignment *a)
{
	ports_save(a->id.sandbox, a);
}

void
gateway_assignment(const struct msg_assignment *a)
{
	struct record r;

	if (!a->has_ports)
		return;
	if (records_get(gt.m, a->id.sandbox, &r) != 0 || r.id.generation != a->id.generation ||
	    strcmp(r.id.worker, a->id.worker) != 0 || strcmp(r.id.resident, a->id.resident) != 0) {
		log_info("gateway: ports for %s g%llu: no such execution here, ignored",
		    a->id.sandbox, (unsigned long long)a->id.generation);
		return;
	}
	ports_save(a->id.sandbox, a);
	log_info("gateway: %s declares %u port(s)", a->id.sandbox, a->nports);
	/* the gateway runs while ports are declared: the first one starts
	 * it, the last one's removal stops it. Under attach_mu, after the
	 * save: an install committing serving meanwhile either is seen
	 * here or reads the saved ports in its own attach. */
	if (!gt.on)
		return;
	pthread_mutex_lock(&gt.attach_mu);
	if (records_get(gt.m, a->id.sandbox, &r) == 0 && r.state == EXEC_SERVING &&
	    r.id.generation == a->id.generation) {
		if (a->nports == 0)
			detach_locked(r.id.sandbox);
		else if (!reidentify(&r))
			(void)attach_locked(&r);
	}
	pthread_mutex_unlock(&gt.attach_mu);
}

/* ---- processes ---- */

static int
pidfd_open_(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/* in the child: become gt.uid, nothing more; then exec. Only system
 * calls between fork and exec (the parent has threads); the changes of
 * ids are the raw system calls, for this thread alone (glibc's wrappers
 * would signal every thread of the process to change theirs too, and a
 * vfork child shares our memory, so it would take our threads for its
 * own). */
static void
child_exec(int netns, int fd3, int fd4, char *const argv[])
{
	int a = fd3 >= 0 ? fcntl(fd3, F_DUPFD, 10) : -1;
	int b = fd4 >= 0 ? fcntl(fd4, F_DUPFD, 10) : -1;
	sigset_t none;

	/* our threads block SIGTERM (main.c waits for it with sigwait); a
	 * blocked mask survives exec, and the child must die of it */
	sigemptyset(&none);
	(void)sigprocmask(SIG_SETMASK, &none, NULL);

	if (netns >= 0 && setns(netns, CLONE_NEWNET) != 0)
		_exit(120);
	if ((a >= 0 && dup2(a, 3) != 3) || (b >= 0 && dup2(b, 4) != 4))
		_exit(121);
	(void)syscall(SYS_close_range, b >= 0 ? 5 : 4, ~0u, 0);
	if (syscall(SYS_setgroups, 0, NULL) != 0 ||
	    syscall(SYS_setresgid, gt.uid, gt.uid, gt.uid) != 0 ||
	    syscall(SYS_setresuid, gt.uid, gt.uid, gt.uid) != 0)
		_exit(122);
	/* ends with us (a restarted sbx-manager starts them again) */
	(void)prctl(PR_SET_PDEATHSIG, SIGTERM);
	if (getppid() == 1)
		_exit(123);
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	execv(gt.exe, argv);
	_exit(127);
}

/* a gateway process (child_exec): its pid or -1. vfork: the child shares
 * our memory until its exec, so no page table of this multi-threaded
 * process is copied per sandbox's gateway (docs/worker.md); it makes
 * system calls only and no handler of ours can run in it (sbx-manager
 * installs none). A function of its own: no variable of the caller can be
 * clobbered by the child. */
static pid_t __attribute__((noinline))
spawn_gw(int netns, int fd3, int fd4, char *const argv[])
{
	pid_t pid = vfork();

	if (pid != 0)
		return pid;
	child_exec(netns, fd3, fd4, argv);
	_exit(127);
}

static int
send_bundle(struct gw *g)
{
	char p[PATH_MAX + 32], *tok = NULL;
	size_t len;
	json_t *o;
	char *s;
	int rc;

	snprintf(p, sizeof(p), "%s/keys.bundle", gt.m->cfg.data_dir);
	if ((rc = read_file(p, SPACE_BUNDLE_TOKEN_MAX, &tok, &len)) != 0)
		return rc;
	o = json_pack("{s:s%}", "bundle", tok, len);
	free(tok);
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL)
		return -ENOMEM;
	rc = send(g->ctl, s, strlen(s), MSG_NOSIGNAL) == (ssize_t)strlen(s) ? 0 : -EIO;
	free(s);
	if (rc == 0)
		g->sent_version = verifier_bundle_version(gt.m->verifier);
	return rc;
}

/* the live gateway of r's execution, if any: it learns r's activation
 * and keeps its connections. 1 kept, 0 none to keep. */
static int
reidentify(const struct record *r)
{
	char msg[48];
	int i, n, kept = 0;

	pthread_mutex_lock(&gt.lock);
	for (i = 0; i < (int)MGR_CAPACITY_MAX; i++) {
		struct gw *g = &gt.gws[i];

		if (!g->used || g->closing || g->dead || strcmp(g->sandbox, r->id.sandbox) != 0 ||
		    g->generation != r->id.generation || g->activation > r->id.activation)
			continue;
		if (g->activation == r->id.activation) {
			kept = 2;       /* it knows already */
			break;
		}
		n = snprintf(msg, sizeof(msg), "{\"activation\":%u}", r->id.activation);
		if (send(g->ctl, msg, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) == n) {
			g->activation = r->id.activation;
			kept = 1;
		}
		break;
	}
	pthread_mutex_unlock(&gt.lock);
	if (kept == 1)
		log_info("gateway: %s g%llu kept for activation %u (its connections stay)",
		    r->id.sandbox, (unsigned long long)r->id.generation, r->id.activation);
	return kept;
}

void
gateway_activation(const struct record *r)
{
	if (!gt.on)
		return;
	pthread_mutex_lock(&gt.attach_mu);
	(void)reidentify(r);
	pthread_mutex_unlock(&gt.attach_mu);
}

int
gateway_attach(const struct record *r)
{
	int rc;

	if (!gt.on)
		return 0;
	pthread_mutex_lock(&gt.attach_mu);
	rc = reidentify(r) ? 0 : attach_locked(r);
	pthread_mutex_unlock(&gt.attach_mu);
	return rc;
}

static int
attach_locked(const struct record *r)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char tmp[sizeof(sa.sun_path)], final[sizeof(sa.sun_path)], nsp[64];
	char gen[24], act[24], ctlfd[] = "3", accfd[] = "4";
	char *argv[] = { gt.exe, "gateway", "--ctl-fd", ctlfd, "--accept-fd", accfd,
	    "--sandbox", (char *)r->id.sandbox, "--generation", gen, "--activation", act,
	    "--worker", (char *)r->id.worker, "--substrate", (char *)r->id.substrate,
	    "--resident", (char *)r->id.resident, "--root-key", gt.root_hex, NULL };
	int sv[2] = { -1, -1 }, ls = -1, ns = -1, i, slot = -1;
	struct stat st;
	pid_t guest, pid;

	detach_locked(r->id.sandbox);   /* an earlier execution's, or a dead one */
	/* none for an execution without a declared port (most of them):
	 * the first declaration starts it (gateway_assignment); until then
	 * the listener answers refresh_route no_record, and the control
	 * plane issues no service capability for an undeclared port */
	if (!port_declared(r->id.sandbox, 0)) {
		log_debug("gateway: %s g%llu: no declared port, none started", r->id.sandbox,
		    (unsigned long long)r->id.generation);
		return 0;
	}
	/* the execution's kept namespace (netns.c); a bridge started
	 * without one (an older sbx-manager's): its guest's */
	if ((ns = netns_open(r)) < 0) {
		if ((guest = egress_guest_pid(r->bridge_pid)) <= 0) {
			log_warnx("gateway: %s: no guest to attach to", r->id.sandbox);
			return -ESRCH;
		}
		snprintf(nsp, sizeof(nsp), "/proc/%d/ns/net", (int)guest);
		ns = open(nsp, O_RDONLY | O_CLOEXEC);
	}
	snprintf(gen, sizeof(gen), "%llu", (unsigned long long)r->id.generation);
	snprintf(act, sizeof(act), "%u", r->id.activation);
	if ((size_t)snprintf(final, sizeof(final), "%s/%s.sock", gt.dir, r->id.sandbox) >= sizeof(final) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", gt.dir, r->id.sandbox) >= sizeof(tmp)) {
		log_warnx("gateway: socket path too long");
		if (ns >= 0)
			close(ns);
		return -ENAMETOOLONG;
	}
	if (ns < 0 ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0 ||
	    (ls = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
		goto fail;
	memcpy(sa.sun_path, tmp, strlen(tmp) + 1);
	(void)unlink(tmp);
	/* only the listener (and the gateway, our child) run as gt.uid */
	if (bind(ls, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chown(tmp, gt.uid, gt.uid) != 0 ||
	    chmod(tmp, 0600) != 0 || listen(ls, 64) != 0 || stat(tmp, &st) != 0 ||
	    rename(tmp, final) != 0)
		goto fail;
	/* sv[0] is close-on-exec: the gateway never holds our end */
	if ((pid = spawn_gw(ns, sv[1], ls, argv)) < 0)
		goto fail;
	close(ns);
	close(sv[1]);
	close(ls);
	pthread_mutex_lock(&gt.lock);
	for (i = 0; i < (int)MGR_CAPACITY_MAX && slot < 0; i++)
		if (!gt.gws[i].used)
			slot = i;
	if (slot < 0) {
		pthread_mutex_unlock(&gt.lock);
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		close(sv[0]);
		return -ENOSPC;
	}
	gt.gws[slot] = (struct gw){ .used = true, .generation = r->id.generation,
	    .activation = r->id.activation, .pid = pid, .pidfd = pidfd_open_(pid), .ctl = sv[0],
	    .sock_ino = st.st_ino };
	snprintf(gt.gws[slot].sandbox, sizeof(gt.gws[slot].sandbox), "%s", r->id.sandbox);
	if (send_bundle(&gt.gws[slot]) != 0)
		log_warnx("gateway: %s: no key bundle to hand over yet", r->id.sandbox);
	pthread_mutex_unlock(&gt.lock);
	(void)eventfd_write(gt.wake, 1);
	log_info("gateway: %s g%llu a%u (pid %d)", r->id.sandbox,
	    (unsigned long long)r->id.generation, r->id.activation, (int)pid);
	return 0;
fail:
	log_warn("gateway: %s: cannot start", r->id.sandbox);
	if (ns >= 0)
		close(ns);
	if (sv[0] >= 0) {
		close(sv[0]);
		close(sv[1]);
	}
	if (ls >= 0)
		close(ls);
	(void)unlink(tmp);
	return -EIO;
}

void
gateway_detach(const struct record *r)
{
	if (!gt.on)
		return;
	pthread_mutex_lock(&gt.attach_mu);
	detach_locked(r->id.sandbox);
	pthread_mutex_unlock(&gt.attach_mu);
}

static void
detach_locked(const char *sandbox)
{
	char path[PATH_MAX + 80];
	struct gw g;
	struct stat st;
	struct pollfd pf;
	int i;

	pthread_mutex_lock(&gt.lock);
	for (i = 0; i < (int)MGR_CAPACITY_MAX; i++)
		if (gt.gws[i].used && !gt.gws[i].closing && strcmp(gt.gws[i].sandbox, sandbox) == 0)
			break;
	if (i == (int)MGR_CAPACITY_MAX) {
		pthread_mutex_unlock(&gt.lock);
		return;
	}
	g = gt.gws[i];
	/* no more checks answered for it; the check thread closes ctl and
	 * frees the slot once it saw the hang-up; the pidfd is ours */
	gt.gws[i].closing = true;
	gt.gws[i].pidfd = -1;
	(void)shutdown(g.ctl, SHUT_RDWR);
	pthread_mutex_unlock(&gt.lock);
	/* the lease ends: the gateway resets (or closes 4409) each of its
	 * connections and exits */
	if (g.pidfd >= 0) {
		(void)syscall(SYS_pidfd_send_signal, g.pidfd, SIGTERM, NULL, 0);
		pf = (struct pollfd){ .fd = g.pidfd, .events = POLLIN };
		if (poll(&pf, 1, 2000) == 0)
			(void)syscall(SYS_pidfd_send_signal, g.pidfd, SIGKILL, NULL, 0);
	}
	(void)waitpid(g.pid, NULL, 0);
	if (g.pidfd >= 0)
		close(g.pidfd);
	snprintf(path, sizeof(path), "%s/%s.sock", gt.dir, g.sandbox);
	if (stat(path, &st) == 0 && st.st_ino == g.sock_ino)
		(void)unlink(path);
	(void)eventfd_write(gt.wake, 1);
	log_info("gateway: %s g%llu stopped", g.sandbox, (unsigned long long)g.generation);
}

/* ---- the check ---- */

/* the answer to check number id: its number, then the JSON alone (a
 * datagram is its own frame) */
static void
answer(struct gw *g, uint64_t id, const char *code, const char *message)
{
	uint8_t *f, hdr[GWCHECK_HDR_LEN];
	size_t n;
	struct gw_reply ok = { .ok = true };
	struct iovec iov[2];
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };

	if ((code ? gwreply_error(code, message, &f, &n) : gwreply_encode(&ok, &f, &n)) != 0)
		return;
	gwcheck_header(hdr, GWCHECK_ANSWER, id);
	iov[0] = (struct iovec){ hdr, sizeof(hdr) };
	iov[1] = (struct iovec){ f + GWHELLO_HDR_LEN, n - GWHELLO_HDR_LEN };
	(void)sendmsg(g->ctl, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
	free(f);
}

static void
check(struct gw *g)
{
	static uint8_t buf[GWCHECK_HDR_LEN + SPACE_GWHELLO_MAX + 1];
	const uint8_t *body;
	size_t blen;
	uint64_t id;
	struct gw_hello h;
	struct record rec;
	struct runtime_record rr;
	struct admit_request req;
	struct admit_result res;
	struct admit_error ae;
	struct capability cap;
	const char *why = NULL;
	char msg[64];
	ssize_t n;
	bool have;

	n = recv(g->ctl, buf, sizeof(buf), MSG_DONTWAIT);
	if (n <= 0)
		return;
	/* without its number nothing can be answered: the gateway gives
	 * up on its check (only a gateway not ours sends such a thing) */
	if (gwcheck_parse(GWCHECK_ASK, buf, (size_t)n, &id, &body, &blen) != 0) {
		log_warnx("gateway of %s: a check without its header (%zd bytes): not answered",
		    g->sandbox, n);
		return;
	}
	if (gwhello_decode(body, blen, &h, &why) != 0) {
		answer(g, id, "bad_request", why);
		return;
	}
	/* a newer key bundle first: the gateway's own check needs it */
	if (verifier_bundle_version(gt.m->verifier) > g->sent_version)
		(void)send_bundle(g);
	have = records_get(gt.m, g->sandbox, &rec) == 0;
	if (have)
		rr = (struct runtime_record){ .id = rec.id, .state = rec.state, .epoch = rec.epoch };
	req = (struct admit_request){ .kind = RECV_NETGTW, .target_sandbox = g->sandbox,
	    .receiver_sandbox = g->sandbox, .port = h.port, .proto = h.proto, .now = now_unix() };
	res = admit_token(gt.m->verifier, h.capability, strlen(h.capability), have ? &rr : NULL,
	    &req, &cap);
	metrics_admission(gt.m, res.outcome, res.reason);
	if (res.outcome != ADMIT_ALLOW) {
		refusals_count(g->sandbox, have, res.outcome);
		audit_refusal("gateway", "connect", g->sandbox, &cap, have ? &rec : NULL,
		    admit_outcome_str(res.outcome), admit_reason_str(res.reason));
		ae = admit_error_code(res);
		answer(g, id, ae.code, ae.reason ? ae.reason : "");
	} else if (!port_declared(g->sandbox, h.port)) {
		/* the seed's second check: a valid capability for a port the
		 * owner did not expose is refused here, whatever issued it */
		snprintf(msg, sizeof(msg), "port %u is not declared", h.port);
		audit_refusal("gateway", "connect", g->sandbox, &cap, &rec, "deny", "port_not_declared");
		answer(g, id, "port_not_declared", msg);
	} else {
		answer(g, id, NULL, NULL);
	}
	explicit_bzero(&h, sizeof(h));
}

struct restart {
	struct restart *next;
	struct timespec due;            /* CLOCK_MONOTONIC */
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	pid_t pid;
};

/* the gateways to start again, oldest first, for the one restart thread.
 * One long-lived thread, not one per death: a gateway asks for SIGTERM
 * when the thread that started it ends (PR_SET_PDEATHSIG follows the
 * parent thread, not the process), so a gateway started by a thread that
 * then returns would be killed at once. */
static struct {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct restart *head, **tail;
} rq = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .tail = &rq.head };

/* a gateway died on its own (killed, crashed): its connections are gone,
 * and new opens would find nobody behind D/gw/SANDBOX.sock. Started
 * again a second after its death (a gateway that keeps dying costs one
 * start a second), if its execution still serves; the dead one is reaped
 * by the detach attach_locked starts with. */
static void *
restart_thread(void *arg)
{
	struct restart *rs;
	struct record r;

	(void)arg;
	for (;;) {
		pthread_mutex_lock(&rq.mu);
		while (rq.head == NULL)
			pthread_cond_wait(&rq.cv, &rq.mu);
		rs = rq.head;
		if ((rq.head = rs->next) == NULL)
			rq.tail = &rq.head;
		pthread_mutex_unlock(&rq.mu);
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &rs->due, NULL) == EINTR)
			;
		/* under attach_mu: a retirement's detach either came first
		 * (the record says so) or waits for us and stops the new one */
		pthread_mutex_lock(&gt.attach_mu);
		if (records_get(gt.m, rs->sandbox, &r) == 0 && r.state == EXEC_SERVING &&
		    r.id.generation == rs->generation && !reidentify(&r)) {
			log_warnx("gateway: %s g%llu (pid %d) died on its own: starting another",
			    rs->sandbox, (unsigned long long)rs->generation, (int)rs->pid);
			(void)attach_locked(&r);
		}
		pthread_mutex_unlock(&gt.attach_mu);
		free(rs);
	}
	return NULL;
}

/* gt.lock held */
static void
restart_dead(const struct gw *g)
{
	struct restart *rs = calloc(1, sizeof(*rs));

	if (rs == NULL) {
		log_warnx("gateway: %s died; cannot start another", g->sandbox);
		return;
	}
	snprintf(rs->sandbox, sizeof(rs->sandbox), "%s", g->sandbox);
	rs->generation = g->generation;
	rs->pid = g->pid;
	clock_gettime(CLOCK_MONOTONIC, &rs->due);
	rs->due.tv_sec += 1;
	pthread_mutex_lock(&rq.mu);
	*rq.tail = rs;
	rq.tail = &rs->next;
	pthread_cond_signal(&rq.cv);
	pthread_mutex_unlock(&rq.mu);
}

static void *
check_thread(void *arg)
{
	/* one thread: static, not 12 KiB of its stack */
	static struct pollfd pf[MGR_CAPACITY_MAX + 1];
	static int idx[MGR_CAPACITY_MAX + 1];
	eventfd_t v;
	int n, i;

	(void)arg;
	for (;;) {
		n = 0;
		pf[n] = (struct pollfd){ .fd = gt.wake, .events = POLLIN };
		idx[n++] = -1;
		pthread_mutex_lock(&gt.lock);
		for (i = 0; i < (int)MGR_CAPACITY_MAX; i++) {
			/* a dead one hangs up for ever: polled again only to
			 * be freed once its detach marked it closing */
			if (!gt.gws[i].used || (gt.gws[i].dead && !gt.gws[i].closing))
				continue;
			pf[n] = (struct pollfd){ .fd = gt.gws[i].ctl, .events = POLLIN };
			idx[n++] = i;
		}
		pthread_mutex_unlock(&gt.lock);
		if (poll(pf, (nfds_t)n, -1) < 0)
			continue;
		if (pf[0].revents)
			(void)eventfd_read(gt.wake, &v);
		pthread_mutex_lock(&gt.lock);
		for (i = 1; i < n; i++) {
			struct gw *g = &gt.gws[idx[i]];

			if (!pf[i].revents || !g->used)
				continue;
			if (g->closing || (pf[i].revents & (POLLHUP | POLLERR))) {
				/* one being detached is freed; one that died on
				 * its own is started again (restart_dead) */
				if (g->closing) {
					close(g->ctl);
					g->used = false;
				} else if (!g->dead) {
					g->dead = true;
					restart_dead(g);
				}
				continue;
			}
			check(g);
		}
		pthread_mutex_unlock(&gt.lock);
	}
	return NULL;
}

/* ---- start ---- */

int
gateway_init(struct mgr *m)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char self[PATH_MAX], fd3[] = "3";
	char *argv[] = { gt.exe, "listen", "--fd", fd3, "--dir", gt.dir, NULL };
	pthread_t t;
	ssize_t l;
	int s, one = 1;
	pid_t pid;

	gt.m = m;
	if (!gt.on)
		return 0;
	l = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (l <= 0)
		return -errno;
	self[l] = '\0';
	snprintf(gt.exe, sizeof(gt.exe), "%s/netgtw", dirname(self));
	if (access(gt.exe, X_OK) != 0) {
		log_warn("gateway: %s", gt.exe);
		return -ENOENT;
	}
	hex_encode(m->cfg.root_pk, 32, gt.root_hex, sizeof(gt.root_hex));
	snprintf(gt.dir, sizeof(gt.dir), "%s/gw", m->cfg.data_dir);
	snprintf(gt.ports_dir, sizeof(gt.ports_dir), "%s/ports", m->cfg.data_dir);
	/* the listener (gt.uid) must reach the sockets, not list them */
	if (mkdir_p(gt.dir, 0711) != 0 || chmod(gt.dir, 0711) != 0 ||
	    mkdir_p(gt.ports_dir, 0700) != 0)
		return -EIO;
	if (inet_pton(AF_INET, strcmp(gt.host, "localhost") == 0 ? "127.0.0.1" : gt.host,
	    &sa.sin_addr) != 1) {
		log_warnx("gateway: --gateway-listen takes an IPv4 address");
		return -EINVAL;
	}
	sa.sin_port = htons((uint16_t)gt.port);
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 256) != 0) {
		log_warn("gateway: listen %s:%u", gt.host, gt.port);
		return -EIO;
	}
	if ((gt.wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0)
		return -errno;
	if ((pid = fork()) < 0)
		return -errno;
	if (pid == 0)
		child_exec(-1, s, -1, argv);
	close(s);
	if (pthread_create(&t, NULL, check_thread, NULL) != 0)
		return -EAGAIN;
	pthread_detach(t);
	if (pthread_create(&t, NULL, restart_thread, NULL) != 0)
		return -EAGAIN;
	pthread_detach(t);
	log_info("gateway: listening on %s (pid %d, uid %u)", gt.endpoint, (int)pid, (unsigned)gt.uid);
	return 0;
}
