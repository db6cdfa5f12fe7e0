/* Snapshot archives of a writable layer: create (walk + stream + hash) and
 * restore (verify everything, then extract beneath one directory fd).
 * Format: docs/recovery.md. All integers are big-endian.
 *
 *   header  "SPACESNP" | u32 version (1) | u32 flags (0)
 *   entry   u8 type | u8 0 | u16 path_len | u32 mode | i64 mtime_sec |
 *           u32 mtime_nsec | path
 *           type 'F': u64 size | data     type 'L': u16 target_len | target
 *           type 'D', 'W': nothing more
 *   end     u8 'E' | u64 entry_count
 *   trailer 32 bytes BLAKE2b-256 of everything before it (= the file name)
 */
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

#include <sodium.h>

#include "limits.h"
#include "log.h"
#include "snapshot.h"
#include "util.h"

#define SNAP_MAGIC      "SPACESNP"
#define SNAP_VERSION    1u
#define SNAP_HDR_LEN    16
#define SNAP_ENT_LEN    20      /* fixed part of an entry */
#define SNAP_END_LEN    9
#define SNAP_BUF        (64u << 10)

#define T_FILE  'F'
#define T_DIR   'D'
#define T_LINK  'L'
#define T_WOUT  'W'     /* overlay whiteout: char device 0:0 */
#define T_END   'E'

/* Permission bits we carry. setuid/setgid are dropped on files: the
 * restorer runs as root, and a sandbox must not be able to plant a
 * set-id file owned by whoever restores it. */
#define FILE_MODES      0777u
#define DIR_MODES       01777u

static void put16(unsigned char *p, uint16_t v) { p[0] = v >> 8; p[1] = v & 0xff; }
static void put32(unsigned char *p, uint32_t v) { put16(p, v >> 16); put16(p + 2, v & 0xffff); }
static void put64(unsigned char *p, uint64_t v) { put32(p, v >> 32); put32(p + 4, v & 0xffffffffu); }
static uint16_t get16(const unsigned char *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t get32(const unsigned char *p) { return (uint32_t)get16(p) << 16 | get16(p + 2); }
static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* ---- writer: buffered, hashes every byte it emits ---- */

struct snap_writer {
	int fd;
	size_t len;
	crypto_generichash_state h;
	unsigned char buf[SNAP_BUF];
};

static int
w_flush(struct snap_writer *w)
{
	int r = fd_write_all(w->fd, w->buf, w->len);

	w->len = 0;
	return r;
}

static int
w_put(struct snap_writer *w, const void *data, size_t len)
{
	const unsigned char *p = data;
	int r;

	crypto_generichash_update(&w->h, p, len);
	while (len > 0) {
		size_t n = sizeof(w->buf) - w->len;
		if (n > len)
			n = len;
		memcpy(w->buf + w->len, p, n);
		w->len += n;
		p += n;
		len -= n;
		if (w->len == sizeof(w->buf) && (r = w_flush(w)) < 0)
			return r;
	}
	return 0;
}

/* ---- path rules shared by both sides ---- */

/* A path is relative, made of non-empty components other than "." and
 * "..", no NUL, bounded in length and depth: whatever the archive says, it
 * names something strictly beneath the destination. */
static bool
path_valid(const char *p, size_t len)
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

/* ---- create ---- */

struct snap_create {
	struct snap_writer *w;
	char path[SPACE_PATH_MAX + 1];
	char link[SPACE_PATH_MAX + 1];
	unsigned char io[SNAP_BUF];
	struct snapshot_stats st;
};

static int
emit_entry(struct snap_create *c, int type, uint32_t mode, const struct stat *st,
    size_t plen)
{
	unsigned char h[SNAP_ENT_LEN];
	int r;

	if (c->st.entries >= SPACE_SNAPSHOT_ENTRIES_MAX)
		return -E2BIG;
	h[0] = (unsigned char)type;
	h[1] = 0;
	put16(h + 2, (uint16_t)plen);
	put32(h + 4, mode);
	put64(h + 8, st ? (uint64_t)st->st_mtim.tv_sec : 0);
	put32(h + 16, st ? (uint32_t)st->st_mtim.tv_nsec : 0);
	if ((r = w_put(c->w, h, sizeof(h))) < 0)
		return r;
	c->st.entries++;
	return w_put(c->w, c->path, plen);
}

static int
emit_file(struct snap_create *c, int dfd, const char *name, const struct stat *lst,
    size_t plen)
{
	struct stat st;
	unsigned char sz[8];
	uint64_t left;
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
	if ((r = emit_entry(c, T_FILE, st.st_mode & FILE_MODES, &st, plen)) < 0)
		goto out;
	put64(sz, (uint64_t)st.st_size);
	if ((r = w_put(c->w, sz, sizeof(sz))) < 0)
		goto out;
	for (left = (uint64_t)st.st_size; left > 0;) {
		size_t want = left < sizeof(c->io) ? (size_t)left : sizeof(c->io);
		ssize_t n = read(fd, c->io, want);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			goto out;
		}
		if (n == 0) {           /* shrank under us: the archive would lie */
			r = -EBUSY;
			goto out;
		}
		if ((r = w_put(c->w, c->io, (size_t)n)) < 0)
			goto out;
		left -= (uint64_t)n;
	}
	c->st.bytes += (uint64_t)st.st_size;
	r = 0;
out:
	close(fd);
	return r;
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
			r = emit_file(c, dfd, name, &st, clen);
		} else if (S_ISDIR(st.st_mode)) {
			struct stat cst;
			int cfd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0) {
				r = errno == ELOOP || errno == ENOTDIR ? -EBUSY : -errno;
				break;
			}
			if (fstat(cfd, &cst) < 0 || cst.st_ino != st.st_ino || cst.st_dev != st.st_dev)
				r = -EBUSY;
			if (r == 0)
				r = emit_entry(c, T_DIR, st.st_mode & DIR_MODES, &st, clen);
			if (r == 0)
				r = walk_dir(c, cfd, clen, depth + 1);
			close(cfd);
		} else if (S_ISLNK(st.st_mode)) {
			unsigned char tl[2];
			ssize_t ln = readlinkat(dfd, name, c->link, sizeof(c->link));
			if (ln < 0) {
				r = errno == EINVAL ? -EBUSY : -errno;
				break;
			}
			if (ln == 0 || (size_t)ln > SPACE_PATH_MAX) {
				r = -ENAMETOOLONG;
				break;
			}
			put16(tl, (uint16_t)ln);
			if ((r = emit_entry(c, T_LINK, 0, &st, clen)) == 0 &&
			    (r = w_put(c->w, tl, sizeof(tl))) == 0)
				r = w_put(c->w, c->link, (size_t)ln);
		} else if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
			/* an overlay whiteout: the file was deleted from the
			 * template; dropping it would resurrect that file */
			r = emit_entry(c, T_WOUT, 0, NULL, clen);
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

int
snapshot_create(const char *layer_dir, const char *store_dir,
    char digest_out[SNAPSHOT_DIGEST_HEX + 1], struct snapshot_stats *stats)
{
	struct snap_create *c = NULL;
	struct snap_writer *w = NULL;
	unsigned char hdr[SNAP_HDR_LEN], end[SNAP_END_LEN], digest[SNAPSHOT_DIGEST_LEN];
	unsigned char rnd[8];
	char tmpname[64], final[SNAPSHOT_DIGEST_HEX + 8];
	int lfd = -1, sfd = -1, r;
	bool tmp_made = false;

	/* idempotent; the hash and the temporary name need an initialised
	 * libsodium whoever the caller is */
	if (sodium_init() < 0)
		return -EIO;
	if ((c = calloc(1, sizeof(*c))) == NULL || (w = calloc(1, sizeof(*w))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	w->fd = -1;
	c->w = w;
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
	w->fd = openat(sfd, tmpname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (w->fd < 0) {
		r = -errno;
		goto out;
	}
	tmp_made = true;

	crypto_generichash_init(&w->h, NULL, 0, SNAPSHOT_DIGEST_LEN);
	memcpy(hdr, SNAP_MAGIC, 8);
	put32(hdr + 8, SNAP_VERSION);
	put32(hdr + 12, 0);
	if ((r = w_put(w, hdr, sizeof(hdr))) < 0)
		goto out;
	if ((r = walk_dir(c, lfd, 0, 0)) < 0)
		goto out;
	end[0] = T_END;
	put64(end + 1, c->st.entries);
	if ((r = w_put(w, end, sizeof(end))) < 0)
		goto out;
	crypto_generichash_final(&w->h, digest, sizeof(digest));
	if ((r = w_put(w, digest, sizeof(digest))) < 0 || (r = w_flush(w)) < 0)
		goto out;
	/* read-only: an archive is immutable once named by its digest */
	if (fchmod(w->fd, 0444) < 0 || fsync(w->fd) < 0) {
		r = -errno;
		goto out;
	}
	hex_encode(digest, sizeof(digest), digest_out, SNAPSHOT_DIGEST_HEX + 1);
	snprintf(final, sizeof(final), "%s.snap", digest_out);
	/* if the name exists it holds these very bytes: replacing it is
	 * harmless and also heals a copy damaged on shared storage */
	if (renameat(sfd, tmpname, sfd, final) < 0) {
		r = -errno;
		goto out;
	}
	tmp_made = false;
	if (fsync(sfd) < 0) {
		r = -errno;
		goto out;
	}
	if (c->st.skipped)
		log_warnx("snapshot %s: %llu special files left out", digest_out,
		    (unsigned long long)c->st.skipped);
	if (stats)
		*stats = c->st;
	r = 0;
out:
	if (w && w->fd >= 0)
		close(w->fd);
	if (tmp_made)
		unlinkat(sfd, tmpname, 0);
	if (sfd >= 0)
		close(sfd);
	if (lfd >= 0)
		close(lfd);
	free(w);
	free(c);
	return r;
}

/* ---- restore ---- */

struct snap_reader {
	int fd;
	uint64_t remain;        /* body bytes not read yet */
	size_t pos, len;
	crypto_generichash_state h;
	unsigned char buf[SNAP_BUF];
};

static int
r_fill(struct snap_reader *rd)
{
	size_t want = sizeof(rd->buf);
	ssize_t n;

	if (rd->remain == 0)
		return -EBADMSG;
	if (want > rd->remain)
		want = (size_t)rd->remain;
	do
		n = read(rd->fd, rd->buf, want);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -EBADMSG;        /* shorter than fstat said */
	crypto_generichash_update(&rd->h, rd->buf, (size_t)n);
	rd->remain -= (uint64_t)n;
	rd->pos = 0;
	rd->len = (size_t)n;
	return 0;
}

/* Copies n body bytes to dst (or drops them when dst is NULL); running out
 * of body is a malformed archive. */
static int
r_read(struct snap_reader *rd, void *dst, size_t n)
{
	unsigned char *d = dst;
	int r;

	while (n > 0) {
		if (rd->pos == rd->len && (r = r_fill(rd)) < 0)
			return r;
		size_t k = rd->len - rd->pos;
		if (k > n)
			k = n;
		if (d) {
			memcpy(d, rd->buf + rd->pos, k);
			d += k;
		}
		rd->pos += k;
		n -= k;
	}
	return 0;
}

static bool
r_at_end(const struct snap_reader *rd)
{
	return rd->pos == rd->len && rd->remain == 0;
}

struct snap_entry {
	int type;
	uint32_t mode;
	int64_t sec;
	uint32_t nsec;
	uint64_t size;                          /* T_FILE */
	char path[SPACE_PATH_MAX + 1];
	char target[SPACE_PATH_MAX + 1];        /* T_LINK */
};

/* Reads one entry (not a file's data). Returns 1 for an entry, 0 at the end
 * record (count checked), or a negative errno with *why set. */
static int
parse_entry(struct snap_reader *rd, struct snap_entry *e, uint64_t seen, const char **why)
{
	unsigned char h[SNAP_ENT_LEN], b[8];
	size_t plen;
	int r;

	e->size = 0;
	if ((r = r_read(rd, h, 1)) < 0)
		goto trunc;
	e->type = h[0];
	if (e->type == T_END) {
		if ((r = r_read(rd, b, 8)) < 0)
			goto trunc;
		if (get64(b) != seen) {
			*why = "entry count does not match";
			return -EBADMSG;
		}
		if (!r_at_end(rd)) {
			*why = "data after the end record";
			return -EBADMSG;
		}
		return 0;
	}
	if (seen >= SPACE_SNAPSHOT_ENTRIES_MAX) {
		*why = "too many entries";
		return -EBADMSG;
	}
	if ((r = r_read(rd, h + 1, sizeof(h) - 1)) < 0)
		goto trunc;
	if (h[1] != 0) {
		*why = "reserved byte is not zero";
		return -EBADMSG;
	}
	plen = get16(h + 2);
	e->mode = get32(h + 4);
	e->sec = (int64_t)get64(h + 8);
	e->nsec = get32(h + 16);
	if (e->nsec >= 1000000000u) {
		*why = "bad mtime";
		return -EBADMSG;
	}
	if (plen > SPACE_PATH_MAX || (r = r_read(rd, e->path, plen)) < 0) {
		if (plen > SPACE_PATH_MAX) {
			*why = "path too long";
			return -EBADMSG;
		}
		goto trunc;
	}
	e->path[plen] = '\0';
	/* the one rule that keeps extraction beneath dest: checked here for
	 * every entry, before the first byte of the archive is extracted */
	if (!path_valid(e->path, plen)) {
		*why = "absolute, empty, dot-dot or over-deep path";
		return -EBADMSG;
	}
	switch (e->type) {
	case T_FILE:
		if (e->mode & ~FILE_MODES)
			goto badmode;
		if ((r = r_read(rd, b, 8)) < 0)
			goto trunc;
		e->size = get64(b);
		break;
	case T_DIR:
		if (e->mode & ~DIR_MODES)
			goto badmode;
		break;
	case T_LINK: {
		size_t tlen;
		if (e->mode != 0)
			goto badmode;
		if ((r = r_read(rd, b, 2)) < 0)
			goto trunc;
		tlen = get16(b);
		if (tlen == 0 || tlen > SPACE_PATH_MAX) {
			*why = "bad symlink target length";
			return -EBADMSG;
		}
		if ((r = r_read(rd, e->target, tlen)) < 0)
			goto trunc;
		e->target[tlen] = '\0';
		if (strlen(e->target) != tlen) {
			*why = "NUL in symlink target";
			return -EBADMSG;
		}
		break;
	}
	case T_WOUT:
		if (e->mode != 0 || e->sec != 0 || e->nsec != 0)
			goto badmode;
		break;
	default:
		*why = "unknown entry type";
		return -EBADMSG;
	}
	return 1;
badmode:
	*why = "mode bits not allowed for this entry type";
	return -EBADMSG;
trunc:
	if (r == -EBADMSG)
		*why = "truncated archive";
	return r;
}

static int
reader_open(struct snap_reader *rd, uint64_t body, const char **why)
{
	unsigned char hdr[SNAP_HDR_LEN];
	int r;

	if (lseek(rd->fd, 0, SEEK_SET) < 0)
		return -errno;
	rd->remain = body;
	rd->pos = rd->len = 0;
	crypto_generichash_init(&rd->h, NULL, 0, SNAPSHOT_DIGEST_LEN);
	if ((r = r_read(rd, hdr, sizeof(hdr))) < 0) {
		*why = "truncated header";
		return r;
	}
	if (memcmp(hdr, SNAP_MAGIC, 8) != 0 || get32(hdr + 8) != SNAP_VERSION ||
	    get32(hdr + 12) != 0) {
		*why = "not a version 1 snapshot";
		return -EBADMSG;
	}
	return 0;
}

/* Finishes a pass: the body hash must equal the name and the trailer. */
static int
reader_check(struct snap_reader *rd, const unsigned char want[SNAPSHOT_DIGEST_LEN],
    const char **why)
{
	unsigned char got[SNAPSHOT_DIGEST_LEN], trailer[SNAPSHOT_DIGEST_LEN];
	ssize_t n;

	crypto_generichash_final(&rd->h, got, sizeof(got));
	do
		n = read(rd->fd, trailer, sizeof(trailer));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* constant-time: the name is public, but no comparison of digests
	 * should leak how much of a forged archive matched */
	if ((size_t)n != sizeof(trailer) || sodium_memcmp(got, want, sizeof(got)) != 0 ||
	    sodium_memcmp(trailer, want, sizeof(got)) != 0) {
		*why = "digest does not match the archive";
		return -EBADMSG;
	}
	return 0;
}

/* Pass 1: read the whole archive, hash it and parse every entry, creating
 * nothing. A tampered or malformed archive stops here. */
static int
verify_pass(struct snap_reader *rd, uint64_t body, const unsigned char want[SNAPSHOT_DIGEST_LEN],
    struct snap_entry *e, const char **why)
{
	uint64_t seen = 0;
	int r;

	if ((r = reader_open(rd, body, why)) < 0)
		return r;
	/* a file size larger than the rest of the archive is caught by
	 * r_read running out of body */
	while ((r = parse_entry(rd, e, seen, why)) == 1) {
		seen++;
		for (uint64_t left = e->size; left > 0;) {
			size_t k = left < SNAP_BUF ? (size_t)left : SNAP_BUF;
			if ((r = r_read(rd, NULL, k)) < 0) {
				*why = "truncated archive";
				return r;
			}
			left -= k;
		}
	}
	if (r < 0)
		return r;
	return reader_check(rd, want, why);
}

/* Opens the directory of path's parent beneath root, one component at a
 * time with O_NOFOLLOW: a symlink anywhere on the way (one the archive
 * itself created, or any other) fails with ELOOP/ENOTDIR instead of being
 * followed out of the destination. *last points at the final component. */
static int
open_parent(int root, char *path, const char **last)
{
	char *slash = strrchr(path, '/'), *p = path, *q;
	int fd, nfd;

	if ((fd = fcntl(root, F_DUPFD_CLOEXEC, 0)) < 0)
		return -errno;
	if (slash == NULL) {
		*last = path;
		return fd;
	}
	*slash = '\0';
	for (;;) {
		q = strchr(p, '/');
		if (q)
			*q = '\0';
		nfd = openat(fd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (q)
			*q = '/';
		close(fd);
		if (nfd < 0) {
			*slash = '/';
			return -errno;
		}
		fd = nfd;
		if (!q)
			break;
		p = q + 1;
	}
	*slash = '/';
	*last = slash + 1;
	return fd;
}

struct dir_fix {
	size_t off;             /* into names */
	uint32_t mode;
	struct timespec ts[2];
};

struct snap_restore {
	struct dir_fix *dirs;
	size_t ndirs, capdirs;
	char *names;
	size_t nlen, capnames;
	unsigned char io[SNAP_BUF];
};

static int
remember_dir(struct snap_restore *x, const struct snap_entry *e)
{
	size_t plen = strlen(e->path) + 1;

	if (x->nlen + plen > SPACE_SNAPSHOT_DIRBYTES_MAX)
		return -E2BIG;
	if (x->ndirs == x->capdirs) {
		size_t cap = x->capdirs ? x->capdirs * 2 : 64;
		struct dir_fix *d = realloc(x->dirs, cap * sizeof(*d));
		if (d == NULL)
			return -ENOMEM;
		x->dirs = d;
		x->capdirs = cap;
	}
	if (x->nlen + plen > x->capnames) {
		size_t cap = x->capnames ? x->capnames : 4096;
		while (cap < x->nlen + plen)
			cap *= 2;
		char *n = realloc(x->names, cap);
		if (n == NULL)
			return -ENOMEM;
		x->names = n;
		x->capnames = cap;
	}
	memcpy(x->names + x->nlen, e->path, plen);
	x->dirs[x->ndirs].off = x->nlen;
	x->dirs[x->ndirs].mode = e->mode;
	x->dirs[x->ndirs].ts[0].tv_sec = e->sec;
	x->dirs[x->ndirs].ts[0].tv_nsec = e->nsec;
	x->dirs[x->ndirs].ts[1] = x->dirs[x->ndirs].ts[0];
	x->ndirs++;
	x->nlen += plen;
	return 0;
}

static int
extract_entry(struct snap_restore *x, struct snap_reader *rd, int root,
    struct snap_entry *e, const char **why)
{
	struct timespec ts[2] = { { e->sec, e->nsec }, { e->sec, e->nsec } };
	const char *name;
	int pfd, fd = -1, r = 0;

	if ((pfd = open_parent(root, e->path, &name)) < 0) {
		*why = "entry beneath a missing directory or a symlink";
		return pfd;
	}
	switch (e->type) {
	case T_DIR:
		/* owner-writable until the end, then the archived mode */
		if (mkdirat(pfd, name, 0700) < 0)
			r = -errno;
		else
			r = remember_dir(x, e);
		break;
	case T_FILE:
		/* O_EXCL + O_NOFOLLOW: a duplicate entry or a planted
		 * symlink is refused, never written through */
		fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = -errno;
			break;
		}
		for (uint64_t left = e->size; left > 0 && r == 0;) {
			size_t k = left < sizeof(x->io) ? (size_t)left : sizeof(x->io);
			if ((r = r_read(rd, x->io, k)) == 0)
				r = fd_write_all(fd, x->io, k);
			left -= k;
		}
		if (r == 0 && (fchmod(fd, e->mode) < 0 || futimens(fd, ts) < 0))
			r = -errno;
		break;
	case T_LINK:
		/* the target is stored, never resolved by us */
		if (symlinkat(e->target, pfd, name) < 0 ||
		    utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			r = -errno;
		break;
	case T_WOUT:
		if (mknodat(pfd, name, S_IFCHR, makedev(0, 0)) < 0)
			r = -errno;
		break;
	}
	if (r == -EEXIST)
		*why = "duplicate entry";
	if (fd >= 0)
		close(fd);
	close(pfd);
	return r;
}

/* Removes everything beneath dfd without following symlinks. Only used on
 * a directory this restore populated itself. */
static int
remove_tree(int dfd, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (depth > SPACE_SNAPSHOT_DEPTH_MAX + 1)
		return -ELOOP;
	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int cfd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd >= 0) {
				fchmod(cfd, 0700);
				if (remove_tree(cfd, depth + 1) < 0)
					r = -EIO;
				close(cfd);
			}
			if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0)
				r = -errno;
		} else if (unlinkat(dfd, de->d_name, 0) < 0)
			r = -errno;
	}
	closedir(d);
	return r;
}

static int
dir_is_empty(int dfd)
{
	struct dirent *de;
	DIR *d;
	int fd, empty = 1;

	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0) {
			empty = 0;
			break;
		}
	closedir(d);
	return empty;
}

/* Pass 2: extract, hashing again; the archive is re-verified at the end so
 * a file swapped on shared storage between the passes cannot slip in. */
static int
extract_pass(struct snap_restore *x, struct snap_reader *rd, uint64_t body,
    const unsigned char want[SNAPSHOT_DIGEST_LEN], int root, struct snap_entry *e,
    struct snapshot_stats *st, const char **why)
{
	uint64_t seen = 0;
	int r;

	if ((r = reader_open(rd, body, why)) < 0)
		return r;
	while ((r = parse_entry(rd, e, seen, why)) == 1) {
		seen++;
		if ((r = extract_entry(x, rd, root, e, why)) < 0)
			return r;
		if (e->type == T_FILE)
			st->bytes += e->size;
	}
	if (r < 0)
		return r;
	if ((r = reader_check(rd, want, why)) < 0)
		return r;
	st->entries = seen;
	/* deepest first (reverse pre-order): a directory's mtime is set
	 * after everything inside it was created */
	for (size_t i = x->ndirs; i-- > 0;) {
		struct dir_fix *d = &x->dirs[i];
		char *path = x->names + d->off;
		const char *name;
		int pfd = open_parent(root, path, &name), fd;

		if (pfd < 0)
			return pfd;
		fd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		close(pfd);
		if (fd < 0)
			return -errno;
		if (fchmod(fd, d->mode) < 0 || futimens(fd, d->ts) < 0)
			r = -errno;
		close(fd);
		if (r < 0)
			return r;
	}
	if (syncfs(root) < 0)
		return -errno;
	return 0;
}

int
snapshot_restore(const char *store_dir, const char *digest, const char *dest_dir,
    struct snapshot_stats *stats, const char **why)
{
	unsigned char want[SNAPSHOT_DIGEST_LEN];
	char name[PATH_MAX];
	struct snap_reader *rd = NULL;
	struct snap_restore *x = NULL;
	struct snap_entry *e = NULL;
	struct snapshot_stats st = { 0 };
	const char *dummy;
	struct stat sb;
	uint64_t body;
	int fd = -1, root = -1, r;
	bool made_dest = false, populated = false;

	if (why == NULL)
		why = &dummy;
	*why = NULL;
	/* exactly 64 lowercase hex digits: the name can never become a path */
	if (digest == NULL || strlen(digest) != SNAPSHOT_DIGEST_HEX ||
	    strspn(digest, "0123456789abcdef") != SNAPSHOT_DIGEST_HEX ||
	    hex_decode(digest, SNAPSHOT_DIGEST_HEX, want, sizeof(want)) != SNAPSHOT_DIGEST_LEN) {
		*why = "digest is not 64 lowercase hex digits";
		return -EINVAL;
	}
	if (sodium_init() < 0)
		return -EIO;
	if ((rd = calloc(1, sizeof(*rd))) == NULL || (x = calloc(1, sizeof(*x))) == NULL ||
	    (e = calloc(1, sizeof(*e))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	if (snprintf(name, sizeof(name), "%s/%s.snap", store_dir, digest) >= (int)sizeof(name)) {
		r = -ENAMETOOLONG;
		goto out;
	}
	if ((fd = open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if (fstat(fd, &sb) < 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(sb.st_mode) ||
	    (uint64_t)sb.st_size < SNAP_HDR_LEN + SNAP_END_LEN + SNAPSHOT_DIGEST_LEN) {
		*why = "not a snapshot archive";
		r = -EBADMSG;
		goto out;
	}
	body = (uint64_t)sb.st_size - SNAPSHOT_DIGEST_LEN;
	rd->fd = fd;
	if ((r = verify_pass(rd, body, want, e, why)) < 0)
		goto out;

	if (mkdir(dest_dir, 0755) == 0)
		made_dest = true;
	else if (errno != EEXIST) {
		r = -errno;
		goto out;
	}
	/* O_NOFOLLOW: dest itself must be a real directory */
	if ((root = open(dest_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if (!made_dest && (r = dir_is_empty(root)) <= 0) {
		r = r == 0 ? -ENOTEMPTY : r;
		goto out;
	}
	populated = true;
	if ((r = extract_pass(x, rd, body, want, root, e, &st, why)) < 0) {
		/* the first pass accepted it: the file changed in between */
		if (r == -EBADMSG && *why == NULL)
			*why = "archive changed while it was restored";
		goto out;
	}
	populated = false;
	if (stats)
		*stats = st;
	r = 0;
out:
	if (populated) {
		/* leave dest as we found it: missing, or empty */
		if (remove_tree(root, 0) < 0)
			log_warnx("snapshot restore: could not clean %s", dest_dir);
		if (made_dest)
			rmdir(dest_dir);
	} else if (made_dest && r < 0)
		rmdir(dest_dir);
	if (root >= 0)
		close(root);
	if (fd >= 0)
		close(fd);
	if (x) {
		free(x->dirs);
		free(x->names);
	}
	free(x);
	free(e);
	free(rd);
	return r;
}
