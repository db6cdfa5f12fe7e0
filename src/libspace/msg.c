/* The payload codec (msg.h): one strict decoder and one encoder per
 * message. The bytes come from another process that we treat as hostile,
 * so each decoder takes exactly one shape and says why it refused any
 * other; the encoders check the same rules, so what one hop writes the
 * next one reads. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "msg.h"
#include "util.h"

/* ---- shared rules ---- */

struct member {
	const char *name;
	bool required;
};

/* a JSON object, duplicate keys refused; jansson also refuses anything
 * after the value and a NUL inside a string (no JSON_ALLOW_NUL) */
static json_t *
load_object(const void *buf, size_t len, const char **why)
{
	json_error_t e;
	json_t *o;

	if (buf == NULL || len == 0) {
		*why = "empty payload";
		return NULL;
	}
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &e);
	if (o == NULL) {
		*why = json_error_code(&e) == json_error_duplicate_key ? "duplicate key" :
		    "not valid JSON";
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		*why = "not a JSON object";
		return NULL;
	}
	return o;
}

/* every member of o is one of mem[], and every required one is there:
 * a member we do not know may be a request we would fail to honour */
static int
members_exact(json_t *o, const struct member *mem, size_t n, const char **why)
{
	const char *k;
	json_t *v;
	size_t i, found = 0, required = 0;

	json_object_foreach(o, k, v) {
		for (i = 0; i < n; i++)
			if (strcmp(k, mem[i].name) == 0)
				break;
		if (i == n) {
			*why = "unknown member";
			return -EINVAL;
		}
		if (mem[i].required)
			found++;
	}
	for (i = 0; i < n; i++)
		if (mem[i].required)
			required++;
	if (found != required) {
		*why = "missing member";
		return -EINVAL;
	}
	return 0;
}

bool
msg_take_id(const json_t *v, char *dst, size_t cap)
{
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    !id_valid(json_string_value(v)))
		return false;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return true;
}

static bool
code_valid(const char *s)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (!((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= '0' && s[n] <= '9') || s[n] == '_'))
			return false;
	return n >= 1 && n <= SPACE_ERROR_CODE_MAX;
}

static bool
take_code(json_t *v, char dst[SPACE_ERROR_CODE_MAX + 1])
{
	if (!json_is_string(v) || json_string_length(v) > SPACE_ERROR_CODE_MAX ||
	    !code_valid(json_string_value(v)))
		return false;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return true;
}

/* an integer lo..hi (json_int_t: at most 2^63-1) */
static bool
take_int(json_t *v, json_int_t lo, json_int_t hi, json_int_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < lo || i > hi)
		return false;
	*out = i;
	return true;
}

/* exactly n bytes of base64url */
static bool
take_b64(json_t *v, uint8_t *dst, size_t n)
{
	if (!json_is_string(v) || json_string_length(v) != b64url_encoded_len(n))
		return false;
	return b64url_decode(json_string_value(v), json_string_length(v), dst, n) == (ssize_t)n;
}

static int
dump(json_t *o, size_t max, char **out, size_t *out_len)
{
	char *s;
	size_t n;

	*out = NULL;
	if (out_len)
		*out_len = 0;
	if (o == NULL)
		return -ENOMEM;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return -ENOMEM;
	n = strlen(s);
	if (n > max) {
		msg_wipe_free(s);
		return -EMSGSIZE;
	}
	*out = s;
	if (out_len)
		*out_len = n;
	return 0;
}

void
msg_wipe_free(char *s)
{
	if (s == NULL)
		return;
	sodium_memzero(s, strlen(s));
	free(s);
}

/* json_object_set_new that owns v even on failure; false on failure */
static bool
put(json_t *o, const char *k, json_t *v)
{
	return v != NULL && json_object_set_new(o, k, v) == 0;
}

/* ---- the claims as an object ---- */

/* The claims object inside a REQUEST, through claims_decode (the one claims
 * grammar). Its compact dump keeps the members in document order, numbers
 * as jansson read them: an integer prints as written, a real keeps its
 * fraction or exponent and is refused as not an integer. jansson reads
 * integers up to 2^63-1, the bound of a generation on this wire (as in
 * every route identity). */
static int
claims_of(json_t *v, struct capability *cap, const char **why)
{
	char *s;
	int r;

	if ((s = json_dumps(v, JSON_COMPACT)) == NULL) {
		*why = "out of memory";
		return -ENOMEM;
	}
	if (strlen(s) > SPACE_CLAIMS_MAX) {
		free(s);
		*why = "claims too large";
		return -EACCES;
	}
	r = claims_decode(s, strlen(s), cap, why);
	free(s);
	return r < 0 ? -EACCES : 0;
}

static json_t *
claims_object(const struct capability *cap)
{
	char *s = NULL;
	json_t *o;

	if (claims_encode(cap, &s) != 0)
		return NULL;
	/* a generation above 2^63-1 does not load: refused here as the
	 * decoder would refuse it */
	o = json_loads(s, JSON_REJECT_DUPLICATES, NULL);
	free(s);
	return o;
}

/* ---- REQUEST ---- */

int
msg_request_decode(const void *buf, size_t len, enum msg_form form,
    struct msg_request *out, const char **why)
{
	const struct member mem[] = {
		{ "op", true },
		{ "sandbox", form != MSG_FORM_GUEST },
		{ "token", form == MSG_FORM_TOKEN },
		{ "claims", form == MSG_FORM_CLAIMS },
		{ "args", true },
	};
	json_t *o, *v;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (form != MSG_FORM_TOKEN && form != MSG_FORM_CLAIMS && form != MSG_FORM_GUEST) {
		*why = "no such REQUEST form";
		return -EINVAL;
	}
	if ((o = load_object(buf, len, why)) == NULL)
		return -EINVAL;
	/* the members of the other forms are unknown here */
	if ((form != MSG_FORM_TOKEN && json_object_get(o, "token") != NULL) ||
	    (form != MSG_FORM_CLAIMS && json_object_get(o, "claims") != NULL) ||
	    (form == MSG_FORM_GUEST && json_object_get(o, "sandbox") != NULL)) {
		*why = "unknown member";
		goto out;
	}
	if (members_exact(o, mem, sizeof(mem) / sizeof(mem[0]), why) < 0)
		goto out;
	v = json_object_get(o, "op");
	if (!json_is_string(v) || json_string_length(v) > SPACE_OP_NAME_MAX ||
	    op_parse(json_string_value(v), &out->op) != 0) {
		*why = "unknown op";
		goto out;
	}
	if (form != MSG_FORM_GUEST &&
	    !msg_take_id(json_object_get(o, "sandbox"), out->sandbox, sizeof(out->sandbox))) {
		*why = "sandbox is not a valid id";
		goto out;
	}
	if (!json_is_object(v = json_object_get(o, "args"))) {
		*why = "args must be an object";
		goto out;
	}
	if (!msg_json_depth_ok(v, SPACE_ARGS_DEPTH_MAX)) {
		*why = "args nest deeper than SPACE_ARGS_DEPTH_MAX";
		goto out;
	}
	if (form == MSG_FORM_TOKEN) {
		v = json_object_get(o, "token");
		if (!json_is_string(v) || json_string_length(v) == 0 ||
		    json_string_length(v) > SPACE_TOKEN_MAX) {
			*why = "token must be a string of at most SPACE_TOKEN_MAX bytes";
			goto out;
		}
		out->token_len = json_string_length(v);
		if ((out->token = malloc(out->token_len + 1)) == NULL) {
			*why = "out of memory";
			r = -ENOMEM;
			goto out;
		}
		memcpy(out->token, json_string_value(v), out->token_len + 1);
	}
	if (form == MSG_FORM_CLAIMS) {
		v = json_object_get(o, "claims");
		if (!json_is_object(v)) {
			*why = "claims must be the claims object";
			goto out;
		}
		if ((r = claims_of(v, &out->claims, why)) < 0)
			goto out;
	}
	out->args = json_incref(json_object_get(o, "args"));
	r = 0;
out:
	json_decref(o);
	if (r < 0)
		msg_request_free(out);
	return r;
}

bool
msg_json_depth_ok(const json_t *v, unsigned max)
{
	const char *k;
	json_t *e;
	size_t i;

	if (!json_is_object(v) && !json_is_array(v))
		return true;
	if (max == 0)
		return false;
	if (json_is_array(v)) {
		json_array_foreach(v, i, e)
			if (!msg_json_depth_ok(e, max - 1))
				return false;
		return true;
	}
	json_object_foreach((json_t *)v, k, e)
		if (!msg_json_depth_ok(e, max - 1))
			return false;
	return true;
}

int
msg_request_encode(const struct msg_request *m, enum msg_form form,
    char **out, size_t *out_len)
{
	const char *op = op_name(m->op);
	json_t *o;

	*out = NULL;
	if (op == NULL || !json_is_object(m->args))
		return -EINVAL;
	if (form != MSG_FORM_GUEST && !id_valid(m->sandbox))
		return -EINVAL;
	if (form == MSG_FORM_TOKEN && (m->token == NULL || m->token_len == 0 ||
	    m->token_len > SPACE_TOKEN_MAX || strlen(m->token) != m->token_len))
		return -EINVAL;
	if (form != MSG_FORM_TOKEN && form != MSG_FORM_CLAIMS && form != MSG_FORM_GUEST)
		return -EINVAL;
	if ((o = json_object()) == NULL)
		return -ENOMEM;
	if (!put(o, "op", json_string(op)) ||
	    (form != MSG_FORM_GUEST && !put(o, "sandbox", json_string(m->sandbox))) ||
	    (form == MSG_FORM_TOKEN && !put(o, "token", json_stringn(m->token, m->token_len))) ||
	    (form == MSG_FORM_CLAIMS && !put(o, "claims", claims_object(&m->claims))) ||
	    json_object_set(o, "args", m->args) != 0) {
		json_decref(o);
		return -EINVAL;
	}
	return dump(o, SPACE_FRAME_OP_MAX, out, out_len);
}

void
msg_request_free(struct msg_request *m)
{
	if (m == NULL)
		return;
	if (m->token != NULL) {
		sodium_memzero(m->token, m->token_len);
		free(m->token);
	}
	json_decref(m->args);
	sodium_memzero(&m->claims, sizeof(m->claims));
	m->token = NULL;
	m->token_len = 0;
	m->args = NULL;
}

uint32_t
msg_request_access(const struct msg_request *m)
{
	uint32_t need = op_access(m->op);
	json_t *pty;

	/* a terminal is its own access bit (DESIGN section 14): a capability
	 * for exec alone runs processes on pipes only */
	if (m->op == OP_PROC_START && m->args != NULL &&
	    (pty = json_object_get(m->args, "pty")) != NULL && !json_is_null(pty))
		need |= ACC_PTY;
	return need;
}

bool
msg_request_streams(const struct msg_request *m)
{
	switch (m->op) {
	case OP_PROC_ATTACH: case OP_FS_WATCH:
		return true;
	case OP_PROC_START:
		return m->args == NULL || !json_is_false(json_object_get(m->args, "attach"));
	default:
		return false;
	}
}

/* ---- RESPONSE ---- */

int
msg_response_decode(const void *buf, size_t len, enum msg_form form,
    struct msg_response *out, const char **why)
{
	const struct member mem[] = {
		{ "status", true },
		{ "serving", form == MSG_FORM_CLAIMS },
		{ "result", true },
	};
	json_int_t st;
	json_t *o;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if (form != MSG_FORM_CLAIMS && form != MSG_FORM_GUEST) {
		*why = "no such RESPONSE form";
		return -EINVAL;
	}
	if ((o = load_object(buf, len, why)) == NULL)
		return -EINVAL;
	/* only the bridge says which execution answered, never the guest */
	if (form == MSG_FORM_GUEST && json_object_get(o, "serving") != NULL) {
		*why = "unknown member";
		goto out;
	}
	if (members_exact(o, mem, sizeof(mem) / sizeof(mem[0]), why) < 0)
		goto out;
	if (!take_int(json_object_get(o, "status"), 200, 200, &st)) {
		*why = "status of a RESPONSE must be 200";
		goto out;
	}
	if (form == MSG_FORM_CLAIMS &&
	    route_identity_unpack(json_object_get(o, "serving"), &out->serving) != 0) {
		*why = "serving is not a route identity";
		goto out;
	}
	if (!json_is_object(json_object_get(o, "result"))) {
		*why = "result must be an object";
		goto out;
	}
	out->result = json_incref(json_object_get(o, "result"));
	r = 0;
out:
	json_decref(o);
	return r;
}

int
msg_response_encode(const struct msg_response *m, enum msg_form form,
    char **out, size_t *out_len)
{
	json_t *o;

	*out = NULL;
	if (!json_is_object(m->result) || (form != MSG_FORM_CLAIMS && form != MSG_FORM_GUEST))
		return -EINVAL;
	if ((o = json_object()) == NULL)
		return -ENOMEM;
	if (!put(o, "status", json_integer(200)) || json_object_set(o, "result", m->result) != 0 ||
	    (form == MSG_FORM_CLAIMS && !put(o, "serving", route_identity_pack(&m->serving)))) {
		json_decref(o);
		return -EINVAL;
	}
	return dump(o, SPACE_FRAME_OP_MAX, out, out_len);
}

void
msg_response_free(struct msg_response *m)
{
	if (m == NULL)
		return;
	json_decref(m->result);
	m->result = NULL;
}

/* ---- ERROR ---- */

int
msg_error_decode(const void *buf, size_t len, bool allow_serving,
    struct msg_error *out, const char **why)
{
	static const struct member mem[] = {
		{ "status", true }, { "error", true }, { "reason", false },
		{ "message", false }, { "serving", false },
	};
	json_int_t st;
	json_t *o, *v;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if ((o = load_object(buf, len, why)) == NULL)
		return -EINVAL;
	if (!allow_serving && json_object_get(o, "serving") != NULL) {
		*why = "unknown member";
		goto out;
	}
	if (members_exact(o, mem, sizeof(mem) / sizeof(mem[0]), why) < 0)
		goto out;
	if (!take_int(json_object_get(o, "status"), 400, 599, &st)) {
		*why = "status of an ERROR must be 400..599";
		goto out;
	}
	out->status = (int)st;
	if (!take_code(json_object_get(o, "error"), out->error)) {
		*why = "error is not a code";
		goto out;
	}
	if ((v = json_object_get(o, "reason")) != NULL && !take_code(v, out->reason)) {
		*why = "reason is not a code";
		goto out;
	}
	if ((v = json_object_get(o, "message")) != NULL) {
		if (!json_is_string(v) || json_string_length(v) > SPACE_ERROR_MESSAGE_MAX) {
			*why = "message must be a string of at most SPACE_ERROR_MESSAGE_MAX bytes";
			goto out;
		}
		memcpy(out->message, json_string_value(v), json_string_length(v) + 1);
		out->has_message = true;
	}
	if ((v = json_object_get(o, "serving")) != NULL) {
		if (route_identity_unpack(v, &out->serving) != 0) {
			*why = "serving is not a route identity";
			goto out;
		}
		out->has_serving = true;
	}
	r = 0;
out:
	json_decref(o);
	return r;
}

int
msg_error_encode(const struct msg_error *m, char **out, size_t *out_len)
{
	json_t *o;

	*out = NULL;
	if (m->status < 400 || m->status > 599 || !code_valid(m->error) ||
	    (m->reason[0] != '\0' && !code_valid(m->reason)) ||
	    (m->has_message && strnlen(m->message, sizeof(m->message)) > SPACE_ERROR_MESSAGE_MAX))
		return -EINVAL;
	if ((o = json_object()) == NULL)
		return -ENOMEM;
	if (!put(o, "status", json_integer(m->status)) || !put(o, "error", json_string(m->error)) ||
	    (m->reason[0] != '\0' && !put(o, "reason", json_string(m->reason))) ||
	    /* json_string refuses text that is not UTF-8 */
	    (m->has_message && !put(o, "message", json_string(m->message))) ||
	    (m->has_serving && !put(o, "serving", route_identity_pack(&m->serving)))) {
		json_decref(o);
		return -EINVAL;
	}
	return dump(o, SPACE_FRAME_JSON_MAX, out, out_len);
}

/* the longest prefix of s of at most max bytes that ends on a UTF-8
 * character boundary */
static size_t
utf8_cut(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n <= max)
		return n;
	n = max;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

int
frame_write_error(int fd, int status, const char *code, const char *reason,
    const char *message)
{
	struct msg_error m;
	char *s = NULL;
	size_t n;
	int r;

	memset(&m, 0, sizeof(m));
	m.status = status;
	if (code == NULL || strlen(code) > SPACE_ERROR_CODE_MAX ||
	    (reason != NULL && strlen(reason) > SPACE_ERROR_CODE_MAX))
		return -EINVAL;
	strcpy(m.error, code);
	if (reason != NULL)
		strcpy(m.reason, reason);
	if (message != NULL) {
		n = utf8_cut(message, SPACE_ERROR_MESSAGE_MAX);
		memcpy(m.message, message, n);
		m.message[n] = '\0';
		m.has_message = true;
	}
	if ((r = msg_error_encode(&m, &s, &n)) < 0)
		return r;
	r = frame_write(fd, MSG_ERROR, s, n);
	free(s);
	return r;
}

int
frame_write_refusal(int fd, struct admit_result res)
{
	struct admit_error e = admit_error_code(res);

	return frame_write_error(fd, e.status, e.code, e.reason, NULL);
}

/* ---- CHALLENGE, CHALLENGE_REPLY ---- */

int
msg_challenge_decode(const void *buf, size_t len, struct msg_challenge *out,
    const char **why)
{
	static const struct member mem[] = { { "nonce", true } };
	json_t *o;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if ((o = load_object(buf, len, why)) == NULL)
		return -EINVAL;
	if (members_exact(o, mem, 1, why) < 0)
		goto out;
	if (!take_b64(json_object_get(o, "nonce"), out->nonce, sizeof(out->nonce))) {
		*why = "nonce is not 32 bytes of base64url";
		goto out;
	}
	r = 0;
out:
	json_decref(o);
	return r;
}

int
msg_challenge_encode(const struct msg_challenge *m, char **out, size_t *out_len)
{
	char nb[64];

	*out = NULL;
	if (b64url_encode(m->nonce, sizeof(m->nonce), nb, sizeof(nb)) < 0)
		return -EINVAL;
	return dump(json_pack("{s:s}", "nonce", nb), SPACE_FRAME_JSON_MAX, out, out_len);
}

int
msg_challenge_reply_decode(const void *buf, size_t len,
    struct msg_challenge_reply *out, const char **why)
{
	static const struct member mem[] = {
		{ "sandbox", true }, { "generation", true }, { "activation", true }, { "mac", true },
	};
	json_int_t gen, act;
	json_t *o;
	int r = -EINVAL;

	memset(out, 0, sizeof(*out));
	if ((o = load_object(buf, len, why)) == NULL)
		return -EINVAL;
	if (members_exact(o, mem, sizeof(mem) / sizeof(mem[0]), why) < 0)
		goto out;
	if (!msg_take_id(json_object_get(o, "sandbox"), out->sandbox, sizeof(out->sandbox))) {
		*why = "sandbox is not a valid id";
		goto out;
	}
	if (!take_int(json_object_get(o, "generation"), 1, INT64_MAX, &gen) ||
	    !take_int(json_object_get(o, "activation"), 1, UINT32_MAX, &act)) {
		*why = "generation or activation out of range";
		goto out;
	}
	out->generation = (uint64_t)gen;
	out->activation = (uint32_t)act;
	if (!take_b64(json_object_get(o, "mac"), out->mac, sizeof(out->mac))) {
		*why = "mac is not 32 bytes of base64url";
		goto out;
	}
	r = 0;
out:
	json_decref(o);
	if (r < 0)
		sodium_memzero(out, sizeof(*out));
	return r;
}

int
msg_challenge_reply_encode(const struct msg_challenge_reply *m, char **out,
    size_t *out_len)
{
	char mb[64];
	int r;

	*out = NULL;
	if (!id_valid(m->sandbox) || m->generation < 1 || m->generation > (uint64_t)INT64_MAX ||
	    m->activation < 1)
		return -EINVAL;
	if (b64url_encode(m->mac, sizeof(m->mac), mb, sizeof(mb)) < 0)
		return -EINVAL;
	r = dump(json_pack("{s:s,s:I,s:I,s:s}", "sandbox", m->sandbox,
	    "generation", (json_int_t)m->generation, "activation", (json_int_t)m->activation,
	    "mac", mb), SPACE_FRAME_JSON_MAX, out, out_len);
	sodium_memzero(mb, sizeof(mb));
	return r;
}
