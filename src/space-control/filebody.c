/* Files answered from the disk (filebody.h).
 *
 * An archive or a template image is read once per download, and the
 * upload that stored it pushed it out of the page cache behind itself
 * (upsink.c). Sent with sendfile, it is read back from the disk into
 * fresh page-cache pages that the receiver's copy is the first to touch:
 * on a virtual machine that copy cost a worker 1.5 to 2 CPU-seconds per
 * GiB of archive (docs/benchmarks.md, "First moves: the pages a
 * download touches"). It is read instead with O_DIRECT into one buffer
 * of the response's own, reused for the whole file, and handed to
 * libmicrohttpd from there: no page of the page cache is taken, and the
 * pages the socket sends from are the same few each time. A file system
 * without O_DIRECT is read the same way through the page cache. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "filebody.h"

/* one read from the disk; a multiple of any block size O_DIRECT asks */
#define FILEBODY_READ  (512u << 10)
#define FILEBODY_ALIGN 4096u

struct filebody {
	int fd;
	uint64_t size;
	unsigned char *buf;     /* FILEBODY_READ bytes, aligned */
	uint64_t at;            /* the file's offset of buf[0] */
	size_t len;             /* bytes of the file in buf */
};

static ssize_t
filebody_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct filebody *f = cls;
	uint64_t at;
	ssize_t n;
	size_t take;

	if (pos >= f->size)
		return MHD_CONTENT_READER_END_OF_STREAM;
	if (pos < f->at || pos >= f->at + f->len) {
		at = pos & ~(uint64_t)(FILEBODY_ALIGN - 1);
		while ((n = pread(f->fd, f->buf, FILEBODY_READ, (off_t)at)) < 0 && errno == EINTR)
			;
		/* shorter than it was when it was opened: the answer ends
		 * before its length, which the client refuses */
		if (n <= 0 || at + (uint64_t)n <= pos)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		f->at = at;
		f->len = (size_t)n;
	}
	take = (size_t)(f->at + f->len - pos);
	if (take > f->size - pos)
		take = (size_t)(f->size - pos);
	if (take > max)
		take = max;
	memcpy(out, f->buf + (pos - f->at), take);
	return (ssize_t)take;
}

static void
filebody_free(void *cls)
{
	struct filebody *f = cls;

	close(f->fd);
	free(f->buf);
	free(f);
}

struct MHD_Response *
filebody_response_from(int fd, uint64_t size, bool direct)
{
	struct MHD_Response *resp;
	struct filebody *f;
	int fl = fcntl(fd, F_GETFL);

	/* a file system that refuses O_DIRECT is read through the page
	 * cache by the same reader, so a file that shrinks ends the
	 * answer the same way (sendfile would be left to spin on it) */
	if (direct && fl >= 0)
		(void)fcntl(fd, F_SETFL, fl | O_DIRECT);
	if ((f = calloc(1, sizeof(*f))) == NULL) {
		close(fd);
		return NULL;
	}
	if (posix_memalign((void **)&f->buf, FILEBODY_ALIGN, FILEBODY_READ) != 0) {
		free(f);
		close(fd);
		return NULL;
	}
	f->fd = fd;
	f->size = size;
	resp = MHD_create_response_from_callback(size, FILEBODY_READ, filebody_read, f,
	    filebody_free);
	if (resp == NULL)
		filebody_free(f);
	return resp;
}

struct MHD_Response *
filebody_response(int fd, uint64_t size)
{
	return filebody_response_from(fd, size, true);
}
