/* libFuzzer: PASETO v4.public parsing and verification, footer peeking and
 * base64url canonicity on arbitrary input, against one fixed key. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "limits.h"
#include "paseto.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t pk[32], sk[64];

static void
setup(void)
{
	static int done;
	uint8_t seed[32];
	size_t i;

	if (done)
		return;
	if (sodium_init() < 0)
		abort();
	/* the seed corpus signs with this same seed: 00 01 02 .. 1f */
	for (i = 0; i < sizeof(seed); i++)
		seed[i] = (uint8_t)i;
	crypto_sign_seed_keypair(pk, sk, seed);
	done = 1;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *tok = (const char *)data;
	uint8_t *msg = NULL, *bin;
	char *footer = NULL, *peek = NULL, *txt;
	size_t mlen = 0;
	ssize_t n, e;
	int r, rp;

	setup();
	r = paseto_v4_verify(pk, tok, size, SPACE_TOKEN_MAX, CAPABILITY_IMPLICIT, &msg, &mlen, &footer);
	rp = paseto_v4_peek_footer(tok, size, &peek);
	if (r == 0) {
		/* a verified token is well formed: peek must agree on the footer */
		if (msg == NULL || footer == NULL || rp != 0 || strcmp(peek, footer) != 0)
			abort();
		if (msg[mlen] != '\0')
			abort();
	} else if (msg != NULL || footer != NULL)
		abort();        /* a refusal hands nothing out */
	if (rp != 0 && peek != NULL)
		abort();
	free(msg);
	free(footer);
	free(peek);

	/* base64url: whatever decodes re-encodes to the very same text (one
	 * spelling per value), and any bytes survive encode then decode */
	bin = malloc(b64url_decoded_max(size) + 1);
	txt = malloc(b64url_encoded_len(size) + 1);
	if (bin == NULL || txt == NULL)
		abort();
	n = b64url_decode(tok, size, bin, b64url_decoded_max(size) + 1);
	if (n >= 0) {
		char *back = malloc(b64url_encoded_len((size_t)n) + 1);

		if (back == NULL)
			abort();
		e = b64url_encode(bin, (size_t)n, back, b64url_encoded_len((size_t)n) + 1);
		if (e != (ssize_t)size || memcmp(back, tok, size) != 0)
			abort();
		free(back);
	}
	e = b64url_encode(data, size, txt, b64url_encoded_len(size) + 1);
	if (e < 0)
		abort();
	free(bin);
	bin = malloc(size + 1);
	if (bin == NULL)
		abort();
	n = b64url_decode(txt, (size_t)e, bin, size + 1);
	if (n != (ssize_t)size || (size && memcmp(bin, data, size) != 0))
		abort();
	free(bin);
	free(txt);
	return 0;
}
