/* What the snapshot tests share (test_snapshot.c, test_snapdelta.c):
 * files made by hand, and archives made by hand with libarchive's pax
 * writer used raw (it writes whatever path, type and mode it is given),
 * zstd and the trailer: what an attacker with write access to the store
 * could put there. */
#ifndef SPACE_TEST_SNAPTEST_H
#define SPACE_TEST_SNAPTEST_H
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <zstd.h>

#include "snapshot.h"
#include "util.h"

static inline void
path_join(char *out, size_t cap, const char *a, const char *b)
{
	if (snprintf(out, cap, "%s/%s", a, b) >= (int)cap)
		abort();
}

static inline void
must(int r, const char *what)
{
	if (r < 0) {
		perror(what);
		exit(1);
	}
}

static inline void
write_bytes(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
		perror(path);
		exit(1);
	}
	fchmod(fd, mode);
	close(fd);
}

static inline void
set_mtime(const char *path, time_t sec, long nsec)
{
	struct timespec ts[2] = { { sec, nsec }, { sec, nsec } };
	must(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), path);
}

/* path is a file holding exactly want */
static inline bool
file_is(const char *path, const char *want)
{
	char *c = NULL;
	size_t l = 0;
	bool same = read_file(path, 1u << 20, &c, &l) == 0 && l == strlen(want) &&
	    memcmp(c, want, l) == 0;

	free(c);
	return same;
}

static inline bool
exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

/* Compares two trees entry by entry (type, permission bits, mtime to the
 * nanosecond, data, link target, whiteout, no entry more or less; with
 * skip_specials_in_a, the fifos, sockets and devices of a must be absent
 * from b); returns the number of differences and prints them. The roots
 * themselves are not compared. Needs tap.h's diag. */
static inline int
tree_diff(const char *a, const char *b, bool skip_specials_in_a)
{
	DIR *d = opendir(a);
	struct dirent *de;
	int diffs = 0, na = 0, nb = 0;

	if (d == NULL)
		return 1;
	while ((de = readdir(d)) != NULL) {
		char pa[1024], pb[1024];
		struct stat sa, sb;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path_join(pa, sizeof(pa), a, de->d_name);
		path_join(pb, sizeof(pb), b, de->d_name);
		lstat(pa, &sa);
		if (skip_specials_in_a && (S_ISFIFO(sa.st_mode) || S_ISSOCK(sa.st_mode) ||
		    S_ISBLK(sa.st_mode) || (S_ISCHR(sa.st_mode) && sa.st_rdev != 0))) {
			if (lstat(pb, &sb) == 0) {
				diag("special file %s was restored", pb);
				diffs++;
			}
			continue;
		}
		na++;
		if (lstat(pb, &sb) < 0) {
			diag("missing %s", pb);
			diffs++;
			continue;
		}
		if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
			diag("type differs %s", pb);
			diffs++;
			continue;
		}
		if (!S_ISLNK(sa.st_mode) && (sa.st_mode & 07777) != (sb.st_mode & 07777)) {
			diag("mode %o vs %o at %s", sa.st_mode & 07777, sb.st_mode & 07777, pb);
			diffs++;
		}
		if (!S_ISCHR(sa.st_mode) && (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
		    sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec)) {
			diag("mtime differs at %s (%lld.%09ld vs %lld.%09ld)", pb,
			    (long long)sa.st_mtim.tv_sec, sa.st_mtim.tv_nsec,
			    (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
			diffs++;
		}
		if (S_ISREG(sa.st_mode)) {
			char *ca = NULL, *cb = NULL;
			size_t la = 0, lb = 0;
			if (read_file(pa, 256u << 20, &ca, &la) < 0 || read_file(pb, 256u << 20, &cb, &lb) < 0 ||
			    la != lb || memcmp(ca, cb, la) != 0) {
				diag("content differs at %s", pb);
				diffs++;
			}
			free(ca);
			free(cb);
		} else if (S_ISLNK(sa.st_mode)) {
			char ta[512] = "", tb[512] = "";
			ssize_t la = readlink(pa, ta, sizeof(ta) - 1);
			ssize_t lb = readlink(pb, tb, sizeof(tb) - 1);
			if (la < 0 || lb < 0 || strcmp(ta, tb) != 0) {
				diag("link target differs at %s", pb);
				diffs++;
			}
		} else if (S_ISCHR(sa.st_mode)) {
			if (sb.st_rdev != makedev(0, 0)) {
				diag("whiteout differs at %s", pb);
				diffs++;
			}
		} else if (S_ISDIR(sa.st_mode))
			diffs += tree_diff(pa, pb, skip_specials_in_a);
	}
	closedir(d);
	/* and nothing extra in b */
	if ((d = opendir(b)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				nb++;
		closedir(d);
	}
	if (na != nb) {
		diag("%s has %d entries, %s has %d", a, na, b, nb);
		diffs++;
	}
	return diffs;
}

struct hand {
	struct archive *a;
	struct archive_entry *ae;
	unsigned char *b;
	size_t cap, used;
	size_t cut;             /* keep only this much of the tar stream (0: all) */
	bool no_end_frame;      /* leave the zstd frame unfinished */
	const char *after;      /* bytes after the zstd frame */
	bool has_head;          /* a delta's frame in front (h_delta) */
	unsigned char head[40];
	unsigned char mark[12]; /* the first frame: the digest's algorithm */
	size_t mark_len;        /* 0: none (h_legacy) */
	bool legacy;            /* named by BLAKE2b-256 */
	bool mark_last;         /* the marker after the delta's frame */
};

/* the marker snapshot_create writes: a skippable frame of 4 bytes, 1
 * (SHA-256) */
static const unsigned char hand_mark[12] = { 0x5c, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 0, 0, 0 };

/* an archive as made before the marker: none, named by BLAKE2b-256 */
static inline void
h_legacy(struct hand *h)
{
	h->mark_len = 0;
	h->legacy = true;
}

static inline void
h_start_cap(struct hand *h, size_t cap)
{
	memset(h, 0, sizeof(*h));
	h->cap = cap;
	h->b = malloc(cap);
	h->a = archive_write_new();
	h->ae = archive_entry_new();
	if (!h->b || !h->a || !h->ae ||
	    archive_write_set_format_pax(h->a) != ARCHIVE_OK ||
	    archive_write_set_format_option(h->a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(h->a, 0) != ARCHIVE_OK ||
	    archive_write_open_memory(h->a, h->b, h->cap, &h->used) != ARCHIVE_OK)
		abort();
	memcpy(h->mark, hand_mark, sizeof(hand_mark));
	h->mark_len = sizeof(hand_mark);
}

static inline void
h_start(struct hand *h)
{
	h_start_cap(h, 1u << 20);
}

/* the frame naming base_hex, as snapshot_create_delta writes it */
static inline void
h_delta(struct hand *h, const char *base_hex)
{
	memcpy(h->head, (unsigned char[]){ 0x5d, 0x2a, 0x4d, 0x18, 32, 0, 0, 0 }, 8);
	if (hex_decode(base_hex, SNAPSHOT_DIGEST_HEX, h->head + 8, 32) != 32)
		abort();
	h->has_head = true;
}

static inline void
h_head(struct hand *h, unsigned type, unsigned mode, const char *path, int64_t size)
{
	archive_entry_clear(h->ae);
	archive_entry_copy_pathname(h->ae, path);
	archive_entry_set_filetype(h->ae, type);
	archive_entry_set_perm(h->ae, mode);
	archive_entry_set_mtime(h->ae, 1700000000, 0);
	if (type == AE_IFREG)
		archive_entry_set_size(h->ae, size);
}

static inline void
h_put_entry(struct hand *h)
{
	if (archive_write_header(h->a, h->ae) != ARCHIVE_OK)
		abort();
}

/* an entry of any type (devices, fifos: what a restore must refuse) */
static inline void
h_entry(struct hand *h, unsigned type, uint32_t mode, const char *path, dev_t rdev)
{
	h_head(h, type, mode, path, 0);
	archive_entry_set_rdev(h->ae, rdev);
	h_put_entry(h);
}

static inline void
h_file(struct hand *h, const char *path, uint32_t mode, const char *data)
{
	h_head(h, AE_IFREG, mode, path, (int64_t)strlen(data));
	h_put_entry(h);
	if (archive_write_data(h->a, data, strlen(data)) != (la_ssize_t)strlen(data))
		abort();
}

static inline void
h_dir(struct hand *h, const char *path)
{
	h_head(h, AE_IFDIR, 0755, path, 0);
	h_put_entry(h);
}

static inline void
h_link(struct hand *h, const char *path, const char *target)
{
	h_head(h, AE_IFLNK, 0777, path, 0);
	archive_entry_copy_symlink(h->ae, target);
	h_put_entry(h);
}

static inline void
h_hardlink(struct hand *h, const char *path, const char *target)
{
	h_head(h, AE_IFREG, 0644, path, 0);
	archive_entry_copy_hardlink(h->ae, target);
	h_put_entry(h);
}

/* body + the trailer naming its digest (SHA-256, or BLAKE2b-256 for an
 * archive of the format before the marker; libsodium's, not the
 * library's), stored as STORE/<digest>.snap */
static inline void
store_body(const char *store, const unsigned char *body, size_t len,
    char hex[SNAPSHOT_DIGEST_HEX + 1], bool legacy)
{
	unsigned char dg[32], tr[40];
	char p[512];
	int fd;

	if (legacy)
		crypto_generichash(dg, sizeof(dg), body, len, NULL, 0);
	else
		crypto_hash_sha256(dg, body, len);
	hex_encode(dg, sizeof(dg), hex, SNAPSHOT_DIGEST_HEX + 1);
	/* the skippable frame that repeats the digest */
	memcpy(tr, (unsigned char[]){ 0x5e, 0x2a, 0x4d, 0x18, 32, 0, 0, 0 }, 8);
	memcpy(tr + 8, dg, 32);
	mkdir(store, 0700);
	snprintf(p, sizeof(p), "%s/%s.snap", store, hex);
	unlink(p);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0 || write(fd, body, len) != (ssize_t)len || write(fd, tr, 40) != 40)
		abort();
	close(fd);
}

/* ends (or cuts), compresses, hashes and stores the archive under its
 * digest: the marker first (unless legacy), a delta's frame when there
 * is one, the trailer last */
static inline void
h_store(struct hand *h, const char *store, char hex[SNAPSHOT_DIGEST_HEX + 1])
{
	size_t tlen, zcap, zlen, off = h->mark_len + (h->has_head ? 40 : 0);
	unsigned char *z;

	if (h->cut)
		tlen = h->cut;
	else {
		if (archive_write_close(h->a) != ARCHIVE_OK)
			abort();
		tlen = h->used;
	}
	zcap = off + ZSTD_compressBound(tlen) + 64 + (h->after ? strlen(h->after) : 0);
	if ((z = malloc(zcap)) == NULL)
		abort();
	if (h->has_head && h->mark_last) {
		memcpy(z, h->head, 40);
		memcpy(z + 40, h->mark, h->mark_len);
	} else {
		memcpy(z, h->mark, h->mark_len);
		if (h->has_head)
			memcpy(z + h->mark_len, h->head, 40);
	}
	zlen = ZSTD_compress(z + off, zcap - off, h->b, tlen, 3);
	if (ZSTD_isError(zlen))
		abort();
	zlen += off;
	if (h->no_end_frame)
		zlen -= 4;      /* a frame without its last bytes */
	if (h->after) {
		memcpy(z + zlen, h->after, strlen(h->after));
		zlen += strlen(h->after);
	}
	store_body(store, z, zlen, hex, h->legacy);
	free(z);
	archive_write_free(h->a);       /* a cut archive is not closed */
	archive_entry_free(h->ae);
	free(h->b);
	memset(h, 0, sizeof(*h));
}
#endif
