/* The lifecycle state machine of sandboxes and executions, over the
 * backend's transaction helper and row operations (store_tx.h). Nothing
 * here is SQL: every backend shares this file and lifecycle_ops.c.
 *
 * This half: creation, kill, a worker's registration (a re-created worker's
 * sandboxes are placed again) and a worker's report on an execution, with
 * the placement they share. Placement runs inside the transaction that
 * creates the execution, which is what makes the next generation unique
 * and a worker's last slot taken once: no other writer commits between the
 * read and the insert. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "store_tx.h"
#include "lifecycle.h"
#include "network.h"
#include "ports.h"
#include "util.h"

#define PLACE_CANDIDATES 64
/* seconds a tenant at its running or memory quota is told to wait: what
 * frees room (a kill, a pause) is the tenant's own action */
#define LC_QUOTA_RETRY   10

const char *
lc_kind_static(const char *k)
{
	static const char *const kinds[] = { "pause", "resume", "move", "snapshot", NULL };
	size_t i;

	for (i = 0; kinds[i]; i++)
		if (streq(k, kinds[i]))
			return kinds[i];
	return "other";
}

bool
lc_exec_active(const char *state)
{
	return streq(state, "pending") || streq(state, "starting") || streq(state, "serving");
}

void
lc_cur_free(struct sbx_cur *c)
{
	free(c->template_);
	free(c->resources);
	c->template_ = c->resources = NULL;
}

/* install spec {"template","resources","snapshot"} (snapshot NULL = none) */
char *
lc_spec_json(const char *template_, const char *resources, const char *snapshot)
{
	json_t *res = json_loads(resources, 0, NULL);
	json_t *o = json_pack("{s:s,s:o,s:s?}", "template", template_, "resources",
	    res ? res : json_object(), "snapshot", snapshot);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

/* what an install spec (or a sandbox's resources text) asks of a worker */
int
lc_spec_want(const char *json, struct res *want)
{
	json_t *o = json_loads(json, 0, NULL), *r;

	memset(want, 0, sizeof(*want));
	if (o == NULL)
		return -EINVAL;
	r = json_object_get(o, "resources");
	if (r == NULL)
		r = o;
	want->memory_mb = json_integer_value(json_object_get(r, "memory_mb"));
	want->cpu_percent = json_integer_value(json_object_get(r, "cpu_percent"));
	want->disk_mb = json_integer_value(json_object_get(r, "disk_mb"));
	json_decref(o);
	return 0;
}

/* Place the next generation of sandbox on a worker, with its install
 * assignment. pinned: that worker or nothing; prefer: that worker when it
 * is live with room (resume: the previous one, its data is near), else
 * the scheduler's choice (scheduler.c holds the policy). */
int
lc_place_execution(struct store *s, const char *sandbox, const char *pinned, const char *prefer,
    const char *spec, const char **why, int64_t *gen_out, char worker_out[SPACE_ID_MAX + 1])
{
	struct worker_load wl[PLACE_CANDIDATES];
	size_t n = 0, i;
	int64_t gen = 0, now = now_unix();
	struct res want;
	int rc, pick = -1;

	if ((rc = lc_spec_want(spec, &want)) < 0)
		return rc;
	if ((rc = R(s)->workers_load(s, pinned, prefer, wl, PLACE_CANDIDATES, &n)) < 0)
		return rc;
	if (pinned == NULL && prefer != NULL) {
		for (i = 0; i < n; i++)
			if (streq(wl[i].id, prefer) && wl[i].live && scheduler_fits(&wl[i], &want, &s->oc))
				pick = (int)i;
	}
	if (pick < 0)
		pick = scheduler_pick(wl, n, pinned, &want, &s->oc, why);
	if (pick < 0)
		return pick;
	if ((rc = R(s)->exec_insert(s, sandbox, wl[pick].id, wl[pick].incarnation, now, &gen)) < 0)
		return rc;
	/* the sandbox's egress policy goes with every install: a move or
	 * resume keeps it (network.c) */
	{
		char *full = NULL;

		char *withports = NULL;

		if ((rc = net_spec_with_policy(s, sandbox, spec, &full)) < 0)
			return rc;
		/* and its declared service ports (netgtw's second check) */
		if ((rc = ports_spec_with(s, sandbox, full ? full : spec, &withports)) < 0) {
			free(full);
			return rc;
		}
		rc = R(s)->assignment_add(s, wl[pick].id, sandbox, gen, "install",
		    withports ? withports : full ? full : spec, now);
		free(withports);
		free(full);
		if (rc < 0)
			return rc;
	}
	if (gen_out)
		*gen_out = gen;
	if (worker_out)
		snprintf(worker_out, SPACE_ID_MAX + 1, "%s", wl[pick].id);
	return 0;
}

/* ---- create and kill ---- */

struct create_ctx {
	const char *owner, *id, *spec;
	const struct sandbox_spec *sp;
	json_t **out;
	const char **why;
};

/* the asking key's quota, read in the create's transaction so that a
 * burst of parallel creates cannot all pass on the same count */
static int
quota_check(struct store *s, const struct sandbox_spec *sp, int64_t now, bool create,
    const char **why)
{
	struct key_quota q;
	struct res want;
	int64_t running = 0, mem = 0, recent = 0, oldest = 0;
	int rc;

	if (sp->api_key == NULL)
		return 0;
	if ((rc = R(s)->key_usage(s, sp->api_key, now, &q, &running, &mem, &recent, &oldest)) < 0)
		return rc;
	if ((rc = lc_spec_want(sp->resources, &want)) < 0)
		return rc;
	if (create && q.creates_per_minute > 0 && recent >= q.creates_per_minute) {
		*why = "this API key's creates per minute are used up";
		if (sp->retry_after)
			*sp->retry_after = (int)(oldest + 60 - now > 0 ? oldest + 60 - now : 1);
		return -EDQUOT;
	}
	if (q.max_sandboxes > 0 && running >= q.max_sandboxes) {
		*why = "this API key's running sandboxes are at its quota";
		if (sp->retry_after)
			*sp->retry_after = LC_QUOTA_RETRY;
		return -EDQUOT;
	}
	if (q.max_memory_mb > 0 && mem + want.memory_mb > q.max_memory_mb) {
		*why = "this API key's sandboxes' memory would exceed its quota";
		if (sp->retry_after)
			*sp->retry_after = LC_QUOTA_RETRY;
		return -EDQUOT;
	}
	return 0;
}

/* a resume makes a paused (or failed) sandbox count again: it passes the
 * running and memory quota of the key that created the sandbox, in the
 * resume's transaction (creates per minute are creates only). When that
 * key was revoked since (a rotation), or the sandbox predates keys'
 * quotas, the key that asks (asking, NULL: none) passes it instead and
 * holds the sandbox from then on: a sandbox paused under a key that is
 * then revoked would otherwise run again counted against no key. */
int
lc_resume_quota(struct store *s, const char *sandbox, const char *resources, const char *asking,
    int *retry_after, const char **why)
{
	char key[STORE_CREDID_LEN + 1] = "";
	struct sandbox_spec sp;
	int rc;

	if ((rc = R(s)->sandbox_key(s, sandbox, key)) <= 0)
		return rc;
	memset(&sp, 0, sizeof(sp));
	sp.resources = resources;
	sp.retry_after = retry_after;
	if (key[0] != '\0') {
		sp.api_key = key;
		if ((rc = quota_check(s, &sp, now_unix(), false, why)) != -ENOENT)
			return rc;
	}
	if (asking == NULL || asking[0] == '\0' || strcmp(asking, key) == 0)
		return 0;
	sp.api_key = asking;
	if ((rc = quota_check(s, &sp, now_unix(), false, why)) < 0)
		return rc == -ENOENT ? 0 : rc;
	return R(s)->sandbox_set_key(s, sandbox, asking);
}

static int
create_tx(struct store *s, void *arg)
{
	struct create_ctx *x = arg;
	int64_t now = now_unix();
	int rc;

	if ((rc = quota_check(s, x->sp, now, true, x->why)) < 0)
		return rc;

	if ((rc = R(s)->sandbox_insert(s, x->owner, x->id, x->sp, now)) < 0)
		return rc;
	if ((rc = lc_place_execution(s, x->id, x->sp->pinned, NULL, x->spec, x->why, NULL, NULL)) < 0)
		return rc;
	if ((rc = R(s)->audit(s, x->owner, "sandbox.create", x->id, NULL)) < 0)
		return rc;
	/* loaded inside the transaction, so the answer is what gets committed;
	 * a transaction run again (PostgreSQL's serialization retries) drops
	 * the answer of its earlier run */
	json_decref(*x->out);
	*x->out = NULL;
	return R(s)->sandbox_load(s, x->owner, x->id, x->out);
}

int
lc_sandbox_create(struct store *s, const char *owner, const char *id,
    const struct sandbox_spec *sp, json_t **out, const char **why)
{
	struct create_ctx x = { owner, id, NULL, sp, out, why };
	char *spec = lc_spec_json(sp->template_, sp->resources, NULL);
	int rc;

	if (spec == NULL)
		return -ENOMEM;
	x.spec = spec;
	*out = NULL;
	if ((rc = R(s)->tx(s, create_tx, &x)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	free(spec);
	return rc;
}

/* abandon the unfinished operation of sandbox (a kill wins over it) and
 * release its lease. *kind: the abandoned operation's kind or NULL */
static int
ops_abandon(struct store *s, const char *sandbox, const char **kind)
{
	char k[16] = "", id[SPACE_ID_MAX + 1] = "", owner[SPACE_ID_MAX + 1] = "", detail[160];
	int64_t now = now_unix();
	int rc;

	*kind = NULL;
	if ((rc = R(s)->op_open(s, sandbox, id, k, owner)) < 0)
		return rc;
	if (rc == 1) {
		if ((rc = R(s)->op_end(s, id, "abandoned", now)) < 0)
			return rc;
		if ((rc = R(s)->snapshots_fail_pending(s, sandbox, "sandbox killed")) < 0)
			return rc;
		snprintf(detail, sizeof(detail), "op=%s kind=%s result=abandoned", id, k);
		if ((rc = R(s)->audit(s, owner, "operation.end", sandbox, detail)) < 0)
			return rc;
		*kind = lc_kind_static(k);
	}
	return R(s)->lease_release(s, sandbox, NULL);
}

struct kill_ctx {
	const char *owner, *id;
	json_t **out;
	const char *abandoned;
};

static int
kill_tx(struct store *s, void *arg)
{
	struct kill_ctx *x = arg;
	struct sbx_cur c;
	int64_t now = now_unix();
	int rc;

	if ((rc = R(s)->sandbox_cur(s, x->owner, x->id, &c)) < 0)
		return rc;
	lc_cur_free(&c);
	/* a kill wins over a lifecycle operation in progress: the operation
	 * is abandoned and its lease released in this same transaction, so
	 * no later step of it can place an execution for a killed sandbox */
	if ((rc = ops_abandon(s, x->id, &x->abandoned)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_set_state(s, x->id, "killed")) < 0)
		return rc;
	if (c.gen > 0 && lc_exec_active(c.exec_state)) {
		if ((rc = R(s)->exec_set_retiring(s, x->id, c.gen, now)) < 0)
			return rc;
		/* a kill keeps nothing: the layer is not archived */
		if ((rc = R(s)->assignment_add(s, c.worker, x->id, c.gen, "retire",
		    "{\"snapshot\":false}", now)) < 0)
			return rc;
	} else if (c.gen > 0 && streq(c.exec_state, "failed") &&
	    (rc = R(s)->assignment_add(s, c.worker, x->id, c.gen, "retire",
	    "{\"snapshot\":false}", now)) < 0) {
		/* the worker keeps a failed execution's layer (it may be the
		 * only copy of the user's files) until it is told this */
		return rc;
	}
	if ((rc = R(s)->audit(s, x->owner, "sandbox.kill", x->id, NULL)) < 0)
		return rc;
	json_decref(*x->out);           /* an earlier run's answer (a retry) */
	*x->out = NULL;
	return R(s)->sandbox_load(s, x->owner, x->id, x->out);
}

int
lc_sandbox_kill(struct store *s, const char *owner, const char *id, json_t **out)
{
	struct kill_ctx x = { owner, id, out, NULL };
	int rc;

	*out = NULL;
	if ((rc = R(s)->tx(s, kill_tx, &x)) < 0) {
		json_decref(*out);
		*out = NULL;
		return rc;
	}
	if (x.abandoned && store_op_observe)
		store_op_observe(x.abandoned, "abandoned");
	return 0;
}

/* ---- workers ---- */

/* A worker that registers with a new incarnation was re-created: whatever
 * ran under the old incarnation is gone. Its executions fail, and each
 * sandbox that was live on one gets a new execution (next generation) in
 * the same transaction. */
static int
reassign_lost(struct store *s, const char *worker, const char *old_inc, int *reassigned)
{
	json_t *lost = NULL, *e;
	size_t i;
	int rc;

	if ((rc = R(s)->sandboxes_on(s, worker, old_inc, &lost)) < 0)
		return rc;
	if ((rc = R(s)->execs_fail_resident(s, worker, old_inc, "worker re-created",
	    now_unix())) < 0)
		goto out;
	json_array_foreach(lost, i, e) {
		const char *why = NULL, *id = json_string_value(json_object_get(e, "id"));
		char *spec = lc_spec_json(json_string_value(json_object_get(e, "template")),
		    json_string_value(json_object_get(e, "resources")), NULL);
		if (spec == NULL || id == NULL) {
			free(spec);
			rc = -ENOMEM;
			goto out;
		}
		rc = lc_place_execution(s, id, json_string_value(json_object_get(e, "pinned")), NULL,
		    spec, &why, NULL, NULL);
		free(spec);
		if (rc == -EAGAIN || rc == -EHOSTDOWN || rc == -ENOENT) {
			/* nowhere to run it now: the sandbox fails visibly */
			rc = R(s)->sandbox_set_state(s, id, "failed");
		} else if (rc == 0) {
			rc = R(s)->sandbox_set_state(s, id, "creating");
			(*reassigned)++;
		}
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	json_decref(lost);
	return rc;
}

struct register_ctx {
	const char *worker, *incarnation, *endpoint;
	int64_t capacity;
	const struct res *total;
	int64_t *revision;
	int *reassigned;
};

static int
register_tx(struct store *s, void *arg)
{
	struct register_ctx *x = arg;
	char old[SPACE_ID_MAX + 1] = "";
	int rc;

	*x->reassigned = 0;
	if ((rc = R(s)->worker_incarnation(s, x->worker, old)) < 0)
		return rc;
	if ((rc = R(s)->worker_set_live(s, x->worker, x->incarnation, x->endpoint, x->capacity,
	    x->total, now_unix())) < 0)
		return rc;
	if (old[0] && !streq(old, x->incarnation)) {
		log_info("worker %s re-created (incarnation changed)", x->worker);
		if ((rc = reassign_lost(s, x->worker, old, x->reassigned)) < 0)
			return rc;
	}
	if ((rc = R(s)->audit(s, NULL, "worker.register", x->worker, x->incarnation)) < 0)
		return rc;
	return R(s)->worker_revision(s, x->worker, x->revision);
}

int
lc_worker_register(struct store *s, const char *worker, const char *incarnation,
    const char *endpoint, int64_t capacity, const struct res *total, json_t **out,
    int64_t *revision, int *reassigned)
{
	struct register_ctx x = { worker, incarnation, endpoint, capacity, total, revision,
	    reassigned };
	int rc;

	if ((rc = R(s)->tx(s, register_tx, &x)) < 0)
		return rc;
	*out = json_pack("{s:s,s:s,s:s,s:I,s:s}", "id", worker, "incarnation", incarnation,
	    "endpoint", endpoint, "capacity", (json_int_t)capacity, "state", "live");
	return *out ? 0 : -ENOMEM;
}

/* ---- a worker's report on an execution ---- */

struct status_ctx {
	const char *worker, *state, *error;
	const char *layer_base;         /* a checkpoint: the serving layer's base, "" none */
	const struct route_identity *r;
	const struct snap_report *snap;
	const char **why;
};

/* a digest in the set kept (a JSON object used as a set) */
static int
keep_add(json_t *keep, const char *digest)
{
	if (json_object_get(keep, digest) != NULL)
		return 0;
	return json_object_set_new(keep, digest, json_true()) < 0 ? -ENOMEM : 1;
}

/* The automatic snapshots of sandbox that nothing can restore from any
 * more go (docs/recovery.md, "Collecting the snapshot store"): kept are
 * roots (NULL-terminated: the latest, and at a checkpoint the checkpoint
 * and the serving layer's base), every named snapshot, and whatever these
 * are deltas of, to their whole archives. Called when an execution's end
 * made an archive the latest, so no layer of the sandbox runs from an
 * older one: the next starts from it; and when a checkpoint was
 * recorded, with the base the serving layer has until the worker makes
 * the checkpoint its base. If the base of one that is kept is
 * not known (an archive reported before bases were recorded, or not
 * stored here), nothing goes. The archives of the rows removed are then
 * collected as any other archive nothing references. */
int
lc_snapshots_prune(struct store *s, const char *sandbox, const char *const *roots, int *dropped)
{
	json_t *rows = NULL, *keep = json_object(), *e;
	size_t i;
	int rc, grew;

	*dropped = 0;
	if (keep == NULL)
		return -ENOMEM;
	if ((rc = R(s)->snapshots_of(s, sandbox, &rows)) < 0)
		goto out;
	for (i = 0; roots[i] != NULL; i++)
		if (roots[i][0] && (rc = keep_add(keep, roots[i])) < 0)
			goto out;
	json_array_foreach(rows, i, e) {
		const char *d = json_string_value(json_object_get(e, "digest"));

		if (d != NULL && streq(json_string_value(json_object_get(e, "kind")), "named") &&
		    (rc = keep_add(keep, d)) < 0)
			goto out;
	}
	do {
		grew = 0;
		json_array_foreach(rows, i, e) {
			const char *d = json_string_value(json_object_get(e, "digest"));
			const char *b = json_string_value(json_object_get(e, "base"));

			if (d == NULL || json_object_get(keep, d) == NULL)
				continue;
			if (b == NULL) {
				rc = 0;         /* not known: everything stays */
				goto out;
			}
			if (b[0]) {
				if ((rc = keep_add(keep, b)) < 0)
					goto out;
				grew |= rc;
			}
		}
	} while (grew);
	json_array_foreach(rows, i, e) {
		const char *d = json_string_value(json_object_get(e, "digest"));

		if (d == NULL || json_object_get(keep, d) != NULL ||
		    !streq(json_string_value(json_object_get(e, "kind")), "auto") ||
		    !streq(json_string_value(json_object_get(e, "state")), "ready"))
			continue;
		if ((rc = R(s)->snapshot_drop(s, json_string_value(json_object_get(e, "id")))) < 0)
			goto out;
		(*dropped)++;
	}
	rc = 0;
out:
	json_decref(rows);
	json_decref(keep);
	return rc;
}

/* the archive a worker reported with an execution's end becomes the
 * sandbox's latest snapshot (an automatic one, ready), and the automatic
 * ones it supersedes go */
static int
snap_latest(struct store *s, const struct route_identity *r, const struct snap_report *snap,
    int64_t now)
{
	int rc, dropped = 0;

	if ((rc = R(s)->snapshot_add(s, snap->id, r->sandbox, (int64_t)r->generation, NULL,
	    "auto", "ready", snap->digest, snap->size, now)) < 0)
		return rc;
	if (snap->base != NULL && (rc = R(s)->snapshot_set_base(s, snap->id, snap->base)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_set_snapshot(s, r->sandbox, snap->digest)) < 0)
		return rc;
	{
		const char *roots[] = { snap->digest, NULL };

		if ((rc = lc_snapshots_prune(s, r->sandbox, roots, &dropped)) < 0)
			return rc;
	}
	if (dropped > 0)
		log_info("sandbox %s: %d automatic snapshot(s) superseded by %.12s", r->sandbox,
		    dropped, snap->digest);
	return 0;
}

/* the execution a worker reports on: it must exist, be placed on this
 * worker, in its current life, and the identity must be its own */
static int
reported_exec(struct store *s, const struct status_ctx *x, struct exec_row *e)
{
	const struct route_identity *r = x->r;
	int rc;

	if ((rc = R(s)->exec_get(s, r->sandbox, (int64_t)r->generation, e)) < 0)
		return rc;
	if (rc == 0) {
		*x->why = "no such execution";
		return -ENOENT;
	}
	/* a worker reports only on what was placed on it, in its current life */
	if (!streq(e->worker, x->worker) || !streq(r->worker, x->worker)) {
		*x->why = "execution is not placed on this worker";
		return -EPERM;
	}
	if (!streq(e->substrate, r->substrate) || !streq(e->resident, r->resident)) {
		*x->why = "identity does not match the execution";
		return -ESTALE;
	}
	if ((int64_t)r->activation < e->activation) {
		*x->why = "activation is older than the recorded one";
		return -ESTALE;
	}
	return 0;
}

static int
status_tx(struct store *s, void *arg)
{
	struct status_ctx *x = arg;
	const struct route_identity *r = x->r;
	const struct snap_report *snap = x->snap;
	struct exec_row e;
	int64_t gen = (int64_t)r->generation, now = now_unix();
	bool current;
	int rc;

	if ((rc = reported_exec(s, x, &e)) < 0)
		return rc;
	current = gen == e.maxgen;
	if (streq(x->state, "serving")) {
		if (!lc_exec_active(e.state)) {
			*x->why = "execution is no longer wanted";
			return -ESTALE;
		}
		/* a new activation is a bridge relaunch of the same execution:
		 * only the current generation may move forward */
		if ((int64_t)r->activation > e.activation && !current) {
			*x->why = "activation change on a replaced generation";
			return -ESTALE;
		}
		if ((rc = R(s)->exec_set_serving(s, r->sandbox, gen, (int64_t)r->activation,
		    now)) < 0)
			return rc;
		if (current && (streq(e.sandbox_state, "creating") ||
		    streq(e.sandbox_state, "running")))
			return R(s)->sandbox_set_state(s, r->sandbox, "running");
		return 0;
	}
	if (streq(x->state, "failed")) {
		if (streq(e.state, "retired")) {
			*x->why = "execution is already retired";
			return -ESTALE;
		}
		/* a failure reported again (after a restart of the worker)
		 * keeps the error first reported */
		if ((rc = R(s)->exec_set_failed(s, r->sandbox, gen, x->error ? x->error : "failed",
		    now)) < 0)
			return rc;
		if (current && (streq(e.sandbox_state, "creating") ||
		    streq(e.sandbox_state, "running")) &&
		    (rc = R(s)->sandbox_set_state(s, r->sandbox, "failed")) < 0)
			return rc;
		/* the worker archived the failed execution's layer: the
		 * current generation's archive becomes the latest, which is
		 * what lets a resume bring the sandbox back (an older
		 * generation's failure must not replace a newer archive) */
		if (snap != NULL && snap->digest != NULL && current)
			return snap_latest(s, r, snap, now);
		return 0;
	}
	/* already ended: a repeated report changes nothing */
	if (streq(e.state, "failed") || streq(e.state, "retired"))
		return 0;
	if ((rc = R(s)->exec_set_retired(s, r->sandbox, gen, now)) < 0)
		return rc;
	/* the archive of the retired layer is what a resume or the second
	 * half of a move restores: it becomes the latest */
	if (snap != NULL && snap->digest != NULL)
		return snap_latest(s, r, snap, now);
	return 0;
}

/* a checkpoint: the execution must be the current one, placed on this
 * worker in its current life, and serving */
static int
checkpoint_tx(struct store *s, void *arg)
{
	struct status_ctx *x = arg;
	const struct route_identity *r = x->r;
	struct exec_row e;
	int64_t gen = (int64_t)r->generation;
	int rc;

	if ((rc = reported_exec(s, x, &e)) < 0)
		return rc;
	if (!streq(e.state, "serving") || gen != e.maxgen || !streq(e.sandbox_state, "running")) {
		*x->why = "the execution is not the sandbox's serving one";
		return -ESTALE;
	}
	if ((rc = R(s)->snapshot_add(s, x->snap->id, r->sandbox, gen, NULL, "auto", "ready",
	    x->snap->digest, x->snap->size, now_unix())) < 0)
		return rc;
	if (x->snap->base != NULL &&
	    (rc = R(s)->snapshot_set_base(s, x->snap->id, x->snap->base)) < 0)
		return rc;
	/* the checkpoints it supersedes go: kept are it, the latest (what a
	 * resume or failover restores), the base the serving layer has now
	 * (until the worker makes the checkpoint its base; a worker that
	 * does not say keeps every one), the named ones, and their chains */
	if (x->layer_base != NULL) {
		char latest[SPACE_ID_MAX + 1];
		const char *roots[] = { x->snap->digest, latest, x->layer_base, NULL };
		int dropped = 0;

		if ((rc = R(s)->sandbox_latest(s, r->sandbox, latest)) < 0 ||
		    (rc = lc_snapshots_prune(s, r->sandbox, roots, &dropped)) < 0)
			return rc;
		if (dropped > 0)
			log_info("sandbox %s: %d automatic snapshot(s) superseded by checkpoint %.12s",
			    r->sandbox, dropped, x->snap->digest);
	}
	return 0;
}

int
lc_checkpoint_report(struct store *s, const char *worker, const struct route_identity *r,
    const struct snap_report *snap, const char *layer_base, const char **why)
{
	struct status_ctx x = { worker, "serving", NULL, layer_base, r, snap, why };

	return R(s)->tx(s, checkpoint_tx, &x);
}

int
lc_execution_status(struct store *s, const char *worker, const struct route_identity *r,
    const char *state, const char *error, const struct snap_report *snap, const char **why)
{
	struct status_ctx x = { worker, state, error, NULL, r, snap, why };

	return R(s)->tx(s, status_tx, &x);
}

