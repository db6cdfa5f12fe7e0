/* space up: start a complete single-machine platform (space-control and N
 * workers, each an sbx-manager and a node-api) and supervise it until
 * SIGINT or SIGTERM. A second run on the same data directory continues
 * where the first stopped: the API key, the worker credentials and every
 * daemon's data are reused. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <sodium.h>

#include "client.h"
#include "space.h"
#include "up.h"
#include "util.h"

#define USAGE "[--data-dir DIR] [--workers N] [--capacity N] [--jail-pool N] [--port BASE] [--store STORE]\n" \
	"  [--checkpoint-mb N] [--disk-mb N] [--foreground]\n" \
	"  Start space-control on 127.0.0.1:BASE (default 7700) and N workers\n" \
	"  (default 2) w1..wN, each an sbx-manager and a node-api on\n" \
	"  127.0.0.1:BASE+I, and space-edge (the ports of sandboxes by host name)\n" \
	"  on 127.0.0.1:BASE+80, all with data under DIR (default ./.space), and\n" \
	"  supervise them: a crashed process is restarted, ^C or SIGTERM stops\n" \
	"  everything. Logs go to DIR/logs/; DIR/env holds SPACE_API_URL,\n" \
	"  SPACE_API_KEY, SPACE_EDGE_URL, SPACE_EDGE_DOMAIN, SPACE_ENDPOINT_SOCKETS\n" \
	"  (each node-api's local socket, DIR/wN/api.sock, which the CLI takes)\n" \
	"  and the E2B SDK's E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY, E2B_DOMAIN.\n" \
	"  space up stays in the foreground (--foreground says\n" \
	"  so explicitly). Running it again on DIR continues where it stopped.\n" \
	"  --store: space-control's store (sqlite:PATH or postgres://...; default\n" \
	"  DIR/control/control.db), handed to it as SPACE_CONTROL_STORE.\n" \
	"  --capacity: sandboxes each worker takes (default 16, at most 1024).\n" \
	"  --jail-pool: prepared jails each worker keeps ready (sbx-manager's\n" \
	"  --jail-pool; default 2; 0: none; at most 256).\n" \
	"  --checkpoint-mb: a serving layer grown by this much since its last\n" \
	"  archive is checkpointed (sbx-manager's --checkpoint-mb; default 512;\n" \
	"  0: never).\n" \
	"  --disk-mb: the layer size each worker's pools prepare (sbx-manager's\n" \
	"  --disk-mb; default 4096, 16..16777216): a create asking this disk_mb\n" \
	"  claims a prepared jail, one asking another makes its own."

#define READY_TIMEOUT_MS 30000
#define UP_CHECKPOINT_MB 512           /* sbx-manager's MGR_CHECKPOINT_MB */
#define UP_DISK_MB       4096           /* sbx-manager's --disk-mb default */
#define UP_CAPACITY      16             /* sandboxes per worker (--capacity) */
#define UP_CAPACITY_MAX  1024           /* sbx-manager's MGR_CAPACITY_MAX */
/* prepared jails per worker: a create on the host template claims one
 * (docs/worker.md, "Prepared jails": about half of a create's time) */
#define UP_JAIL_POOL     2
#define UP_API_USER      "nobody"       /* node-api's default --user */
#define KEY_MAX          1024

/* optarg of --opt as a number in lo..hi; 0, or -1 after saying so */
static int
range_opt(const char *opt, const char *arg, long lo, long hi, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(arg, &end, 10);
	if (errno || *end || end == arg || *out < lo || *out > hi) {
		fprintf(stderr, "space: up: %s is %ld..%ld\n", opt, lo, hi);
		return -1;
	}
	return 0;
}

static int
healthy(const char *url)
{
	struct space_answer a;
	int ok;

	space_answer_init(&a);
	ok = space_http(url, NULL, "GET", NULL, -1, -1, 1, 2, &a) == 0 && space_answer_ok(&a);
	space_answer_clear(&a);
	return ok;
}

/* pump the loop until cond(arg) holds, the child died for good, or time
 * runs out; 0 when it holds */
static int
wait_for(struct up *up, int (*cond)(const char *), const char *arg, unsigned ms)
{
	unsigned waited = 0;

	while (!up->stopping) {
		if (cond(arg))
			return 0;
		if (waited >= ms)
			return -ETIMEDOUT;
		up_pump(up, 100);
		waited += 100;
	}
	return -ECANCELED;
}

static int
exists(const char *path)
{
	return access(path, F_OK) == 0;
}

static int
bindir_find(struct up *up)
{
	static const char *const need[] = { "space-control", "sbx-manager", "spaced-host", "node-api",
	    "space-edge" };
	char exe[UP_PATH_MAX], path[UP_PATH_MAX + 32], *slash;
	ssize_t n;
	size_t i;
	int ret = 0;

	if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
		return cli_fail("up", "cannot find my own binary: %s", strerror(errno));
	exe[n] = '\0';
	if ((slash = strrchr(exe, '/')) != NULL)
		*slash = '\0';
	snprintf(up->bindir, sizeof(up->bindir), "%s", exe);
	for (i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", up->bindir, need[i]);
		if (access(path, X_OK) != 0)
			ret = cli_fail("up", "%s not found next to space in %s (run make all)",
			    need[i], up->bindir);
	}
	return ret;
}

static int
path_searchable(const char *dir)
{
	char p[UP_PATH_MAX], *slash;
	struct stat st;

	snprintf(p, sizeof(p), "%s", dir);
	for (;;) {
		if (stat(p[0] ? p : "/", &st) != 0)
			return cli_fail("up", "%s: %s", p, strerror(errno));
		if (!(st.st_mode & S_IXOTH))
			return cli_fail("up", "%s is not searchable by others, so node-api (user %s) "
			    "cannot reach its sbx-manager socket under %s; chmod o+x %s, or choose "
			    "another --data-dir", p[0] ? p : "/", UP_API_USER, dir, p[0] ? p : "/");
		if (p[0] == '\0' || (slash = strrchr(p, '/')) == NULL)
			return 0;
		*slash = '\0';
	}
}

/* the group of node-api's user: sbx-manager shares its socket with it */
static int
api_group(char *out, size_t cap)
{
	struct passwd *pw = getpwnam(UP_API_USER);
	struct group *gr;

	if (pw == NULL || (gr = getgrgid(pw->pw_gid)) == NULL)
		return cli_fail("up", "no user %s (or no group for it): node-api runs as it",
		    UP_API_USER);
	snprintf(out, cap, "%s", gr->gr_name);
	return 0;
}

static int
prepare_dirs(struct up *up, const char *dir)
{
	char sub[UP_PATH_MAX + 32], *real;
	int i;

	if (strlen(dir) >= UP_PATH_MAX - 256)
		return cli_fail("up", "data directory path too long");
	if (mkdir_p(dir, 0700) < 0)
		return cli_fail("up", "cannot make %s: %s", dir, strerror(errno));
	if ((real = realpath(dir, NULL)) == NULL)
		return cli_fail("up", "%s: %s", dir, strerror(errno));
	if (strlen(real) >= UP_PATH_MAX - 256) {
		free(real);
		return cli_fail("up", "data directory path too long");
	}
	snprintf(up->dir, sizeof(up->dir), "%s", real);
	free(real);
	/* node-api drops to an unprivileged user and must reach
	 * DIR/wI/run/sbx-manager.sock: DIR and every directory above it must
	 * be searchable by others (not listable: 0711) */
	chmod(up->dir, 0711);
	if (path_searchable(up->dir) != 0)
		return 1;
	snprintf(sub, sizeof(sub), "%s/logs", up->dir);
	if (mkdir_p(sub, 0700) < 0)
		return cli_fail("up", "cannot make %s: %s", sub, strerror(errno));
	snprintf(sub, sizeof(sub), "%s/control", up->dir);
	if (mkdir_p(sub, 0700) < 0)
		return cli_fail("up", "cannot make %s: %s", sub, strerror(errno));
	for (i = 1; i <= up->workers; i++) {
		snprintf(sub, sizeof(sub), "%s/w%d", up->dir, i);
		if (mkdir_p(sub, 0700) < 0)
			return cli_fail("up", "cannot make %s: %s", sub, strerror(errno));
	}
	return 0;
}

/* run `space-control ARGS... --data-dir DIR/control`, first line of output */
static int
control_admin(struct up *up, const char *what, char *const args[], char *out, size_t cap)
{
	char bin[UP_PATH_MAX + 32], ddir[UP_PATH_MAX + 32], log[UP_PATH_MAX + 64];
	char *argv[12];
	int i = 0, j, rc;

	snprintf(bin, sizeof(bin), "%s/space-control", up->bindir);
	snprintf(ddir, sizeof(ddir), "%s/control", up->dir);
	snprintf(log, sizeof(log), "%s/logs/space-control-admin.log", up->dir);
	argv[i++] = bin;
	for (j = 0; args[j] && i < 9; j++)
		argv[i++] = args[j];
	argv[i++] = "--data-dir";
	argv[i++] = ddir;
	argv[i] = NULL;
	rc = up_capture(argv, log, out, cap);
	if (rc == 0 && !up_token_ok(out))
		rc = -EPROTO;
	if (rc < 0)
		cli_fail("up", "space-control %s failed (%s); see %s", what,
		    rc == -EIO ? "non-zero exit" : rc == -EPROTO ? "unexpected output" :
		    strerror(-rc), log);
	return rc;
}

static int
api_key(struct up *up, const char *url, char *key, size_t cap)
{
	char path[UP_PATH_MAX + 16], old[UP_PATH_MAX];
	static char *const add[] = { "apikey", "add", "admin", NULL };
	int rc;

	snprintf(path, sizeof(path), "%s/env", up->dir);
	if (up_env_get(path, "SPACE_API_KEY", key, cap) == 0 && up_token_ok(key)) {
		/* reused; rewritten only if --port changed the URL */
		if (up_env_get(path, "SPACE_API_URL", old, sizeof(old)) == 0 &&
		    strcmp(old, url) == 0)
			return 0;
	} else if ((rc = control_admin(up, "apikey add", add, key, cap)) < 0)
		return rc;
	if ((rc = up_env_write(path, url, key)) < 0)
		return cli_fail("up", "cannot write %s: %s", path, strerror(-rc)), rc;
	return 0;
}

static int
worker_credential(struct up *up, int i)
{
	char path[UP_PATH_MAX + 32], name[16], cred[KEY_MAX];
	char *add[] = { "worker", "add", name, NULL };
	int rc;

	snprintf(name, sizeof(name), "w%d", i);
	snprintf(path, sizeof(path), "%s/w%d/credential", up->dir, i);
	if (exists(path))
		return 0;
	if ((rc = control_admin(up, "worker add", add, cred, sizeof(cred))) < 0)
		return rc;
	rc = write_file_atomic(path, cred, strlen(cred), 0600);
	sodium_memzero(cred, sizeof(cred));
	if (rc < 0)
		return cli_fail("up", "cannot write %s: %s", path, strerror(-rc)), rc;
	return 0;
}

/* worker i's local socket, DIR/wI/api.sock: true when the path fits a
 * socket address (node-api then listens there) */
static bool
api_sock(const struct up *up, int i, char *out, size_t cap)
{
	snprintf(out, cap, "%s/w%d/api.sock", up->dir, i);
	return strlen(out) < SPACE_UNIX_PATH_MAX;
}

static int
start_worker(struct up *up, int i, const char *root, const char *group)
{
	char bin[UP_PATH_MAX + 32], wdir[UP_PATH_MAX + 16], cred[UP_PATH_MAX + 32];
	char sock[UP_PATH_MAX + 64], metrics[UP_PATH_MAX + 32], ctl[64], ep[64];
	char listen[64], wid[16], name[48], capacity[16], gw[64], jpool[16], ckmb[16], dmb[16];
	char usock[UP_PATH_MAX + 32];
	int rc;

	/* each worker caches archives in its own data directory
	 * (DIR/wN/snapshots); they travel to and from space-control over HTTP
	 * by digest, as between hosts */
	snprintf(wid, sizeof(wid), "w%d", i);
	snprintf(capacity, sizeof(capacity), "%d", up->capacity);
	snprintf(jpool, sizeof(jpool), "%d", up->jail_pool);
	snprintf(ckmb, sizeof(ckmb), "%d", up->checkpoint_mb);
	snprintf(dmb, sizeof(dmb), "%d", up->disk_mb);
	snprintf(wdir, sizeof(wdir), "%s/%s", up->dir, wid);
	snprintf(cred, sizeof(cred), "%s/credential", wdir);
	snprintf(ctl, sizeof(ctl), "http://127.0.0.1:%d", up->port);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", up->port + i);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", up->port + i);
	/* the worker's netgtw listener: space-edge reaches sandbox ports there */
	snprintf(gw, sizeof(gw), "127.0.0.1:%d", up->port + UP_GW_OFFSET + i);
	snprintf(sock, sizeof(sock), "%s/run/sbx-manager.sock", wdir);
	snprintf(metrics, sizeof(metrics), "%s/metrics.prom", wdir);

	snprintf(bin, sizeof(bin), "%s/sbx-manager", up->bindir);
	{
		char *argv[] = { bin, "--data-dir", wdir, "--control", ctl, "--worker-id", wid,
		    "--credential-file", cred, "--root-key", (char *)root, "--endpoint", ep,
		    "--capacity", capacity, "--api-group", (char *)group,
		    "--gateway-listen", gw, "--jail-pool", jpool, "--checkpoint-mb", ckmb,
		    "--disk-mb", dmb, NULL };
		snprintf(name, sizeof(name), "%s-sbx-manager", wid);
		if ((rc = up_child_start(up, name, argv)) < 0)
			return cli_fail("up", "cannot start %s: %s", name, uv_strerror(rc)), rc;
	}
	snprintf(bin, sizeof(bin), "%s/node-api", up->bindir);
	{
		/* and the local socket, when its path fits */
		char *argv[] = { bin, "--listen", listen, "--manager-socket", sock,
		    "--worker-id", wid, "--metrics-file", metrics,
		    api_sock(up, i, usock, sizeof(usock)) ? "--listen-unix" : NULL, usock, NULL };
		snprintf(name, sizeof(name), "%s-node-api", wid);
		if ((rc = up_child_start(up, name, argv)) < 0)
			return cli_fail("up", "cannot start %s: %s", name, uv_strerror(rc)), rc;
	}
	return 0;
}

/* SPACE_ENDPOINT_SOCKETS in the env file: each worker's endpoint and its
 * node-api's local socket (DIR/wN/api.sock), which a client on this machine
 * takes instead of loopback TCP (libspace/client.c, docs/worker.md). A
 * path too long for a socket, or that the list's syntax or `export $(cat
 * env)` would split, is left out: that worker is reached over TCP. */
static int
up_sockets(struct up *up)
{
	char path[UP_PATH_MAX + 32], map[UP_WORKERS_MAX * (SPACE_UNIX_PATH_MAX + 32) + 1] = "";
	size_t n = 0;
	int i, rc;

	for (i = 1; i <= up->workers; i++)
		if (api_sock(up, i, path, sizeof(path)) && strpbrk(path, ", \t\n") == NULL)
			n += (size_t)snprintf(map + n, sizeof(map) - n, "%shttp://127.0.0.1:%d=%s",
			    n ? "," : "", up->port + i, path);
	snprintf(path, sizeof(path), "%s/env", up->dir);
	if ((rc = up_env_set(path, "SPACE_ENDPOINT_SOCKETS", map)) < 0)
		cli_fail("up", "cannot write %s: %s", path, strerror(-rc));
	return rc;
}

static void
summary(struct up *up, const char *url, const char *edge)
{
	int i;

	printf("\nspace is up.\n");
	printf("  space-control  %s\n", url);
	for (i = 1; i <= up->workers; i++) {
		char sock[UP_PATH_MAX + 32], and[UP_PATH_MAX + 40] = "";

		if (api_sock(up, i, sock, sizeof(sock)))
			snprintf(and, sizeof(and), " (and %s)", sock);
		printf("  worker w%d      node-api http://127.0.0.1:%d%s, netgtw tcp://127.0.0.1:%d, data %s/w%d\n",
		    i, up->port + i, and, up->port + UP_GW_OFFSET + i, up->dir, i);
	}
	printf("  space-edge     %s  (a sandbox's port: http://PORT-SANDBOX.%s/,\n"
	    "                 `space port url SANDBOX PORT`)\n", edge, edge + 7);
	printf("  web console    %s/  (sign in with the API key)\n", edge);
	printf("  API key        SPACE_API_KEY in %s/env (mode 0600)\n", up->dir);
	printf("  env file       %s/env\n", up->dir);
	printf("  logs           %s/logs/\n", up->dir);
	printf("\nTry, in another shell:\n");
	printf("  export $(cat %s/env)      # or: set -a; . %s/env; set +a\n", up->dir, up->dir);
	printf("  SBX=$(space create)\n");
	printf("  space exec $SBX -- echo hello\n");
	printf("  echo hi | space fs write $SBX /home/user/hi.txt\n");
	printf("  space fs read $SBX /home/user/hi.txt\n");
	printf("  space show $SBX; space list; space kill $SBX\n");
	printf("\nSandboxes run on the host's /usr (template \"host\", instant). A Python\n"
	    "template, built from Debian in one command (as root, a few minutes):\n");
	printf("  space template build py --packages python3,python3-pip\n");
	printf("  space exec $(space create --template py) -- python3 --version\n");
	printf("\nPress ^C to stop everything.\n\n");
	fflush(stdout);
}

/* 0 when nobody listens on 127.0.0.1:port: a daemon that finds its port
 * taken would only crash-loop, so say it before starting anything */
static int
port_free(int port)
{
	struct sockaddr_in sa;
	int fd, one = 1, rc;

	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ? 0 : -errno;
	close(fd);
	return rc;
}

static int
sock_exists(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int
cmd_up(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "workers", required_argument, NULL, 'w' },
		{ "capacity", required_argument, NULL, 'c' },
		{ "jail-pool", required_argument, NULL, 'j' },
		{ "checkpoint-mb", required_argument, NULL, 'k' },
		{ "disk-mb", required_argument, NULL, 'D' },
		{ "port", required_argument, NULL, 'p' },
		{ "foreground", no_argument, NULL, 'f' },
		{ "store", required_argument, NULL, 's' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	struct up *up = NULL;
	const char *dir = ".space";
	char url[64], edge[64], health[96], key[KEY_MAX], root[KEY_MAX], *end;
	char path[UP_PATH_MAX + 64], ctlbin[UP_PATH_MAX + 32], ctldir[UP_PATH_MAX + 16];
	char listen[32], group[64];
	long workers = 2, port = 7700, capacity = UP_CAPACITY, jail_pool = UP_JAIL_POOL;
	long ckmb = UP_CHECKPOINT_MB, disk_mb = UP_DISK_MB;
	int ch, i, lockfd = -1, rc, ret = 1;

	/* a mapping of endpoints to local sockets in this shell (an env file
	 * exported before) names the sockets of some platform, maybe another:
	 * none of the daemons started here takes one (space-edge's E2B front
	 * would otherwise reach node-api through it) */
	unsetenv("SPACE_ENDPOINT_SOCKETS");
	optind = 0;
	while ((ch = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (ch) {
		case 'd': dir = optarg; break;
		case 's':
			/* in the environment of space-control and its subcommands,
			 * not in their argument lists: a URL may hold a password */
			if (setenv("SPACE_CONTROL_STORE", optarg, 1) < 0) {
				cli_fail("up", "--store: %s", strerror(errno));
				return 1;
			}
			break;
		case 'w':
			if (range_opt("--workers", optarg, 0, UP_WORKERS_MAX, &workers) != 0)
				return 2;
			break;
		case 'c':
			if (range_opt("--capacity", optarg, 1, UP_CAPACITY_MAX, &capacity) != 0)
				return 2;
			break;
		case 'j':
			if (range_opt("--jail-pool", optarg, 0, 256, &jail_pool) != 0)
				return 2;
			break;
		case 'k':
			if (range_opt("--checkpoint-mb", optarg, 0, (1L << 24), &ckmb) != 0)
				return 2;
			break;
		case 'D':
			if (range_opt("--disk-mb", optarg, 16, (1L << 24), &disk_mb) != 0)
				return 2;
			break;
		case 'p':
			errno = 0;
			port = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || port < 1 || port + UP_WORKERS_MAX > 65535) {
				fprintf(stderr, "space: up: bad --port '%s'\n", optarg);
				return 2;
			}
			break;
		case 'f': break;        /* the only mode */
		case 'h': return cli_usage("up", USAGE, 1);
		default: return cli_usage("up", USAGE, 0);
		}
	}
	if (optind != argc)
		return cli_usage("up", USAGE, 0);
	if ((up = calloc(1, sizeof(*up))) == NULL)
		return cli_fail("up", "out of memory");
	up->workers = (int)workers;
	up->capacity = (int)capacity;
	up->jail_pool = (int)jail_pool;
	up->checkpoint_mb = (int)ckmb;
	up->disk_mb = (int)disk_mb;
	up->port = (int)port;
	if (bindir_find(up) != 0 || api_group(group, sizeof(group)) != 0 ||
	    prepare_dirs(up, dir) != 0) {
		free(up);
		return 1;
	}
	if ((rc = up_lock(up->dir, &lockfd)) < 0) {
		ret = rc == -EWOULDBLOCK ?
		    cli_fail("up", "another space up is running on %s (%s/up.lock)", up->dir, up->dir) :
		    cli_fail("up", "cannot lock %s/up.lock: %s", up->dir, strerror(-rc));
		free(up);
		return ret;
	}
	if ((rc = up_init(up)) < 0) {
		cli_fail("up", "event loop: %s", uv_strerror(rc));
		close(lockfd);
		free(up);
		return 1;
	}

	snprintf(url, sizeof(url), "http://127.0.0.1:%d", up->port);
	snprintf(health, sizeof(health), "%s/healthz", url);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", up->port);
	snprintf(ctlbin, sizeof(ctlbin), "%s/space-control", up->bindir);
	snprintf(ctldir, sizeof(ctldir), "%s/control", up->dir);
	for (i = 0; i <= up->workers; i++)
		if ((rc = port_free(up->port + i)) < 0) {
			cli_fail("up", "127.0.0.1:%d: %s; choose another --port (space up uses "
			    "BASE..BASE+%d)", up->port + i, strerror(-rc), up->workers);
			goto out;
		}
	for (i = 1; i <= up->workers; i++)
		if ((rc = port_free(up->port + UP_GW_OFFSET + i)) < 0) {
			cli_fail("up", "127.0.0.1:%d: %s; choose another --port (the workers' netgtw "
			    "listeners use BASE+%d..BASE+%d)", up->port + UP_GW_OFFSET + i, strerror(-rc),
			    UP_GW_OFFSET + 1, UP_GW_OFFSET + up->workers);
			goto out;
		}
	if ((rc = port_free(up->port + UP_EDGE_OFFSET)) < 0 ||
	    (rc = port_free(up->port + UP_E2B_OFFSET)) < 0) {
		cli_fail("up", "127.0.0.1:%d or :%d: %s; choose another --port (space-edge uses "
		    "BASE+%d and BASE+%d)", up->port + UP_EDGE_OFFSET, up->port + UP_E2B_OFFSET,
		    strerror(-rc), UP_EDGE_OFFSET, UP_E2B_OFFSET);
		goto out;
	}
	up_say("starting space-control on %s (data %s) ...", url, ctldir);
	{
		char *cargv[] = { ctlbin, "--data-dir", ctldir, "--listen", listen, NULL };
		if ((rc = up_child_start(up, "space-control", cargv)) < 0) {
			cli_fail("up", "cannot start space-control: %s", uv_strerror(rc));
			goto out;
		}
	}
	if ((rc = wait_for(up, healthy, health, READY_TIMEOUT_MS)) < 0) {
		if (rc == -ETIMEDOUT)
			cli_fail("up", "space-control did not answer %s within %d s; see %s/logs/space-control.log",
			    health, READY_TIMEOUT_MS / 1000, up->dir);
		goto stop;
	}
	up_say("space-control ready");
	if (api_key(up, url, key, sizeof(key)) < 0)
		goto stop;
	for (i = 1; i <= up->workers; i++)
		if (worker_credential(up, i) < 0)
			goto stop;
	if (up->workers > 0) {
		static char *const rootargs[] = { "keys", "root", NULL };
		if (control_admin(up, "keys root", rootargs, root, sizeof(root)) < 0)
			goto stop;
	}
	for (i = 1; i <= up->workers; i++) {
		up_say("starting worker w%d (sbx-manager, node-api on 127.0.0.1:%d) ...", i,
		    up->port + i);
		if (start_worker(up, i, root, group) < 0)
			goto stop;
	}
	for (i = 1; i <= up->workers; i++) {
		snprintf(path, sizeof(path), "%s/w%d/run/sbx-manager.sock", up->dir, i);
		if ((rc = wait_for(up, sock_exists, path, READY_TIMEOUT_MS)) < 0) {
			if (rc == -ETIMEDOUT)
				cli_fail("up", "sbx-manager of w%d made no socket within %d s; see %s/logs/w%d-sbx-manager.log",
				    i, READY_TIMEOUT_MS / 1000, up->dir, i);
			goto stop;
		}
		snprintf(path, sizeof(path), "http://127.0.0.1:%d/healthz", up->port + i);
		if ((rc = wait_for(up, healthy, path, READY_TIMEOUT_MS)) < 0) {
			if (rc == -ETIMEDOUT)
				cli_fail("up", "node-api of w%d did not answer %s within %d s; see %s/logs/w%d-node-api.log",
				    i, path, READY_TIMEOUT_MS / 1000, up->dir, i);
			goto stop;
		}
		up_say("worker w%d ready", i);
	}
	if (up_sockets(up) < 0)
		goto stop;
	if (up_edge_start(up, url, edge, sizeof(edge)) < 0)
		goto stop;
	snprintf(path, sizeof(path), "%s/healthz", edge);
	if ((rc = wait_for(up, healthy, path, READY_TIMEOUT_MS)) < 0) {
		if (rc == -ETIMEDOUT)
			cli_fail("up", "space-edge did not answer %s within %d s; see %s/logs/space-edge.log",
			    path, READY_TIMEOUT_MS / 1000, up->dir);
		goto stop;
	}
	up_say("space-edge ready on %s", edge);
	sodium_memzero(key, sizeof(key));
	summary(up, url, edge);
	up_run(up);
	ret = up->failed;
	goto out;
stop:
	if (!up->stopping)
		up->failed = 1;
	ret = up->failed;
out:
	sodium_memzero(key, sizeof(key));
	up_fini(up);
	if (ret == 0)
		up_say("stopped");
	if (lockfd >= 0)
		close(lockfd);
	free(up);
	return ret;
}
