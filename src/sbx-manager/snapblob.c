/* Archives travel by digest between this worker and the control plane
 * (docs/worker.md section 9): --snapshot-dir is this worker's own cache,
 * never shared. An archive this worker made is uploaded
 * (PUT /v1/workers/ID/archives/DIGEST) before its digest is reported; one
 * an install needs and the cache lacks is downloaded
 * (GET /v1/workers/ID/archives/DIGEST), hashed while it arrives and
 * renamed into the cache only when its bytes are the digest (hashed here,
 * or, when a restore reads it while it arrives, by that restore: one
 * hash of the bytes the image is built from serves both). Both go
 * through the control client (ctlproc.c), which holds the worker
 * credential and speaks HTTP; it never holds a file it could write into
 * the cache: a download comes out of a pipe, an upload is read from a
 * descriptor opened read-only here. snapshot_restore verifies the archive
 * again, entry by entry, before it creates anything. */
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "log.h"
#include "sbx-manager.h"
#include "snapshot.h"

/* how long the answer may take once the upload's bytes are handed over:
 * a minute, and a second for every MiB (the child's own stall limit ends
 * a transfer that stops moving well before) */
static int
put_wait_s(uint64_t size)
{
	uint64_t s = 60 + (size >> 20);

	return s > 86400 ? 86400 : (int)s;
}

/* no final answer: the control plane could not be reached, or the
 * connection ended after an interim "100 Continue" (it was stopped
 * while the body went in), or it answered 5xx: worth another attempt */
static bool
transient(int r, unsigned status)
{
	return r < 0 || status < 200 || status >= 500;
}

/* one attempt: 0, -EAGAIN when transient (above), or another -errno */
static int
put_once(struct mgr *m, const char *digest, const char **why)
{
	struct ctlmsg req = { .type = CTL_SNAPSHOT_PUT }, ans = { 0 };
	struct ctl_call *k = NULL;
	char path[PATH_MAX + 80];
	struct stat st;
	int fd, r;

	*why = "snapshot upload to the control plane failed";
	if (!snapshot_digest_valid(digest))
		return -EINVAL;
	snprintf(path, sizeof(path), "%s/%s.snap", m->cfg.snapshot_dir, digest);
	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EIO;
	}
	memcpy(req.digest, digest, SNAPSHOT_DIGEST_HEX + 1);
	r = ctlproc_start(m, &req, fd, NULL, &k);
	close(fd);      /* the child has its own */
	if (r < 0)
		return r == -EIO ? -EAGAIN : r;    /* no control client at the moment */
	r = ctlproc_wait(m, k, put_wait_s((uint64_t)st.st_size), &ans);
	if (r < 0 || ans.result != CTL_OK) {
		log_warnx("archive %s: upload to the control plane: %s (HTTP %u)", digest,
		    r < 0 ? strerror(-r) : ans.result == CTL_NO_ANSWER ? "no answer" : "refused",
		    (unsigned)ans.status);
		if (r == 0 && ans.status == 413)
			*why = "the archive is larger than the control plane keeps (--archive-max-mb)";
		r = transient(r, ans.status) ? -EAGAIN : -EIO;
	} else
		log_debug("archive %s uploaded (%llu bytes)", digest, (unsigned long long)st.st_size);
	ctlmsg_clear(&ans);
	return r;
}

/* An archive uploaded while it is made (layer.c): the control client
 * reads the pipe whose write end the archiver tees every byte into, and
 * the control plane names what it received by the digest in its trailer.
 * -EIO when there is no control client at the moment (the archive is
 * then made alone and sent as a file, snapblob_put). */
int
snapblob_stream_begin(struct mgr *m, int *wfd, struct ctl_call **k)
{
	struct ctlmsg req = { .type = CTL_SNAPSHOT_STREAM };
	int p[2], r;

	*wfd = -1;
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	/* the archiver's pieces are up to a zstd job: fewer wake-ups */
	(void)fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
	r = ctlproc_start(m, &req, p[0], NULL, k);
	close(p[0]);    /* the child has its own */
	if (r < 0) {
		close(p[1]);
		return r;
	}
	*wfd = p[1];
	return 0;
}

/* The end of a streamed upload: the pipe closed (its end is the body's),
 * the answer awaited. 0 only when the archive was complete (complete:
 * the archiver made it and every byte went into the pipe) and the control
 * plane stored it (201); else -EIO, and the caller sends the file. */
int
snapblob_stream_end(struct mgr *m, struct ctl_call *k, int wfd, bool complete,
    const char *digest, uint64_t size)
{
	struct ctlmsg ans = { 0 };
	int r;

	close(wfd);
	r = ctlproc_wait(m, k, put_wait_s(size), &ans);
	if (r < 0 || ans.result != CTL_OK || ans.status != 201 || !complete) {
		if (complete)
			log_info("archive %s: the upload while it was made failed (%s, HTTP %u): "
			    "sending the file", digest, r < 0 ? strerror(-r) :
			    ans.result == CTL_OK ? "not stored" : "refused", (unsigned)ans.status);
		r = -EIO;
	} else {
		log_debug("archive %s uploaded while it was made (%llu bytes)", digest,
		    (unsigned long long)size);
		r = 0;
	}
	ctlmsg_clear(&ans);
	return r;
}

/* One download into the cache. A restore may read the temporary file
 * while it grows (snapblob_follow): it is told how much was written, and
 * at the end whether the bytes were the digest. */
struct snapblob_dl {
	struct mgr *m;
	char digest[SNAPSHOT_DIGEST_HEX + 1];
	char path[PATH_MAX + 80], tmp[PATH_MAX + 96];
	int fd, p[2];
	struct ctl_call *k;
	struct snapshot_hash h;
	/* what a restore reading along is told (follow only) */
	bool follow, done;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t written;
	uint64_t got;           /* bytes out of the pipe (follow: not hashed here) */
	uint64_t passed;        /* follow: the restore reads nothing below this again */
	uint64_t released;      /* of the file, bytes released behind it (0: none; under mu) */
	bool no_holes;          /* the file system refused to release */
	int result;
	const char *why;
	pthread_t t;
};

/* A large archive restored along its download is not kept: once the
 * download passes SPACE_FOLLOW_CACHE_MAX, what the restore has read is
 * released (a hole punched, in steps of this many bytes): its pages go
 * back to be reused by the next ones instead of the page cache and the
 * disk taking a second copy of the archive. The kept image of the layer
 * (kept.c) is what a later restore here starts from; the control plane
 * keeps the archive. */
#define FOLLOW_RELEASE_STEP (8u << 20)

/* Called with mu held, as the download writes and as the restore reads,
 * so that what is released does not depend on which of the two runs
 * ahead: once the file holds SPACE_FOLLOW_CACHE_MAX, every step the
 * restore has passed goes (test 5m relies on it). */
static void
dl_release(struct snapblob_dl *d)
{
	uint64_t to = d->passed & ~(uint64_t)(FOLLOW_RELEASE_STEP - 1);

	if (d->no_holes || d->written < SPACE_FOLLOW_CACHE_MAX ||
	    to < d->released + FOLLOW_RELEASE_STEP)
		return;
	/* a file system without holes keeps what it has released so far
	 * (nothing, the first time: then the file is cached as before) */
	if (fallocate(d->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)d->released,
	    (off_t)(to - d->released)) < 0) {
		d->no_holes = true;
		return;
	}
	d->released = to;
}

/* each piece is hashed, then written: what was hashed before it is in
 * the file. Followed by a restore, a piece is only counted: the restore
 * hashes what it reads of the file, and the copy enters the cache only
 * if that hash was the digest (snapblob_follow_end), and only if none of
 * it was released behind the restore. */
static void
dl_update(void *arg, const void *p, size_t n)
{
	struct snapblob_dl *d = arg;

	if (d->follow) {
		pthread_mutex_lock(&d->mu);
		d->written = d->got;
		dl_release(d);
		pthread_cond_broadcast(&d->cv);
		pthread_mutex_unlock(&d->mu);
		d->got += n;
		return;
	}
	snapshot_hash_update(&d->h, p, n);
	d->got += n;
}

/* 1 when the cache has it, 0 when the download started, or -errno */
static int
dl_begin(struct snapblob_dl *d, struct mgr *m, const char *digest, const char **why)
{
	struct ctlmsg req = { .type = CTL_SNAPSHOT_GET };
	struct stat st;
	int r;

	d->m = m;
	d->fd = d->p[0] = d->p[1] = -1;
	d->tmp[0] = '\0';
	*why = "snapshot download from the control plane failed";
	if (!snapshot_digest_valid(digest)) {
		*why = "bad snapshot digest";
		return -EINVAL;
	}
	memcpy(d->digest, digest, SNAPSHOT_DIGEST_HEX + 1);
	snprintf(d->path, sizeof(d->path), "%s/%s.snap", m->cfg.snapshot_dir, digest);
	/* made or fetched here (whatever is under the name: the restore
	 * opens it without following a link and verifies it again) */
	if (lstat(d->path, &st) == 0)
		return 1;
	if (mkdir(m->cfg.snapshot_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* ".tmp.": what archive_gc.c deletes when a writer died */
	snprintf(d->tmp, sizeof(d->tmp), "%s/.tmp.fetch.XXXXXX", m->cfg.snapshot_dir);
	if ((d->fd = mkostemp(d->tmp, O_CLOEXEC)) < 0) {
		d->tmp[0] = '\0';
		return -errno;
	}
	snapshot_hash_init(&d->h);
	if (pipe2(d->p, O_CLOEXEC) < 0)
		return -errno;
	memcpy(req.digest, digest, SNAPSHOT_DIGEST_HEX + 1);
	if ((r = ctlproc_start(m, &req, d->p[1], NULL, &d->k)) < 0)
		return r == -EIO ? -EAGAIN : r;   /* no control client at the moment */
	close(d->p[1]);
	d->p[1] = -1;
	return 0;
}

static void
dl_close(struct snapblob_dl *d)
{
	if (d->p[0] >= 0)
		close(d->p[0]);
	if (d->p[1] >= 0)
		close(d->p[1]);
	if (d->fd >= 0)
		close(d->fd);
	if (d->tmp[0])
		unlink(d->tmp);
	d->p[0] = d->p[1] = d->fd = -1;
	d->tmp[0] = '\0';
}

static int dl_rename(struct snapblob_dl *d);

/* A complete download whose bytes were hashed (d->h): kept in the cache
 * if they are the digest. Not fsync'd: the cache's copy of an archive the
 * control plane keeps durably is verified again by every restore, which
 * drops a copy a crash left short or damaged and fetches it again
 * (layer.c). */
static int
dl_keep(struct snapblob_dl *d, const char **why)
{
	char got[SNAPSHOT_DIGEST_HEX + 1];

	if (snapshot_hash_final(&d->h, d->digest, got) != 0) {
		log_warnx("archive %s: the control plane sent bytes of digest %s: refused", d->digest,
		    got);
		*why = "snapshot archive digest mismatch";
		return -EBADMSG;
	}
	return dl_rename(d);
}

/* the temporary file into the cache under the digest */
static int
dl_rename(struct snapblob_dl *d)
{
	if (fchmod(d->fd, 0444) < 0 || rename(d->tmp, d->path) < 0)
		return -errno;
	d->tmp[0] = '\0';
	log_info("archive %s fetched from the control plane (%llu bytes)", d->digest,
	    (unsigned long long)d->got);
	return 0;
}

/* the transfer of a started download, checked and renamed into place */
static int
dl_body(struct snapblob_dl *d, const char **why)
{
	struct ctlmsg ans = { 0 };
	int r, rb;

	rb = fetch_pipe(d->p[0], d->fd, SPACE_ARCHIVE_MAX, dl_update, d, false);
	close(d->p[0]);
	d->p[0] = -1;   /* a child still writing gets EPIPE */
	r = ctlproc_wait(d->m, d->k, 90, &ans);
	if (r < 0 || ans.result != CTL_OK || rb < 0) {
		log_warnx("archive %s: download from the control plane: %s (HTTP %u)", d->digest,
		    r < 0 ? "no answer" : rb < 0 ? strerror(-rb) : ans.result == CTL_MALFORMED ?
		    "too large" : "refused", (unsigned)ans.status);
		*why = ans.status == 404 ? "no such snapshot on the control plane" :
		    rb == -EFBIG || ans.result == CTL_MALFORMED ? "snapshot archive too large" :
		    "snapshot download from the control plane failed";
		r = ans.status == 404 ? -ENOENT : rb == -EFBIG || ans.result == CTL_MALFORMED ? -EIO :
		    transient(r, ans.status) ? -EAGAIN : -EIO;
		goto out;
	}
	/* followed: the restore reading along checks the digest, and
	 * snapblob_follow_end keeps the copy */
	r = d->follow ? 0 : dl_keep(d, why);
out:
	ctlmsg_clear(&ans);
	return r;
}

static int
fetch_once(struct mgr *m, const char *digest, const char **why)
{
	struct snapblob_dl *d;
	int r;

	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -ENOMEM;
	if ((r = dl_begin(d, m, digest, why)) == 0)
		r = dl_body(d, why);
	dl_close(d);
	free(d);
	return r < 0 ? r : 0;
}

static void *
dl_thread(void *arg)
{
	struct snapblob_dl *d = arg;
	const char *why = NULL;
	int r = dl_body(d, &why);

	pthread_mutex_lock(&d->mu);
	d->result = r;
	d->why = why;
	d->written = d->got;
	d->done = true;
	pthread_cond_broadcast(&d->cv);
	pthread_mutex_unlock(&d->mu);
	return NULL;
}

int
snapblob_follow(struct mgr *m, const char *digest, struct snapblob_dl **out, int *rfd,
    const char **why)
{
	struct snapblob_dl *d;
	int r;

	*out = NULL;
	*rfd = -1;
	if ((d = calloc(1, sizeof(*d))) == NULL)
		return -ENOMEM;
	if ((r = dl_begin(d, m, digest, why)) != 0)
		goto fail;
	/* the reader's own descriptor: the file keeps its bytes whatever
	 * happens to its name (renamed into place, or unlinked) */
	if ((*rfd = open(d->tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto fail;
	}
	d->follow = true;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if ((r = -pthread_create(&d->t, NULL, dl_thread, d)) < 0) {
		pthread_mutex_destroy(&d->mu);
		pthread_cond_destroy(&d->cv);
		goto fail;
	}
	*out = d;
	return 0;
fail:
	if (*rfd >= 0)
		close(*rfd);
	*rfd = -1;
	if (d->k != NULL && d->p[0] >= 0) {
		/* started: let the child finish into a closed pipe */
		struct ctlmsg ans = { 0 };

		close(d->p[0]);
		d->p[0] = -1;
		(void)ctlproc_wait(m, d->k, 90, &ans);
		ctlmsg_clear(&ans);
	}
	dl_close(d);
	free(d);
	return r;
}

int64_t
snapblob_more(void *ctx, uint64_t have, bool *end)
{
	struct snapblob_dl *d = ctx;
	int64_t r;

	pthread_mutex_lock(&d->mu);
	while (!d->done && d->written <= have)
		pthread_cond_wait(&d->cv, &d->mu);
	if (d->done) {
		*end = true;
		r = d->result < 0 ? d->result : (int64_t)d->written;
	} else {
		*end = false;
		r = (int64_t)d->written;
	}
	pthread_mutex_unlock(&d->mu);
	return r;
}

void
snapblob_passed(void *ctx, uint64_t off)
{
	struct snapblob_dl *d = ctx;

	pthread_mutex_lock(&d->mu);
	if (off > d->passed) {
		d->passed = off;
		dl_release(d);
	}
	pthread_mutex_unlock(&d->mu);
}

#define FOLLOW_CHECK_BUF (1u << 20)

int
snapblob_follow_end(struct snapblob_dl *d, int restore, const char **why)
{
	unsigned char *buf;
	uint64_t off = 0;
	ssize_t n = -1;
	int r;

	pthread_join(d->t, NULL);
	r = d->result;
	if (r < 0)
		*why = d->why;
	else if (restore == SNAPBLOB_RESTORED && (d->released > 0 || d->got > SPACE_FOLLOW_CACHE_MAX))
		/* past the bound it is not kept, whether or not the restore
		 * was close enough behind the download for any of it to be
		 * released on the way (dl_close drops the file) */
		log_info("archive %s fetched from the control plane (%llu bytes) and restored as it "
		    "arrived; not kept in the cache (larger than %u MiB)", d->digest,
		    (unsigned long long)d->got, (unsigned)(SPACE_FOLLOW_CACHE_MAX >> 20));
	else if (restore == SNAPBLOB_RESTORED) {
		/* the restore read every byte of this file and found the
		 * digest and the trailer: those bytes are the cache's copy */
		if (dl_rename(d) < 0)   /* the restore stands; the cache lacks it */
			log_warn("archive %s: cannot keep the downloaded copy", d->digest);
	} else if (restore == SNAPBLOB_REFUSED && d->released > 0) {
		/* released behind the restore: whether the bytes were the
		 * digest is for a download of their own to tell */
		r = -ESTALE;
	} else if (restore == SNAPBLOB_REFUSED) {
		/* the restore failed, maybe before it read everything: were
		 * the bytes the digest? (the verdict the log and the caller
		 * give; a copy that is the digest is kept, as a download not
		 * followed keeps it) */
		snapshot_hash_init(&d->h);
		if ((buf = malloc(FOLLOW_CHECK_BUF)) != NULL) {
			while ((n = pread(d->fd, buf, FOLLOW_CHECK_BUF, (off_t)off)) > 0) {
				snapshot_hash_update(&d->h, buf, (size_t)n);
				off += (uint64_t)n;
			}
			free(buf);
		}
		if (n < 0 || off != d->got)
			r = -EIO;
		else if ((r = dl_keep(d, why)) < 0 && r != -EBADMSG)
			r = 0;  /* the bytes were the digest: the restore decides */
		if (r == -EIO)
			*why = "snapshot download from the control plane failed";
	}
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	dl_close(d);
	free(d);
	return r;
}

/* A control plane that is away (restarting, a replica being replaced)
 * is waited for, as the reports are: the transfer is tried again, 1 s,
 * 2 s ... 30 s apart, for SNAPBLOB_RETRY_S in all, once this worker has
 * registered. A refusal (4xx), a mismatch or an archive too large is
 * final at once. */
#define SNAPBLOB_RETRY_S 300

static int
retried(struct mgr *m, const char *digest, const char **why,
    int (*once)(struct mgr *, const char *, const char **))
{
	time_t end = time(NULL) + SNAPBLOB_RETRY_S;
	unsigned wait = 1;
	int r;

	/* not registered yet (a start while space-control is away, salvaging
	 * an earlier resident's layers before serving): one attempt, as for
	 * the start's other requests, so the start is not held up */
	while ((r = once(m, digest, why)) == -EAGAIN && time(NULL) + (time_t)wait < end &&
	    atomic_load(&m->registered) && !atomic_load(&m->stopping)) {
		log_info("archive %s: space-control not reachable, again in %u s", digest, wait);
		sleep(wait);
		wait = wait * 2 > 30 ? 30 : wait * 2;
	}
	return r == -EAGAIN ? -EIO : r;
}

int
snapblob_put(struct mgr *m, const char *digest, const char **why)
{
	return retried(m, digest, why, put_once);
}

int
snapblob_fetch(struct mgr *m, const char *digest, const char **why)
{
	return retried(m, digest, why, fetch_once);
}

void
snapblob_drop(struct mgr *m, const char *digest)
{
	char path[PATH_MAX + 80];

	if (!snapshot_digest_valid(digest))
		return;
	snprintf(path, sizeof(path), "%s/%s.snap", m->cfg.snapshot_dir, digest);
	if (unlink(path) < 0 && errno != ENOENT)
		log_warn("archive %s: cannot drop the cached copy", digest);
}
