/* The download loop of the worker's two caches (template.c: template
 * images, snapblob.c: snapshot archives): the control client writes the
 * bytes it fetched into a pipe; this process hashes each piece as it
 * comes out and writes it into the cache's temporary file. The child
 * never holds the file, so nothing it does can change the bytes after
 * they were hashed. One buffer of FETCH_BUF per transfer, whatever the
 * size of what travels. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "sbx-manager.h"
#include "util.h"

#define FETCH_BUF (1u << 20)

int
fetch_pipe(int rfd, int fd, uint64_t max, void (*update)(void *, const void *, size_t), void *h,
    bool durable)
{
	struct pollfd p = { .fd = rfd, .events = POLLIN };
	uint64_t total = 0, flushed = 0;
	ssize_t n, w;
	size_t off;
	char *buf;
	int r;

	if ((buf = malloc(FETCH_BUF)) == NULL)
		return -ENOMEM;
	/* a larger pipe: fewer wake-ups of both ends (as large as the
	 * system allows; the default is enough to work) */
	(void)fcntl(rfd, F_SETPIPE_SZ, (int)FETCH_BUF);
	for (;;) {
		if ((r = poll(&p, 1, 60 * 1000)) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (r == 0) {
			r = -ETIMEDOUT;
			break;
		}
		if ((n = read(rfd, buf, FETCH_BUF)) < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			break;
		}
		if (n == 0) {
			r = 0;
			break;
		}
		if (total + (uint64_t)n > max) {
			r = -EFBIG;
			break;
		}
		total += (uint64_t)n;
		update(h, buf, (size_t)n);
		for (off = 0, r = 0; off < (size_t)n && r == 0; off += (size_t)w)
			if ((w = write(fd, buf + off, (size_t)n - off)) < 0) {
				w = 0;
				if (errno != EINTR)
					r = -errno;
			}
		if (r < 0)
			break;
		/* a caller that fsyncs at the end waits for the tail only; a
		 * copy that is not made durable is left to the kernel */
		if (durable)
			fd_writeback_ahead(fd, &flushed, total);
	}
	free(buf);
	return r;
}
