/* The SQLite backend, lifecycle half: operations (pause, resume, move,
 * named snapshot), their ownership leases, snapshot rows and timeouts.
 *
 * An operation is a row of `operations` plus the lease columns of its
 * sandbox. Starting one takes the lease by compare-and-swap and writes its
 * first step (a retire, an install or a snapshot assignment) in the same
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
#include <sqlite3.h>

#include "log.h"
#include "store.h"
#include "store_sqlite.h"
#include "util.h"

#define OPS_DRIVE_BATCH 256

static bool
streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* label values for metrics come from this table, never from a row */
static const char *
kind_static(const char *k)
{
	static const char *const kinds[] = { "pause", "resume", "move", "snapshot", NULL };
	size_t i;

	for (i = 0; kinds[i]; i++)
		if (streq(k, kinds[i]))
			return kinds[i];
	return "other";
}

static bool
exec_active(const char *state)
{
	return streq(state, "pending") || streq(state, "starting") || streq(state, "serving");
}

/* the sandbox and its current (highest) execution, inside a transaction */
struct cur {
	char    state[STORE_STATE_MAX + 1];
	char    lease_owner[SPACE_ID_MAX + 1];
	char    snapshot[SPACE_ID_MAX + 1];    /* latest digest, "" = none */
	char    pinned[SPACE_ID_MAX + 1];      /* "" = not pinned */
	char   *template_, *resources;
	int64_t gen;                            /* 0 = no execution */
	char    worker[SPACE_ID_MAX + 1];
	char    exec_state[STORE_STATE_MAX + 1];
};

static void
cur_free(struct cur *c)
{
	free(c->template_);
	free(c->resources);
	c->template_ = c->resources = NULL;
}

static int
cur_load(struct sq *q, const char *owner, const char *id, struct cur *c)
{
	sqlite3_stmt *st;
	int rc;

	memset(c, 0, sizeof(*c));
	st = sq_prep(q->db, "SELECT s.state, COALESCE(s.lease_owner,''), COALESCE(s.snapshot,''),"
	    " COALESCE(s.pinned_worker,''), s.template, s.resources,"
	    " COALESCE(e.generation, 0), COALESCE(e.worker,''), COALESCE(e.state,'')"
	    " FROM sandboxes s LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.owner = ? AND s.id = ?", "ss", owner, id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, c->state, sizeof(c->state));
		sq_col_copy(st, 1, c->lease_owner, sizeof(c->lease_owner));
		sq_col_copy(st, 2, c->snapshot, sizeof(c->snapshot));
		sq_col_copy(st, 3, c->pinned, sizeof(c->pinned));
		c->template_ = strdup((const char *)sqlite3_column_text(st, 4));
		c->resources = strdup((const char *)sqlite3_column_text(st, 5));
		c->gen = sqlite3_column_int64(st, 6);
		sq_col_copy(st, 7, c->worker, sizeof(c->worker));
		sq_col_copy(st, 8, c->exec_state, sizeof(c->exec_state));
		rc = c->template_ && c->resources ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sqlite3_finalize(st);
	return rc;
}

/* 1 when the failed sandbox's current execution failed and the worker
 * archived its layer (the latest snapshot is that generation's), else 0 */
static int
failed_salvaged(struct sq *q, const char *sandbox, const struct cur *c)
{
	sqlite3_stmt *st;
	int rc;

	if (!streq(c->exec_state, "failed") || c->snapshot[0] == '\0')
		return 0;
	st = sq_prep(q->db, "SELECT COUNT(*) FROM snapshots WHERE sandbox = ? AND generation = ?"
	    " AND digest = ? AND state = 'ready'", "sis", sandbox, c->gen, c->snapshot);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1)
		rc = sqlite3_column_int64(st, 0) > 0;
	sqlite3_finalize(st);
	return rc;
}

static int
audit_row(struct sq *q, const char *principal, const char *action, const char *target,
    const char *detail)
{
	return sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,principal,action,target,detail)"
	    " VALUES (?,?,?,?,?)", "issss", now_unix(), principal, action, target, detail));
}

/* retire the current execution, asking the worker to archive its layer
 * first: the archive is what the next execution restores */
static int
retire_current(struct sq *q, const char *sandbox, const struct cur *c, int64_t now)
{
	int rc;

	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'retiring',"
	    " updated_at = ? WHERE sandbox = ? AND generation = ?", "isi", now, sandbox,
	    c->gen))) < 0)
		return rc;
	return sq_run(q->db, sq_prep(q->db, "INSERT INTO assignments (worker, sandbox, generation,"
	    " action, spec, created_at) VALUES (?,?,?,'retire','{\"snapshot\":true}',?)", "ssii",
	    c->worker, sandbox, c->gen, now));
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

static int
start_step(struct sq *q, const char *sandbox, const struct op_request *rq, struct cur *c,
    int64_t now, const char **why)
{
	const char *kind = rq->kind, *pin;
	sqlite3_stmt *st;
	char placed[SPACE_ID_MAX + 1] = "", *spec = NULL;
	int64_t gen = 0;
	int rc;

	if (streq(kind, "pause") || streq(kind, "move")) {
		if (!streq(c->state, "running") || !exec_active(c->exec_state)) {
			*why = streq(kind, "pause") ? "only a running sandbox can be paused" :
			    "only a running sandbox can be moved";
			return -EPERM;
		}
		if (streq(kind, "move")) {
			char wstate[STORE_STATE_MAX + 1] = "", winc[SPACE_ID_MAX + 1] = "";
			bool room = false;
			if (streq(rq->worker, c->worker)) {
				*why = "the sandbox already runs on that worker";
				return -EPERM;
			}
			st = sq_prep(q->db, "SELECT w.state, COALESCE(w.incarnation,''), w.capacity >"
			    " (SELECT COUNT(*) FROM executions e WHERE e.worker = w.id"
			    "   AND e.resident = w.incarnation AND e.state IN ('pending','starting','serving'))"
			    " FROM workers w WHERE w.id = ?", "s", rq->worker);
			if (st == NULL)
				return -EIO;
			rc = sq_step_row(q->db, st);
			if (rc == 1) {
				sq_col_copy(st, 0, wstate, sizeof(wstate));
				sq_col_copy(st, 1, winc, sizeof(winc));
				room = sqlite3_column_int(st, 2) != 0;
			}
			sqlite3_finalize(st);
			if (rc < 0)
				return rc;
			if (rc == 0) {
				*why = "the target worker is unknown";
				return -EPERM;
			}
			if (!streq(wstate, "live") || winc[0] == '\0') {
				*why = "the target worker is not live";
				return -EPERM;
			}
			/* checked again when the install is placed: the target may
			 * fill up while the old execution retires */
			if (!room) {
				*why = "the target worker has no free capacity";
				return -EPERM;
			}
		}
		if ((rc = retire_current(q, sandbox, c, now)) < 0)
			return rc;
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = ? WHERE id = ?",
		    "ss", streq(kind, "pause") ? "pausing" : "moving", sandbox))) < 0)
			return rc;
		return sq_run(q->db, sq_prep(q->db, "INSERT INTO operations (id, sandbox, kind, target,"
		    " step, from_gen, reason, created, updated) VALUES (?,?,?,?,'retiring',?,?,?,?)",
		    "ssssisii", rq->op_id, sandbox, kind, streq(kind, "move") ? rq->worker : NULL,
		    c->gen, rq->reason, now, now));
	}
	if (streq(kind, "resume")) {
		if (streq(c->state, "failed")) {
			/* only from an archive of the failed execution itself:
			 * resuming from an older one would silently roll the
			 * sandbox back */
			if ((rc = failed_salvaged(q, sandbox, c)) < 0)
				return rc;
			if (rc == 0) {
				*why = "the failed execution's files were not archived; it cannot be resumed";
				return -EPERM;
			}
		} else if (!streq(c->state, "paused")) {
			*why = "only a paused sandbox can be resumed (or a failed one whose files were archived)";
			return -EPERM;
		}
		if ((spec = sq_spec_json(c->template_, c->resources,
		    c->snapshot[0] ? c->snapshot : NULL)) == NULL)
			return -ENOMEM;
		/* a named worker, else the sandbox's pin, else the previous
		 * worker when it has room (its caches are warm), else the
		 * scheduler's choice */
		pin = rq->worker ? rq->worker : c->pinned[0] ? c->pinned : NULL;
		rc = sq_place_execution(q, sandbox, pin, c->worker[0] ? c->worker : NULL,
		    spec, why, &gen, placed);
		free(spec);
		if (rc < 0)
			return placement_error(rc, pin != NULL);
		if (rq->worker != NULL && c->pinned[0] &&
		    (rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET pinned_worker = ?"
		    " WHERE id = ?", "ss", rq->worker, sandbox))) < 0)
			return rc;
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'resuming'"
		    " WHERE id = ?", "s", sandbox))) < 0)
			return rc;
		return sq_run(q->db, sq_prep(q->db, "INSERT INTO operations (id, sandbox, kind, target,"
		    " step, from_gen, to_gen, reason, created, updated)"
		    " VALUES (?,?,'resume',?,'installing',?,?,?,?,?)", "sssiisii", rq->op_id, sandbox,
		    placed, c->gen, gen, rq->reason, now, now));
	}
	if (streq(kind, "snapshot")) {
		json_t *sp;
		if (!streq(c->state, "running") || !streq(c->exec_state, "serving")) {
			*why = "snapshots are taken of a running sandbox";
			return -EPERM;
		}
		if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO snapshots (id, sandbox, generation,"
		    " name, kind, state, created_at) VALUES (?,?,?,?,'named','pending',?)", "ssisi",
		    rq->snapshot_id, sandbox, c->gen, rq->name, now))) < 0)
			return rc;
		sp = json_pack("{s:s,s:s?}", "snapshot_id", rq->snapshot_id, "name", rq->name);
		spec = sp ? json_dumps(sp, JSON_COMPACT) : NULL;
		json_decref(sp);
		if (spec == NULL)
			return -ENOMEM;
		rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO assignments (worker, sandbox, generation,"
		    " action, spec, created_at) VALUES (?,?,?,'snapshot',?,?)", "ssisi", c->worker,
		    sandbox, c->gen, spec, now));
		free(spec);
		if (rc < 0)
			return rc;
		return sq_run(q->db, sq_prep(q->db, "INSERT INTO operations (id, sandbox, kind, step,"
		    " from_gen, snapshot_id, reason, created, updated)"
		    " VALUES (?,?,'snapshot','snapshotting',?,?,?,?,?)", "ssissii", rq->op_id, sandbox,
		    c->gen, rq->snapshot_id, rq->reason, now, now));
	}
	*why = "unknown operation";
	return -EINVAL;
}

int
sqo_op_start(struct store *s, const char *owner, const char *sandbox,
    const struct op_request *rq, json_t **out, const char **why)
{
	struct sq *q = SQ(s);
	struct cur c;
	sqlite3_stmt *st;
	char detail[256], action[32];
	int64_t now = now_unix(), open_ops = 0;
	int rc;

	*out = NULL;
	memset(&c, 0, sizeof(c));
	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	if ((rc = cur_load(q, owner, sandbox, &c)) < 0)
		goto out;
	/* the ownership lease: compare-and-swap, so of two concurrent
	 * operations (threads here or another daemon on the same store)
	 * exactly one changes the row */
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET lease_owner = ?,"
	    " lease_expiry = ? WHERE id = ? AND (lease_owner IS NULL OR lease_expiry < ?)", "sisi",
	    rq->lease_owner, now + rq->lease_ttl, sandbox, now))) < 0)
		goto out;
	if (sqlite3_changes(q->db) == 0) {
		*why = "another lifecycle operation is in progress";
		rc = -EALREADY;
		goto out;
	}
	/* an expired lease over an unfinished operation belongs to the
	 * takeover of that operation, not to a new one */
	st = sq_prep(q->db, "SELECT COUNT(*) FROM operations WHERE sandbox = ? AND step <> 'done'",
	    "s", sandbox);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	if (sq_step_row(q->db, st) == 1)
		open_ops = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (open_ops > 0) {
		*why = "another lifecycle operation is in progress";
		rc = -EALREADY;
		goto out;
	}
	if ((rc = start_step(q, sandbox, rq, &c, now, why)) < 0)
		goto out;
	snprintf(detail, sizeof(detail), "op=%s reason=%s%s%s", rq->op_id,
	    rq->reason ? rq->reason : "api", rq->worker ? " worker=" : "",
	    rq->worker ? rq->worker : "");
	snprintf(action, sizeof(action), "sandbox.%s", rq->kind);
	if ((rc = audit_row(q, owner, action, sandbox, detail)) < 0)
		goto out;
	if (streq(rq->kind, "snapshot")) {
		*out = json_pack("{s:{s:s,s:s?,s:s,s:n}}", "snapshot", "id", rq->snapshot_id,
		    "name", rq->name, "state", "pending", "digest");
		rc = *out ? 0 : -ENOMEM;
	} else {
		rc = sq_sandbox_load(q, owner, sandbox, out);
	}
	if (rc < 0)
		goto out;
	if ((rc = sq_commit(q->db)) < 0)
		goto out;
	log_info("operation %s (%s) on %s started", rq->op_id, rq->kind, sandbox);
out:
	if (rc < 0) {
		sq_rollback(q->db);
		json_decref(*out);
		*out = NULL;
	}
	sq_unlock(q);
	cur_free(&c);
	return rc;
}

/* ---- driving operations ---- */

struct oprow {
	char    id[SPACE_ID_MAX + 1], sandbox[SPACE_ID_MAX + 1], kind[16], step[16];
	char    target[SPACE_ID_MAX + 1], snapshot_id[SPACE_ID_MAX + 1];
	int64_t from_gen, to_gen;
	char    owner[SPACE_ID_MAX + 1], lease_owner[SPACE_ID_MAX + 1];
	int64_t lease_expiry;
	bool    leased;
	char    sstate[STORE_STATE_MAX + 1], snapshot[SPACE_ID_MAX + 1], pinned[SPACE_ID_MAX + 1];
	char    from_state[STORE_STATE_MAX + 1], from_worker[SPACE_ID_MAX + 1];
	char    to_state[STORE_STATE_MAX + 1], snap_state[STORE_STATE_MAX + 1];
	char    from_snapshot[SPACE_ID_MAX + 1];    /* archive of from_gen, "" = none */
	char   *template_, *resources;
};

static int
oprow_load(struct sq *q, const char *id, struct oprow *o)
{
	sqlite3_stmt *st;
	int rc;

	memset(o, 0, sizeof(*o));
	st = sq_prep(q->db, "SELECT o.id, o.sandbox, o.kind, o.step, COALESCE(o.target,''),"
	    " COALESCE(o.snapshot_id,''), COALESCE(o.from_gen,0), COALESCE(o.to_gen,0),"
	    " s.owner, COALESCE(s.lease_owner,''), COALESCE(s.lease_expiry,0), s.lease_owner IS NOT NULL,"
	    " s.state, COALESCE(s.snapshot,''), COALESCE(s.pinned_worker,''),"
	    " COALESCE(ef.state,''), COALESCE(ef.worker,''), COALESCE(et.state,''),"
	    " COALESCE(sn.state,''), s.template, s.resources,"
	    " COALESCE((SELECT digest FROM snapshots a WHERE a.sandbox = o.sandbox"
	    "   AND a.generation = o.from_gen AND a.kind = 'auto' AND a.state = 'ready'"
	    "   ORDER BY a.created_at DESC, a.rowid DESC LIMIT 1), '')"
	    " FROM operations o JOIN sandboxes s ON s.id = o.sandbox"
	    " LEFT JOIN executions ef ON ef.sandbox = o.sandbox AND ef.generation = o.from_gen"
	    " LEFT JOIN executions et ON et.sandbox = o.sandbox AND et.generation = o.to_gen"
	    " LEFT JOIN snapshots sn ON sn.id = o.snapshot_id"
	    " WHERE o.id = ? AND o.step <> 'done'", "s", id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, o->id, sizeof(o->id));
		sq_col_copy(st, 1, o->sandbox, sizeof(o->sandbox));
		sq_col_copy(st, 2, o->kind, sizeof(o->kind));
		sq_col_copy(st, 3, o->step, sizeof(o->step));
		sq_col_copy(st, 4, o->target, sizeof(o->target));
		sq_col_copy(st, 5, o->snapshot_id, sizeof(o->snapshot_id));
		o->from_gen = sqlite3_column_int64(st, 6);
		o->to_gen = sqlite3_column_int64(st, 7);
		sq_col_copy(st, 8, o->owner, sizeof(o->owner));
		sq_col_copy(st, 9, o->lease_owner, sizeof(o->lease_owner));
		o->lease_expiry = sqlite3_column_int64(st, 10);
		o->leased = sqlite3_column_int(st, 11) != 0;
		sq_col_copy(st, 12, o->sstate, sizeof(o->sstate));
		sq_col_copy(st, 13, o->snapshot, sizeof(o->snapshot));
		sq_col_copy(st, 14, o->pinned, sizeof(o->pinned));
		sq_col_copy(st, 15, o->from_state, sizeof(o->from_state));
		sq_col_copy(st, 16, o->from_worker, sizeof(o->from_worker));
		sq_col_copy(st, 17, o->to_state, sizeof(o->to_state));
		sq_col_copy(st, 18, o->snap_state, sizeof(o->snap_state));
		o->template_ = strdup((const char *)sqlite3_column_text(st, 19));
		o->resources = strdup((const char *)sqlite3_column_text(st, 20));
		sq_col_copy(st, 21, o->from_snapshot, sizeof(o->from_snapshot));
		rc = o->template_ && o->resources ? 1 : -ENOMEM;
	}
	sqlite3_finalize(st);
	return rc;
}

/* end an operation: the row is done, the lease released */
static int
finish(struct sq *q, const struct oprow *o, const char *me, const char *result, int64_t now)
{
	char detail[160];
	int rc;

	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE operations SET step = 'done', result = ?,"
	    " updated = ?2, ended = ?2 WHERE id = ?3", "sis", result, now, o->id))) < 0)
		return rc;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET lease_owner = NULL,"
	    " lease_expiry = NULL WHERE id = ? AND lease_owner = ?", "ss", o->sandbox, me))) < 0)
		return rc;
	snprintf(detail, sizeof(detail), "op=%s kind=%s result=%s", o->id, o->kind, result);
	return audit_row(q, o->owner, "operation.end", o->sandbox, detail);
}

static int
set_state(struct sq *q, const char *sandbox, const char *state)
{
	return sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = ? WHERE id = ?", "ss",
	    state, sandbox));
}

/* the second half of a move: the next generation on the target, restoring
 * the archive the old worker made. A target that went away meanwhile is
 * replaced by the old worker or the scheduler's choice: the sandbox must
 * run somewhere, and its data is in the snapshot store, not on a worker. */
static int
move_install(struct sq *q, struct oprow *o, int64_t now, const char **result)
{
	char placed[SPACE_ID_MAX + 1] = "", *spec;
	const char *why = NULL;
	int64_t gen = 0;
	int rc;

	spec = sq_spec_json(o->template_, o->resources, o->from_snapshot);
	if (spec == NULL)
		return -ENOMEM;
	rc = sq_place_execution(q, o->sandbox, o->target, NULL, spec, &why, &gen, placed);
	if (rc == -ENOENT || rc == -EHOSTDOWN || rc == -EAGAIN) {
		log_warnx("operation %s: target %s refused (%s), placing elsewhere", o->id,
		    o->target, why ? why : "?");
		rc = sq_place_execution(q, o->sandbox, NULL, o->from_worker, spec, &why, &gen, placed);
	}
	free(spec);
	if (rc == -EAGAIN || rc == -EHOSTDOWN || rc == -ENOENT) {
		log_warnx("operation %s: nowhere to run %s: %s", o->id, o->sandbox, why ? why : "?");
		*result = "failed";
		return set_state(q, o->sandbox, "failed");
	}
	if (rc < 0)
		return rc;
	if (o->pinned[0] && (rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET"
	    " pinned_worker = ? WHERE id = ?", "ss", placed, o->sandbox))) < 0)
		return rc;
	return sq_run(q->db, sq_prep(q->db, "UPDATE operations SET step = 'installing', to_gen = ?,"
	    " target = ?, updated = ? WHERE id = ?", "isis", gen, placed, now, o->id));
}

/* one step of one operation, in one transaction. *changed: a step was taken
 * (new assignments may exist); *ended: the kind when it finished */
static int
drive_one(struct sq *q, const char *id, const char *me, int64_t ttl, bool advance,
    int *changed, const char **ended_kind, const char **ended_result)
{
	struct oprow o;
	const char *result = NULL;
	char detail[192];
	int64_t now;
	int rc;

	*ended_kind = *ended_result = NULL;
	memset(&o, 0, sizeof(o));
	if ((rc = sq_begin(q->db)) < 0)
		return rc;
	/* the clock is read once the transaction is ours: taking it may have
	 * waited on another daemon's, and an expiry computed from before the
	 * wait could already be past (an unneeded takeover) */
	now = now_unix();
	if ((rc = oprow_load(q, id, &o)) <= 0)
		goto out;
	if (o.leased && streq(o.lease_owner, me)) {
		/* ours: renewed while the operation is in progress */
		rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET lease_expiry = ?"
		    " WHERE id = ? AND lease_owner = ?", "iss", now + ttl, o.sandbox, me));
	} else if (!o.leased || o.lease_expiry < now) {
		/* takeover: the owner stopped renewing. Only the lease moves;
		 * the executions, their identities and the capabilities issued
		 * for them are untouched. */
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET lease_owner = ?,"
		    " lease_expiry = ? WHERE id = ? AND (lease_owner IS NULL OR lease_expiry < ?)",
		    "sisi", me, now + ttl, o.sandbox, now))) < 0)
			goto out;
		if (sqlite3_changes(q->db) == 0)
			goto out;
		snprintf(detail, sizeof(detail), "op=%s kind=%s from=%s", o.id, o.kind,
		    o.leased ? o.lease_owner : "-");
		if ((rc = audit_row(q, o.owner, "operation.takeover", o.sandbox, detail)) < 0)
			goto out;
		log_info("operation %s (%s) on %s taken over from %s", o.id, o.kind, o.sandbox,
		    o.leased ? o.lease_owner : "nobody");
	} else {
		goto out;       /* another daemon's, still renewed */
	}
	if (rc < 0 || !advance)
		goto out;

	if (streq(o.step, "retiring")) {
		if (streq(o.from_state, "retired") && o.from_snapshot[0] == '\0') {
			/* the worker retired the execution without archiving its
			 * layer: continuing from an older snapshot would silently
			 * roll the sandbox back, so it fails visibly instead */
			log_warnx("operation %s: %s g%lld retired without a snapshot", o.id,
			    o.sandbox, (long long)o.from_gen);
			if ((rc = set_state(q, o.sandbox, "failed")) < 0)
				goto out;
			result = "failed";
		} else if (streq(o.from_state, "retired")) {
			if (streq(o.kind, "pause")) {
				if ((rc = set_state(q, o.sandbox, "paused")) < 0)
					goto out;
				result = "ok";
			} else if ((rc = move_install(q, &o, now, &result)) < 0) {
				goto out;
			}
			*changed = 1;
		} else if (streq(o.from_state, "failed") || o.from_state[0] == '\0') {
			if ((rc = set_state(q, o.sandbox, "failed")) < 0)
				goto out;
			result = "failed";
		}
	} else if (streq(o.step, "installing")) {
		if (streq(o.to_state, "serving")) {
			if ((rc = set_state(q, o.sandbox, "running")) < 0)
				goto out;
			result = "ok";
		} else if (streq(o.to_state, "failed") || streq(o.to_state, "retired") ||
		    o.to_state[0] == '\0') {
			if ((rc = set_state(q, o.sandbox, "failed")) < 0)
				goto out;
			result = "failed";
		}
	} else if (streq(o.step, "snapshotting")) {
		if (streq(o.snap_state, "ready")) {
			result = "ok";
		} else if (streq(o.snap_state, "failed")) {
			result = "failed";
		} else if (!exec_active(o.from_state)) {
			/* the execution ended before archiving: nothing will come */
			if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE snapshots SET state = 'failed',"
			    " error = 'execution ended' WHERE id = ?", "s", o.snapshot_id))) < 0)
				goto out;
			result = "failed";
		}
	}
	if (result != NULL) {
		if ((rc = finish(q, &o, me, result, now)) < 0)
			goto out;
		*changed = 1;
	}
	rc = 0;
out:
	if (rc >= 0)
		rc = sq_commit(q->db);
	if (rc < 0) {
		sq_rollback(q->db);
	} else if (result != NULL) {
		*ended_kind = kind_static(o.kind);
		*ended_result = streq(result, "ok") ? "ok" : "failed";
		log_info("operation %s (%s) on %s: %s", o.id, o.kind, o.sandbox, result);
	}
	free(o.template_);
	free(o.resources);
	return rc < 0 ? rc : 0;
}

int
sqo_ops_drive(struct store *s, const char *me, int64_t ttl, const char *sandbox, bool advance)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	char (*ids)[SPACE_ID_MAX + 1];
	const char *kind, *result;
	size_t n = 0, i;
	int rc, changed = 0, total = 0;

	if ((ids = calloc(OPS_DRIVE_BATCH, sizeof(*ids))) == NULL)
		return -ENOMEM;
	sq_lock(q);
	st = sq_prep(q->db, "SELECT id FROM operations WHERE step <> 'done'"
	    " AND (?1 IS NULL OR sandbox = ?1) ORDER BY created, id LIMIT ?2", "si", sandbox,
	    (int64_t)OPS_DRIVE_BATCH);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	while ((rc = sq_step_row(q->db, st)) == 1 && n < OPS_DRIVE_BATCH)
		sq_col_copy(st, 0, ids[n++], SPACE_ID_MAX + 1);
	sqlite3_finalize(st);
	if (rc < 0)
		goto out;
	for (i = 0; i < n; i++) {
		changed = 0;
		if ((rc = drive_one(q, ids[i], me, ttl, advance, &changed, &kind, &result)) < 0)
			log_warnx("operation %s: step failed (%d), retried next tick", ids[i], rc);
		if (kind && store_op_observe)
			store_op_observe(kind, result);
		total += changed;
	}
	rc = total;
out:
	sq_unlock(q);
	free(ids);
	return rc;
}

int
sq_ops_abandon(struct sq *q, const char *sandbox, const char **kind)
{
	sqlite3_stmt *st;
	char k[16] = "", id[SPACE_ID_MAX + 1] = "", owner[SPACE_ID_MAX + 1] = "", detail[160];
	int64_t now = now_unix();
	int rc;

	*kind = NULL;
	st = sq_prep(q->db, "SELECT o.id, o.kind, s.owner FROM operations o JOIN sandboxes s"
	    " ON s.id = o.sandbox WHERE o.sandbox = ? AND o.step <> 'done'", "s", sandbox);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, id, sizeof(id));
		sq_col_copy(st, 1, k, sizeof(k));
		sq_col_copy(st, 2, owner, sizeof(owner));
	}
	sqlite3_finalize(st);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE operations SET step = 'done',"
		    " result = 'abandoned', updated = ?1, ended = ?1 WHERE sandbox = ?2"
		    " AND step <> 'done'", "is", now, sandbox))) < 0)
			return rc;
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE snapshots SET state = 'failed',"
		    " error = 'sandbox killed' WHERE sandbox = ? AND state = 'pending'", "s",
		    sandbox))) < 0)
			return rc;
		snprintf(detail, sizeof(detail), "op=%s kind=%s result=abandoned", id, k);
		if ((rc = audit_row(q, owner, "operation.end", sandbox, detail)) < 0)
			return rc;
		*kind = kind_static(k);
	}
	return sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET lease_owner = NULL,"
	    " lease_expiry = NULL WHERE id = ?", "s", sandbox));
}

/* ---- snapshots ---- */

int
sqo_snapshot_report(struct store *s, const char *worker, const char *snapshot_id,
    const char *sandbox, int64_t generation, const char *digest, int64_t size,
    const char *error, const char **why)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	char sstate[STORE_STATE_MAX + 1] = "", ssbx[SPACE_ID_MAX + 1] = "";
	char ew[SPACE_ID_MAX + 1] = "", sdigest[80] = "";
	int64_t sgen = 0;
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	st = sq_prep(q->db, "SELECT sn.state, sn.sandbox, sn.generation, e.worker,"
	    " COALESCE(sn.digest,'') FROM snapshots sn JOIN executions e ON e.sandbox = sn.sandbox"
	    " AND e.generation = sn.generation WHERE sn.id = ? AND sn.kind = 'named'", "s",
	    snapshot_id);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, sstate, sizeof(sstate));
		sq_col_copy(st, 1, ssbx, sizeof(ssbx));
		sgen = sqlite3_column_int64(st, 2);
		sq_col_copy(st, 3, ew, sizeof(ew));
		sq_col_copy(st, 4, sdigest, sizeof(sdigest));
	}
	sqlite3_finalize(st);
	if (rc == 0) {
		*why = "no such snapshot";
		rc = -ENOENT;
	}
	if (rc < 0)
		goto out;
	/* a worker answers only for the execution the snapshot was asked of */
	if (!streq(ew, worker)) {
		*why = "the snapshot was not assigned to this worker";
		rc = -EPERM;
		goto out;
	}
	if ((sandbox && !streq(sandbox, ssbx)) || (generation > 0 && generation != sgen)) {
		*why = "the snapshot belongs to another execution";
		rc = -ESTALE;
		goto out;
	}
	if (!streq(sstate, "pending")) {
		/* a repeated report of the same archive is harmless */
		if (digest && streq(sstate, "ready") && streq(sdigest, digest)) {
			rc = 0;
			goto done;
		}
		*why = "the snapshot was already reported";
		rc = -ESTALE;
		goto out;
	}
	if (digest != NULL) {
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE snapshots SET state = 'ready',"
		    " digest = ?, size = ? WHERE id = ?", "sis", digest, size, snapshot_id))) < 0)
			goto out;
		rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET snapshot = ? WHERE id = ?",
		    "ss", digest, ssbx));
	} else {
		rc = sq_run(q->db, sq_prep(q->db, "UPDATE snapshots SET state = 'failed', error = ?"
		    " WHERE id = ?", "ss", error ? error : "failed", snapshot_id));
	}
done:
	if (rc < 0)
		goto out;
	rc = sq_commit(q->db);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
}

static json_t *
snapshot_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char ts[RFC3339_LEN + 1];

	rfc3339_format(sqlite3_column_int64(st, 6), ts);
	return json_pack("{s:s,s:s?,s:s,s:s?,s:o,s:I,s:s}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "name", (const char *)sqlite3_column_text(st, 1),
	    "state", (const char *)sqlite3_column_text(st, 2),
	    "digest", (const char *)sqlite3_column_text(st, 3),
	    "size", sqlite3_column_type(st, 4) == SQLITE_NULL ? json_null() :
	        json_integer(sqlite3_column_int64(st, 4)),
	    "generation", (json_int_t)sqlite3_column_int64(st, 5),
	    "created_at", ts);
}

int
sqo_snapshots_list(struct store *s, const char *owner, const char *sandbox, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT 1 FROM sandboxes WHERE owner = ? AND id = ?", "ss", owner,
	    sandbox);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	sqlite3_finalize(st);
	if (rc == 0)
		rc = -ENOENT;
	if (rc < 0)
		goto out;
	st = sq_prep(q->db, "SELECT id, name, state, digest, size, generation, created_at"
	    " FROM snapshots WHERE sandbox = ? ORDER BY created_at, rowid", "s", sandbox);
	rc = sq_list(q, st, snapshot_row, NULL, out);
out:
	sq_unlock(q);
	return rc;
}

/* ---- timeouts ---- */

int
sqo_sandbox_set_timeouts(struct store *s, const char *owner, const char *id,
    const char *timeouts, json_t **out)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET timeouts = ?"
	    " WHERE owner = ? AND id = ?", "sss", timeouts, owner, id))) < 0)
		goto out;
	if (sqlite3_changes(q->db) == 0) {
		rc = -ENOENT;
		goto out;
	}
	if ((rc = audit_row(q, owner, "sandbox.timeouts", id, timeouts)) < 0)
		goto out;
	rc = sq_commit_sandbox(q, owner, id, out);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
}

int
sqo_sandbox_touch(struct store *s, const char *id, int64_t now)
{
	struct sq *q = SQ(s);
	int rc;

	/* at most one write per sandbox and second: an UPDATE that changes
	 * no row commits nothing */
	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET last_activity = ?1"
	    " WHERE id = ?2 AND last_activity < ?1", "is", now, id));
	sq_unlock(q);
	return rc;
}

static json_t *
due_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s}",
	    "owner", (const char *)sqlite3_column_text(st, 0),
	    "id", (const char *)sqlite3_column_text(st, 1),
	    "action", (const char *)sqlite3_column_text(st, 2),
	    "which", (const char *)sqlite3_column_text(st, 3));
}

int
sqo_timeouts_due(struct store *s, int64_t now, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	/* idle counts from the last capability issued, or from the start of
	 * the current execution when none was issued since; absolute from the
	 * start of the current execution. A sandbox under an operation waits
	 * for it to end. */
	st = sq_prep(q->db, "SELECT s.owner, s.id, COALESCE(json_extract(s.timeouts, '$.action'),"
	    " 'pause'),"
	    " CASE WHEN COALESCE(json_extract(s.timeouts, '$.absolute'), 0) > 0"
	    "   AND ?1 - e.created_at >= json_extract(s.timeouts, '$.absolute') THEN 'absolute'"
	    "   ELSE 'idle' END"
	    " FROM sandboxes s JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.state = 'running' AND e.state = 'serving'"
	    " AND (s.lease_owner IS NULL OR s.lease_expiry < ?1)"
	    " AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.sandbox = s.id AND o.step <> 'done')"
	    " AND ((COALESCE(json_extract(s.timeouts, '$.idle'), 0) > 0"
	    "       AND ?1 - MAX(s.last_activity, e.created_at) >= json_extract(s.timeouts, '$.idle'))"
	    "   OR (COALESCE(json_extract(s.timeouts, '$.absolute'), 0) > 0"
	    "       AND ?1 - e.created_at >= json_extract(s.timeouts, '$.absolute')))"
	    " LIMIT 256", "i", now);
	rc = sq_list(q, st, due_row, NULL, out);
	sq_unlock(q);
	return rc;
}
