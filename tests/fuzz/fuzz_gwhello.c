/* libFuzzer: the gateway hello codec (gwhello.h) on arbitrary bytes, as a
 * netgtw listener reads them from the network. First byte's bit 1 set: a
 * check datagram as sbx-manager reads it from a gateway; else bit 0 clear:
 * the bytes are a stream (frame parse, then the hello body); set: the
 * answer body (what space-edge reads from a gateway). Invariants: a frame
 * parse never claims more bytes than it was given; a hello or answer the
 * decoder accepts encodes to a frame that decodes to the same; a refusal
 * says why. */
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

/* a datagram of the check channel, as sbx-manager reads a gateway's: a
 * parse that accepts names a body inside the input, within the bound, and
 * a number that is not 0; its header written again is the input's */
static void
check(const uint8_t *p, size_t n)
{
	const uint8_t *body;
	size_t blen;
	uint64_t id;
	uint8_t hdr[GWCHECK_HDR_LEN];
	struct gw_hello h;
	const char *why = NULL;

	if (gwcheck_parse(GWCHECK_ASK, p, n, &id, &body, &blen) != 0)
		return;
	if (id == 0 || body != p + GWCHECK_HDR_LEN || blen + GWCHECK_HDR_LEN != n ||
	    blen == 0 || blen > SPACE_GWHELLO_MAX)
		abort();
	gwcheck_header(hdr, GWCHECK_ASK, id);
	if (memcmp(hdr, p, GWCHECK_HDR_LEN) != 0)
		abort();
	if (gwhello_decode(body, blen, &h, &why) != 0 && why == NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size == 0)
		return 0;
	if (data[0] & 2)
		check(data + 1, size - 1);
	else if (data[0] & 1)
		reply(data + 1, size - 1);
	else
		hello(data + 1, size - 1);
	return 0;
}
