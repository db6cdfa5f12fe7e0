/* The JSON text form of stream messages (stream_json.c) on arbitrary
 * text: what a WebSocket client sends node-api as a text message.
 * Invariants on every accepted message: its binary payload decodes as an
 * "in" message (msg_stream_decode), re-encodes to the same bytes, and its
 * JSON form (stream_json_of) converts back to the same payload. The
 * binary payload of the input, read as an "out" message, renders as JSON
 * without failing. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg_stream.h"
#include "stream_json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t p[SPACE_STREAM_PAYLOAD_MAX], q[SPACE_STREAM_PAYLOAD_MAX];
	struct msg_stream m;
	const char *why;
	size_t n, n2;
	char *j;

	if (stream_json_to_payload((const char *)data, size, p, sizeof(p), &n, &why) == 0) {
		if (msg_stream_decode(p, n, STREAM_IN, &m, &why) != 0)
			abort();
		if (msg_stream_encode(&m, q, sizeof(q), &n2) != 0 || n2 != n || memcmp(p, q, n) != 0)
			abort();
		if ((j = stream_json_of(&m)) == NULL)
			abort();
		if (stream_json_to_payload(j, strlen(j), q, sizeof(q), &n2, &why) != 0 ||
		    n2 != n || memcmp(p, q, n) != 0)
			abort();
		free(j);
	}
	if (msg_stream_decode(data, size, STREAM_OUT, &m, &why) == 0) {
		j = stream_json_of(&m);
		if (j == NULL)
			abort();
		free(j);
	}
	return 0;
}
