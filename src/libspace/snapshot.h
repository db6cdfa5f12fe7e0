/* Content-addressed snapshots of a sandbox's writable layer (DESIGN 9, 11).
 *
 * An archive is one file STORE/<hex BLAKE2b-256>.snap: a POSIX pax tar
 * stream (libarchive) compressed as one zstd frame, followed by a zstd
 * skippable frame that repeats the digest (docs/recovery.md). It holds
 * regular files (sparse ones as pax sparse entries: holes are neither
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

#define SNAPSHOT_DIGEST_LEN     32                      /* BLAKE2b-256 */
#define SNAPSHOT_DIGEST_HEX     (2 * SNAPSHOT_DIGEST_LEN)

struct snapshot_stats {
	uint64_t entries;       /* archived (create) or extracted (restore) */
	uint64_t bytes;         /* file sizes (holes included) */
	uint64_t skipped;       /* create only: devices, fifos, sockets left out */
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
int snapshot_create_tee(const char *layer_dir, const char *store_dir, uint64_t max_bytes,
    int tee_fd, int *tee_err, unsigned flags, char digest_out[SNAPSHOT_DIGEST_HEX + 1],
    struct snapshot_stats *stats);

/* Restores store_dir/<digest>.snap into dest_dir, which must be missing
 * (it is created 0755) or empty, in one pass: every entry is checked
 * before it is created, the body's BLAKE2b-256 is recomputed while it is
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
 * so far are never read as body. */
struct snapshot_feed {
	int fd;
	int64_t (*more)(void *ctx, uint64_t have, bool *end);
	void *ctx;
};
/* snapshot_restore over a feed: the same checks and the same cleanup;
 * the digest and the trailer are checked when the transfer has ended, and
 * a failed transfer fails the restore (-EBADMSG) and removes what it
 * extracted. */
int snapshot_restore_feed(const struct snapshot_feed *f, const char *digest, const char *dest_dir,
    uint64_t max_bytes, struct snapshot_stats *stats, const char **why);

/* The most tar stream a layer of quota max_bytes can produce (file data
 * at most the quota, headers within the rest); both sides enforce it. */
uint64_t snapshot_stream_max(uint64_t max_bytes);

/* exactly SNAPSHOT_DIGEST_HEX lowercase hex digits: a digest, never a path */
bool snapshot_digest_valid(const char *s);

/* An archive's bytes checked as they arrive (snapshot_stream.c): an upload
 * or a download is hashed in pieces and held to the digest it claims.
 * Memory is this struct, whatever the archive's size. */
struct snapshot_hash {
	_Alignas(64) unsigned char st[384];     /* crypto_generichash_state */
	unsigned char tail[40];                 /* the last bytes: the trailer */
	size_t tail_len;
	uint64_t size;                          /* bytes seen */
};
void snapshot_hash_init(struct snapshot_hash *h);
void snapshot_hash_update(struct snapshot_hash *h, const void *p, size_t n);
/* 0 when the bytes seen are the archive digest names: the body's
 * BLAKE2b-256 is digest and the last bytes are the trailer repeating it
 * (compared in constant time); -EBADMSG otherwise (a malformed digest
 * too). got (may be NULL) gets the body's digest in hex. */
int snapshot_hash_final(struct snapshot_hash *h, const char *digest,
    char got[SNAPSHOT_DIGEST_HEX + 1]);
/* The same check for bytes whose digest is not known before they end (a
 * streamed upload): 0 when the last bytes are a trailer and it names the
 * body's BLAKE2b-256, which got then holds in hex; -EBADMSG otherwise
 * (got still gets the body's digest). */
int snapshot_hash_end(struct snapshot_hash *h, char got[SNAPSHOT_DIGEST_HEX + 1]);
#endif
