/* JSON-RPC 2.0 decoder and builders (jsonrpc.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "jsonrpc.h"
#include "limits.h"

void
jrpc_msg_clear(struct jrpc_msg *m)
{
	json_decref(m->root);
	memset(m, 0, sizeof(*m));
}

/* JSON-RPC allows a string, a number or null; MCP narrows it: "MUST be a
 * string or integer", never null. A fractional number would not compare
 * equal to itself once printed back by every client, so it is refused. */
static int
id_ok(const json_t *id)
{
	return json_is_string(id) || json_is_integer(id);
}

static int
refuse(int code, const char *reason, const char **why, json_t *id, json_t **id_out,
    json_t *root)
{
	*why = reason;
	*id_out = id_ok(id) ? json_incref(id) : NULL;
	json_decref(root);
	return code;
}

int
jrpc_decode(const char *buf, size_t len, struct jrpc_msg *m, const char **why,
    json_t **id_out)
{
	json_t *root, *v, *id, *method, *params, *result, *error;
	json_error_t jerr;
	const char *s;

	memset(m, 0, sizeof(*m));
	*id_out = NULL;
	if (len > SPACE_MCP_LINE_MAX) {
		*why = "message too large";
		return JRPC_INVALID_REQUEST;
	}
	/* a NUL byte in the line: jansson would stop there with the length it
	 * was given anyway, but say so plainly */
	if (memchr(buf, '\0', len) != NULL) {
		*why = "parse error: NUL byte in the message";
		return JRPC_PARSE_ERROR;
	}
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (root == NULL) {
		*why = "parse error: not one JSON value";
		return JRPC_PARSE_ERROR;
	}
	if (json_is_array(root))
		return refuse(JRPC_INVALID_REQUEST, "batches are not supported", why, NULL,
		    id_out, root);
	if (!json_is_object(root))
		return refuse(JRPC_INVALID_REQUEST, "a message is a JSON object", why, NULL,
		    id_out, root);
	id = json_object_get(root, "id");
	v = json_object_get(root, "jsonrpc");
	if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0)
		return refuse(JRPC_INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\"", why, id,
		    id_out, root);
	if (id != NULL && !id_ok(id))
		return refuse(JRPC_INVALID_REQUEST, "\"id\" must be a string or an integer",
		    why, NULL, id_out, root);
	method = json_object_get(root, "method");
	params = json_object_get(root, "params");
	result = json_object_get(root, "result");
	error = json_object_get(root, "error");
	if (method != NULL) {
		if (!json_is_string(method))
			return refuse(JRPC_INVALID_REQUEST, "\"method\" must be a string", why,
			    id, id_out, root);
		s = json_string_value(method);
		if (s[0] == '\0' || json_string_length(method) > JRPC_METHOD_MAX)
			return refuse(JRPC_INVALID_REQUEST, "\"method\" is empty or too long",
			    why, id, id_out, root);
		if (params != NULL && !json_is_object(params) && !json_is_array(params))
			return refuse(JRPC_INVALID_REQUEST,
			    "\"params\" must be an object or an array", why, id, id_out, root);
		if (result != NULL || error != NULL)
			return refuse(JRPC_INVALID_REQUEST,
			    "a request carries no \"result\" or \"error\"", why, id, id_out, root);
		m->kind = id != NULL ? JRPC_REQUEST : JRPC_NOTIFICATION;
		m->method = s;
		m->params = params;
	} else {
		if (id == NULL || (result == NULL) == (error == NULL))
			return refuse(JRPC_INVALID_REQUEST, id == NULL ?
			    "no \"method\" and no \"id\"" :
			    "a response carries exactly one of \"result\" and \"error\"",
			    why, id, id_out, root);
		if (error != NULL && (!json_is_object(error) ||
		    !json_is_integer(json_object_get(error, "code"))))
			return refuse(JRPC_INVALID_REQUEST, "\"error\" without an integer code",
			    why, id, id_out, root);
		m->kind = JRPC_RESPONSE;
	}
	m->root = root;
	m->id = id;
	*why = NULL;
	return 0;
}

json_t *
jrpc_result(json_t *id, json_t *result)
{
	json_t *r;

	if (result == NULL)
		return NULL;
	r = json_pack("{s:s,s:O?,s:o}", "jsonrpc", "2.0", "id", id, "result", result);
	if (r != NULL && id == NULL)
		json_object_set_new(r, "id", json_null());
	return r;
}

json_t *
jrpc_error(json_t *id, int code, const char *message)
{
	json_t *r = json_pack("{s:s,s:O?,s:{s:i,s:s}}", "jsonrpc", "2.0", "id", id,
	    "error", "code", code, "message", message);

	if (r != NULL && id == NULL)
		json_object_set_new(r, "id", json_null());
	return r;
}

json_t *
jrpc_notification(const char *method, json_t *params)
{
	if (params == NULL)
		return NULL;
	return json_pack("{s:s,s:s,s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}

char *
jrpc_line(const json_t *msg, size_t *len)
{
	char *t = json_dumps(msg, JSON_COMPACT), *l;
	size_t n;

	if (t == NULL)
		return NULL;
	n = strlen(t);
	if ((l = realloc(t, n + 2)) == NULL) {
		free(t);
		return NULL;
	}
	l[n] = '\n';
	l[n + 1] = '\0';
	*len = n + 1;
	return l;
}
