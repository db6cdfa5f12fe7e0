/* JSON-RPC 2.0 messages as the Model Context Protocol carries them over
 * stdio: one JSON object per line (`space mcp`, docs/mcp.md). The decoder
 * takes the untrusted bytes of one line and says what they are, or which
 * JSON-RPC error code answers them; it never needs the rest of the stream. */
#ifndef SPACE_JSONRPC_H
#define SPACE_JSONRPC_H
#include <stddef.h>
#include <jansson.h>

/* the error codes of JSON-RPC 2.0, section 5.1 */
#define JRPC_PARSE_ERROR        -32700
#define JRPC_INVALID_REQUEST    -32600
#define JRPC_METHOD_NOT_FOUND   -32601
#define JRPC_INVALID_PARAMS     -32602
#define JRPC_INTERNAL_ERROR     -32603

enum jrpc_kind {
	JRPC_REQUEST = 1,       /* method and id: answered with a result or an error */
	JRPC_NOTIFICATION,      /* method, no id: never answered */
	JRPC_RESPONSE,          /* id and result or error: an answer to us */
};

struct jrpc_msg {
	enum jrpc_kind kind;
	json_t *root;           /* the whole message (owned) */
	json_t *id;             /* borrowed from root: a string or an integer; NULL
	                           for a notification */
	const char *method;     /* borrowed: NUL-free, at most JRPC_METHOD_MAX */
	json_t *params;         /* borrowed: an object, an array, or NULL when absent */
};

#define JRPC_METHOD_MAX         128

/* Decodes one message of len bytes (the line without its newline). 0 with
 * *m filled (jrpc_msg_clear() it); otherwise the JSON-RPC error code that
 * answers it (JRPC_PARSE_ERROR for bytes that are not one JSON value,
 * JRPC_INVALID_REQUEST for JSON that is not a valid message, a batch
 * included), *why a static reason safe to send back, and *id, when the
 * message carried a usable one, a new reference to it for the error answer
 * (else NULL: the answer's id is null). Strict: duplicate keys, a NUL in a
 * string, "jsonrpc" other than "2.0", an id that is null, fractional,
 * boolean, an object or an array, a method that is not a string, params
 * that are neither an object nor an array, a response with both or neither
 * of result and error, are all refused. Members JSON-RPC does not define
 * are ignored (MCP puts none at the top level). */
int jrpc_decode(const char *buf, size_t len, struct jrpc_msg *m, const char **why,
    json_t **id);
void jrpc_msg_clear(struct jrpc_msg *m);

/* {"jsonrpc":"2.0","id":id,"result":result}: steals result; id may be NULL
 * (then null). NULL on ENOMEM. */
json_t *jrpc_result(json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":id,"error":{"code","message"}}, id NULL -> null */
json_t *jrpc_error(json_t *id, int code, const char *message);
/* {"jsonrpc":"2.0","method":method,"params":params}: steals params */
json_t *jrpc_notification(const char *method, json_t *params);
/* the message as one line, newline included (malloc'd, *len set): JSON
 * escapes every control character, so the text holds no other newline */
char *jrpc_line(const json_t *msg, size_t *len);
#endif
