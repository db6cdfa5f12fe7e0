/* A streamed upload (templates.c: images, archive_blobs.c: snapshot
 * archives): its body goes into a temporary file beside its final name,
 * hashed as it arrives (block by block; past the first MiB on a thread of
 * its own) and bounded; the route's handler then compares the
 * hash with the path's digest and renames the file into place, or the
 * end of the request removes it. Memory: one struct and one buffer, and
 * the hash thread's three (upsink.c), whatever the size. */
#ifndef SPACE_CONTROL_UPSINK_H
#define SPACE_CONTROL_UPSINK_H

#include <linux/limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "snapshot.h"
#include "tplimage.h"

struct req;

struct upsink_kind {
	const char *what;               /* in errors: "template image" */
	const char *suffix;             /* of the temporary name, ends in XXXXXX */
	void (*init)(void *h);
	void (*update)(void *h, const void *p, size_t n);
};

struct upsink {
	int fd;
	char tmp[PATH_MAX + 96];
	uint64_t size;                  /* bytes taken */
	uint64_t written;               /* of them, in the file */
	uint64_t flushed;               /* of those, handed to the disk */
	uint64_t dropped;               /* of those, out of the page cache */
	unsigned char *buf;             /* taken, not yet written: own, or a slot of aside's */
	unsigned char *own;
	size_t fill;
	struct hashaside *aside;        /* the hash's thread, past the first MiB */
	bool aside_failed;              /* it could not start: hashed here */
	union {                         /* the kind's hash state */
		struct tpl_hash image;
		struct snapshot_hash archive;
	} h;
};

/* r->sink for path (the final name): made at the first piece; 0, or -1
 * with the reply made (500) */
int  upsink_open(struct req *r, const struct upsink_kind *k, const char *path);
/* one piece of the body: 0, or -1 with the reply made (413 beyond max,
 * 507 disk full, 500) */
int  upsink_write(struct req *r, const struct upsink_kind *k, uint64_t max, const char *p, size_t n);
/* the rest of the body into the file and into the hash, before the
 * handler reads the hash (it is whole only then) and fsyncs: 0, or -1
 * with the reply made; again, nothing more */
int  upsink_finish(struct req *r, const struct upsink_kind *k);
/* the end of the request: a file not renamed into place is removed */
void upsink_end(struct req *r);

#endif
