/* The jail's rendezvous message (jailkeep.h) as the guest decodes it, on
 * arbitrary bytes. Invariants: whatever decodes re-encodes to exactly the
 * input (one encoding per message), the sandbox is a valid id, generation
 * and activation are in range. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "jailkeep.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jailkeep_attach a;
	uint8_t out[JAILKEEP_WIRE_LEN];
	const char *why;

	if (jailkeep_decode(data, size, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return 0;
	}
	if (!id_valid(a.sandbox) || a.generation == 0 || a.generation > INT64_MAX ||
	    a.activation == 0)
		abort();
	jailkeep_encode(&a, out);
	if (size != sizeof(out) || memcmp(out, data, size) != 0)
		abort();
	return 0;
}
