/* libFuzzer: the gateway hello codec (gwhello.h) on arbitrary bytes, as a
 * netgtw listener reads them from the network. First byte even: the bytes
 * are a stream (frame parse, then the hello body); odd: the answer body
 * (what space-edge reads from a gateway). Invariants: a frame parse never
 * claims more bytes than it was given; a hello or answer the decoder
 * accepts encodes to a frame that decodes to the same; a refusal says
 * why. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gwhello.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
hello(const uint8_t *p, size_t n)
{
	struct gw_hello a, b;
	const uint8_t *body = NULL, *fb;
	size_t blen = 0, flen, fbl;
	uint8_t *f;
	const char *why = NULL;
	int rc;

	rc = gwframe_parse(p, n, &body, &blen);
	if (rc > 0 && ((size_t)rc > n || blen + GWHELLO_HDR_LEN != (size_t)rc))
		abort();
	if (rc <= 0) {
		/* the body codec alone, on the whole input */
		body = p;
		blen = n;
	}
	if (gwhello_decode(body, blen, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (gwhello_encode(&a, &f, &flen) != 0) {
		/* only a hello whose re-encoding passes the bound may fail */
		if (blen < SPACE_GWHELLO_MAX - 64)
			abort();
		return;
	}
	if (gwframe_parse(f, flen, &fb, &fbl) != (int)flen ||
	    gwhello_decode(fb, fbl, &b, &why) != 0 || a.port != b.port || a.proto != b.proto ||
	    strcmp(a.capability, b.capability) != 0)
		abort();
	free(f);
}

static void
reply(const uint8_t *p, size_t n)
{
	struct gw_reply a, b;
	const uint8_t *fb;
	size_t flen, fbl;
	uint8_t *f;
	const char *why = NULL;

	if (gwreply_decode(p, n, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (gwreply_encode(&a, &f, &flen) != 0)
		return;
	if (gwframe_parse(f, flen, &fb, &fbl) != (int)flen ||
	    gwreply_decode(fb, fbl, &b, &why) != 0 || a.ok != b.ok ||
	    strcmp(a.error, b.error) != 0 || strcmp(a.message, b.message) != 0)
		abort();
	free(f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 1)
		reply(data + 1, size - 1);
	else
		hello(data + 1, size - 1);
	return 0;
}
