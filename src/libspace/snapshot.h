/* Content-addressed snapshots of a sandbox's writable layer (DESIGN 9, 11).
 *
 * An archive is one file STORE/<hex SHA-256>.snap: a zstd skippable frame
 * naming the digest's algorithm, a POSIX pax tar stream (libarchive)
 * compressed as one zstd frame, and a zstd skippable frame that repeats
 * the digest (docs/recovery.md; archives made before the first frame
 * existed lack it and are named by their BLAKE2b-256, and still read).
 * It holds regular files (sparse ones as pax sparse entries: holes are neither
 * stored nor filled on restore), directories, symlinks and overlay
 * whiteouts with their permission bits and mtimes; ownership is not
 * recorded (the substrate assigns it when it resumes the layer). The name is
 * the digest of everything before the trailer, so a restore holds the
 * whole file to its name (and removes what it extracted when it does not
 * match). */
#ifndef SPACE_SNAPSHOT_H
#define SPACE_SNAPSHOT_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#define SNAPSHOT_DIGEST_LEN     32                      /* SHA-256 (BLAKE2b-256 before) */
#define SNAPSHOT_DIGEST_HEX     (2 * SNAPSHOT_DIGEST_LEN)

struct snapshot_stats {
	uint64_t entries;       /* archived (create) or extracted (restore) */
	uint64_t bytes;         /* file sizes (holes included) */
	uint64_t skipped;       /* create only: devices, fifos, sockets left out */
	uint64_t unchanged;     /* files as in the base (a delta) */
	uint64_t hashed_aside;  /* restore only: body bytes hashed on a thread of their own */
	uint64_t size;          /* create only: the archive's bytes, trailer included */
	bool uncached;          /* create only: not kept in the store (SNAPSHOT_TEE_UNCACHED) */
};

/* Archives layer_dir (never following a symlink inside it) into store_dir,
 * which is created 0700 when missing. Streams through a temporary file that
 * is fsync'd and renamed to <digest>.snap (mode 0444); an existing archive
 * of that name holds the same content. max_bytes (0: no bound) is the
 * layer's quota: the archive file is never larger, the attempt stops with
 * -EFBIG as soon as it would be. digest_out gets lowercase hex. stats may be
 * NULL. Returns 0 or a negative errno: -EBUSY when the layer changed while
 * it was read, -E2BIG / -ENAMETOOLONG over a limit, -EFBIG over max_bytes. */
int snapshot_create(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    char digest_out[SNAPSHOT_DIGEST_HEX + 1], struct snapshot_stats *stats);

/* snapshot_create that also writes every byte of the archive, trailer
 * included, to tee_fd (a pipe into an upload) as it is made, and does not
 * fsync the file or the store: the copy the tee feeds is the durable one
 * (the caller reports the digest only once that copy is stored). A tee
 * that fails (the reader went away: EPIPE) is dropped, *tee_err gets its
 * -errno and the archive is still made into the store, so the caller can
 * send the file instead; *tee_err is 0 when every byte went out.
 * flags: SNAPSHOT_DROP_READ, the layer's file data leaves the page cache
 * once read (clean pages only), for a layer mounted read-only for this
 * archive and unmounted after it: its pages would be dropped then anyway,
 * and without this they first grow the page cache by the layer's size
 * (beside the image's own cached pages). */
#define SNAPSHOT_DROP_READ 1u
/* with a tee: an archive that grows past SPACE_TEE_CACHE_MAX bytes is not
 * kept in the store at all (stats->uncached; what the file held goes as
 * the archive passes the bound, and nothing more is written to it): the
 * copy the tee feeds is the only one, and the disk takes the archive once,
 * not twice. The tee failing past the bound fails the archive (-ECOMM),
 * since no copy would be left to send; one that failed before it leaves
 * the archive made into the store, as without the flag. */
#define SNAPSHOT_TEE_UNCACHED 2u
int snapshot_create_tee(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    int tee_fd, int *tee_err, unsigned flags, char digest_out[SNAPSHOT_DIGEST_HEX + 1],
    struct snapshot_stats *stats);

/* ---- incremental archives (docs/recovery.md, "Incremental archives") ----
 *
 * A layer restored from an archive B keeps an index of its regular files
 * as they were when the restore ended: path, inode number, size, mtime
 * and ctime. An archive of that layer made with the index is a delta of
 * B: it begins with a frame naming B, and each regular file whose inode,
 * size, mtime and ctime are still the index's is an entry without data
 * marked "as in the base" (a hard link to its own path, which a full
 * archive never holds); everything else is archived whole, and what was
 * deleted is simply absent. ctime cannot be set from user space: any
 * write, truncation, chmod, rename into place or re-creation changes it.
 * The index is written only once the file system's clock is past every
 * ctime it holds (a probe file's), so a later change cannot leave a file
 * with its indexed ctime even within one tick of a coarse timestamp.
 * A delta is restored onto a tree that holds its base's state. Chains are
 * bounded: the archive of a layer whose base is already
 * SNAPSHOT_DELTA_DEPTH_MAX deltas deep is made whole. */
#define SNAPSHOT_DELTA_DEPTH_MAX 8

struct snapshot_index;
/* Walks layer_dir (one file system, no symlink followed) and writes the
 * index of its regular files to path (temporary file, fsync'd, renamed),
 * naming base (the digest the layer holds the state of) and depth (how
 * many deltas deep base is: 0 for a whole archive). -E2BIG when the
 * index would exceed SPACE_SNAPSHOT_INDEX_MAX (the layer's next archive
 * is then made whole). */
int snapshot_index_save(const char *layer_dir, const char *path, const char *base, unsigned depth);
/* The index of a layer in use, built before it is archived: its files
 * changed at or after before are left out (the next archive carries them
 * whole). The caller takes before from the real-time clock, less a
 * margin of a few ticks of the file system's timestamps, ahead of a
 * syncfs of the layer, and archives the layer after: a file in the index
 * is then archived as it was indexed or later, and a change after the
 * syncfs, through write or a shared mapping (whose pages the syncfs
 * wrote back and protected, so the next write faults and stamps the
 * time), gives it a later ctime (docs/worker.md, "Checkpoints").
 * snapshot_index_write names the archive made of it and writes it to
 * path as snapshot_index_save does. */
int snapshot_index_build_live(const char *layer_dir, const struct timespec *before,
    struct snapshot_index **out);
int snapshot_index_write(struct snapshot_index *x, const char *path, const char *base,
    unsigned depth);
/* Reads and decodes an index file strictly: 0, -ENOENT, or -EBADMSG. */
int snapshot_index_load(const char *path, struct snapshot_index **out);
int snapshot_index_decode(const unsigned char *buf, size_t len, struct snapshot_index **out);
void snapshot_index_free(struct snapshot_index *x);
/* the base's digest (hex) and its depth */
const char *snapshot_index_base(const struct snapshot_index *x);
unsigned snapshot_index_depth(const struct snapshot_index *x);
size_t snapshot_index_count(const struct snapshot_index *x);
/* true when path is in the index with exactly st's inode, size, mtime and
 * ctime */
bool snapshot_index_same(const struct snapshot_index *x, const char *path,
    const struct stat *st);

/* snapshot_create_tee with an index (NULL: a whole archive): the archive
 * is a delta of the index's base. */
int snapshot_create_delta(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    int tee_fd, int *tee_err, unsigned flags, const struct snapshot_index *base,
    char digest_out[SNAPSHOT_DIGEST_HEX + 1], struct snapshot_stats *stats);

/* Whether store_dir/<digest>.snap (or the archive arriving at f, waiting
 * for its first bytes) is a delta: 1 with base (hex) set, 0 for a whole
 * archive, or a negative errno (-EBADMSG: not an archive). Only a hint
 * for choosing what to restore onto: the restore checks the frame again,
 * as part of the hashed body. */
int snapshot_base_of(const char *store_dir, const char *digest, char base[SNAPSHOT_DIGEST_HEX + 1]);
struct snapshot_feed;
int snapshot_feed_base_of(const struct snapshot_feed *f, char base[SNAPSHOT_DIGEST_HEX + 1]);

/* Restores store_dir/<digest>.snap into dest_dir, which must be missing
 * (it is created 0755) or empty, in one pass: every entry is checked
 * before it is created, the body's digest is recomputed while it is
 * extracted and compared in constant time with the name and the trailer
 * at the end. Extraction never follows a symlink and never writes outside
 * dest_dir. max_bytes (0: no bound) is the quota of the layer it restores
 * into: the decompressed stream may not exceed what snapshot_create could
 * have written under it. What was extracted is not trusted until this
 * returns 0: on any failure it is removed again and dest_dir is left as it
 * was found (a caller extracting into a mounted image discards the image
 * as well). Returns 0, -EINVAL for a malformed digest string, -ENOENT when
 * there is no such archive, -EBADMSG when it fails verification or is
 * malformed (also when a damaged archive made an entry fail first),
 * -ENOTEMPTY when dest_dir has content, or another negative errno; *why
 * (may be NULL) gets a static reason for a refused archive. */
int snapshot_restore(const char *store_dir, const char *digest, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why);

/* An archive still arriving (a download into a cache), restored while it
 * does: snapshot_restore_feed reads fd (pread from offset 0) as far as
 * more() says was written. more(ctx, have, &end) blocks until more than
 * have bytes were written or the transfer ended, and returns how many
 * bytes were written (*end set when that is all of them), or a negative
 * errno when the transfer failed. The last SNAP_TRAILER_LEN bytes written
 * so far are never read as body. passed (may be NULL) is told, as the
 * body is read, an offset below which no byte will be read again (the
 * first bytes are read before it is first called; only the trailer, at
 * the end, is read after the body): the writer may release those
 * bytes. */
struct snapshot_feed {
	int fd;
	int64_t (*more)(void *ctx, uint64_t have, bool *end);
	void (*passed)(void *ctx, uint64_t off);
	void *ctx;
};
/* snapshot_restore over a feed: the same checks and the same cleanup;
 * the digest and the trailer are checked when the transfer has ended, and
 * a failed transfer fails the restore (-EBADMSG) and removes what it
 * extracted. */
int snapshot_restore_feed(const struct snapshot_feed *f, const char *digest, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why);

/* A delta onto dest_dir, which holds the state of base (the digest the
 * delta must name): dest's entries are first moved aside into a staging
 * directory, the delta is extracted beside it with the same checks as a
 * whole archive (unchanged files are renamed over from the staging
 * directory, each one a regular file there or the restore fails), then
 * the staging directory is removed. On failure dest is left in no
 * particular state: the caller discards it (sbx-manager restores into an
 * image it publishes only after this returned 0). A whole archive, or a
 * delta of another base, is refused (-EBADMSG). */
int snapshot_restore_onto(const char *store_dir, const char *digest, const char *base,
    const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats, const char **why);
int snapshot_restore_feed_onto(const struct snapshot_feed *f, const char *digest, const char *base,
    const char *dest_dir, uint64_t max_bytes, struct snapshot_stats *stats, const char **why);

/* The most tar stream a layer of quota max_bytes can produce (file data
 * at most the quota, headers within the rest); both sides enforce it. */
uint64_t snapshot_stream_max(uint64_t max_bytes);

/* exactly SNAPSHOT_DIGEST_HEX lowercase hex digits: a digest, never a path */
bool snapshot_digest_valid(const char *s);

/* An archive's bytes checked as they arrive (snapshot_stream.c): an upload
 * or a download is hashed in pieces and held to the digest it claims.
 * Memory is this struct, whatever the archive's size. */
struct snapshot_hash {
	_Alignas(64) unsigned char st[448];     /* struct snap_digest */
	unsigned char tail[40];                 /* the last bytes: the trailer */
	size_t tail_len;
	uint64_t size;                          /* bytes seen */
	unsigned char head[12];                 /* the first: a marker naming the algorithm */
	int alg;                                /* -1 until the body's first bytes are hashed */
};
void snapshot_hash_init(struct snapshot_hash *h);
void snapshot_hash_update(struct snapshot_hash *h, const void *p, size_t n);
/* 0 when the bytes seen are the archive digest names: the body's
 * digest (in the algorithm its first bytes name) is digest and the last bytes are the trailer repeating it
 * (compared in constant time); -EBADMSG otherwise (a malformed digest
 * too). got (may be NULL) gets the body's digest in hex. */
int snapshot_hash_final(struct snapshot_hash *h, const char *digest,
    char got[SNAPSHOT_DIGEST_HEX + 1]);
/* The same check for bytes whose digest is not known before they end (a
 * streamed upload): 0 when the last bytes are a trailer and it names the
 * body's digest, which got then holds in hex; -EBADMSG otherwise
 * (got still gets the body's digest). */
int snapshot_hash_end(struct snapshot_hash *h, char got[SNAPSHOT_DIGEST_HEX + 1]);
#endif
