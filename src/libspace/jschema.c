/* A JSON value against a JSON Schema of a small subset (jschema.h). */
#include <regex.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "jschema.h"

#define DEPTH_MAX 8

static int
type_is(const char *t, const json_t *v)
{
	if (strcmp(t, "object") == 0) return json_is_object(v);
	if (strcmp(t, "array") == 0) return json_is_array(v);
	if (strcmp(t, "string") == 0) return json_is_string(v);
	if (strcmp(t, "integer") == 0) return json_is_integer(v);
	if (strcmp(t, "number") == 0) return json_is_number(v);
	if (strcmp(t, "boolean") == 0) return json_is_boolean(v);
	if (strcmp(t, "null") == 0) return json_is_null(v);
	return 0;
}

static int
type_ok(const json_t *type, const json_t *v)
{
	const json_t *t;
	size_t i;

	if (type == NULL)
		return 1;
	if (json_is_string(type))
		return type_is(json_string_value(type), v);
	json_array_foreach(type, i, t)
		if (json_is_string(t) && type_is(json_string_value(t), v))
			return 1;
	return 0;
}

static int
fail(char *err, size_t cap, const char *at, const char *what)
{
	snprintf(err, cap, "%s%s%s", at[0] ? at : "", at[0] ? ": " : "", what);
	return -1;
}

/* UTF-8 characters, as JSON Schema counts a string's length */
static size_t
chars(const char *s, size_t n)
{
	size_t i, c = 0;

	for (i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			c++;
	return c;
}

static int
pattern_ok(const char *pat, const char *s)
{
	regex_t re;
	int r;

	if (regcomp(&re, pat, REG_EXTENDED | REG_NOSUB) != 0)
		return 0;
	r = regexec(&re, s, 0, NULL, 0) == 0;
	regfree(&re);
	return r;
}

static int
check(const json_t *sc, const json_t *v, const char *at, int depth, char *err, size_t cap)
{
	const json_t *k, *props, *add, *sub;
	const char *key;
	char where[256], what[160];
	size_t i;

	if (depth > DEPTH_MAX || !json_is_object(sc))
		return fail(err, cap, at, "schema too deep");
	if (!type_ok(json_object_get(sc, "type"), v)) {
		const json_t *t = json_object_get(sc, "type");
		snprintf(what, sizeof(what), "want %s", json_is_string(t) ?
		    json_string_value(t) : "another type");
		return fail(err, cap, at, what);
	}
	if ((k = json_object_get(sc, "enum")) != NULL) {
		int found = 0;
		json_array_foreach(k, i, sub)
			if (json_equal(sub, v))
				found = 1;
		if (!found)
			return fail(err, cap, at, "not one of the allowed values");
	}
	if (json_is_number(v)) {
		if ((k = json_object_get(sc, "minimum")) && json_number_value(v) < json_number_value(k)) {
			snprintf(what, sizeof(what), "at least %g", json_number_value(k));
			return fail(err, cap, at, what);
		}
		if ((k = json_object_get(sc, "maximum")) && json_number_value(v) > json_number_value(k)) {
			snprintf(what, sizeof(what), "at most %g", json_number_value(k));
			return fail(err, cap, at, what);
		}
	}
	if (json_is_string(v)) {
		size_t n = chars(json_string_value(v), json_string_length(v));
		if ((k = json_object_get(sc, "minLength")) && n < (size_t)json_integer_value(k))
			return fail(err, cap, at, "too short");
		if ((k = json_object_get(sc, "maxLength")) && n > (size_t)json_integer_value(k))
			return fail(err, cap, at, "too long");
		if ((k = json_object_get(sc, "pattern")) && json_is_string(k) &&
		    !pattern_ok(json_string_value(k), json_string_value(v))) {
			snprintf(what, sizeof(what), "does not match %s", json_string_value(k));
			return fail(err, cap, at, what);
		}
	}
	if (json_is_array(v)) {
		if ((k = json_object_get(sc, "minItems")) && json_array_size(v) < (size_t)json_integer_value(k))
			return fail(err, cap, at, "too few items");
		if ((k = json_object_get(sc, "maxItems")) && json_array_size(v) > (size_t)json_integer_value(k))
			return fail(err, cap, at, "too many items");
		if ((k = json_object_get(sc, "items")) != NULL)
			json_array_foreach(v, i, sub) {
				snprintf(where, sizeof(where), "%s[%zu]", at, i);
				if (check(k, sub, where, depth + 1, err, cap) != 0)
					return -1;
			}
	}
	if (json_is_object(v)) {
		if ((k = json_object_get(sc, "maxProperties")) && json_object_size(v) > (size_t)json_integer_value(k))
			return fail(err, cap, at, "too many members");
		json_array_foreach(json_object_get(sc, "required"), i, k)
			if (json_is_string(k) && json_object_get(v, json_string_value(k)) == NULL) {
				snprintf(where, sizeof(where), "%s%s%s", at, at[0] ? "." : "",
				    json_string_value(k));
				return fail(err, cap, where, "required");
			}
		props = json_object_get(sc, "properties");
		add = json_object_get(sc, "additionalProperties");
		json_object_foreach((json_t *)v, key, sub) {
			const json_t *ps = json_object_get(props, key);
			snprintf(where, sizeof(where), "%s%s%.64s", at, at[0] ? "." : "", key);
			if (ps == NULL && json_is_false(add))
				return fail(err, cap, where, "unknown member");
			if (ps == NULL && json_is_object(add))
				ps = add;
			if (ps != NULL && check(ps, sub, where, depth + 1, err, cap) != 0)
				return -1;
		}
	}
	return 0;
}

int
jschema_check(const json_t *schema, const json_t *v, char *err, size_t cap)
{
	return check(schema, v, "", 0, err, cap);
}
