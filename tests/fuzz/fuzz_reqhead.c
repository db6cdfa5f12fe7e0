/* libFuzzer: the request-head decoder of space-edge (reqhead.h) on
 * arbitrary bytes, as it reads them from the public. The first byte picks
 * what is fed (modulo 3): a head (cut at its end as the edge does); a Host
 * value against a fixed domain; a chunked body. Invariants: every field
 * the decoder hands out lies inside the input and its lines tile the head;
 * a refusal says why; a Host accepted names a port 1..65535 and a valid
 * id; the chunked scanner never claims more bytes than it was given, and
 * gives the same answer whether the bytes come at once or in two pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "reqhead.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct reqhead h;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1, *why = NULL;
	size_t n, i, off;

	if (size < 1)
		return 0;
	n = size - 1;
	if (data[0] % 3 == 2) {
		struct chunkscan a, b;
		bool da, db1 = false, db2 = false;
		ssize_t ra, r1, r2 = 0;
		size_t cut = n ? (size_t)data[0] * 7919u % (n + 1) : 0;

		chunkscan_init(&a);
		chunkscan_init(&b);
		ra = chunkscan(&a, p, n, &da);
		if (ra > (ssize_t)n || (da && ra <= 0) || (!da && ra >= 0 && (size_t)ra != n))
			abort();
		r1 = chunkscan(&b, p, cut, &db1);
		if (r1 >= 0 && !db1) {
			r2 = chunkscan(&b, p + cut, n - cut, &db2);
			if (r2 >= 0)
				r2 += (ssize_t)cut;
		} else
			r2 = r1;
		if ((ra < 0) != (r2 < 0) || (ra >= 0 && (ra != r2 || da != (db1 || db2))))
			abort();
		return 0;
	}
	if (data[0] % 3 == 0) {
		size_t end = reqhead_end(p, n < REQHEAD_MAX ? n : REQHEAD_MAX);
		if (end > n)
			abort();
		if (end == 0)
			end = n;
		if (reqhead_parse(p, end, &h, &why) != 0) {
			if (why == NULL)
				abort();
			return 0;
		}
		if (h.method != p || h.host < 0 || (size_t)h.host >= h.nf || h.nf > REQHEAD_HEADERS_MAX)
			abort();
		off = h.line_len;
		for (i = 0; i < h.nf; i++) {
			const struct reqhead_field *f = &h.f[i];
			if (f->line_off != off || f->name != p + off ||
			    f->value < p || f->value + f->value_len > p + end)
				abort();
			off += f->line_len;
		}
		if (off + 2 != end)
			abort();
	} else {
		char sbx[SPACE_ID_MAX + 1];
		uint16_t port = 0;
		if (edgehost_parse(p, n, "edge.example:8080", &port, sbx) == 1 &&
		    (port == 0 || !id_valid(sbx)))
			abort();
	}
	return 0;
}
