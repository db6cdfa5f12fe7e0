/* libFuzzer: the Connect RPC codec of space-edge's E2B API (connectrpc.h)
 * on arbitrary bytes, as a request body arrives from the network. First
 * byte even: an envelope, then its message; odd: a message alone.
 * Invariants: a decoded envelope lies inside the input and re-encodes to
 * the same bytes; a refusal says why; an accepted message is an object
 * with only the listed keys. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "connectrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const keys[] = { "process", "pty", "tag", "stdin", NULL };
	const uint8_t *p = data + 1, *msg = NULL;
	size_t n = size ? size - 1 : 0, mlen = 0, elen = 0;
	const char *why = NULL, *k;
	uint8_t *e = NULL;
	json_t *o, *v;

	if (size == 0)
		return 0;
	if ((data[0] & 1) == 0) {
		if (connect_env_decode(p, n, &msg, &mlen, &why) != 0) {
			if (why == NULL)
				abort();
			return 0;
		}
		if (msg < p || msg + mlen > p + n)
			abort();
		if (connect_env_encode(0, (const char *)msg, mlen, &e, &elen) != 0 || elen != n ||
		    memcmp(e, p, n) != 0)
			abort();
		free(e);
	} else {
		msg = p;
		mlen = n;
	}
	why = NULL;
	if ((o = connect_json_object(msg, mlen, keys, &why)) == NULL) {
		if (why == NULL)
			abort();
		return 0;
	}
	if (!json_is_object(o))
		abort();
	json_object_foreach(o, k, v) {
		size_t i;
		for (i = 0; keys[i] && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			abort();
	}
	json_decref(o);
	return 0;
}
