/* User API of the lifecycle (docs/protocol.md section 5): pause, resume,
 * move, named snapshots, timeouts; and the worker's answer to a snapshot
 * assignment. Each operation is started by one store transaction that
 * takes the sandbox's lease by compare-and-swap (lifecycle_ops.c); a
 * second operation on the same sandbox gets 409 until the first ends. The
 * steps that follow are driven by worker reports and the scheduler tick. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "snapshot.h"
#include "util.h"

/* how long past a route's hold an operation's start waits for a store
 * that stays busy before it answers 503 (ms) */
#define OP_START_BUSY_MS 5000

static const char *
kind_label(const char *kind)
{
	static const char *const kinds[] = { "pause", "resume", "move", "snapshot", NULL };
	size_t i;

	for (i = 0; kinds[i]; i++)
		if (strcmp(kind, kinds[i]) == 0)
			return kinds[i];
	return "other";
}

/* Sandboxes with a pause or move waiting for a held route (below): a
 * repair of one is handed no new hold meanwhile (api_routes.c waits for
 * the execution that will serve instead), so the hold ends and the
 * operation starts without cutting a route a repair was just handed.
 * This daemon's own; other replicas on the same store keep handing holds
 * until their route's next look, which only shortens the wait. */
#define RETIRE_WAITS 64
static pthread_mutex_t waits_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char sandbox[SPACE_ID_MAX + 1];
	unsigned n;             /* operations waiting on it */
} waits[RETIRE_WAITS];

static void
retire_wait(const char *sandbox, bool on)
{
	size_t i, free_i = RETIRE_WAITS;

	pthread_mutex_lock(&waits_mu);
	for (i = 0; i < RETIRE_WAITS; i++) {
		if (waits[i].n > 0 && strcmp(waits[i].sandbox, sandbox) == 0)
			break;
		if (waits[i].n == 0 && free_i == RETIRE_WAITS)
			free_i = i;
	}
	if (i < RETIRE_WAITS) {
		if (on)
			waits[i].n++;
		else
			waits[i].n--;
	} else if (on && free_i < RETIRE_WAITS) {
		snprintf(waits[free_i].sandbox, sizeof(waits[free_i].sandbox), "%s", sandbox);
		waits[free_i].n = 1;
	}
	pthread_mutex_unlock(&waits_mu);
}

bool
api_retire_waiting(const char *sandbox)
{
	bool w = false;

	pthread_mutex_lock(&waits_mu);
	for (size_t i = 0; i < RETIRE_WAITS && !w; i++)
		w = waits[i].n > 0 && strcmp(waits[i].sandbox, sandbox) == 0;
	pthread_mutex_unlock(&waits_mu);
	return w;
}

/* start an operation and answer 202, or the refusal */
static void
start_op(struct req *r, const char *kind, const char *worker, const char *name)
{
	struct ctl *c = r->ctl;
	struct op_request rq;
	char op_id[SPACE_ID_MAX + 1], snap_id[SPACE_ID_MAX + 1];
	const char *why = NULL;
	json_t *out = NULL;
	uint64_t deadline;
	int rc, quota_retry = 0;
	bool waiting = false;

	memset(&rq, 0, sizeof(rq));
	if (id_random("op_", op_id, sizeof(op_id)) < 0 ||
	    id_random("snp_", snap_id, sizeof(snap_id)) < 0) {
		reply_error(r, 500, "internal", "cannot make an id");
		return;
	}
	rq.kind = kind;
	rq.op_id = op_id;
	rq.worker = worker;
	rq.snapshot_id = snap_id;
	rq.name = name;
	rq.lease_owner = c->instance;
	rq.lease_ttl = c->cfg.lease_ttl;
	rq.reason = "api";
	rq.retry_after = &quota_retry;
	rq.api_key = r->key_id[0] ? r->key_id : NULL;
	rq.max_named = c->cfg.max_named_snapshots;
	rq.max_named_mb = c->cfg.max_named_snapshot_mb;
	/* a route handed to a repair is held for --route-hold-ms: wait
	 * for it, then start anyway (repairs cannot hold a sandbox forever) */
	deadline = now_mono_ns() / 1000000 + (uint64_t)c->cfg.route_hold_ms + 50;
	while ((rc = c->st->ops->op_start(c->st, r->principal, r->params[0], &rq, &out,
	    &why)) == -EBUSY) {
		uint64_t now = now_mono_ns() / 1000000;

		if (!waiting && why != NULL && strstr(why, "held") != NULL) {
			retire_wait(r->params[0], true);
			waiting = true;
		}
		if (now >= deadline)
			rq.past_hold = true;
		/* past the hold, -EBUSY is the store's own contention (its
		 * retries spent): answered 503 below, not waited out forever */
		if (now >= deadline + OP_START_BUSY_MS || c->stopping)
			break;
		usleep(20 * 1000);
	}
	if (waiting)
		retire_wait(r->params[0], false);
	switch (rc) {
	case 0:
		metrics_lifecycle(kind_label(kind), "started");
		assign_notify(c, r->params[0]);
		log_info("sandbox %s: %s requested by %s (operation %s)", r->params[0], kind,
		    r->principal, op_id);
		reply_json(r, 202, out);
		return;
	case -EALREADY:
		metrics_lifecycle(kind_label(kind), "conflict");
		reply_error(r, 409, "conflict", "another lifecycle operation is in progress");
		return;
	case -EPERM:
		metrics_lifecycle(kind_label(kind), "refused");
		reply_error(r, 409, "conflict", "%s", why ? why : "operation does not apply");
		return;
	case -EAGAIN:
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "%s", why ? why : "no worker available");
		return;
	case -EDQUOT:
		/* the tenant's own quota: 429, as at create */
		metrics_lifecycle(kind_label(kind), "refused");
		r->retry_after = quota_retry > 0 ? quota_retry : 1;
		reply_error(r, 429, "quota_exceeded", "%s", why ? why : "quota exceeded");
		return;
	default:
		reply_store_error(r, rc, "sandbox");
	}
}

const char *
api_id_field(struct req *r, json_t *in, const char *k, bool null_ok, bool *ok)
{
	json_t *v = json_object_get(in, k);

	*ok = true;
	if (v == NULL || (null_ok && json_is_null(v)))
		return NULL;
	if (!json_is_string(v) || !id_valid(json_string_value(v))) {
		reply_error(r, 400, "bad_request", "\"%s\" must be an id ([A-Za-z0-9_-]{1,%d})",
		    k, SPACE_ID_MAX);
		*ok = false;
		return NULL;
	}
	return json_string_value(v);
}

void
api_sandbox_pause(struct req *r)
{
	static const char *const keys[] = { NULL };
	json_t *in;

	if ((in = req_json(r, true)) == NULL)
		return;
	if (json_keys_only(r, in, keys))
		start_op(r, "pause", NULL, NULL);
	json_decref(in);
}

void
api_sandbox_resume(struct req *r)
{
	static const char *const keys[] = { "worker", NULL };
	const char *w;
	json_t *in;
	bool ok;

	if ((in = req_json(r, true)) == NULL)
		return;
	if (json_keys_only(r, in, keys)) {
		w = api_id_field(r, in, "worker", true, &ok);
		if (ok)
			start_op(r, "resume", w, NULL);
	}
	json_decref(in);
}

void
api_sandbox_move(struct req *r)
{
	static const char *const keys[] = { "to", NULL };
	const char *to;
	json_t *in;
	bool ok;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (json_keys_only(r, in, keys)) {
		to = api_id_field(r, in, "to", true, &ok);
		if (ok && to == NULL)
			reply_error(r, 400, "bad_request", "\"to\" (a worker id) is required");
		else if (ok)
			start_op(r, "move", to, NULL);
	}
	json_decref(in);
}

void
api_snapshot_create(struct req *r)
{
	static const char *const keys[] = { "name", NULL };
	const char *name;
	json_t *in;
	bool ok;

	if ((in = req_json(r, true)) == NULL)
		return;
	if (json_keys_only(r, in, keys)) {
		/* names share the id alphabet: they reach workers' logs and
		 * assignment specs, so nothing that needs escaping */
		name = api_id_field(r, in, "name", true, &ok);
		if (ok)
			start_op(r, "snapshot", NULL, name);
	}
	json_decref(in);
}

void
api_snapshot_list(struct req *r)
{
	json_t *arr = NULL;
	int rc;

	rc = r->ctl->st->ops->snapshots_list(r->ctl->st, r->principal, r->params[0], &arr);
	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	reply_json(r, 200, json_pack("{s:o}", "snapshots", arr));
}

/* DELETE /v1/sandboxes/{id}/snapshots/{snapshot}: a named snapshot
 * forgotten (its archive is then collected as any automatic one's) */
void
api_snapshot_delete(struct req *r)
{
	const char *why = NULL;
	int rc;

	if (strncmp(r->params[1], "snp_", 4) != 0 || !id_valid(r->params[1])) {
		reply_error(r, 404, "not_found", "no such snapshot");
		return;
	}
	rc = r->ctl->st->ops->snapshot_forget(r->ctl->st, r->principal, r->params[0],
	    r->params[1], &why);
	if (rc == 0) {
		log_info("sandbox %s: named snapshot %s deleted by %s", r->params[0], r->params[1],
		    r->principal);
		reply_json(r, 200, json_pack("{s:s}", "deleted", r->params[1]));
	} else if (rc == -EPERM)
		reply_error(r, 409, "conflict", "%s", why ? why : "the snapshot cannot be deleted now");
	else if (rc == -ENOENT)
		reply_error(r, 404, "not_found", "no such named snapshot of this sandbox");
	else
		reply_store_error(r, rc, "sandbox");
}

void
api_sandbox_timeouts(struct req *r)
{
	json_t *in, *out = NULL;
	char *tmo;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	/* a PUT replaces: fields left out take their defaults (0 = none) */
	if ((tmo = api_timeouts_json(r, in)) != NULL) {
		rc = r->ctl->st->ops->sandbox_set_timeouts(r->ctl->st, r->principal, r->params[0],
		    tmo, &out);
		if (rc < 0)
			reply_store_error(r, rc, "sandbox");
		else
			reply_json(r, 200, out);
	}
	free(tmo);
	json_decref(in);
}

/* lowercase hex of SNAPSHOT_DIGEST_HEX characters: the snapshot store's
 * file names, so nothing else may pass */
bool
api_digest_valid(const char *s)
{
	size_t i;

	if (s == NULL || strlen(s) != SNAPSHOT_DIGEST_HEX)
		return false;
	for (i = 0; i < SNAPSHOT_DIGEST_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* POST /v1/workers/{id}/snapshots: the answer to a snapshot assignment */
void
api_worker_snapshot(struct req *r)
{
	static const char *const keys[] = { "snapshot_id", "sandbox", "generation", "digest",
	    "size", "error", NULL };
	struct ctl *c = r->ctl;
	json_t *in, *v;
	const char *sid, *sbx = NULL, *digest = NULL, *err = NULL, *why = NULL;
	char base[SNAPSHOT_DIGEST_HEX + 1];
	int64_t gen = 0, size = 0;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	v = json_object_get(in, "snapshot_id");
	if (v == NULL || !json_is_string(v) || !id_valid(json_string_value(v))) {
		reply_error(r, 400, "bad_request", "\"snapshot_id\" must be an id");
		goto out;
	}
	sid = json_string_value(v);
	if ((v = json_object_get(in, "sandbox")) != NULL) {
		if (!json_is_string(v) || !id_valid(json_string_value(v))) {
			reply_error(r, 400, "bad_request", "\"sandbox\" must be an id");
			goto out;
		}
		sbx = json_string_value(v);
	}
	if ((v = json_object_get(in, "generation")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1) {
			reply_error(r, 400, "bad_request", "\"generation\" must be a positive integer");
			goto out;
		}
		gen = json_integer_value(v);
	}
	if ((v = json_object_get(in, "error")) != NULL) {
		if (!json_is_string(v) || strlen(json_string_value(v)) > 1024) {
			reply_error(r, 400, "bad_request", "\"error\" must be a string of at most 1024 bytes");
			goto out;
		}
		err = json_string_value(v);
	}
	if ((v = json_object_get(in, "digest")) != NULL) {
		if (!json_is_string(v) || !api_digest_valid(json_string_value(v))) {
			reply_error(r, 400, "bad_request", "\"digest\" must be %d lowercase hex digits",
			    SNAPSHOT_DIGEST_HEX);
			goto out;
		}
		digest = json_string_value(v);
		v = json_object_get(in, "size");
		if (v == NULL || !json_is_integer(v) || json_integer_value(v) < 0) {
			reply_error(r, 400, "bad_request", "\"size\" must be a non-negative integer");
			goto out;
		}
		size = json_integer_value(v);
	}
	if ((digest == NULL) == (err == NULL)) {
		reply_error(r, 400, "bad_request", "give either \"digest\" and \"size\" or \"error\"");
		goto out;
	}
	api_archive_seen(c, digest);
	rc = c->st->ops->snapshot_report(c->st, r->params[0], sid, sbx, gen, digest,
	    archive_blob_base(c, digest, base), size, err, &why);
	if (rc < 0)
		reply_report_error(r, rc, why, "snapshot");
	else {
		log_info("snapshot %s on %s: %s", sid, r->params[0], digest ? "ready" : "failed");
		ops_kick(c, sbx);
		reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	}
out:
	json_decref(in);
}
