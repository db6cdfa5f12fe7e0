/* Token buckets (ratebucket.h): the pace of sbx-manager's refusal lines
 * and of space-control's network changes */
#include <stddef.h>

#include "ratebucket.h"

bool
rate_take(struct rate_bucket *b, double per_s, double burst, uint64_t now, double *wait_s)
{
	if (b->at == 0)
		b->tokens = burst;
	else if (now > b->at)
		b->tokens += (double)(now - b->at) * per_s / 1e9;
	if (b->tokens > burst)
		b->tokens = burst;
	b->at = now ? now : 1;
	if (b->tokens >= 1.0) {
		b->tokens -= 1.0;
		return true;
	}
	if (wait_s != NULL)
		*wait_s = (1.0 - b->tokens) / per_s;
	return false;
}
