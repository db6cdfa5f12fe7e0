/* An archive checked while its bytes arrive (an upload to the control
 * plane, a download to a worker's cache): the digest of everything
 * before the last SNAP_TRAILER_LEN bytes, which must be the trailer that
 * names the same digest. The last bytes are held back until more come, so
 * memory stays SNAP_TRAILER_LEN bytes whatever the archive's size. This
 * binds the bytes to the digest only; snapshot_restore still parses and
 * checks every entry before it creates anything. */
#include <errno.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <unistd.h>
#include <sodium.h>
#include <string.h>

#include "snapshot.h"
#include "snapshot_int.h"
#include "util.h"

_Static_assert(sizeof(((struct snapshot_hash *)0)->st) >= sizeof(struct snap_digest),
    "snapshot_hash state too small");
_Static_assert(_Alignof(struct snapshot_hash) >= _Alignof(struct snap_digest),
    "snapshot_hash state misaligned");
_Static_assert(sizeof(((struct snapshot_hash *)0)->head) == SNAP_MARK_LEN,
    "snapshot_hash head is the marker");
_Static_assert(SNAP_MARK_LEN < SNAP_TRAILER_LEN,
    "the marker is known before the first byte is hashed");
_Static_assert(sizeof(((struct snapshot_hash *)0)->tail) == SNAP_TRAILER_LEN,
    "snapshot_hash tail is the trailer");

/* here, not in snapshot.c: the control plane checks archives without
 * linking libarchive or zstd */
void
snap_trailer(unsigned char out[SNAP_TRAILER_LEN], const unsigned char digest[32])
{
	le_store(out, SNAP_TRAILER_MAGIC, 4);
	le_store(out + 4, 32, 4);
	memcpy(out + 8, digest, 32);
}

void
snap_mark(unsigned char out[SNAP_MARK_LEN])
{
	le_store(out, SNAP_MARK_MAGIC, 4);
	le_store(out + 4, 4, 4);
	le_store(out + 8, SNAP_ALG_SHA256, 4);
}

int
snap_mark_parse(const unsigned char *p, size_t n, size_t *len)
{
	*len = 0;
	if (n < 4 || le_load(p, 4) != SNAP_MARK_MAGIC)
		return SNAP_ALG_BLAKE2B;
	if (n < SNAP_MARK_LEN || le_load(p + 4, 4) != 4 || le_load(p + 8, 4) != SNAP_ALG_SHA256)
		return -EBADMSG;
	*len = SNAP_MARK_LEN;
	return SNAP_ALG_SHA256;
}

void
snap_digest_init(struct snap_digest *d, int alg)
{
	memset(d, 0, sizeof(*d));
	d->alg = alg;
	if (alg == SNAP_ALG_SHA256)
		sha256_init(&d->u.s2);
	else
		crypto_generichash_init(&d->u.b2, NULL, 0, SNAPSHOT_DIGEST_LEN);
}

void
snap_digest_update(struct snap_digest *d, const void *p, size_t n)
{
	if (d->alg == SNAP_ALG_SHA256)
		sha256_update(&d->u.s2, n, p);
	else
		crypto_generichash_update(&d->u.b2, p, n);
}

void
snap_digest_final(struct snap_digest *d, unsigned char out[32])
{
	if (d->alg == SNAP_ALG_SHA256)
		sha256_digest(&d->u.s2, SHA256_DIGEST_SIZE, out);
	else
		crypto_generichash_final(&d->u.b2, out, SNAPSHOT_DIGEST_LEN);
	sodium_memzero(&d->u, sizeof(d->u));
}

void
snap_delta_header(unsigned char out[SNAP_DELTA_LEN], const unsigned char base[32])
{
	le_store(out, SNAP_DELTA_MAGIC, 4);
	le_store(out + 4, 32, 4);
	memcpy(out + 8, base, 32);
}

int
snap_delta_parse(const unsigned char *p, size_t n, unsigned char base[32])
{
	if (n < SNAP_DELTA_LEN || le_load(p, 4) != SNAP_DELTA_MAGIC)
		return 0;
	if (le_load(p + 4, 4) != 32)
		return -EBADMSG;
	memcpy(base, p + 8, 32);
	return 1;
}

void
snapshot_hash_init(struct snapshot_hash *h)
{
	memset(h, 0, sizeof(*h));
	h->alg = -1;
}

static struct snap_digest *
hash_st(struct snapshot_hash *h)
{
	return (struct snap_digest *)(void *)h->st;
}

/* n body bytes: the first ones hashed name the algorithm (the marker is
 * whole by then, the trailer being longer); a bad marker hashes nothing
 * and fails the check at the end. A body shorter than the marker is
 * decided on head bytes that turn out to be the trailer's; they begin
 * with its magic, which completes no marker, so the answer is the one
 * the body alone gives (none: BLAKE2b, or the magic: refused). */
static void
hash_body(struct snapshot_hash *h, const unsigned char *p, size_t n)
{
	size_t len;

	if (h->alg == -1) {
		h->alg = snap_mark_parse(h->head, h->size < SNAP_MARK_LEN ? h->size : SNAP_MARK_LEN,
		    &len);
		if (h->alg >= 0)
			snap_digest_init(hash_st(h), h->alg);
	}
	if (h->alg >= 0)
		snap_digest_update(hash_st(h), p, n);
}

void
snapshot_hash_update(struct snapshot_hash *h, const void *p, size_t n)
{
	const unsigned char *b = p;
	size_t keep, out;

	if (h->size < SNAP_MARK_LEN)
		memcpy(h->head + h->size, b, n < SNAP_MARK_LEN - h->size ? n : SNAP_MARK_LEN - h->size);
	h->size += n;
	if (h->tail_len + n <= SNAP_TRAILER_LEN) {
		memcpy(h->tail + h->tail_len, b, n);
		h->tail_len += n;
		return;
	}
	/* of tail + b, all but the last SNAP_TRAILER_LEN bytes are body */
	out = h->tail_len + n - SNAP_TRAILER_LEN;
	if (out >= h->tail_len) {
		hash_body(h, h->tail, h->tail_len);
		hash_body(h, b, out - h->tail_len);
		memcpy(h->tail, b + (out - h->tail_len), SNAP_TRAILER_LEN);
	} else {
		hash_body(h, h->tail, out);
		keep = h->tail_len - out;
		memmove(h->tail, h->tail + out, keep);
		memcpy(h->tail + keep, b, n);
	}
	h->tail_len = SNAP_TRAILER_LEN;
}

/* the body's digest; false when it has none (a bad marker) */
static bool
hash_done(struct snapshot_hash *h, unsigned char d[SNAPSHOT_DIGEST_LEN])
{
	bool ok;

	hash_body(h, NULL, 0);
	ok = h->alg >= 0;
	if (h->alg >= 0)
		snap_digest_final(hash_st(h), d);
	else
		memset(d, 0, SNAPSHOT_DIGEST_LEN);
	h->alg = -2;    /* used up */
	return ok;
}

int
snapshot_hash_final(struct snapshot_hash *h, const char *digest,
    char got[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char d[SNAPSHOT_DIGEST_LEN], want[SNAPSHOT_DIGEST_LEN], tr[SNAP_TRAILER_LEN];
	bool have = hash_done(h, d);

	if (got != NULL)
		sodium_bin2hex(got, SNAPSHOT_DIGEST_HEX + 1, d, sizeof(d));
	if (!have || !snapshot_digest_valid(digest) || h->tail_len != SNAP_TRAILER_LEN ||
	    sodium_hex2bin(want, sizeof(want), digest, SNAPSHOT_DIGEST_HEX, NULL, NULL, NULL) != 0)
		return -EBADMSG;
	snap_trailer(tr, want);
	return sodium_memcmp(d, want, sizeof(d)) == 0 &&
	    sodium_memcmp(h->tail, tr, sizeof(tr)) == 0 ? 0 : -EBADMSG;
}

int
snapshot_hash_end(struct snapshot_hash *h, char got[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char d[SNAPSHOT_DIGEST_LEN], tr[SNAP_TRAILER_LEN];
	bool have = hash_done(h, d);

	sodium_bin2hex(got, SNAPSHOT_DIGEST_HEX + 1, d, sizeof(d));
	snap_trailer(tr, d);
	return have && h->tail_len == SNAP_TRAILER_LEN &&
	    sodium_memcmp(h->tail, tr, sizeof(tr)) == 0 ? 0 : -EBADMSG;
}

bool
snapshot_digest_valid(const char *s)
{
	size_t i;

	if (s == NULL)
		return false;
	for (i = 0; i < SNAPSHOT_DIGEST_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[i] == '\0';
}

/* ---- which archive a delta builds on (here, with the frames' parsers:
 * space-control reads it too, without the codecs) ---- */

int
snap_base_from(const unsigned char *head, size_t n, char base[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char b[32];
	size_t mark;
	int r;

	if (snap_mark_parse(head, n, &mark) < 0)
		return -EBADMSG;
	r = snap_delta_parse(head + mark, n - mark, b);

	if (r == 1)
		hex_encode(b, sizeof(b), base, SNAPSHOT_DIGEST_HEX + 1);
	return r;
}

int
snapshot_base_of(const char *store_dir, const char *digest, char base[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char head[SNAP_HEAD_MAX];
	char name[PATH_MAX];
	ssize_t n;
	int fd;

	if (!snapshot_digest_valid(digest))
		return -EINVAL;
	if (snprintf(name, sizeof(name), "%s/%s.snap", store_dir, digest) >= (int)sizeof(name))
		return -ENAMETOOLONG;
	if ((fd = open(name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	do
		n = pread(fd, head, sizeof(head), 0);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0)
		return -EIO;
	return snap_base_from(head, (size_t)n, base);
}
