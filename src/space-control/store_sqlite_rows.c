/* The SQLite backend, rows half: the row operations the lifecycle runs on
 * (store_tx.h), and the lifecycle's plain reads and writes (snapshot list,
 * timeouts, activity). Each function is its SQL and the copying of its
 * columns; which one runs when is decided in lifecycle.c. The caller holds
 * the connection inside a transaction (sq_tx) unless said otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "log.h"
#include "store.h"
#include "store_sqlite.h"
#include "store_tx.h"
#include "util.h"

#define DB(s) (SQ(s)->db)

/* ---- sandboxes ---- */

static int
r_sandbox_insert(struct store *s, const char *owner, const char *id,
    const struct sandbox_spec *sp, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO sandboxes (id, owner, state, template,"
	    " resources, timeouts, metadata, pinned_worker, created_at, api_key, network, ports)"
	    " VALUES (?,?,'creating',?,?,?,?,?,?,?,?,?)", "sssssssisss", id, owner, sp->template_,
	    sp->resources, sp->timeouts, sp->metadata, sp->pinned, now, sp->api_key, sp->network,
	    sp->ports));
}

static int
r_sandbox_cur(struct store *s, const char *owner, const char *id, struct sbx_cur *c)
{
	sqlite3_stmt *st;
	int rc;

	memset(c, 0, sizeof(*c));
	st = sq_prep(DB(s), "SELECT s.state, COALESCE(s.lease_owner,''), COALESCE(s.snapshot,''),"
	    " COALESCE(s.pinned_worker,''), s.template, s.resources,"
	    " COALESCE(e.generation, 0), COALESCE(e.worker,''), COALESCE(e.state,''),"
	    " s.route_hold_until FROM sandboxes s LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.owner = ? AND s.id = ?", "ss", owner, id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
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
		c->route_hold_until = sqlite3_column_int64(st, 9);
		rc = c->template_ && c->resources ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
	if (rc < 0) {
		free(c->template_);
		free(c->resources);
		c->template_ = c->resources = NULL;
	}
	return rc;
}

static int
r_sandbox_load(struct store *s, const char *owner, const char *id, json_t **out)
{
	return sq_sandbox_load(SQ(s), owner, id, out);
}

static int
r_sandbox_set_state(struct store *s, const char *id, const char *state)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET state = ? WHERE id = ?", "ss",
	    state, id));
}

static int
r_sandbox_set_pin(struct store *s, const char *id, const char *worker)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET pinned_worker = ? WHERE id = ?",
	    "ss", worker, id));
}

static int
r_sandbox_set_snapshot(struct store *s, const char *id, const char *digest)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET snapshot = ? WHERE id = ?",
	    "ss", digest, id));
}

static int
r_sandbox_key(struct store *s, const char *id, char key[STORE_CREDID_LEN + 1])
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COALESCE(api_key,'') FROM sandboxes WHERE id = ?",
	    "s", id);
	int rc;

	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		sq_col_copy(st, 0, key, STORE_CREDID_LEN + 1);
	sq_stmt_release(st);
	return rc;
}

static int
r_sandbox_set_key(struct store *s, const char *id, const char *key)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET api_key = ? WHERE id = ?",
	    "ss", key, id));
}

static int
r_lease_take(struct store *s, const char *id, const char *who, int64_t expiry, int64_t now)
{
	int rc = sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET lease_owner = ?,"
	    " lease_expiry = ? WHERE id = ? AND (lease_owner IS NULL OR lease_expiry < ?)", "sisi",
	    who, expiry, id, now));

	return rc < 0 ? rc : sqlite3_changes(DB(s)) > 0;
}

static int
r_lease_renew(struct store *s, const char *id, const char *who, int64_t expiry)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET lease_expiry = ?"
	    " WHERE id = ? AND lease_owner = ?", "iss", expiry, id, who));
}

static int
r_lease_release(struct store *s, const char *id, const char *who)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET lease_owner = NULL,"
	    " lease_expiry = NULL WHERE id = ?1 AND (?2 IS NULL OR lease_owner = ?2)", "ss",
	    id, who));
}

static json_t *
on_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s?}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "template", (const char *)sqlite3_column_text(st, 1),
	    "resources", (const char *)sqlite3_column_text(st, 2),
	    "pinned", (const char *)sqlite3_column_text(st, 3));
}

static int
r_sandboxes_on(struct store *s, const char *worker, const char *resident, json_t **out)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT e.sandbox, s.template, s.resources,"
	    " s.pinned_worker FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.worker = ? AND e.resident = ? AND e.state IN ('pending','starting','serving')"
	    " AND s.state IN ('creating','running')"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)",
	    "ss", worker, resident);

	return sq_list(SQ(s), st, on_row, NULL, out);
}

/* ---- executions and assignments ---- */

static int
r_exec_get(struct store *s, const char *sandbox, int64_t gen, struct exec_row *e)
{
	sqlite3_stmt *st;
	int rc;

	memset(e, 0, sizeof(*e));
	st = sq_prep(DB(s), "SELECT e.worker, e.substrate, e.resident, e.activation, e.state, s.state,"
	    " (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.sandbox = ? AND e.generation = ?", "si", sandbox, gen);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		sq_col_copy(st, 0, e->worker, sizeof(e->worker));
		sq_col_copy(st, 1, e->substrate, sizeof(e->substrate));
		sq_col_copy(st, 2, e->resident, sizeof(e->resident));
		e->activation = sqlite3_column_int64(st, 3);
		sq_col_copy(st, 4, e->state, sizeof(e->state));
		sq_col_copy(st, 5, e->sandbox_state, sizeof(e->sandbox_state));
		e->maxgen = sqlite3_column_int64(st, 6);
	}
	sq_stmt_release(st);
	return rc;
}

static int
r_exec_insert(struct store *s, const char *sandbox, const char *worker,
    const char *incarnation, int64_t now, int64_t *gen)
{
	sqlite3_stmt *st;

	*gen = 0;
	st = sq_prep(DB(s), "SELECT COALESCE(MAX(generation), 0) + 1 FROM executions"
	    " WHERE sandbox = ?", "s", sandbox);
	if (st == NULL)
		return -EIO;
	if (sq_step_row(DB(s), st) == 1)
		*gen = sqlite3_column_int64(st, 0);
	sq_stmt_release(st);
	if (*gen < 1)
		return -EIO;
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO executions (sandbox, generation, worker,"
	    " substrate, activation, resident, state, created_at, updated_at)"
	    " VALUES (?,?,?,'jail',1,?,'pending',?,?)", "sissii", sandbox, *gen, worker,
	    incarnation, now, now));
}

static int
r_exec_set_retiring(struct store *s, const char *sandbox, int64_t gen, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE executions SET state = 'retiring',"
	    " updated_at = ? WHERE sandbox = ? AND generation = ?", "isi", now, sandbox, gen));
}

static int
r_exec_set_serving(struct store *s, const char *sandbox, int64_t gen, int64_t activation,
    int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE executions SET state = 'serving',"
	    " activation = ?, error = NULL, updated_at = ? WHERE sandbox = ? AND generation = ?",
	    "iisi", activation, now, sandbox, gen));
}

static int
r_exec_set_failed(struct store *s, const char *sandbox, int64_t gen, const char *error,
    int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE executions SET state = 'failed',"
	    " error = CASE WHEN state = 'failed' AND error IS NOT NULL THEN error ELSE ?1 END,"
	    " updated_at = ?2, ended_at = COALESCE(ended_at, ?2)"
	    " WHERE sandbox = ?3 AND generation = ?4", "sisi", error, now, sandbox, gen));
}

static int
r_exec_set_retired(struct store *s, const char *sandbox, int64_t gen, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE executions SET state = 'retired',"
	    " updated_at = ?1, ended_at = ?1 WHERE sandbox = ?2 AND generation = ?3",
	    "isi", now, sandbox, gen));
}

static int
r_execs_fail_resident(struct store *s, const char *worker, const char *resident,
    const char *error, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE executions SET state = 'failed',"
	    " error = ?1, updated_at = ?2, ended_at = ?2 WHERE worker = ?3 AND resident = ?4"
	    " AND state NOT IN ('retired','failed')", "siss", error, now, worker, resident));
}

static int
r_assignment_add(struct store *s, const char *worker, const char *sandbox, int64_t gen,
    const char *action, const char *spec, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO assignments (worker, sandbox, generation,"
	    " action, spec, created_at) VALUES (?,?,?,?,?,?)", "ssissi", worker, sandbox, gen,
	    action, spec, now));
}

/* ---- workers ---- */

static int
r_workers_load(struct store *s, const char *pinned, const char *prefer,
    struct worker_load *wl, size_t cap, size_t *n)
{
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	/* the preferred worker sorts first so that it is among the first cap */
	st = sq_prep(DB(s),
	    "SELECT w.id, COALESCE(w.incarnation,''), w.capacity, w.state = 'live', COALESCE(u.n, 0),"
	    " w.memory_mb, w.cpu_percent, w.disk_mb, COALESCE(u.m, 0), COALESCE(u.c, 0),"
	    " COALESCE(u.d, 0) FROM workers w" SQ_WORKER_USAGE
	    " WHERE (?1 IS NULL AND w.state = 'live' AND w.incarnation IS NOT NULL)"
	    "   OR w.id = ?1 ORDER BY w.id IS ?2 DESC, 5, w.id LIMIT ?3", "ssi", pinned, prefer,
	    (int64_t)cap);
	if (st == NULL)
		return -EIO;
	while ((rc = sq_step_row(DB(s), st)) == 1 && *n < cap) {
		struct worker_load *w = &wl[*n];
		sq_col_copy(st, 0, w->id, sizeof(w->id));
		sq_col_copy(st, 1, w->incarnation, sizeof(w->incarnation));
		w->capacity = sqlite3_column_int64(st, 2);
		w->live = sqlite3_column_int(st, 3) && w->incarnation[0];
		w->active = sqlite3_column_int64(st, 4);
		w->total.memory_mb = sqlite3_column_int64(st, 5);
		w->total.cpu_percent = sqlite3_column_int64(st, 6);
		w->total.disk_mb = sqlite3_column_int64(st, 7);
		w->used.memory_mb = sqlite3_column_int64(st, 8);
		w->used.cpu_percent = sqlite3_column_int64(st, 9);
		w->used.disk_mb = sqlite3_column_int64(st, 10);
		(*n)++;
	}
	sq_stmt_release(st);
	return rc < 0 ? rc : 0;
}

static int
r_worker_incarnation(struct store *s, const char *worker, char inc[SPACE_ID_MAX + 1])
{
	sqlite3_stmt *st;
	int rc;

	inc[0] = '\0';
	st = sq_prep(DB(s), "SELECT COALESCE(incarnation, '') FROM workers WHERE id = ?", "s", worker);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1)
		sq_col_copy(st, 0, inc, SPACE_ID_MAX + 1);
	sq_stmt_release(st);
	return rc == 0 ? -ENOENT : rc < 0 ? rc : 0;
}

static int
r_worker_set_live(struct store *s, const char *worker, const char *incarnation,
    const char *endpoint, int64_t capacity, const struct res *t, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE workers SET incarnation = ?, endpoint = ?,"
	    " capacity = ?, memory_mb = ?, cpu_percent = ?, disk_mb = ?, state = 'live',"
	    " last_heartbeat = ? WHERE id = ?", "ssiiiiis", incarnation, endpoint, capacity,
	    t->memory_mb, t->cpu_percent, t->disk_mb, now, worker));
}

static int
r_worker_revision(struct store *s, const char *worker, int64_t *rev)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COALESCE(MAX(revision), 0) FROM assignments"
	    " WHERE worker = ?", "s", worker);
	int rc = -EIO;

	if (st && sq_step_row(DB(s), st) == 1) {
		*rev = sqlite3_column_int64(st, 0);
		rc = 0;
	}
	sq_stmt_release(st);
	return rc;
}

/* ---- operations ---- */

static int
r_op_open(struct store *s, const char *sandbox, char id[SPACE_ID_MAX + 1], char kind[16],
    char owner[SPACE_ID_MAX + 1])
{
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT o.id, o.kind, s.owner FROM operations o JOIN sandboxes s"
	    " ON s.id = o.sandbox WHERE o.sandbox = ? AND o.step <> 'done' LIMIT 1", "s", sandbox);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		sq_col_copy(st, 0, id, SPACE_ID_MAX + 1);
		sq_col_copy(st, 1, kind, 16);
		sq_col_copy(st, 2, owner, SPACE_ID_MAX + 1);
	}
	sq_stmt_release(st);
	return rc;
}

/* outside a transaction: each id is then driven in its own */
static int
r_ops_open_list(struct store *s, const char *sandbox, char (*ids)[SPACE_ID_MAX + 1],
    size_t cap, size_t *n)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	sq_lock(q);
	st = sq_prep(q->db, "SELECT id FROM operations WHERE step <> 'done'"
	    " AND (?1 IS NULL OR sandbox = ?1) ORDER BY created, id LIMIT ?2", "si", sandbox,
	    (int64_t)cap);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	while ((rc = sq_step_row(q->db, st)) == 1 && *n < cap)
		sq_col_copy(st, 0, ids[(*n)++], SPACE_ID_MAX + 1);
	sq_stmt_release(st);
out:
	sq_unlock(q);
	return rc < 0 ? rc : 0;
}

static int
r_op_insert(struct store *s, const struct op_new *o, int64_t now)
{
	sqlite3_stmt *st = sq_prep(DB(s), "INSERT INTO operations (id, sandbox, kind, target, step,"
	    " from_gen, to_gen, snapshot_id, reason, created, updated)"
	    " VALUES (?1,?2,?3,?4,?5,NULLIF(?6,0),NULLIF(?7,0),?8,?9,?10,?10)", "sssssiissi",
	    o->id, o->sandbox, o->kind, o->target, o->step, o->from_gen, o->to_gen,
	    o->snapshot_id, o->reason, now);

	return sq_run(DB(s), st);
}

static int
r_op_get(struct store *s, const char *id, struct op_view *o)
{
	sqlite3_stmt *st;
	int rc;

	memset(o, 0, sizeof(*o));
	st = sq_prep(DB(s), "SELECT o.id, o.sandbox, o.kind, o.step, COALESCE(o.target,''),"
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
	rc = sq_step_row(DB(s), st);
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
	sq_stmt_release(st);
	return rc;
}

static int
r_op_set_installing(struct store *s, const char *id, int64_t to_gen, const char *target,
    int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE operations SET step = 'installing', to_gen = ?,"
	    " target = ?, updated = ? WHERE id = ?", "isis", to_gen, target, now, id));
}

static int
r_op_end(struct store *s, const char *id, const char *result, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE operations SET step = 'done', result = ?1,"
	    " updated = ?2, ended = ?2 WHERE id = ?3", "sis", result, now, id));
}

/* ---- snapshots ---- */

static int
r_snapshot_add(struct store *s, const char *id, const char *sandbox, int64_t gen,
    const char *name, const char *kind, const char *state, const char *digest, int64_t size,
    int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO snapshots (id, sandbox, generation,"
	    " name, kind, state, digest, size, created_at) VALUES (?,?,?,?,?,?,?,"
	    " CASE WHEN ?8 < 0 THEN NULL ELSE ?8 END,?)", "ssissssii", id, sandbox, gen, name,
	    kind, state, digest, size, now));
}

static int
r_snapshot_named_get(struct store *s, const char *id, struct snap_row *sn)
{
	sqlite3_stmt *st;
	int rc;

	memset(sn, 0, sizeof(*sn));
	st = sq_prep(DB(s), "SELECT sn.state, sn.sandbox, sn.generation, e.worker,"
	    " COALESCE(sn.digest,'') FROM snapshots sn JOIN executions e ON e.sandbox = sn.sandbox"
	    " AND e.generation = sn.generation WHERE sn.id = ? AND sn.kind = 'named'", "s", id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		sq_col_copy(st, 0, sn->state, sizeof(sn->state));
		sq_col_copy(st, 1, sn->sandbox, sizeof(sn->sandbox));
		sn->generation = sqlite3_column_int64(st, 2);
		sq_col_copy(st, 3, sn->worker, sizeof(sn->worker));
		sq_col_copy(st, 4, sn->digest, sizeof(sn->digest));
	}
	sq_stmt_release(st);
	return rc;
}

static int
r_snapshot_named_count(struct store *s, const char *sandbox, int64_t *n)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COUNT(*) FROM snapshots WHERE sandbox = ?"
	    " AND kind = 'named' AND state <> 'failed'", "s", sandbox);
	int rc;

	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		*n = sqlite3_column_int64(st, 0);
	sq_stmt_release(st);
	return rc < 0 ? rc : 0;
}

static int
r_snapshot_named_bytes(struct store *s, const char *owner, int64_t *bytes)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COALESCE(SUM(n.size), 0) FROM snapshots n"
	    " JOIN sandboxes s ON s.id = n.sandbox WHERE s.owner = ? AND n.kind = 'named'"
	    " AND n.state = 'ready'", "s", owner);
	int rc;

	*bytes = 0;
	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		*bytes = sqlite3_column_int64(st, 0);
	sq_stmt_release(st);
	return rc < 0 ? rc : 0;
}

static int
r_snapshot_unname(struct store *s, const char *id, bool remove)
{
	return sq_run(DB(s), remove ?
	    sq_prep(DB(s), "DELETE FROM snapshots WHERE id = ? AND kind = 'named'", "s", id) :
	    sq_prep(DB(s), "UPDATE snapshots SET kind = 'auto', name = NULL WHERE id = ?"
	    " AND kind = 'named'", "s", id));
}

static int
r_snapshot_set_base(struct store *s, const char *id, const char *base)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE snapshots SET base = ? WHERE id = ?", "ss",
	    base, id));
}

static json_t *
on_snapshot(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s?,s:s?}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "kind", (const char *)sqlite3_column_text(st, 1),
	    "state", (const char *)sqlite3_column_text(st, 2),
	    "digest", (const char *)sqlite3_column_text(st, 3),
	    "base", (const char *)sqlite3_column_text(st, 4));
}

static int
r_snapshots_of(struct store *s, const char *sandbox, json_t **out)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT id, kind, state, digest, base FROM snapshots"
	    " WHERE sandbox = ? ORDER BY created_at, id", "s", sandbox);

	return sq_list(SQ(s), st, on_snapshot, NULL, out);
}

static int
r_sandbox_latest(struct store *s, const char *id, char out[SPACE_ID_MAX + 1])
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COALESCE(snapshot, '') FROM sandboxes WHERE id = ?",
	    "s", id);
	int rc;

	out[0] = '\0';
	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		sq_col_copy(st, 0, out, SPACE_ID_MAX + 1);
	sq_stmt_release(st);
	return rc < 0 ? rc : rc == 0 ? -ENOENT : 0;
}

static int
r_snapshot_drop(struct store *s, const char *id)
{
	return sq_run(DB(s), sq_prep(DB(s), "DELETE FROM snapshots WHERE id = ? AND kind = 'auto'",
	    "s", id));
}

static int
r_snapshot_set_ready(struct store *s, const char *id, const char *digest, int64_t size)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE snapshots SET state = 'ready',"
	    " digest = ?, size = ? WHERE id = ?", "sis", digest, size, id));
}

static int
r_snapshot_set_failed(struct store *s, const char *id, const char *error)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE snapshots SET state = 'failed', error = ?"
	    " WHERE id = ?", "ss", error, id));
}

static int
r_snapshots_fail_pending(struct store *s, const char *sandbox, const char *error)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE snapshots SET state = 'failed',"
	    " error = ? WHERE sandbox = ? AND state = 'pending'", "ss", error, sandbox));
}

static int
r_snapshot_has(struct store *s, const char *sandbox, int64_t gen, const char *digest)
{
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT COUNT(*) FROM snapshots WHERE sandbox = ? AND generation = ?"
	    " AND digest = ? AND state = 'ready'", "sis", sandbox, gen, digest);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1)
		rc = sqlite3_column_int64(st, 0) > 0;
	sq_stmt_release(st);
	return rc;
}

static int
r_audit(struct store *s, const char *principal, const char *action, const char *target,
    const char *detail)
{
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO audit (ts,principal,action,target,detail)"
	    " VALUES (?,?,?,?,?)", "issss", now_unix(), principal, action, target, detail));
}

static int
r_key_usage(struct store *s, const char *key_id, int64_t now, struct key_quota *q,
    int64_t *running, int64_t *memory_mb, int64_t *recent, int64_t *oldest)
{
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT k.max_sandboxes, k.max_memory_mb, k.creates_per_minute,"
	    " (SELECT COUNT(*) FROM sandboxes s WHERE s.api_key = k.id"
	    "   AND s.state NOT IN ('killed','paused','failed')),"
	    " (SELECT COALESCE(SUM(json_extract(s.resources, '$.memory_mb')), 0) FROM sandboxes s"
	    "   WHERE s.api_key = k.id AND s.state NOT IN ('killed','paused','failed')),"
	    " (SELECT COUNT(*) FROM sandboxes s WHERE s.api_key = k.id AND s.created_at > ?2 - 60),"
	    " (SELECT COALESCE(MIN(created_at), 0) FROM sandboxes s WHERE s.api_key = k.id"
	    "   AND s.created_at > ?2 - 60)"
	    " FROM api_keys k WHERE k.id = ?1 AND k.revoked_at IS NULL", "si", key_id, now);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		q->max_sandboxes = sqlite3_column_int64(st, 0);
		q->max_memory_mb = sqlite3_column_int64(st, 1);
		q->creates_per_minute = sqlite3_column_int64(st, 2);
		*running = sqlite3_column_int64(st, 3);
		*memory_mb = sqlite3_column_int64(st, 4);
		*recent = sqlite3_column_int64(st, 5);
		*oldest = sqlite3_column_int64(st, 6);
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
	return rc;
}

const struct store_rows sq_rows = {
	.tx = sq_tx,
	.sandbox_insert = r_sandbox_insert,
	.sandbox_cur = r_sandbox_cur,
	.sandbox_load = r_sandbox_load,
	.sandbox_set_state = r_sandbox_set_state,
	.sandbox_set_pin = r_sandbox_set_pin,
	.sandbox_set_snapshot = r_sandbox_set_snapshot,
	.sandbox_key = r_sandbox_key,
	.sandbox_set_key = r_sandbox_set_key,
	.sandbox_network_get = sq_sandbox_network_get,
	.sandbox_network_set = sq_sandbox_network_set,
	.archive_pending_add = sq_archive_pending_add,
	.archive_pending_prune = sq_archive_pending_prune,
	.ops_oldest_open = sq_ops_oldest_open,
	.archive_referenced = sq_archive_referenced,
	.sandbox_ports_get = sq_sandbox_ports_get,
	.sandbox_ports_set = sq_sandbox_ports_set,
	.worker_gateway_get = sq_worker_gateway_get,
	.worker_gateway_set = sq_worker_gateway_set,
	.sandbox_refusals_add = sq_sandbox_refusals_add,
	.sandbox_refusals_get = sq_sandbox_refusals_get,
	.lease_take = r_lease_take,
	.lease_renew = r_lease_renew,
	.lease_release = r_lease_release,
	.sandboxes_on = r_sandboxes_on,
	.lost_execs = sq_lost_execs,
	.exec_error = sq_exec_error,
	.exec_get = r_exec_get,
	.exec_insert = r_exec_insert,
	.exec_set_retiring = r_exec_set_retiring,
	.exec_set_serving = r_exec_set_serving,
	.exec_set_failed = r_exec_set_failed,
	.exec_set_retired = r_exec_set_retired,
	.execs_fail_resident = r_execs_fail_resident,
	.assignment_add = r_assignment_add,
	.workers_load = r_workers_load,
	.worker_incarnation = r_worker_incarnation,
	.worker_set_live = r_worker_set_live,
	.worker_revision = r_worker_revision,
	.op_open = r_op_open,
	.ops_open_list = r_ops_open_list,
	.op_insert = r_op_insert,
	.op_get = r_op_get,
	.op_set_installing = r_op_set_installing,
	.op_end = r_op_end,
	.snapshot_add = r_snapshot_add,
	.snapshot_named_get = r_snapshot_named_get,
	.snapshot_named_count = r_snapshot_named_count,
	.snapshot_unname = r_snapshot_unname,
	.snapshot_named_bytes = r_snapshot_named_bytes,
	.snapshot_set_base = r_snapshot_set_base,
	.snapshots_of = r_snapshots_of,
	.snapshot_drop = r_snapshot_drop,
	.sandbox_latest = r_sandbox_latest,
	.snapshot_set_ready = r_snapshot_set_ready,
	.snapshot_set_failed = r_snapshot_set_failed,
	.snapshots_fail_pending = r_snapshots_fail_pending,
	.snapshot_has = r_snapshot_has,
	.audit = r_audit,
	.key_usage = r_key_usage,
	.edgecred_add = sq_edgecred_add,
	.edgecred_lookup = sq_edgecred_lookup,
	.edgecred_revoke = sq_edgecred_revoke,
	.traffic_token_set = sq_traffic_token_set,
	.traffic_token_get = sq_traffic_token_get,
	.sandbox_owner = sq_sandbox_owner,
	.access_token_add = sq_access_token_add,
	.access_token_lookup = sq_access_token_lookup,
};

/* ---- snapshot list, timeouts, activity (whole operations of their own) ---- */

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
sq_snapshots_list(struct store *s, const char *owner, const char *sandbox, json_t **out)
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
	sq_stmt_release(st);
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

struct timeouts_ctx {
	const char *owner, *id, *timeouts;
	json_t **out;
};

static int
timeouts_tx(struct store *s, void *arg)
{
	struct timeouts_ctx *x = arg;
	int rc;

	if ((rc = sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET timeouts = ?"
	    " WHERE owner = ? AND id = ?", "sss", x->timeouts, x->owner, x->id))) < 0)
		return rc;
	if (sqlite3_changes(DB(s)) == 0)
		return -ENOENT;
	if ((rc = r_audit(s, x->owner, "sandbox.timeouts", x->id, x->timeouts)) < 0)
		return rc;
	return sq_sandbox_load(SQ(s), x->owner, x->id, x->out);
}

int
sq_sandbox_set_timeouts(struct store *s, const char *owner, const char *id,
    const char *timeouts, json_t **out)
{
	struct timeouts_ctx x = { owner, id, timeouts, out };
	int rc;

	*out = NULL;
	if ((rc = sq_tx(s, timeouts_tx, &x)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* one statement, so atomic against an operation's transaction: either the
 * hold lands while the route still serves (and the operation that would
 * retire it then sees it), or the operation came first and nothing is
 * held */
int
sq_route_hold(struct store *s, const char *id, uint64_t gen, int64_t until_ms)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET route_hold_until ="
	    " MAX(route_hold_until, ?1) WHERE id = ?2 AND state = 'running' AND EXISTS"
	    " (SELECT 1 FROM executions e WHERE e.sandbox = ?2 AND e.generation = ?3"
	    "  AND e.state = 'serving' AND e.generation ="
	    "  (SELECT MAX(generation) FROM executions WHERE sandbox = ?2))", "isi",
	    until_ms, id, (int64_t)gen));
	if (rc == 0)
		rc = sqlite3_changes(q->db) > 0 ? 1 : 0;
	sq_unlock(q);
	return rc;
}

int
sq_sandbox_touch(struct store *s, const char *id, int64_t now)
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
sq_timeouts_due(struct store *s, int64_t now, json_t **out)
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
