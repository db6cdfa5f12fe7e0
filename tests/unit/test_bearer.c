/* bearer.c: the one Authorization: Bearer parser, from the sender's side.
 * Each row is a header as the HTTP library hands it over and the answer
 * the daemons must give: the token, or the refusal. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bearer.h"
#include "limits.h"
#include "tap.h"

struct row {
	const char *hdr;
	int rc;
	const char *tok;        /* the token expected when rc == 0 */
};

static const struct row rows[] = {
	/* accepted */
	{ "Bearer abc", 0, "abc" },
	{ "bearer x", 0, "x" },                         /* scheme is case-insensitive */
	{ "BEARER  x  ", 0, "x" },                      /* 1*SP, trailing SP trimmed */
	{ "BeArEr tok\t \t", 0, "tok" },                /* trailing HTAB trimmed */
	{ "Bearer sk_AbC-_09", 0, "sk_AbC-_09" },
	{ "Bearer v4.public.QUJD.e30", 0, "v4.public.QUJD.e30" },
	{ "Bearer a+b/c~d.e-f_g", 0, "a+b/c~d.e-f_g" },  /* every b64token character */
	{ "Bearer abc=", 0, "abc=" },
	{ "Bearer abc==", 0, "abc==" },                 /* trailing '=' padding */
	/* no bearer credentials */
	{ "Bearer", -ENOENT, NULL },
	{ "Bearer ", -ENOENT, NULL },
	{ "Bearer    ", -ENOENT, NULL },
	{ "Bearer \t", -ENOENT, NULL },
	{ "", -ENOENT, NULL },
	{ "Basic x", -ENOENT, NULL },
	{ "Basic dXNlcjpwdw==", -ENOENT, NULL },
	{ "BearerKEY", -ENOENT, NULL },                 /* another scheme, not Bearer + KEY */
	{ "Bearer\tx", -ENOENT, NULL },                 /* the separator is SP, not HTAB */
	{ "Beare x", -ENOENT, NULL },
	{ " Bearer x", -ENOENT, NULL },
	{ "Bearerx y", -ENOENT, NULL },
	/* a Bearer whose token is not one b64token */
	{ "Bearer a b", -EINVAL, NULL },                /* two tokens: never half-read */
	{ "Bearer a\tb", -EINVAL, NULL },
	{ "Bearer sk_good junk", -EINVAL, NULL },
	{ "Bearer abc\r\nX-Injected: 1", -EINVAL, NULL },
	{ "Bearer abc\r", -EINVAL, NULL },              /* CR is not trailing whitespace */
	{ "Bearer abc\n", -EINVAL, NULL },
	{ "Bearer \r\nabc", -EINVAL, NULL },
	{ "Bearer ab\x01" "c", -EINVAL, NULL },
	{ "Bearer ab\x7f" "c", -EINVAL, NULL },
	{ "Bearer ab\xc3\xa9", -EINVAL, NULL },         /* non-ASCII */
	{ "Bearer \x80", -EINVAL, NULL },
	{ "Bearer a,b", -EINVAL, NULL },                /* auth-param syntax is not a bearer */
	{ "Bearer a=b", -EINVAL, NULL },                /* '=' only at the end */
	{ "Bearer =", -EINVAL, NULL },                  /* padding without a token */
	{ "Bearer ==abc", -EINVAL, NULL },
	{ "Bearer abc;def", -EINVAL, NULL },
	{ "Bearer \"abc\"", -EINVAL, NULL },
	{ "Bearer Bearer abc", -EINVAL, NULL },
};

static void
test_table(void)
{
	const char *tok;
	size_t len, i;
	int rc;

	for (i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		rc = space_bearer(rows[i].hdr, &tok, &len);
		is_int(rc, rows[i].rc, "row %zu: rc", i);
		if (rows[i].rc == 0)
			ok(tok != NULL && len == strlen(rows[i].tok) &&
			    memcmp(tok, rows[i].tok, len) == 0,
			    "row %zu: token is '%s'", i, rows[i].tok);
		else
			ok(tok == NULL && len == 0, "row %zu: no token handed out on refusal", i);
	}
}

static void
test_nul_and_null(void)
{
	/* a NUL inside a header ends the C string the daemons see: what
	 * follows it is never part of the token */
	static const char hdr[] = "Bearer abc\0 def";
	const char *tok;
	size_t len;

	is_int(space_bearer(hdr, &tok, &len), 0, "NUL: the token stops at the NUL");
	is_int((long long)len, 3, "NUL: ... length 3");
	is_int(space_bearer("Bearer \0abc", &tok, &len), -ENOENT,
	    "NUL right after the scheme: no token");
	is_int(space_bearer(NULL, &tok, &len), -ENOENT, "no header: -ENOENT");
	ok(tok == NULL && len == 0, "no header: no token");
}

static void
test_bounds(void)
{
	size_t cap = SPACE_AUTH_HEADER_MAX + 16, len;
	char *h = malloc(cap + 1);
	const char *tok;

	if (h == NULL) {
		ok(0, "malloc");
		return;
	}
	/* exactly at the limit: accepted, all of it */
	memcpy(h, "Bearer ", 7);
	memset(h + 7, 'A', SPACE_AUTH_HEADER_MAX - 7);
	h[SPACE_AUTH_HEADER_MAX] = '\0';
	is_int(space_bearer(h, &tok, &len), 0, "header of SPACE_AUTH_HEADER_MAX bytes accepted");
	is_int((long long)len, SPACE_AUTH_HEADER_MAX - 7, "... token is the rest");
	/* one byte more: refused, even though the byte is whitespace that
	 * trimming would remove */
	h[SPACE_AUTH_HEADER_MAX] = ' ';
	h[SPACE_AUTH_HEADER_MAX + 1] = '\0';
	is_int(space_bearer(h, &tok, &len), -EMSGSIZE, "one byte over the limit: -EMSGSIZE");
	ok(tok == NULL && len == 0, "... no token");
	/* far over, and a token that fills the buffer */
	memset(h + 7, 'A', cap - 7);
	h[cap] = '\0';
	is_int(space_bearer(h, &tok, &len), -EMSGSIZE, "overlong token: -EMSGSIZE");
	/* a capability-sized token fits with room for the spaces */
	memset(h + 7, 'A', SPACE_TOKEN_MAX);
	memcpy(h + 7 + SPACE_TOKEN_MAX, "   ", 4);
	is_int(space_bearer(h, &tok, &len), 0, "a SPACE_TOKEN_MAX token fits the limit");
	is_int((long long)len, SPACE_TOKEN_MAX, "... and is returned whole");
	/* an overlong header of another scheme is still "not a bearer" */
	memcpy(h, "Basic  ", 7);
	memset(h + 7, 'A', cap - 7);
	h[cap] = '\0';
	is_int(space_bearer(h, &tok, &len), -ENOENT, "overlong Basic: -ENOENT");
	free(h);
}

int
main(void)
{
	test_table();
	test_nul_and_null();
	test_bounds();
	return done_testing();
}
