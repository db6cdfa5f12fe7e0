/* The web console's own reading of a request: consolereq.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "consolereq.h"

static bool
id_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '_';
}

int
console_node_target(const char *t, size_t n, char sbx[SPACE_ID_MAX + 1])
{
	static const char pre[] = CONSOLE_NODE_PREFIX "/v1/sandboxes/";
	size_t i, k = sizeof(pre) - 1;

	if (n <= k || memcmp(t, pre, k) != 0)
		return -EINVAL;
	for (i = 0; k + i < n && id_char(t[k + i]); i++)
		if (i >= SPACE_ID_MAX)
			return -EINVAL;
	if (i == 0 || k + i >= n || t[k + i] != '/')
		return -EINVAL;
	memcpy(sbx, t + k, i);
	sbx[i] = '\0';
	return 0;
}

/* RFC 9110 tchar */
static bool
tchar(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

int
console_protocols(const char *v, size_t n, char key[CONSOLE_KEY_MAX], int *nkeys, char *rest,
    size_t rest_cap)
{
	const size_t kp = sizeof(CONSOLE_KEY_PROTO) - 1;
	size_t i = 0, r = 0;

	*nkeys = 0;
	key[0] = '\0';
	if (n > (size_t)-1 / 4 || rest_cap < 2 * n + 1)
		return -EINVAL;
	rest[0] = '\0';
	for (;;) {
		size_t s, e;

		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		s = i;
		while (i < n && tchar(v[i]))
			i++;
		e = i;
		while (i < n && (v[i] == ' ' || v[i] == '\t'))
			i++;
		if (e == s || (i < n && v[i] != ','))
			return -EINVAL;         /* empty entry, or a byte not allowed */
		if (e - s >= kp && memcmp(v + s, CONSOLE_KEY_PROTO, kp) == 0) {
			size_t kl = e - s - kp;
			if (*nkeys > 0 || kl == 0 || kl >= CONSOLE_KEY_MAX)
				return -EINVAL;
			memcpy(key, v + s + kp, kl);
			key[kl] = '\0';
			(*nkeys)++;
		} else {
			if (r > 0) {
				memcpy(rest + r, ", ", 2);
				r += 2;
			}
			memcpy(rest + r, v + s, e - s);
			r += e - s;
		}
		if (i >= n)
			break;
		i++;                            /* the comma */
	}
	rest[r] = '\0';
	return 0;
}
