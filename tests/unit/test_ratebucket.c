/* rate_take: a burst at once, then the refill's pace */
#include "ratebucket.h"
#include "tap.h"

int
main(void)
{
	struct rate_bucket b = { 0 };
	uint64_t t = 1000000000ull;     /* 1 s, in ns */
	double wait = 0;
	int i, n = 0;

	for (i = 0; i < 10; i++)
		n += rate_take(&b, 2.0, 5.0, t, &wait);
	ok(n == 5, "a zeroed bucket gives its burst at once (%d)", n);
	ok(!rate_take(&b, 2.0, 5.0, t, &wait) && wait > 0.49 && wait <= 0.5,
	    "then none, and says half a second at 2 a second (%.3f)", wait);
	ok(!rate_take(&b, 2.0, 5.0, t + 400000000ull, &wait), "0.4 s later still none");
	ok(rate_take(&b, 2.0, 5.0, t + 500000000ull, &wait), "0.5 s later one");
	for (n = 0, i = 0; i < 20; i++)
		n += rate_take(&b, 2.0, 5.0, t + 100000000000ull, NULL);
	ok(n == 5, "a long pause refills up to the burst, no more (%d)", n);
	ok(!rate_take(&b, 2.0, 5.0, t + 99000000000ull, &wait),
	    "a clock that went back refills nothing");
	return done_testing();
}
