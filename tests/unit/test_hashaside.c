/* hashaside.c: the hash of pieces handed to a thread is the hash of the
 * same bytes hashed in order on one thread, whatever the piece sizes and
 * however far the hash falls behind; every piece handed over before the
 * end is hashed, and a slot is never given out while its piece waits. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "hashaside.h"
#include "tap.h"

struct slow {
	crypto_hash_sha256_state s;
	long delay_ns;          /* per piece: the hash falls behind the reader */
	unsigned pieces;
};

static void
slow_update(void *h, const void *p, size_t n)
{
	struct slow *w = h;

	if (w->delay_ns > 0) {
		struct timespec ts = { 0, w->delay_ns };
		nanosleep(&ts, NULL);
	}
	crypto_hash_sha256_update(&w->s, p, n);
	w->pieces++;
}

/* len bytes of buf in pieces (0: uneven pieces up to slot), through an
 * aside of slots slots; the pieces' slot is overwritten after the put
 * only by the next piece, so a slot handed out too early would change
 * what is hashed */
static int
through(const unsigned char *buf, size_t len, size_t slot, unsigned slots, size_t piece,
    long delay_ns, unsigned char out[32], unsigned *pieces)
{
	struct slow w = { .delay_ns = delay_ns };
	struct hashaside *a;
	size_t off, n;

	crypto_hash_sha256_init(&w.s);
	if ((a = hashaside_start(slow_update, &w, slot, slots)) == NULL)
		return -1;
	for (off = 0; off < len; off += n) {
		unsigned char *p = hashaside_slot(a);

		n = piece ? piece : (off * 7919 + 13) % slot + 1;
		if (n > len - off)
			n = len - off;
		memcpy(p, buf + off, n);
		hashaside_put(a, n);
	}
	hashaside_end(a);
	crypto_hash_sha256_final(&w.s, out);
	*pieces = w.pieces;
	return 0;
}

int
main(void)
{
	size_t len = (3u << 20) + 4321;
	unsigned char *buf = malloc(len), want[32], got[32];
	unsigned pieces = 0;
	int r;

	if (sodium_init() < 0 || buf == NULL)
		return 1;
	randombytes_buf(buf, len);
	crypto_hash_sha256(want, buf, len);

	r = through(buf, len, 128u << 10, 4, 128u << 10, 0, got, &pieces);
	ok(r == 0 && memcmp(got, want, 32) == 0, "whole slots: the digest of the bytes in order");
	is_int(pieces, (len + (128u << 10) - 1) / (128u << 10), "... every piece hashed once");

	r = through(buf, len, 64u << 10, 3, 0, 0, got, &pieces);
	ok(r == 0 && memcmp(got, want, 32) == 0, "uneven pieces: the same digest (%u pieces)", pieces);

	r = through(buf, 65536, 4096, 2, 1, 0, got, &pieces);
	crypto_hash_sha256(want, buf, 65536);
	ok(r == 0 && memcmp(got, want, 32) == 0, "pieces of one byte, two slots: the same digest");

	/* the hash slower than the reader: the ring fills, the reader
	 * waits for a free slot, and the end waits for every piece */
	r = through(buf, 1u << 20, 64u << 10, 4, 64u << 10, 2000000, got, &pieces);
	crypto_hash_sha256(want, buf, 1u << 20);
	ok(r == 0 && memcmp(got, want, 32) == 0, "a slow hash: the same digest (the reader waited)");
	is_int(pieces, 16, "... and the end hashed every piece handed over");

	/* nothing handed over: the state is as initialised */
	r = through(buf, 0, 4096, 2, 4096, 0, got, &pieces);
	crypto_hash_sha256(want, buf, 0);
	ok(r == 0 && memcmp(got, want, 32) == 0 && pieces == 0, "no piece: the empty digest");

	ok(hashaside_start(slow_update, NULL, 4096, 1) == NULL, "one slot is refused (no overlap)");
	ok(hashaside_start(slow_update, NULL, 0, 4) == NULL, "slots of 0 bytes are refused");
	hashaside_end(NULL);
	ok(1, "hashaside_end(NULL) does nothing");
	free(buf);
	return done_testing();
}
