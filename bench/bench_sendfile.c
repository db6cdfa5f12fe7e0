/* A helper of bench/platform.py, not a benchmark of its own: the large
 * file's ceiling over HTTP. One file served by libmicrohttpd (the library
 * node-api uses, the same threading) with no hop behind it: GET answers the
 * file from its descriptor (MHD_create_response_from_fd64, so the library
 * sends it with sendfile: the zero-copy end state of a download), PUT
 * writes the body into a second file and answers after fsync (what fs.write
 * acknowledges). The client (curl) is the same as on the platform's path,
 * so the platform's figure over this one is what the hops cost, and this
 * one over `cat` what HTTP over loopback and the client cost.
 *
 * Beside it, the floor of any server: a plain socket on a port of the
 * kernel's choice that answers every GET with the same file out of memory
 * (mapped and faulted in at start, sent in 1 MiB `send`s from a 1 MiB send
 * buffer), no library, no file read per request. What a client receives
 * from it is what loopback TCP itself carries on this machine.
 *   bench_sendfile PORT GET_FILE PUT_FILE
 * Listens on 127.0.0.1:PORT until killed; prints "ready RAWPORT". */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *get_path, *put_path;

struct put {
	int fd;
	int err;
};

static enum MHD_Result
answer(struct MHD_Connection *c, unsigned status)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (r == NULL)
		return MHD_NO;
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *data, size_t *size, void **con_cls)
{
	struct MHD_Response *r;
	struct put *p = *con_cls;
	struct stat st;
	enum MHD_Result ret;
	ssize_t n;
	size_t off;
	int fd;

	(void)cls;
	(void)url;
	(void)version;
	if (strcmp(method, "GET") == 0) {
		if ((fd = open(get_path, O_RDONLY | O_CLOEXEC)) < 0)
			return answer(c, 404);
		if (fstat(fd, &st) != 0 || (r = MHD_create_response_from_fd64((uint64_t)st.st_size,
		    fd)) == NULL) {
			close(fd);
			return MHD_NO;
		}
		ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (strcmp(method, "PUT") != 0)
		return answer(c, 405);
	if (p == NULL) {
		if ((p = calloc(1, sizeof(*p))) == NULL)
			return MHD_NO;
		p->fd = open(put_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		p->err = p->fd < 0 ? errno : 0;
		*con_cls = p;
		return MHD_YES;
	}
	if (*size) {
		for (off = 0; off < *size && p->err == 0; off += (size_t)n)
			if ((n = write(p->fd, data + off, *size - off)) < 0) {
				if (errno != EINTR)
					p->err = errno;
				n = 0;
			}
		*size = 0;
		return MHD_YES;
	}
	if (p->err == 0 && fsync(p->fd) != 0)
		p->err = errno;
	return answer(c, p->err ? 500 : 200);
}

static void
done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct put *p = *con_cls;

	(void)cls;
	(void)c;
	(void)toe;
	if (p == NULL)
		return;
	if (p->fd >= 0)
		close(p->fd);
	free(p);
	*con_cls = NULL;
}

static const char *raw_mem;
static size_t raw_size;

/* one connection of the raw server: the request's head, then the file */
static void *
raw_conn(void *arg)
{
	int fd = (int)(intptr_t)arg, v = 1 << 20;
	char head[4096];
	size_t hn = 0, off, n;
	ssize_t k;
	int len;

	while (hn < sizeof(head) - 1) {
		k = recv(fd, head + hn, sizeof(head) - 1 - hn, 0);
		if (k <= 0)
			goto out;
		hn += (size_t)k;
		head[hn] = '\0';
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, sizeof(v));
	len = snprintf(head, sizeof(head), "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n", raw_size);
	if (send(fd, head, (size_t)len, MSG_NOSIGNAL | MSG_MORE) != len)
		goto out;
	for (off = 0; off < raw_size; off += (size_t)k) {
		n = raw_size - off < (1u << 20) ? raw_size - off : (1u << 20);
		if ((k = send(fd, raw_mem + off, n, MSG_NOSIGNAL)) <= 0)
			break;
	}
out:
	close(fd);
	return NULL;
}

static void *
raw_server(void *arg)
{
	int lfd = (int)(intptr_t)arg, fd;
	pthread_t t;

	for (;;) {
		if ((fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC)) < 0)
			continue;
		if (pthread_create(&t, NULL, raw_conn, (void *)(intptr_t)fd) != 0)
			close(fd);
		else
			pthread_detach(t);
	}
	return NULL;
}

/* the raw server's socket and thread; its port, or -1 */
static int
raw_start(const char *path)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t sl = sizeof(sa);
	struct stat st;
	pthread_t t;
	int fd, lfd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) != 0 || st.st_size == 0)
		return -1;
	raw_size = (size_t)st.st_size;
	raw_mem = mmap(NULL, raw_size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
	close(fd);
	if (raw_mem == MAP_FAILED)
		return -1;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 16) != 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0 ||
	    pthread_create(&t, NULL, raw_server, (void *)(intptr_t)lfd) != 0)
		return -1;
	return ntohs(sa.sin_port);
}

int
main(int argc, char **argv)
{
	int raw_port;

	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct MHD_Daemon *d;
	long port;

	if (argc != 4 || (port = strtol(argv[1], NULL, 10)) <= 0 || port > 65535) {
		fprintf(stderr, "usage: bench_sendfile PORT GET_FILE PUT_FILE\n");
		return 2;
	}
	get_path = argv[2];
	put_path = argv[3];
	sa.sin_port = htons((uint16_t)port);
	/* node-api's threading and connection memory (src/node-api/http.c) */
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_POLL, (uint16_t)port, NULL, NULL, handler, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64u << 10),
	    MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
	    MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "bench_sendfile: cannot listen on port %ld\n", port);
		return 1;
	}
	if ((raw_port = raw_start(get_path)) < 0) {
		fprintf(stderr, "bench_sendfile: the raw server cannot start\n");
		return 1;
	}
	printf("ready %d\n", raw_port);
	fflush(stdout);
	for (;;)
		pause();
}
