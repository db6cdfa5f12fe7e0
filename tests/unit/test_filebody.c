/* filebody.c: space-control's answer of a file from the disk (an archive,
 * a template image). Served by a real libmicrohttpd daemon and read back
 * over a socket: every byte of files of sizes around its read and
 * alignment boundaries comes back in order and nothing more; a file that
 * shrinks after it was opened ends the answer short (the client sees
 * fewer bytes than the length it was promised, never other bytes); and a
 * file read through O_DIRECT leaves none of its pages in the page cache. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "../../src/space-control/filebody.c"
#include "tap.h"

static char dir[] = "/tmp/test_filebody.XXXXXX";
static off_t shrink_to = -1;    /* >= 0: the handler truncates after opening */
static bool use_direct = true;  /* false: as where the file system refuses O_DIRECT */

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **state)
{
	char path[128];
	struct MHD_Response *resp;
	struct stat st;
	enum MHD_Result ret;
	int fd;

	(void)cls; (void)method; (void)version; (void)upload; (void)upload_size; (void)state;
	snprintf(path, sizeof(path), "%s%s", dir, url);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0)
		return MHD_NO;
	if (shrink_to >= 0 && truncate(path, shrink_to) < 0)
		return MHD_NO;
	if ((resp = use_direct ? filebody_response(fd, (uint64_t)st.st_size) :
	    filebody_response_from(fd, (uint64_t)st.st_size, false)) == NULL)
		return MHD_NO;
	ret = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* GET name over HTTP/1.0: the body (malloc'd) and its length; the
 * Content-Length in *declared */
static unsigned char *
get(uint16_t port, const char *name, size_t *len, long long *declared)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port),
	    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	size_t cap = 1 << 16, n = 0;
	unsigned char *b = malloc(cap), *body;
	char req[256], *h, *cl;
	ssize_t r;
	int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	*len = 0;
	*declared = -1;
	if (s < 0 || b == NULL || connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto fail;
	snprintf(req, sizeof(req), "GET /%s HTTP/1.0\r\nHost: x\r\n\r\n", name);
	if (write(s, req, strlen(req)) != (ssize_t)strlen(req))
		goto fail;
	for (;;) {
		if (n == cap) {
			unsigned char *nb = realloc(b, cap * 2);

			if (nb == NULL)
				goto fail;
			b = nb;
			cap *= 2;
		}
		if ((r = read(s, b + n, cap - n)) <= 0)
			break;
		n += (size_t)r;
	}
	close(s);
	s = -1;
	if ((h = memmem(b, n, "\r\n\r\n", 4)) == NULL)
		goto fail;
	*h = '\0';
	if ((cl = strcasestr((char *)b, "\r\nContent-Length: ")) != NULL)
		*declared = atoll(cl + 18);
	body = (unsigned char *)h + 4;
	*len = n - (size_t)(body - b);
	memmove(b, body, *len);
	return b;
fail:
	if (s >= 0)
		close(s);
	free(b);
	return NULL;
}

static int
put_file(const char *name, const unsigned char *p, size_t n)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
		return -1;
	if (n && write(fd, p, n) != (ssize_t)n) {
		close(fd);
		return -1;
	}
	fsync(fd);
	(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
	close(fd);
	return 0;
}

/* pages of the file in the page cache */
static long
resident(const char *name, size_t n)
{
	char path[128];
	unsigned char *v;
	long pages = (long)((n + 4095) / 4096), in = 0;
	void *m;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (n == 0 || (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -1;
	m = mmap(NULL, n, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED || (v = malloc((size_t)pages)) == NULL)
		return -1;
	if (mincore(m, n, v) == 0)
		for (long i = 0; i < pages; i++)
			in += v[i] & 1;
	else
		in = -1;
	munmap(m, n);
	free(v);
	return in;
}

int
main(void)
{
	static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, FILEBODY_READ - 1, FILEBODY_READ,
	    FILEBODY_READ + 1, 3 * FILEBODY_READ + 123, (8u << 20) + 4096 + 7 };
	size_t big = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1], len;
	unsigned char *data, *got;
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	long long declared;
	uint16_t port;
	char name[64];
	int fd, direct = 0;

	if (mkdtemp(dir) == NULL || (data = malloc(big)) == NULL)
		return 1;
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)((i * 2654435761u) >> 13 ^ i);
	/* does this file system take O_DIRECT at all? */
	snprintf(name, sizeof(name), "%s/probe", dir);
	if ((fd = open(name, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) >= 0) {
		int fl = fcntl(fd, F_GETFL);

		direct = fl >= 0 && fcntl(fd, F_SETFL, fl | O_DIRECT) == 0;
		close(fd);
		unlink(name);
	}
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0,
	    NULL, NULL, handler, NULL, MHD_OPTION_END);
	ok(d != NULL, "daemon started");
	if (d == NULL)
		return done_testing();
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	port = info ? info->port : 0;

	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		snprintf(name, sizeof(name), "f%zu", n);
		ok(put_file(name, data, n) == 0, "a file of %zu bytes, out of the page cache", n);
		got = get(port, name, &len, &declared);
		is_int(declared, (long long)n, "%zu bytes: the length announced", n);
		ok(got != NULL && len == n && (n == 0 || memcmp(got, data, n) == 0),
		    "%zu bytes: every byte back, in order, nothing more (%zu)", n, len);
		free(got);
		if (n >= 4096 && direct)
			is_int(resident(name, n), 0, "%zu bytes: none of its pages entered the page cache",
			    n);
	}
	if (!direct)
		diag("%s takes no O_DIRECT: files were read through the page cache", dir);

	/* a file that shrinks once opened: an answer shorter than announced */
	snprintf(name, sizeof(name), "shrinks");
	ok(put_file(name, data, big) == 0, "a file of %zu bytes", big);
	shrink_to = (off_t)(FILEBODY_READ + 100);
	got = get(port, name, &len, &declared);
	shrink_to = -1;
	is_int(declared, (long long)big, "shrunk after it was opened: the length it had");
	ok(got != NULL && len < big, "the answer ends short (%zu of %zu bytes)", len, big);
	ok(got != NULL && len <= (size_t)FILEBODY_READ + 100 && memcmp(got, data, len) == 0,
	    "and what came is the file's own bytes, none past its new end");
	free(got);

	/* read through the page cache (a file system without O_DIRECT):
	 * the same bytes, and a shrinking file ends the answer short too */
	use_direct = false;
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = sizes[k];

		snprintf(name, sizeof(name), "f%zu", n);
		got = get(port, name, &len, &declared);
		ok(got != NULL && declared == (long long)n && len == n &&
		    (n == 0 || memcmp(got, data, n) == 0),
		    "through the page cache, %zu bytes: every byte back (%zu)", n, len);
		free(got);
	}
	snprintf(name, sizeof(name), "shrinks");
	ok(put_file(name, data, big) == 0, "a file of %zu bytes", big);
	shrink_to = (off_t)(2 * FILEBODY_READ + 7);
	got = get(port, name, &len, &declared);
	shrink_to = -1;
	is_int(declared, (long long)big, "through the page cache, shrunk: the length it had");
	ok(got != NULL && len < big && len <= (size_t)(2 * FILEBODY_READ + 7) &&
	    memcmp(got, data, len) == 0,
	    "through the page cache, shrunk: the answer ends short with the file's own bytes (%zu)",
	    len);
	free(got);

	MHD_stop_daemon(d);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		char path[160];

		snprintf(path, sizeof(path), "%s/f%zu", dir, sizes[k]);
		unlink(path);
	}
	{
		char path[160];

		snprintf(path, sizeof(path), "%s/shrinks", dir);
		unlink(path);
	}
	rmdir(dir);
	free(data);
	return done_testing();
}
