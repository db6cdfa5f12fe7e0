/* spaced-host: the bridge of one execution (DESIGN sections 6 and 10).
 *
 * Started by sbx-manager as root, one per execution. This file is the
 * monitor, the part that stays root (host.h): it launches the guest on its
 * substrate, binds RUNDIR/bridge.sock, forks the serving process (serve.c)
 * that challenges the guest and serves sbx-manager's connections, and says
 * "ready PID" on stdout (PID: the serving process, the one sbx-manager must
 * find behind the socket) once that process reported READY. It answers the
 * serving process's OOM queries, counts and audits its refusals, and stops
 * the substrate. It never relaunches its guest: when the guest is gone,
 * operations fail with 503 and the bridge exits non-zero so sbx-manager
 * sees it. */
#include <arpa/inet.h>
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
#include <linux/prctl.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "host.h"
#include "limits.h"
#include "log.h"
#include "tplimage.h"
#include "poolclaim.h"
#include "proto.h"
#include "util.h"

/* the serving process drains for 5 s after its guest is gone; past that
 * (and a margin) it is killed */
#define SERVE_EXIT_TIMEOUT_MS 7000

static noreturn void
usage(void)
{
	fprintf(stderr,
	    "usage: spaced-host --sandbox S --generation G --activation A --worker W\n"
	    "    --resident R --substrate jail --template host --run-dir DIR\n"
	    "    --layer-dir DIR --uid-base N [--memory-mb 512] [--pids 256]\n"
	    "    [--cpu-percent 100] [--disk-mb 4096] [--guest PATH] [--nameserver IPV4]\n"
	    "    [--netns PATH] [--orphan-wait-s 60] [--pool | --claim-from POOLID] [-v]\n");
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
	    O_UID, O_MEM, O_PIDS, O_CPU, O_DISK, O_GUEST, O_NS, O_TPLIMG, O_NETNS, O_ORPHAN, O_POOL, O_CLAIM };
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
		{ "nameserver", required_argument, NULL, O_NS },
		{ "template-image", required_argument, NULL, O_TPLIMG },
		{ "netns", required_argument, NULL, O_NETNS },
		{ "orphan-wait-s", required_argument, NULL, O_ORPHAN },
		{ "pool", no_argument, NULL, O_POOL },
		{ "claim-from", required_argument, NULL, O_CLAIM },
		{ NULL, 0, NULL, 0 }
	};
	struct substrate_config *c = &h->cfg;
	struct route_identity *id = &h->rec.id;
	int ch;

	c->memory_mb = 512;
	c->pids = 256;
	c->cpu_percent = 100;
	c->disk_mb = 4096;
	c->orphan_wait_s = SPACE_JAIL_ORPHAN_WAIT;
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
		case O_NS: {
			/* the jail's resolv.conf: one IPv4 address, nothing else */
			struct in_addr a;

			if (inet_pton(AF_INET, optarg, &a) != 1)
				usage();
			inet_ntop(AF_INET, &a, c->nameserver, sizeof(c->nameserver));
			break;
		}
		case O_TPLIMG: c->template_image = optarg; break;
		case O_NETNS: c->netns = optarg; break;
		case O_ORPHAN: c->orphan_wait_s = (unsigned)num_arg("orphan-wait-s", optarg, 1, 86400); break;
		case O_POOL: c->pool = true; break;
		case O_CLAIM:
			if (!id_valid(optarg))
				usage();
			c->claim_from = optarg;
			break;
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
	/* only the host template is prepared ahead (docs/worker.md) */
	if ((c->pool || c->claim_from != NULL) &&
	    (strcmp(c->template_name, "host") != 0 || (c->pool && c->claim_from != NULL)))
		usage();
	/* host, or a template named by its image's digest, with that image */
	if (strcmp(c->template_name, "host") == 0 ? c->template_image != NULL :
	    !tpl_digest_valid(c->template_name) || c->template_image == NULL)
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

/* the monitor's start and the end of the substrate's launch (the log) */
static uint64_t t_main, t_launched;

/* one message of the serving process; false when it broke the protocol
 * (it is then stopped: a process that says nonsense is not trusted) */
static bool
on_serve_msg(struct host *h, int mon, pid_t serve, bool *ready)
{
	struct hm_msg m;
	int r;

	if ((r = hm_recv(mon, &m)) < 0) {
		if (r != -ECONNRESET)
			log_warnx("serving process: bad message (%s)", strerror(-r));
		return false;
	}
	switch (m.type) {
	case HM_READY: {
		char line[32];
		int n;
		if (*ready)
			return false;
		/* the execution's CPU quota before anything is admitted */
		if (h->ops->serving != NULL && h->ops->serving(h->sub) < 0)
			return false;
		*ready = true;
		n = snprintf(line, sizeof(line), "ready %d\n", (int)serve);
		if (write(1, line, (size_t)n) != n) {
			log_warn("cannot say ready");
			return false;
		}
		/* nothing else goes to sbx-manager's ready pipe */
		int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (nul >= 0) {
			dup2(nul, 1);
			close(nul);
		}
		log_info("serving %s generation %" PRIu64 " activation %" PRIu32
		    " on %s/bridge.sock (serving pid %d; ready %.1f ms after the start, "
		    "%.1f after the guest's launch)", h->rec.id.sandbox,
		    h->rec.id.generation, h->rec.id.activation, h->cfg.run_dir, (int)serve,
		    (double)(now_mono_ns() - t_main) / 1e6, (double)(now_mono_ns() - t_launched) / 1e6);
		return true;
	}
	case HM_OOM_QUERY: {
		struct hm_msg a = { .type = HM_OOM_COUNT };
		a.u.oom.known = h->ops->oom_kills(h->sub, &a.u.oom.n) == 0;
		return hm_send(mon, &a) == 0;
	}
	case HM_REFUSED:
		refusal_record(h, &m.u.ref);
		return true;
	default:
		return false;   /* OOM_COUNT goes the other way */
	}
}

/* the claim a kept prepared bridge becomes an execution's bridge by: its
 * strings stay here for the rest of the process (h->cfg points into it) */
static struct pool_claim claim;

#define CLAIM_READ_MS 2000      /* the rest of a claim once its first bytes came */

/* one claim from stdin: 0 and claim set, 1 at end of file (sbx-manager
 * gone or done with this jail), -1 for what is not a whole claim */
static int
claim_read(void)
{
	uint8_t buf[POOLCLAIM_MAX];
	uint64_t until = 0;
	size_t got = 0, want = POOLCLAIM_HDR_LEN;
	const char *why;

	for (;;) {
		ssize_t n = read(0, buf + got, want - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN) {
			struct pollfd p = { .fd = 0, .events = POLLIN };
			uint64_t now = now_mono_ns();
			if (until == 0 || now >= until ||
			    poll(&p, 1, (int)((until - now) / 1000000u) + 1) < 0) {
				log_warnx("claim: incomplete");
				return -1;
			}
			continue;
		}
		if (n <= 0) {
			if (n == 0 && got == 0)
				return 1;
			log_warnx("claim: incomplete (%zu bytes)", got);
			return -1;
		}
		if (until == 0)
			until = now_mono_ns() + (uint64_t)CLAIM_READ_MS * 1000000u;
		got += (size_t)n;
		if (got == POOLCLAIM_HDR_LEN && want == POOLCLAIM_HDR_LEN) {
			uint32_t len = (uint32_t)be_load(buf + 4, 4);
			if (len > POOLCLAIM_MAX - POOLCLAIM_HDR_LEN) {
				log_warnx("claim: too long (%" PRIu32 " bytes)", len);
				return -1;
			}
			want += len;
		}
		if (got == want)
			break;
	}
	if (poolclaim_decode(buf, got, &claim, &why) != 0) {
		log_warnx("claim refused: %s", why);
		return -1;
	}
	return 0;
}

/* The command line a claimed kept bridge shows (ps, /proc/PID/cmdline):
 * the one a --claim-from start for the same execution would have had, so
 * a bridge is found by its sandbox and generation whichever way it came.
 * The kernel is pointed at a new argument area (PR_SET_MM_MAP); where it
 * refuses, the pool's command line stays (logged). */
#define TITLE_MAX (POOLCLAIM_MAX + 512)

static void
claim_title(const struct host *h, const char *argv0)
{
	/* anonymous memory: the kernel reads a command line only from
	 * there (not from a file's mapping, where static data may lie) */
	static char *area;
	const struct substrate_config *c = &h->cfg;
	char gen[24], act[24], uidb[24], mem[24], pids[24], cpu[24], dmb[24];
	const char *args[40];
	size_t n = 0, off = 0;

	snprintf(gen, sizeof(gen), "%" PRIu64, c->generation);
	snprintf(act, sizeof(act), "%" PRIu32, c->activation);
	snprintf(uidb, sizeof(uidb), "%u", (unsigned)c->uid_base);
	snprintf(mem, sizeof(mem), "%u", c->memory_mb);
	snprintf(pids, sizeof(pids), "%u", c->pids);
	snprintf(cpu, sizeof(cpu), "%u", c->cpu_percent);
	snprintf(dmb, sizeof(dmb), "%u", c->disk_mb);
	args[n++] = argv0;
	args[n++] = "--claim-from"; args[n++] = c->claim_from;
	args[n++] = "--sandbox"; args[n++] = c->sandbox;
	args[n++] = "--generation"; args[n++] = gen;
	args[n++] = "--activation"; args[n++] = act;
	args[n++] = "--worker"; args[n++] = h->rec.id.worker;
	args[n++] = "--resident"; args[n++] = h->rec.id.resident;
	args[n++] = "--substrate"; args[n++] = h->rec.id.substrate;
	args[n++] = "--template"; args[n++] = c->template_name;
	args[n++] = "--run-dir"; args[n++] = c->run_dir;
	args[n++] = "--layer-dir"; args[n++] = c->layer_dir;
	args[n++] = "--uid-base"; args[n++] = uidb;
	args[n++] = "--memory-mb"; args[n++] = mem;
	args[n++] = "--pids"; args[n++] = pids;
	args[n++] = "--cpu-percent"; args[n++] = cpu;
	args[n++] = "--netns"; args[n++] = c->netns;
	args[n++] = "--disk-mb"; args[n++] = dmb;
	if (c->nameserver[0]) {
		args[n++] = "--nameserver";
		args[n++] = c->nameserver;
	}
	if (area == NULL && (area = mmap(NULL, TITLE_MAX, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED) {
		area = NULL;
		goto fail;
	}
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(args[i]) + 1;
		if (off + l > TITLE_MAX)
			goto fail;
		memcpy(area + off, args[i], l);
		off += l;
	}
	/* the whole map as it is, but for the argument area: PR_SET_MM_MAP
	 * needs no capability beyond being this process (the per-field
	 * calls need CAP_SYS_RESOURCE, which a container may not give) */
	struct prctl_mm_map mm = { .exe_fd = (uint32_t)-1 };
	uint64_t f[52] = { 0 };
	char *stat = NULL, *p, *save = NULL, *tok;
	size_t len;
	int i;

	if (read_file("/proc/self/stat", 4096, &stat, &len) < 0)
		goto fail;
	if ((p = strrchr(stat, ')')) == NULL) {
		free(stat);
		goto fail;
	}
	for (i = 3, tok = strtok_r(p + 1, " ", &save); tok != NULL && i < 52;
	    i++, tok = strtok_r(NULL, " ", &save))
		f[i] = strtoull(tok, NULL, 10);
	free(stat);
	if (i < 52)
		goto fail;
	mm.start_code = f[26];
	mm.end_code = f[27];
	mm.start_stack = f[28];
	mm.start_data = f[45];
	mm.end_data = f[46];
	mm.start_brk = f[47];
	mm.brk = (uint64_t)(uintptr_t)sbrk(0);
	mm.arg_start = (uint64_t)(uintptr_t)area;
	mm.arg_end = (uint64_t)(uintptr_t)(area + off);
	mm.env_start = f[50];
	mm.env_end = f[51];
	if (prctl(PR_SET_MM, PR_SET_MM_MAP, (unsigned long)&mm, sizeof(mm), 0) == 0)
		return;
fail:
	log_warn("claim: the command line stays the pool's");
}

/* A prepared jail's bridge, kept (docs/jail.md, "Prepared jails"): it
 * holds no identity and no secret, and waits for sbx-manager's claim on
 * stdin. 0: claimed, h is the claim's bridge now (a --claim-from start
 * with the claim's arguments); 1: no claim came (end of file, SIGTERM):
 * the jail is left for sbx-manager to end or destroy; 2: the guest or
 * the serving process made ahead (*serve, -1 once reaped here) died, or
 * the claim was not one for this jail. */
static int
pool_hold(struct host *h, int sigfd, pid_t *serve, const char *argv0)
{
	struct substrate_config *c = &h->cfg;
	char pool_id[SPACE_ID_MAX + 1];
	int fl, r;

	snprintf(pool_id, sizeof(pool_id), "%s", h->rec.id.sandbox);
	if ((fl = fcntl(0, F_GETFL)) < 0 || fcntl(0, F_SETFL, fl | O_NONBLOCK) < 0)
		return 2;
	for (;;) {
		struct pollfd p[3];

		p[0] = (struct pollfd){ .fd = 0, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		p[2] = (struct pollfd){ .fd = h->ops->guest_fd(h->sub), .events = POLLIN };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			return 2;
		}
		if (p[1].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				pid_t gp = h->ops->guest_pid(h->sub), w;
				int st;
				if (si.ssi_signo != SIGCHLD) {
					log_info("prepared jail %s: no claim (signal %u)", pool_id,
					    si.ssi_signo);
					return 1;
				}
				while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
					if (w == *serve) {
						*serve = -1;
						log_warnx("prepared jail %s: its serving process "
						    "is gone", pool_id);
						return 2;
					}
					if (gp > 0 && w == gp) {
						h->ops->guest_reaped(h->sub, st);
						log_warnx("prepared jail %s: its guest is gone",
						    pool_id);
						return 2;
					}
				}
			}
		}
		if (p[2].fd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			log_warnx("prepared jail %s: its guest is gone", pool_id);
			return 2;
		}
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR))
			break;
	}
	if ((r = claim_read()) != 0) {
		if (r == 1)
			log_info("prepared jail %s: no claim (sbx-manager closed the pipe)", pool_id);
		return r == 1 ? 1 : 2;
	}
	/* only for this jail: its pool id, its uid range (the guest's id
	 * maps), its substrate */
	if (strcmp(claim.claim_from, pool_id) != 0 || claim.uid_base != c->uid_base ||
	    strcmp(claim.id.substrate, h->rec.id.substrate) != 0) {
		log_warnx("prepared jail %s: a claim for another jail refused (%s)", pool_id,
		    claim.claim_from);
		return 2;
	}
	h->rec.id = claim.id;
	c->sandbox = h->rec.id.sandbox;
	c->generation = h->rec.id.generation;
	c->activation = h->rec.id.activation;
	c->run_dir = claim.run_dir;
	c->layer_dir = claim.layer_dir;
	c->netns = claim.netns;
	snprintf(c->nameserver, sizeof(c->nameserver), "%s", claim.nameserver);
	c->memory_mb = claim.memory_mb;
	c->pids = claim.pids;
	c->cpu_percent = claim.cpu_percent;
	c->disk_mb = claim.disk_mb;
	c->pool = false;
	c->claim_from = claim.claim_from;
	/* made ahead at a lower priority; the execution's bridge runs at
	 * the default one (the claim sets the jail's processes back too) */
	(void)setpriority(PRIO_PROCESS, 0, 0);
	(void)syscall(SYS_ioprio_set, 1, 0, 0);
	/* and its serving process (our unreaped child: the pid is it) */
	(void)setpriority(PRIO_PROCESS, (id_t)*serve, 0);
	(void)syscall(SYS_ioprio_set, 1, *serve, 0);
	int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (nul >= 0) {
		dup2(nul, 0);
		close(nul);
	}
	claim_title(h, argv0);
	log_info("prepared jail %s claimed by %s g%" PRIu64 " a%" PRIu32, pool_id,
	    h->rec.id.sandbox, h->rec.id.generation, h->rec.id.activation);
	return 0;
}

/* SIGTERM, then SIGKILL after the drain time; reaps it */
static void
serve_stop(pid_t pid, int timeout_ms)
{
	uint64_t until = now_mono_ns() + (uint64_t)timeout_ms * 1000000u;
	struct timespec ts = { 0, 20 * 1000 * 1000 };
	int st;

	kill(pid, SIGTERM);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (now_mono_ns() >= until) {
			kill(pid, SIGKILL);
			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return;
		}
		nanosleep(&ts, NULL);
	}
}

/* The serving process, just forked: none of the monitor's handles but
 * the ones it serves with. 3, 4, 5: the guest's channel, the socket, the
 * monitor's channel; 6: the OOM count, read-only, when there is one;
 * nothing else of the monitor's (the layer's lock, other cgroup files). A
 * prepared jail's serving process (control < 0) has only 5 and 6: the
 * channel and the socket come with its claim (serve_kept). */
static noreturn void
serving_child(struct host *h, int control, int lfd, int mon[2], int oomfd, int sigfd,
    uint8_t secret[GUEST_SECRET_LEN])
{
	sigset_t none;
	int nul, monfd;

	close(mon[0]);
	close(sigfd);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGTERM, SIG_DFL);
	/* stdout is sbx-manager's ready pipe (stdin a kept bridge's claim
	 * pipe): only the monitor reads and speaks there */
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 || dup2(nul, 0) < 0 ||
	    dup2(nul, 1) < 0)
		_exit(1);
	if ((control >= 0 && (control = fcntl(control, F_DUPFD_CLOEXEC, 64)) < 0) ||
	    (lfd >= 0 && (lfd = fcntl(lfd, F_DUPFD_CLOEXEC, 64)) < 0) ||
	    (monfd = fcntl(mon[1], F_DUPFD_CLOEXEC, 64)) < 0 ||
	    (oomfd >= 0 && (oomfd = fcntl(oomfd, F_DUPFD_CLOEXEC, 64)) < 0) ||
	    (control >= 0 && dup3(control, 3, O_CLOEXEC) < 0) ||
	    (lfd >= 0 && dup3(lfd, 4, O_CLOEXEC) < 0) || dup3(monfd, 5, O_CLOEXEC) < 0 ||
	    (oomfd >= 0 && dup3(oomfd, 6, O_CLOEXEC) < 0) ||
	    close_range(oomfd >= 0 ? 7 : 6, ~0u, 0) < 0 ||
	    (control < 0 && close_range(3, 4, 0) < 0))
		_exit(1);
	h->mon = 5;
	h->oomfd = oomfd >= 0 ? 6 : -1;
	if (control < 0)
		serve_kept(h);
	h->control = 3;
	serve_main(h, 4, secret);
}

int
main(int argc, char **argv)
{
	static struct host h;
	struct opts o = { 0 };
	uint8_t secret[GUEST_SECRET_LEN];
	char sock[PATH_MAX];
	struct pollfd p[3];
	sigset_t mask;
	int lfd = -1, sigfd, r, rc = 1, mon[2] = { -1, -1 }, control = -1, oomfd = -1;
	pid_t serve = -1, pool_gpid = 0;
	bool stopping = false, ready = false, serve_gone = false;

	t_main = now_mono_ns();
	parse_args(&h, &o, argc, argv);
	log_init("spaced-host", o.verbose);
	if (geteuid() != 0)
		fatalx("must run as root (it builds namespaces and cgroups)");
	if (sodium_init() < 0)
		fatalx("sodium_init");
	if ((h.ops = substrate_find(h.rec.id.substrate)) == NULL)
		fatalx("substrate %s cannot run on this machine", h.rec.id.substrate);
	h.rec.state = EXEC_SERVING;
	h.control = h.mon = h.oomfd = -1;
	pthread_mutex_init(&h.oom_mu, NULL);
	pthread_mutex_init(&h.control_mu, NULL);
	pthread_mutex_init(&h.chan_mu, NULL);
	pthread_mutex_init(&h.mon_mu, NULL);
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
	r = h.ops->launch(&h.cfg, secret, &h.sub, &control);
	t_launched = now_mono_ns();
	if (r < 0) {
		sodium_memzero(secret, sizeof(secret));
		fatalx("cannot launch the guest (%s): %s", h.ops->name, strerror(-r));
	}
	if (h.cfg.pool) {
		/* a prepared jail: its guest waits on jail.sock for the bind.
		 * We wait for sbx-manager's claim on stdin and bind it
		 * ourselves; without one we leave as a killed bridge would,
		 * the layer mounted, the cgroup and jail.sock in place */
		char line[32];
		int n = snprintf(line, sizeof(line), "pooled %d\n", (int)h.ops->guest_pid(h.sub));

		sodium_memzero(secret, sizeof(secret));
		close(control);
		control = -1;
		log_info("prepared jail %s in %.1f ms (guest pid %d)", h.rec.id.sandbox,
		    (double)(t_launched - t_main) / 1e6, (int)h.ops->guest_pid(h.sub));
		if (write(1, line, (size_t)n) != n) {
			h.ops->stop(h.sub);
			h.ops->free(h.sub);
			return 1;
		}
		/* its serving process too, made now: forked, its privileges
		 * dropped, confined, waiting for the claim (serve_kept). The
		 * OOM count it reads is the jail's cgroup file, which the
		 * claim renames, not replaces */
		pool_gpid = h.ops->guest_pid(h.sub);
		oomfd = h.ops->oom_fd != NULL ? h.ops->oom_fd(h.sub) : -1;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, mon) < 0 ||
		    (serve = fork()) < 0) {
			log_warn("prepared jail %s: cannot start its serving process",
			    h.rec.id.sandbox);
			h.ops->free(h.sub);
			return 1;
		}
		if (serve == 0)
			serving_child(&h, -1, -1, mon, oomfd, sigfd, NULL);
		close(mon[1]);
		mon[1] = -1;
		rc = pool_hold(&h, sigfd, &serve, argv[0]);
		/* what was the pool's is released, not ended: the layer's
		 * lock (the claim takes it again), the guest's pidfd */
		h.ops->free(h.sub);
		h.sub = NULL;
		if (rc != 0) {
			if (serve > 0)
				serve_stop(serve, 0);
			return rc == 1 ? 0 : 1;
		}
		t_main = now_mono_ns();
		randombytes_buf(secret, sizeof(secret));
		r = h.ops->launch(&h.cfg, secret, &h.sub, &control);
		t_launched = now_mono_ns();
		if (r < 0) {
			sodium_memzero(secret, sizeof(secret));
			serve_stop(serve, 0);
			fatalx("cannot bind the prepared jail (%s): %s", h.ops->name, strerror(-r));
		}
		if (h.ops->guest_pid(h.sub) != pool_gpid) {
			/* the claim fell back to a new jail: its serving
			 * process is made for it, as at any start */
			serve_stop(serve, 0);
			serve = -1;
			close(mon[0]);
			mon[0] = -1;
			if (oomfd >= 0)
				close(oomfd);
			oomfd = -1;
		}
	}
	snprintf(sock, sizeof(sock), "%s/bridge.sock", h.cfg.run_dir);
	/* bound, not listening: binding needs root in the 0700 directory;
	 * listen() is left to the serving process, so the listener's
	 * credentials are its own */
	if ((lfd = unix_bind_private(sock, SOCK_STREAM)) < 0) {
		sodium_memzero(secret, sizeof(secret));
		log_warnx("cannot bind %s: %s", sock, strerror(-lfd));
		goto stop;
	}
	if (serve > 0) {
		/* the prepared jail's serving process: whom it serves, the
		 * secret, the guest's channel and the socket */
		struct hm_msg cm = { .type = HM_CLAIM };

		cm.u.claim.id = h.rec.id;
		memcpy(cm.u.claim.secret, secret, sizeof(secret));
		r = hm_send_claim(mon[0], &cm, control, lfd);
		sodium_memzero(&cm, sizeof(cm));
		if (r < 0) {
			sodium_memzero(secret, sizeof(secret));
			log_warnx("cannot hand the claim to the serving process: %s", strerror(-r));
			serve_stop(serve, 0);
			goto stop;
		}
	} else {
		/* what an exec asks before it starts (an OOM kill is told
		 * from the count going up), read by the serving process
		 * itself: a read-only descriptor of that one cgroup file,
		 * not a round trip to us */
		oomfd = h.ops->oom_fd != NULL ? h.ops->oom_fd(h.sub) : -1;
		if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, mon) < 0 ||
		    (serve = fork()) < 0) {
			sodium_memzero(secret, sizeof(secret));
			log_warn("cannot start the serving process");
			goto stop;
		}
		if (serve == 0)
			serving_child(&h, control, lfd, mon, oomfd, sigfd, secret);
		close(mon[1]);
		mon[1] = -1;
	}
	/* the secret, the guest's control channel and the socket are the
	 * serving process's now */
	sodium_memzero(secret, sizeof(secret));
	close(control);
	control = -1;
	close(lfd);
	lfd = -1;
	if (oomfd >= 0)
		close(oomfd);
	oomfd = -1;

	while (!stopping) {
		p[0] = (struct pollfd){ .fd = sigfd, .events = POLLIN };
		p[1] = (struct pollfd){ .fd = mon[0], .events = POLLIN };
		/* a kept jail's guest is not our child: its pidfd */
		p[2] = (struct pollfd){ .fd = h.ops->guest_fd(h.sub), .events = POLLIN };
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			log_warn("poll");
			break;
		}
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD) {
					pid_t gp = h.ops->guest_pid(h.sub), w;
					int st;
					/* every child: a kept prepared bridge that fell
					 * back to a new jail has the prepared guest its
					 * claim ended as one too */
					while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
						if (gp > 0 && w == gp) {
							h.ops->guest_reaped(h.sub, st);
							log_warnx("the guest of %s generation %" PRIu64
							    " is gone", h.rec.id.sandbox,
							    h.rec.id.generation);
							stopping = true;
						} else if (w == serve) {
							serve_gone = true;
							stopping = true;
						}
					}
				} else {
					log_info("stopping on signal %u", si.ssi_signo);
					stopping = true;
					rc = 0;
				}
			}
		}
		if (!stopping && p[2].fd >= 0 && (p[2].revents & (POLLIN | POLLHUP | POLLERR))) {
			h.ops->guest_reaped(h.sub, 0);
			log_warnx("the kept guest of %s generation %" PRIu64 " is gone",
			    h.rec.id.sandbox, h.rec.id.generation);
			stopping = true;
		}
		if (!stopping && (p[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    !on_serve_msg(&h, mon[0], serve, &ready))
			stopping = true;
	}
	if (!ready)
		rc = 1;
	/* stop the guest first: the serving process sees its control channel
	 * close, answers what is in flight and late connections with 503,
	 * then exits; OOM queries meanwhile find the substrate stopped */
	h.ops->stop(h.sub);
	if (!serve_gone) {
		uint64_t until = now_mono_ns() + (uint64_t)SERVE_EXIT_TIMEOUT_MS * 1000000u;
		int st;
		/* keep answering it while it drains (refusals, OOM queries) */
		while (waitpid(serve, &st, WNOHANG) == 0 && now_mono_ns() < until) {
			p[0] = (struct pollfd){ .fd = mon[0], .events = POLLIN };
			if (poll(p, 1, 50) > 0 && !on_serve_msg(&h, mon[0], serve, &ready))
				break;
		}
		serve_stop(serve, 0);
	}
	unlink(sock);
	goto out;
stop:
	h.ops->stop(h.sub);
	if (control >= 0)
		close(control);
	if (lfd >= 0) {
		unlink(sock);
		close(lfd);
	}
out:
	if (mon[0] >= 0)
		close(mon[0]);
	h.ops->free(h.sub);
	close(sigfd);
	return rc;
}
