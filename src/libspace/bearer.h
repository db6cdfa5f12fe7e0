/* The one parser of an HTTP Authorization header carrying a bearer
 * (RFC 7235 section 2.1, RFC 6750 section 2.1). node-api and space-control
 * both use it, so a header is accepted or refused the same way everywhere:
 *
 *   credentials = "Bearer" 1*SP b64token *( SP / HTAB )
 *   b64token    = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
 *
 * The scheme is case-insensitive. The header is the value as the HTTP
 * library hands it over (leading whitespace already gone); the token is
 * returned as a pointer into it and a length, NOT NUL-terminated.
 *
 * Returns 0, or:
 *   -ENOENT   no bearer credentials: no header, another scheme ("Basic x",
 *             "BearerX"), or "Bearer" with no token;
 *   -EMSGSIZE the header is longer than SPACE_AUTH_HEADER_MAX;
 *   -EINVAL   a Bearer whose token is malformed: whitespace inside it,
 *             control or non-ASCII bytes, characters outside b64token.
 * Callers answer 401 to all of them; a daemon that distinguishes a
 * malformed token from a missing one may answer it differently. */
#ifndef SPACE_BEARER_H
#define SPACE_BEARER_H
#include <stddef.h>

int space_bearer(const char *header, const char **tok, size_t *len);

/* Make jansson wipe every buffer it frees, in a process through which
 * bearer secrets pass as JSON (node-api, sbx-manager): its parser and its
 * string values keep copies we never see. Allocation stays malloc, so
 * json_dumps() results are still released with free(). Call once, before
 * any thread starts. */
void space_json_wipe_frees(void);
#endif
