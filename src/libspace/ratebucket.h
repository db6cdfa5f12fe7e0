#ifndef SPACE_RATEBUCKET_H
#define SPACE_RATEBUCKET_H
#include <stdbool.h>
#include <stdint.h>

/* A token bucket: at most burst at once, refilled at per_s a second.
 * Zeroed, it is full. The caller holds whatever lock guards it. */
struct rate_bucket {
	double tokens;
	uint64_t at;            /* the now of its last use; 0: never used */
};

/* one token of b at now (nanoseconds, now_mono_ns()): true when it had
 * one; false, and *wait_s the seconds until it will, when not */
bool rate_take(struct rate_bucket *b, double per_s, double burst, uint64_t now, double *wait_s);
#endif
