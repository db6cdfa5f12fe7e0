/* The lifecycle state machine, operations half: pause, resume, move and
 * named snapshots (lifecycle.c has the executions half).
 *
 * An operation is a row of `operations` plus the lease of its sandbox.
 * Starting one takes the lease by compare-and-swap and writes its first
 * step (a retire, an install or a snapshot assignment) in the same
 * transaction. Every later step is computed from persisted rows only (the
 * operation's step and the states of the executions and snapshots that
 * workers reported), one transaction per step, by whichever daemon holds
 * the lease; a daemon that finds a lease expired takes it over. So a kill
 * -9 at any point leaves a row set from which the next daemon continues,
 * and no step is ever taken twice: each one changes the step it is based
 * on in the transaction that performs it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "store_tx.h"
#include "lifecycle.h"
#include "util.h"

#define OPS_DRIVE_BATCH 256

/* ---- starting an operation ---- */

/* retire the current execution, asking the worker to archive its layer
 * first: the archive is what the next execution restores */
static int
retire_current(struct store *s, const char *sandbox, const struct sbx_cur *c, int64_t now)
{
	int rc;

	if ((rc = R(s)->exec_set_retiring(s, sandbox, c->gen, now)) < 0)
		return rc;
	return R(s)->assignment_add(s, c->worker, sandbox, c->gen, "retire",
	    "{\"snapshot\":true}", now);
}

/* a worker refusal of placement is the caller's to fix (409); no room
 * anywhere is transient (503) */
static int
placement_error(int rc, bool pinned)
{
	if (rc == -ENOENT || rc == -EHOSTDOWN || (rc == -EAGAIN && pinned))
		return -EPERM;
	return rc;
}

/* the target of a move must be live with room now; it is checked again
 * when the install is placed, since it may fill up while the old
 * execution retires */
static int
move_target_ok(struct store *s, const char *target, const char *resources, const char **why)
{
	struct worker_load wl[1];
	struct res want;
	size_t n = 0;
	int rc;

	if ((rc = lc_spec_want(resources, &want)) < 0)
		return rc;
	if ((rc = R(s)->workers_load(s, target, NULL, wl, 1, &n)) < 0)
		return rc;
	if (n == 0 || !streq(wl[0].id, target)) {
		*why = "the target worker is unknown";
		return -EPERM;
	}
	if (!wl[0].live) {
		*why = "the target worker is not live";
		return -EPERM;
	}
	if (!scheduler_fits(&wl[0], &want, &s->oc)) {
		*why = "the target worker has no free capacity";
		return -EPERM;
	}
	return 0;
}

static int
start_retire(struct store *s, const char *sandbox, const struct op_request *rq,
    struct sbx_cur *c, int64_t now, const char **why)
{
	bool pause = streq(rq->kind, "pause");
	struct op_new on = { .id = rq->op_id, .sandbox = sandbox, .kind = rq->kind,
	    .target = pause ? NULL : rq->worker, .step = "retiring", .reason = rq->reason,
	    .from_gen = c->gen };
	int rc;

	if (!streq(c->state, "running") || !lc_exec_active(c->exec_state)) {
		*why = pause ? "only a running sandbox can be paused" :
		    "only a running sandbox can be moved";
		return -EPERM;
	}
	/* a route just handed to a client's repair must still serve when
	 * its one rebuilt attempt arrives: retiring it now would turn that
	 * attempt into a second refusal (the caller waits and retries) */
	if (!rq->past_hold && c->route_hold_until > now_unix_ms()) {
		*why = "a route handed to a repair is held";
		return -EBUSY;
	}
	if (!pause) {
		if (streq(rq->worker, c->worker)) {
			*why = "the sandbox already runs on that worker";
			return -EPERM;
		}
		if ((rc = move_target_ok(s, rq->worker, c->resources, why)) < 0)
			return rc;
	}
	if ((rc = retire_current(s, sandbox, c, now)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_set_state(s, sandbox, pause ? "pausing" : "moving")) < 0)
		return rc;
	return R(s)->op_insert(s, &on, now);
}

static int
start_resume(struct store *s, const char *sandbox, const struct op_request *rq,
    struct sbx_cur *c, int64_t now, const char **why)
{
	struct op_new on = { .id = rq->op_id, .sandbox = sandbox, .kind = "resume",
	    .step = "installing", .reason = rq->reason, .from_gen = c->gen };
	char placed[SPACE_ID_MAX + 1] = "", *spec;
	const char *pin;
	int rc;

	if (streq(c->state, "failed")) {
		/* only from an archive of the failed execution itself:
		 * resuming from an older one would silently roll the sandbox
		 * back. A move that found nowhere to install left its
		 * execution retired with its own archive: as a pause would. */
		rc = (streq(c->exec_state, "failed") || streq(c->exec_state, "retired")) &&
		    c->snapshot[0] ? R(s)->snapshot_has(s, sandbox, c->gen, c->snapshot) : 0;
		/* or lost with its worker: the latest snapshot is all that
		 * is left of it (failover.c) */
		if (rc == 0 && streq(c->exec_state, "failed"))
			rc = lc_lost_resumable(s, sandbox, c->gen, c->snapshot);
		if (rc < 0)
			return rc;
		if (rc == 0) {
			*why = "the failed execution's files were not archived; it cannot be resumed";
			return -EPERM;
		}
	} else if (!streq(c->state, "paused")) {
		*why = "only a paused sandbox can be resumed (or a failed one whose files were archived)";
		return -EPERM;
	}
	if ((rc = lc_resume_quota(s, sandbox, c->resources, rq->api_key, rq->retry_after, why)) < 0)
		return rc;
	if ((spec = lc_spec_json(c->template_, c->resources, c->snapshot[0] ? c->snapshot : NULL)) == NULL)
		return -ENOMEM;
	/* a named worker, else the sandbox's pin, else the previous worker
	 * when it has room (its caches are warm), else the scheduler's choice */
	pin = rq->worker ? rq->worker : c->pinned[0] ? c->pinned : NULL;
	rc = lc_place_execution(s, sandbox, pin, c->worker[0] ? c->worker : NULL, spec, why,
	    &on.to_gen, placed);
	free(spec);
	if (rc < 0)
		return placement_error(rc, pin != NULL);
	if (rq->worker != NULL && c->pinned[0] &&
	    (rc = R(s)->sandbox_set_pin(s, sandbox, rq->worker)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_set_state(s, sandbox, "resuming")) < 0)
		return rc;
	on.target = placed;
	return R(s)->op_insert(s, &on, now);
}

static int
start_snapshot(struct store *s, const char *owner, const char *sandbox,
    const struct op_request *rq, struct sbx_cur *c, int64_t now, const char **why)
{
	struct op_new on = { .id = rq->op_id, .sandbox = sandbox, .kind = "snapshot",
	    .step = "snapshotting", .snapshot_id = rq->snapshot_id, .reason = rq->reason,
	    .from_gen = c->gen };
	json_t *sp;
	char *spec;
	int rc;

	if (!streq(c->state, "running") || !streq(c->exec_state, "serving")) {
		*why = "snapshots are taken of a running sandbox";
		return -EPERM;
	}
	/* named snapshots are kept until deleted: the operator's bound on
	 * how many one sandbox holds */
	if (rq->max_named > 0) {
		int64_t n = 0;

		if ((rc = R(s)->snapshot_named_count(s, sandbox, &n)) < 0)
			return rc;
		if (n >= rq->max_named) {
			*why = "the sandbox holds as many named snapshots as it may "
			    "(--max-named-snapshots): delete one first";
			return -EDQUOT;
		}
	}
	/* and on how much the owner's named snapshots hold, over all its
	 * sandboxes, killed ones too (their named snapshots stay): checked
	 * before, so one snapshot may take it past the bound, not two */
	if (rq->max_named_mb > 0) {
		int64_t bytes = 0;

		if ((rc = R(s)->snapshot_named_bytes(s, owner, &bytes)) < 0)
			return rc;
		if (bytes >= rq->max_named_mb * 1048576) {
			*why = "the named snapshots of this principal hold as much as they may "
			    "(--max-named-snapshot-mb): delete some first";
			return -EDQUOT;
		}
	}
	if ((rc = R(s)->snapshot_add(s, rq->snapshot_id, sandbox, c->gen, rq->name, "named",
	    "pending", NULL, -1, now)) < 0)
		return rc;
	sp = json_pack("{s:s,s:s?}", "snapshot_id", rq->snapshot_id, "name", rq->name);
	spec = sp ? json_dumps(sp, JSON_COMPACT) : NULL;
	json_decref(sp);
	if (spec == NULL)
		return -ENOMEM;
	rc = R(s)->assignment_add(s, c->worker, sandbox, c->gen, "snapshot", spec, now);
	free(spec);
	if (rc < 0)
		return rc;
	return R(s)->op_insert(s, &on, now);
}

/* ---- forgetting a named snapshot ---- */

struct forget_ctx {
	const char *owner, *sandbox, *id;
	const char **why;
};

static int
forget_tx(struct store *s, void *arg)
{
	struct forget_ctx *x = arg;
	struct snap_row sn;
	struct sbx_cur c;
	int rc;

	if ((rc = R(s)->sandbox_cur(s, x->owner, x->sandbox, &c)) < 0)
		return rc;
	if ((rc = R(s)->snapshot_named_get(s, x->id, &sn)) < 0)
		goto out;
	if (rc == 0 || !streq(sn.sandbox, x->sandbox)) {
		rc = -ENOENT;
		goto out;
	}
	if (streq(sn.state, "pending")) {
		*x->why = "the snapshot is still being taken";
		rc = -EPERM;
		goto out;
	}
	/* a killed sandbox's row goes (its archive is then collected); a
	 * live one's stays as an automatic snapshot, kept while the sandbox
	 * lives: a later archive of the sandbox may be a delta of it
	 * (docs/recovery.md, "Collecting the snapshot store") */
	if ((rc = R(s)->snapshot_unname(s, x->id, streq(c.state, "killed"))) < 0)
		goto out;
	rc = R(s)->audit(s, x->owner, "snapshot.delete", x->sandbox, x->id);
out:
	lc_cur_free(&c);
	return rc;
}

int
lc_snapshot_forget(struct store *s, const char *owner, const char *sandbox, const char *id,
    const char **why)
{
	struct forget_ctx x = { owner, sandbox, id, why };

	return R(s)->tx(s, forget_tx, &x);
}

struct start_ctx {
	const char *owner, *sandbox;
	const struct op_request *rq;
	json_t **out;
	const char **why;
};

static int
start_tx(struct store *s, void *arg)
{
	struct start_ctx *x = arg;
	const struct op_request *rq = x->rq;
	struct sbx_cur c;
	char detail[256], action[32], oid[SPACE_ID_MAX + 1], ok[16], oo[SPACE_ID_MAX + 1];
	int64_t now = now_unix();
	int rc;

	if ((rc = R(s)->sandbox_cur(s, x->owner, x->sandbox, &c)) < 0)
		return rc;
	/* the ownership lease: compare-and-swap, so of two concurrent
	 * operations (threads here or another daemon on the same store)
	 * exactly one changes the row */
	if ((rc = R(s)->lease_take(s, x->sandbox, rq->lease_owner, now + rq->lease_ttl, now)) <= 0) {
		if (rc == 0) {
			*x->why = "another lifecycle operation is in progress";
			rc = -EALREADY;
		}
		goto out;
	}
	/* an expired lease over an unfinished operation belongs to the
	 * takeover of that operation, not to a new one */
	if ((rc = R(s)->op_open(s, x->sandbox, oid, ok, oo)) != 0) {
		if (rc > 0) {
			*x->why = "another lifecycle operation is in progress";
			rc = -EALREADY;
		}
		goto out;
	}
	if (streq(rq->kind, "pause") || streq(rq->kind, "move"))
		rc = start_retire(s, x->sandbox, rq, &c, now, x->why);
	else if (streq(rq->kind, "resume"))
		rc = start_resume(s, x->sandbox, rq, &c, now, x->why);
	else if (streq(rq->kind, "snapshot"))
		rc = start_snapshot(s, x->owner, x->sandbox, rq, &c, now, x->why);
	else {
		*x->why = "unknown operation";
		rc = -EINVAL;
	}
	if (rc < 0)
		goto out;
	snprintf(detail, sizeof(detail), "op=%s reason=%s%s%s", rq->op_id,
	    rq->reason ? rq->reason : "api", rq->worker ? " worker=" : "",
	    rq->worker ? rq->worker : "");
	snprintf(action, sizeof(action), "sandbox.%s", rq->kind);
	if ((rc = R(s)->audit(s, x->owner, action, x->sandbox, detail)) < 0)
		goto out;
	json_decref(*x->out);           /* an earlier run's answer (a retry) */
	*x->out = NULL;
	if (streq(rq->kind, "snapshot")) {
		*x->out = json_pack("{s:{s:s,s:s?,s:s,s:n}}", "snapshot", "id", rq->snapshot_id,
		    "name", rq->name, "state", "pending", "digest");
		rc = *x->out ? 0 : -ENOMEM;
	} else {
		rc = R(s)->sandbox_load(s, x->owner, x->sandbox, x->out);
	}
out:
	lc_cur_free(&c);
	return rc;
}

int
lc_op_start(struct store *s, const char *owner, const char *sandbox,
    const struct op_request *rq, json_t **out, const char **why)
{
	struct start_ctx x = { owner, sandbox, rq, out, why };
	int rc;

	*out = NULL;
	if ((rc = R(s)->tx(s, start_tx, &x)) < 0) {
		json_decref(*out);
		*out = NULL;
		return rc;
	}
	log_info("operation %s (%s) on %s started", rq->op_id, rq->kind, sandbox);
	return 0;
}

/* ---- driving operations ---- */

/* end an operation: the row is done, the lease released */
static int
finish(struct store *s, const struct op_view *o, const char *me, const char *result,
    int64_t now)
{
	char detail[160];
	int rc;

	if ((rc = R(s)->op_end(s, o->id, result, now)) < 0)
		return rc;
	if ((rc = R(s)->lease_release(s, o->sandbox, me)) < 0)
		return rc;
	snprintf(detail, sizeof(detail), "op=%s kind=%s result=%s", o->id, o->kind, result);
	return R(s)->audit(s, o->owner, "operation.end", o->sandbox, detail);
}

/* the second half of a move: the next generation on the target, restoring
 * the archive the old worker made. A target that went away meanwhile is
 * replaced by the old worker or the scheduler's choice: the sandbox must
 * run somewhere, and its data is in the snapshot store, not on a worker. */
static int
move_install(struct store *s, struct op_view *o, int64_t now, const char **result)
{
	char placed[SPACE_ID_MAX + 1] = "", *spec;
	const char *why = NULL;
	int64_t gen = 0;
	int rc;

	spec = lc_spec_json(o->template_, o->resources, o->from_snapshot);
	if (spec == NULL)
		return -ENOMEM;
	rc = lc_place_execution(s, o->sandbox, o->target, NULL, spec, &why, &gen, placed);
	if (rc == -ENOENT || rc == -EHOSTDOWN || rc == -EAGAIN) {
		log_warnx("operation %s: target %s refused (%s), placing elsewhere", o->id,
		    o->target, why ? why : "?");
		rc = lc_place_execution(s, o->sandbox, NULL, o->from_worker, spec, &why, &gen, placed);
	}
	free(spec);
	if (rc == -EAGAIN || rc == -EHOSTDOWN || rc == -ENOENT) {
		log_warnx("operation %s: nowhere to run %s: %s", o->id, o->sandbox, why ? why : "?");
		*result = "failed";
		return R(s)->sandbox_set_state(s, o->sandbox, "failed");
	}
	if (rc < 0)
		return rc;
	if (o->pinned[0] && (rc = R(s)->sandbox_set_pin(s, o->sandbox, placed)) < 0)
		return rc;
	return R(s)->op_set_installing(s, o->id, gen, placed, now);
}

/* the result the persisted rows give the operation's current step, or
 * NULL while it waits; a step that places an install sets *changed */
static int
step_result(struct store *s, struct op_view *o, int64_t now, const char **result,
    int *changed)
{
	int rc;

	if (streq(o->step, "retiring")) {
		if (streq(o->from_state, "retired") && o->from_snapshot[0] == '\0') {
			/* the worker retired the execution without archiving its
			 * layer: continuing from an older snapshot would silently
			 * roll the sandbox back, so it fails visibly instead */
			log_warnx("operation %s: %s g%lld retired without a snapshot", o->id,
			    o->sandbox, (long long)o->from_gen);
			*result = "failed";
			return R(s)->sandbox_set_state(s, o->sandbox, "failed");
		}
		/* an execution that failed while it was being retired (its
		 * bridge kept dying, or its relaunch failed) whose worker
		 * archived its stopped layer with the report: that archive is
		 * what a retirement's would have been (nothing runs on the
		 * layer any more), so the pause or move goes on from it */
		if (streq(o->from_state, "retired") ||
		    (streq(o->from_state, "failed") && o->from_snapshot[0] != '\0')) {
			if (streq(o->from_state, "failed"))
				log_warnx("operation %s: %s g%lld failed; its layer's archive %s "
				    "carries the %s on", o->id, o->sandbox, (long long)o->from_gen,
				    o->from_snapshot, o->kind);
			*changed = 1;
			if (streq(o->kind, "pause")) {
				*result = "ok";
				return R(s)->sandbox_set_state(s, o->sandbox, "paused");
			}
			return move_install(s, o, now, result);
		}
		if (streq(o->from_state, "failed") || o->from_state[0] == '\0') {
			*result = "failed";
			return R(s)->sandbox_set_state(s, o->sandbox, "failed");
		}
	} else if (streq(o->step, "installing")) {
		if (streq(o->to_state, "serving")) {
			*result = "ok";
			return R(s)->sandbox_set_state(s, o->sandbox, "running");
		}
		if (streq(o->to_state, "failed") || streq(o->to_state, "retired") ||
		    o->to_state[0] == '\0') {
			*result = "failed";
			return R(s)->sandbox_set_state(s, o->sandbox, "failed");
		}
	} else if (streq(o->step, "snapshotting")) {
		if (streq(o->snap_state, "ready")) {
			*result = "ok";
		} else if (streq(o->snap_state, "failed")) {
			*result = "failed";
		} else if (!lc_exec_active(o->from_state)) {
			/* the execution ended before archiving: nothing will come */
			*result = "failed";
			if ((rc = R(s)->snapshot_set_failed(s, o->snapshot_id, "execution ended")) < 0)
				return rc;
		}
	}
	return 0;
}

struct drive_ctx {
	const char *id, *me;
	int64_t ttl;
	bool advance;
	int changed;
	struct op_view o;
	const char *result;
};

/* one step of one operation, in one transaction */
static int
drive_tx(struct store *s, void *arg)
{
	struct drive_ctx *x = arg;
	struct op_view *o = &x->o;
	char detail[192];
	int64_t now;
	int rc;

	/* a retried transaction starts again: nothing of a rolled-back
	 * attempt is reported or kept */
	x->result = NULL;
	x->changed = 0;
	free(o->template_);
	free(o->resources);
	o->template_ = o->resources = NULL;
	/* the clock is read once the transaction is ours: taking it may have
	 * waited on another daemon's, and an expiry computed from before the
	 * wait could already be past (an unneeded takeover) */
	now = now_unix();
	if ((rc = R(s)->op_get(s, x->id, o)) <= 0)
		return rc;
	if (o->leased && streq(o->lease_owner, x->me)) {
		/* ours: renewed while the operation is in progress */
		if ((rc = R(s)->lease_renew(s, o->sandbox, x->me, now + x->ttl)) < 0)
			return rc;
	} else if (!o->leased || o->lease_expiry < now) {
		/* takeover: the owner stopped renewing. Only the lease moves;
		 * the executions, their identities and the capabilities issued
		 * for them are untouched. */
		if ((rc = R(s)->lease_take(s, o->sandbox, x->me, now + x->ttl, now)) <= 0)
			return rc;
		snprintf(detail, sizeof(detail), "op=%s kind=%s from=%s", o->id, o->kind,
		    o->leased ? o->lease_owner : "-");
		if ((rc = R(s)->audit(s, o->owner, "operation.takeover", o->sandbox, detail)) < 0)
			return rc;
		log_info("operation %s (%s) on %s taken over from %s", o->id, o->kind, o->sandbox,
		    o->leased ? o->lease_owner : "nobody");
	} else {
		return 0;       /* another daemon's, still renewed */
	}
	if (!x->advance)
		return 0;
	if ((rc = step_result(s, o, now, &x->result, &x->changed)) < 0)
		return rc;
	if (x->result != NULL) {
		if ((rc = finish(s, o, x->me, x->result, now)) < 0)
			return rc;
		x->changed = 1;
	}
	return 0;
}

int
lc_ops_drive(struct store *s, const char *me, int64_t ttl, const char *sandbox, bool advance)
{
	char (*ids)[SPACE_ID_MAX + 1];
	size_t n = 0, i;
	int rc, total = 0;

	if ((ids = calloc(OPS_DRIVE_BATCH, sizeof(*ids))) == NULL)
		return -ENOMEM;
	if ((rc = R(s)->ops_open_list(s, sandbox, ids, OPS_DRIVE_BATCH, &n)) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		struct drive_ctx x = { .id = ids[i], .me = me, .ttl = ttl, .advance = advance };
		if ((rc = R(s)->tx(s, drive_tx, &x)) < 0) {
			log_warnx("operation %s: step failed (%d), retried next tick", ids[i], rc);
		} else {
			if (x.result != NULL) {
				log_info("operation %s (%s) on %s: %s", x.o.id, x.o.kind,
				    x.o.sandbox, x.result);
				if (store_op_observe)
					store_op_observe(lc_kind_static(x.o.kind),
					    streq(x.result, "ok") ? "ok" : "failed");
			}
			total += x.changed;
		}
		free(x.o.template_);
		free(x.o.resources);
	}
	rc = total;
out:
	free(ids);
	return rc;
}

/* ---- a worker's answer to a snapshot assignment ---- */

struct snapshot_ctx {
	const char *worker, *snapshot_id, *sandbox, *digest, *base, *error;
	int64_t generation, size;
	const char **why;
};

static int
snapshot_tx(struct store *s, void *arg)
{
	struct snapshot_ctx *x = arg;
	struct snap_row sn;
	int rc;

	if ((rc = R(s)->snapshot_named_get(s, x->snapshot_id, &sn)) < 0)
		return rc;
	if (rc == 0) {
		*x->why = "no such snapshot";
		return -ENOENT;
	}
	/* a worker answers only for the execution the snapshot was asked of */
	if (!streq(sn.worker, x->worker)) {
		*x->why = "the snapshot was not assigned to this worker";
		return -EPERM;
	}
	if ((x->sandbox && !streq(x->sandbox, sn.sandbox)) ||
	    (x->generation > 0 && x->generation != sn.generation)) {
		*x->why = "the snapshot belongs to another execution";
		return -ESTALE;
	}
	if (!streq(sn.state, "pending")) {
		/* a repeated report of the same archive is harmless */
		if (x->digest && streq(sn.state, "ready") && streq(sn.digest, x->digest))
			return 0;
		*x->why = "the snapshot was already reported";
		return -ESTALE;
	}
	if (x->digest == NULL)
		return R(s)->snapshot_set_failed(s, x->snapshot_id, x->error ? x->error : "failed");
	if ((rc = R(s)->snapshot_set_ready(s, x->snapshot_id, x->digest, x->size)) < 0)
		return rc;
	if (x->base != NULL && (rc = R(s)->snapshot_set_base(s, x->snapshot_id, x->base)) < 0)
		return rc;
	return R(s)->sandbox_set_snapshot(s, sn.sandbox, x->digest);
}

int
lc_snapshot_report(struct store *s, const char *worker, const char *snapshot_id,
    const char *sandbox, int64_t generation, const char *digest, const char *base,
    int64_t size, const char *error, const char **why)
{
	struct snapshot_ctx x = { worker, snapshot_id, sandbox, digest, base, error, generation,
	    size, why };

	return R(s)->tx(s, snapshot_tx, &x);
}
