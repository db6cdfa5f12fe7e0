/* Snapshot archives, the restore side: one pass that checks every entry
 * before it creates it, hashes the body while it extracts, and removes
 * everything again when the archive fails at any point. Format: docs/recovery.md; create: snapshot.c.
 *
 * libarchive parses the tar stream; zstd decompression is done here, in
 * the read callback, so that the bytes libarchive ever sees are counted
 * and bounded (snapshot_stream_max) before any of its parsers allocates
 * for them. Extraction is ours, not archive_write_disk: that resolves
 * paths against the process's working directory (sbx-manager is
 * multithreaded), creates device nodes and hard links, and checks
 * symlinks by lstat; here every entry is opened beneath the destination
 * one component at a time with O_NOFOLLOW, files with O_EXCL, and only
 * files, directories, symlinks and whiteouts exist.
 *
 * The tar stream is also followed header by header, in the same read
 * callback, before libarchive sees it (tar_guard): libarchive reads a
 * sparse map into a list of one heap node per region while it reads the
 * entry's header, bounded by nothing but the stream, so a few kilobytes
 * of compressed map would otherwise cost gigabytes before any check of
 * ours or the digest could refuse the archive. */
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

#include "hashaside.h"
#include "limits.h"
#include "log.h"
#include "snapshot.h"
#include "snapshot_int.h"
#include "walk.h"
#include "util.h"

/* ---- input: file -> hash -> zstd -> tar stream, bounded ---- */

/* A large body is hashed on a thread of its own (hashaside.h): hashing
 * one piece overlaps decompressing and extracting the next (on a move's
 * restore the hash was about half of this thread's time), and the hash is
 * still of exactly the bytes decompressed. */
#define HASH_SLOTS      4
#define HASH_AFTER      (1u << 20)      /* body bytes read before the thread starts */

/* ---- the tar stream, followed before libarchive parses it ----
 *
 * libarchive's tar reader (3.6) turns a GNU sparse map into one heap node
 * per region (and a second one in the entry), and it does so inside
 * archive_read_next_header, for every form it knows: pax 1.0 (a count,
 * then offset/size lines at the start of the entry's data), pax 0.1 (one
 * GNU.sparse.map record), pax 0.0 (GNU.sparse.offset/numbytes records),
 * Solaris' SUN.holesdata, and the old GNU 'S' header, whose chain of
 * 512-byte extension blocks has no end but the stream's. Nothing there
 * bounds the count: "0\n0\n" is 4 bytes of tar stream and about 80 bytes
 * of heap, and compresses a thousandfold, so a 2 KiB archive asked for
 * 250 MB and snapshot_stream_max() of a large layer allows hundreds of
 * gigabytes. Our checks and the digest only come after.
 *
 * So the callback follows the stream as our archiver writes it (pax
 * headers, then ustar headers with the POSIX magic, types 0 1 2 3 5) and
 * refuses, before handing the bytes on, every sparse form it never
 * writes, and a 1.0 map whose count is over SPACE_SNAPSHOT_SPARSE_MAX + 1
 * (the writer adds a last, empty region at the file's end). It keeps the
 * entry boundaries exactly as libarchive does for that subset, so what
 * it calls data is what libarchive skips as data: a data entry's length
 * is the pax "size" record when there is one, else the header's octal
 * field, rounded up to 512; every other type has none (a size there is
 * refused); a pax header is followed by its entry's header, never by
 * another. Anything outside the subset is refused, not interpreted: it
 * is nothing snapshot_create writes. */
#define TG_PAX_MAX      (64u << 10)     /* a pax header: paths and link targets are 4 KiB */
#define TG_LINE_MAX     99              /* digits of one map line (libarchive: 100 with its \n) */

enum { TG_HEAD, TG_PAX, TG_SKIP, TG_MAP, TG_END };

struct tar_guard {
	int state;
	const char *failed;     /* refused: nothing more is looked at */
	size_t have;            /* TG_HEAD: bytes of blk; TG_PAX: of pax */
	size_t need;            /* TG_PAX: the pax body's length */
	uint64_t left;          /* TG_SKIP, TG_MAP: bytes of the body (and its padding) to pass */
	bool after_pax;         /* the last header was a pax header: its entry comes next */
	bool has_size;          /* ... with a "size" record */
	uint64_t size;
	bool sparse;            /* ... making it a GNU sparse 1.0 entry */
	uint64_t data;          /* TG_MAP: the entry's data, the map included */
	uint64_t mapped;        /* TG_MAP: map bytes passed */
	uint64_t lines;         /* TG_MAP: lines still to come after the count */
	bool counted;           /* TG_MAP: the count line was read */
	unsigned linelen;       /* TG_MAP: digits of the current line */
	uint64_t num;           /* ... and their value (saturated) */
	unsigned char blk[512];
	char pax[TG_PAX_MAX];
};

static uint64_t
tg_pad(uint64_t n)
{
	return (512 - (n & 511)) & 511;
}

/* a header's size field: octal, leading spaces, ended by NUL or space
 * (what libarchive's writer puts there); -1 for anything else */
static int64_t
tg_octal(const unsigned char *f, size_t n)
{
	size_t i = 0;
	int64_t v = 0;

	while (i < n && f[i] == ' ')
		i++;
	for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
		if (v > (INT64_MAX >> 3))
			return -1;
		v = v * 8 + (f[i] - '0');
	}
	for (; i < n; i++)
		if (f[i] != '\0' && f[i] != ' ')
			return -1;
	return v;
}

static bool
tg_is(const char *k, size_t klen, const char *name)
{
	return klen == strlen(name) && memcmp(k, name, klen) == 0;
}

/* the records of the pax header just gathered, as libarchive splits them
 * ("LEN key=value\n"): which ones make the next entry's data length or
 * its sparse form */
static const char *
tg_pax(struct tar_guard *g)
{
	const char *b = g->pax;
	size_t off = 0, n = g->need;
	bool major = false, minor = false;

	g->has_size = false;
	if (memchr(b, '\0', n) != NULL)
		return "malformed pax header";
	while (off < n) {
		size_t len = 0, i = off, klen, vlen;
		const char *k, *eq, *v;

		for (; i < n && b[i] >= '0' && b[i] <= '9'; i++)
			if ((len = len * 10 + (size_t)(b[i] - '0')) > n)
				return "malformed pax header";
		if (i == off || i >= n || b[i] != ' ' || len > n - off || len <= i - off + 1 ||
		    b[off + len - 1] != '\n')
			return "malformed pax header";
		k = b + i + 1;
		if ((eq = memchr(k, '=', (size_t)(b + off + len - 1 - k))) == NULL || eq == k)
			return "malformed pax header";
		klen = (size_t)(eq - k);
		v = eq + 1;
		vlen = (size_t)(b + off + len - 1 - v);
		if (tg_is(k, klen, "size")) {
			uint64_t x = 0;

			if (vlen == 0 || vlen > 18)
				return "malformed pax size";
			for (size_t j = 0; j < vlen; j++) {
				if (v[j] < '0' || v[j] > '9')
					return "malformed pax size";
				x = x * 10 + (uint64_t)(v[j] - '0');
			}
			g->has_size = true;
			g->size = x;
		} else if (tg_is(k, klen, "GNU.sparse.major")) {
			if (vlen != 1 || v[0] != '1')
				return "a sparse entry of a form snapshots never hold";
			major = true;
		} else if (tg_is(k, klen, "GNU.sparse.minor")) {
			if (vlen != 1 || v[0] != '0')
				return "a sparse entry of a form snapshots never hold";
			minor = true;
		} else if ((klen > 11 && memcmp(k, "GNU.sparse.", 11) == 0 &&
		    !tg_is(k, klen, "GNU.sparse.name") && !tg_is(k, klen, "GNU.sparse.realsize")) ||
		    tg_is(k, klen, "SUN.holesdata"))
			/* 0.0's offset/numbytes, 0.1's map, Solaris' holes */
			return "a sparse entry of a form snapshots never hold";
		off += len;
	}
	/* libarchive keeps major and minor from one entry to the next */
	if (major != minor)
		return "a sparse entry of a form snapshots never hold";
	g->sparse = major;
	return NULL;
}

/* the 512-byte header just gathered */
static const char *
tg_header(struct tar_guard *g)
{
	const unsigned char *h = g->blk;
	bool pax = g->after_pax, sparse = g->sparse, has_size = g->has_size;
	int64_t fsize;
	size_t i;

	g->after_pax = g->sparse = g->has_size = false;
	for (i = 0; i < 512 && h[i] == 0; i++)
		;
	if (i == 512) {
		/* the end: libarchive reads no header after it */
		if (pax)
			return "pax header without its entry";
		g->state = TG_END;
		return NULL;
	}
	/* "ustar\0": libarchive reads an old GNU sparse map from a header
	 * with the GNU magic, whatever its type */
	if (memcmp(h + 257, "ustar\0", 6) != 0)
		return "a tar header snapshots never hold";
	fsize = tg_octal(h + 124, 12);
	switch (h[156]) {
	case 'x':
		if (pax)
			return "a tar header snapshots never hold";
		if (fsize < 0 || fsize > (int64_t)TG_PAX_MAX)
			return "pax header too large";
		g->after_pax = true;
		g->need = (size_t)fsize;
		g->have = 0;
		g->state = TG_PAX;
		return NULL;
	case '0':
		if (!has_size && fsize < 0)
			return "malformed tar header";
		g->data = has_size ? g->size : (uint64_t)fsize;
		if (g->data > INT64_MAX - 512)
			return "malformed tar header";
		g->left = g->data + tg_pad(g->data);
		if (sparse) {
			g->state = TG_MAP;
			g->mapped = g->lines = g->num = 0;
			g->counted = false;
			g->linelen = 0;
		} else
			g->state = g->left ? TG_SKIP : TG_HEAD;
		return NULL;
	case '1': case '2': case '3': case '5':
		if (sparse || has_size || fsize != 0)
			return "data on an entry that is not a file";
		g->state = TG_HEAD;
		return NULL;
	default:
		return "device node, fifo, socket or unknown entry type";
	}
}

/* a GNU sparse 1.0 map, one byte at a time: the count, then two lines a
 * region, digits and '\n' only, within the entry's data */
static const char *
tg_map(struct tar_guard *g, unsigned char c)
{
	if (++g->mapped > g->data)
		return "sparse map past its entry's data";
	g->left--;
	if (c >= '0' && c <= '9') {
		if (++g->linelen > TG_LINE_MAX)
			return "malformed sparse map";
		g->num = g->num > UINT64_MAX / 16 ? UINT64_MAX / 16 : g->num * 10 + (c - '0');
		return NULL;
	}
	if (c != '\n' || g->linelen == 0)
		return "malformed sparse map";
	if (!g->counted) {
		if (g->num > (uint64_t)SPACE_SNAPSHOT_SPARSE_MAX + 1)
			return "sparse map of more regions than SPACE_SNAPSHOT_SPARSE_MAX";
		g->counted = true;
		g->lines = 2 * g->num;
	} else
		g->lines--;
	g->linelen = 0;
	g->num = 0;
	if (g->lines == 0) {
		/* libarchive skips the map's padding to 512 bytes next */
		if (g->mapped + tg_pad(g->mapped) > g->data)
			return "sparse map past its entry's data";
		g->state = g->left ? TG_SKIP : TG_HEAD;
	}
	return NULL;
}

/* n more bytes of tar stream: NULL, or why they must not reach libarchive */
static const char *
tar_guard(struct tar_guard *g, const unsigned char *p, size_t n)
{
	const char *why = g->failed;

	while (n > 0 && why == NULL) {
		size_t k;

		switch (g->state) {
		case TG_END:
			return NULL;
		case TG_HEAD:
			k = n < 512 - g->have ? n : 512 - g->have;
			memcpy(g->blk + g->have, p, k);
			g->have += k;
			if (g->have == 512) {
				g->have = 0;
				why = tg_header(g);
			}
			break;
		case TG_PAX:
			k = n < g->need - g->have ? n : g->need - g->have;
			memcpy(g->pax + g->have, p, k);
			g->have += k;
			if (g->have == g->need) {
				g->have = 0;
				why = tg_pax(g);
				g->left = tg_pad(g->need);
				g->state = g->left ? TG_SKIP : TG_HEAD;
			}
			break;
		case TG_SKIP:
			k = n < g->left ? n : (size_t)g->left;
			if ((g->left -= k) == 0)
				g->state = TG_HEAD;
			break;
		default:        /* TG_MAP */
			k = 1;
			why = tg_map(g, *p);
			break;
		}
		p += k;
		n -= k;
	}
	g->failed = why;
	return why;
}

struct snap_in {
	int fd;                 /* read with pread at off */
	uint64_t off;           /* body bytes read */
	uint64_t limit;         /* body bytes that may be read now */
	bool final;             /* limit is the body's end */
	const struct snapshot_feed *feed;       /* an archive still arriving */
	uint64_t out_total, out_max;
	size_t zret;            /* last ZSTD_decompressStream answer: 0 at a frame end */
	bool flush;             /* the last call filled obuf: call again before reading */
	ZSTD_DCtx *z;
	ZSTD_inBuffer in;
	struct snap_digest h;   /* in the algorithm the first bytes name */
	const char *why;        /* what our callback refused */
	const unsigned char *want_base; /* a delta of this base expected, or NULL: a whole archive */
	bool head_done;         /* the first bytes looked at: a delta's frame or not */
	bool delta;             /* it was one (and was hashed) */
	struct hashaside *ring; /* NULL: hashed here, as read */
	uint64_t aside;         /* bytes handed to it */
	bool ring_failed;       /* could not start: hashed here */
	struct tar_guard tg;    /* the tar stream before libarchive sees it */
	unsigned char ibuf[SNAP_BUF];
	unsigned char obuf[SNAP_BUF];
};

static void
digest_update(void *h, const void *p, size_t n)
{
	snap_digest_update(h, p, n);
}

/* the thread, once the body is large; if it cannot start, the hash
 * stays on this one */
static void
ring_start(struct snap_in *rd)
{
	if (rd->ring != NULL || rd->ring_failed || rd->off < HASH_AFTER)
		return;
	rd->ring = hashaside_start(digest_update, &rd->h, SNAP_BUF, HASH_SLOTS);
	rd->ring_failed = rd->ring == NULL;
}

/* every piece handed over is hashed, the thread is gone, rd->h is whole
 * again. Before the digest is taken, and whenever rd is let go. */
static void
ring_end(struct snap_in *rd)
{
	hashaside_end(rd->ring);
	rd->ring = NULL;
}

/* where the next piece is read into: the ring's next free slot, or the
 * one input buffer */
static unsigned char *
in_slot(struct snap_in *rd)
{
	return rd->ring ? hashaside_slot(rd->ring) : rd->ibuf;
}

/* the piece just read into in_slot's buffer: to the hash */
static void
in_hash(struct snap_in *rd, const unsigned char *p, size_t n)
{
	if (rd->ring == NULL) {
		snap_digest_update(&rd->h, p, n);
		return;
	}
	rd->aside += n;
	hashaside_put(rd->ring, n);
}

static la_ssize_t
in_fail(struct archive *a, struct snap_in *rd, const char *why)
{
	rd->why = why;
	archive_set_error(a, EBADMSG, "%s", why);
	return -1;
}

/* An archive still arriving: waits until more of it was written, or it
 * ended. All but the last SNAP_TRAILER_LEN bytes written so far are body
 * that may be read; at the end the body's length is final. */
static int
feed_wait(struct snap_in *rd)
{
	bool end = false;
	int64_t got = rd->feed->more(rd->feed->ctx, rd->limit + SNAP_TRAILER_LEN, &end);

	if (got < 0) {
		rd->why = "the archive's transfer failed";
		return -1;
	}
	if (end && (uint64_t)got <= SNAP_TRAILER_LEN) {
		rd->why = "not a snapshot archive";
		return -1;
	}
	if ((uint64_t)got < rd->limit + SNAP_TRAILER_LEN ||
	    (!end && (uint64_t)got == rd->limit + SNAP_TRAILER_LEN)) {
		rd->why = "the archive's transfer went backwards";
		return -1;
	}
	rd->limit = (uint64_t)got > SNAP_TRAILER_LEN ? (uint64_t)got - SNAP_TRAILER_LEN : 0;
	rd->final = end;
	return 0;
}

/* The body's first bytes: the marker naming the digest's algorithm
 * (none in archives made before it: BLAKE2b-256), then a delta's frame
 * naming its base, or already the compressed stream; both frames are
 * hashed, as part of the body. Which one the caller expects is decided
 * before: a delta restored without its base, or onto another, or a whole
 * archive where a delta was expected, is refused before anything is
 * extracted. */
static int
read_head(struct snap_in *rd)
{
	unsigned char head[SNAP_HEAD_MAX], base[SNAPSHOT_DIGEST_LEN];
	size_t want, mark;
	ssize_t n = 0;
	int alg, r = 0;

	while (rd->limit < SNAP_HEAD_MAX && !rd->final)
		if (feed_wait(rd) < 0)
			return -1;
	want = rd->limit < SNAP_HEAD_MAX ? (size_t)rd->limit : SNAP_HEAD_MAX;
	do
		n = pread(rd->fd, head, want, 0);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)want) {
		rd->why = "archive shorter than its size";
		return -1;
	}
	rd->head_done = true;
	if ((alg = snap_mark_parse(head, want, &mark)) < 0) {
		rd->why = "an archive of an unknown format";
		return -1;
	}
	snap_digest_init(&rd->h, alg);
	r = snap_delta_parse(head + mark, want - mark, base);
	if (r < 0) {
		rd->why = "malformed incremental archive frame";
		return -1;
	}
	if (r == 0 && rd->want_base != NULL) {
		rd->why = "a whole archive where an incremental one was expected";
		return -1;
	}
	if (r == 1 && rd->want_base == NULL) {
		rd->why = "an incremental archive restored without its base";
		return -1;
	}
	if (r == 1 && sodium_memcmp(base, rd->want_base, sizeof(base)) != 0) {
		rd->why = "an incremental archive of another base";
		return -1;
	}
	rd->off = mark + (r == 1 ? SNAP_DELTA_LEN : 0);
	snap_digest_update(&rd->h, head, (size_t)rd->off);
	rd->delta = r == 1;
	return 0;
}

static la_ssize_t
in_read_cb(struct archive *a, void *ctx, const void **buf)
{
	struct snap_in *rd = ctx;

	if (!rd->head_done && read_head(rd) < 0)
		return in_fail(a, rd, rd->why);
	for (;;) {
		ZSTD_outBuffer out = { rd->obuf, sizeof(rd->obuf), 0 };

		/* more input, unless zstd still holds output for us */
		if (rd->in.pos == rd->in.size && !rd->flush) {
			size_t want = sizeof(rd->ibuf);
			unsigned char *dst;
			ssize_t n;

			if (rd->off == rd->limit && !rd->final) {
				if (feed_wait(rd) < 0)
					return in_fail(a, rd, rd->why);
				continue;
			}
			if (rd->off == rd->limit) {
				if (rd->zret != 0)
					return in_fail(a, rd, "compressed stream cut short");
				return 0;
			}
			if (want > rd->limit - rd->off)
				want = (size_t)(rd->limit - rd->off);
			ring_start(rd);
			dst = in_slot(rd);
			do
				n = pread(rd->fd, dst, want, (off_t)rd->off);
			while (n < 0 && errno == EINTR);
			if (n <= 0)
				return in_fail(a, rd, "archive shorter than its size");
			in_hash(rd, dst, (size_t)n);
			rd->off += (uint64_t)n;
			if (rd->feed != NULL && rd->feed->passed != NULL)
				rd->feed->passed(rd->feed->ctx, rd->off);
			rd->in.src = dst;
			rd->in.size = (size_t)n;
			rd->in.pos = 0;
		}
		/* one frame: anything after its end is not ours */
		if (rd->zret == 0 && rd->in.pos < rd->in.size)
			return in_fail(a, rd, "data after the compressed stream");
		rd->zret = ZSTD_decompressStream(rd->z, &out, &rd->in);
		if (ZSTD_isError(rd->zret))
			return in_fail(a, rd, "not a zstd stream, or a damaged one");
		rd->flush = out.pos == out.size;
		if (out.pos > 0) {
			const char *why;

			rd->out_total += out.pos;
			if (rd->out_total > rd->out_max)
				return in_fail(a, rd, "archive expands past what the layer could hold");
			if ((why = tar_guard(&rd->tg, rd->obuf, out.pos)) != NULL)
				return in_fail(a, rd, why);
			*buf = rd->obuf;
			return (la_ssize_t)out.pos;
		}
	}
}

struct snap_entry {
	unsigned type;                          /* AE_IF*, AE_IFCHR = whiteout */
	uint32_t mode;
	int64_t sec;
	uint32_t nsec;
	int64_t size;                           /* AE_IFREG */
	bool same;                              /* AE_IFREG of a delta: as in the base */
	char path[SPACE_PATH_MAX + 1];
	const char *target;                     /* AE_IFLNK, owned by libarchive */
};

/* The pass over the archive: a decompressor and tar reader over the
 * body, hashing it. */
struct snap_pass {
	struct archive *a;
	struct snap_in *rd;
	uint64_t seen;
};

static int
pass_open(struct snap_pass *p, struct snap_in *rd, uint64_t body, uint64_t out_max)
{
	memset(p, 0, sizeof(*p));
	p->rd = rd;
	ring_end(rd);
	rd->ring_failed = false;
	rd->aside = 0;
	rd->off = 0;
	/* a file: its body is known; an archive arriving: none of it yet */
	rd->limit = rd->feed ? 0 : body;
	rd->final = rd->feed == NULL;
	rd->out_total = 0;
	rd->out_max = out_max;
	rd->zret = 1;
	rd->flush = false;
	rd->in.src = rd->ibuf;
	rd->in.size = rd->in.pos = 0;
	rd->why = NULL;
	rd->head_done = false;
	rd->delta = false;
	memset(&rd->tg, 0, sizeof(rd->tg));     /* TG_HEAD */
	snap_digest_init(&rd->h, SNAP_ALG_BLAKE2B);     /* read_head picks */
	if (ZSTD_isError(ZSTD_DCtx_reset(rd->z, ZSTD_reset_session_and_parameters)) ||
	    ZSTD_isError(ZSTD_DCtx_setParameter(rd->z, ZSTD_d_windowLogMax, SPACE_SNAPSHOT_WINDOW_LOG)))
		return -EIO;
	/* tar only (pax, with its sparse entries), no further filter: the
	 * one decompression is ours */
	if ((p->a = archive_read_new()) == NULL)
		return -ENOMEM;
	if (archive_read_support_format_tar(p->a) != ARCHIVE_OK)
		return -EIO;
	if (archive_read_open(p->a, rd, NULL, in_read_cb, NULL) != ARCHIVE_OK) {
		log_debug("snapshot: %s", archive_error_string(p->a));
		return -EBADMSG;
	}
	return 0;
}

static void
pass_close(struct snap_pass *p)
{
	if (p->a)
		archive_read_free(p->a);
	p->a = NULL;
}

/* a refusal's reason: our callback's, or the tar reader's */
static int
pass_bad(struct snap_pass *p, const char **why, const char *what)
{
	if (p->rd->why)
		*why = p->rd->why;
	else {
		*why = what;
		log_debug("snapshot: %s: %s", what, archive_error_string(p->a) ?
		    archive_error_string(p->a) : "-");
	}
	return -EBADMSG;
}

/* Reads and checks the next entry (not its data). 1 for an entry, 0 at the
 * end, or -EBADMSG with *why. */
static int
next_entry(struct snap_pass *p, struct snap_entry *e, const char **why)
{
	struct archive_entry *ae;
	const char *path, *hl;
	size_t plen;
	int r;

	r = archive_read_next_header(p->a, &ae);
	if (r == ARCHIVE_EOF)
		return 0;
	if (r != ARCHIVE_OK)
		return pass_bad(p, why, "malformed tar stream");
	if (p->seen >= SPACE_SNAPSHOT_ENTRIES_MAX) {
		*why = "too many entries";
		return -EBADMSG;
	}
	p->seen++;
	/* a hard link only ever means "as in the base": to its own path,
	 * in a delta, on a file entry without data */
	e->same = false;
	if ((hl = archive_entry_hardlink(ae)) != NULL) {
		path = archive_entry_pathname(ae);
		if (!p->rd->delta || path == NULL || strcmp(hl, path) != 0 ||
		    archive_entry_size(ae) != 0) {
			*why = "hard link";
			return -EBADMSG;
		}
		e->same = true;
	}
	if (archive_entry_xattr_count(ae) != 0) {
		*why = "extended attributes are not snapshot content";
		return -EBADMSG;
	}
	if ((path = archive_entry_pathname(ae)) == NULL) {
		*why = "entry without a path";
		return -EBADMSG;
	}
	plen = strlen(path);
	e->type = archive_entry_filetype(ae);
	e->mode = archive_entry_perm(ae);
	e->sec = archive_entry_mtime(ae);
	e->nsec = (uint32_t)archive_entry_mtime_nsec(ae);
	e->size = archive_entry_size(ae);
	e->target = NULL;
	/* tar spells a directory "d/": one slash, no more */
	if (e->type == AE_IFDIR && plen > 1 && path[plen - 1] == '/')
		plen--;
	if (plen > SPACE_PATH_MAX) {
		*why = "path too long";
		return -EBADMSG;
	}
	memcpy(e->path, path, plen);
	e->path[plen] = '\0';
	/* the one rule that keeps extraction beneath dest: checked here for
	 * every entry, before the first byte of the archive is extracted */
	if (!snap_path_valid(e->path, plen)) {
		*why = "absolute, empty, dot-dot or over-deep path";
		return -EBADMSG;
	}
	if (archive_entry_mtime_nsec(ae) < 0 || archive_entry_mtime_nsec(ae) >= 1000000000L) {
		*why = "bad mtime";
		return -EBADMSG;
	}
	/* libarchive gives a hard link no file type of its own */
	if (e->same) {
		if (e->type != 0 && e->type != AE_IFREG) {
			*why = "hard link";
			return -EBADMSG;
		}
		e->type = AE_IFREG;
	}
	if (e->type != AE_IFREG && e->size != 0) {
		*why = "data on an entry that is not a file";
		return -EBADMSG;
	}
	switch (e->type) {
	case AE_IFREG:
		if (e->mode & ~SNAP_FILE_MODES)
			goto badmode;
		if (e->size < 0 || !archive_entry_size_is_set(ae)) {
			*why = "file without a size";
			return -EBADMSG;
		}
		break;
	case AE_IFDIR:
		if (e->mode & ~SNAP_DIR_MODES)
			goto badmode;
		break;
	case AE_IFLNK:
		if (e->mode != SNAP_LINK_MODE)
			goto badmode;
		e->target = archive_entry_symlink(ae);
		if (e->target == NULL || e->target[0] == '\0' ||
		    strlen(e->target) > SPACE_PATH_MAX) {
			*why = "bad symlink target length";
			return -EBADMSG;
		}
		break;
	case AE_IFCHR:
		/* the one device an archive holds: an overlay whiteout */
		if (archive_entry_rdev(ae) != 0) {
			*why = "device node";
			return -EBADMSG;
		}
		if (e->mode != 0 || e->sec != 0 || e->nsec != 0)
			goto badmode;
		break;
	default:
		*why = "device node, fifo, socket or unknown entry type";
		return -EBADMSG;
	}
	return 1;
badmode:
	*why = "mode bits not allowed for this entry type";
	return -EBADMSG;
}

/* The data of the current file entry, written at its offsets into fd (or
 * only read when fd < 0): holes are skipped and stay holes. */
static int
entry_data(struct snap_pass *p, const struct snap_entry *e, int fd, const char **why)
{
	const void *buf;
	size_t n;
	la_int64_t off, pos = 0;
	uint64_t flushed = 0, dropped = 0;
	int r;

	while ((r = archive_read_data_block(p->a, &buf, &n, &off)) == ARCHIVE_OK) {
		if (off < pos || off > e->size || (la_int64_t)n > e->size - off) {
			*why = "file data outside its size";
			return -EBADMSG;
		}
		if (fd >= 0) {
			for (size_t done = 0; done < n;) {
				ssize_t w = pwrite(fd, (const char *)buf + done, n - done,
				    (off_t)(off + (la_int64_t)done));
				if (w < 0 && errno == EINTR)
					continue;
				if (w < 0)
					return -errno;
				done += (size_t)w;
			}
			/* the restore ends with syncfs: the disk starts on
			 * what is written so far (offsets only grow) */
			fd_writeback_ahead(fd, &flushed, (uint64_t)off + n);
			/* nothing reads it back before the image is
			 * unmounted: what is on its way to the disk leaves
			 * the page cache, whose pages serve the next bytes */
			fd_drop_behind(fd, &dropped, flushed);
		}
		pos = off + (la_int64_t)n;
	}
	if (r != ARCHIVE_EOF)
		return pass_bad(p, why, "truncated archive");
	if (fd >= 0 && ftruncate(fd, (off_t)e->size) < 0)
		return -errno;
	return 0;
}

/* Ends a pass: the rest of the body is read (a tar reader stops at its
 * end marker), the frame must be complete, the body hash must equal the
 * name, and the bytes after the body must be the trailer naming it. */
static int
pass_check(struct snap_pass *p, const unsigned char want[SNAPSHOT_DIGEST_LEN], const char **why)
{
	unsigned char got[SNAPSHOT_DIGEST_LEN], trailer[SNAP_TRAILER_LEN], expect[SNAP_TRAILER_LEN];
	const void *dummy;
	la_ssize_t n;
	ssize_t t;

	while ((n = in_read_cb(p->a, p->rd, &dummy)) > 0)
		;
	if (n < 0) {
		*why = p->rd->why;
		return -EBADMSG;
	}
	ring_end(p->rd);
	snap_digest_final(&p->rd->h, got);
	do
		t = pread(p->rd->fd, trailer, sizeof(trailer), (off_t)p->rd->limit);
	while (t < 0 && errno == EINTR);
	snap_trailer(expect, want);
	/* constant-time: the name is public, but no comparison of digests
	 * should leak how much of a forged archive matched */
	if (t != (ssize_t)sizeof(trailer) || sodium_memcmp(got, want, sizeof(got)) != 0 ||
	    sodium_memcmp(trailer, expect, sizeof(trailer)) != 0) {
		*why = "digest does not match the archive";
		return -EBADMSG;
	}
	return 0;
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
	int base_root;          /* a delta's base, moved aside, or -1 */
	struct dir_fix *dirs;
	size_t ndirs, capdirs;
	char *names;
	size_t nlen, capnames;
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

/* A file as in the base: renamed over from the base's tree (a regular
 * file there, reached without following a symlink), then given the
 * entry's mode and mtime. pfd/name: where it goes. */
static int
same_entry(struct snap_restore *x, int pfd, const char *name, struct snap_entry *e,
    const struct timespec ts[2], const char **why)
{
	const char *bname;
	struct stat st, fst;
	int bfd, fd, r = 0;

	if (x->base_root < 0 || (bfd = open_parent(x->base_root, e->path, &bname)) < 0) {
		*why = "a file as in the base, which the base does not hold";
		return -EBADMSG;
	}
	if (fstatat(bfd, bname, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
		*why = "a file as in the base, which the base does not hold";
		r = -EBADMSG;
	} else if (renameat2(bfd, bname, pfd, name, RENAME_NOREPLACE) < 0)
		r = -errno;
	close(bfd);
	if (r < 0)
		return r;
	if ((fd = openat(pfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
		return -errno;
	if (fstat(fd, &fst) < 0 || fst.st_ino != st.st_ino || fchmod(fd, e->mode) < 0 ||
	    futimens(fd, ts) < 0)
		r = errno ? -errno : -EBUSY;
	close(fd);
	e->size = st.st_size;
	return r;
}

static int
extract_entry(struct snap_restore *x, struct snap_pass *p, int root,
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
	case AE_IFDIR:
		/* owner-writable until the end, then the archived mode */
		if (mkdirat(pfd, name, 0700) < 0)
			r = -errno;
		else
			r = remember_dir(x, e);
		break;
	case AE_IFREG:
		if (e->same) {
			r = same_entry(x, pfd, name, e, ts, why);
			break;
		}
		/* O_EXCL + O_NOFOLLOW: a duplicate entry or a planted
		 * symlink is refused, never written through */
		fd = openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			r = -errno;
			break;
		}
		r = entry_data(p, e, fd, why);
		if (r == 0 && (fchmod(fd, e->mode) < 0 || futimens(fd, ts) < 0))
			r = -errno;
		break;
	case AE_IFLNK:
		/* the target is stored, never resolved by us */
		if (symlinkat(e->target, pfd, name) < 0 ||
		    utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0)
			r = -errno;
		break;
	case AE_IFCHR:
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

/* each entry of a tree this restore populated itself: a directory made
 * writable before its contents go, then everything removed */
static int
remove_tree_cb(const struct walk_entry *e, void *arg)
{
	(void)arg;
	if (!e->post) {
		fchmod(e->fd, 0700);
		return 0;
	}
	if (unlinkat(e->parent, e->name, S_ISDIR(e->st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		return -errno;
	return 0;
}

/* Removes everything beneath dfd without following symlinks. Only used on
 * a directory this restore populated itself. */
static int
remove_tree(int dfd)
{
	return walk_beneath(dfd, SPACE_SNAPSHOT_DEPTH_MAX + 1, 0, remove_tree_cb, NULL);
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

/* The one pass: every entry is checked (next_entry) before it is
 * created, and the body's hash is compared with the name and the trailer
 * at the end. Until then what was extracted is not trusted: the caller
 * removes it on any failure (snapshot_restore), and sbx-manager extracts
 * into a fresh image it publishes only after this returned 0. When an
 * entry cannot be extracted, the rest of the archive is still read and
 * hashed: a damaged archive is reported as such (-EBADMSG), whatever
 * entry the damage made fail first. */
static int
extract_pass(struct snap_restore *x, struct snap_in *rd, uint64_t body, uint64_t out_max,
    const unsigned char want[SNAPSHOT_DIGEST_LEN], int root, struct snap_entry *e, struct snapshot_stats *st, const char **why)
{
	struct snap_pass p;
	int r;

	if ((r = pass_open(&p, rd, body, out_max)) < 0) {
		if (r == -EBADMSG)
			*why = rd->why;
		goto out;
	}
	while ((r = next_entry(&p, e, why)) == 1) {
		if ((r = extract_entry(x, &p, root, e, why)) < 0) {
			const char *own = *why, *dwhy = NULL;

			if (r != -EBADMSG && pass_check(&p, want, &dwhy) < 0) {
				*why = dwhy ? dwhy : "digest does not match the archive";
				r = -EBADMSG;
			} else
				*why = own;
			goto out;
		}
		if (e->type == AE_IFREG)
			st->bytes += (uint64_t)e->size;
	}
	if (r == 0)
		r = pass_check(&p, want, why);
	st->entries = p.seen;
	st->hashed_aside = rd->aside;
out:
	pass_close(&p);
	if (r < 0)
		return r;
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

/* Extracts rd's archive into dest_dir (missing or empty), removing
 * everything again on failure. */
static int
restore_into(struct snap_in *rd, const unsigned char want[SNAPSHOT_DIGEST_LEN], uint64_t body,
    const char *dest_dir, uint64_t max_bytes, int base_root, struct snapshot_stats *stats,
    const char **why)
{
	struct snap_restore *x = NULL;
	struct snap_entry *e = NULL;
	struct snapshot_stats st = { 0 };
	uint64_t out_max = snapshot_stream_max(max_bytes);
	int root = -1, r;
	bool made_dest = false, populated = false;

	if ((x = calloc(1, sizeof(*x))) == NULL || (e = calloc(1, sizeof(*e))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	x->base_root = base_root;
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
	if ((r = extract_pass(x, rd, body, out_max, want, root, e, &st, why)) < 0) {
		if (r == -EBADMSG && *why == NULL)
			*why = "malformed archive";
		goto out;
	}
	populated = false;
	if (stats)
		*stats = st;
	r = 0;
out:
	if (populated) {
		/* leave dest as we found it: missing, or empty */
		if (remove_tree(root) < 0)
			log_warnx("snapshot restore: could not clean %s", dest_dir);
		if (made_dest)
			rmdir(dest_dir);
	} else if (made_dest && r < 0)
		rmdir(dest_dir);
	if (root >= 0)
		close(root);
	if (x) {
		free(x->dirs);
		free(x->names);
	}
	free(x);
	free(e);
	return r;
}

/* the digest, exactly 64 lowercase hex digits: it can never become a path */
static int
restore_digest(const char *digest, unsigned char want[SNAPSHOT_DIGEST_LEN], const char **why)
{
	if (digest == NULL || strlen(digest) != SNAPSHOT_DIGEST_HEX ||
	    strspn(digest, "0123456789abcdef") != SNAPSHOT_DIGEST_HEX ||
	    hex_decode(digest, SNAPSHOT_DIGEST_HEX, want, SNAPSHOT_DIGEST_LEN) != SNAPSHOT_DIGEST_LEN) {
		*why = "digest is not 64 lowercase hex digits";
		return -EINVAL;
	}
	if (sodium_init() < 0)
		return -EIO;
	return 0;
}

/* every name in from (but skip) moved into to, never replacing one */
static int
move_children(int from, int to, const char *skip)
{
	char **names = NULL, **nn;
	size_t n = 0, cap = 0, i;
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if ((fd = openat(from, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	/* listed first: a directory read while its names leave it may skip some */
	while ((errno = 0, de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
		    (skip && strcmp(de->d_name, skip) == 0))
			continue;
		if (n == cap) {
			cap = cap ? cap * 2 : 32;
			if (cap > SPACE_SNAPSHOT_ENTRIES_MAX ||
			    (nn = realloc(names, cap * sizeof(*names))) == NULL) {
				r = -ENOMEM;
				break;
			}
			names = nn;
		}
		if ((names[n] = strdup(de->d_name)) == NULL) {
			r = -ENOMEM;
			break;
		}
		n++;
	}
	if (r == 0 && errno != 0)
		r = -errno;
	closedir(d);
	for (i = 0; i < n && r == 0; i++)
		if (renameat2(from, names[i], to, names[i], RENAME_NOREPLACE) < 0)
			r = -errno;
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

/* A delta onto dest_dir, which holds its base's state: dest's entries
 * go into a staging directory (random name), the delta is extracted
 * into a fresh one beside it (the unchanged files renamed over from the
 * staging one), the staging directory with what is left in it (files
 * changed or deleted since the base) is removed and the fresh tree's
 * entries take dest's place. Nothing is undone on failure: the caller
 * discards dest (snapshot.h). */
static int
restore_onto(struct snap_in *rd, const unsigned char want[SNAPSHOT_DIGEST_LEN], uint64_t body,
    const char *base, const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats,
    const char **why)
{
	unsigned char b[SNAPSHOT_DIGEST_LEN], rnd[8];
	char stage[40], fresh[40], hex[17], path[PATH_MAX];
	int root = -1, sfd = -1, nfd = -1, r;

	if ((r = restore_digest(base, b, why)) < 0)
		return r;
	rd->want_base = b;
	randombytes_buf(rnd, sizeof(rnd));
	hex_encode(rnd, sizeof(rnd), hex, sizeof(hex));
	snprintf(stage, sizeof(stage), ".space-base-%s", hex);
	snprintf(fresh, sizeof(fresh), ".space-new-%s", hex);
	if (snprintf(path, sizeof(path), "%s/%s", dest_dir, fresh) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	if ((root = open(dest_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	if (mkdirat(root, stage, 0700) < 0 ||
	    (sfd = openat(root, stage, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = move_children(root, sfd, stage)) < 0)
		goto out;
	if (mkdirat(root, fresh, 0755) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = restore_into(rd, want, body, path, max_bytes, sfd, stats, why)) < 0)
		goto out;
	if ((r = remove_tree(sfd)) < 0 || unlinkat(root, stage, AT_REMOVEDIR) < 0) {
		r = r < 0 ? r : -errno;
		goto out;
	}
	if ((nfd = openat(root, fresh, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	if ((r = move_children(nfd, root, NULL)) < 0)
		goto out;
	if (unlinkat(root, fresh, AT_REMOVEDIR) < 0 || syncfs(root) < 0)
		r = -errno;
out:
	if (r < 0 && *why == NULL)
		*why = "cannot apply the incremental archive onto its base";
	if (nfd >= 0)
		close(nfd);
	if (sfd >= 0)
		close(sfd);
	close(root);
	return r;
}

static struct snap_in *
in_new(void)
{
	struct snap_in *rd = calloc(1, sizeof(*rd));

	if (rd && (rd->z = ZSTD_createDCtx()) == NULL) {
		free(rd);
		rd = NULL;
	}
	return rd;
}

static void
in_free(struct snap_in *rd)
{
	if (rd) {
		ring_end(rd);
		ZSTD_freeDCtx(rd->z);
	}
	free(rd);
}

static int
restore_file(const char *store_dir, const char *digest, const char *onto, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	unsigned char want[SNAPSHOT_DIGEST_LEN], trailer[SNAP_TRAILER_LEN], expect[SNAP_TRAILER_LEN];
	char name[PATH_MAX];
	struct snap_in *rd = NULL;
	const char *dummy;
	struct stat sb;
	uint64_t body;
	ssize_t n;
	int fd = -1, r;

	if (why == NULL)
		why = &dummy;
	*why = NULL;
	if ((r = restore_digest(digest, want, why)) < 0)
		return r;
	if ((rd = in_new()) == NULL) {
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
	if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size <= SNAP_TRAILER_LEN) {
		*why = "not a snapshot archive";
		r = -EBADMSG;
		goto out;
	}
	body = (uint64_t)sb.st_size - SNAP_TRAILER_LEN;
	/* the trailer: a skippable frame holding the digest the name says
	 * (checked again, with the body's hash, at the end) */
	do
		n = pread(fd, trailer, sizeof(trailer), (off_t)body);
	while (n < 0 && errno == EINTR);
	if (n < 0) {
		r = -errno;
		goto out;
	}
	snap_trailer(expect, want);
	if ((size_t)n != sizeof(trailer) || sodium_memcmp(trailer, expect, 8) != 0) {
		*why = "not a snapshot archive (no trailer)";
		r = -EBADMSG;
		goto out;
	}
	rd->fd = fd;
	r = onto ? restore_onto(rd, want, body, onto, dest_dir, max_bytes, stats, why) :
	    restore_into(rd, want, body, dest_dir, max_bytes, -1, stats, why);
out:
	if (fd >= 0)
		close(fd);
	in_free(rd);
	return r;
}

static int
restore_feed(const struct snapshot_feed *f, const char *digest, const char *onto,
    const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	unsigned char want[SNAPSHOT_DIGEST_LEN];
	struct snap_in *rd;
	const char *dummy;
	int r;

	if (why == NULL)
		why = &dummy;
	*why = NULL;
	if ((r = restore_digest(digest, want, why)) < 0)
		return r;
	if ((rd = in_new()) == NULL)
		return -ENOMEM;
	rd->fd = f->fd;
	rd->feed = f;
	r = onto ? restore_onto(rd, want, 0, onto, dest_dir, max_bytes, stats, why) :
	    restore_into(rd, want, 0, dest_dir, max_bytes, -1, stats, why);
	in_free(rd);
	return r;
}

int
snapshot_restore(const char *store_dir, const char *digest, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	return restore_file(store_dir, digest, NULL, dest_dir, max_bytes, stats, why);
}

int
snapshot_restore_onto(const char *store_dir, const char *digest, const char *base,
    const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	return restore_file(store_dir, digest, base, dest_dir, max_bytes, stats, why);
}

int
snapshot_restore_feed(const struct snapshot_feed *f, const char *digest, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	return restore_feed(f, digest, NULL, dest_dir, max_bytes, stats, why);
}

int
snapshot_restore_feed_onto(const struct snapshot_feed *f, const char *digest, const char *base,
    const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats, const char **why)
{
	return restore_feed(f, digest, base, dest_dir, max_bytes, stats, why);
}
