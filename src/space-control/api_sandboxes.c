/* User API: create, list, show and kill sandboxes. Every lookup is scoped
 * to the caller's principal, so another principal's sandbox is simply
 * "not found": ids cannot be probed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "util.h"

#define RES_MEMORY_MAX   (1 << 20)      /* MiB */
#define RES_PIDS_MAX     (1 << 22)
#define RES_CPU_MAX      10000          /* percent of one CPU */
#define TIMEOUT_MAX      (366 * 86400)  /* seconds */

static int
int_field(struct req *r, json_t *o, const char *k, json_int_t lo, json_int_t hi)
{
	json_t *v = json_object_get(o, k);

	if (v == NULL)
		return 1;
	if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
		reply_error(r, 400, "bad_request", "\"%s\" must be an integer in %lld..%lld", k,
		    (long long)lo, (long long)hi);
		return 0;
	}
	return 1;
}

/* resources: defaults overlaid by what the caller gave, each bounded */
static char *
resources_json(struct req *r, json_t *in)
{
	static const char *const keys[] = { "memory_mb", "pids", "cpu_percent", NULL };
	json_t *o;
	char *s;

	if (in != NULL && !json_is_object(in)) {
		reply_error(r, 400, "bad_request", "\"resources\" must be an object");
		return NULL;
	}
	if (in != NULL && (!json_keys_only(r, in, keys) ||
	    !int_field(r, in, "memory_mb", 1, RES_MEMORY_MAX) ||
	    !int_field(r, in, "pids", 1, RES_PIDS_MAX) ||
	    !int_field(r, in, "cpu_percent", 1, RES_CPU_MAX)))
		return NULL;
	o = json_pack("{s:i,s:i,s:i}", "memory_mb", 512, "pids", 256, "cpu_percent", 100);
	if (o && in)
		json_object_update(o, in);
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL)
		reply_error(r, 500, "internal", "out of memory");
	return s;
}

char *
api_timeouts_json(struct req *r, json_t *in)
{
	static const char *const keys[] = { "idle", "absolute", "action", NULL };
	json_t *o, *a;
	char *s;

	if (in != NULL && !json_is_object(in)) {
		reply_error(r, 400, "bad_request", "\"timeouts\" must be an object");
		return NULL;
	}
	if (in != NULL && (!json_keys_only(r, in, keys) ||
	    !int_field(r, in, "idle", 0, TIMEOUT_MAX) ||
	    !int_field(r, in, "absolute", 0, TIMEOUT_MAX)))
		return NULL;
	if (in != NULL && (a = json_object_get(in, "action")) != NULL &&
	    (!json_is_string(a) || (strcmp(json_string_value(a), "pause") != 0 &&
	    strcmp(json_string_value(a), "kill") != 0))) {
		reply_error(r, 400, "bad_request", "\"timeouts.action\" must be \"pause\" or \"kill\"");
		return NULL;
	}
	o = json_pack("{s:i,s:i,s:s}", "idle", 0, "absolute", 0, "action", "pause");
	if (o && in)
		json_object_update(o, in);
	s = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (s == NULL)
		reply_error(r, 500, "internal", "out of memory");
	return s;
}

void
api_sandbox_create(struct req *r)
{
	static const char *const keys[] = { "template", "resources", "timeouts", "metadata",
	    "worker", NULL };
	struct ctl *c = r->ctl;
	struct sandbox_spec sp;
	json_t *in, *md, *out = NULL;
	char id[SPACE_ID_MAX + 1], *res = NULL, *tmo = NULL, *meta = NULL;
	const char *why = NULL;
	bool ok;
	int rc;

	memset(&sp, 0, sizeof(sp));
	if ((in = req_json(r, true)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	/* "template" has a default but is not nullable; "worker" is */
	sp.template_ = api_id_field(r, in, "template", false, &ok);
	if (!ok)
		goto out;
	if (sp.template_ == NULL)
		sp.template_ = "host";
	sp.pinned = api_id_field(r, in, "worker", true, &ok);
	if (!ok)
		goto out;
	if ((res = resources_json(r, json_object_get(in, "resources"))) == NULL)
		goto out;
	if ((tmo = api_timeouts_json(r, json_object_get(in, "timeouts"))) == NULL)
		goto out;
	md = json_object_get(in, "metadata");
	if (md != NULL && !json_is_object(md)) {
		reply_error(r, 400, "bad_request", "\"metadata\" must be an object");
		goto out;
	}
	meta = md ? json_dumps(md, JSON_COMPACT | JSON_SORT_KEYS) : strdup("{}");
	if (meta == NULL || strlen(meta) > SPACE_METADATA_MAX) {
		reply_error(r, 413, "too_large", "\"metadata\" exceeds %u bytes", SPACE_METADATA_MAX);
		goto out;
	}
	sp.resources = res;
	sp.timeouts = tmo;
	sp.metadata = meta;
	if ((rc = id_random("sbx_", id, sizeof(id))) < 0) {
		reply_error(r, 500, "internal", "cannot make an id");
		goto out;
	}
	rc = c->st->ops->sandbox_create(c->st, r->principal, id, &sp, &out, &why);
	if (rc == 0) {
		assign_notify(c);
		log_info("sandbox %s created for %s", id, r->principal);
		reply_json(r, 201, out);
	} else if (sp.pinned != NULL && (rc == -ENOENT || rc == -EHOSTDOWN || rc == -EAGAIN)) {
		reply_error(r, 409, "conflict", "%s: %s", sp.pinned, why ? why : "cannot place");
	} else if (rc == -EAGAIN) {
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "%s", why ? why : "no worker available");
	} else {
		reply_store_error(r, rc, "sandbox");
	}
out:
	free(res);
	free(tmo);
	free(meta);
	json_decref(in);
}

void
api_sandbox_list(struct req *r)
{
	json_t *arr = NULL;
	int rc = r->ctl->st->ops->sandbox_list(r->ctl->st, r->principal, &arr);

	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	reply_json(r, 200, json_pack("{s:o}", "sandboxes", arr));
}

void
api_sandbox_get(struct req *r)
{
	json_t *o = NULL;
	int rc = r->ctl->st->ops->sandbox_get(r->ctl->st, r->principal, r->params[0], &o);

	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	reply_json(r, 200, o);
}

void
api_sandbox_delete(struct req *r)
{
	json_t *o = NULL;
	int rc = r->ctl->st->ops->sandbox_kill(r->ctl->st, r->principal, r->params[0], &o);

	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	assign_notify(r->ctl);
	log_info("sandbox %s killed by %s", r->params[0], r->principal);
	reply_json(r, 200, o);
}
