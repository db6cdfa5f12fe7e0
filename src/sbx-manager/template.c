/* The worker's template cache (docs/templates.md): DATA/templates/DIGEST.img,
 * fetched from the control plane by digest (by the control client, which
 * holds the worker credential: ctlproc.c), hashed here while it arrives and kept only when the bytes are the ones the
 * digest names. spaced-host hashes the file again before it mounts it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "log.h"
#include "sbx-manager.h"
#include "tplimage.h"

static int
cache_dir(const struct mgr *m, char *dir, size_t cap)
{
	snprintf(dir, cap, "%s/templates", m->cfg.data_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
template_path(const struct mgr *m, const char *digest, char *path, size_t cap)
{
	char dir[1100];
	int r;

	if (!tpl_digest_valid(digest))
		return -EINVAL;
	if ((r = cache_dir(m, dir, sizeof(dir))) < 0)
		return r;
	snprintf(path, cap, "%s/%s.img", dir, digest);
	return 0;
}

static void
hash_update(void *h, const void *p, size_t n)
{
	tpl_hash_update(h, p, n);
}

/* The control client fetches the image and writes it into a pipe; this
 * process writes what comes out of the pipe into the cache and hashes it
 * itself: the child never holds the file, so nothing it does can change
 * the bytes after they were hashed. */
int
template_ensure(const struct mgr *m, const char *digest, char *path, size_t cap, const char **why)
{
	char tmp[1200], got[TPL_DIGEST_HEX + 1];
	struct ctlmsg req = { .type = CTL_TEMPLATE_GET }, ans = { 0 };
	struct ctl_call *k = NULL;
	struct tpl_hash h;
	struct stat st;
	int fd = -1, p[2] = { -1, -1 }, r, rb;

	*why = "template fetch failed";
	if ((r = template_path(m, digest, path, cap)) < 0) {
		*why = "bad template digest";
		return r;
	}
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		utimensat(AT_FDCWD, path, NULL, 0);     /* last use, for the sweep */
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return -errno;
	tpl_hash_init(&h);
	if (pipe2(p, O_CLOEXEC) < 0) {
		r = -errno;
		goto out;
	}
	memcpy(req.digest, digest, TPL_DIGEST_HEX + 1);
	/* the call is const-clean: the child is reached through m, whose
	 * ctlproc state locks itself */
	if ((r = ctlproc_start((struct mgr *)m, &req, p[1], NULL, &k)) < 0)
		goto out;
	close(p[1]);
	p[1] = -1;
	rb = fetch_pipe(p[0], fd, TPL_IMAGE_MAX, hash_update, &h, true);
	close(p[0]);
	p[0] = -1;      /* a child still writing gets EPIPE */
	r = ctlproc_wait((struct mgr *)m, k, 90, &ans);
	if (r < 0 || ans.result != CTL_OK || rb < 0) {
		log_warnx("template %s: fetch from the control plane: %s (HTTP %u)", digest,
		    r < 0 ? "no answer" : rb < 0 ? strerror(-rb) : ans.result == CTL_MALFORMED ?
		    "too large" : "refused", (unsigned)ans.status);
		*why = ans.status == 404 ? "template unknown to the control plane" :
		    rb == -EFBIG || ans.result == CTL_MALFORMED ? "template image too large" :
		    "template fetch failed";
		r = ans.status == 404 ? -ENOENT : -EIO;
		goto out;
	}
	tpl_hash_final(&h, got);
	if (strcmp(got, digest) != 0) {
		log_warnx("template %s: the control plane sent bytes of digest %s: refused", digest, got);
		*why = "template image digest mismatch";
		r = -EBADMSG;
		goto out;
	}
	if (fchmod(fd, 0400) < 0 || fsync(fd) < 0 || rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	tmp[0] = '\0';
	log_info("template %s fetched (%llu bytes)", digest, (unsigned long long)h.size);
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

/* an execution that may still have the image mounted names digest. The
 * worker keeps one record per sandbox it ever ran, so a retired or failed
 * one does not count: a killed sandbox's image would be kept for ever. A
 * paused sandbox resumed here after the sweep fetches the image again by
 * its digest, as on any worker that never had it; the day of grace of the
 * sweep keeps the common case a cache hit. */
static bool
in_use(struct mgr *m, const char *digest)
{
	struct record *rs = NULL;
	bool used = false;
	size_t i, n = 0;

	if (records_all(m, &rs, &n) != 0)
		return true;    /* unsure: keep it */
	for (i = 0; i < n && !used; i++)
		used = strcmp(rs[i].template_name, digest) == 0 &&
		    (rs[i].state == EXEC_PENDING || rs[i].state == EXEC_STARTING ||
		    rs[i].state == EXEC_SERVING || rs[i].state == EXEC_RETIRING);
	free(rs);
	return used;
}

/* cached images no record names and not used for a day: removed */
void
template_sweep(struct mgr *m)
{
	char dir[1100], p[1300], d[TPL_DIGEST_HEX + 1];
	struct dirent *e;
	struct stat st;
	DIR *dp;
	size_t n;

	if (cache_dir(m, dir, sizeof(dir)) < 0 || (dp = opendir(dir)) == NULL)
		return;
	while ((e = readdir(dp)) != NULL) {
		n = strlen(e->d_name);
		if (n != TPL_DIGEST_HEX + 4 || strcmp(e->d_name + TPL_DIGEST_HEX, ".img") != 0)
			continue;
		memcpy(d, e->d_name, TPL_DIGEST_HEX);
		d[TPL_DIGEST_HEX] = '\0';
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (!tpl_digest_valid(d) || in_use(m, d) || stat(p, &st) < 0 ||
		    st.st_mtime > time(NULL) - 86400)
			continue;
		if (unlink(p) == 0)
			log_info("template %s: cached image unused, removed", d);
	}
	closedir(dp);
}
