/* What snapshot.c (create) and snapshot_restore.c share: the trailer, the
 * path rule and the permission bits an archive may carry. */
#ifndef SPACE_SNAPSHOT_INT_H
#define SPACE_SNAPSHOT_INT_H
#include <nettle/sha2.h>
#include <sodium.h>
#include <stdbool.h>
#include <stddef.h>

/* The trailer is a zstd skippable frame (magic 0x184D2A50..5F, little
 * endian, then a u32 length): zstd and tar tools read the archive as a
 * plain .tar.zst and skip it. Its payload is the digest of the body. */
#define SNAP_TRAILER_MAGIC      0x184D2A5Eu
#define SNAP_TRAILER_LEN        (8 + 32)
#define SNAP_BUF                (128u << 10)

/* Permission bits we carry. setuid/setgid are refused on files and
 * directories: the restorer runs as root, and a sandbox must not be able
 * to plant a set-id file owned by whoever restores it. */
#define SNAP_FILE_MODES         0777u
#define SNAP_DIR_MODES          01777u
#define SNAP_LINK_MODE          0777u

/* A path is relative, made of non-empty components other than "." and
 * "..", no NUL, bounded in length and depth: whatever the archive says, it
 * names something strictly beneath the destination. */
bool snap_path_valid(const char *p, size_t len);

void snap_trailer(unsigned char out[SNAP_TRAILER_LEN], const unsigned char digest[32]);

/* An incremental archive begins with another skippable frame, of the
 * same shape, naming the digest of its base: the archive whose state the
 * files it marks unchanged are taken from (docs/recovery.md). It is part
 * of the body, so the archive's digest covers it. */
#define SNAP_DELTA_MAGIC        0x184D2A5Du
#define SNAP_DELTA_LEN          (8 + 32)
void snap_delta_header(unsigned char out[SNAP_DELTA_LEN], const unsigned char base[32]);
/* 1 and base when p (n >= SNAP_DELTA_LEN bytes, an archive's first) is
 * a delta header, 0 when it is not one, -EBADMSG when it has the magic
 * and the wrong length */
int snap_delta_parse(const unsigned char *p, size_t n, unsigned char base[32]);
/* the first bytes of an archive: 1 a delta of base (hex), 0 whole, or -EBADMSG */
int snap_base_from(const unsigned char *head, size_t n, char base[65]);

/* Which digest names an archive. Archives begin with a marker frame of
 * the same shape naming the algorithm (a u32, 1: SHA-256, nettle's, which
 * uses the CPU's SHA instructions where it has them); archives made
 * before it existed have none and are named by their BLAKE2b-256. The
 * marker is part of the body, so the digest covers it: the algorithm an
 * archive is checked with is the one its name was taken with, and a
 * forged archive must still match the name in the algorithm it picks. */
#define SNAP_MARK_MAGIC         0x184D2A5Cu
#define SNAP_MARK_LEN           (8 + 4)
#define SNAP_HEAD_MAX           (SNAP_MARK_LEN + SNAP_DELTA_LEN)
enum snap_alg { SNAP_ALG_BLAKE2B = 0, SNAP_ALG_SHA256 = 1 };
void snap_mark(unsigned char out[SNAP_MARK_LEN]);
/* The algorithm p (an archive's first n bytes, all of it when it is
 * shorter) names, and in *len the marker's length (0: none); -EBADMSG for
 * a marker of another length or an unknown algorithm. */
int snap_mark_parse(const unsigned char *p, size_t n, size_t *len);

/* An archive's body digest, in the algorithm of its marker */
struct snap_digest {
	union {
		crypto_generichash_state b2;
		struct sha256_ctx s2;
	} u;
	int alg;
};
void snap_digest_init(struct snap_digest *d, int alg);
void snap_digest_update(struct snap_digest *d, const void *p, size_t n);
void snap_digest_final(struct snap_digest *d, unsigned char out[32]);
#endif
