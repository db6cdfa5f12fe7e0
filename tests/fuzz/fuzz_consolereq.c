/* libFuzzer: the web console's reading of a request (consolereq.h) on
 * arbitrary bytes, as space-edge reads them from the public. The first
 * byte picks: even, a node-api target; odd, a Sec-WebSocket-Protocol
 * value. Invariants: an accepted target names a valid id found at its
 * place; an accepted list gives at most one key, of allowed bytes, and a
 * rest no longer than its buffer whose entries are all in the input. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "consolereq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data + 1;
	char sbx[SPACE_ID_MAX + 1], key[CONSOLE_KEY_MAX], *rest;
	size_t n, i;
	int nkeys;

	if (size < 1)
		return 0;
	n = size - 1;
	if ((data[0] & 1) == 0) {
		if (console_node_target(p, n, sbx) != 0)
			return 0;
		i = strlen(sbx);
		if (i == 0 || i > SPACE_ID_MAX || n < 19 + i + 1 || memcmp(p + 19, sbx, i) != 0 ||
		    p[19 + i] != '/')
			abort();
		return 0;
	}
	if ((rest = malloc(2 * n + 1)) == NULL)
		return 0;
	if (console_protocols(p, n, key, &nkeys, rest, 2 * n + 1) == 0) {
		size_t kl = strlen(key);
		if (nkeys < 0 || nkeys > 1 || (nkeys == 1) != (kl > 0) || kl >= CONSOLE_KEY_MAX ||
		    strlen(rest) > 2 * n)
			abort();
		for (i = 0; i < kl; i++)
			if (key[i] == ',' || key[i] == ' ' || (unsigned char)key[i] < 0x21 ||
			    (unsigned char)key[i] > 0x7e)
				abort();
		if (kl && memmem(p, n, key, kl) == NULL)
			abort();
	}
	free(rest);
	return 0;
}
