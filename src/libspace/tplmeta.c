/* The template metadata file (tplimage.h): one strict decoder, shared by
 * spaced-guest (which applies it) and its fuzzer. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "limits.h"
#include "tplimage.h"

static bool
only_keys(json_t *o)
{
	static const char *const keys[] = { "version", "uid", "gid", "workdir", "env", "cmd",
	    "source", NULL };
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(o, k, v) {
		for (i = 0; keys[i] && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			return false;
	}
	return true;
}

/* ids of the sandbox's range only; 65535 is the bridge's, never ours */
static bool
id_field(json_t *o, const char *k, uint32_t *out)
{
	json_t *v = json_object_get(o, k);

	if (v == NULL)
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65534)
		return false;
	*out = (uint32_t)json_integer_value(v);
	return true;
}

void
tpl_meta_free(struct tpl_meta *m)
{
	size_t i;

	for (i = 0; m->env && i < m->nenv; i++)
		free(m->env[i]);
	free(m->env);
	free(m->workdir);
	memset(m, 0, sizeof(*m));
	m->uid = m->gid = TPL_USER_DEFAULT;
}

int
tpl_meta_parse(const char *buf, size_t len, struct tpl_meta *m)
{
	json_error_t jerr;
	json_t *o = NULL, *v, *env;
	const char *k, *s;
	int r = -EINVAL;

	memset(m, 0, sizeof(*m));
	m->uid = m->gid = TPL_USER_DEFAULT;
	if (len > TPL_META_MAX)
		return -EFBIG;
	if ((o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL ||
	    !json_is_object(o) || !only_keys(o))
		goto out;
	if (!json_is_integer(v = json_object_get(o, "version")) || json_integer_value(v) != 1)
		goto out;
	if (!id_field(o, "uid", &m->uid) || !id_field(o, "gid", &m->gid))
		goto out;
	if ((v = json_object_get(o, "workdir")) != NULL) {
		if (!json_is_string(v) || (s = json_string_value(v))[0] != '/' ||
		    json_string_length(v) >= SPACE_PATH_MAX || strlen(s) != json_string_length(v))
			goto out;
		if ((m->workdir = strdup(s)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
	}
	if ((env = json_object_get(o, "env")) != NULL) {
		if (!json_is_object(env) || json_object_size(env) > SPACE_ENV_MAX)
			goto out;
		if ((m->env = calloc(json_object_size(env) + 1, sizeof(char *))) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		json_object_foreach(env, k, v) {
			/* a name with '=' or a NUL in either would set another variable */
			if (!json_is_string(v) || *k == '\0' || strlen(k) > 255 || strchr(k, '=') ||
			    strlen(json_string_value(v)) != json_string_length(v))
				goto out;
			if (asprintf(&m->env[m->nenv], "%s=%s", k, json_string_value(v)) < 0) {
				m->env[m->nenv] = NULL;
				r = -ENOMEM;
				goto out;
			}
			m->nenv++;
		}
	}
	if ((v = json_object_get(o, "cmd")) != NULL && !json_is_array(v))
		goto out;
	if ((v = json_object_get(o, "source")) != NULL && !json_is_string(v))
		goto out;
	m->set = true;
	r = 0;
out:
	json_decref(o);
	if (r < 0)
		tpl_meta_free(m);
	return r;
}
