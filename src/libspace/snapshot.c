/* Snapshot archives of a writable layer, the create side: walk the layer
 * (sorted, never following a symlink), describe each entry to libarchive's
 * pax writer, compress its tar stream with zstd, hash and bound what is
 * written. Format: docs/recovery.md; the restore side: snapshot_restore.c.
 *
 * Why libarchive and zstd rather than our own framing: pax sparse entries
 * (GNU sparse 1.0), long names and nanosecond mtimes are a solved format
 * that every tar reads; the part that must be ours is the policy (what a
 * layer may contain, what a restore may create), which stays here. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <zstd.h>

#include "limits.h"
#include "log.h"
#include "snapshot.h"
#include "snapshot_int.h"
#include "util.h"

/* ---- shared with the restore side ---- */

bool
snap_path_valid(const char *p, size_t len)
{
	size_t i, start = 0, depth = 0;

	if (len == 0 || len > SPACE_PATH_MAX || p[0] == '/')
		return false;
	if (memchr(p, '\0', len) != NULL)
		return false;
	for (i = 0; i <= len; i++) {
		if (i < len && p[i] != '/')
			continue;
		size_t clen = i - start;
		if (clen == 0 || clen > NAME_MAX)
			return false;
		if ((clen == 1 && p[start] == '.') ||
		    (clen == 2 && p[start] == '.' && p[start + 1] == '.'))
			return false;
		if (++depth > SPACE_SNAPSHOT_DEPTH_MAX)
			return false;
		start = i + 1;
	}
	return true;
}

uint64_t
snapshot_stream_max(uint64_t max_bytes)
{
	/* file data (holes excluded) cannot exceed the layer it came from;
	 * headers get as much again plus a floor, which a layer whose inodes
	 * all hold long names still fits in */
	if (max_bytes == 0 || max_bytes > (UINT64_MAX - SPACE_SNAPSHOT_META_MAX) / 2)
		return UINT64_MAX;
	return 2 * max_bytes + SPACE_SNAPSHOT_META_MAX;
}

/* ---- output: tar stream -> zstd -> hash -> file, bounded ---- */

struct snap_out {
	int fd;
	int tee;                /* >= 0: every byte written there too */
	int tee_err;            /* its failure (then tee is -1) */
	bool teed;              /* made with a tee: the file is not fsync'd */
	uint64_t cache_max;     /* with a tee: past this many bytes no copy is kept here (0: none) */
	bool uncached;          /* past it: the file is emptied and not written any more */
	int err;                /* first failure, negative errno */
	uint64_t written;       /* compressed bytes in the file */
	uint64_t flushed;       /* of them, handed to the disk (fd_writeback_ahead) */
	uint64_t dropped;       /* of those, out of the page cache (fd_drop_behind) */
	uint64_t stream;        /* tar bytes compressed */
	uint64_t max, stream_max;
	ZSTD_CCtx *z;
	struct snap_digest h;
	unsigned char zbuf[SNAP_BUF];
};

/* the tee's reader going away ends the tee, not the archive */
static void
tee_put(struct snap_out *o, const void *p, size_t n)
{
	int r;

	if (o->tee >= 0 && (r = fd_write_all(o->tee, p, n)) < 0) {
		o->tee_err = r;
		o->tee = -1;
	}
}

static int
out_put(struct snap_out *o, const void *p, size_t n)
{
	int r;

	if (o->max && o->written + n + SNAP_TRAILER_LEN > o->max)
		return -EFBIG;
	snap_digest_update(&o->h, p, n);
	if (!o->uncached && o->cache_max && o->tee >= 0 && o->written + n > o->cache_max) {
		/* the tee's reader holds the only copy from here on (a tee
		 * that failed before leaves the file the only one: kept) */
		o->uncached = true;
		if (ftruncate(o->fd, 0) < 0)
			return -errno;
	}
	if (o->uncached) {
		o->written += n;
		tee_put(o, p, n);
		return o->tee >= 0 ? 0 : -ECOMM;
	}
	if ((r = fd_write_all(o->fd, p, n)) < 0)
		return r;
	o->written += n;
	/* the file goes to the disk as it grows: one that is fsync'd at the
	 * end waits for its tail only. With a tee it is a cache that nobody
	 * reads while the archive is made (a later restore on this worker
	 * reads it back from the disk), so its pages leave the page cache
	 * once written (clean pages only): the next ones reuse them instead
	 * of taking fresh memory, whose first touch costs many times a
	 * reused page's copy on a machine that gives its free memory back
	 * to its host (docs/benchmarks.md) */
	fd_writeback_ahead(o->fd, &o->flushed, o->written);
	if (o->teed)
		fd_drop_behind(o->fd, &o->dropped, o->flushed);
	tee_put(o, p, n);
	return 0;
}

/* compresses in (with ZSTD_e_end: finishes the frame) */
static int
out_zstd(struct snap_out *o, const void *buf, size_t n, ZSTD_EndDirective how)
{
	ZSTD_inBuffer in = { buf, n, 0 };
	size_t left;
	int r;

	do {
		ZSTD_outBuffer out = { o->zbuf, sizeof(o->zbuf), 0 };
		left = ZSTD_compressStream2(o->z, &out, &in, how);
		if (ZSTD_isError(left))
			return -EIO;
		if (out.pos > 0 && (r = out_put(o, o->zbuf, out.pos)) < 0)
			return r;
	} while (how == ZSTD_e_end ? left != 0 : in.pos < in.size);
	return 0;
}

/* Takes every block, even after a failure, which it records in o->err
 * for the walk to stop on: a writer that saw its output fail in a header
 * goes to libarchive's fatal state, which archive_write_free does not
 * close, and libarchive 3.6 frees its output block only when it closes
 * (test_snapshot's quota in a header). */
static la_ssize_t
out_write_cb(struct archive *a, void *ctx, const void *buf, size_t n)
{
	struct snap_out *o = ctx;
	int r;

	(void)a;
	if (o->err)             /* failed already: nothing more goes out */
		return (la_ssize_t)n;
	o->stream += n;
	if (o->stream > o->stream_max)
		r = -EFBIG;
	else
		r = out_zstd(o, buf, n, ZSTD_e_continue);
	if (r < 0)
		o->err = r;
	return (la_ssize_t)n;
}

/* ---- walking the layer ---- */

struct region {
	off_t off, len;
};

struct snap_create {
	struct archive *a;
	struct archive_entry *ae;
	struct snap_out *o;
	struct region *reg;
	size_t nreg, capreg;
	char path[SPACE_PATH_MAX + 1];
	char link[SPACE_PATH_MAX + 1];
	unsigned char io[SNAP_BUF];
	bool drop_read;         /* SNAPSHOT_DROP_READ */
	const struct snapshot_index *base;      /* a delta of its base, or NULL */
	struct snapshot_stats st;
};

/* the libarchive failure as an errno: ours when the output refused */
static int
arc_err(struct snap_create *c)
{
	int e;

	if (c->o->err)
		return c->o->err;
	e = archive_errno(c->a);
	return e > 0 ? -e : -EIO;
}

static void
entry_start(struct snap_create *c, unsigned type, unsigned perm, const struct stat *st)
{
	archive_entry_clear(c->ae);
	archive_entry_copy_pathname(c->ae, c->path);
	archive_entry_set_filetype(c->ae, type);
	archive_entry_set_perm(c->ae, perm);
	if (st)
		archive_entry_set_mtime(c->ae, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
	else
		archive_entry_set_mtime(c->ae, 0, 0);
}

static int
entry_write(struct snap_create *c)
{
	if (c->st.entries >= SPACE_SNAPSHOT_ENTRIES_MAX)
		return -E2BIG;
	if (archive_write_header(c->a, c->ae) != ARCHIVE_OK || c->o->err)
		return arc_err(c);
	c->st.entries++;
	return 0;
}

static int
region_add(struct snap_create *c, off_t off, off_t len)
{
	if (c->nreg == c->capreg) {
		size_t cap = c->capreg ? c->capreg * 2 : 64;
		struct region *nr;
		/* the scan itself is bounded: a file cut in more pieces than
		 * a layer has entries is not worth keeping apart */
		if (cap > 16u * SPACE_SNAPSHOT_SPARSE_MAX)
			return -E2BIG;
		if ((nr = realloc(c->reg, cap * sizeof(*nr))) == NULL)
			return -ENOMEM;
		c->reg = nr;
		c->capreg = cap;
	}
	c->reg[c->nreg].off = off;
	c->reg[c->nreg].len = len;
	c->nreg++;
	return 0;
}

static int
off_cmp(const void *a, const void *b)
{
	off_t x = *(const off_t *)a, y = *(const off_t *)b;
	return x < y ? -1 : x > y;
}

/* Beyond SPACE_SNAPSHOT_SPARSE_MAX regions, the smallest holes are stored
 * as zeros: the fewest extra bytes for a bounded sparse map. */
static int
regions_reduce(struct snap_create *c)
{
	size_t i, j, excess = c->nreg - SPACE_SNAPSHOT_SPARSE_MAX;
	off_t *gaps, limit;

	if ((gaps = malloc((c->nreg - 1) * sizeof(*gaps))) == NULL)
		return -ENOMEM;
	for (i = 1; i < c->nreg; i++)
		gaps[i - 1] = c->reg[i].off - (c->reg[i - 1].off + c->reg[i - 1].len);
	qsort(gaps, c->nreg - 1, sizeof(*gaps), off_cmp);
	limit = gaps[excess - 1];
	free(gaps);
	for (i = 1, j = 0; i < c->nreg; i++) {
		off_t end = c->reg[j].off + c->reg[j].len;
		if (c->reg[i].off - end <= limit)
			c->reg[j].len = c->reg[i].off + c->reg[i].len - c->reg[j].off;
		else
			c->reg[++j] = c->reg[i];
	}
	c->nreg = j + 1;
	return 0;
}

/* The data regions of fd (SEEK_DATA/SEEK_HOLE), within size. A file
 * system without hole reporting gives one region: the whole file. */
static int
scan_regions(struct snap_create *c, int fd, off_t size)
{
	off_t off = 0, d, h;
	int r;

	c->nreg = 0;
	while (off < size) {
		if ((d = lseek(fd, off, SEEK_DATA)) < 0) {
			if (errno == ENXIO)
				break;
			if (errno != EINVAL && errno != EOPNOTSUPP)
				return -errno;
			c->nreg = 0;
			return size > 0 ? region_add(c, 0, size) : 0;
		}
		if (d >= size)
			break;
		if ((h = lseek(fd, d, SEEK_HOLE)) < 0)
			return -errno;
		if (h > size)
			h = size;
		if ((r = region_add(c, d, h - d)) < 0)
			return r;
		off = h;
	}
	if (c->nreg > SPACE_SNAPSHOT_SPARSE_MAX)
		return regions_reduce(c);
	return 0;
}

/* Feeds len bytes of hole to the pax writer, which drops them: it wants
 * the whole logical file and keeps only what its sparse map says is data. */
static int
write_hole(struct snap_create *c, off_t len)
{
	static const unsigned char zeros[SNAP_BUF];

	while (len > 0) {
		size_t k = len < (off_t)sizeof(zeros) ? (size_t)len : sizeof(zeros);
		la_ssize_t n = archive_write_data(c->a, zeros, k);
		if (n < 0 || c->o->err)
			return arc_err(c);
		if (n == 0)
			return -EIO;
		len -= n;
	}
	return 0;
}

static int
write_region(struct snap_create *c, int fd, off_t off, off_t len)
{
	uint64_t dropped = (uint64_t)off;

	while (len > 0) {
		size_t want = len < (off_t)sizeof(c->io) ? (size_t)len : sizeof(c->io);
		ssize_t n = pread(fd, c->io, want, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)             /* shrank under us: the archive would lie */
			return -EBUSY;
		for (ssize_t done = 0; done < n;) {
			la_ssize_t w = archive_write_data(c->a, c->io + done, (size_t)(n - done));
			if (w < 0 || c->o->err)
				return arc_err(c);
			if (w == 0)
				return -EIO;
			done += w;
		}
		off += n;
		len -= n;
		if (c->drop_read)
			fd_drop_read(fd, &dropped, (uint64_t)off, len == 0);
	}
	return 0;
}

static int
emit_file(struct snap_create *c, int dfd, const char *name, const struct stat *lst)
{
	struct stat st;
	off_t pos = 0;
	size_t i;
	int fd, r;

	/* O_NOFOLLOW + O_NONBLOCK: if the name was swapped for a symlink or a
	 * fifo since fstatat, we neither follow it nor block on it. */
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return errno == ELOOP ? -EBUSY : -errno;
	if (fstat(fd, &st) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode) || st.st_ino != lst->st_ino || st.st_dev != lst->st_dev) {
		r = -EBUSY;
		goto out;
	}
	if ((r = scan_regions(c, fd, st.st_size)) < 0)
		goto out;
	entry_start(c, AE_IFREG, st.st_mode & SNAP_FILE_MODES, &st);
	archive_entry_set_size(c->ae, st.st_size);
	/* a sparse map only when there is a hole: a dense file is a plain
	 * entry; a file that is all hole has one empty region at its end */
	if (st.st_size > 0 && c->nreg == 0)
		archive_entry_sparse_add_entry(c->ae, st.st_size, 0);
	else if (!(c->nreg == 1 && c->reg[0].off == 0 && c->reg[0].len == st.st_size))
		for (i = 0; i < c->nreg; i++)
			archive_entry_sparse_add_entry(c->ae, c->reg[i].off, c->reg[i].len);
	if ((r = entry_write(c)) < 0)
		goto out;
	for (i = 0; i < c->nreg && r == 0; i++) {
		if ((r = write_hole(c, c->reg[i].off - pos)) == 0)
			r = write_region(c, fd, c->reg[i].off, c->reg[i].len);
		pos = c->reg[i].off + c->reg[i].len;
	}
	if (r == 0)
		r = write_hole(c, st.st_size - pos);
	if (r == 0 && (archive_write_finish_entry(c->a) != ARCHIVE_OK || c->o->err))
		r = arc_err(c);
	if (r == 0)
		c->st.bytes += (uint64_t)st.st_size;
out:
	close(fd);
	return r;
}

/* a file the index says is as the base has it: no data, a hard link to
 * its own path (snapshot.h) */
static int
emit_same(struct snap_create *c, const struct stat *st)
{
	int r;

	entry_start(c, AE_IFREG, st->st_mode & SNAP_FILE_MODES, st);
	archive_entry_set_size(c->ae, 0);
	archive_entry_copy_hardlink(c->ae, c->path);
	if ((r = entry_write(c)) < 0)
		return r;
	if (archive_write_finish_entry(c->a) != ARCHIVE_OK || c->o->err)
		return arc_err(c);
	c->st.bytes += (uint64_t)st->st_size;
	c->st.unchanged++;
	return 0;
}

static int
name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the names of dfd sorted (byte order), so that the same tree always
 * gives the same archive and the same digest. */
static int
list_sorted(int dfd, char ***names_out, size_t *n_out)
{
	char **names = NULL, **nn;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		r = -errno;
		close(fd);
		return r;
	}
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (n >= SPACE_SNAPSHOT_ENTRIES_MAX) {
			r = -E2BIG;
			goto out;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			if ((nn = realloc(names, cap * sizeof(*names))) == NULL) {
				r = -ENOMEM;
				goto out;
			}
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		n++;
	}
	if (errno != 0)
		r = -errno;
out:
	closedir(d);
	if (r < 0) {
		while (n > 0)
			free(names[--n]);
		free(names);
		return r;
	}
	if (n > 1)
		qsort(names, n, sizeof(*names), name_cmp);
	*names_out = names;
	*n_out = n;
	return 0;
}

static int
walk_dir(struct snap_create *c, int dfd, size_t plen, int depth)
{
	char **names = NULL;
	size_t n = 0, i;
	int r;

	if (depth >= SPACE_SNAPSHOT_DEPTH_MAX)
		return -E2BIG;
	if ((r = list_sorted(dfd, &names, &n)) < 0)
		return r;
	for (i = 0; i < n && r == 0; i++) {
		const char *name = names[i];
		size_t nlen = strlen(name), clen = plen + (plen ? 1 : 0) + nlen;
		struct stat st;

		if (clen > SPACE_PATH_MAX) {
			r = -ENAMETOOLONG;
			break;
		}
		if (plen)
			c->path[plen] = '/';
		memcpy(c->path + plen + (plen ? 1 : 0), name, nlen + 1);
		if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (S_ISREG(st.st_mode)) {
			r = c->base && snapshot_index_same(c->base, c->path, &st) ?
			    emit_same(c, &st) : emit_file(c, dfd, name, &st);
		} else if (S_ISDIR(st.st_mode)) {
			struct stat cst;
			int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				r = errno == ELOOP || errno == ENOTDIR ? -EBUSY : -errno;
				break;
			}
			if (fstat(cfd, &cst) < 0 || cst.st_ino != st.st_ino || cst.st_dev != st.st_dev)
				r = -EBUSY;
			if (r == 0) {
				entry_start(c, AE_IFDIR, st.st_mode & SNAP_DIR_MODES, &st);
				r = entry_write(c);
			}
			if (r == 0)
				r = walk_dir(c, cfd, clen, depth + 1);
			close(cfd);
		} else if (S_ISLNK(st.st_mode)) {
			ssize_t ln = readlinkat(dfd, name, c->link, sizeof(c->link));
			if (ln < 0) {
				r = errno == EINVAL ? -EBUSY : -errno;
				break;
			}
			if (ln == 0 || (size_t)ln > SPACE_PATH_MAX) {
				r = -ENAMETOOLONG;
				break;
			}
			c->link[ln] = '\0';
			entry_start(c, AE_IFLNK, SNAP_LINK_MODE, &st);
			archive_entry_copy_symlink(c->ae, c->link);
			r = entry_write(c);
		} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
			/* an overlay whiteout: the file was deleted from the
			 * template; dropping it would resurrect that file */
			entry_start(c, AE_IFCHR, 0, NULL);
			archive_entry_set_rdev(c->ae, 0);
			r = entry_write(c);
		} else {
			/* devices, fifos, sockets: not layer content; a
			 * sandbox cannot make a device appear on restore */
			c->st.skipped++;
		}
	}
	c->path[plen] = '\0';
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/* The pax writer, set for byte-exact and reproducible archives: names
 * stored as the bytes they are (no locale conversion), owners as 0. */
static struct archive *
writer_new(struct snap_out *o)
{
	struct archive *a = archive_write_new();

	if (a == NULL)
		return NULL;
	if (archive_write_set_format_pax(a) != ARCHIVE_OK ||
	    archive_write_set_format_option(a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
	    archive_write_open2(a, o, NULL, out_write_cb, NULL, NULL) != ARCHIVE_OK) {
		archive_write_free(a);
		return NULL;
	}
	return a;
}

int
snapshot_create(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    char digest_out[SNAPSHOT_DIGEST_HEX + 1], struct snapshot_stats *stats)
{
	return snapshot_create_tee(layer_dir, store_dir, max_bytes, -1, NULL, 0, digest_out,
	    stats);
}

int
snapshot_create_tee(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    int tee_fd, int *tee_err, unsigned flags, char digest_out[SNAPSHOT_DIGEST_HEX + 1],
    struct snapshot_stats *stats)
{
	return snapshot_create_delta(layer_dir, store_dir, max_bytes, tee_fd, tee_err, flags, NULL,
	    digest_out, stats);
}

int
snapshot_create_delta(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    int tee_fd, int *tee_err, unsigned flags, const struct snapshot_index *base,
    char digest_out[SNAPSHOT_DIGEST_HEX + 1], struct snapshot_stats *stats)
{
	struct snap_create *c = NULL;
	struct snap_out *o = NULL;
	unsigned char digest[SNAPSHOT_DIGEST_LEN], trailer[SNAP_TRAILER_LEN], rnd[8];
	unsigned char mark[SNAP_MARK_LEN];
	char tmpname[64], final[SNAPSHOT_DIGEST_HEX + 8];
	int lfd = -1, sfd = -1, r;
	bool tmp_made = false;

	/* idempotent; the hash and the temporary name need an initialised
	 * libsodium whoever the caller is */
	if (sodium_init() < 0)
		return -EIO;
	if ((c = calloc(1, sizeof(*c))) == NULL || (o = calloc(1, sizeof(*o))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	o->fd = -1;
	o->tee = tee_fd;
	o->teed = tee_fd >= 0;
	o->cache_max = tee_fd >= 0 && (flags & SNAPSHOT_TEE_UNCACHED) ? SPACE_TEE_CACHE_MAX : 0;
	o->max = max_bytes;
	o->stream_max = snapshot_stream_max(max_bytes);
	c->o = o;
	c->drop_read = (flags & SNAPSHOT_DROP_READ) != 0;
	c->base = base;
	if ((o->z = ZSTD_createCCtx()) == NULL ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(o->z, ZSTD_c_compressionLevel, SPACE_SNAPSHOT_ZSTD_LEVEL)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(o->z, ZSTD_c_windowLog, SPACE_SNAPSHOT_WINDOW_LOG - 2)) ||
	    (c->ae = archive_entry_new()) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	/* compression on a thread of zstd's own, in pieces of a bounded
	 * size, while this one reads, archives, hashes and writes; the same
	 * tree still gives the same bytes (zstd's output does not depend on
	 * the timing of its workers). A libzstd without threads compresses
	 * here, as before. */
	if (!ZSTD_isError(ZSTD_CCtx_setParameter(o->z, ZSTD_c_nbWorkers, SPACE_SNAPSHOT_ZSTD_WORKERS)))
		(void)ZSTD_CCtx_setParameter(o->z, ZSTD_c_jobSize, SPACE_SNAPSHOT_ZSTD_JOB);
	if ((lfd = open(layer_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if (mkdir(store_dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		goto out;
	}
	if ((sfd = open(store_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	randombytes_buf(rnd, sizeof(rnd));
	memcpy(tmpname, ".tmp.", 5);
	hex_encode(rnd, sizeof(rnd), tmpname + 5, sizeof(tmpname) - 5);
	o->fd = openat(sfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (o->fd < 0) {
		r = -errno;
		goto out;
	}
	tmp_made = true;
	/* new archives are named by SHA-256, which their first frame says */
	snap_digest_init(&o->h, SNAP_ALG_SHA256);
	snap_mark(mark);
	if ((r = out_put(o, mark, sizeof(mark))) < 0)
		goto out;
	if ((c->a = writer_new(o)) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	if (base != NULL) {
		unsigned char b[SNAPSHOT_DIGEST_LEN], head[SNAP_DELTA_LEN];

		if (hex_decode(snapshot_index_base(base), SNAPSHOT_DIGEST_HEX, b, sizeof(b)) !=
		    (ssize_t)sizeof(b)) {
			r = -EINVAL;
			goto out;
		}
		snap_delta_header(head, b);
		if ((r = out_put(o, head, sizeof(head))) < 0)
			goto out;
	}
	if ((r = walk_dir(c, lfd, 0, 0)) < 0)
		goto out;
	if (archive_write_close(c->a) != ARCHIVE_OK || o->err) {
		r = arc_err(c);
		goto out;
	}
	if ((r = out_zstd(o, NULL, 0, ZSTD_e_end)) < 0)
		goto out;
	snap_digest_final(&o->h, digest);
	snap_trailer(trailer, digest);
	if (!o->uncached && (r = fd_write_all(o->fd, trailer, sizeof(trailer))) < 0)
		goto out;
	tee_put(o, trailer, sizeof(trailer));
	if (o->uncached && o->tee < 0) {
		r = -ECOMM;
		goto out;
	}
	c->st.size = o->written + sizeof(trailer);
	c->st.uncached = o->uncached;
	/* read-only: an archive is immutable once named by its digest; with
	 * a tee the copy it feeds is the durable one, this is a cache */
	if (fchmod(o->fd, 0444) < 0 || (tee_fd < 0 && fsync(o->fd) < 0)) {
		r = -errno;
		goto out;
	}
	hex_encode(digest, sizeof(digest), digest_out, SNAPSHOT_DIGEST_HEX + 1);
	if (o->uncached) {
		/* only the tee's reader has it: nothing is named here */
		unlinkat(sfd, tmpname, 0);
		tmp_made = false;
		goto done;
	}
	snprintf(final, sizeof(final), "%s.snap", digest_out);
	/* if the name exists it holds these very bytes: replacing it is
	 * harmless and also heals a copy damaged on shared storage */
	if (renameat(sfd, tmpname, sfd, final) < 0) {
		r = -errno;
		goto out;
	}
	tmp_made = false;
	if (tee_fd < 0 && fsync(sfd) < 0) {
		r = -errno;
		goto out;
	}
done:
	if (c->st.skipped)
		log_warnx("snapshot %s: %llu special files left out", digest_out,
		    (unsigned long long)c->st.skipped);
	if (stats)
		*stats = c->st;
	r = 0;
out:
	if (r == -EFBIG)
		log_warnx("snapshot of %s refused: the archive would exceed the layer's quota "
		    "(%llu bytes)", layer_dir, (unsigned long long)max_bytes);
	if (o && r < 0 && o->err == 0)
		o->err = r;     /* archive_write_free closes: out_write_cb drops the rest */
	if (tee_err != NULL)
		*tee_err = o ? o->tee_err : 0;
	if (c && c->a)
		archive_write_free(c->a);
	if (c && c->ae)
		archive_entry_free(c->ae);
	if (o && o->fd >= 0)
		close(o->fd);
	if (tmp_made)
		unlinkat(sfd, tmpname, 0);
	if (sfd >= 0)
		close(sfd);
	if (lfd >= 0)
		close(lfd);
	if (o)
		ZSTD_freeCCtx(o->z);
	if (c)
		free(c->reg);
	free(o);
	free(c);
	return r;
}
