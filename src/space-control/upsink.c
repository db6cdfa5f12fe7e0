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

int
upsink_open(struct req *r, const struct upsink_kind *k, const char *path)
{
	struct upsink *s;

	if ((s = calloc(1, sizeof(*s))) == NULL ||
	    (size_t)snprintf(s->tmp, sizeof(s->tmp), "%s%s", path, k->suffix) >= sizeof(s->tmp) ||
	    (s->fd = mkostemp(s->tmp, O_CLOEXEC)) < 0) {
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
	size_t off = 0;
	ssize_t w;

	if (s->size + n > max) {
		reply_error(r, 413, "too_large", "a %s is at most %llu bytes here", k->what,
		    (unsigned long long)max);
		return -1;
	}
	k->update(&s->h, p, n);
	while (off < n) {
		if ((w = write(s->fd, p + off, n - off)) < 0) {
			if (errno == EINTR)
				continue;
			reply_error(r, errno == ENOSPC ? 507 : 500, "internal",
			    "cannot store the %s: %s", k->what, strerror(errno));
			return -1;
		}
		off += (size_t)w;
	}
	s->size += n;
	/* the handler fsyncs before the rename: the disk starts now */
	fd_writeback_ahead(s->fd, &s->flushed, s->size);
	return 0;
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
	free(s);
	r->sink = NULL;
}
