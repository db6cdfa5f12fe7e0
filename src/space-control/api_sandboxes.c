/* User API: create, list, show and kill sandboxes. Every lookup is scoped
 * to the caller's principal, so another principal's sandbox is simply
 * "not found": ids cannot be probed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "templates.h"
#include "control.h"
#include "log.h"
#include "network.h"
#include "ports.h"
#include "store_tx.h"
#include "util.h"

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

/* a resource a tenant asks for: at least 1, at most the deployment's
 * maximum, which the answer names (the operator sets it, docs/operations.md) */
static int
res_field(struct req *r, json_t *in, json_t *o, const char *k, int64_t lo, int64_t max,
    int64_t def)
{
	json_t *v = in ? json_object_get(in, k) : NULL;

	if (v == NULL)
		v = json_integer(def);
	else
		json_incref(v);
	if (json_object_set_new(o, k, v) < 0)
		return -1;
	if (!json_is_integer(v) || json_integer_value(v) < lo) {
		reply_error(r, 400, "bad_request", "\"resources.%s\" must be an integer of at least %lld",
		    k, (long long)lo);
		return 0;
	}
	if (json_integer_value(v) > max) {
		reply_error(r, 400, "bad_request", "\"resources.%s\" is above this deployment's "
		    "maximum of %lld", k, (long long)max);
		return 0;
	}
	return 1;
}

/* resources: what the caller gave, each within the deployment's maxima,
 * the deployment's defaults for the rest */
static char *
resources_json(struct req *r, json_t *in)
{
	static const char *const keys[] = { "memory_mb", "pids", "cpu_percent", "disk_mb", NULL };
	const struct config *cfg = &r->ctl->cfg;
	json_t *o;
	char *s = NULL;
	int ok;

	if (in != NULL && !json_is_object(in)) {
		reply_error(r, 400, "bad_request", "\"resources\" must be an object");
		return NULL;
	}
	if (in != NULL && !json_keys_only(r, in, keys))
		return NULL;
	if ((o = json_object()) == NULL) {
		reply_error(r, 500, "internal", "out of memory");
		return NULL;
	}
	if ((ok = res_field(r, in, o, "memory_mb", 1, cfg->res_max.memory_mb,
	    cfg->res_def.memory_mb)) > 0 &&
	    (ok = res_field(r, in, o, "pids", 1, cfg->pids_max, cfg->pids_def)) > 0 &&
	    (ok = res_field(r, in, o, "cpu_percent", 1, cfg->res_max.cpu_percent,
	    cfg->res_def.cpu_percent)) > 0 &&
	    (ok = res_field(r, in, o, "disk_mb", 16, cfg->res_max.disk_mb,
	    cfg->res_def.disk_mb)) > 0)
		s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL && ok != 0)
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

/* name is one of the comma-separated list */
static bool
template_known(const char *list, const char *name)
{
	size_t n = strlen(name);
	const char *p = list, *e;

	for (;;) {
		e = strchr(p, ',');
		if ((size_t)((e ? e : p + strlen(p)) - p) == n && strncmp(p, name, n) == 0)
			return true;
		if (e == NULL)
			return false;
		p = e + 1;
	}
}

/* how often a waiting GET looks at the store anyway: a state committed
 * by another daemon on the same store wakes nothing here */
#define STATE_RECHECK_NS (50ull * 1000000ull)

/* the states a GET may wait for; a sandbox that reaches a state no
 * operation leaves by itself ends the wait too */
static const char *const until_states[] = { "running", "paused", "killed", NULL };

static bool
state_reached(json_t *o, const char *until)
{
	const char *st = json_string_value(json_object_get(o, "state"));
	json_t *e = json_object_get(o, "execution");
	const char *es = json_string_value(json_object_get(e, "state"));

	if (st == NULL)
		return true;
	if (strcmp(st, "failed") == 0 || strcmp(st, "killed") == 0)
		return true;
	if (strcmp(st, until) != 0)
		return false;
	/* running counts once the current execution serves */
	return strcmp(until, "running") != 0 || (es != NULL && strcmp(es, "serving") == 0);
}

/* *o: the sandbox's object once it reached until, the deadline passed or
 * the daemon stops; 0 or the store's error */
static int
sandbox_wait(struct req *r, const char *id, const char *until, uint64_t deadline, json_t **o)
{
	struct ctl *c = r->ctl;
	uint64_t seq, now;
	int rc;

	for (;;) {
		/* the sequence first: a commit after it wakes the wait */
		seq = state_seq(c, id);
		if ((rc = c->st->ops->sandbox_get(c->st, r->principal, id, o)) < 0)
			return rc;
		now = now_mono_ns();
		if (until == NULL || state_reached(*o, until) || now >= deadline || c->stopping)
			return 0;
		json_decref(*o);
		*o = NULL;
		state_wait(c, id, seq, deadline - now <= STATE_RECHECK_NS ? deadline :
		    now + STATE_RECHECK_NS);
	}
}

/* the oldest a capability signed ahead may be when it is handed out */
#define AHEAD_AGE_MAX_S 5

/* A create with "wait": the answer once the sandbox runs (its execution
 * serving) or after wait seconds, as GET ?until=running&wait= gives it,
 * and with "access" a capability for the execution that serves, as POST
 * routes gives it ("route"): what a client does next anyway, without two
 * more round trips. The sandbox exists whatever happens while waiting:
 * the answer is 201 in any case, with the sandbox as created when it
 * cannot be read, and without "route" when none can be issued (the
 * client asks POST routes as before). */

static void
created_wait(struct req *r, const char *id, uint64_t wait, uint32_t acc, json_t *created)
{
	struct ctl *c = r->ctl;
	struct exec_view ev;
	struct route_signed ahead;
	json_t *o = NULL, *route = NULL;
	int rc = -1;

	/* the capability is signed while the worker starts the execution
	 * the create recorded, and handed out only if that execution is the
	 * one serving at the end of the wait (else one is signed then) */
	memset(&ahead, 0, sizeof(ahead));
	if (acc != 0 && c->st->ops->sandbox_current(c->st, r->principal, id, &ev) == 0 &&
	    ev.route.generation != 0)
		(void)route_sign(r, &ev.route, PUR_CONTROL, acc, 0, PROTO_NONE, &ahead);
	/* the create committed: a store error while waiting answers what
	 * it committed */
	if (sandbox_wait(r, id, "running", now_mono_ns() + wait * 1000000000ull, &o) < 0) {
		route_signed_clear(&ahead);
		reply_json(r, 201, created);
		return;
	}
	json_decref(created);
	/* the checks of POST routes, on the execution current now */
	if (acc != 0 && c->st->ops->sandbox_current(c->st, r->principal, id, &ev) == 0 &&
	    strcmp(ev.sandbox_state, "running") == 0 && route_unservable(&ev) == NULL) {
		/* a long wait (a template's image fetched first) would hand
		 * out a capability with less than its lifetime left */
		if (ahead.token != NULL && ahead.exp - now_unix() < SPACE_CAP_LIFETIME - AHEAD_AGE_MAX_S)
			route_signed_clear(&ahead);
		if (ahead.token == NULL || (rc = route_answer(r, &ev, &ahead, &route)) == -ESTALE)
			rc = route_issue(r, &ev, PUR_CONTROL, acc, 0, PROTO_NONE, &route);
		if (rc == 0)
			json_object_set_new(o, "route", route);
	}
	route_signed_clear(&ahead);
	api_refusals_attach(c->st, r->principal, id, o);
	reply_json(r, 201, o);
}

void
api_sandbox_create(struct req *r)
{
	static const char *const keys[] = { "template", "resources", "timeouts", "metadata",
	    "worker", "network", "ports", "wait", "access", NULL };
	struct ctl *c = r->ctl;
	struct sandbox_spec sp;
	json_t *in, *md, *out = NULL;
	char id[SPACE_ID_MAX + 1], *res = NULL, *tmo = NULL, *meta = NULL, *net = NULL;
	char *ports = NULL;
	char tdigest[TPL_DIGEST_HEX + 1];
	const char *why = NULL;
	json_t *v;
	uint64_t wait = 0;
	uint32_t acc = 0;
	bool ok;
	int rc, quota_retry = 0;

	memset(&sp, 0, sizeof(sp));
	if ((in = req_json(r, true)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (!int_field(r, in, "wait", 0, SPACE_LONGPOLL_MAX))
		goto out;
	if ((v = json_object_get(in, "wait")) != NULL)
		wait = (uint64_t)json_integer_value(v);
	if ((v = json_object_get(in, "access")) != NULL) {
		if (wait == 0) {
			reply_error(r, 400, "bad_request", "\"access\" comes with \"wait\"");
			goto out;
		}
		if (!route_access_parse(r, v, &acc))
			goto out;
	}
	/* "template" has a default but is not nullable; "worker" is */
	sp.template_ = api_id_field(r, in, "template", false, &ok);
	if (!ok)
		goto out;
	if (sp.template_ == NULL)
		sp.template_ = "host";
	/* a template no worker provides would be placed, fail to launch and
	 * be relaunched until it failed, with the reason only in a worker's
	 * log: it is refused here instead */
	/* a stored template is recorded by its image's digest: the sandbox
	 * keeps running on that image whatever the name points at later */
	if (!template_known(r->ctl->cfg.templates, sp.template_)) {
		if (templates_resolve(r->ctl, sp.template_, tdigest) != 0) {
			reply_error(r, 400, "bad_request", "unknown template \"%s\" (this deployment "
			    "has: %s, and those of space template list)", sp.template_,
			    r->ctl->cfg.templates);
			goto out;
		}
		sp.template_ = tdigest;
	}
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
	if (json_object_get(in, "network") != NULL) {
		char nwhy[256];

		/* host names are resolved now (docs/network.md) */
		if ((net = net_policy_stored(json_object_get(in, "network"), NULL, nwhy,
		    sizeof(nwhy))) == NULL) {
			reply_error(r, 400, "bad_request", "%s", nwhy);
			goto out;
		}
	}
	if (json_object_get(in, "ports") != NULL) {
		char pwhy[128];

		if (c->st->rows->sandbox_ports_set == NULL) {
			reply_error(r, 501, "not_implemented",
			    "declared ports need the SQLite store for now");
			goto out;
		}
		if ((ports = ports_from_api(json_object_get(in, "ports"), pwhy, sizeof(pwhy))) == NULL) {
			reply_error(r, 400, "bad_request", "%s", pwhy);
			goto out;
		}
	}
	sp.network = net;
	sp.ports = ports;
	sp.resources = res;
	sp.timeouts = tmo;
	sp.metadata = meta;
	sp.api_key = r->key_id;
	sp.retry_after = &quota_retry;
	if ((rc = id_random("sbx_", id, sizeof(id))) < 0) {
		reply_error(r, 500, "internal", "cannot make an id");
		goto out;
	}
	rc = c->st->ops->sandbox_create(c->st, r->principal, id, &sp, &out, &why);
	if (rc == 0) {
		assign_notify(c, id);
		log_info("sandbox %s created for %s", id, r->principal);
		if (wait > 0)
			created_wait(r, id, wait, acc, out);
		else
			reply_json(r, 201, out);
	} else if (sp.pinned != NULL && (rc == -ENOENT || rc == -EHOSTDOWN || rc == -EAGAIN)) {
		reply_error(r, 409, "conflict", "%s: %s", sp.pinned, why ? why : "cannot place");
	} else if (rc == -EDQUOT) {
		/* the tenant's own quota: 429, never another tenant's 503 */
		r->retry_after = quota_retry > 0 ? quota_retry : 1;
		reply_error(r, 429, "quota_exceeded", "%s", why ? why : "quota exceeded");
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
	free(net);
	free(ports);
	json_decref(in);
}

/* GET /v1/sandboxes[?limit=N][&after=ID][&live=true]: a page of the
 * caller's sandboxes, oldest first; "next" names the last of a full page
 * (ask again with after=next), null after the last. A page is at most
 * SANDBOX_PAGE_MAX: the list of a principal that made a million
 * sandboxes is never built whole, nor read under the store's lock at once */
#define SANDBOX_PAGE_MAX 1000

void
api_sandbox_list(struct req *r)
{
	const char *after = req_query(r, "after"), *live = req_query(r, "live");
	json_t *arr = NULL, *last;
	uint64_t limit = SANDBOX_PAGE_MAX;
	bool want_live = false;
	int rc;

	if (req_query_u(r, "limit", SANDBOX_PAGE_MAX, &limit) < 0 || limit == 0) {
		reply_error(r, 400, "bad_request", "limit is 1..%d", SANDBOX_PAGE_MAX);
		return;
	}
	if (after != NULL && !id_valid(after)) {
		reply_error(r, 400, "bad_request", "after names a sandbox by its id");
		return;
	}
	if (live != NULL && !(want_live = strcmp(live, "true") == 0) && strcmp(live, "false") != 0) {
		reply_error(r, 400, "bad_request", "live is true or false");
		return;
	}
	/* one more than the page: whether another page follows */
	rc = r->ctl->st->ops->sandbox_list(r->ctl->st, r->principal, after, want_live,
	    (int64_t)limit + 1, &arr);
	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	if (json_array_size(arr) > limit) {
		json_array_remove(arr, json_array_size(arr) - 1);
		last = json_array_get(arr, json_array_size(arr) - 1);
		reply_json(r, 200, json_pack("{s:o,s:O}", "sandboxes", arr, "next",
		    json_object_get(last, "id")));
	} else
		reply_json(r, 200, json_pack("{s:o,s:n}", "sandboxes", arr, "next"));
}

void
api_sandbox_get(struct req *r)
{
	const char *until = req_query(r, "until");
	json_t *o = NULL;
	uint64_t wait = 0;
	int rc, i;

	if (until != NULL) {
		for (i = 0; until_states[i] != NULL && strcmp(until, until_states[i]) != 0; i++)
			;
		if (until_states[i] == NULL) {
			reply_error(r, 400, "bad_request", "until must be running, paused or killed");
			return;
		}
	}
	if (req_query_u(r, "wait", SPACE_LONGPOLL_MAX, &wait) < 0 || (wait > 0 && until == NULL)) {
		reply_error(r, 400, "bad_request", "wait is 0..%d seconds, with until",
		    SPACE_LONGPOLL_MAX);
		return;
	}
	if ((rc = sandbox_wait(r, r->params[0], until, now_mono_ns() + wait * 1000000000ull,
	    &o)) < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	api_refusals_attach(r->ctl->st, r->principal, r->params[0], o);
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
	assign_notify(r->ctl, r->params[0]);
	log_info("sandbox %s killed by %s", r->params[0], r->principal);
	reply_json(r, 200, o);
}
