/* The Authorization: Bearer parser on arbitrary headers. Invariants: a
 * refusal hands out no token; an accepted token lies inside the header,
 * is non-empty, made only of b64token characters with '=' only at its end,
 * follows a case-insensitive "Bearer" and spaces, and parses to itself
 * again when put behind a canonical "Bearer ". */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bearer.h"
#include "limits.h"

static int
b64token_char(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~' || c == '+' || c == '/';
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *h, *again;
	const char *tok, *tok2;
	size_t len, len2, i, hlen;
	int rc;

	if ((h = malloc(size + 1)) == NULL)
		return 0;
	memcpy(h, data, size);
	h[size] = '\0';
	hlen = strlen(h);
	rc = space_bearer(h, &tok, &len);
	if (rc != 0) {
		if (tok != NULL || len != 0 || (rc != -ENOENT && rc != -EINVAL && rc != -EMSGSIZE))
			abort();
		if (rc == -EMSGSIZE && hlen <= SPACE_AUTH_HEADER_MAX)
			abort();
		free(h);
		return 0;
	}
	if (hlen > SPACE_AUTH_HEADER_MAX || len == 0 || tok < h + 7 || tok + len > h + hlen ||
	    strncasecmp(h, "Bearer ", 7) != 0)
		abort();
	for (i = 7; h + i < tok; i++)
		if (h[i] != ' ')
			abort();
	for (i = tok + len - h; i < hlen; i++)
		if (h[i] != ' ' && h[i] != '\t')
			abort();
	for (i = 0; i < len && b64token_char((unsigned char)tok[i]); i++)
		;
	if (i == 0)
		abort();
	for (; i < len; i++)
		if (tok[i] != '=')
			abort();
	if ((again = malloc(len + 8)) == NULL)
		abort();
	memcpy(again, "Bearer ", 7);
	memcpy(again + 7, tok, len);
	again[len + 7] = '\0';
	if (space_bearer(again, &tok2, &len2) != 0 || len2 != len || memcmp(tok2, tok, len) != 0)
		abort();
	free(again);
	free(h);
	return 0;
}
