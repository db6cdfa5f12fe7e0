/* Authorization: Bearer parsing, shared by every HTTP daemon (bearer.h).
 * Two parsers of the same header drift apart, and a header one daemon
 * reads differently from another is how an authentication check gets
 * skipped; hence one function, strict, bounded before it scans. Also
 * here: the free function that keeps bearers out of freed jansson memory. */
#include <errno.h>
#include <jansson.h>
#include <malloc.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bearer.h"
#include "limits.h"

#define SCHEME     "Bearer"
#define SCHEME_LEN (sizeof(SCHEME) - 1)

/* RFC 6750 b64token characters, the trailing '=' aside */
static bool
b64token_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~' || c == '+' || c == '/';
}

int
space_bearer(const char *header, const char **tok, size_t *len)
{
	const char *t;
	size_t hlen, n, i;

	*tok = NULL;
	*len = 0;
	if (header == NULL)
		return -ENOENT;
	/* the scheme is a token of its own: "BearerX" is another scheme, and
	 * the separator is SP only (1*SP), not HTAB */
	if (strncasecmp(header, SCHEME, SCHEME_LEN) != 0)
		return -ENOENT;
	if (header[SCHEME_LEN] != ' ' && header[SCHEME_LEN] != '\0')
		return -ENOENT;
	/* bounded before anything scans the rest: strnlen reads at most
	 * one byte past the limit */
	hlen = strnlen(header, SPACE_AUTH_HEADER_MAX + 1);
	if (hlen > SPACE_AUTH_HEADER_MAX)
		return -EMSGSIZE;
	t = header + SCHEME_LEN;
	while (*t == ' ')
		t++;
	n = hlen - (size_t)(t - header);
	/* trailing OWS is not part of the token */
	while (n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\t'))
		n--;
	if (n == 0)
		return -ENOENT;
	/* every byte is checked: a space, CR, LF, any other control byte or
	 * non-ASCII byte inside the token means the header is not one token
	 * and must not be half-read */
	for (i = 0; i < n && b64token_char((unsigned char)t[i]); i++)
		;
	if (i == 0)
		return -EINVAL;         /* "=" alone, or a token starting badly */
	while (i < n && t[i] == '=')
		i++;
	if (i != n)
		return -EINVAL;
	*tok = t;
	*len = n;
	return 0;
}

/* the whole allocation, not only what jansson asked for: what it wrote
 * lies within it, and the rest is ours to clear */
static void
free_wiped(void *p)
{
	if (p == NULL)
		return;
	sodium_memzero(p, malloc_usable_size(p));
	free(p);
}

void
space_json_wipe_frees(void)
{
	json_set_alloc_funcs(malloc, free_wiped);
}
