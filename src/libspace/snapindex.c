/* A restored layer's index of its regular files, for incremental
 * archives (snapshot.h; docs/recovery.md, "Incremental archives").
 *
 * File: "SPXIDX1\n", the base digest (32 bytes), its depth (u32), the
 * count (u32), then per file, sorted by path (byte order, no two alike):
 * the path's length (u16) and bytes, inode, size, mtime seconds and
 * nanoseconds, ctime seconds and nanoseconds (u64, u64, u64, u32, u64,
 * u32); integers big-endian; nothing after the last file. The file is
 * sbx-manager's own, on its own disk, and still decoded strictly: a
 * damaged index is refused whole and the next archive is made whole. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>

#include "limits.h"
#include "snapshot.h"
#include "snapshot_int.h"
#include "util.h"

#define IDX_MAGIC       "SPXIDX1\n"
#define IDX_HEAD        (8 + 32 + 4 + 4)
#define IDX_FIXED       (2 + 8 + 8 + 8 + 4 + 8 + 4)

struct idx_file {
	char *path;
	uint64_t ino, size;
	int64_t msec, csec;
	uint32_t mnsec, cnsec;
};

struct snapshot_index {
	char base[SNAPSHOT_DIGEST_HEX + 1];
	unsigned depth;
	struct idx_file *f;
	size_t n, cap;
	size_t bytes;           /* encoded size */
};

void
snapshot_index_free(struct snapshot_index *x)
{
	if (x == NULL)
		return;
	for (size_t i = 0; i < x->n; i++)
		free(x->f[i].path);
	free(x->f);
	free(x);
}

const char *
snapshot_index_base(const struct snapshot_index *x)
{
	return x->base;
}

unsigned
snapshot_index_depth(const struct snapshot_index *x)
{
	return x->depth;
}

size_t
snapshot_index_count(const struct snapshot_index *x)
{
	return x->n;
}

static int
idx_add(struct snapshot_index *x, const char *path, size_t plen, const struct idx_file *v)
{
	if (x->n >= SPACE_SNAPSHOT_ENTRIES_MAX)
		return -E2BIG;
	x->bytes += IDX_FIXED + plen;
	if (x->bytes + IDX_HEAD > SPACE_SNAPSHOT_INDEX_MAX)
		return -E2BIG;
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 256;
		struct idx_file *f = realloc(x->f, cap * sizeof(*f));

		if (f == NULL)
			return -ENOMEM;
		x->f = f;
		x->cap = cap;
	}
	x->f[x->n] = *v;
	if ((x->f[x->n].path = strndup(path, plen)) == NULL)
		return -ENOMEM;
	x->n++;
	return 0;
}

static int
idx_cmp(const void *a, const void *b)
{
	return strcmp(((const struct idx_file *)a)->path, ((const struct idx_file *)b)->path);
}

static bool
ts_after(int64_t s1, uint32_t n1, int64_t s2, uint32_t n2)
{
	return s1 > s2 || (s1 == s2 && n1 > n2);
}

/* the regular files beneath dfd (path holds plen bytes of its own path);
 * with a threshold (before: not NULL), those changed at or after it are
 * left out (their next archive carries them whole) */
static int
idx_walk(struct snapshot_index *x, int dfd, dev_t dev, char *path, size_t plen, int depth,
    const struct timespec *before)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (depth >= SPACE_SNAPSHOT_DEPTH_MAX)
		return -E2BIG;
	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while (r == 0 && (errno = 0, de = readdir(d)) != NULL) {
		size_t nlen = strlen(de->d_name), clen = plen + (plen ? 1 : 0) + nlen;
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (clen > SPACE_PATH_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		if (plen)
			path[plen] = '/';
		memcpy(path + plen + (plen ? 1 : 0), de->d_name, nlen + 1);
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (st.st_dev != dev)
			continue;
		if (S_ISREG(st.st_mode) && before != NULL &&
		    !ts_after(before->tv_sec, (uint32_t)before->tv_nsec, st.st_ctim.tv_sec,
		    (uint32_t)st.st_ctim.tv_nsec)) {
			continue;
		} else if (S_ISREG(st.st_mode)) {
			struct idx_file v = { NULL, (uint64_t)st.st_ino, (uint64_t)st.st_size,
			    st.st_mtim.tv_sec, st.st_ctim.tv_sec,
			    (uint32_t)st.st_mtim.tv_nsec, (uint32_t)st.st_ctim.tv_nsec };

			r = idx_add(x, path, clen, &v);
		} else if (S_ISDIR(st.st_mode)) {
			int cfd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

			if (cfd < 0) {
				r = -errno;
				break;
			}
			r = idx_walk(x, cfd, dev, path, clen, depth + 1, before);
			close(cfd);
		}
	}
	if (r == 0 && errno != 0)
		r = -errno;
	path[plen] = '\0';
	closedir(d);
	return r;
}


/* The file system's clock past every ctime the index holds: a change
 * made later cannot give a file the ctime it had when indexed, even
 * within one tick of a coarse timestamp. A probe file beside the tree
 * (random name, removed again) has its ctime set until it is later than
 * the latest indexed one. -ETIME if the clock does not move in a second. */
static int
idx_clock_past(const struct snapshot_index *x, int dfd)
{
	int64_t ms = INT64_MIN;
	uint32_t mn = 0;
	unsigned char rnd[8];
	char name[40], hex[17];
	struct stat st;
	int fd, i, r = -ETIME;

	for (size_t k = 0; k < x->n; k++)
		if (ms == INT64_MIN || ts_after(x->f[k].csec, x->f[k].cnsec, ms, mn)) {
			ms = x->f[k].csec;
			mn = x->f[k].cnsec;
		}
	if (ms == INT64_MIN)
		return 0;
	randombytes_buf(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), hex, sizeof(hex));
	snprintf(name, sizeof(name), ".space-index-probe-%s", hex);
	if ((fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return -errno;
	for (i = 0; i < 1000; i++) {
		if (fchmod(fd, i % 2 ? 0600 : 0400) < 0 || fstat(fd, &st) < 0) {
			r = -errno;
			break;
		}
		if (ts_after(st.st_ctim.tv_sec, (uint32_t)st.st_ctim.tv_nsec, ms, mn)) {
			r = 0;
			break;
		}
		usleep(1000);
	}
	close(fd);
	unlinkat(dfd, name, 0);
	return r;
}

static size_t
idx_encode(const struct snapshot_index *x, uint8_t *b)
{
	size_t o = 0;

	memcpy(b, IDX_MAGIC, 8);
	hex_decode(x->base, SNAPSHOT_DIGEST_HEX, b + 8, 32);
	be_store(b + 40, x->depth, 4);
	be_store(b + 44, x->n, 4);
	o = IDX_HEAD;
	for (size_t i = 0; i < x->n; i++) {
		const struct idx_file *f = &x->f[i];

		o += lstr_put(b + o, f->path, 2);
		be_store(b + o, f->ino, 8);
		be_store(b + o + 8, f->size, 8);
		be_store(b + o + 16, (uint64_t)f->msec, 8);
		be_store(b + o + 24, f->mnsec, 4);
		be_store(b + o + 28, (uint64_t)f->csec, 8);
		be_store(b + o + 36, f->cnsec, 4);
		o += IDX_FIXED - 2;
	}
	return o;
}

/* the index of layer_dir's regular files (before: see idx_walk), sorted */
static int
idx_build(const char *layer_dir, const struct timespec *before, bool clock_past,
    struct snapshot_index **out)
{
	struct snapshot_index *x;
	char *p = NULL;
	struct stat st;
	int dfd = -1, r;

	*out = NULL;
	if ((x = calloc(1, sizeof(*x))) == NULL || (p = malloc(SPACE_PATH_MAX + 1)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	p[0] = '\0';
	if ((dfd = open(layer_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    fstat(dfd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = idx_walk(x, dfd, st.st_dev, p, 0, 0, before)) < 0)
		goto out;
	if (x->n > 1)
		qsort(x->f, x->n, sizeof(*x->f), idx_cmp);
	if (clock_past && (r = idx_clock_past(x, dfd)) < 0)
		goto out;
	*out = x;
	x = NULL;
out:
	if (dfd >= 0)
		close(dfd);
	free(p);
	snapshot_index_free(x);
	return r;
}

int
snapshot_index_write(struct snapshot_index *x, const char *path, const char *base,
    unsigned depth)
{
	char tmp[PATH_MAX];
	uint8_t *buf;
	size_t len;
	int fd, r;

	if (!snapshot_digest_valid(base) || depth > SNAPSHOT_DELTA_DEPTH_MAX)
		return -EINVAL;
	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return -ENAMETOOLONG;
	memcpy(x->base, base, SNAPSHOT_DIGEST_HEX + 1);
	x->depth = depth;
	if ((buf = malloc(IDX_HEAD + x->bytes)) == NULL)
		return -ENOMEM;
	len = idx_encode(x, buf);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0) {
		r = -errno;
		free(buf);
		return r;
	}
	if ((r = fd_write_all(fd, buf, len)) == 0 && fsync(fd) < 0)
		r = -errno;
	if (close(fd) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, path) < 0)
		r = -errno;
	if (r != 0)
		unlink(tmp);
	free(buf);
	return r;
}

int
snapshot_index_save(const char *layer_dir, const char *path, const char *base, unsigned depth)
{
	struct snapshot_index *x;
	int r;

	if (!snapshot_digest_valid(base) || depth > SNAPSHOT_DELTA_DEPTH_MAX)
		return -EINVAL;
	if ((r = idx_build(layer_dir, NULL, true, &x)) < 0)
		return r;
	r = snapshot_index_write(x, path, base, depth);
	snapshot_index_free(x);
	return r;
}

int
snapshot_index_build_live(const char *layer_dir, const struct timespec *before,
    struct snapshot_index **out)
{
	return idx_build(layer_dir, before, false, out);
}

int
snapshot_index_decode(const unsigned char *b, size_t len, struct snapshot_index **out)
{
	struct snapshot_index *x;
	const uint8_t *p = b + IDX_HEAD, *end = b + len;
	uint64_t count;
	char *path = NULL;
	int r = -EBADMSG;

	*out = NULL;
	if (len < IDX_HEAD || len > SPACE_SNAPSHOT_INDEX_MAX || memcmp(b, IDX_MAGIC, 8) != 0)
		return -EBADMSG;
	if ((x = calloc(1, sizeof(*x))) == NULL || (path = malloc(SPACE_PATH_MAX + 1)) == NULL) {
		free(x);
		return -ENOMEM;
	}
	hex_encode(b + 8, 32, x->base, sizeof(x->base));
	x->depth = (unsigned)be_load(b + 40, 4);
	count = be_load(b + 44, 4);
	if (x->depth > SNAPSHOT_DELTA_DEPTH_MAX || count > SPACE_SNAPSHOT_ENTRIES_MAX ||
	    count > (len - IDX_HEAD) / (IDX_FIXED + 1))
		goto bad;
	for (uint64_t i = 0; i < count; i++) {
		struct idx_file v;
		size_t plen;

		if (lstr_get(&p, end, 2, path, SPACE_PATH_MAX) != 0)
			goto bad;
		plen = strlen(path);
		if (!snap_path_valid(path, plen) || (size_t)(end - p) < IDX_FIXED - 2)
			goto bad;
		/* sorted, no two alike: one answer per path */
		if (x->n > 0 && strcmp(x->f[x->n - 1].path, path) >= 0)
			goto bad;
		v.ino = be_load(p, 8);
		v.size = be_load(p + 8, 8);
		v.msec = (int64_t)be_load(p + 16, 8);
		v.mnsec = (uint32_t)be_load(p + 24, 4);
		v.csec = (int64_t)be_load(p + 28, 8);
		v.cnsec = (uint32_t)be_load(p + 36, 4);
		p += IDX_FIXED - 2;
		if (v.mnsec >= 1000000000u || v.cnsec >= 1000000000u || v.size > INT64_MAX)
			goto bad;
		if ((r = idx_add(x, path, plen, &v)) < 0) {
			r = r == -E2BIG ? -EBADMSG : r;
			goto bad;
		}
		r = -EBADMSG;
	}
	if (p != end)
		goto bad;
	free(path);
	*out = x;
	return 0;
bad:
	free(path);
	snapshot_index_free(x);
	return r;
}

int
snapshot_index_load(const char *path, struct snapshot_index **out)
{
	char *buf = NULL;
	size_t len = 0;
	int r;

	*out = NULL;
	if ((r = read_file(path, SPACE_SNAPSHOT_INDEX_MAX, &buf, &len)) < 0)
		return r == -EFBIG ? -EBADMSG : r;
	r = snapshot_index_decode((const unsigned char *)buf, len, out);
	free(buf);
	return r;
}

bool
snapshot_index_same(const struct snapshot_index *x, const char *path, const struct stat *st)
{
	size_t lo = 0, hi = x->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct idx_file *f = &x->f[mid];
		int c = strcmp(path, f->path);

		if (c == 0)
			return S_ISREG(st->st_mode) && f->ino == (uint64_t)st->st_ino &&
			    f->size == (uint64_t)st->st_size &&
			    f->msec == st->st_mtim.tv_sec && f->mnsec == (uint32_t)st->st_mtim.tv_nsec &&
			    f->csec == st->st_ctim.tv_sec && f->cnsec == (uint32_t)st->st_ctim.tv_nsec;
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return false;
}

/* ---- which archive a delta builds on ---- */

int
snapshot_feed_base_of(const struct snapshot_feed *f, char base[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char head[SNAP_HEAD_MAX];
	uint64_t have = 0;
	bool end = false;
	ssize_t n;

	/* the frames and a trailer at least, or all there will be */
	while (have < SNAP_HEAD_MAX + SNAP_TRAILER_LEN && !end) {
		int64_t got = f->more(f->ctx, have, &end);

		if (got < 0)
			return (int)got;
		if ((uint64_t)got < have)
			return -EBADMSG;
		have = (uint64_t)got;
	}
	do
		n = pread(f->fd, head, sizeof(head), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -EIO;
	return snap_base_from(head, (size_t)n, base);
}
