/* Connect RPC envelopes and strict JSON messages (connectrpc.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "connectrpc.h"
#include "tap.h"

static int
dec(const void *b, size_t n)
{
	const uint8_t *m = NULL;
	const char *why = NULL;
	size_t ml = 0;
	int rc = connect_env_decode(b, n, &m, &ml, &why);

	if (rc != 0 && why == NULL)
		return -1000;
	if (rc == 0 && (m != (const uint8_t *)b + 5 || ml != n - 5))
		return -2000;
	return rc;
}

static json_t *
obj(const char *s, const char *const *keys)
{
	const char *why = NULL;
	json_t *o = connect_json_object(s, strlen(s), keys, &why);

	if (o == NULL && why == NULL)
		abort();
	return o;
}

int
main(void)
{
	static const char *const keys[] = { "path", "depth", NULL };
	uint8_t *e = NULL;
	size_t n = 0;
	json_t *o;

	is_int(connect_env_encode(0, "{\"path\":\"/\"}", 12, &e, &n), 0, "encode one envelope");
	is_int((long long)n, 17, "five bytes of header");
	ok(e[0] == 0 && e[1] == 0 && e[2] == 0 && e[3] == 0 && e[4] == 12, "big-endian length");
	is_int(dec(e, n), 0, "decode what was encoded");
	is_int(dec(e, n - 1), -EINVAL, "a truncated message is refused");
	is_int(dec(e, 4), -EINVAL, "a truncated header is refused");
	is_int(dec(NULL, 0), -EINVAL, "nothing is refused");
	e[0] = CONNECT_FLAG_COMPRESSED;
	is_int(dec(e, n), -EINVAL, "a compressed message is refused");
	e[0] = CONNECT_FLAG_END;
	is_int(dec(e, n), -EINVAL, "an end-of-stream envelope as a request is refused");
	free(e);
	{
		uint8_t two[10] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
		is_int(dec(two, sizeof(two)), -EINVAL, "two envelopes in one body are refused");
		is_int(dec(two, 5), 0, "one empty message decodes (its JSON is then refused)");
	}
	{
		uint8_t big[5] = { 0, 0x10, 0, 0, 1 };
		is_int(dec(big, sizeof(big)), -EINVAL, "a length over the bound is refused");
	}
	is_int(connect_env_encode(2, "x", (size_t)CONNECT_MSG_MAX + 1, &e, &n), -EMSGSIZE,
	    "encoding over the bound fails");

	ok((o = obj("{\"path\":\"/a\",\"depth\":2}", keys)) != NULL, "a message with known fields");
	json_decref(o);
	ok(obj("{\"path\":\"/a\",\"bogus\":1}", keys) == NULL, "an unknown field is refused");
	ok(obj("{\"path\":\"/a\",\"path\":\"/b\"}", keys) == NULL, "a duplicate key is refused");
	ok(obj("[1]", keys) == NULL, "an array is refused");
	ok(obj("{\"path\":\"/a\"} x", keys) == NULL, "bytes after the object are refused");
	ok(obj("{\"path\":", keys) == NULL, "truncated JSON is refused");
	ok((o = obj("{\"anything\":1}", NULL)) != NULL, "no key list: any object");
	json_decref(o);
	return done_testing();
}
