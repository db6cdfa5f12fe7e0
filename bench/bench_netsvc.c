/* A helper of bench/net_bench.py, not a benchmark of its own: the servers
 * inside the sandbox and the load client, both in C so that neither end is
 * the speed of a Python loop.
 *
 *   bench_netsvc serve HTTP_PORT TCP_PORT
 *       on 127.0.0.1 (run inside the sandbox): HTTP/1.1 answering every
 *       request head with 200 and a 6-byte body, keep-alive unless the
 *       request says "Connection: close"; raw TCP taking one line,
 *       "PUT N" (then N bytes, answered "OK\n" once all arrived) or
 *       "GET N" (answered with N bytes, then closed). A thread per
 *       connection.
 *   bench_netsvc http ADDR:PORT HOST CONNS REQS keep|fresh NETNS CAP SVCPORT
 *       CONNS threads, REQS requests in all: "keep" sends a thread's
 *       requests on one connection, "fresh" opens a connection per request
 *       (Connection: close). Prints
 *       "n=N errors=E secs=S rps=R p50=US p90=US p99=US" (per request,
 *       microseconds; a fresh request's time includes its connect and the
 *       gateway hello).
 *   bench_netsvc tcp ADDR:PORT put|get BYTES NETNS CAP SVCPORT
 *       one connection moving BYTES one way; prints "bytes=N secs=S mbs=R"
 *       (1 MB = 10^6 bytes), from the connect to the last byte (get) or the
 *       server's "OK" (put).
 *
 * NETNS: "-", or a network namespace (/proc/PID/ns/net) the client enters
 * before its first socket: the direct baseline, the sandbox's own
 * 127.0.0.1. CAP: "-", or a service capability: every connection first
 * sends netgtw's hello (docs/network.md, "The gateway hello") for SVCPORT
 * and waits for {"ok":true}. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <jansson.h>

#define BUFSZ (256 * 1024)

static const char *g_host, *g_cap, *g_mode;
static struct sockaddr_in g_addr;
static int g_svcport, g_fresh;

static double
now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int
write_all(int fd, const void *b, size_t n)
{
	const char *p = b;

	while (n > 0) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static int
read_full(int fd, void *b, size_t n)
{
	char *p = b;

	while (n > 0) {
		ssize_t r = read(fd, p, n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* ---- the servers ---- */

static const char RESP[] = "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nhello\n";
static const char RESP_CLOSE[] =
    "HTTP/1.1 200 OK\r\nContent-Length: 6\r\nConnection: close\r\n\r\nhello\n";

static void *
http_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, one = 1;
	char buf[16384];
	size_t have = 0;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (;;) {
		char *end;
		ssize_t r;

		buf[have] = '\0';
		while ((end = strstr(buf, "\r\n\r\n")) != NULL) {
			size_t used = (size_t)(end + 4 - buf);
			int close_it;

			*end = '\0';
			close_it = strcasestr(buf, "connection: close") != NULL;
			if (write_all(fd, close_it ? RESP_CLOSE : RESP,
			    close_it ? sizeof(RESP_CLOSE) - 1 : sizeof(RESP) - 1) < 0 || close_it)
				goto out;
			memmove(buf, buf + used, have - used);
			have -= used;
			buf[have] = '\0';
		}
		if (have >= sizeof(buf) - 1)
			goto out;       /* a head this large is not ours */
		r = read(fd, buf + have, sizeof(buf) - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			goto out;
		have += (size_t)r;
	}
out:
	close(fd);
	return NULL;
}

static void *
tcp_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char *buf = malloc(BUFSZ), *nl, verb[8];
	unsigned long long n, got;
	size_t have = 0;
	ssize_t r;

	if (buf == NULL)
		goto out;
	while ((nl = memchr(buf, '\n', have)) == NULL) {
		if (have >= 64)
			goto out;
		if ((r = read(fd, buf + have, 64 - have)) <= 0)
			goto out;
		have += (size_t)r;
	}
	*nl = '\0';
	if (sscanf(buf, "%7s %llu", verb, &n) != 2)
		goto out;
	got = have - (size_t)(nl + 1 - buf);
	if (strcmp(verb, "PUT") == 0) {
		while (got < n) {
			r = read(fd, buf, BUFSZ);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				goto out;
			got += (unsigned long long)r;
		}
		write_all(fd, "OK\n", 3);
	} else if (strcmp(verb, "GET") == 0) {
		memset(buf, 'x', BUFSZ);
		while (n > 0) {
			size_t k = n < BUFSZ ? (size_t)n : BUFSZ;
			if (write_all(fd, buf, k) < 0)
				goto out;
			n -= k;
		}
	}
out:
	free(buf);
	close(fd);
	return NULL;
}

struct listener {
	int fd;
	void *(*fn)(void *);
};

static void *
accept_loop(void *arg)
{
	struct listener *l = arg;

	for (;;) {
		pthread_t t;
		int c = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);

		if (c < 0) {
			if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE)
				continue;
			return NULL;
		}
		if (pthread_create(&t, NULL, l->fn, (void *)(intptr_t)c) != 0)
			close(c);
		else
			pthread_detach(t);
	}
}

static int
listen_on(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 512) < 0) {
		fprintf(stderr, "bench_netsvc: port %d: %s\n", port, strerror(errno));
		return -1;
	}
	return fd;
}

static int
serve(int http_port, int tcp_port)
{
	static struct listener h, t;
	pthread_t th;

	if ((h.fd = listen_on(http_port)) < 0 || (t.fd = listen_on(tcp_port)) < 0)
		return 1;
	h.fn = http_conn;
	t.fn = tcp_conn;
	if (pthread_create(&th, NULL, accept_loop, &t) != 0)
		return 1;
	accept_loop(&h);
	return 1;
}

/* ---- the client ---- */

/* a connection, through netgtw's hello when there is a capability */
static int
dial(const char *proto)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	char hdr[8], body[4096];
	uint32_t n;
	json_t *hello, *ans;
	char *txt;
	int ok;

	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&g_addr, sizeof(g_addr)) < 0)
		goto fail;
	if (g_cap == NULL)
		return fd;
	hello = json_pack("{s:s, s:i, s:s}", "capability", g_cap, "port", g_svcport, "proto", proto);
	txt = hello ? json_dumps(hello, JSON_COMPACT) : NULL;
	json_decref(hello);
	if (txt == NULL)
		goto fail;
	n = htonl((uint32_t)strlen(txt));
	memcpy(hdr, "SGW1", 4);
	memcpy(hdr + 4, &n, 4);
	ok = write_all(fd, hdr, 8) == 0 && write_all(fd, txt, strlen(txt)) == 0;
	free(txt);
	if (!ok || read_full(fd, hdr, 8) < 0 || memcmp(hdr, "SGW1", 4) != 0)
		goto fail;
	memcpy(&n, hdr + 4, 4);
	n = ntohl(n);
	if (n == 0 || n >= sizeof(body) || read_full(fd, body, n) < 0)
		goto fail;
	ans = json_loadb(body, n, 0, NULL);
	ok = ans != NULL && json_is_true(json_object_get(ans, "ok"));
	if (!ok)
		fprintf(stderr, "bench_netsvc: gateway: %.*s\n", (int)n, body);
	json_decref(ans);
	if (ok)
		return fd;
fail:
	close(fd);
	return -1;
}

/* one response: the head, then Content-Length bytes of body */
static int
read_response(int fd, char *buf, size_t cap)
{
	size_t have = 0;
	char *end, *cl;
	long body;

	for (;;) {
		ssize_t r = read(fd, buf + have, cap - 1 - have);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		have += (size_t)r;
		buf[have] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) != NULL)
			break;
		if (have >= cap - 1)
			return -1;
	}
	if (strncmp(buf, "HTTP/1.1 200", 12) != 0)
		return -1;
	*end = '\0';
	cl = strcasestr(buf, "content-length:");
	body = cl ? strtol(cl + 15, NULL, 10) : 0;
	body -= (long)(have - (size_t)(end + 4 - buf));
	while (body > 0) {
		ssize_t r = read(fd, buf, cap < (size_t)body ? cap : (size_t)body);
		if (r <= 0)
			return -1;
		body -= r;
	}
	return 0;
}

struct worker {
	pthread_t t;
	int reqs, errors, done;
	double *lat;
};

static void *
http_worker(void *arg)
{
	struct worker *w = arg;
	char req[1024], buf[16384];
	int fd = -1, i, len;

	len = snprintf(req, sizeof(req), "GET / HTTP/1.1\r\nHost: %s\r\n%s\r\n", g_host,
	    g_fresh ? "Connection: close\r\n" : "");
	for (i = 0; i < w->reqs; i++) {
		double t0 = now_us();

		if (fd < 0 && (fd = dial("http")) < 0)
			goto err;
		if (write_all(fd, req, (size_t)len) < 0 || read_response(fd, buf, sizeof(buf)) < 0)
			goto err;
		if (g_fresh) {
			close(fd);
			fd = -1;
		}
		w->lat[w->done++] = now_us() - t0;
		continue;
err:
		w->errors++;
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(const double *s, int n, double p)
{
	int k = (int)(p / 100.0 * n + 0.5) - 1;

	if (n == 0)
		return 0;
	return s[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static int
run_http(int conns, int reqs)
{
	struct worker *w = calloc((size_t)conns, sizeof(*w));
	double *all, t0, secs;
	int i, n = 0, errors = 0;

	all = calloc((size_t)reqs + 1, sizeof(double));
	if (w == NULL || all == NULL)
		return 1;
	t0 = now_us();
	for (i = 0; i < conns; i++) {
		w[i].reqs = reqs / conns + (i < reqs % conns);
		w[i].lat = calloc((size_t)w[i].reqs + 1, sizeof(double));
		if (w[i].lat == NULL || pthread_create(&w[i].t, NULL, http_worker, &w[i]) != 0)
			return 1;
	}
	for (i = 0; i < conns; i++) {
		pthread_join(w[i].t, NULL);
		memcpy(all + n, w[i].lat, (size_t)w[i].done * sizeof(double));
		n += w[i].done;
		errors += w[i].errors;
		free(w[i].lat);
	}
	secs = (now_us() - t0) / 1e6;
	qsort(all, (size_t)n, sizeof(double), cmp_d);
	printf("n=%d errors=%d secs=%.6f rps=%.1f p50=%.1f p90=%.1f p99=%.1f\n", n, errors, secs,
	    n / secs, pct(all, n, 50), pct(all, n, 90), pct(all, n, 99));
	free(all);
	free(w);
	return errors ? 1 : 0;
}

static int
run_tcp(const char *dir, unsigned long long bytes)
{
	char *buf = malloc(BUFSZ), line[64];
	unsigned long long left = bytes;
	double t0 = now_us(), secs;
	int fd, put = strcmp(dir, "put") == 0;

	if (buf == NULL || (fd = dial("tcp")) < 0)
		return 1;
	snprintf(line, sizeof(line), "%s %llu\n", put ? "PUT" : "GET", bytes);
	if (write_all(fd, line, strlen(line)) < 0)
		return 1;
	if (put) {
		memset(buf, 'x', BUFSZ);
		while (left > 0) {
			size_t k = left < BUFSZ ? (size_t)left : BUFSZ;
			if (write_all(fd, buf, k) < 0)
				return 1;
			left -= k;
		}
		if (read_full(fd, line, 3) < 0 || memcmp(line, "OK\n", 3) != 0)
			return 1;
	} else {
		while (left > 0) {
			ssize_t r = read(fd, buf, BUFSZ);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				return 1;
			left -= (unsigned long long)r < left ? (unsigned long long)r : left;
		}
	}
	secs = (now_us() - t0) / 1e6;
	close(fd);
	free(buf);
	printf("bytes=%llu secs=%.6f mbs=%.1f\n", bytes, secs, bytes / 1e6 / secs);
	return 0;
}

/* the client's end: address, namespace, hello */
static int
client_setup(const char *addr, const char *netns, const char *cap, const char *svcport)
{
	char host[64];
	const char *colon = strrchr(addr, ':');

	if (colon == NULL || (size_t)(colon - addr) >= sizeof(host))
		return -1;
	memcpy(host, addr, (size_t)(colon - addr));
	host[colon - addr] = '\0';
	g_addr.sin_family = AF_INET;
	g_addr.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &g_addr.sin_addr) != 1)
		return -1;
	if (strcmp(netns, "-") != 0) {
		/* before any thread and any socket: each socket belongs to the
		 * namespace it was made in */
		int fd = open(netns, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET) < 0) {
			fprintf(stderr, "bench_netsvc: %s: %s\n", netns, strerror(errno));
			return -1;
		}
		close(fd);
	}
	g_cap = strcmp(cap, "-") == 0 ? NULL : cap;
	g_svcport = atoi(svcport);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && strcmp(argv[1], "serve") == 0)
		return serve(atoi(argv[2]), atoi(argv[3]));
	if (argc == 10 && strcmp(argv[1], "http") == 0) {
		int conns = atoi(argv[4]), reqs = atoi(argv[5]);

		g_host = argv[3];
		g_mode = argv[6];
		g_fresh = strcmp(g_mode, "fresh") == 0;
		if (conns < 1 || reqs < conns || client_setup(argv[2], argv[7], argv[8], argv[9]) < 0)
			return 2;
		return run_http(conns, reqs);
	}
	if (argc == 8 && strcmp(argv[1], "tcp") == 0) {
		if (client_setup(argv[2], argv[5], argv[6], argv[7]) < 0)
			return 2;
		return run_tcp(argv[3], strtoull(argv[4], NULL, 10));
	}
	fprintf(stderr, "usage: bench_netsvc serve HTTP_PORT TCP_PORT\n"
	    "       bench_netsvc http ADDR:PORT HOST CONNS REQS keep|fresh NETNS CAP SVCPORT\n"
	    "       bench_netsvc tcp ADDR:PORT put|get BYTES NETNS CAP SVCPORT\n");
	return 2;
}
