/* Packets of sbx-manager's control client as its parent reads them (and
 * the child reads the parent's), ctlmsg.h, on arbitrary bytes.
 * Invariants: whatever decodes re-encodes to exactly the input (one
 * encoding per message: nothing ignored, nothing left over), and every
 * field handed over is within its limit. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctlmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t out[CTL_MSG_MAX];

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctlmsg m;
	const char *why;
	uint32_t i;
	int n;

	if (ctlmsg_decode(data, size, &m, &why) != 0)
		return 0;
	if (m.type < CTL_POST || m.type >= CTL__MAX || m.result >= CTL__RESULT_MAX || m.status > 999)
		abort();
	if (m.text && (m.text_len > CTL_BODY_MAX || strlen(m.text) != m.text_len))
		abort();
	if (m.type == CTL_COLLECT) {
		if (m.count > SPACE_ARCHIVE_BATCH_MAX)
			abort();
		for (i = 0; i < m.count; i++)
			if (strlen(m.digests[i]) != CTL_DIGEST_HEX)
				abort();
	}
	if (m.type == CTL_ASSIGNMENTS && m.count > SPACE_ASSIGNMENTS_MAX)
		abort();
	if (m.type == CTL_POST && (m.path[0] != '/' || strlen(m.path) > CTL_PATH_MAX))
		abort();
	n = ctlmsg_encode(&m, out, sizeof(out));
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		abort();
	ctlmsg_clear(&m);
	return 0;
}
