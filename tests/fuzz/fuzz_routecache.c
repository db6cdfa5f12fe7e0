/* The route cache file loader on arbitrary bytes: it must never crash, and
 * whatever it accepts must re-save and re-load to the same entries and the
 * same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "routecache.h"

static int
entries_equal(const struct route_cache *a, const struct route_cache *b)
{
	size_t n = route_cache_count(a);

	if (n != route_cache_count(b))
		return 0;
	for (size_t i = 0; i < n; i++) {
		const struct route_entry *x = route_cache_entry(a, i), *y = route_cache_entry(b, i);
		if (!route_identity_equal(&x->route, &y->route) ||
		    strcmp(x->endpoint, y->endpoint) != 0 ||
		    strcmp(x->capability, y->capability) != 0 || x->access != y->access ||
		    x->cap_exp != y->cap_exp || x->cache_exp != y->cache_exp)
			return 0;
	}
	return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct route_cache *a = route_cache_new(), *b = route_cache_new();
	char *s1 = NULL, *s2 = NULL;
	size_t l1 = 0, l2 = 0;
	const char *why = NULL;

	if (a == NULL || b == NULL)
		abort();
	if (route_cache_parse(a, (const char *)data, size, &why) == 0) {
		if (why != NULL)
			abort();
		if (route_cache_serialize(a, &s1, &l1) != 0)
			abort();
		if (route_cache_parse(b, s1, l1, &why) != 0)
			abort();                /* we wrote something we refuse */
		if (!entries_equal(a, b))
			abort();
		if (route_cache_serialize(b, &s2, &l2) != 0 || l1 != l2 || memcmp(s1, s2, l1) != 0)
			abort();
	} else if (why == NULL || route_cache_count(a) != 0) {
		abort();                        /* a refusal gives a reason, loads nothing */
	}
	free(s1);
	free(s2);
	route_cache_free(a);
	route_cache_free(b);
	return 0;
}
