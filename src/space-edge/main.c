/* space-edge: the public entry of a deployment (docs/network.md).
 *
 *   space-edge --listen ADDR:PORT --control URL --domain DOMAIN
 *              --edge-credential-file F [--user NAME] [--max-conns N]
 *              [--head-timeout S] [--idle-timeout S] [--verbose]
 *              [--e2b-listen ADDR:PORT] [--auth-ttl S]
 *
 * http://{port}-{sandbox}.{domain}/... reaches port {port} of the
 * sandbox through its current worker's gateway. Private ports need the
 * owner's API key (Authorization: Bearer) or the sandbox's traffic token
 * (X-Space-Traffic-Token); public ports need nothing. GET /metrics and
 * /healthz on the bare domain are the edge's own, and the web console
 * (console.c, docs/console.md). Every request is authorized (conn.c):
 * a decision is trusted for --auth-ttl seconds (default 5) and dropped at
 * once when space-control reports a revocation for its sandbox
 * (revoke.c).
 *
 * It holds no signing key; its one secret is the edge credential, which
 * can only ask space-control for routes. Started as root it binds, reads
 * the credential, then becomes --user (default nobody) before it serves. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sodium.h>

#include "e2b.h"
#include "edge.h"
#include "log.h"
#include "util.h"

static void
usage(FILE *f)
{
	fprintf(f, "usage: space-edge --listen ADDR:PORT --control URL --domain DOMAIN\n"
	    "           --edge-credential-file F [--user NAME] [--max-conns N]\n"
	    "           [--head-timeout S] [--idle-timeout S] [--verbose]\n"
	    "           [--e2b-listen ADDR:PORT] [--auth-ttl S]\n");
}

static int
uint_opt(const char *name, const char *v, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || n < lo || n > hi) {
		fprintf(stderr, "space-edge: %s must be an integer in %u..%u\n", name, lo, hi);
		return -1;
	}
	*out = (unsigned)n;
	return 0;
}

/* the credential file: a regular file others cannot read, one line */
static int
read_cred(const char *path, char **out)
{
	char buf[256];
	struct stat sb;
	FILE *f;
	size_t n;

	if ((f = fopen(path, "re")) == NULL || fstat(fileno(f), &sb) < 0) {
		fprintf(stderr, "space-edge: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	/* readable by a group is allowed: an orchestrator hands secrets to a
	 * non-root process through its group (Kubernetes: fsGroup, 0440) */
	if (!S_ISREG(sb.st_mode) || (sb.st_mode & 027) != 0) {
		fprintf(stderr, "space-edge: %s: must be a regular file that others cannot read "
		    "and its group cannot write\n", path);
		fclose(f);
		return -1;
	}
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	if (strncmp(buf, "ek_", 3) != 0 || n > 128 || strpbrk(buf, " \t\r\n") != NULL) {
		fprintf(stderr, "space-edge: %s: not an edge credential (ek_...)\n", path);
		sodium_memzero(buf, sizeof(buf));
		return -1;
	}
	*out = strdup(buf);
	sodium_memzero(buf, sizeof(buf));
	return *out ? 0 : -1;
}

static int
listen_on(const char *spec)
{
	char host[256], *colon;
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
	    .ai_flags = AI_PASSIVE | AI_NUMERICHOST }, *res;
	int fd, one = 1;

	if (strlen(spec) >= sizeof(host))
		return -1;
	snprintf(host, sizeof(host), "%s", spec);
	if ((colon = strrchr(host, ':')) == NULL)
		return -1;
	*colon = '\0';
	if (host[0] == '[' && colon > host && colon[-1] == ']') {
		colon[-1] = '\0';
		memmove(host, host + 1, strlen(host));
	}
	if (getaddrinfo(host[0] ? host : NULL, colon + 1, &hints, &res) != 0)
		return -1;
	fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 || listen(fd, 128) < 0)) {
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

static int
drop_root(const char *user)
{
	struct passwd *pw;

	if (geteuid() != 0)
		return 0;
	if ((pw = getpwnam(user)) == NULL || pw->pw_uid == 0) {
		fprintf(stderr, "space-edge: started as root: --user %s is not an unprivileged user\n",
		    user);
		return -1;
	}
	if (setgroups(0, NULL) < 0 || setgid(pw->pw_gid) < 0 || setuid(pw->pw_uid) < 0 ||
	    setuid(0) == 0) {
		fprintf(stderr, "space-edge: cannot become %s: %s\n", user, strerror(errno));
		return -1;
	}
	return 0;
}

static const char *const refusal_names[REF_N] = {
	[REF_BAD_HEAD] = "bad_head", [REF_HEAD_TOO_LARGE] = "head_too_large",
	[REF_HEAD_TIMEOUT] = "head_timeout", [REF_BAD_HOST] = "bad_host",
	[REF_MISDIRECTED] = "misdirected", [REF_OTHER_HOST] = "other_host_on_connection",
	[REF_TOO_MANY] = "too_many_connections", [REF_UNAUTHENTICATED] = "unauthenticated",
	[REF_FORBIDDEN] = "forbidden", [REF_NOT_FOUND] = "not_found", [REF_CONFLICT] = "conflict",
	[REF_UNAVAILABLE] = "unavailable", [REF_BAD_GATEWAY] = "bad_gateway",
};

char *
edge_metrics(struct edge *e)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	int i;

	if (f == NULL)
		return NULL;
#define C(name, help, v) fprintf(f, "# HELP " name " " help "\n# TYPE " name " counter\n" \
	name " %llu\n", (unsigned long long)atomic_load(&e->st.v))
	C("space_edge_connections_total", "Client connections accepted.", conns_total);
	fprintf(f, "# HELP space_edge_connections_open Client connections open.\n"
	    "# TYPE space_edge_connections_open gauge\nspace_edge_connections_open %llu\n",
	    (unsigned long long)atomic_load(&e->st.conns_open));
	C("space_edge_requests_total", "Request heads received.", requests);
	C("space_edge_routed_total", "Connections admitted by a gateway.", routed);
	C("space_edge_route_resolves_total", "Routes asked of space-control.", resolves);
	C("space_edge_route_cache_hits_total", "Routes taken from the cache.", cache_hits);
	C("space_edge_route_rebuilt_total", "Rebuilt attempts after a gateway's refresh_route.",
	    rebuilt);
	C("space_edge_route_refresh_failed_total", "Rebuilt attempts refused again.", refresh_failed);
	C("space_edge_route_renewed_total", "Capabilities renewed after capability_expired.",
	    renewed);
	C("space_edge_request_checks_total", "Later requests on a connection, authorized again.",
	    checks);
	C("space_edge_revocations_total", "Revocations heard from space-control.", revocations);
	C("space_edge_revoked_entries_total", "Cached decisions dropped by revocations.", dropped);
	C("space_edge_revocation_feed_errors_total", "Failed polls of the revocation feed.",
	    feed_errors);
#undef C
	fprintf(f, "# HELP space_edge_console_requests_total Requests of the web console, by kind.\n"
	    "# TYPE space_edge_console_requests_total counter\n");
	for (i = 0; i < 3; i++)
		fprintf(f, "space_edge_console_requests_total{kind=\"%s\"} %llu\n",
		    (const char *[]){ "static", "control", "node" }[i],
		    (unsigned long long)atomic_load(&e->st.console[i]));
	fprintf(f, "# HELP space_edge_refused_total Requests the edge answered itself, by reason.\n"
	    "# TYPE space_edge_refused_total counter\n");
	for (i = 0; i < REF_N; i++)
		fprintf(f, "space_edge_refused_total{reason=\"%s\"} %llu\n", refusal_names[i],
		    (unsigned long long)atomic_load(&e->st.refused[i]));
	if (fclose(f) != 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void
peer_name(const struct sockaddr_storage *ss, char *out, size_t cap)
{
	char a[INET6_ADDRSTRLEN] = "?";

	if (ss->ss_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)ss)->sin_addr, a, sizeof(a));
	else if (ss->ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)ss)->sin6_addr, a, sizeof(a));
	snprintf(out, cap, "%s", a);
}

/* Connections are accepted by the thread that serves them: threads wait
 * in accept() on the listening socket (the kernel wakes one), so a new
 * connection costs no hand-over to another thread and, while one waits,
 * no thread creation. A thread that takes a connection while no other
 * waits starts one more first; one that finishes goes back to accept()
 * unless ACCEPT_IDLE_MAX already wait, else ends. */
#define ACCEPT_IDLE_START       4
#define ACCEPT_IDLE_MAX         16

static atomic_uint acceptors_idle;

static void *acceptor_thread(void *arg);

static int
acceptor_spawn(struct edge *e)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, 256 << 10);
	atomic_fetch_add(&acceptors_idle, 1);
	if ((rc = pthread_create(&t, &attr, acceptor_thread, e)) != 0)
		atomic_fetch_sub(&acceptors_idle, 1);
	pthread_attr_destroy(&attr);
	return rc;
}

/* accept and serve, one connection at a time; returns when this thread
 * is one waiting thread too many (never for the main thread) */
static void *
acceptor_run(struct edge *e, bool for_good)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t sl = sizeof(ss);
		struct edge_conn_arg *a;
		int fd, one = 1;

		fd = accept4(e->listen_fd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
				usleep(100000);
			continue;
		}
		atomic_fetch_add(&e->st.conns_total, 1);
		if (atomic_load(&e->st.conns_open) >= e->cfg.max_conns) {
			static const char busy[] = "HTTP/1.1 503 Service Unavailable\r\n"
			    "Content-Length: 0\r\nRetry-After: 1\r\nConnection: close\r\n\r\n";
			atomic_fetch_add(&e->st.refused[REF_TOO_MANY], 1);
			(void)send(fd, busy, sizeof(busy) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
			close(fd);
			continue;
		}
		if ((a = calloc(1, sizeof(*a))) == NULL) {
			close(fd);
			continue;
		}
		/* answers go out as the gateway hands them over */
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		a->e = e;
		a->fd = fd;
		peer_name(&ss, a->peer, sizeof(a->peer));
		atomic_fetch_add(&e->st.conns_open, 1);
		/* this thread is busy now: someone else waits in accept() */
		if (atomic_fetch_sub(&acceptors_idle, 1) == 1)
			(void)acceptor_spawn(e);
		edge_conn_main(a);      /* frees a, closes fd */
		if (!for_good && atomic_load(&acceptors_idle) >= ACCEPT_IDLE_MAX)
			return NULL;
		atomic_fetch_add(&acceptors_idle, 1);
	}
}

static void *
acceptor_thread(void *arg)
{
	return acceptor_run(arg, false);
}

static void *
acceptor_main(struct edge *e)
{
	atomic_fetch_add(&acceptors_idle, 1);
	return acceptor_run(e, true);
}

int
main(int argc, char **argv)
{
	enum { O_LISTEN = 1, O_CONTROL, O_DOMAIN, O_CRED, O_USER, O_MAXC, O_HEAD, O_IDLE, O_VERB,
	    O_HELP, O_E2B, O_TTL };
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, O_LISTEN },
		{ "control", required_argument, NULL, O_CONTROL },
		{ "domain", required_argument, NULL, O_DOMAIN },
		{ "edge-credential-file", required_argument, NULL, O_CRED },
		{ "user", required_argument, NULL, O_USER },
		{ "max-conns", required_argument, NULL, O_MAXC },
		{ "head-timeout", required_argument, NULL, O_HEAD },
		{ "idle-timeout", required_argument, NULL, O_IDLE },
		{ "verbose", no_argument, NULL, O_VERB },
		{ "help", no_argument, NULL, O_HELP },
		{ "e2b-listen", required_argument, NULL, O_E2B },
		{ "auth-ttl", required_argument, NULL, O_TTL },
		{ NULL, 0, NULL, 0 },
	};
	static struct edge e;
	const char *cred_file = NULL, *e2b_listen = NULL;
	int e2b_fd = -1;
	int o, i;

	e.cfg.user = "nobody";
	e.cfg.max_conns = 512;
	e.cfg.head_timeout = 10;
	e.cfg.idle_timeout = 300;
	e.cfg.connect_timeout = 5;
	e.cfg.cache_ttl = 5;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case O_LISTEN: e.cfg.listen = optarg; break;
		case O_CONTROL: e.cfg.control = optarg; break;
		case O_DOMAIN: e.cfg.domain = optarg; break;
		case O_CRED: cred_file = optarg; break;
		case O_USER: e.cfg.user = optarg; break;
		case O_MAXC:
			if (uint_opt("--max-conns", optarg, 1, 65536, &e.cfg.max_conns) < 0)
				return 2;
			break;
		case O_HEAD:
			if (uint_opt("--head-timeout", optarg, 1, 300, &e.cfg.head_timeout) < 0)
				return 2;
			break;
		case O_IDLE:
			if (uint_opt("--idle-timeout", optarg, 1, 86400, &e.cfg.idle_timeout) < 0)
				return 2;
			break;
		case O_VERB: e.cfg.verbose = 1; break;
		case O_E2B: e2b_listen = optarg; break;
		case O_TTL:
			if (uint_opt("--auth-ttl", optarg, 1, 60, &e.cfg.cache_ttl) < 0)
				return 2;
			break;
		case O_HELP: usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind != argc || !e.cfg.listen || !e.cfg.control || !e.cfg.domain || !cred_file) {
		usage(stderr);
		return 2;
	}
	/* the domain as it appears in Host values: a name and maybe :PORT */
	for (i = 0; e.cfg.domain[i]; i++) {
		char ch = e.cfg.domain[i];
		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
		    ch == '.' || ch == '-' || ch == ':') || i > 200) {
			fprintf(stderr, "space-edge: --domain must be a host name, maybe with :PORT\n");
			return 2;
		}
	}
	if (i == 0 || (strncmp(e.cfg.control, "http://", 7) != 0 &&
	    strncmp(e.cfg.control, "https://", 8) != 0)) {
		fprintf(stderr, "space-edge: --control must be an http(s) URL, --domain not empty\n");
		return 2;
	}
	log_init(EDGE_PROG, e.cfg.verbose);
	if (sodium_init() < 0)
		return 1;
	if (read_cred(cred_file, &e.cfg.cred) < 0)
		return 1;
	if ((e.listen_fd = listen_on(e.cfg.listen)) < 0) {
		fprintf(stderr, "space-edge: cannot listen on %s: %s\n", e.cfg.listen, strerror(errno));
		return 1;
	}
	/* the E2B-compatible API (docs/e2b.md): a listener of its own */
	if (e2b_listen && (e2b_fd = listen_on(e2b_listen)) < 0) {
		fprintf(stderr, "space-edge: cannot listen on %s: %s\n", e2b_listen, strerror(errno));
		return 1;
	}
	if (drop_root(e.cfg.user) < 0)
		return 1;
	(void)prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	(void)prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);       /* the credential stays in this process */
	signal(SIGPIPE, SIG_IGN);
	if (edge_routes_init(&e) < 0)
		return 1;
	if (edge_feed_start(&e) < 0)
		log_warnx("no revocation feed: decisions end by --auth-ttl only");
	if (e2b_fd >= 0) {
		/* the E2B API's own route caches keep their 60 s (not the
		 * port URLs' --auth-ttl) */
		struct e2b_cfg ec = { .control = e.cfg.control, .cache_ttl = 60,
		    .verbose = e.cfg.verbose };
		if (e2b_start(&ec, e2b_fd) == NULL) {
			fprintf(stderr, "space-edge: cannot serve the E2B API on %s\n", e2b_listen);
			return 1;
		}
		log_info("E2B API on %s", e2b_listen);
	}
	log_info("listening on %s for *.%s (control %s)", e.cfg.listen, e.cfg.domain, e.cfg.control);
	for (i = 1; i < ACCEPT_IDLE_START; i++)
		(void)acceptor_spawn(&e);
	(void)acceptor_main(&e);        /* the main thread accepts too, for good */
	return 1;
}
