/* The cheap shape check of a bearer, BEFORE anything reaches sbx-manager:
 * garbage is refused here without a signature check. The signature is
 * verified once, in sbx-manager, through its cache; doing it here too would
 * double the cost of every request and decide nothing (sbx-manager is the
 * authority). A token that passes this check may still be forged. */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <string.h>

#include "node-api.h"
#include "paseto.h"
#include "util.h"

#define SIG_LEN 64

int
token_shape_check(const char *tok, size_t len, const char **why)
{
	static const size_t hl = sizeof(PASETO_V4_PUBLIC_HDR) - 1;
	unsigned char buf[SPACE_TOKEN_MAX];
	const char *body, *dot;
	size_t blen, plen;
	ssize_t n;
	json_error_t je;
	json_t *f = NULL, *kid;
	int ret = -EINVAL;

	*why = "malformed_token";
	if (len > SPACE_TOKEN_MAX || len <= hl || memcmp(tok, PASETO_V4_PUBLIC_HDR, hl) != 0)
		return -EINVAL;
	body = tok + hl;
	blen = len - hl;
	dot = memchr(body, '.', blen);
	/* a capability always carries the footer {"kid":...} */
	if (dot == NULL)
		return -EINVAL;
	plen = (size_t)(dot - body);
	if (memchr(dot + 1, '.', blen - plen - 1) != NULL)
		return -EINVAL;
	/* buf holds the decoded claims and signature: with the footer that
	 * is the whole bearer, so it is wiped on the way out */
	n = b64url_decode(body, plen, buf, sizeof(buf));
	if (n < SIG_LEN + 2)            /* signature + at least "{}" */
		goto out;
	n = b64url_decode(dot + 1, blen - plen - 1, buf, sizeof(buf));
	if (n <= 0 || (size_t)n > SPACE_FOOTER_MAX)
		goto out;
	f = json_loadb((const char *)buf, (size_t)n, JSON_REJECT_DUPLICATES, &je);
	if (f == NULL || !json_is_object(f) || (kid = json_object_get(f, "kid")) == NULL ||
	    !json_is_string(kid) || json_string_length(kid) > SPACE_KID_MAX)
		goto out;
	ret = 0;
out:
	sodium_memzero(buf, sizeof(buf));
	json_decref(f);
	return ret;
}
