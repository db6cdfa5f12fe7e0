/* Kept layers (docs/worker.md, "Kept layers"): the image a retired
 * execution was archived from, kept on this worker so that the same
 * sandbox resumed here again, or an incremental archive of it built on
 * that archive, starts from the image instead of a whole restore.
 *
 * D/kept/<sandbox>.img is the image, exactly as it was when the archive
 * named in D/kept/<sandbox>.tag ("<digest> <depth>\n") was made of it:
 * it is moved there from the retired layer after the archive is durable,
 * before the layer is reclaimed, and nothing mounts it until an install
 * takes it (renamed into its own layer directory, the tag removed). One
 * per sandbox, at most cfg.kept_layers in all (the oldest go first),
 * none with --kept-layers 0. A kill of the sandbox here drops its kept
 * image, and so does the collection of the archive its tag names (the
 * control plane no longer references it: the sandbox was killed).
 * Crash-safe by order: the old pair is removed, the tag written
 * (fsync'd, renamed), then the image renamed in; an image without its
 * tag is never taken (and goes at the next keep or eviction). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sbx-manager.h"
#include "snapshot.h"
#include "util.h"

static void
kept_path(const struct mgr *m, char *out, size_t cap, const char *sandbox, const char *ext)
{
	snprintf(out, cap, "%s/kept/%s.%s", m->cfg.data_dir, sandbox, ext);
}

void
kept_drop(const struct mgr *m, const char *sandbox)
{
	char p[PATH_MAX];

	kept_path(m, p, sizeof(p), sandbox, "img");
	unlink(p);
	kept_path(m, p, sizeof(p), sandbox, "tag");
	unlink(p);
}

/* the tag's digest and depth, strictly: 0, -ENOENT or -EBADMSG */
int
kept_peek(const struct mgr *m, const char *sandbox, char digest[SNAPSHOT_DIGEST_HEX + 1],
    unsigned *depth)
{
	char p[PATH_MAX], *buf = NULL, *end;
	struct stat st;
	size_t len;
	unsigned long d;
	int r;

	if (m->cfg.kept_layers == 0 || !id_valid(sandbox))
		return -ENOENT;
	kept_path(m, p, sizeof(p), sandbox, "img");
	if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
		return -ENOENT;
	kept_path(m, p, sizeof(p), sandbox, "tag");
	if ((r = read_file(p, 128, &buf, &len)) < 0)
		return r == -EFBIG ? -EBADMSG : r;
	r = -EBADMSG;
	if (len == SNAPSHOT_DIGEST_HEX + 3 && buf[SNAPSHOT_DIGEST_HEX] == ' ' && buf[len - 1] == '\n' &&
	    buf[SNAPSHOT_DIGEST_HEX + 1] >= '0' && buf[SNAPSHOT_DIGEST_HEX + 1] <= '9') {
		buf[SNAPSHOT_DIGEST_HEX] = '\0';
		d = strtoul(buf + SNAPSHOT_DIGEST_HEX + 1, &end, 10);
		if (snapshot_digest_valid(buf) && *end == '\n' && d <= SNAPSHOT_DELTA_DEPTH_MAX) {
			memcpy(digest, buf, SNAPSHOT_DIGEST_HEX + 1);
			*depth = (unsigned)d;
			r = 0;
		}
	}
	free(buf);
	return r;
}

/* the kept image becomes img (a path on the same file system), its tag
 * goes: 0 or -errno. An image of another size than the layer's (its
 * quota changed since) is dropped instead: -ESTALE */
int
kept_take(const struct mgr *m, const char *sandbox, const char *img, uint64_t size)
{
	char p[PATH_MAX];
	struct stat st;
	int r = 0;

	kept_path(m, p, sizeof(p), sandbox, "img");
	if (lstat(p, &st) != 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size != size) {
		kept_drop(m, sandbox);
		return -ESTALE;
	}
	if (rename(p, img) != 0)
		r = -errno;
	kept_path(m, p, sizeof(p), sandbox, "tag");
	unlink(p);
	return r;
}

struct kept_one {
	char sandbox[SPACE_ID_MAX + 1];
	struct timespec t;
};

static int
older(const void *a, const void *b)
{
	const struct kept_one *x = a, *y = b;

	if (x->t.tv_sec != y->t.tv_sec)
		return x->t.tv_sec < y->t.tv_sec ? -1 : 1;
	return x->t.tv_nsec < y->t.tv_nsec ? -1 : x->t.tv_nsec > y->t.tv_nsec;
}

/* each kept image's sandbox (a valid id before ".img") to fn, until it
 * returns false */
static void
kept_each(const struct mgr *m, bool (*fn)(const struct mgr *m, const char *sandbox, void *arg),
    void *arg)
{
	char dir[PATH_MAX], name[SPACE_ID_MAX + 1];
	struct dirent *de;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/kept", m->cfg.data_dir);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		size_t l = strlen(de->d_name);

		if (l <= 4 || l - 4 > SPACE_ID_MAX || strcmp(de->d_name + l - 4, ".img") != 0)
			continue;
		memcpy(name, de->d_name, l - 4);
		name[l - 4] = '\0';
		if (id_valid(name) && !fn(m, name, arg))
			break;
	}
	closedir(d);
}

/* the tag's mtime: 0, or -1 when it has none */
static int
tag_time(const struct mgr *m, const char *sandbox, struct timespec *t)
{
	char p[PATH_MAX];
	struct stat st;

	kept_path(m, p, sizeof(p), sandbox, "tag");
	if (stat(p, &st) != 0)
		return -1;
	*t = st.st_mtim;
	return 0;
}

struct sweep {
	const char *digest;
	struct kept_one *all;
	size_t n, cap;
};

static bool
sweep_one(const struct mgr *m, const char *name, void *arg)
{
	struct sweep *w = arg;
	char kd[SNAPSHOT_DIGEST_HEX + 1];
	struct kept_one *na;
	struct timespec t;
	unsigned kdepth;

	if (kept_peek(m, name, kd, &kdepth) != 0 ||
	    (w->digest != NULL && strcmp(kd, w->digest) == 0)) {
		kept_drop(m, name);
		return true;
	}
	if (tag_time(m, name, &t) != 0)
		return true;
	if (w->n == w->cap) {
		w->cap = w->cap ? w->cap * 2 : 16;
		if ((na = realloc(w->all, w->cap * sizeof(*w->all))) == NULL)
			return false;
		w->all = na;
	}
	snprintf(w->all[w->n].sandbox, sizeof(w->all[w->n].sandbox), "%s", name);
	w->all[w->n].t = t;
	w->n++;
	return true;
}

/* Each kept pair: drop is called for those over the limit (oldest
 * first), those whose tag names digest (when not NULL), and images
 * without a tag. */
static void
kept_sweep(const struct mgr *m, const char *digest)
{
	struct sweep w = { .digest = digest };
	size_t i;

	kept_each(m, sweep_one, &w);
	if (w.n > m->cfg.kept_layers) {
		qsort(w.all, w.n, sizeof(*w.all), older);
		for (i = 0; i < w.n - m->cfg.kept_layers; i++)
			kept_drop(m, w.all[i].sandbox);
	}
	free(w.all);
}

struct tags {
	char (*digests)[SNAPSHOT_DIGEST_HEX + 1];
	int64_t *ages;
	size_t n, max;
	time_t now;
};

static bool
tag_one(const struct mgr *m, const char *name, void *arg)
{
	struct tags *g = arg;
	struct timespec t;
	unsigned depth;

	if (kept_peek(m, name, g->digests[g->n], &depth) == 0 && tag_time(m, name, &t) == 0)
		g->ages[g->n++] = (int64_t)g->now - (int64_t)t.tv_sec;
	return g->n < g->max;
}

/* the digests kept images hold the state of, each with its tag's age in
 * seconds (by this clock), at most max of them: how many */
size_t
kept_tags(const struct mgr *m, char (*digests)[SNAPSHOT_DIGEST_HEX + 1], int64_t *ages, size_t max)
{
	struct tags g = { .digests = digests, .ages = ages, .max = max, .now = time(NULL) };

	if (m->cfg.kept_layers == 0 || max == 0)
		return 0;
	kept_each(m, tag_one, &g);
	return g.n;
}

void
kept_forget_digest(const struct mgr *m, const char *digest)
{
	if (m->cfg.kept_layers > 0)
		kept_sweep(m, digest);
}

/* r's layer image (retired, archived as digest at depth, no file system
 * of it left) is kept instead of reclaimed with the layer */
void
kept_keep(const struct mgr *m, const struct record *r, const char *digest, unsigned depth)
{
	char dir[PATH_MAX], img[PATH_MAX + 16], tag[PATH_MAX], tmp[PATH_MAX + 8], line[80];
	int fd, dfd, rc;

	if (m->cfg.kept_layers == 0)
		return;
	kept_drop(m, r->id.sandbox);
	snprintf(dir, sizeof(dir), "%s/kept", m->cfg.data_dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return;
	snprintf(img, sizeof(img), "%s/disk.img", r->layer_dir);
	kept_path(m, tag, sizeof(tag), r->id.sandbox, "tag");
	snprintf(tmp, sizeof(tmp), "%s.tmp", tag);
	snprintf(line, sizeof(line), "%s %u\n", digest, depth);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return;
	rc = fd_write_all(fd, line, strlen(line));
	if (rc == 0 && fsync(fd) != 0)
		rc = -errno;
	close(fd);
	if (rc != 0 || rename(tmp, tag) != 0) {
		unlink(tmp);
		return;
	}
	kept_path(m, tmp, sizeof(tmp), r->id.sandbox, "img");
	if (rename(img, tmp) != 0) {
		log_warnx("layer of %s g%llu: cannot keep its image (%s)", r->id.sandbox,
		    (unsigned long long)r->id.generation, strerror(errno));
		unlink(tag);
		return;
	}
	if ((dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		(void)fsync(dfd);
		close(dfd);
	}
	kept_sweep(m, NULL);
}
