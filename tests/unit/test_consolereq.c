/* The web console's reading of a node-api target and of the
 * Sec-WebSocket-Protocol list that may carry the caller's key. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "consolereq.h"
#include "tap.h"

static int
target(const char *t, char *sbx)
{
	return console_node_target(t, strlen(t), sbx);
}

static char key[CONSOLE_KEY_MAX], rest[1024];
static int nkeys;

static int
protos(const char *v)
{
	return console_protocols(v, strlen(v), key, &nkeys, rest, sizeof(rest));
}

int
main(void)
{
	char sbx[SPACE_ID_MAX + 1], id[SPACE_ID_MAX + 2], t[256], big[CONSOLE_KEY_MAX + 32];

	is_int(target("/node/v1/sandboxes/sbx_a-B9/fs/list?path=/", sbx), 0, "a node target");
	is_str(sbx, "sbx_a-B9", "... its sandbox");
	is_int(target("/node/v1/sandboxes/s/", sbx), 0, "an empty rest is the node-api's to refuse");
	is_int(target("/node/v1/sandboxes/s", sbx), -EINVAL, "no path after the id");
	is_int(target("/node/v1/sandboxes//fs", sbx), -EINVAL, "an empty id");
	is_int(target("/node/v1/sandboxes/a.b/fs", sbx), -EINVAL, "a dot in the id");
	is_int(target("/node/v1/sandboxes/a%2fb/fs", sbx), -EINVAL, "an escaped byte in the id");
	is_int(target("/node/v1/sandboxes/a?x=/fs", sbx), -EINVAL, "a query right after the id");
	is_int(target("/node/v2/sandboxes/a/fs", sbx), -EINVAL, "another version");
	is_int(target("/nodex/v1/sandboxes/a/fs", sbx), -EINVAL, "another prefix");
	is_int(target("/node/v1/sandboxes/", sbx), -EINVAL, "the prefix alone");
	memset(id, 'a', SPACE_ID_MAX);
	id[SPACE_ID_MAX] = '\0';
	snprintf(t, sizeof(t), "/node/v1/sandboxes/%s/x", id);
	is_int(target(t, sbx), 0, "an id of SPACE_ID_MAX bytes");
	id[SPACE_ID_MAX] = 'a';
	id[SPACE_ID_MAX + 1] = '\0';
	snprintf(t, sizeof(t), "/node/v1/sandboxes/%s/x", id);
	is_int(target(t, sbx), -EINVAL, "one byte more");

	is_int(protos("space.v1.json, space-key.sk_abc-_9"), 0, "a subprotocol list with a key");
	ok(nkeys == 1 && strcmp(key, "sk_abc-_9") == 0 && strcmp(rest, "space.v1.json") == 0,
	    "... the key taken out, the rest kept");
	is_int(protos("space-key.sk_k,space.v1 ,\tspace.v1.json"), 0, "the key first, blanks around");
	is_str(rest, "space.v1, space.v1.json", "... the rest joined by \", \"");
	is_int(protos("space.v1.json"), 0, "no key");
	ok(nkeys == 0 && key[0] == '\0' && strcmp(rest, "space.v1.json") == 0, "... nothing taken");
	is_int(protos("space-key.sk_a, space-key.sk_b"), -EINVAL, "two keys");
	is_int(protos("space-key."), -EINVAL, "an empty key");
	is_int(protos("a,,b"), -EINVAL, "an empty entry");
	is_int(protos("a,"), -EINVAL, "a trailing comma");
	is_int(protos(""), -EINVAL, "an empty value");
	is_int(protos("a b"), -EINVAL, "two tokens without a comma");
	is_int(protos("space-key.sk_a\"b"), -EINVAL, "a quote");
	is_int(protos("space-key.sk_a/b"), -EINVAL, "a separator (/)");
	is_int(protos("a,\x01"), -EINVAL, "a control byte");
	memcpy(big, "space-key.", 10);
	memset(big + 10, 'k', CONSOLE_KEY_MAX - 1);
	big[10 + CONSOLE_KEY_MAX - 1] = '\0';
	is_int(protos(big), 0, "a key of CONSOLE_KEY_MAX - 1 bytes");
	big[10 + CONSOLE_KEY_MAX - 1] = 'k';
	big[10 + CONSOLE_KEY_MAX] = '\0';
	is_int(protos(big), -EINVAL, "one byte more");
	is_int(console_protocols("a,b,c", 5, key, &nkeys, rest, 10), -EINVAL, "a rest buffer too small");
	is_int(console_protocols("a,b,c", 5, key, &nkeys, rest, 11), 0, "... and large enough");
	is_str(rest, "a, b, c", "... longer than the value it came from");
	return done_testing();
}
