/* The snapshot archives the control plane keeps (docs/recovery.md,
 * "Archives over HTTP"): workers upload each archive they make and
 * download the ones an install needs, by digest, with their own worker
 * credential (the path's worker must be the credential's, as on every
 * worker route; an API key is refused):
 *
 *   PUT /v1/workers/ID/archives/DIGEST   the body is the archive
 *   POST /v1/workers/ID/archives/stream  the body is an archive whose
 *                                        digest is known at its end only:
 *                                        the one its trailer names
 *   GET /v1/workers/ID/archives/DIGEST   the archive, if a snapshot of a
 *                                        sandbox with an execution placed
 *                                        on ID, not ended, is that digest
 *                                        (else 404, as for none)
 *
 *   DATA/archives/DIGEST.snap            0400, kept only if its bytes are
 *                                        the digest
 *
 * An upload is streamed to a temporary file and hashed on the way
 * (snapshot_hash: the body's digest, and the trailer repeating it),
 * bounded by --archive-max-mb; it is renamed into place only if the bytes
 * are the digest the path names; a streamed one (sent while the worker
 * makes it, chunked) is kept under the digest its trailer names only if
 * that is its body's digest, which the path cannot name in advance:
 * a truncated, damaged or padded body is refused and nothing is kept.
 * Nothing here parses an archive but for its first frames, which name
 * the archive it is a delta of (archive_blob_base, for the snapshot
 * rows): the worker that restores it verifies every entry before it
 * creates anything. The collection (archive_blobs_collect) asks the store the
 * same question a worker's offer does (store_archives.c). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "snapshot.h"
#include "templates.h"
#include "upsink.h"
#include "util.h"

static void
hash_init(void *h)
{
	snapshot_hash_init(h);
}

static void
hash_update(void *h, const void *p, size_t n)
{
	snapshot_hash_update(h, p, n);
}

static const struct upsink_kind archive_kind = {
	.what = "snapshot archive", .suffix = ".tmp.XXXXXX", .init = hash_init, .update = hash_update,
};

/* the worker an archive came from (publish), for the collection */
#define ARCHIVE_XATTR_WORKER "user.space.worker"

static int
adir(const struct ctl *c, char *out, size_t cap)
{
	if ((size_t)snprintf(out, cap, "%s/archives", c->cfg.data_dir) >= cap)
		return -ENAMETOOLONG;
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int
apath(const struct ctl *c, const char *digest, char *out, size_t cap)
{
	char d[PATH_MAX + 16];
	int r;

	if (!snapshot_digest_valid(digest))
		return -EINVAL;
	if ((r = adir(c, d, sizeof(d))) < 0)
		return r;
	if ((size_t)snprintf(out, cap, "%s/%s.snap", d, digest) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

/* What the stored archive of digest is a delta of: base set to ""
 * for a whole archive, to the base's digest for a delta; NULL when it
 * is not stored here or not readable (not known: the snapshot's row
 * keeps every older one of its sandbox, docs/recovery.md "Collecting
 * the snapshot store"). Its bytes were checked against the digest when
 * they were stored, so its frames are the worker's. */
const char *
archive_blob_base(const struct ctl *c, const char *digest, char base[SNAPSHOT_DIGEST_HEX + 1])
{
	char d[PATH_MAX + 16];
	int r;

	if (digest == NULL || !snapshot_digest_valid(digest) || adir(c, d, sizeof(d)) < 0)
		return NULL;
	if ((r = snapshot_base_of(d, digest, base)) == 1)
		return base;
	if (r == 0) {
		base[0] = '\0';
		return base;
	}
	return NULL;
}

/* The archives' directory locked (flock: control planes sharing it
 * exclude each other too): an archive put into place and given its
 * pending reference is one step, and so is the collection's question
 * to the store and its removals, so that an archive stored again while
 * an older copy of the same bytes is being collected is never removed
 * after its rename. The descriptor to close, or < 0. */
static int
archives_lock(const struct ctl *c)
{
	char d[PATH_MAX + 16];

	return adir(c, d, sizeof(d)) < 0 ? -1 : dir_lock(d);
}

/* the streamed upload's route is the one without a digest segment */
static bool
streamed(const struct req *r)
{
	return r->params[1][0] == '\0';
}

/* params[0] the worker (the credential's), params[1] the digest (none
 * for a streamed upload: its temporary file is named for none) */
int
archive_blobs_sink(struct req *r, const char *p, size_t n)
{
	char path[PATH_MAX + 80], d[PATH_MAX + 16];

	if (r->sink == NULL && streamed(r)) {
		if (adir(r->ctl, d, sizeof(d)) < 0 ||
		    (size_t)snprintf(path, sizeof(path), "%s/.stream.snap", d) >= sizeof(path)) {
			reply_error(r, 500, "internal", "cannot store the archive");
			return -1;
		}
		if (upsink_open(r, &archive_kind, path) < 0)
			return -1;
	} else if (r->sink == NULL) {
		if (!snapshot_digest_valid(r->params[1])) {
			reply_error(r, 400, "bad_request", "a digest is %d lowercase hex characters",
			    SNAPSHOT_DIGEST_HEX);
			return -1;
		}
		if (apath(r->ctl, r->params[1], path, sizeof(path)) < 0) {
			reply_error(r, 500, "internal", "cannot store the archive");
			return -1;
		}
		if (upsink_open(r, &archive_kind, path) < 0)
			return -1;
	}
	return upsink_write(r, &archive_kind, (uint64_t)r->ctl->cfg.archive_max_mb << 20, p, n);
}

void
archive_blobs_sink_end(struct req *r)
{
	upsink_end(r);
}

/* the upload checked (its bytes are digest): into place, durably, and a
 * pending reference until the worker reports it */
static void
publish(struct req *r, const char *digest)
{
	struct upsink *s = r->sink;
	char path[PATH_MAX + 80], d[PATH_MAX + 16];
	int dfd, lk;

	/* who sent it: the collection counts only that worker's open
	 * operations for it (a file system without user attributes: all) */
	(void)fsetxattr(s->fd, ARCHIVE_XATTR_WORKER, r->params[0], strlen(r->params[0]), 0);
	if (apath(r->ctl, digest, path, sizeof(path)) < 0 || fchmod(s->fd, 0400) < 0 ||
	    fsync(s->fd) < 0 || (lk = archives_lock(r->ctl)) < 0) {
		reply_error(r, 500, "internal", "cannot store the archive");
		return;
	}
	if (rename(s->tmp, path) < 0) {
		close(lk);
		reply_error(r, 500, "internal", "cannot store the archive");
		return;
	}
	s->tmp[0] = '\0';
	if (adir(r->ctl, d, sizeof(d)) == 0 && (dfd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	/* a pending reference, as a report carrying the digest is: the
	 * archive is not collected before the worker reports it */
	api_archive_seen(r->ctl, digest);
	close(lk);
	log_info("worker %s: archive %s stored (%llu bytes%s)", r->params[0], digest,
	    (unsigned long long)s->size, streamed(r) ? ", streamed" : "");
	reply_json(r, 201, json_pack("{s:s,s:I}", "digest", digest, "size", (json_int_t)s->size));
}

void
api_archive_blob_put(struct req *r)
{
	struct upsink *s = r->sink;
	char got[SNAPSHOT_DIGEST_HEX + 1];

	if (!snapshot_digest_valid(r->params[1])) {
		reply_error(r, 400, "bad_request", "a digest is %d lowercase hex characters",
		    SNAPSHOT_DIGEST_HEX);
		return;
	}
	if (s == NULL) {
		reply_error(r, 400, "bad_request", "the body is the archive");
		return;
	}
	if (upsink_finish(r, &archive_kind) < 0)       /* the hash whole */
		return;
	if (snapshot_hash_final(&s->h.archive, r->params[1], got) != 0) {
		log_warnx("worker %s: an upload of archive %s was not it (its body is %s): refused",
		    r->params[0], r->params[1], got);
		reply_error(r, 400, "digest_mismatch",
		    "the body is not the archive %s (its body's digest is %s, and its last "
		    "bytes must be the trailer naming it)", r->params[1], got);
		return;
	}
	publish(r, r->params[1]);
}

/* POST /v1/workers/ID/archives/stream: the digest comes after the body,
 * as the archive's trailer (its last 40 bytes); the body before it must
 * hash to it. A body cut short ends on bytes of the archive's middle,
 * which are not a trailer of what came before them. */
void
api_archive_blob_stream(struct req *r)
{
	struct upsink *s = r->sink;
	char got[SNAPSHOT_DIGEST_HEX + 1];

	if (s == NULL) {
		reply_error(r, 400, "bad_request", "the body is the archive");
		return;
	}
	if (upsink_finish(r, &archive_kind) < 0)       /* the hash whole */
		return;
	if (snapshot_hash_end(&s->h.archive, got) != 0) {
		log_warnx("worker %s: a streamed upload (%llu bytes) does not end with the trailer "
		    "naming its body's digest %s: refused", r->params[0],
		    (unsigned long long)s->size, got);
		reply_error(r, 400, "digest_mismatch",
		    "the body is not an archive: its last bytes must be the trailer naming its "
		    "body's digest (%s)", got);
		return;
	}
	publish(r, got);
}

void
api_archive_blob_get(struct req *r)
{
	char path[PATH_MAX + 80];
	struct stat st;
	int64_t refs = 0;
	int fd;

	if (!snapshot_digest_valid(r->params[1])) {
		reply_error(r, 400, "bad_request", "a digest is %d lowercase hex characters",
		    SNAPSHOT_DIGEST_HEX);
		return;
	}
	/* only an archive of a sandbox this worker runs or is to run (the
	 * same answer as for none: whether another sandbox's archive exists
	 * is not this worker's to learn) */
	if (r->ctl->st->ops->archive_worker_refs(r->ctl->st, r->params[0], r->params[1], &refs) < 0) {
		reply_error(r, 503, "unavailable", "the store cannot be read");
		return;
	}
	if (refs == 0) {
		log_warnx("archive %s refused to worker %s: no execution of its sandbox is placed there",
		    r->params[1], r->params[0]);
		reply_error(r, 404, "not_found", "no archive %s", r->params[1]);
		return;
	}
	if (apath(r->ctl, r->params[1], path, sizeof(path)) < 0 ||
	    (fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		reply_error(r, 404, "not_found", "no archive %s", r->params[1]);
		return;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		reply_error(r, 500, "internal", "cannot read the archive");
		return;
	}
	r->status = 200;
	r->content_type = "application/octet-stream";
	r->file_fd = fd;
	r->file_size = (uint64_t)st.st_size;
}

/* one batch, uploaded by worker (NULL: not known): ask the store which
 * of the offered are referenced by nothing, remove those. The number
 * removed. */
static int
collect_batch(struct ctl *c, const char *d, const char *worker, json_t *arr)
{
	char path[PATH_MAX + 80];
	json_t *out = NULL, *v;
	struct stat st;
	size_t i;
	int lk, removed = 0;

	if (json_array_size(arr) == 0 || (lk = archives_lock(c)) < 0)
		return 0;
	if (c->st->ops->archives_collectable(c->st, arr, now_unix(), worker, &out) < 0) {
		close(lk);
		return 0;
	}
	json_array_foreach(out, i, v) {
		const char *dg = json_string_value(v);

		if (!snapshot_digest_valid(dg) ||
		    (size_t)snprintf(path, sizeof(path), "%s/%s.snap", d, dg) >= sizeof(path))
			continue;
		/* put into place again since it was listed: not this pass's */
		if (lstat(path, &st) < 0 || st.st_mtime > time(NULL) - c->cfg.archive_grace)
			continue;
		if (unlink(path) == 0) {
			removed++;
			log_info("archive %s collected: nothing references it", dg);
		}
	}
	close(lk);
	json_decref(out);
	return removed;
}

/* The control plane's archives that nothing references (the rules of
 * docs/recovery.md, "Collecting the snapshot store"), older than
 * --archive-grace, are removed; an upload's temporary file left by a
 * crash too, after an hour. A store without the collection keeps every
 * archive. Returns the number removed. */
/* the worker that uploaded the archive DIGEST.snap in dfd, into w;
 * "" when not known (written before, or no user attributes here) */
static void
uploader(int dfd, const char *name, char w[SPACE_ID_MAX + 1])
{
	char p[PATH_MAX];
	ssize_t n;

	w[0] = '\0';
	if ((size_t)snprintf(p, sizeof(p), "/proc/self/fd/%d/%s", dfd, name) >= sizeof(p))
		return;
	n = lgetxattr(p, ARCHIVE_XATTR_WORKER, w, SPACE_ID_MAX);
	w[n > 0 ? n : 0] = '\0';
	if (!id_valid(w))
		w[0] = '\0';
}

/* the batches of each uploader */
static int
collect_groups(struct ctl *c, const char *d, json_t *groups, size_t at_least)
{
	const char *w;
	json_t *arr;
	void *tmp;
	int removed = 0;

	json_object_foreach_safe(groups, tmp, w, arr) {
		if (json_array_size(arr) < at_least)
			continue;
		removed += collect_batch(c, d, w[0] ? w : NULL, arr);
		json_object_del(groups, w);
	}
	return removed;
}

int
archive_blobs_collect(struct ctl *c)
{
	char d[PATH_MAX + 16], digest[SNAPSHOT_DIGEST_HEX + 1], w[SPACE_ID_MAX + 1];
	struct dirent *e;
	struct stat st;
	json_t *groups, *arr;
	time_t now = time(NULL);
	size_t n;
	DIR *dp;
	int dfd, removed = 0;

	if (c->st->ops->archives_collectable == NULL || adir(c, d, sizeof(d)) < 0 ||
	    (dp = opendir(d)) == NULL)
		return 0;
	dfd = dirfd(dp);
	groups = json_object();
	while (groups != NULL && (e = readdir(dp)) != NULL) {
		n = strlen(e->d_name);
		if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		/* DIGEST.snap.tmp.XXXXXX, or .stream.snap.tmp.XXXXXX */
		if (strstr(e->d_name, ".snap.tmp.") != NULL) {
			if (st.st_mtime < now - 3600 && st.st_mtime < now - c->cfg.archive_grace)
				unlinkat(dfd, e->d_name, 0);
			continue;
		}
		if (n != SNAPSHOT_DIGEST_HEX + 5 || strcmp(e->d_name + SNAPSHOT_DIGEST_HEX, ".snap") != 0)
			continue;
		memcpy(digest, e->d_name, SNAPSHOT_DIGEST_HEX);
		digest[SNAPSHOT_DIGEST_HEX] = '\0';
		if (!snapshot_digest_valid(digest) || st.st_mtime > now - c->cfg.archive_grace)
			continue;
		uploader(dfd, e->d_name, w);
		if ((arr = json_object_get(groups, w)) == NULL &&
		    json_object_set_new(groups, w, arr = json_array()) < 0)
			break;
		json_array_append_new(arr, json_pack("{s:s,s:I}", "digest", digest,
		    "age", (json_int_t)(now - st.st_mtime)));
		if (json_array_size(arr) == SPACE_ARCHIVE_BATCH_MAX)
			removed += collect_groups(c, d, groups, SPACE_ARCHIVE_BATCH_MAX);
	}
	if (groups != NULL)
		removed += collect_groups(c, d, groups, 0);
	json_decref(groups);
	closedir(dp);
	return removed;
}
