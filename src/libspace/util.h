/* Encoding, time and comparison helpers. Convention (docs/errors.md):
 * return 0 or a length on success, a negative errno on failure. */
#ifndef SPACE_UTIL_H
#define SPACE_UTIL_H
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/types.h>
#include <time.h>

/* base64url without padding (RFC 4648 section 5). Decoding is strict: no
 * padding, no whitespace, no characters outside the alphabet, and the unused
 * low bits of the last character must be zero (one encoding per value). */
size_t b64url_encoded_len(size_t n);              /* without NUL */
size_t b64url_decoded_max(size_t n);
/* writes NUL-terminated text; -ENOSPC if outcap < encoded_len + 1 */
ssize_t b64url_encode(const void *in, size_t len, char *out, size_t outcap);
/* -EINVAL on any non-canonical input, -ENOSPC if out too small */
ssize_t b64url_decode(const char *in, size_t len, void *out, size_t outcap);

/* lowercase hex; decode accepts either case, exactly 2*len digits */
ssize_t hex_encode(const void *in, size_t len, char *out, size_t outcap);
ssize_t hex_decode(const char *in, size_t len, void *out, size_t outcap);

/* RFC 3339 date-time. parse accepts "Z" or a numeric offset, optional
 * fractional seconds (truncated); returns -EINVAL otherwise.
 * format always writes "YYYY-MM-DDTHH:MM:SSZ" (20 chars + NUL). */
#define RFC3339_LEN 20
int rfc3339_parse(const char *s, size_t len, int64_t *unix_out);
int rfc3339_format(int64_t unix_time, char out[RFC3339_LEN + 1]);

/* constant time; 1 when equal */
bool ct_equal(const void *a, const void *b, size_t len);

/* identifiers: [A-Za-z0-9_-]{1,SPACE_ID_MAX} */
/* big-endian unsigned integers of n bytes (1..8), as the binary codecs
 * write them */
uint64_t be_load(const uint8_t *p, int n);
void be_store(uint8_t *p, uint64_t v, int n);
/* the same, little-endian (zstd's frames, the jail keeper's messages) */
uint64_t le_load(const uint8_t *p, int n);
void le_store(uint8_t *p, uint64_t v, int n);
/* a string after its length in lb big-endian bytes (1 or 2): lstr_put
 * writes it (the caller has checked it fits) and returns the bytes
 * written; lstr_get reads one into dst[max + 1] at *p (< end) and moves
 * *p past it: 0, or -EPROTO for a length past end or over max, or a NUL
 * inside */
size_t lstr_put(uint8_t *p, const char *s, int lb);
int lstr_get(const uint8_t **p, const uint8_t *end, int lb, char *dst, size_t max);
bool id_valid(const char *s);
/* prefix + 26 random base32-lowercase characters, e.g. "sbx_..." */
int id_random(const char *prefix, char *out, size_t outcap);

int64_t now_unix(void);         /* wall clock, seconds */
int64_t now_unix_ms(void);      /* wall clock, milliseconds */
uint64_t now_mono_ns(void);     /* CLOCK_MONOTONIC */
/* a condition variable whose timed waits count on CLOCK_MONOTONIC, and
 * the deadline at ns of that clock (now_mono_ns()) as such a wait takes it */
void cond_init_mono(pthread_cond_t *cv);
struct timespec mono_timespec(uint64_t ns);

/* read a whole file (bounded by max), NUL-terminated; -EFBIG if larger */
int read_file(const char *path, size_t max, char **out, size_t *len);
/* write all len bytes to fd, retrying EINTR and short writes; 0, -errno,
 * or -EIO when write() makes no progress */
int fd_write_all(int fd, const void *buf, size_t len);
/* A large file written in order and fsync'd at its end: once *started
 * lags written by FD_WRITEBACK_STEP, the kernel is asked to start writing
 * that range to the disk (sync_file_range, not waiting), so the final
 * fsync waits for the tail only and the disk works while the bytes still
 * arrive. Advisory: a failure is ignored (the fsync reports it). */
#define FD_WRITEBACK_STEP (8u << 20)
void fd_writeback_ahead(int fd, uint64_t *started, uint64_t written);
/* With fd_writeback_ahead, for a file nobody reads back soon (a layer
 * restored into an image that is unmounted next): pages whose writeback
 * was started a step earlier leave the page cache (POSIX_FADV_DONTNEED
 * drops clean pages only: what is still being written stays, and is
 * tried again by the next call). The memory is reused at once instead of
 * a second copy of the data growing the page cache. Advisory. */
void fd_drop_behind(int fd, uint64_t *dropped, uint64_t started);
/* The directory dir held under an exclusive flock (processes sharing it
 * exclude each other too) until the returned descriptor is closed; or
 * -errno. */
int dir_lock(const char *dir);
/* Pages of a file only read once, in order (a layer being archived):
 * [*dropped, read) leaves the page cache each FD_WRITEBACK_STEP, or all
 * of it when end is set. Clean pages only, advisory. */
void fd_drop_read(int fd, uint64_t *dropped, uint64_t read, bool end);
/* A descriptor passed along with a file body (fs.read's answer, passed
 * from the guest up to node-api, which sends the file from it): 0 when fd
 * is a regular file, open for reading only (not O_PATH, not writable), on
 * a file system that holds files (ext2/3/4, xfs, btrfs, tmpfs, overlayfs,
 * squashfs, erofs), with *size its size now. Anything else is refused with
 * *why: a pipe, socket or device never ends or blocks; procfs and sysfs
 * files answer by who reads them; a network or FUSE file system may block
 * the sender's thread for as long as its server likes. Every hop checks
 * the descriptor it received before passing it on. */
int fd_file_passable(int fd, uint64_t *size, const char **why);
/* write atomically (tmp + fsync + rename + fsync dir) with mode */
int write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode);
/* the same without the two fsyncs, for a file made again from memory
 * every few seconds (metrics): a reader sees the old file or the new one,
 * never a part; after a power loss it may be empty until the next write.
 * Each fsync of a new file writes its inode and directory on the disk the
 * records commit to. */
int write_file_replace(const char *path, const void *buf, size_t len, mode_t mode);
int mkdir_p(const char *path, mode_t mode);
/* a daemon that holds descriptors per sandbox (sbx-manager, node-api):
 * the soft RLIMIT_NOFILE raised to the hard one (a service manager's
 * default soft limit of 1024 would stop a worker short of its capacity).
 * Returns the soft limit now in force, or -errno. */
long nofile_raise(void);
/* A unix socket of type (SOCK_STREAM, SOCK_SEQPACKET) bound, not listening,
 * at path, mode 0600: connecting needs write permission, so only its owner
 * (root, in the 0700 root run directories it is used in) can connect. A
 * socket left at path is replaced: the directory is the caller's. The
 * descriptor (close-on-exec), or -errno. */
int unix_bind_private(const char *path, int type);
/* A TCP connection whose peer vanished (its host lost, a link cut: no FIN,
 * no RST ever comes) is ended by the kernel instead of held for ever:
 * keepalive probes after idle_s seconds of silence, one every idle_s / 3
 * (at least 1), and the connection fails (ETIMEDOUT) after three go
 * unanswered, or once data sent stays unacknowledged as long
 * (TCP_USER_TIMEOUT). A peer that is alive but quiet, or whose process
 * is stopped, answers the probes from its kernel and keeps the
 * connection. 0 leaves the socket as it is; a socket that is not TCP
 * (a local one) too. 0 or -errno. */
int tcp_keepalive(int fd, unsigned idle_s);
#endif
