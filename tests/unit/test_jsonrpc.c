/* The JSON-RPC 2.0 decoder of `space mcp` (jsonrpc.c) and the schema
 * check of tool arguments (jschema.c). */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jschema.h"
#include "jsonrpc.h"
#include "limits.h"
#include "tap.h"

/* decode s; the code, with the id of the error answer in *id (caller
 * decrefs) */
static int
dec(const char *s, struct jrpc_msg *m, json_t **id)
{
	const char *why = NULL;
	int r = jrpc_decode(s, strlen(s), m, &why, id);

	if (r != 0 && why == NULL)
		return 12345;   /* every refusal has a reason */
	return r;
}

static void
refused(const char *s, int want, const char *what)
{
	struct jrpc_msg m;
	json_t *id = NULL;

	is_int(dec(s, &m, &id), want, "%s", what);
	json_decref(id);
}

static void
test_decode(void)
{
	struct jrpc_msg m;
	json_t *id = NULL, *msg;
	char *line;
	size_t len;

	is_int(dec("{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/list\",\"params\":{}}", &m, &id),
	    0, "a request decodes");
	ok(m.kind == JRPC_REQUEST && strcmp(m.method, "tools/list") == 0 &&
	    json_integer_value(m.id) == 7 && json_is_object(m.params), "its kind, method, id, params");
	jrpc_msg_clear(&m);
	is_int(dec("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}", &m, &id), 0,
	    "a notification decodes");
	ok(m.kind == JRPC_NOTIFICATION && m.id == NULL && m.params == NULL, "no id, no params");
	jrpc_msg_clear(&m);
	is_int(dec("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}", &m, &id), 0, "a response decodes");
	ok(m.kind == JRPC_RESPONSE, "kind response");
	jrpc_msg_clear(&m);
	is_int(dec("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"x\",\"params\":[1]}", &m, &id), 0,
	    "array params are JSON-RPC (methods that want an object refuse them)");
	jrpc_msg_clear(&m);

	refused("", JRPC_PARSE_ERROR, "empty: parse error");
	refused("{", JRPC_PARSE_ERROR, "a cut object: parse error");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"method\":\"b\"}", JRPC_PARSE_ERROR,
	    "a duplicate key: parse error");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\\u0000b\"}", JRPC_PARSE_ERROR,
	    "an escaped NUL: parse error");
	refused("{} {}", JRPC_PARSE_ERROR, "two values: parse error");
	refused("[]", JRPC_INVALID_REQUEST, "a batch: invalid request");
	refused("42", JRPC_INVALID_REQUEST, "a number: invalid request");
	refused("{\"id\":1,\"method\":\"a\"}", JRPC_INVALID_REQUEST, "no jsonrpc");
	refused("{\"jsonrpc\":\"2.1\",\"id\":1,\"method\":\"a\"}", JRPC_INVALID_REQUEST, "jsonrpc 2.1");
	refused("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"a\"}", JRPC_INVALID_REQUEST, "a null id");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"a\"}", JRPC_INVALID_REQUEST, "a real id");
	refused("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"a\"}", JRPC_INVALID_REQUEST, "a boolean id");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", JRPC_INVALID_REQUEST, "an empty method");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":1}", JRPC_INVALID_REQUEST, "a number method");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"params\":3}", JRPC_INVALID_REQUEST,
	    "scalar params");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\",\"result\":1}", JRPC_INVALID_REQUEST,
	    "a request with a result");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1}", JRPC_INVALID_REQUEST, "a response without result");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{\"code\":1}}",
	    JRPC_INVALID_REQUEST, "a response with both");
	refused("{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":\"x\"}}", JRPC_INVALID_REQUEST,
	    "an error without an integer code");

	/* the error answer keeps a usable id, drops an unusable one */
	is_int(dec("{\"jsonrpc\":\"1.0\",\"id\":\"k\",\"method\":\"a\"}", &m, &id),
	    JRPC_INVALID_REQUEST, "jsonrpc 1.0 with an id");
	is_str(json_string_value(id), "k", "the error answer has its id");
	json_decref(id);
	is_int(dec("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"a\"}", &m, &id),
	    JRPC_INVALID_REQUEST, "an array id");
	ok(id == NULL, "the error answer's id is null");

	/* one line out, newline-terminated, no other newline */
	id = json_string("x\ny");      /* borrowed by jrpc_result */
	msg = jrpc_result(id, json_pack("{s:s}", "t", "a\nb"));
	json_decref(id);
	line = jrpc_line(msg, &len);
	ok(line != NULL && line[len - 1] == '\n' && memchr(line, '\n', len - 1) == NULL,
	    "jrpc_line: one line, its newline last");
	is_int(dec(line, &m, &id), 0, "and it decodes again");
	ok(m.kind == JRPC_RESPONSE, "as a response");
	jrpc_msg_clear(&m);
	free(line);
	json_decref(msg);
	msg = jrpc_error(NULL, JRPC_METHOD_NOT_FOUND, "no");
	ok(msg && json_is_null(json_object_get(msg, "id")) &&
	    json_integer_value(json_object_get(json_object_get(msg, "error"), "code")) == -32601,
	    "jrpc_error with no id: id null, the code");
	json_decref(msg);
}

static void
test_schema(void)
{
	json_t *sc = json_loads("{\"type\":\"object\",\"additionalProperties\":false,"
	    "\"required\":[\"sandbox\"],\"properties\":{"
	    "\"sandbox\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_-]{1,64}$\"},"
	    "\"argv\":{\"type\":\"array\",\"minItems\":1,\"maxItems\":2,\"items\":{\"type\":\"string\"}},"
	    "\"n\":{\"type\":[\"integer\",\"null\"],\"minimum\":1,\"maximum\":10},"
	    "\"e\":{\"type\":\"string\",\"enum\":[\"text\",\"base64\"]},"
	    "\"s\":{\"type\":\"string\",\"maxLength\":2},"
	    "\"env\":{\"type\":\"object\",\"maxProperties\":1,\"additionalProperties\":{\"type\":\"string\"}}}}",
	    0, NULL);
	struct { const char *v; int want; const char *err; } c[] = {
		{ "{\"sandbox\":\"sbx_1\",\"argv\":[\"ls\"],\"n\":3,\"e\":\"text\",\"s\":\"\xc3\xa9\xc3\xa9\","
		  "\"env\":{\"A\":\"b\"}}", 0, "" },
		{ "{\"sandbox\":\"sbx_1\",\"n\":null}", 0, "" },
		{ "{}", -1, "sandbox: required" },
		{ "[]", -1, "want object" },
		{ "{\"sandbox\":\"../x\"}", -1, "sandbox: does not match ^[A-Za-z0-9_-]{1,64}$" },
		{ "{\"sandbox\":\"a\",\"x\":1}", -1, "x: unknown member" },
		{ "{\"sandbox\":\"a\",\"argv\":[]}", -1, "argv: too few items" },
		{ "{\"sandbox\":\"a\",\"argv\":[\"a\",\"b\",\"c\"]}", -1, "argv: too many items" },
		{ "{\"sandbox\":\"a\",\"argv\":[\"a\",1]}", -1, "argv[1]: want string" },
		{ "{\"sandbox\":\"a\",\"n\":0}", -1, "n: at least 1" },
		{ "{\"sandbox\":\"a\",\"n\":11}", -1, "n: at most 10" },
		{ "{\"sandbox\":\"a\",\"n\":1.5}", -1, "n: want another type" },
		{ "{\"sandbox\":\"a\",\"e\":\"hex\"}", -1, "e: not one of the allowed values" },
		{ "{\"sandbox\":\"a\",\"s\":\"abc\"}", -1, "s: too long" },
		{ "{\"sandbox\":\"a\",\"env\":{\"A\":1}}", -1, "env.A: want string" },
		{ "{\"sandbox\":\"a\",\"env\":{\"A\":\"1\",\"B\":\"2\"}}", -1, "env: too many members" },
	};
	char err[256];
	size_t i;

	for (i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		json_t *v = json_loads(c[i].v, JSON_DECODE_ANY, NULL);
		err[0] = '\0';
		is_int(jschema_check(sc, v, err, sizeof(err)), c[i].want, "schema: %s", c[i].v);
		if (c[i].want != 0)
			is_str(err, c[i].err, "  says why");
		json_decref(v);
	}
	json_decref(sc);
}

int
main(void)
{
	test_decode();
	test_schema();
	return done_testing();
}
