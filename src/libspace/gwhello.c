/* The gateway hello codec (gwhello.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "gwhello.h"

int
gwframe_header(const uint8_t hdr[GWHELLO_HDR_LEN], uint32_t *len)
{
	uint32_t l;

	if (memcmp(hdr, GWHELLO_MAGIC, 4) != 0)
		return -EINVAL;
	l = (uint32_t)hdr[4] << 24 | (uint32_t)hdr[5] << 16 | (uint32_t)hdr[6] << 8 | hdr[7];
	if (l == 0 || l > SPACE_GWHELLO_MAX)
		return -EINVAL;
	*len = l;
	return 0;
}

int
gwframe_parse(const uint8_t *buf, size_t n, const uint8_t **body, size_t *blen)
{
	uint32_t l;
	size_t i;

	/* a wrong magic is refused as soon as its first wrong byte arrived */
	for (i = 0; i < n && i < 4; i++)
		if (buf[i] != (uint8_t)GWHELLO_MAGIC[i])
			return -EINVAL;
	if (n < GWHELLO_HDR_LEN)
		return 0;
	if (gwframe_header(buf, &l) != 0)
		return -EINVAL;
	if (n - GWHELLO_HDR_LEN < l)
		return 0;
	*body = buf + GWHELLO_HDR_LEN;
	*blen = l;
	return (int)(GWHELLO_HDR_LEN + l);
}

void
gwcheck_header(uint8_t hdr[GWCHECK_HDR_LEN], const char *magic, uint64_t id)
{
	int i;

	memcpy(hdr, magic, 4);
	for (i = 0; i < 8; i++)
		hdr[4 + i] = (uint8_t)(id >> (56 - 8 * i));
}

int
gwcheck_parse(const char *magic, const uint8_t *buf, size_t n, uint64_t *id,
    const uint8_t **body, size_t *blen)
{
	uint64_t v = 0;
	int i;

	if (n <= GWCHECK_HDR_LEN || n - GWCHECK_HDR_LEN > SPACE_GWHELLO_MAX ||
	    memcmp(buf, magic, 4) != 0)
		return -EINVAL;
	for (i = 0; i < 8; i++)
		v = v << 8 | buf[4 + i];
	if (v == 0)
		return -EINVAL;
	*id = v;
	*body = buf + GWCHECK_HDR_LEN;
	*blen = n - GWCHECK_HDR_LEN;
	return 0;
}

static json_t *
load_object(const void *json, size_t len, const char **why)
{
	json_t *o;

	if (len == 0 || len > SPACE_GWHELLO_MAX) {
		*why = "bad_length";
		return NULL;
	}
	/* no JSON_ALLOW_NUL: a string with \u0000 is refused by the parser */
	o = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
	if (o == NULL) {
		*why = "bad_json";
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		*why = "not_an_object";
		return NULL;
	}
	return o;
}

int
gwhello_decode(const void *json, size_t len, struct gw_hello *out, const char **why)
{
	json_t *o, *cap, *port, *proto;
	const char *s, *p;
	size_t n;
	json_int_t v;

	memset(out, 0, sizeof(*out));
	if ((o = load_object(json, len, why)) == NULL)
		return -EINVAL;
	cap = json_object_get(o, "capability");
	port = json_object_get(o, "port");
	proto = json_object_get(o, "proto");
	if (json_object_size(o) != 3 || cap == NULL || port == NULL || proto == NULL) {
		*why = "bad_members";
		goto bad;
	}
	if (!json_is_string(cap) || (n = json_string_length(cap)) == 0 || n > SPACE_TOKEN_MAX) {
		*why = "bad_capability";
		goto bad;
	}
	s = json_string_value(cap);
	/* a token is printable ASCII; the verifier checks its grammar */
	for (p = s; *p; p++)
		if (*p <= ' ' || *p > '~') {
			*why = "bad_capability";
			goto bad;
		}
	if (!json_is_integer(port) || (v = json_integer_value(port)) < 1 || v > 65535) {
		*why = "bad_port";
		goto bad;
	}
	if (!json_is_string(proto)) {
		*why = "bad_proto";
		goto bad;
	}
	if (strcmp(json_string_value(proto), "http") == 0)
		out->proto = PROTO_HTTP;
	else if (strcmp(json_string_value(proto), "tcp") == 0)
		out->proto = PROTO_TCP;
	else {
		*why = "bad_proto";
		goto bad;
	}
	memcpy(out->capability, s, n + 1);
	out->port = (uint16_t)v;
	json_decref(o);
	return 0;
bad:
	json_decref(o);
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

static bool
code_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > SPACE_ERROR_CODE_MAX)
		return false;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
			return false;
	return true;
}

static bool
message_ok(const char *s, size_t n)
{
	size_t i;

	if (n > SPACE_ERROR_MESSAGE_MAX)
		return false;
	/* printable ASCII only: the text ends up in logs and terminals */
	for (i = 0; i < n; i++)
		if (s[i] < ' ' || s[i] > '~')
			return false;
	return true;
}

int
gwreply_decode(const void *json, size_t len, struct gw_reply *out, const char **why)
{
	json_t *o, *okv, *err, *msg;

	memset(out, 0, sizeof(*out));
	if ((o = load_object(json, len, why)) == NULL)
		return -EINVAL;
	okv = json_object_get(o, "ok");
	if (okv != NULL) {
		if (json_object_size(o) != 1 || !json_is_true(okv)) {
			*why = "bad_members";
			goto bad;
		}
		out->ok = true;
		json_decref(o);
		return 0;
	}
	err = json_object_get(o, "error");
	msg = json_object_get(o, "message");
	if (json_object_size(o) != 2 || err == NULL || msg == NULL) {
		*why = "bad_members";
		goto bad;
	}
	if (!json_is_string(err) || !code_ok(json_string_value(err))) {
		*why = "bad_error";
		goto bad;
	}
	if (!json_is_string(msg) || !message_ok(json_string_value(msg), json_string_length(msg))) {
		*why = "bad_message";
		goto bad;
	}
	strcpy(out->error, json_string_value(err));
	strcpy(out->message, json_string_value(msg));
	json_decref(o);
	return 0;
bad:
	json_decref(o);
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

static int
frame(json_t *o, uint8_t **out, size_t *outlen)
{
	char *s;
	size_t n;
	uint8_t *f;

	*out = NULL;
	*outlen = 0;
	if (o == NULL)
		return -ENOMEM;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return -ENOMEM;
	n = strlen(s);
	if (n == 0 || n > SPACE_GWHELLO_MAX) {
		free(s);
		return -EINVAL;
	}
	if ((f = malloc(GWHELLO_HDR_LEN + n)) == NULL) {
		free(s);
		return -ENOMEM;
	}
	memcpy(f, GWHELLO_MAGIC, 4);
	f[4] = (uint8_t)(n >> 24);
	f[5] = (uint8_t)(n >> 16);
	f[6] = (uint8_t)(n >> 8);
	f[7] = (uint8_t)n;
	memcpy(f + GWHELLO_HDR_LEN, s, n);
	free(s);
	*out = f;
	*outlen = GWHELLO_HDR_LEN + n;
	return 0;
}

int
gwhello_encode(const struct gw_hello *h, uint8_t **out, size_t *outlen)
{
	const char *p;
	size_t n = strnlen(h->capability, sizeof(h->capability));

	*out = NULL;
	*outlen = 0;
	if (n == 0 || n > SPACE_TOKEN_MAX || h->port == 0 ||
	    (h->proto != PROTO_HTTP && h->proto != PROTO_TCP))
		return -EINVAL;
	for (p = h->capability; *p; p++)
		if (*p <= ' ' || *p > '~')
			return -EINVAL;
	return frame(json_pack("{s:s, s:i, s:s}", "capability", h->capability,
	    "port", (int)h->port, "proto", h->proto == PROTO_HTTP ? "http" : "tcp"),
	    out, outlen);
}

int
gwreply_encode(const struct gw_reply *r, uint8_t **out, size_t *outlen)
{
	*out = NULL;
	*outlen = 0;
	if (r->ok)
		return frame(json_pack("{s:b}", "ok", 1), out, outlen);
	if (!code_ok(r->error) || !message_ok(r->message, strlen(r->message)))
		return -EINVAL;
	return frame(json_pack("{s:s, s:s}", "error", r->error, "message", r->message),
	    out, outlen);
}

int
gwreply_error(const char *code, const char *message, uint8_t **out, size_t *outlen)
{
	struct gw_reply r;

	memset(&r, 0, sizeof(r));
	if (strlen(code) >= sizeof(r.error) || strlen(message) >= sizeof(r.message))
		return -EINVAL;
	strcpy(r.error, code);
	strcpy(r.message, message);
	return gwreply_encode(&r, out, outlen);
}
