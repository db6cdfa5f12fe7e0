/* libFuzzer: `space mcp`'s message decoder (jsonrpc.c) on arbitrary bytes,
 * as they arrive on its stdin, and the tool-argument schema check
 * (jschema.c) on whatever params such a message carries. Whatever the
 * decoder accepts must be a well-formed message and survive being written
 * as one line and decoded again; every refusal carries a reason and one of
 * the JSON-RPC codes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jschema.h"
#include "jsonrpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* every keyword jschema understands, as the tool schemas use them */
static const char schema_text[] = "{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"sandbox\"],\"properties\":{"
    "\"sandbox\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_-]{1,64}$\"},"
    "\"argv\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":4,\"items\":{\"type\":\"string\"}},"
    "\"timeout\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,\"maximum\":3600},"
    "\"encoding\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"]},"
    "\"cwd\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":16},"
    "\"wait\":{\"type\":\"boolean\"},"
    "\"env\":{\"type\":\"object\",\"maxProperties\":4,\"additionalProperties\":{\"type\":\"string\"}}}}";

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static json_t *schema;
	struct jrpc_msg m, m2;
	const char *why = NULL;
	json_t *id = NULL, *id2 = NULL;
	char err[256], *line;
	size_t len;
	int r;

	if (schema == NULL && (schema = json_loads(schema_text, 0, NULL)) == NULL)
		abort();
	r = jrpc_decode((const char *)data, size, &m, &why, &id);
	if (r != 0) {
		if (why == NULL || (r != JRPC_PARSE_ERROR && r != JRPC_INVALID_REQUEST))
			abort();
		if (id != NULL && !json_is_string(id) && !json_is_integer(id))
			abort();        /* an error answer's id is usable or null */
		json_decref(id);
		return 0;
	}
	if (m.root == NULL || (m.kind != JRPC_RESPONSE && m.method == NULL) ||
	    (m.kind == JRPC_NOTIFICATION) != (m.id == NULL))
		abort();
	if (m.params != NULL && !json_is_object(m.params) && !json_is_array(m.params))
		abort();
	if ((line = jrpc_line(m.root, &len)) == NULL)
		abort();
	/* one line: the newline last and nowhere else */
	if (line[len - 1] != '\n' || memchr(line, '\n', len - 1) != NULL)
		abort();
	if (jrpc_decode(line, len - 1, &m2, &why, &id2) != 0 || m2.kind != m.kind ||
	    !json_equal(m2.root, m.root))
		abort();
	free(line);
	jrpc_msg_clear(&m2);
	if (m.params != NULL) {
		err[0] = '\0';
		if (jschema_check(schema, m.params, err, sizeof(err)) != 0 && err[0] == '\0')
			abort();        /* a refusal says why */
		if (json_is_object(m.params) && json_object_get(m.params, "arguments") != NULL)
			(void)jschema_check(schema, json_object_get(m.params, "arguments"), err,
			    sizeof(err));
	}
	jrpc_msg_clear(&m);
	return 0;
}
