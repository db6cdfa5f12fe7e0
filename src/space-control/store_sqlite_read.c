/* The SQLite backend, reads: sandboxes as the API shows them, a worker's
 * heartbeat and assignment stream, the worker list. None of these decides
 * a state; lifecycle.c does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "claims.h"
#include "log.h"
#include "store.h"
#include "store_sqlite.h"
#include "util.h"

/* ---- sandboxes ---- */

#define SANDBOX_SELECT \
	"SELECT s.id, s.state, s.template, s.resources, s.timeouts, s.metadata, s.created_at," \
	" e.generation, e.worker, e.substrate, e.activation, e.resident, e.state, w.endpoint," \
	" s.snapshot, e.error, s.ports" \
	" FROM sandboxes s" \
	" LEFT JOIN executions e ON e.sandbox = s.id AND e.generation =" \
	"   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)" \
	" LEFT JOIN workers w ON w.id = e.worker"

static json_t *
sandbox_row(sqlite3_stmt *st)
{
	char ts[RFC3339_LEN + 1];
	json_t *o, *ex = json_null();
	const char *ep;

	rfc3339_format(sqlite3_column_int64(st, 6), ts);
	if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
		ep = (const char *)sqlite3_column_text(st, 13);
		/* error: why the execution failed, as its worker reported it */
		ex = json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s?,s:s?}",
		    "generation", (json_int_t)sqlite3_column_int64(st, 7),
		    "worker", (const char *)sqlite3_column_text(st, 8),
		    "substrate", (const char *)sqlite3_column_text(st, 9),
		    "activation", (json_int_t)sqlite3_column_int64(st, 10),
		    "resident", (const char *)sqlite3_column_text(st, 11),
		    "state", (const char *)sqlite3_column_text(st, 12),
		    "endpoint", ep,
		    "error", (const char *)sqlite3_column_text(st, 15));
	}
	o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:s?}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "state", (const char *)sqlite3_column_text(st, 1),
	    "template", (const char *)sqlite3_column_text(st, 2),
	    "resources", sq_col_json(st, 3),
	    "timeouts", sq_col_json(st, 4),
	    "metadata", sq_col_json(st, 5),
	    "created_at", ts,
	    "execution", ex ? ex : json_null(),
	    "snapshot", (const char *)sqlite3_column_text(st, 14));
	/* the declared service ports ([{"port","public"}], api_ports.c) */
	if (o != NULL)
		json_object_set_new(o, "ports", sqlite3_column_type(st, 16) != SQLITE_NULL ?
		    sq_col_json(st, 16) : json_array());
	return o;
}

static json_t *
history_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char ts[RFC3339_LEN + 1], te[RFC3339_LEN + 1];
	bool ended = sqlite3_column_type(st, 7) != SQLITE_NULL;

	rfc3339_format(sqlite3_column_int64(st, 6), ts);
	if (ended)
		rfc3339_format(sqlite3_column_int64(st, 7), te);
	return json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s,s:s?,s:s?}",
	    "generation", (json_int_t)sqlite3_column_int64(st, 0),
	    "worker", (const char *)sqlite3_column_text(st, 1),
	    "substrate", (const char *)sqlite3_column_text(st, 2),
	    "activation", (json_int_t)sqlite3_column_int64(st, 3),
	    "resident", (const char *)sqlite3_column_text(st, 4),
	    "state", (const char *)sqlite3_column_text(st, 5),
	    "created_at", ts, "ended_at", ended ? te : NULL,
	    "error", (const char *)sqlite3_column_text(st, 8));
}

/* "history": every execution of the sandbox, oldest first */
static int
sandbox_history(struct sq *q, json_t *o)
{
	sqlite3_stmt *st;
	json_t *arr;
	int rc;

	if (o == NULL)
		return -ENOMEM;
	st = sq_prep(q->db, "SELECT generation, worker, substrate, activation, resident, state,"
	    " created_at, ended_at, error FROM executions WHERE sandbox = ? ORDER BY generation", "s",
	    json_string_value(json_object_get(o, "id")));
	if ((rc = sq_list(q, st, history_row, NULL, &arr)) < 0)
		return rc;
	return json_object_set_new(o, "history", arr) < 0 ? -ENOMEM : 0;
}

/* the sandbox object; caller holds the lock */
int
sq_sandbox_load(struct sq *q, const char *owner, const char *id, json_t **out)
{
	sqlite3_stmt *st = sq_prep(q->db, SANDBOX_SELECT " WHERE s.owner = ? AND s.id = ?",
	    "ss", owner, id);
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		*out = sandbox_row(st);
		rc = *out ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
	if (rc == 0 && (rc = sandbox_history(q, *out)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

int
sq_sandbox_get(struct store *s, const char *owner, const char *id, json_t **out)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_sandbox_load(q, owner, id, out);
	sq_unlock(q);
	return rc;
}

/* a list entry is the whole sandbox object, history included */
static json_t *
sandbox_list_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	json_t *o = sandbox_row(st);

	if (o != NULL && sandbox_history(q, o) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
sq_sandbox_list(struct store *s, const char *owner, const char *after, bool live,
    int64_t limit, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, SANDBOX_SELECT " WHERE s.owner = ?1"
	    " AND (?2 IS NULL OR (s.created_at, s.id) >"
	    "   (SELECT created_at, id FROM sandboxes WHERE id = ?2 AND owner = ?1))"
	    " AND (?3 = 0 OR s.state <> 'killed')"
	    " ORDER BY s.created_at, s.id LIMIT ?4",
	    "ssii", owner, after, (int64_t)live, limit);
	rc = sq_list(q, st, sandbox_list_row, NULL, out);
	sq_unlock(q);
	return rc;
}

int
sq_sandbox_current(struct store *s, const char *owner, const char *id, struct exec_view *v)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	memset(v, 0, sizeof(*v));
	sq_lock(q);
	st = sq_prep(q->db, "SELECT s.state, e.generation, e.worker, e.substrate, e.activation,"
	    " e.resident, e.state, w.endpoint, w.state FROM sandboxes s"
	    " LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " LEFT JOIN workers w ON w.id = e.worker"
	    " WHERE s.owner = ? AND s.id = ?", "ss", owner, id);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, v->sandbox_state, sizeof(v->sandbox_state));
		snprintf(v->route.sandbox, sizeof(v->route.sandbox), "%s", id);
		if (sqlite3_column_type(st, 1) != SQLITE_NULL) {
			v->route.generation = (uint64_t)sqlite3_column_int64(st, 1);
			sq_col_copy(st, 2, v->route.worker, sizeof(v->route.worker));
			sq_col_copy(st, 3, v->route.substrate, sizeof(v->route.substrate));
			v->route.activation = (uint32_t)sqlite3_column_int64(st, 4);
			sq_col_copy(st, 5, v->route.resident, sizeof(v->route.resident));
			sq_col_copy(st, 6, v->state, sizeof(v->state));
			sq_col_copy(st, 7, v->endpoint, sizeof(v->endpoint));
			sq_col_copy(st, 8, v->worker_state, sizeof(v->worker_state));
		}
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
out:
	sq_unlock(q);
	return rc;
}

/* ---- workers ---- */

int
sq_worker_heartbeat(struct store *s, const char *worker, const char *incarnation,
    int64_t capacity, const struct res *total)
{
	struct sq *q = SQ(s);
	int rc;

	/* what the worker has now (capacity, resources): placement follows
	 * a worker whose figures changed without waiting for a registration */
	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE workers SET last_heartbeat = ?1, state = 'live',"
	    " capacity = CASE WHEN ?4 < 0 THEN capacity ELSE ?4 END,"
	    " memory_mb = CASE WHEN ?5 < 0 THEN memory_mb ELSE ?5 END,"
	    " cpu_percent = CASE WHEN ?6 < 0 THEN cpu_percent ELSE ?6 END,"
	    " disk_mb = CASE WHEN ?7 < 0 THEN disk_mb ELSE ?7 END"
	    " WHERE id = ?2 AND incarnation = ?3", "issiiii", now_unix(), worker, incarnation,
	    capacity, total ? total->memory_mb : -1, total ? total->cpu_percent : -1,
	    total ? total->disk_mb : -1));
	if (rc == 0 && sqlite3_changes(q->db) == 0)
		rc = -ESTALE;
	sq_unlock(q);
	return rc;
}

/* ctx: the revision of the last row, the worker's next cursor */
static json_t *
assignment_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	int64_t *rev = ctx;
	struct route_identity r;
	json_t *id;

	memset(&r, 0, sizeof(r));
	*rev = sqlite3_column_int64(st, 0);
	sq_col_copy(st, 3, r.sandbox, sizeof(r.sandbox));
	r.generation = (uint64_t)sqlite3_column_int64(st, 4);
	sq_col_copy(st, 5, r.worker, sizeof(r.worker));
	sq_col_copy(st, 6, r.substrate, sizeof(r.substrate));
	r.activation = (uint32_t)sqlite3_column_int64(st, 7);
	sq_col_copy(st, 8, r.resident, sizeof(r.resident));
	id = route_identity_pack(&r);
	return json_pack("{s:I,s:s,s:o,s:o}", "revision", (json_int_t)*rev,
	    "action", (const char *)sqlite3_column_text(st, 1),
	    "identity", id ? id : json_null(), "spec", sq_col_json(st, 2));
}

int
sq_assignments_after(struct store *s, const char *worker, int64_t after, json_t **out,
    int64_t *revision)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int64_t rev;
	int rc;

	sq_lock(q);
	/* a cursor beyond every revision ever issued comes from another
	 * store (restored or re-created): replay the whole stream so the
	 * worker converges instead of waiting for revisions it already "has" */
	st = sq_prep(q->db, "SELECT COALESCE((SELECT seq FROM sqlite_sequence"
	    " WHERE name = 'assignments'), 0)", NULL);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	if (sq_step_row(q->db, st) == 1 && after > sqlite3_column_int64(st, 0))
		after = 0;
	sq_stmt_release(st);
	rev = after;
	/* only what concerns the worker's current incarnation: a re-created
	 * worker must not install the executions of its previous life */
	st = sq_prep(q->db, "SELECT a.revision, a.action, a.spec, e.sandbox, e.generation, e.worker,"
	    " e.substrate, e.activation, e.resident FROM assignments a"
	    " JOIN executions e ON e.sandbox = a.sandbox AND e.generation = a.generation"
	    " JOIN workers w ON w.id = a.worker"
	    " WHERE a.worker = ? AND a.revision > ? AND e.resident = w.incarnation"
	    " ORDER BY a.revision LIMIT 1000", "si", worker, after);
	rc = sq_list(q, st, assignment_row, &rev, out);
	if (rc == 0)
		*revision = rev;
out:
	sq_unlock(q);
	return rc;
}

int
sq_workers_reap(struct store *s, int64_t older_than)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE workers SET state = 'lost'"
	    " WHERE state = 'live' AND last_heartbeat < ?", "i", older_than));
	if (rc == 0)
		rc = sqlite3_changes(q->db);
	sq_unlock(q);
	return rc;
}

int
sq_worker_counts(struct store *s, int64_t *live, int64_t *lost)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc = -EIO;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT COALESCE(SUM(state = 'live'), 0), COALESCE(SUM(state = 'lost'), 0)"
	    " FROM workers", NULL);
	if (st && sq_step_row(q->db, st) == 1) {
		*live = sqlite3_column_int64(st, 0);
		*lost = sqlite3_column_int64(st, 1);
		rc = 0;
	}
	sq_stmt_release(st);
	sq_unlock(q);
	return rc;
}

/* sandboxes not killed whose template is that digest (a paused one may
 * resume, a failed one be repaired) */
int
sq_template_refs(struct store *s, const char *digest, int64_t *n)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc = -EIO;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT COUNT(*) FROM sandboxes WHERE template = ? AND state <> 'killed'",
	    "s", digest);
	if (st && sq_step_row(q->db, st) == 1) {
		*n = sqlite3_column_int64(st, 0);
		rc = 0;
	}
	sq_stmt_release(st);
	sq_unlock(q);
	return rc;
}

/* executions on worker not ended (an install restoring, its relaunch, a
 * retirement) of a sandbox one of whose snapshots is that digest: a
 * worker downloads only the archives of the sandboxes it runs or is to
 * run (an incremental archive's base is an earlier snapshot of the same
 * sandbox) */
int
sq_archive_worker_refs(struct store *s, const char *worker, const char *digest, int64_t *n)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc = -EIO;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT COUNT(*) FROM executions e WHERE e.worker = ?"
	    " AND e.state IN ('pending','starting','serving','retiring')"
	    " AND (EXISTS (SELECT 1 FROM snapshots a WHERE a.sandbox = e.sandbox AND a.digest = ?)"
	    "  OR EXISTS (SELECT 1 FROM sandboxes x WHERE x.id = e.sandbox AND x.snapshot = ?))", "sss", worker, digest, digest);
	if (st && sq_step_row(q->db, st) == 1) {
		*n = sqlite3_column_int64(st, 0);
		rc = 0;
	}
	sq_stmt_release(st);
	sq_unlock(q);
	return rc;
}

static json_t *
worker_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char ts[RFC3339_LEN + 1];
	int64_t hb = sqlite3_column_int64(st, 4);

	if (hb > 0)
		rfc3339_format(hb, ts);
	/* resources: what the worker reported (0 = not reported) and what
	 * its active executions ask of them */
	return json_pack("{s:s,s:s?,s:s,s:I,s:I,s:s?,s:{s:I,s:I,s:I},s:{s:I,s:I,s:I}}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "endpoint", (const char *)sqlite3_column_text(st, 1),
	    "state", (const char *)sqlite3_column_text(st, 2),
	    "capacity", (json_int_t)sqlite3_column_int64(st, 3),
	    "sandboxes", (json_int_t)sqlite3_column_int64(st, 5),
	    "last_heartbeat", hb > 0 ? ts : NULL,
	    "resources", "memory_mb", (json_int_t)sqlite3_column_int64(st, 6),
	    "cpu_percent", (json_int_t)sqlite3_column_int64(st, 7),
	    "disk_mb", (json_int_t)sqlite3_column_int64(st, 8),
	    "used", "memory_mb", (json_int_t)sqlite3_column_int64(st, 9),
	    "cpu_percent", (json_int_t)sqlite3_column_int64(st, 10),
	    "disk_mb", (json_int_t)sqlite3_column_int64(st, 11));
}

int
sq_workers_list(struct store *s, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT w.id, w.endpoint, w.state, w.capacity, w.last_heartbeat,"
	    " COALESCE(u.n, 0), w.memory_mb, w.cpu_percent, w.disk_mb, COALESCE(u.m, 0),"
	    " COALESCE(u.c, 0), COALESCE(u.d, 0) FROM workers w" SQ_WORKER_USAGE
	    " ORDER BY w.id", NULL);
	rc = sq_list(q, st, worker_row, NULL, out);
	sq_unlock(q);
	return rc;
}

