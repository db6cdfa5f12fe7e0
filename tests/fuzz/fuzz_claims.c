/* libFuzzer: the strict claims decoder on arbitrary bytes. Whatever it
 * accepts must survive encode then decode unchanged. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct capability a, b;
	const char *why = NULL;
	char *json = NULL, *json2 = NULL;

	memset(&a, 0, sizeof(a));
	memset(&b, 0, sizeof(b));
	if (claims_decode(data, size, &a, &why) != 0) {
		if (why == NULL)
			abort();        /* every refusal carries a reason */
		return 0;
	}
	if (claims_encode(&a, &json) != 0)
		abort();        /* the encoder refuses nothing the decoder accepts */
	if (claims_decode(json, strlen(json), &b, &why) != 0)
		abort();
	if (memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	if (claims_encode(&b, &json2) != 0 || strcmp(json, json2) != 0)
		abort();
	free(json);
	free(json2);
	return 0;
}
