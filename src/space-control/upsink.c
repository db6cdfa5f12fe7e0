/* Streamed uploads into files (upsink.h) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_common.h"
#include "upsink.h"
#include "util.h"

/* The body arrives in the pieces libmicrohttpd reads (its connection
 * buffer, a few KiB, cut again at each chunk's header), which end
 * anywhere within a page: every write that begins a new page cache page
 * without covering it whole has the file system zero the rest of it
 * first, and the next write fills it again. Pieces are gathered and
 * written in whole, page-aligned blocks of this size instead. */
#define UPSINK_BUF (256u << 10)

/* the gathered bytes to the file: 0, or -1 with the reply made */
static int
sink_drain(struct req *r, const struct upsink_kind *k)
{
	struct upsink *s = r->sink;
	size_t off = 0;
	ssize_t w;

	while (off < s->fill) {
		if ((w = write(s->fd, s->buf + off, s->fill - off)) < 0) {
			if (errno == EINTR)
				continue;
			reply_error(r, errno == ENOSPC ? 507 : 500, "internal",
			    "cannot store the %s: %s", k->what, strerror(errno));
			return -1;
		}
		off += (size_t)w;
	}
	s->written += s->fill;
	s->fill = 0;
	/* the handler fsyncs before the rename: the disk starts now, and
	 * what was written leaves the page cache (clean pages only), so the
	 * next blocks reuse its pages instead of taking fresh memory; a
	 * download reads the file back from the disk */
	fd_writeback_ahead(s->fd, &s->flushed, s->written);
	fd_drop_behind(s->fd, &s->dropped, s->flushed);
	return 0;
}

int
upsink_open(struct req *r, const struct upsink_kind *k, const char *path)
{
	struct upsink *s;

	if ((s = calloc(1, sizeof(*s))) == NULL || (s->buf = malloc(UPSINK_BUF)) == NULL ||
	    (size_t)snprintf(s->tmp, sizeof(s->tmp), "%s%s", path, k->suffix) >= sizeof(s->tmp) ||
	    (s->fd = mkostemp(s->tmp, O_CLOEXEC)) < 0) {
		if (s)
			free(s->buf);
		free(s);
		reply_error(r, 500, "internal", "cannot store the %s", k->what);
		return -1;
	}
	k->init(&s->h);
	r->sink = s;
	return 0;
}

int
upsink_write(struct req *r, const struct upsink_kind *k, uint64_t max, const char *p, size_t n)
{
	struct upsink *s = r->sink;

	if (s->size + n > max) {
		reply_error(r, 413, "too_large", "a %s is at most %llu bytes here", k->what,
		    (unsigned long long)max);
		return -1;
	}
	k->update(&s->h, p, n);
	s->size += n;
	while (n > 0) {
		size_t take = n < UPSINK_BUF - s->fill ? n : UPSINK_BUF - s->fill;

		memcpy(s->buf + s->fill, p, take);
		s->fill += take;
		p += take;
		n -= take;
		if (s->fill == UPSINK_BUF && sink_drain(r, k) < 0)
			return -1;
	}
	return 0;
}

int
upsink_finish(struct req *r, const struct upsink_kind *k)
{
	return sink_drain(r, k);
}

void
upsink_end(struct req *r)
{
	struct upsink *s = r->sink;

	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	if (s->tmp[0])
		unlink(s->tmp);
	free(s->buf);
	free(s);
	r->sink = NULL;
}
