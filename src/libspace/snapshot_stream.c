/* An archive checked while its bytes arrive (an upload to the control
 * plane, a download to a worker's cache): the BLAKE2b-256 of everything
 * before the last SNAP_TRAILER_LEN bytes, which must be the trailer that
 * names the same digest. The last bytes are held back until more come, so
 * memory stays SNAP_TRAILER_LEN bytes whatever the archive's size. This
 * binds the bytes to the digest only; snapshot_restore still parses and
 * checks every entry before it creates anything. */
#include <errno.h>
#include <sodium.h>
#include <string.h>

#include "snapshot.h"
#include "snapshot_int.h"

_Static_assert(sizeof(((struct snapshot_hash *)0)->st) >= sizeof(crypto_generichash_state),
    "snapshot_hash state too small");
_Static_assert(sizeof(((struct snapshot_hash *)0)->tail) == SNAP_TRAILER_LEN,
    "snapshot_hash tail is the trailer");

/* here, not in snapshot.c: the control plane checks archives without
 * linking libarchive or zstd */
void
snap_trailer(unsigned char out[SNAP_TRAILER_LEN], const unsigned char digest[32])
{
	uint32_t m = SNAP_TRAILER_MAGIC, n = 32;

	for (int i = 0; i < 4; i++) {
		out[i] = (unsigned char)(m >> (8 * i));
		out[4 + i] = (unsigned char)(n >> (8 * i));
	}
	memcpy(out + 8, digest, 32);
}

void
snap_delta_header(unsigned char out[SNAP_DELTA_LEN], const unsigned char base[32])
{
	snap_trailer(out, base);
	for (int i = 0; i < 4; i++)
		out[i] = (unsigned char)(SNAP_DELTA_MAGIC >> (8 * i));
}

int
snap_delta_parse(const unsigned char *p, size_t n, unsigned char base[32])
{
	uint32_t m = 0, len = 0;

	if (n < SNAP_DELTA_LEN)
		return 0;
	for (int i = 0; i < 4; i++) {
		m |= (uint32_t)p[i] << (8 * i);
		len |= (uint32_t)p[4 + i] << (8 * i);
	}
	if (m != SNAP_DELTA_MAGIC)
		return 0;
	if (len != 32)
		return -EBADMSG;
	memcpy(base, p + 8, 32);
	return 1;
}

void
snapshot_hash_init(struct snapshot_hash *h)
{
	memset(h, 0, sizeof(*h));
	crypto_generichash_init((crypto_generichash_state *)(void *)h->st, NULL, 0,
	    SNAPSHOT_DIGEST_LEN);
}

void
snapshot_hash_update(struct snapshot_hash *h, const void *p, size_t n)
{
	crypto_generichash_state *st = (crypto_generichash_state *)(void *)h->st;
	const unsigned char *b = p;
	size_t keep, out;

	h->size += n;
	if (h->tail_len + n <= SNAP_TRAILER_LEN) {
		memcpy(h->tail + h->tail_len, b, n);
		h->tail_len += n;
		return;
	}
	/* of tail + b, all but the last SNAP_TRAILER_LEN bytes are body */
	out = h->tail_len + n - SNAP_TRAILER_LEN;
	if (out >= h->tail_len) {
		crypto_generichash_update(st, h->tail, h->tail_len);
		crypto_generichash_update(st, b, out - h->tail_len);
		memcpy(h->tail, b + (out - h->tail_len), SNAP_TRAILER_LEN);
	} else {
		crypto_generichash_update(st, h->tail, out);
		keep = h->tail_len - out;
		memmove(h->tail, h->tail + out, keep);
		memcpy(h->tail + keep, b, n);
	}
	h->tail_len = SNAP_TRAILER_LEN;
}

int
snapshot_hash_final(struct snapshot_hash *h, const char *digest,
    char got[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char d[SNAPSHOT_DIGEST_LEN], want[SNAPSHOT_DIGEST_LEN], tr[SNAP_TRAILER_LEN];
	int ok;

	crypto_generichash_final((crypto_generichash_state *)(void *)h->st, d, sizeof(d));
	if (got != NULL)
		sodium_bin2hex(got, SNAPSHOT_DIGEST_HEX + 1, d, sizeof(d));
	if (!snapshot_digest_valid(digest) || h->tail_len != SNAP_TRAILER_LEN ||
	    sodium_hex2bin(want, sizeof(want), digest, SNAPSHOT_DIGEST_HEX, NULL, NULL, NULL) != 0)
		return -EBADMSG;
	snap_trailer(tr, want);
	ok = sodium_memcmp(d, want, sizeof(d)) == 0 && sodium_memcmp(h->tail, tr, sizeof(tr)) == 0;
	sodium_memzero(h->st, sizeof(h->st));
	return ok ? 0 : -EBADMSG;
}

int
snapshot_hash_end(struct snapshot_hash *h, char got[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char d[SNAPSHOT_DIGEST_LEN], tr[SNAP_TRAILER_LEN];
	int ok;

	crypto_generichash_final((crypto_generichash_state *)(void *)h->st, d, sizeof(d));
	sodium_bin2hex(got, SNAPSHOT_DIGEST_HEX + 1, d, sizeof(d));
	snap_trailer(tr, d);
	ok = h->tail_len == SNAP_TRAILER_LEN && sodium_memcmp(h->tail, tr, sizeof(tr)) == 0;
	sodium_memzero(h->st, sizeof(h->st));
	return ok ? 0 : -EBADMSG;
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
