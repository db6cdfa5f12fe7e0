/* libFuzzer: the check of an archive's bytes as they arrive
 * (snapshot_hash, the control plane's uploads and the workers' downloads)
 * on arbitrary bytes cut into arbitrary pieces. The first input byte
 * chooses the piece size; the rest is the body.
 *
 * Oracles, besides ASan/UBSan:
 *   - the answer does not depend on how the bytes were cut (one piece or
 *     many give the same verdict and the same body digest);
 *   - the body followed by its own trailer is accepted under its digest,
 *     and refused under any other;
 *   - the body alone (no trailer of its digest) is refused under the
 *     digest its first bytes would claim;
 *   - the check without a digest (snapshot_hash_end, a streamed upload)
 *     accepts exactly what the check under the body's digest accepts,
 *     names that digest, and gives the same verdict however the bytes
 *     are cut;
 *   - the body's digest is the one its first bytes name (docs/recovery.md,
 *     computed here with libsodium, not the library's nettle): SHA-256
 *     behind the marker, BLAKE2b-256 without one, and a body that begins
 *     with the marker's magic but not a marker it knows is refused under
 *     any digest. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "snapshot.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	return sodium_init() < 0;
}

static int
check(const uint8_t *b, size_t n, size_t piece, const char *digest, char got[65])
{
	struct snapshot_hash h;
	size_t off, k;

	snapshot_hash_init(&h);
	for (off = 0; off < n; off += k) {
		k = n - off < piece ? n - off : piece;
		snapshot_hash_update(&h, b + off, k);
	}
	return snapshot_hash_final(&h, digest, got);
}

static int
check_end(const uint8_t *b, size_t n, size_t piece, char got[65])
{
	struct snapshot_hash h;
	size_t off, k;

	snapshot_hash_init(&h);
	for (off = 0; off < n; off += k) {
		k = n - off < piece ? n - off : piece;
		snapshot_hash_update(&h, b + off, k);
	}
	return snapshot_hash_end(&h, got);
}

/* 1: SHA-256 (the marker), 0: BLAKE2b-256 (none), -1: a marker it does
 * not know */
static int
format_of(const uint8_t *b, size_t n)
{
	static const uint8_t magic[4] = { 0x5C, 0x2A, 0x4D, 0x18 };
	static const uint8_t mark[12] = { 0x5C, 0x2A, 0x4D, 0x18, 4, 0, 0, 0, 1, 0, 0, 0 };

	if (n < 4 || memcmp(b, magic, 4) != 0)
		return 0;
	return n >= 12 && memcmp(b, mark, 12) == 0 ? 1 : -1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char d[32], *full;
	char hex[65], other[65], g1[65], g2[65];
	size_t piece, n;
	int a, b, fmt;

	if (size < 1)
		return 0;
	piece = (size_t)data[0] % 83 + 1;
	data++;
	n = size - 1;
	fmt = format_of(data, n);
	if (fmt == 1)
		crypto_hash_sha256(d, data, n);
	else
		crypto_generichash(d, sizeof(d), data, n, NULL, 0);
	sodium_bin2hex(hex, sizeof(hex), d, sizeof(d));
	/* the body with its trailer: accepted, however it is cut */
	if ((full = malloc(n + 40)) == NULL)
		return 0;
	memcpy(full, data, n);
	full[n] = 0x5E; full[n + 1] = 0x2A; full[n + 2] = 0x4D; full[n + 3] = 0x18;
	full[n + 4] = 32; full[n + 5] = 0; full[n + 6] = 0; full[n + 7] = 0;
	memcpy(full + n + 8, d, 32);
	a = check(full, n + 40, piece, hex, g1);
	b = check(full, n + 40, n + 40 ? n + 40 : 1, hex, g2);
	if (fmt < 0) {
		/* an unknown marker: refused, with its trailer or without,
		 * under the digest of either algorithm */
		crypto_hash_sha256(d, data, n);
		sodium_bin2hex(other, sizeof(other), d, sizeof(d));
		if (a == 0 || b == 0 || check(full, n + 40, piece, other, g1) == 0 ||
		    check_end(full, n + 40, piece, g1) == 0 || check_end(data, n, piece, g1) == 0)
			abort();
		free(full);
		return 0;
	}
	if (a != 0 || b != 0 || strcmp(g1, hex) != 0 || strcmp(g2, hex) != 0)
		abort();
	memcpy(other, hex, sizeof(other));
	other[63] = other[63] == '0' ? '1' : '0';
	if (check(full, n + 40, piece, other, g1) == 0)
		abort();
	/* no digest given: the trailer's is taken, and it is the body's */
	if (check_end(full, n + 40, piece, g1) != 0 || strcmp(g1, hex) != 0)
		abort();
	free(full);
	/* the raw bytes without a digest: accepted only where the check
	 * under the digest it names accepts them, whatever the cutting */
	a = check_end(data, n, piece, g1);
	b = check_end(data, n, 1, g2);
	if (a != b || strcmp(g1, g2) != 0)
		abort();
	if (a == 0 && (n < 40 || check(data, n, piece, g1, g2) != 0))
		abort();
	/* the raw bytes: the same verdict whichever way they are cut */
	a = check(data, n, piece, hex, g1);
	b = check(data, n, 1, hex, g2);
	if (a != b || strcmp(g1, g2) != 0)
		abort();
	return 0;
}
