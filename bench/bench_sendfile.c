/* A helper of bench/platform.py, not a benchmark of its own: the large
 * file's ceiling over HTTP. One file served by libmicrohttpd (the library
 * node-api uses, the same threading) with no hop behind it: GET answers the
 * file from its descriptor (MHD_create_response_from_fd64, so the library
 * sends it with sendfile: the zero-copy end state of a download), PUT
 * writes the body into a second file and answers after fsync (what fs.write
 * acknowledges). The client (curl) is the same as on the platform's path,
 * so the platform's figure over this one is what the hops cost, and this
 * one over `cat` what HTTP over loopback and the client cost.
 *   bench_sendfile PORT GET_FILE PUT_FILE
 * Listens on 127.0.0.1:PORT until killed. */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int
main(int argc, char **argv)
{
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
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
