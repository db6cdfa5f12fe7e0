/* The claim a kept prepared bridge reads on its stdin (poolclaim.h), on
 * arbitrary bytes. Invariants: whatever decodes re-encodes to exactly the
 * input (one encoding per claim: nothing ignored or left over), and every
 * field handed over is in the range spaced-host takes on its command line:
 * ids valid, paths absolute, numbers within their bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "poolclaim.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_id(const char *s, size_t cap)
{
	size_t l = strnlen(s, cap);

	if (l == 0 || l == cap || !id_valid(s))
		abort();
}

static void
check_path(const char *s, size_t cap)
{
	size_t l = strnlen(s, cap);

	if (l == cap || s[0] != '/' || strchr(s, '\n') != NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct pool_claim c;
	static uint8_t out[POOLCLAIM_MAX];
	const char *why;
	int n;

	if (poolclaim_decode(data, size, &c, &why) != 0)
		return 0;
	check_id(c.id.sandbox, sizeof(c.id.sandbox));
	check_id(c.id.worker, sizeof(c.id.worker));
	check_id(c.id.resident, sizeof(c.id.resident));
	check_id(c.id.substrate, sizeof(c.id.substrate));
	check_id(c.claim_from, sizeof(c.claim_from));
	check_path(c.run_dir, sizeof(c.run_dir));
	check_path(c.layer_dir, sizeof(c.layer_dir));
	check_path(c.netns, sizeof(c.netns));
	if (c.id.generation < 1 || c.id.generation > INT64_MAX || c.id.activation < 1 ||
	    c.uid_base < 65536 || c.memory_mb < 16 || c.pids < 8 || c.cpu_percent < 1 ||
	    c.disk_mb < 16)
		abort();
	n = poolclaim_encode(&c, out, sizeof(out));
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		abort();
	return 0;
}
