/* sbx-manager: the worker agent (runs as root). Holds the runtime records,
 * launches one spaced-host per execution, and is the authoritative
 * admission point between node-api and the bridges. See docs/worker.md. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <pthread.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress.h"
#include "gateway.h"
#include "log.h"
#include "paseto.h"
#include "sbx-manager.h"
#include "netns.h"
#include "util.h"
#include "verifier.h"

static void
usage(void)
{
	fprintf(stderr, "usage: sbx-manager --data-dir D --control URL --worker-id ID\n"
	    "       --credential-file F --root-key K4PUBLIC --endpoint URL --capacity N\n"
	    "       [--api-group GROUP] [--api-conns 1024] [--spaced-host PATH] [--disk-mb 4096] [--layer-pool 16]\n"
	    "       [--netns-pool 8]\n"
	    "       [--jail-pool 0] [--kept-layers 8] [--checkpoint-mb 512] [--checkpoint-interval 300]\n"
	    "       [--snapshot-dir DIR] [--snapshot-gc-grace S]\n"
	    "       [--egress [--egress-dns IP] [--egress-deny CIDR]...] [--resident ID]\n"
	    "       [--gateway-listen HOST:PORT [--gateway-uid UID]] [-v]\n");
	exit(2);
}

static void
copy_opt(char *dst, size_t cap, const char *src, const char *name)
{
	if (strlen(src) >= cap)
		fatalx("--%s too long", name);
	memcpy(dst, src, strlen(src) + 1);
}

/* D/incarnation: made once with the data directory; it is the `resident`
 * of every route here, so a re-created worker never matches old routes.
 * --resident names it instead (on Kubernetes the pod's UID, from the
 * downward API): a new pod is a new resident, whatever its data
 * directory holds; the file is then neither read nor written. */
static void
load_incarnation(struct mgr_config *cfg, const char *resident)
{
	char path[PATH_MAX + 32], id[SPACE_ID_MAX + 1], *buf = NULL;
	size_t len;

	if (resident != NULL) {
		if (!id_valid(resident) || strlen(resident) >= sizeof(cfg->incarnation))
			fatalx("--resident: not an id ([A-Za-z0-9_-], 1 to %d characters)",
			    (int)sizeof(cfg->incarnation) - 1);
		memcpy(cfg->incarnation, resident, strlen(resident) + 1);
		return;
	}
	snprintf(path, sizeof(path), "%s/incarnation", cfg->data_dir);
	if (read_file(path, 256, &buf, &len) == 0) {
		while (len && (buf[len - 1] == '\n' || buf[len - 1] == ' '))
			buf[--len] = '\0';
		if (!id_valid(buf) || len >= sizeof(cfg->incarnation))
			fatalx("%s is corrupt", path);
		memcpy(cfg->incarnation, buf, len + 1);
		free(buf);
		return;
	}
	if (id_random("inc_", id, sizeof(id)) != 0)
		fatalx("cannot make an incarnation id");
	if (write_file_atomic(path, id, strlen(id), 0644) != 0)
		fatal("write %s", path);
	memcpy(cfg->incarnation, id, strlen(id) + 1);
}

/* the credential file, opened here and handed to the control client,
 * which alone reads it (ctlchild.c); this process never maps it */
static unsigned long
sysctl_read(const char *path)
{
	unsigned long v = 0;
	FILE *f;

	if ((f = fopen(path, "r")) != NULL) {
		if (fscanf(f, "%lu", &v) != 1)
			v = 0;
		fclose(f);
	}
	return v;
}

/* a host-wide bound raised to want when lower (never lowered); what
 * says what for, in the log */
static void
sysctl_raise(const char *path, unsigned long want, const char *what)
{
	unsigned long now = sysctl_read(path);
	bool written;
	FILE *f;

	if (now == 0 || now >= want)
		return;
	written = (f = fopen(path, "w")) != NULL;
	if (f != NULL && fprintf(f, "%lu\n", want) < 0)
		written = false;
	if (f != NULL && fclose(f) != 0)
		written = false;
	if (!written)
		log_warnx("%s is %lu, fewer than %s need (%lu): not raised", path, now, what, want);
	else
		log_info("%s raised from %lu to %lu for %s", path, now, want, what);
}

/* Bounds the kernel keeps per host uid or host-wide, which every sandbox
 * of this worker draws on, raised for its capacity: the sandboxes'
 * terminals (all devpts instances share kernel.pty.max less the
 * reserve; each sandbox may open SPACE_JAIL_PTYS_MAX) and their inotify
 * instances and watches (charged to root, who made their user
 * namespaces, besides each sandbox's own bound; docs/jail.md). */
static void
host_limits_raise(unsigned capacity)
{
	unsigned long pty = sysctl_read("/proc/sys/kernel/pty/reserve") +
	    (unsigned long)capacity * SPACE_JAIL_PTYS_MAX;

	sysctl_raise("/proc/sys/kernel/pty/max", pty > (1ul << 20) ? 1ul << 20 : pty,
	    "the sandboxes' terminals");
	sysctl_raise("/proc/sys/fs/inotify/max_user_instances",
	    128ul + (unsigned long)capacity * SPACE_JAIL_INOTIFY_INSTANCES,
	    "the sandboxes' inotify instances");
	sysctl_raise("/proc/sys/fs/inotify/max_user_watches",
	    65536ul + (unsigned long)capacity * SPACE_JAIL_INOTIFY_WATCHES,
	    "the sandboxes' inotify watches");
}

static int
open_credential(const char *file)
{
	struct stat st;
	int fd;

	if ((fd = open(file, O_RDONLY | O_CLOEXEC | O_NOCTTY)) < 0)
		fatal("cannot open the credential file %s", file);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0 || st.st_size > 511)
		fatalx("the credential file %s is not one token", file);
	return fd;
}

static void
make_dirs(const struct mgr_config *cfg)
{
	char p[PATH_MAX + 32];

	if (mkdir_p(cfg->data_dir, 0711) != 0)
		fatal("mkdir %s", cfg->data_dir);
	/* node-api (unprivileged) must traverse D and D/run to reach the
	 * socket and read D/metrics.prom; it cannot list them */
	chmod(cfg->data_dir, 0711);
	snprintf(p, sizeof(p), "%s/run", cfg->data_dir);
	if (mkdir_p(p, 0710) != 0)
		fatal("mkdir %s", p);
	if (cfg->api_gid != (gid_t)-1) {
		if (chown(p, 0, cfg->api_gid) != 0)
			fatal("chown %s", p);
		chmod(p, 0710);
	} else
		chmod(p, 0700);
	snprintf(p, sizeof(p), "%s/exec", cfg->data_dir);
	if (mkdir_p(p, 0711) != 0)
		fatal("mkdir %s", p);
}

static void
start(struct mgr *m, void *(*fn)(void *))
{
	pthread_t t;

	if (pthread_create(&t, NULL, fn, m) != 0)
		fatalx("pthread_create");
	pthread_detach(t);
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "control", required_argument, NULL, 'c' },
		{ "worker-id", required_argument, NULL, 'w' },
		{ "credential-file", required_argument, NULL, 'f' },
		{ "root-key", required_argument, NULL, 'k' },
		{ "endpoint", required_argument, NULL, 'e' },
		{ "capacity", required_argument, NULL, 'n' },
		{ "api-group", required_argument, NULL, 'g' },
		{ "api-conns", required_argument, NULL, 'a' },
		{ "spaced-host", required_argument, NULL, 's' },
		{ "disk-mb", required_argument, NULL, 'D' },
		{ "snapshot-dir", required_argument, NULL, 'S' },
		{ "snapshot-gc-grace", required_argument, NULL, 'G' },
		{ "egress", no_argument, NULL, 1001 },
		{ "egress-dns", required_argument, NULL, 1002 },
		{ "egress-deny", required_argument, NULL, 1003 },
		{ "resident", required_argument, NULL, 1100 },
		{ "gateway-listen", required_argument, NULL, 1004 },
		{ "gateway-uid", required_argument, NULL, 1005 },
		{ "layer-pool", required_argument, NULL, 1101 },
		{ "netns-pool", required_argument, NULL, 1102 },
		{ "jail-pool", required_argument, NULL, 1103 },
		{ "kept-layers", required_argument, NULL, 1104 },
		{ "checkpoint-mb", required_argument, NULL, 1105 },
		{ "checkpoint-interval", required_argument, NULL, 1106 },
		{ "verbose", no_argument, NULL, 'v' },
		{ NULL, 0, NULL, 0 }
	};
	char path[PATH_MAX + 32], self[PATH_MAX], *cred = NULL, *rootk = NULL;
	char *host = NULL, *end, *resident = NULL;
	sigset_t set;
	struct group *gr;
	int c, sig, verbose = 0, r, optidx = 0, cred_fd;
	unsigned long cap = 0, cap2;
	long nofile;
	/* the one state of this process; it lives as long as the process */
	static struct mgr mgr = { .api_fd = -1 };
	struct mgr *m = &mgr;
	struct mgr_config *cfg = &m->cfg;

	/* the control-plane client, a new image of this program
	 * (ctlchild.c); sbx-manager starts it, never a user */
	if (argc > 1 && strcmp(argv[1], "control-client") == 0)
		return ctlchild_main(argc, argv);
	cfg->api_gid = (gid_t)-1;
	cfg->disk_mb = 4096;
	cfg->layer_pool = 16;
	cfg->netns_pool = 8;
	cfg->api_conns = MGR_CONN_DEFAULT;
	cfg->snapshot_gc_grace = MGR_SNAPSHOT_GC_GRACE;
	cfg->kept_layers = MGR_KEPT_LAYERS;
	cfg->checkpoint_mb = MGR_CHECKPOINT_MB;
	cfg->checkpoint_interval = MGR_CHECKPOINT_INTERVAL;
	while ((c = getopt_long(argc, argv, "v", opts, &optidx)) != -1) {
		switch (c) {
		case 'd': copy_opt(cfg->data_dir, sizeof(cfg->data_dir), optarg, "data-dir"); break;
		case 'c': copy_opt(cfg->control_url, sizeof(cfg->control_url), optarg, "control"); break;
		case 'w': copy_opt(cfg->worker_id, sizeof(cfg->worker_id), optarg, "worker-id"); break;
		case 'f': cred = optarg; break;
		case 'k': rootk = optarg; break;
		case 'e': copy_opt(cfg->endpoint, sizeof(cfg->endpoint), optarg, "endpoint"); break;
		case 'n':
			errno = 0;
			cap = strtoul(optarg, &end, 10);
			if (errno || *end || cap == 0 || cap > MGR_CAPACITY_MAX)
				usage();
			break;
		case 'a':
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 < 1 || cap2 > MGR_CONN_LIMIT)
				usage();
			cfg->api_conns = (unsigned)cap2;
			break;
		case 'g': copy_opt(cfg->api_group, sizeof(cfg->api_group), optarg, "api-group"); break;
		case 's': host = optarg; break;
		case 'S': copy_opt(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), optarg, "snapshot-dir"); break;
		case 'D':
			errno = 0;
			cfg->disk_mb = (uint32_t)strtoul(optarg, &end, 10);
			if (errno || *end || cfg->disk_mb < 16 || cfg->disk_mb > (1u << 24))
				usage();
			break;
		case 'G':
			errno = 0;
			cfg->snapshot_gc_grace = (unsigned)strtoul(optarg, &end, 10);
			if (errno || *end || cfg->snapshot_gc_grace < 1 ||
			    cfg->snapshot_gc_grace > 30 * 86400)
				usage();
			break;
		case 'v': verbose = 1; break;
		case 1100: resident = optarg; break;
		case 1101:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			/* no more than sandboxes a worker can hold */
			if (errno || *end || cap2 > MGR_SLOTS_MAX)
				usage();
			cfg->layer_pool = (unsigned)cap2;
			break;
		case 1102:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 > MGR_SLOTS_MAX)
				usage();
			cfg->netns_pool = (unsigned)cap2;
			break;
		case 1103:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 > MGR_SLOTS_MAX)
				usage();
			cfg->jail_pool = (unsigned)cap2;
			break;
		case 1104:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 > MGR_SLOTS_MAX)
				usage();
			cfg->kept_layers = (unsigned)cap2;
			break;
		case 1105:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 > (1u << 24))
				usage();
			cfg->checkpoint_mb = (unsigned)cap2;
			break;
		case 1106:
			errno = 0;
			cap2 = strtoul(optarg, &end, 10);
			if (errno || *end || cap2 < 1 || cap2 > 86400)
				usage();
			cfg->checkpoint_interval = (unsigned)cap2;
			break;
		case 1001: case 1002: case 1003:
			if (egress_option(opts[optidx].name, optarg) != 0)
				usage();
			break;
		case 1004: case 1005:
			if (gateway_option(opts[optidx].name, optarg) != 0)
				usage();
			break;
		default: usage();
		}
	}
	if (optind != argc || !cfg->data_dir[0] || !cfg->control_url[0] || !cfg->worker_id[0] ||
	    !cred || !rootk || !cfg->endpoint[0] || cap == 0)
		usage();
	log_init("sbx-manager", verbose);
	if (sodium_init() < 0)
		fatalx("sodium_init");
	if (geteuid() != 0)
		fatalx("sbx-manager runs as root (it launches jails)");
	if (!id_valid(cfg->worker_id))
		fatalx("invalid --worker-id");
	cfg->capacity = (unsigned)cap;
	/* per sandbox: its bridge's pidfd (and the monitor's copy), its
	 * gateway's channel and pidfd; per node-api connection two */
	nofile = nofile_raise();
	if (nofile >= 0 && (unsigned long)nofile < 4ul * cfg->capacity + 2ul * cfg->api_conns + 256)
		log_warnx("RLIMIT_NOFILE is %ld: too few descriptors for --capacity %u and "
		    "--api-conns %u (need about %lu)", nofile, cfg->capacity, cfg->api_conns,
		    4ul * cfg->capacity + 2ul * cfg->api_conns + 256);
	host_limits_raise(cfg->capacity);
	/* the local cache of archives (made here, or fetched by digest from
	 * the control plane): private to this worker, DATA/snapshots unless
	 * given (docs/worker.md section 9) */
	if (!cfg->snapshot_dir[0] &&
	    (size_t)snprintf(cfg->snapshot_dir, sizeof(cfg->snapshot_dir), "%s/snapshots",
	    cfg->data_dir) >= sizeof(cfg->snapshot_dir))
		fatalx("--data-dir is too long");
	/* the pinned root key: the only first trust in key bundles */
	if (public_key_parse(rootk, cfg->root_pk) != 0)
		fatalx("invalid --root-key");
	cred_fd = open_credential(cred);
	if (cfg->api_group[0]) {
		if ((gr = getgrnam(cfg->api_group)) == NULL)
			fatalx("unknown group %s", cfg->api_group);
		cfg->api_gid = gr->gr_gid;
	}
	/* the bridge binary: resolved once, its identity is what we check */
	if (host == NULL) {
		ssize_t l = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (l <= 0)
			fatal("readlink /proc/self/exe");
		self[l] = '\0';
		snprintf(path, sizeof(path), "%s/spaced-host", dirname(self));
		host = path;
	}
	if (realpath(host, cfg->spaced_host) == NULL)
		fatal("spaced-host %s", host);

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	make_dirs(cfg);
	load_incarnation(cfg, resident);
	if ((r = uid_window_claim(cfg->data_dir, uid_windows_for(cfg->capacity), &cfg->uid_window,
	    &cfg->uid_windows)) != 0)
		fatalx("cannot claim the host uid windows for --capacity %u: %s", cfg->capacity,
		    strerror(-r));
	snprintf(path, sizeof(path), "%s/records.db", cfg->data_dir);
	if (records_open(m, path) != 0)
		fatalx("cannot open %s", path);
	if (lease_init(m) != 0 || metrics_init(m) != 0 || assign_init(m) != 0 ||
	    reclaim_init(m) != 0)
		fatalx("out of memory");
	if ((m->verifier = verifier_new(SPACE_VCACHE_ENTRIES)) == NULL)
		fatalx("verifier_new");
	if (control_init(m) != 0 || ctlproc_init(m, cred_fd, verbose) != 0)
		fatalx("control client init");
	/* before the first request: callers wait a moment for it to be up */
	start(m, ctlproc_thread);
	log_info("worker %s incarnation %s, control %s", cfg->worker_id, cfg->incarnation,
	    cfg->control_url);
	control_load_keys(m);
	if (control_register(m) == 0)
		atomic_store(&m->registered, true);
	else
		log_warnx("control plane unreachable: serving the recorded executions, registering later");
	if (control_fetch_keys(m) != 0 && verifier_bundle_version(m->verifier) == 0)
		log_warnx("no key bundle yet: every capability is refused until one verifies");
	if (egress_init(m) != 0)
		fatalx("egress: cannot set up the sandboxes' uplinks");
	if (gateway_init(m) != 0)
		fatalx("gateway: cannot start netgtw's listener");
	/* before any bridge starts: every jail is cloned from it */
	jailbase_make(m);
	layerpool_start(m);
	netnspool_start(m);
	/* before any install can take a slot: no jail of an earlier life
	 * keeps one (jailpool.c) */
	jailpool_start(m);
	/* adopt or relaunch before anyone can ask for an operation */
	assign_reconcile(m);
	/* the bridges of retired records are stopped: their slots are free */
	jailpool_fill(m);
	/* finish what a crash cut short before anything new is retired */
	reclaim_resume(m);
	snprintf(path, sizeof(path), "%s/run/sbx-manager.sock", cfg->data_dir);
	if ((r = api_listen(m, path)) != 0) {
		errno = -r;
		fatal("listen %s", path);
	}
	metrics_write(m);
	start(m, control_heartbeat_thread);
	start(m, control_keys_thread);
	start(m, control_reporter_thread);
	start(m, assign_thread);
	start(m, assign_monitor_thread);
	start(m, metrics_thread);
	start(m, checkpoint_thread);
	start(m, api_accept_thread);
	log_info("ready on %s", path);

	while (sigwait(&set, &sig) == 0)
		if (sig == SIGTERM || sig == SIGINT)
			break;
	atomic_store(&m->stopping, true);
	log_info("stopping on signal %d; bridges keep running and are adopted on restart", sig);
	/* the pools' namespaces and prepared jails are nobody's: not left
	 * bound or running (jailpool.c first: its jails hold pooled
	 * namespaces it no longer needs) */
	jailpool_stop(m);
	netnspool_stop();
	jailbase_drop(m);
	/* the records are committed as they change: nothing to flush. The
	 * other threads may be inside a blocking read; leave. The control
	 * client ends with us (its parent-death signal). */
	_exit(0);
}
