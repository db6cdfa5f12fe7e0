/* space-control: the control plane daemon and its administrative
 * subcommands. Subcommands are rows of the table below.
 *
 *   space-control [serve] --data-dir D [--listen ADDR:PORT] [--config FILE] ...
 *   space-control apikey add NAME [--max-sandboxes N --max-memory-mb N
 *       --creates-per-minute N] --data-dir D   (cmd_apikey.c; list, revoke)
 *   space-control worker add NAME --data-dir D
 *   space-control edgekey create|revoke NAME --data-dir D   (cmd_edgekey.c)
 *   space-control keys rotate --data-dir D [--rotate-publish-delay S]
 *   space-control keys root --data-dir D */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "control.h"
#include "http.h"
#include "log.h"
#include "util.h"

enum { O_DATA = 1, O_LISTEN, O_CERT, O_KEY, O_STORE, O_CONFIG, O_HB, O_DELAY,
    O_LEASE, O_HEAD_TIMEOUT, O_HEADS_IP, O_CONNS_IP, O_VERBOSE, O_HELP, O_MAXMEM, O_DEFMEM,
    O_MAXPIDS, O_DEFPIDS, O_MAXCPU, O_DEFCPU, O_MAXDISK, O_DEFDISK, O_OCMEM, O_OCCPU, O_OCDISK,
    O_TEMPLATES, O_ROUTE_WAIT, O_ROUTE_HOLD, O_ARCHIVE_GRACE, O_ARCHIVE_MAX, O_STORE_FREE, O_LOST_GRACE,
    O_MAX_NAMED, O_NET_RATE, O_AUDIT_KEEP, O_MAX_NAMED_MB };

static const struct option opts[] = {
	{ "data-dir",             required_argument, NULL, O_DATA },
	{ "listen",               required_argument, NULL, O_LISTEN },
	{ "tls-cert",             required_argument, NULL, O_CERT },
	{ "tls-key",              required_argument, NULL, O_KEY },
	{ "store",                required_argument, NULL, O_STORE },
	{ "config",               required_argument, NULL, O_CONFIG },
	{ "heartbeat-timeout",    required_argument, NULL, O_HB },
	{ "rotate-publish-delay", required_argument, NULL, O_DELAY },
	{ "lease-ttl",            required_argument, NULL, O_LEASE },
	{ "http-head-timeout",    required_argument, NULL, O_HEAD_TIMEOUT },
	{ "http-heads-per-ip",    required_argument, NULL, O_HEADS_IP },
	{ "http-conns-per-ip",    required_argument, NULL, O_CONNS_IP },
	{ "verbose",              no_argument,       NULL, O_VERBOSE },
	{ "help",                 no_argument,       NULL, O_HELP },
	{ "max-memory-mb",        required_argument, NULL, O_MAXMEM },
	{ "default-memory-mb",    required_argument, NULL, O_DEFMEM },
	{ "max-pids",             required_argument, NULL, O_MAXPIDS },
	{ "default-pids",         required_argument, NULL, O_DEFPIDS },
	{ "max-cpu-percent",      required_argument, NULL, O_MAXCPU },
	{ "default-cpu-percent",  required_argument, NULL, O_DEFCPU },
	{ "max-disk-mb",          required_argument, NULL, O_MAXDISK },
	{ "default-disk-mb",      required_argument, NULL, O_DEFDISK },
	{ "overcommit-memory",    required_argument, NULL, O_OCMEM },
	{ "overcommit-cpu",       required_argument, NULL, O_OCCPU },
	{ "overcommit-disk",      required_argument, NULL, O_OCDISK },
	{ "templates",            required_argument, NULL, O_TEMPLATES },
	{ "route-wait-ms",        required_argument, NULL, O_ROUTE_WAIT },
	{ "route-hold-ms",        required_argument, NULL, O_ROUTE_HOLD },
	{ "archive-grace",        required_argument, NULL, O_ARCHIVE_GRACE },
	{ "archive-max-mb",       required_argument, NULL, O_ARCHIVE_MAX },
	{ "store-min-free-mb",    required_argument, NULL, O_STORE_FREE },
	{ "lost-grace",           required_argument, NULL, O_LOST_GRACE },
	{ "max-named-snapshots",  required_argument, NULL, O_MAX_NAMED },
	{ "network-changes-per-minute", required_argument, NULL, O_NET_RATE },
	{ "audit-keep-days",      required_argument, NULL, O_AUDIT_KEEP },
	{ "max-named-snapshot-mb", required_argument, NULL, O_MAX_NAMED_MB },
	{ NULL, 0, NULL, 0 },
};

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: space-control [serve] --data-dir D [--listen 127.0.0.1:7700]\n"
	    "           [--tls-cert F --tls-key F] [--store sqlite:PATH|postgres://...] [--config FILE]\n"
	    "           [--heartbeat-timeout S] [--rotate-publish-delay S] [--verbose]\n"
	    "           [--lease-ttl S] [--http-head-timeout S] [--http-heads-per-ip N]\n"
	    "           [--http-conns-per-ip N]\n"
	    "           [--max-memory-mb N --max-pids N --max-cpu-percent N --max-disk-mb N]\n"
	    "           [--default-memory-mb N --default-pids N --default-cpu-percent N]\n"
	    "           [--default-disk-mb N] [--overcommit-memory|cpu|disk PCT]\n"
	    "           [--templates NAME[,NAME...]] [--route-wait-ms N] [--route-hold-ms N]\n"
	    "           [--archive-grace S] [--archive-max-mb MB] [--store-min-free-mb MB]\n"
	    "           [--lost-grace S] [--max-named-snapshots N] [--network-changes-per-minute N]\n"
	    "           [--audit-keep-days N] [--max-named-snapshot-mb MB]\n"
	    "       space-control apikey add NAME [--max-sandboxes N] [--max-memory-mb N]\n"
	    "           [--creates-per-minute N] --data-dir D\n"
	    "       space-control apikey list --data-dir D\n"
	    "       space-control apikey revoke ID|NAME --data-dir D\n"
	    "       space-control worker add NAME --data-dir D\n"
	    "       space-control edgekey create|revoke NAME --data-dir D\n"
	    "       space-control keys rotate --data-dir D [--rotate-publish-delay S]\n"
	    "       space-control keys root --data-dir D\n");
}

static int
set_int(const char *name, const char *v, int lo, int hi, int *out)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi) {
		fprintf(stderr, "space-control: %s must be an integer in %d..%d\n", name, lo, hi);
		return -EINVAL;
	}
	*out = (int)n;
	return 0;
}

static int
set_str(const char *name, const char *v, char *dst, size_t cap)
{
	if (strlen(v) >= cap) {
		fprintf(stderr, "space-control: %s is too long\n", name);
		return -EINVAL;
	}
	strcpy(dst, v);
	return 0;
}

static int
set_i64(const char *name, const char *v, int lo, int hi, int64_t *out)
{
	int n, rc;

	if ((rc = set_int(name, v, lo, hi, &n)) == 0)
		*out = n;
	return rc;
}

static int
apply(struct config *cfg, int opt, const char *name, const char *v)
{
	const int rmax = CONTROL_RES_LIMITS_MAX;

	switch (opt) {
	case O_MAXMEM:   return set_i64(name, v, 1, rmax, &cfg->res_max.memory_mb);
	case O_DEFMEM:   return set_i64(name, v, 1, rmax, &cfg->res_def.memory_mb);
	case O_MAXPIDS:  return set_i64(name, v, 1, rmax, &cfg->pids_max);
	case O_DEFPIDS:  return set_i64(name, v, 1, rmax, &cfg->pids_def);
	case O_MAXCPU:   return set_i64(name, v, 1, rmax, &cfg->res_max.cpu_percent);
	case O_DEFCPU:   return set_i64(name, v, 1, rmax, &cfg->res_def.cpu_percent);
	case O_MAXDISK:  return set_i64(name, v, 16, rmax, &cfg->res_max.disk_mb);
	case O_DEFDISK:  return set_i64(name, v, 16, rmax, &cfg->res_def.disk_mb);
	case O_OCMEM:    return set_int(name, v, 1, 100000, &cfg->oc.memory);
	case O_OCCPU:    return set_int(name, v, 1, 100000, &cfg->oc.cpu);
	case O_OCDISK:   return set_int(name, v, 1, 100000, &cfg->oc.disk);
	case O_TEMPLATES: return set_str(name, v, cfg->templates, sizeof(cfg->templates));
	case O_ROUTE_WAIT: return set_int(name, v, 0, 60000, &cfg->route_wait_ms);
	case O_ROUTE_HOLD: return set_int(name, v, 0, 60000, &cfg->route_hold_ms);
	case O_ARCHIVE_GRACE: return set_int(name, v, 1, 30 * 86400, &cfg->archive_grace);
	case O_ARCHIVE_MAX: return set_i64(name, v, 1, 1 << 24, &cfg->archive_max_mb);
	case O_STORE_FREE: return set_i64(name, v, 0, 1 << 24, &cfg->store_min_free_mb);
	case O_MAX_NAMED: return set_i64(name, v, 0, 1000000, &cfg->max_named_snapshots);
	case O_NET_RATE: return set_i64(name, v, 0, 1000000, &cfg->net_changes_per_min);
	case O_AUDIT_KEEP: return set_i64(name, v, 0, 36500, &cfg->audit_keep_days);
	case O_MAX_NAMED_MB: return set_i64(name, v, 0, 1 << 30, &cfg->max_named_snapshot_mb);
	case O_LOST_GRACE: return set_int(name, v, 0, 30 * 86400, &cfg->lost_grace);
	case O_DATA:     return set_str(name, v, cfg->data_dir, sizeof(cfg->data_dir));
	case O_LISTEN:   return set_str(name, v, cfg->listen, sizeof(cfg->listen));
	case O_CERT:     return set_str(name, v, cfg->tls_cert, sizeof(cfg->tls_cert));
	case O_KEY:      return set_str(name, v, cfg->tls_key, sizeof(cfg->tls_key));
	case O_STORE:    return set_str(name, v, cfg->store, sizeof(cfg->store));
	case O_CONFIG:   return 0;
	case O_HB:       return set_int(name, v, 1, 86400, &cfg->heartbeat_timeout);
	case O_DELAY:    return set_int(name, v, 0, 86400, &cfg->rotate_publish_delay);
	case O_LEASE:    return set_int(name, v, 1, 3600, &cfg->lease_ttl);
	case O_HEAD_TIMEOUT: return set_int(name, v, 1, 3600, &cfg->http_head_timeout);
	case O_HEADS_IP: return set_int(name, v, 1, SPACE_HTTP_CONN_MAX, &cfg->http_heads_per_ip);
	case O_CONNS_IP: return set_int(name, v, 1, SPACE_HTTP_CONN_MAX, &cfg->http_conns_per_ip);
	case O_VERBOSE:
		if (v == NULL || strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0)
			cfg->verbose = 1;
		else
			cfg->verbose = 0;
		return 0;
	}
	return -EINVAL;
}

/* config file: "name = value" lines with the flags' names, '#' comments */
static int
load_config(struct config *cfg, const char *path)
{
	char *text = NULL, *line, *save = NULL;
	size_t len, i;
	int rc, lineno = 0;

	if ((rc = read_file(path, 64 << 10, &text, &len)) < 0) {
		fprintf(stderr, "space-control: cannot read config %s: %s\n", path, strerror(-rc));
		return rc;
	}
	for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		char *k = line, *eq, *v, *e;
		lineno++;
		while (*k == ' ' || *k == '\t')
			k++;
		if (*k == '#' || *k == '\0' || *k == '\r')
			continue;
		if ((eq = strchr(k, '=')) == NULL) {
			fprintf(stderr, "space-control: %s:%d: expected name = value\n", path, lineno);
			rc = -EINVAL;
			break;
		}
		for (e = eq; e > k && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*e = '\0';
		v = eq + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'); e--)
			;
		*e = '\0';
		for (i = 0; opts[i].name; i++)
			if (strcmp(opts[i].name, k) == 0)
				break;
		if (opts[i].name == NULL || opts[i].val == O_CONFIG || opts[i].val == O_HELP) {
			fprintf(stderr, "space-control: %s:%d: unknown setting \"%s\"\n", path,
			    lineno, k);
			rc = -EINVAL;
			break;
		}
		if ((rc = apply(cfg, opts[i].val, k, v)) < 0)
			break;
	}
	free(text);
	return rc < 0 ? rc : 0;
}

/* flags override the config file: read --config first, then every flag */
int
control_parse(int argc, char **argv, struct config *cfg)
{
	const char *config = NULL;
	int o;

	memset(cfg, 0, sizeof(*cfg));
	strcpy(cfg->listen, CONTROL_LISTEN_DEFAULT);
	cfg->heartbeat_timeout = CONTROL_HEARTBEAT_DEF;
	cfg->lost_grace = CONTROL_LOST_GRACE;
	cfg->lease_ttl = CONTROL_LEASE_TTL;
	cfg->http_head_timeout = SPACE_HTTP_HEAD_TIMEOUT;
	cfg->http_heads_per_ip = SPACE_HTTP_HEADS_PER_IP;
	cfg->http_conns_per_ip = SPACE_HTTP_CONN_PER_IP;
	cfg->rotate_publish_delay = CONTROL_PUBLISH_DELAY;
	cfg->route_wait_ms = SPACE_ROUTE_WAIT_MS;
	cfg->route_hold_ms = SPACE_ROUTE_HOLD_MS;
	cfg->archive_grace = CONTROL_ARCHIVE_GRACE;
	cfg->archive_max_mb = (int64_t)(SPACE_ARCHIVE_MAX >> 20);
	cfg->store_min_free_mb = SPACE_STORE_MIN_FREE_MB;
	cfg->max_named_snapshots = CONTROL_MAX_NAMED_SNAPSHOTS;
	cfg->net_changes_per_min = CONTROL_NET_CHANGES_PER_MIN;
	cfg->audit_keep_days = CONTROL_AUDIT_KEEP_DAYS;
	cfg->max_named_snapshot_mb = CONTROL_MAX_NAMED_SNAPSHOT_MB;
	cfg->res_max = (struct res){ CONTROL_MAX_MEMORY_MB, CONTROL_MAX_CPU_PERCENT,
	    CONTROL_MAX_DISK_MB };
	cfg->res_def = (struct res){ CONTROL_DEF_MEMORY_MB, CONTROL_DEF_CPU_PERCENT,
	    CONTROL_DEF_DISK_MB };
	strcpy(cfg->templates, CONTROL_TEMPLATES);
	cfg->pids_max = CONTROL_MAX_PIDS;
	cfg->pids_def = CONTROL_DEF_PIDS;
	cfg->oc = (struct overcommit){ CONTROL_OVERCOMMIT_MEMORY, CONTROL_OVERCOMMIT_CPU,
	    CONTROL_OVERCOMMIT_DISK };
	opterr = 0;
	optind = 0;
	while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1)
		if (o == O_CONFIG)
			config = optarg;
	if (config && load_config(cfg, config) < 0)
		return 2;
	opterr = 1;
	optind = 0;
	while ((o = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
		if (o == O_HELP) {
			usage(stdout);
			exit(0);
		}
		if (o == '?' || o == ':') {
			usage(stderr);
			return 2;
		}
		if (apply(cfg, o, opts[o - 1].name, optarg) < 0)
			return 2;
	}
	if (optind != argc) {
		fprintf(stderr, "space-control: unexpected argument \"%s\"\n", argv[optind]);
		return 2;
	}
	if (cfg->data_dir[0] == '\0') {
		fprintf(stderr, "space-control: --data-dir is required\n");
		return 2;
	}
	if (cfg->res_def.memory_mb > cfg->res_max.memory_mb || cfg->pids_def > cfg->pids_max ||
	    cfg->res_def.cpu_percent > cfg->res_max.cpu_percent ||
	    cfg->res_def.disk_mb > cfg->res_max.disk_mb) {
		fprintf(stderr, "space-control: a --default-* resource is above its --max-*\n");
		return 2;
	}
	if (!!cfg->tls_cert[0] != !!cfg->tls_key[0]) {
		fprintf(stderr, "space-control: --tls-cert and --tls-key go together\n");
		return 2;
	}
	return 0;
}

struct store *
control_store_open(struct config *cfg)
{
	struct store *st;
	char spec[sizeof(cfg->store)];
	const char *env;
	int rc;

	if ((rc = mkdir_p(cfg->data_dir, 0700)) < 0) {
		fprintf(stderr, "space-control: %s: %s\n", cfg->data_dir, strerror(-rc));
		return NULL;
	}
	/* --store (or the config file's store), else SPACE_CONTROL_STORE: a
	 * PostgreSQL URL that holds a password stays out of the process's
	 * argument list, which every local user can read */
	if (cfg->store[0])
		snprintf(spec, sizeof(spec), "%s", cfg->store);
	else if ((env = getenv("SPACE_CONTROL_STORE")) != NULL && env[0] != '\0') {
		if ((size_t)snprintf(spec, sizeof(spec), "%s", env) >= sizeof(spec))
			return NULL;
	} else if ((size_t)snprintf(spec, sizeof(spec), "sqlite:%s/control.db", cfg->data_dir) >=
	    sizeof(spec))
		return NULL;
	/* a URL is shown as its scheme only: it may hold a password */
	if ((st = store_open(spec)) == NULL)
		fprintf(stderr, "space-control: cannot open store %.*s: %s\n",
		    strstr(spec, "://") ? (int)(strstr(spec, "://") - spec + 3) : (int)strlen(spec),
		    spec, errno == EPROTO ? "its schema is newer than this build" :
		    errno == EINVAL ? "not a valid connection string" :
		    errno == EHOSTUNREACH ? "the database does not answer" : strerror(errno));
	return st;
}

static int
cmd_serve(int argc, char **argv)
{
	struct ctl *c;
	sigset_t set;
	int rc, sig, ret = 1, i;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return 1;
	if ((rc = control_parse(argc, argv, &c->cfg)) != 0) {
		free(c);
		return rc;
	}
	log_init(CONTROL_PROG, c->cfg.verbose);
	/* signals are taken synchronously below; every thread inherits the mask */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	pthread_mutex_init(&c->assign_mu, NULL);
	cond_init_mono(&c->assign_cv);
	for (i = 0; i < STATE_SLOTS; i++)
		cond_init_mono(&c->state_slot[i].cv);

	if ((c->st = control_store_open(&c->cfg)) == NULL)
		goto out;
	c->st->oc = c->cfg.oc;
	/* the signer is started before any thread or listener exists here */
	if ((rc = keyring_init(&c->kr, c->st, c->cfg.data_dir, c->cfg.verbose)) < 0) {
		log_warnx("keyring: %s", rc == -EHOSTDOWN || rc == -ECONNRESET ?
		    "the signer did not start (see its error above)" : strerror(-rc));
		goto out;
	}
	if ((rc = id_random("ctl_", c->instance, sizeof(c->instance))) < 0)
		goto out;
	log_info("instance %s (lease owner, lease %d s)", c->instance, c->cfg.lease_ttl);
	store_observe = metrics_store_latency;
	store_op_observe = metrics_lifecycle;
	if ((rc = scheduler_start(c)) < 0)
		goto out;
	if ((rc = assign_listen(c)) < 0) {
		log_warnx("store: cannot start its listener: %s", strerror(-rc));
		goto out;
	}
	if ((rc = http_start(c, c->cfg.listen, c->cfg.tls_cert, c->cfg.tls_key, &c->http)) < 0) {
		log_warnx("cannot listen on %s: %s", c->cfg.listen, strerror(-rc));
		goto out;
	}
	log_info("listening on %s (%s), data in %s", c->cfg.listen,
	    c->cfg.tls_cert[0] ? "https" : "http", c->cfg.data_dir);
	for (;;) {
		if (sigwait(&set, &sig) == 0 && (sig == SIGINT || sig == SIGTERM))
			break;
	}
	log_info("stopping on signal %d", sig);
	ret = 0;
out:
	c->stopping = 1;
	scheduler_stop(c);          /* wakes long-polls so their threads end */
	http_stop(c->http);
	store_observe = NULL;
	store_op_observe = NULL;
	keyring_free(&c->kr);
	if (c->st)
		c->st->ops->close(c->st);
	pthread_cond_destroy(&c->assign_cv);
	for (i = 0; i < STATE_SLOTS; i++)
		pthread_cond_destroy(&c->state_slot[i].cv);
	pthread_mutex_destroy(&c->assign_mu);
	free(c);
	return ret;
}

/* apikey add NAME / worker add NAME: the secret is printed once, alone */
int
control_cred_add(int argc, char **argv, const char *what, const struct key_quota *q)
{
	struct config cfg;
	struct store *st = NULL;
	char secret[64], id[STORE_CREDID_LEN + 1];
	uint8_t hash[STORE_HASH_LEN];
	const char *name;
	int rc, ret = 1;

	if (argc < 3 || strcmp(argv[1], "add") != 0) {
		usage(stderr);
		return 2;
	}
	name = argv[2];
	if (!id_valid(name)) {
		fprintf(stderr, "space-control: %s: NAME must match [A-Za-z0-9_-]{1,%d}\n", what,
		    SPACE_ID_MAX);
		return 2;
	}
	if ((rc = control_parse(argc - 2, argv + 2, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG, cfg.verbose);
	if ((st = control_store_open(&cfg)) == NULL)
		return 1;
	if (strcmp(what, "apikey") == 0) {
		if (auth_secret_new("sk_", secret, sizeof(secret), id, hash) < 0)
			goto out;
		rc = st->ops->apikey_add(st, name, id, hash, q);
	} else {
		if (auth_secret_new("wk_", secret, sizeof(secret), id, hash) < 0)
			goto out;
		rc = st->ops->worker_add(st, name, id, hash);
	}
	if (rc == -EEXIST) {
		fprintf(stderr, "space-control: %s add: %s already exists\n", what, name);
		goto out;
	}
	if (rc < 0) {
		fprintf(stderr, "space-control: %s add: %s\n", what, strerror(-rc));
		goto out;
	}
	printf("%s\n", secret);
	ret = fflush(stdout) == 0 ? 0 : 1;
out:
	sodium_memzero(secret, sizeof(secret));
	st->ops->close(st);
	return ret;
}

static int
cmd_worker(int argc, char **argv)
{
	return control_cred_add(argc, argv, "worker", NULL);
}

static int
cmd_keys(int argc, char **argv)
{
	struct config cfg;
	struct keyring kr;
	struct store *st;
	char kid[PASERK_K4_PID_LEN + 1];
	int rc, ret = 1;

	if (argc < 2 || (strcmp(argv[1], "rotate") != 0 && strcmp(argv[1], "root") != 0)) {
		usage(stderr);
		return 2;
	}
	if ((rc = control_parse(argc - 1, argv + 1, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG, cfg.verbose);
	if ((st = control_store_open(&cfg)) == NULL)
		return 1;
	if (strcmp(argv[1], "rotate") == 0) {
		rc = keyring_rotate(st, cfg.data_dir, cfg.rotate_publish_delay, cfg.verbose, kid);
		if (rc < 0) {
			fprintf(stderr, "space-control: keys rotate: %s\n", strerror(-rc));
			goto out;
		}
		printf("%s\n", kid);
	} else {
		if ((rc = keyring_init(&kr, st, cfg.data_dir, cfg.verbose)) < 0) {
			fprintf(stderr, "space-control: keys root: %s\n", strerror(-rc));
			keyring_free(&kr);
			goto out;
		}
		printf("%s\n", kr.root_paserk);
		keyring_free(&kr);
	}
	ret = 0;
out:
	st->ops->close(st);
	return ret;
}

/* the signer process (signer.c), started by the commands above with its
 * socket on fd 3; not an operator's command */
static int
cmd_signer(int argc, char **argv)
{
	struct config cfg;
	int rc;

	if ((rc = control_parse(argc, argv, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG "[signer]", cfg.verbose);
	return signer_main(3, cfg.data_dir);
}

static const struct {
	const char *name;
	int (*run)(int, char **);
} cmds[] = {
	{ "serve",  cmd_serve },
	{ "apikey", cmd_apikey },
	{ "edgekey", cmd_edgekey },
	{ "worker", cmd_worker },
	{ "keys",   cmd_keys },
	{ "signer", cmd_signer },
};

int
main(int argc, char **argv)
{
	size_t i;

	if (sodium_init() < 0) {
		fprintf(stderr, "space-control: libsodium init failed\n");
		return 1;
	}
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
			usage(stdout);
			return 0;
		}
		return cmd_serve(argc, argv);
	}
	for (i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (strcmp(argv[1], cmds[i].name) == 0)
			return cmds[i].run(argc - 1, argv + 1);
	fprintf(stderr, "space-control: unknown command \"%s\"\n", argv[1]);
	usage(stderr);
	return 2;
}
