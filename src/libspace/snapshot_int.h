/* What snapshot.c (create) and snapshot_restore.c share: the trailer, the
 * path rule and the permission bits an archive may carry. */
#ifndef SPACE_SNAPSHOT_INT_H
#define SPACE_SNAPSHOT_INT_H
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
#endif
