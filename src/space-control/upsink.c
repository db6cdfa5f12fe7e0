/* Streamed uploads into files (upsink.h) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "api_common.h"
#include "control.h"
#include "hashaside.h"
#include "log.h"
#include "upsink.h"
#include "util.h"

/* The body arrives in the pieces libmicrohttpd reads (its connection
 * buffer, a few KiB, cut again at each chunk's header), which end
 * anywhere within a page: every write that begins a new page cache page
 * without covering it whole has the file system zero the rest of it
 * first, and the next write fills it again. Pieces are gathered and
 * written in whole, page-aligned blocks of this size instead. */
#define UPSINK_BUF (256u << 10)
/* Past its first MiB an upload is hashed on a thread of its own
 * (hashaside.h), block by block, while this one receives and writes the
 * next: the hash was about half of this thread's time on a large upload.
 * Its blocks are then the slots of that thread's ring. */
#define UPSINK_ASIDE_AFTER (1u << 20)
#define UPSINK_ASIDE_SLOTS 3

/* the gathered bytes to the file: 0, or -1 with the reply made */
static int
sink_drain(struct req *r, const struct upsink_kind *k)
{
	struct upsink *s = r->sink;
	struct statvfs fs;
	size_t off = 0;
	ssize_t w;

	if (s->fill == 0)
		return 0;
	/* the store's disk is also the database's (SQLite) and every other
	 * upload's: one worker's uploads, however many, never take it all */
	if (r->ctl->cfg.store_min_free_mb > 0 && fstatvfs(s->fd, &fs) == 0 &&
	    (uint64_t)fs.f_bavail * fs.f_frsize < s->fill +
	    ((uint64_t)r->ctl->cfg.store_min_free_mb << 20)) {
		log_warnx("an upload of a %s stopped after %llu bytes: its disk would have less "
		    "than %lld MiB free (--store-min-free-mb)", k->what,
		    (unsigned long long)s->written, (long long)r->ctl->cfg.store_min_free_mb);
		reply_error(r, 507, "insufficient_storage", "the %s does not fit: the store keeps "
		    "%lld MiB of its disk free", k->what, (long long)r->ctl->cfg.store_min_free_mb);
		return -1;
	}
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
	/* the block to the hash, in order: here, or to the thread, whose
	 * next free slot is the next block */
	if (s->aside != NULL) {
		hashaside_put(s->aside, s->fill);
		s->buf = hashaside_slot(s->aside);
	} else {
		k->update(&s->h, s->buf, s->fill);
		if (s->written >= UPSINK_ASIDE_AFTER && !s->aside_failed) {
			if ((s->aside = hashaside_start(k->update, &s->h, UPSINK_BUF,
			    UPSINK_ASIDE_SLOTS)) != NULL)
				s->buf = hashaside_slot(s->aside);
			else
				s->aside_failed = true;
		}
	}
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

	if ((s = calloc(1, sizeof(*s))) == NULL || (s->own = malloc(UPSINK_BUF)) == NULL ||
	    (size_t)snprintf(s->tmp, sizeof(s->tmp), "%s%s", path, k->suffix) >= sizeof(s->tmp) ||
	    (s->fd = mkostemp(s->tmp, O_CLOEXEC)) < 0) {
		if (s)
			free(s->own);
		free(s);
		reply_error(r, 500, "internal", "cannot store the %s", k->what);
		return -1;
	}
	k->init(&s->h);
	s->buf = s->own;
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
	struct upsink *s = r->sink;
	int ret = sink_drain(r, k);

	/* every block hashed before the handler reads the hash */
	hashaside_end(s->aside);
	s->aside = NULL;
	s->buf = s->own;
	return ret;
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
	hashaside_end(s->aside);
	free(s->own);
	free(s);
	r->sink = NULL;
}
