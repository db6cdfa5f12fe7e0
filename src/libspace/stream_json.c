/* The JSON text form of stream messages (stream_json.h). */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream_json.h"

#define TEXT_MAX (2 * SPACE_STREAM_PAYLOAD_MAX)

/* whether o has exactly the keys named (NULL-terminated) */
static int
only_keys(json_t *o, const char *const *keys)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(o, k, v) {
		(void)v;
		for (i = 0; keys[i]; i++)
			if (strcmp(k, keys[i]) == 0)
				break;
		if (keys[i] == NULL)
			return 0;
	}
	return 1;
}

static int
uint_in(json_t *v, json_int_t lo, json_int_t hi, json_int_t *out)
{
	if (!json_is_integer(v))
		return 0;
	*out = json_integer_value(v);
	return *out >= lo && *out <= hi;
}

int
stream_json_to_payload(const char *text, size_t len, uint8_t *out, size_t cap,
    size_t *out_len, const char **why)
{
	static const char *const k_data[] = { "type", "data", NULL };
	static const char *const k_b64[] = { "type", "data_b64", NULL };
	static const char *const k_type[] = { "type", NULL };
	static const char *const k_resize[] = { "type", "rows", "cols", NULL };
	static const char *const k_signal[] = { "type", "signo", NULL };
	struct msg_stream m;
	json_error_t je;
	json_t *o = NULL, *d;
	const char *type;
	uint8_t *bin = NULL;
	size_t blen;
	json_int_t a, b;
	int ret = -EINVAL;

	memset(&m, 0, sizeof(m));
	*why = "malformed stream message";
	if (len > TEXT_MAX) {
		*why = "stream message too large";
		return -EINVAL;
	}
	o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!json_is_object(o) || (type = json_string_value(json_object_get(o, "type"))) == NULL)
		goto out;
	if (strcmp(type, "stdin") == 0) {
		m.kind = STREAM_STDIN;
		if ((d = json_object_get(o, "data")) != NULL) {
			if (!only_keys(o, k_data) || !json_is_string(d))
				goto out;
			m.data = (const uint8_t *)json_string_value(d);
			m.len = json_string_length(d);
		} else if ((d = json_object_get(o, "data_b64")) != NULL) {
			const char *s = json_string_value(d);

			if (!only_keys(o, k_b64) || s == NULL)
				goto out;
			blen = strlen(s) / 4 * 3 + 3;
			if ((bin = malloc(blen)) == NULL) {
				ret = -ENOMEM;
				goto out;
			}
			if (sodium_base642bin(bin, blen, s, strlen(s), NULL, &blen, NULL,
			    sodium_base64_VARIANT_ORIGINAL) != 0) {
				*why = "data_b64 is not base64";
				goto out;
			}
			m.data = bin;
			m.len = blen;
		} else
			goto out;
	} else if (strcmp(type, "stdin_eof") == 0) {
		if (!only_keys(o, k_type))
			goto out;
		m.kind = STREAM_STDIN_EOF;
	} else if (strcmp(type, "resize") == 0) {
		if (!only_keys(o, k_resize) ||
		    !uint_in(json_object_get(o, "rows"), 1, SPACE_PTY_DIM_MAX, &a) ||
		    !uint_in(json_object_get(o, "cols"), 1, SPACE_PTY_DIM_MAX, &b))
			goto out;
		m.kind = STREAM_RESIZE;
		m.rows = (uint16_t)a;
		m.cols = (uint16_t)b;
	} else if (strcmp(type, "signal") == 0) {
		if (!only_keys(o, k_signal) ||
		    !uint_in(json_object_get(o, "signo"), 1, SPACE_SIGNO_MAX, &a))
			goto out;
		m.kind = STREAM_SIGNAL;
		m.signo = (uint8_t)a;
	} else {
		*why = "unknown stream message type";
		goto out;
	}
	/* the binary codec decides the rest (empty data, sizes) */
	if ((ret = msg_stream_encode(&m, out, cap, out_len)) != 0) {
		*why = "stream message out of bounds";
		ret = -EINVAL;
	}
out:
	free(bin);
	json_decref(o);
	return ret;
}

/* a path as text, or as "<key>_b64" when it is not UTF-8 (a file name
 * is bytes) */
static int
set_path(json_t *o, const char *key, const char *path)
{
	char k[16], *b;
	size_t n;
	json_t *v = json_string(path);
	int r;

	if (v != NULL)
		return json_object_set_new(o, key, v);
	n = sodium_base64_encoded_len(strlen(path), sodium_base64_VARIANT_ORIGINAL);
	if ((b = malloc(n)) == NULL)
		return -1;
	sodium_bin2base64(b, n, (const unsigned char *)path, strlen(path),
	    sodium_base64_VARIANT_ORIGINAL);
	snprintf(k, sizeof(k), "%s_b64", key);
	r = json_object_set_new(o, k, json_string(b));
	free(b);
	return r;
}

char *
stream_json_of(const struct msg_stream *m)
{
	json_t *o = NULL;
	char *s = NULL, *b64 = NULL;
	const char *k = stream_kind_str(m->kind);

	if (k == NULL)
		return NULL;
	switch (m->kind) {
	case STREAM_STDOUT: case STREAM_STDERR: case STREAM_PTY: case STREAM_STDIN:
		o = json_pack("{s:s}", "type", k);
		if (o == NULL)
			break;
		/* text when it is UTF-8 without a NUL (which JSON readers
		 * commonly refuse, jansson among them), base64 otherwise */
		if (memchr(m->data, '\0', m->len) == NULL) {
			json_t *t = json_stringn((const char *)m->data, m->len);

			if (t != NULL) {
				json_object_set_new(o, "data", t);
				break;
			}
		}
		{
			size_t n = sodium_base64_encoded_len(m->len, sodium_base64_VARIANT_ORIGINAL);

			if ((b64 = malloc(n)) == NULL)
				goto out;
			sodium_bin2base64(b64, n, m->data, m->len, sodium_base64_VARIANT_ORIGINAL);
			json_object_set_new(o, "data_b64", json_string(b64));
		}
		break;
	case STREAM_EXIT:
		o = json_pack("{s:s,s:i,s:i,s:b,s:b}", "type", k,
		    "exit_code", (int)m->exit.exit_code, "signal", (int)m->exit.signal,
		    "timed_out", m->exit.timed_out, "oom_killed", m->exit.oom_killed);
		break;
	case STREAM_EVENT:
		o = json_pack("{s:s,s:s,s:b}", "type", k,
		    "event", stream_event_str(m->event.type) ? stream_event_str(m->event.type) : "?",
		    "is_dir", m->event.is_dir);
		if (o == NULL || set_path(o, "path", m->event.path) != 0 ||
		    (m->event.type == STREAM_EV_RENAME && set_path(o, "to", m->event.to) != 0))
			goto out;
		break;
	case STREAM_RESIZE:
		o = json_pack("{s:s,s:i,s:i}", "type", k, "rows", (int)m->rows, "cols", (int)m->cols);
		break;
	case STREAM_SIGNAL:
		o = json_pack("{s:s,s:i}", "type", k, "signo", (int)m->signo);
		break;
	case STREAM_STDIN_EOF:
		o = json_pack("{s:s}", "type", k);
		break;
	default:
		break;
	}
	if (o != NULL)
		s = json_dumps(o, JSON_COMPACT);
out:
	free(b64);
	json_decref(o);
	return s;
}
