/* Connect RPC envelopes and strict JSON messages (connectrpc.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "connectrpc.h"

int
connect_env_decode(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *mlen,
    const char **why)
{
	size_t n;

	if (buf == NULL || len < CONNECT_ENV_HDR) {
		*why = "truncated envelope";
		return -EINVAL;
	}
	if (buf[0] & CONNECT_FLAG_COMPRESSED) {
		*why = "compressed messages are not accepted";
		return -EINVAL;
	}
	if (buf[0] != 0) {
		*why = "unexpected envelope flags";
		return -EINVAL;
	}
	n = ((size_t)buf[1] << 24) | ((size_t)buf[2] << 16) | ((size_t)buf[3] << 8) | buf[4];
	if (n > CONNECT_MSG_MAX) {
		*why = "message too large";
		return -EINVAL;
	}
	if (n != len - CONNECT_ENV_HDR) {
		*why = "the envelope's length does not match the body (one message expected)";
		return -EINVAL;
	}
	*msg = buf + CONNECT_ENV_HDR;
	*mlen = n;
	return 0;
}

int
connect_env_encode(uint8_t flags, const char *json, size_t n, uint8_t **out, size_t *outlen)
{
	uint8_t *b;

	if (n > CONNECT_MSG_MAX)
		return -EMSGSIZE;
	if ((b = malloc(CONNECT_ENV_HDR + n)) == NULL)
		return -ENOMEM;
	b[0] = flags;
	b[1] = (uint8_t)(n >> 24);
	b[2] = (uint8_t)(n >> 16);
	b[3] = (uint8_t)(n >> 8);
	b[4] = (uint8_t)n;
	if (n)
		memcpy(b + CONNECT_ENV_HDR, json, n);
	*out = b;
	*outlen = CONNECT_ENV_HDR + n;
	return 0;
}

json_t *
connect_json_object(const void *buf, size_t len, const char *const *keys, const char **why)
{
	json_error_t err;
	const char *k;
	json_t *o, *v;
	size_t i;

	if (len == 0) {
		*why = "empty message";
		return NULL;
	}
	if (len > CONNECT_MSG_MAX) {
		*why = "message too large";
		return NULL;
	}
	if ((o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err)) == NULL) {
		*why = "malformed JSON (or a duplicate key)";
		return NULL;
	}
	if (!json_is_object(o)) {
		json_decref(o);
		*why = "the message must be a JSON object";
		return NULL;
	}
	if (keys) {
		json_object_foreach(o, k, v) {
			for (i = 0; keys[i]; i++)
				if (strcmp(keys[i], k) == 0)
					break;
			if (keys[i] == NULL) {
				json_decref(o);
				*why = "unknown field";
				return NULL;
			}
		}
	}
	return o;
}
