/* MSG_STREAM payloads from a hostile peer (msg_stream.h), read in both
 * directions. Invariants: a decoded message names a kind of the direction
 * it was read in; its data lies inside the input; re-encoding it gives the
 * input back byte for byte (the codec has one encoding per message). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg_stream.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[SPACE_STREAM_PAYLOAD_MAX];
static struct msg_stream m;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	for (int d = STREAM_OUT; d <= STREAM_IN; d++) {
		const char *why = NULL;
		size_t n = 0;

		if (msg_stream_decode(data, size, (enum stream_dir)d, &m, &why) != 0) {
			if (why == NULL)
				abort();
			continue;
		}
		if (stream_kind_dir(m.kind) != (enum stream_dir)d)
			abort();
		if (m.data != NULL && (m.data < data || m.data + m.len > data + size))
			abort();
		if (msg_stream_encode(&m, out, sizeof(out), &n) != 0)
			abort();
		if (n != size || memcmp(out, data, size) != 0)
			abort();
	}
	return 0;
}
