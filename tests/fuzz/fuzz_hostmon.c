/* Messages of spaced-host's serving process as its monitor reads them
 * (hostmon.h), on arbitrary bytes. Invariants: whatever decodes re-encodes
 * to exactly the input (the codec has one encoding per message, so
 * nothing is ignored or left over), and every field it hands over is in
 * range: enums valid, strings NUL-terminated ids within their limits, a
 * CLAIM's identity whole (every id present, counters from 1). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "admit.h"
#include "hostmon.h"
#include "proto.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_id(const char *s, size_t cap)
{
	size_t l = strnlen(s, cap);

	if (l == cap || (l > 0 && !id_valid(s)))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct hm_msg m;
	uint8_t out[HM_MSG_MAX];
	int n;

	if (hm_decode(data, size, &m) != 0)
		return 0;
	if (m.type == HM_REFUSED) {
		const struct hm_refusal *r = &m.u.ref;
		if (r->op < 1 || r->op >= OP__MAX || r->outcome < ADMIT_DENY ||
		    r->outcome > ADMIT_REFRESH_ROUTE || r->reason >= R__COUNT)
			abort();
		check_id(r->target, sizeof(r->target));
		check_id(r->cap.sandbox, sizeof(r->cap.sandbox));
		check_id(r->cap.worker, sizeof(r->cap.worker));
		check_id(r->cap.substrate, sizeof(r->cap.substrate));
		check_id(r->cap.resident, sizeof(r->cap.resident));
		check_id(r->jti, sizeof(r->jti));
	}
	if (m.type == HM_OOM_COUNT && m.u.oom.known > 1)
		abort();
	if (m.type == HM_CLAIM) {
		const struct route_identity *id = &m.u.claim.id;
		if (id->generation < 1 || id->activation < 1 || !id->sandbox[0] ||
		    !id->worker[0] || !id->substrate[0] || !id->resident[0])
			abort();
		check_id(id->sandbox, sizeof(id->sandbox));
		check_id(id->worker, sizeof(id->worker));
		check_id(id->substrate, sizeof(id->substrate));
		check_id(id->resident, sizeof(id->resident));
	}
	n = hm_encode(&m, out, sizeof(out));
	if (n < 0 || (size_t)n != size || memcmp(out, data, size) != 0)
		abort();
	return 0;
}
