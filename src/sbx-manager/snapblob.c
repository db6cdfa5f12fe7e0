/* Archives travel by digest between this worker and the control plane
 * (docs/worker.md section 9): --snapshot-dir is this worker's own cache,
 * never shared. An archive this worker made is uploaded
 * (PUT /v1/workers/ID/archives/DIGEST) before its digest is reported; one
 * an install needs and the cache lacks is downloaded
 * (GET /v1/workers/ID/archives/DIGEST), hashed here while it arrives and
 * renamed into the cache only when its bytes are the digest. Both go
 * through the control client (ctlproc.c), which holds the worker
 * credential and speaks HTTP; it never holds a file it could write into
 * the cache: a download comes out of a pipe, an upload is read from a
 * descriptor opened read-only here. snapshot_restore verifies the archive
 * again, entry by entry, before it creates anything. */
#include <errno.h>
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

/* one attempt: 0, -EAGAIN when space-control could not be reached or
 * answered 5xx (worth another), or another -errno */
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
		r = r < 0 || ans.status == 0 || ans.status >= 500 ? -EAGAIN : -EIO;
	} else
		log_debug("archive %s uploaded (%llu bytes)", digest, (unsigned long long)st.st_size);
	ctlmsg_clear(&ans);
	return r;
}

static void
hash_update(void *h, const void *p, size_t n)
{
	snapshot_hash_update(h, p, n);
}

static int
fetch_once(struct mgr *m, const char *digest, const char **why)
{
	struct ctlmsg req = { .type = CTL_SNAPSHOT_GET }, ans = { 0 };
	struct ctl_call *k = NULL;
	char path[PATH_MAX + 80], tmp[PATH_MAX + 96], got[SNAPSHOT_DIGEST_HEX + 1];
	struct snapshot_hash h;
	struct stat st;
	int fd = -1, p[2] = { -1, -1 }, r, rb;

	*why = "snapshot download from the control plane failed";
	if (!snapshot_digest_valid(digest)) {
		*why = "bad snapshot digest";
		return -EINVAL;
	}
	snprintf(path, sizeof(path), "%s/%s.snap", m->cfg.snapshot_dir, digest);
	/* made or fetched here (whatever is under the name: the restore
	 * opens it without following a link and verifies it again) */
	if (lstat(path, &st) == 0)
		return 0;
	if (mkdir(m->cfg.snapshot_dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	/* ".tmp.": what archive_gc.c deletes when a writer died */
	snprintf(tmp, sizeof(tmp), "%s/.tmp.fetch.XXXXXX", m->cfg.snapshot_dir);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		tmp[0] = '\0';
		return -errno;
	}
	snapshot_hash_init(&h);
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	memcpy(req.digest, digest, SNAPSHOT_DIGEST_HEX + 1);
	if ((r = ctlproc_start(m, &req, p[1], NULL, &k)) < 0) {
		r = r == -EIO ? -EAGAIN : r;      /* no control client at the moment */
		goto out;
	}
	close(p[1]);
	p[1] = -1;
	rb = fetch_pipe(p[0], fd, SPACE_ARCHIVE_MAX, hash_update, &h);
	close(p[0]);
	p[0] = -1;      /* a child still writing gets EPIPE */
	r = ctlproc_wait(m, k, 90, &ans);
	if (r < 0 || ans.result != CTL_OK || rb < 0) {
		log_warnx("archive %s: download from the control plane: %s (HTTP %u)", digest,
		    r < 0 ? "no answer" : rb < 0 ? strerror(-rb) : ans.result == CTL_MALFORMED ?
		    "too large" : "refused", (unsigned)ans.status);
		*why = ans.status == 404 ? "no such snapshot on the control plane" :
		    rb == -EFBIG || ans.result == CTL_MALFORMED ? "snapshot archive too large" :
		    "snapshot download from the control plane failed";
		r = ans.status == 404 ? -ENOENT : rb == -EFBIG || ans.result == CTL_MALFORMED ? -EIO :
		    r < 0 || ans.status == 0 || ans.status >= 500 ? -EAGAIN : -EIO;
		goto out;
	}
	if (snapshot_hash_final(&h, digest, got) != 0) {
		log_warnx("archive %s: the control plane sent bytes of digest %s: refused", digest,
		    got);
		*why = "snapshot archive digest mismatch";
		r = -EBADMSG;
		goto out;
	}
	/* not fsync'd: the cache's copy of an archive the control plane
	 * keeps durably is verified again by the restore, which drops a copy
	 * a crash left short or damaged and fetches it again (layer.c) */
	if (fchmod(fd, 0444) < 0 || rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	tmp[0] = '\0';
	log_info("archive %s fetched from the control plane (%llu bytes)", digest,
	    (unsigned long long)h.size);
	r = 0;
out:
	ctlmsg_clear(&ans);
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
	if (fd >= 0)
		close(fd);
	if (tmp[0])
		unlink(tmp);
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
