/* node-api: the unprivileged HTTP edge of a worker. It binds its port,
 * drops to an unprivileged user for good, and then parses untrusted HTTP.
 * It holds no key and no record: sbx-manager decides (docs/worker.md). */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pwd.h>
#include <signal.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bearer.h"
#include "log.h"
#include "node-api.h"
#include "util.h"

struct napi_config ncfg;

static void
usage(void)
{
	fprintf(stderr, "usage: node-api --listen ADDR:PORT --manager-socket PATH --worker-id ID\n"
	    "       [--listen-unix PATH] [--user nobody] [--metrics-file PATH] [-v]\n"
	    "       [--http-head-timeout S] [--http-heads-per-ip N] [--http-conns-per-ip N]\n"
	    "       [--tcp-keepalive S]\n");
	exit(2);
}

static int
listen_tcp(const char *spec)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	const char *colon = strrchr(spec, ':');
	unsigned long port;
	char *end;
	int fd, one = 1;

	if (colon == NULL || (size_t)(colon - spec) >= sizeof(host))
		fatalx("--listen wants ADDR:PORT");
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || port == 0 || port > 65535 || inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		fatalx("--listen wants an IPv4 ADDR:PORT");
	sa.sin_port = htons((uint16_t)port);
	if ((fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		fatal("socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		fatal("bind %s", spec);
	if (listen(fd, 512) != 0)
		fatal("listen");
	return fd;
}

/* The same API on a local socket, for clients on this machine: it skips
 * loopback TCP, which bounds a large read here (docs/worker.md, section 1).
 * Mode 0666, the exposure of the TCP port on loopback: every request is
 * checked as there (a capability, compared by sbx-manager). Only a stale
 * socket is replaced, never another kind of file. Bound as root, before
 * the drop, like the TCP port. */
static int
listen_unix(const char *path)
{
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	struct stat st;
	int fd;

	if (path[0] != '/' || strlen(path) >= sizeof(su.sun_path))
		fatalx("--listen-unix wants an absolute path under %zu bytes", sizeof(su.sun_path));
	memcpy(su.sun_path, path, strlen(path) + 1);
	if (lstat(path, &st) == 0) {
		if (!S_ISSOCK(st.st_mode))
			fatalx("--listen-unix %s: exists and is not a socket", path);
		if (unlink(path) != 0)
			fatal("unlink %s", path);
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		fatal("socket");
	if (bind(fd, (struct sockaddr *)&su, sizeof(su)) != 0)
		fatal("bind %s", path);
	if (chmod(path, 0666) != 0)
		fatal("chmod %s", path);
	if (listen(fd, 512) != 0)
		fatal("listen");
	return fd;
}

/* for good: groups, gid, uid, then prove it cannot come back */
static void
drop_privileges(const char *user)
{
	struct passwd *pw;
	uid_t uid;
	gid_t gid;

	if (geteuid() != 0) {
		log_warnx("not started as root: keeping uid %u", (unsigned)geteuid());
		goto nnp;
	}
	if ((pw = getpwnam(user)) == NULL)
		fatalx("unknown user %s", user);
	uid = pw->pw_uid;
	gid = pw->pw_gid;
	if (uid == 0)
		fatalx("--user must not be root");
	/* only the user's primary group: that is the group sbx-manager's
	 * socket is shared with (--api-group) */
	if (setgroups(1, &gid) != 0 || setresgid(gid, gid, gid) != 0 ||
	    setresuid(uid, uid, uid) != 0)
		fatal("dropping privileges to %s", user);
	if (setuid(0) == 0 || seteuid(0) == 0 || setgid(0) == 0)
		fatalx("privileges could be regained after the drop");
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid)
		fatalx("privilege drop incomplete");
nnp:
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fatal("PR_SET_NO_NEW_PRIVS");
}

static unsigned
uint_arg(const char *name, const char *v, unsigned lo, unsigned hi)
{
	char *end;
	unsigned long n;

	errno = 0;
	n = strtoul(v, &end, 10);
	if (errno || end == v || *end || *v == '-' || n < lo || n > hi)
		fatalx("%s must be an integer in %u..%u", name, lo, hi);
	return (unsigned)n;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "listen", required_argument, NULL, 'l' },
		{ "listen-unix", required_argument, NULL, 'U' },
		{ "manager-socket", required_argument, NULL, 'm' },
		{ "worker-id", required_argument, NULL, 'w' },
		{ "user", required_argument, NULL, 'u' },
		{ "metrics-file", required_argument, NULL, 'M' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "http-head-timeout", required_argument, NULL, 'H' },
		{ "http-heads-per-ip", required_argument, NULL, 'P' },
		{ "http-conns-per-ip", required_argument, NULL, 'C' },
		{ "tcp-keepalive", required_argument, NULL, 'K' },
		{ NULL, 0, NULL, 0 }
	};
	const char *listen_spec = NULL, *unix_path = NULL, *user = "nobody";
	struct MHD_Daemon *d, *du = NULL;
	sigset_t set;
	int c, fd, ufd = -1, sig, verbose = 0;

	ncfg.head_timeout = SPACE_HTTP_HEAD_TIMEOUT;
	ncfg.heads_per_ip = SPACE_HTTP_HEADS_PER_IP;
	ncfg.conns_per_ip = SPACE_HTTP_CONN_PER_IP;
	ncfg.tcp_keepalive = SPACE_TCP_KEEPALIVE;

	while ((c = getopt_long(argc, argv, "v", opts, NULL)) != -1) {
		switch (c) {
		case 'l': listen_spec = optarg; break;
		case 'U': unix_path = optarg; break;
		case 'm':
			if (strlen(optarg) >= sizeof(ncfg.manager_socket))
				fatalx("--manager-socket path too long");
			strcpy(ncfg.manager_socket, optarg);
			break;
		case 'w':
			if (!id_valid(optarg))
				fatalx("invalid --worker-id");
			strcpy(ncfg.worker_id, optarg);
			break;
		case 'u': user = optarg; break;
		case 'M': ncfg.metrics_file = optarg; break;
		case 'v': verbose = 1; break;
		case 'H': ncfg.head_timeout = uint_arg("--http-head-timeout", optarg, 1, 3600); break;
		case 'P': ncfg.heads_per_ip = uint_arg("--http-heads-per-ip", optarg, 1, SPACE_HTTP_CONN_MAX); break;
		case 'C': ncfg.conns_per_ip = uint_arg("--http-conns-per-ip", optarg, 1, SPACE_HTTP_CONN_MAX); break;
		case 'K': ncfg.tcp_keepalive = uint_arg("--tcp-keepalive", optarg, 0, 86400); break;
		default: usage();
		}
	}
	if (optind != argc || listen_spec == NULL || !ncfg.manager_socket[0] || !ncfg.worker_id[0])
		usage();
	log_init("node-api", verbose);
	/* two descriptors per client connection and per relayed operation */
	(void)nofile_raise();
	if (sodium_init() < 0)
		fatalx("sodium_init");
	/* capabilities pass through jansson here (bearer.h) */
	space_json_wipe_frees();
	signal(SIGPIPE, SIG_IGN);
	if (unix_path != NULL)
		ufd = listen_unix(unix_path);
	fd = listen_tcp(listen_spec);
	drop_privileges(user);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	manager_spares_start();
	if ((d = http_start(fd)) == NULL)
		fatalx("cannot start the HTTP daemon");
	if (ufd >= 0 && (du = http_start(ufd)) == NULL)
		fatalx("cannot start the HTTP daemon on %s", unix_path);
	log_info("listening on %s%s%s as uid %u, worker %s", listen_spec,
	    unix_path ? " and " : "", unix_path ? unix_path : "", (unsigned)getuid(),
	    ncfg.worker_id);
	while (sigwait(&set, &sig) == 0)
		if (sig == SIGTERM || sig == SIGINT)
			break;
	if (du != NULL)
		MHD_stop_daemon(du);
	MHD_stop_daemon(d);
	close(fd);
	if (ufd >= 0)
		close(ufd);
	return 0;
}
