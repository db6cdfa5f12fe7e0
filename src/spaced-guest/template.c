/* A template's defaults for every operation (docs/templates.md): the
 * image's TPL_META_PATH names the user, the working directory and the
 * environment. The file is read once, by PID 1 after the challenge, with
 * the same strictness as a request: it is inside the jail, and the
 * sandbox's root may have rewritten it in its upper layer (that only
 * changes defaults of its own sandbox: any uid here is unprivileged). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "guest.h"
#include "limits.h"
#include "log.h"
#include "tplimage.h"

struct guest_template guest_tpl = { false, GUEST_USER_UID, GUEST_USER_GID, NULL, NULL, 0 };

static bool
env_entry_ok(const char *k, const char *v, size_t vlen)
{
	if (*k == '\0' || strlen(k) > 255 || strchr(k, '=') != NULL)
		return false;
	return strlen(v) == vlen;
}

int
guest_template_parse(const char *buf, size_t len, struct guest_template *t)
{
	static const char *const keys[] = { "version", "uid", "gid", "workdir", "env", "cmd",
	    "source", NULL };
	json_error_t jerr;
	json_t *o, *v, *env;
	const char *bad, *k;
	size_t n = 0;
	int r = -EINVAL;

	memset(t, 0, sizeof(*t));
	t->uid = GUEST_USER_UID;
	t->gid = GUEST_USER_GID;
	if (len > TPL_META_MAX)
		return -EFBIG;
	if ((o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr)) == NULL || !json_is_object(o))
		goto out;
	if (args_only(o, keys, &bad) < 0)
		goto out;
	if (!json_is_integer(v = json_object_get(o, "version")) || json_integer_value(v) != 1)
		goto out;
	/* ids of the sandbox's range only; 65535 is the bridge's, never ours */
	if ((v = json_object_get(o, "uid")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65534)
			goto out;
		t->uid = (uid_t)json_integer_value(v);
	}
	if ((v = json_object_get(o, "gid")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 65534)
			goto out;
		t->gid = (gid_t)json_integer_value(v);
	}
	if ((v = json_object_get(o, "workdir")) != NULL) {
		if (!json_is_string(v) || json_string_length(v) == 0 ||
		    json_string_length(v) >= SPACE_PATH_MAX || json_string_value(v)[0] != '/' ||
		    strlen(json_string_value(v)) != json_string_length(v))
			goto out;
		if ((t->workdir = strdup(json_string_value(v))) == NULL) {
			r = -ENOMEM;
			goto out;
		}
	}
	if ((env = json_object_get(o, "env")) != NULL) {
		if (!json_is_object(env) || json_object_size(env) > SPACE_ENV_MAX)
			goto out;
		if ((t->env = calloc(json_object_size(env) + 1, sizeof(char *))) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		json_object_foreach(env, k, v) {
			if (!json_is_string(v) || !env_entry_ok(k, json_string_value(v), json_string_length(v)))
				goto out;
			if (asprintf(&t->env[n], "%s=%s", k, json_string_value(v)) < 0) {
				t->env[n] = NULL;
				r = -ENOMEM;
				goto out;
			}
			t->nenv = ++n;
		}
	}
	if ((v = json_object_get(o, "cmd")) != NULL && !json_is_array(v))
		goto out;
	t->set = true;
	r = 0;
out:
	json_decref(o);
	if (r < 0)
		guest_template_free(t);
	return r;
}

void
guest_template_free(struct guest_template *t)
{
	size_t i;

	for (i = 0; t->env && i < t->nenv; i++)
		free(t->env[i]);
	free(t->env);
	free(t->workdir);
	t->env = NULL;
	t->workdir = NULL;
	t->nenv = 0;
	t->set = false;
	t->uid = GUEST_USER_UID;
	t->gid = GUEST_USER_GID;
}

int
guest_template_load(void)
{
	char *buf;
	ssize_t n;
	size_t got = 0;
	int fd, r;

	if ((fd = open(TPL_META_PATH, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -errno;    /* host: no template file */
	if ((buf = malloc(TPL_META_MAX + 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (got <= TPL_META_MAX && (n = read(fd, buf + got, TPL_META_MAX + 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		got += (size_t)n;
		if (got == TPL_META_MAX + 1)
			break;
	}
	r = guest_template_parse(buf, got, &guest_tpl);
out:
	free(buf);
	close(fd);
	return r;
}
