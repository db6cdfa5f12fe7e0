/* The PostgreSQL backend, rows half: the row operations the lifecycle
 * runs on (store_tx.h) and the lifecycle's plain reads and writes; the
 * statements of store_sqlite_rows.c in PostgreSQL's dialect. The caller
 * holds the connection inside a transaction (pg_tx) unless said otherwise.
 * Leases are compare-and-swap: an UPDATE whose WHERE names the expected
 * holder, and the rows it changed say who won. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

#include "log.h"
#include "store.h"
#include "store_pg.h"
#include "store_tx.h"
#include "util.h"

#define Q(s) PGS(s)

/* ---- sandboxes ---- */

static int
r_sandbox_insert(struct store *s, const char *owner, const char *id,
    const struct sandbox_spec *sp, int64_t now)
{
	return pg_run(Q(s), "INSERT INTO sandboxes (id, owner, state, template,"
	    " resources, timeouts, metadata, pinned_worker, created_at, api_key, network, ports)"
	    " VALUES ($1,$2,'creating',$3,$4,$5,$6,$7,$8,$9,$10,$11)", "sssssssisss", id, owner,
	    sp->template_, sp->resources, sp->timeouts, sp->metadata, sp->pinned, now, sp->api_key,
	    sp->network, sp->ports);
}

static int
r_sandbox_cur(struct store *s, const char *owner, const char *id, struct sbx_cur *c)
{
	PGresult *res;
	int rc;

	memset(c, 0, sizeof(*c));
	res = pg_q(Q(s), &rc, "SELECT s.state, COALESCE(s.lease_owner,''), COALESCE(s.snapshot,''),"
	    " COALESCE(s.pinned_worker,''), s.template, s.resources,"
	    " COALESCE(e.generation, 0), COALESCE(e.worker,''), COALESCE(e.state,''),"
	    " s.route_hold_until FROM sandboxes s LEFT JOIN executions e ON e.sandbox = s.id"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.owner = $1 AND s.id = $2", "ss", owner, id);
	if (res == NULL)
		return rc;
	if (PQntuples(res) == 1) {
		pg_copy(res, 0, 0, c->state, sizeof(c->state));
		pg_copy(res, 0, 1, c->lease_owner, sizeof(c->lease_owner));
		pg_copy(res, 0, 2, c->snapshot, sizeof(c->snapshot));
		pg_copy(res, 0, 3, c->pinned, sizeof(c->pinned));
		c->template_ = strdup(PQgetvalue(res, 0, 4));
		c->resources = strdup(PQgetvalue(res, 0, 5));
		c->gen = pg_i(res, 0, 6);
		pg_copy(res, 0, 7, c->worker, sizeof(c->worker));
		pg_copy(res, 0, 8, c->exec_state, sizeof(c->exec_state));
		c->route_hold_until = pg_i(res, 0, 9);
		rc = c->template_ && c->resources ? 0 : -ENOMEM;
	} else {
		rc = -ENOENT;
	}
	PQclear(res);
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
	return pg_sandbox_load(Q(s), owner, id, out);
}

static int
r_sandbox_set_state(struct store *s, const char *id, const char *state)
{
	return pg_run(Q(s), "UPDATE sandboxes SET state = $1 WHERE id = $2", "ss", state, id);
}

static int
r_sandbox_set_pin(struct store *s, const char *id, const char *worker)
{
	return pg_run(Q(s), "UPDATE sandboxes SET pinned_worker = $1 WHERE id = $2", "ss",
	    worker, id);
}

static int
r_sandbox_set_snapshot(struct store *s, const char *id, const char *digest)
{
	return pg_run(Q(s), "UPDATE sandboxes SET snapshot = $1 WHERE id = $2", "ss", digest, id);
}

static int
r_sandbox_key(struct store *s, const char *id, char key[STORE_CREDID_LEN + 1])
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT COALESCE(api_key,'') FROM sandboxes WHERE id = $1", "s", id);
	if (res == NULL)
		return rc;
	rc = 0;
	if (PQntuples(res) == 1) {
		pg_copy(res, 0, 0, key, STORE_CREDID_LEN + 1);
		rc = 1;
	}
	PQclear(res);
	return rc;
}

static int
r_sandbox_set_key(struct store *s, const char *id, const char *key)
{
	return pg_run(Q(s), "UPDATE sandboxes SET api_key = $1 WHERE id = $2", "ss", key, id);
}

static int
r_lease_take(struct store *s, const char *id, const char *who, int64_t expiry, int64_t now)
{
	int rc = pg_run(Q(s), "UPDATE sandboxes SET lease_owner = $1, lease_expiry = $2"
	    " WHERE id = $3 AND (lease_owner IS NULL OR lease_expiry < $4)", "sisi",
	    who, expiry, id, now);

	return rc < 0 ? rc : Q(s)->changes > 0;
}

static int
r_lease_renew(struct store *s, const char *id, const char *who, int64_t expiry)
{
	return pg_run(Q(s), "UPDATE sandboxes SET lease_expiry = $1 WHERE id = $2"
	    " AND lease_owner = $3", "iss", expiry, id, who);
}

static int
r_lease_release(struct store *s, const char *id, const char *who)
{
	return pg_run(Q(s), "UPDATE sandboxes SET lease_owner = NULL, lease_expiry = NULL"
	    " WHERE id = $1 AND ($2::text IS NULL OR lease_owner = $2)", "ss", id, who);
}

static json_t *
on_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s?}", "id", pg_s(r, i, 0), "template", pg_s(r, i, 1),
	    "resources", pg_s(r, i, 2), "pinned", pg_s(r, i, 3));
}

static int
r_sandboxes_on(struct store *s, const char *worker, const char *resident, json_t **out)
{
	PGresult *res;
	int err;

	res = pg_q(Q(s), &err, "SELECT e.sandbox, s.template, s.resources,"
	    " s.pinned_worker FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.worker = $1 AND e.resident = $2 AND e.state IN ('pending','starting','serving')"
	    " AND s.state IN ('creating','running')"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " ORDER BY e.rowid", "ss", worker, resident);
	return pg_list(Q(s), res, err, on_row, NULL, out);
}

/* ---- executions and assignments ---- */

static int
r_exec_get(struct store *s, const char *sandbox, int64_t gen, struct exec_row *e)
{
	PGresult *res;
	int rc;

	memset(e, 0, sizeof(*e));
	res = pg_q(Q(s), &rc, "SELECT e.worker, e.substrate, e.resident, e.activation, e.state,"
	    " s.state, (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.sandbox = $1 AND e.generation = $2", "si", sandbox, gen);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1;
	if (rc == 1) {
		pg_copy(res, 0, 0, e->worker, sizeof(e->worker));
		pg_copy(res, 0, 1, e->substrate, sizeof(e->substrate));
		pg_copy(res, 0, 2, e->resident, sizeof(e->resident));
		e->activation = pg_i(res, 0, 3);
		pg_copy(res, 0, 4, e->state, sizeof(e->state));
		pg_copy(res, 0, 5, e->sandbox_state, sizeof(e->sandbox_state));
		e->maxgen = pg_i(res, 0, 6);
	}
	PQclear(res);
	return rc;
}

/* the next generation is read and inserted in the caller's serializable
 * transaction: two replicas that both read MAX(generation) = n cannot
 * both insert n + 1 (the primary key refuses one, or the commit fails
 * with a serialization failure that pg_tx retries) */
static int
r_exec_insert(struct store *s, const char *sandbox, const char *worker,
    const char *incarnation, int64_t now, int64_t *gen)
{
	PGresult *res;
	int rc;

	*gen = 0;
	res = pg_q(Q(s), &rc, "INSERT INTO executions (sandbox, generation, worker,"
	    " substrate, activation, resident, state, created_at, updated_at)"
	    " SELECT $1, COALESCE(MAX(generation), 0) + 1, $2, 'jail', 1, $3, 'pending', $4, $4"
	    " FROM executions WHERE sandbox = $1 RETURNING generation", "sssi", sandbox, worker,
	    incarnation, now);
	if (res == NULL)
		return rc;
	if (PQntuples(res) == 1)
		*gen = pg_i(res, 0, 0);
	PQclear(res);
	return *gen < 1 ? -EIO : 0;
}

static int
r_exec_set_retiring(struct store *s, const char *sandbox, int64_t gen, int64_t now)
{
	return pg_run(Q(s), "UPDATE executions SET state = 'retiring', updated_at = $1"
	    " WHERE sandbox = $2 AND generation = $3", "isi", now, sandbox, gen);
}

static int
r_exec_set_serving(struct store *s, const char *sandbox, int64_t gen, int64_t activation,
    int64_t now)
{
	return pg_run(Q(s), "UPDATE executions SET state = 'serving', activation = $1,"
	    " error = NULL, updated_at = $2 WHERE sandbox = $3 AND generation = $4",
	    "iisi", activation, now, sandbox, gen);
}

static int
r_exec_set_failed(struct store *s, const char *sandbox, int64_t gen, const char *error,
    int64_t now)
{
	return pg_run(Q(s), "UPDATE executions SET state = 'failed',"
	    " error = CASE WHEN state = 'failed' AND error IS NOT NULL THEN error ELSE $1 END,"
	    " updated_at = $2, ended_at = COALESCE(ended_at, $2)"
	    " WHERE sandbox = $3 AND generation = $4", "sisi", error, now, sandbox, gen);
}

static int
r_exec_set_retired(struct store *s, const char *sandbox, int64_t gen, int64_t now)
{
	return pg_run(Q(s), "UPDATE executions SET state = 'retired', updated_at = $1,"
	    " ended_at = $1 WHERE sandbox = $2 AND generation = $3", "isi", now, sandbox, gen);
}

static int
r_execs_fail_resident(struct store *s, const char *worker, const char *resident,
    const char *error, int64_t now)
{
	return pg_run(Q(s), "UPDATE executions SET state = 'failed', error = $1,"
	    " updated_at = $2, ended_at = $2 WHERE worker = $3 AND resident = $4"
	    " AND state NOT IN ('retired','failed')", "siss", error, now, worker, resident);
}

/* Revisions are issued under an advisory lock held to the commit, so
 * they commit in the order they were issued: a worker that read up to
 * revision n never misses a smaller one committed after. The NOTIFY is
 * delivered at the commit, to every replica's listener. */
static int
r_assignment_add(struct store *s, const char *worker, const char *sandbox, int64_t gen,
    const char *action, const char *spec, int64_t now)
{
	int rc;

	if ((rc = pg_run(Q(s), "SELECT pg_advisory_xact_lock($1)", "i", (int64_t)0x73706173)) < 0)
		return rc;
	if ((rc = pg_run(Q(s), "INSERT INTO assignments (worker, sandbox, generation,"
	    " action, spec, created_at) VALUES ($1,$2,$3,$4,$5,$6)", "ssissi", worker, sandbox, gen,
	    action, spec, now)) < 0)
		return rc;
	return pg_run(Q(s), "SELECT pg_notify('space_assignments', $1)", "s", worker);
}

/* ---- workers ---- */

static int
r_workers_load(struct store *s, const char *pinned, const char *prefer,
    struct worker_load *wl, size_t cap, size_t *n)
{
	PGresult *res;
	int rc, i;

	*n = 0;
	res = pg_q(Q(s), &rc,
	    "SELECT w.id, COALESCE(w.incarnation,''), w.capacity, w.state = 'live', COALESCE(u.n, 0),"
	    " w.memory_mb, w.cpu_percent, w.disk_mb, COALESCE(u.m, 0), COALESCE(u.c, 0),"
	    " COALESCE(u.d, 0) FROM workers w" PG_WORKER_USAGE
	    " WHERE ($1::text IS NULL AND w.state = 'live' AND w.incarnation IS NOT NULL)"
	    "   OR w.id = $1 ORDER BY (w.id IS NOT DISTINCT FROM $2) DESC, 5, w.id LIMIT $3",
	    "ssi", pinned, prefer, (int64_t)cap);
	if (res == NULL)
		return rc;
	for (i = 0; i < PQntuples(res) && *n < cap; i++) {
		struct worker_load *w = &wl[*n];
		pg_copy(res, i, 0, w->id, sizeof(w->id));
		pg_copy(res, i, 1, w->incarnation, sizeof(w->incarnation));
		w->capacity = pg_i(res, i, 2);
		w->live = pg_b(res, i, 3) && w->incarnation[0];
		w->active = pg_i(res, i, 4);
		w->total.memory_mb = pg_i(res, i, 5);
		w->total.cpu_percent = pg_i(res, i, 6);
		w->total.disk_mb = pg_i(res, i, 7);
		w->used.memory_mb = pg_i(res, i, 8);
		w->used.cpu_percent = pg_i(res, i, 9);
		w->used.disk_mb = pg_i(res, i, 10);
		(*n)++;
	}
	PQclear(res);
	return 0;
}

static int
r_worker_incarnation(struct store *s, const char *worker, char inc[SPACE_ID_MAX + 1])
{
	PGresult *res;
	int rc;

	inc[0] = '\0';
	res = pg_q(Q(s), &rc, "SELECT COALESCE(incarnation, '') FROM workers WHERE id = $1", "s",
	    worker);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pg_copy(res, 0, 0, inc, SPACE_ID_MAX + 1);
	PQclear(res);
	return rc;
}

static int
r_worker_set_live(struct store *s, const char *worker, const char *incarnation,
    const char *endpoint, int64_t capacity, const struct res *t, int64_t now)
{
	return pg_run(Q(s), "UPDATE workers SET incarnation = $1, endpoint = $2,"
	    " capacity = $3, memory_mb = $4, cpu_percent = $5, disk_mb = $6, state = 'live',"
	    " last_heartbeat = $7 WHERE id = $8", "ssiiiiis", incarnation, endpoint, capacity,
	    t->memory_mb, t->cpu_percent, t->disk_mb, now, worker);
}

static int
r_worker_revision(struct store *s, const char *worker, int64_t *rev)
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT COALESCE(MAX(revision), 0) FROM assignments"
	    " WHERE worker = $1", "s", worker);
	if (res == NULL)
		return rc;
	*rev = pg_i(res, 0, 0);
	PQclear(res);
	return 0;
}

/* ---- operations ---- */

static int
r_op_open(struct store *s, const char *sandbox, char id[SPACE_ID_MAX + 1], char kind[16],
    char owner[SPACE_ID_MAX + 1])
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT o.id, o.kind, s.owner FROM operations o JOIN sandboxes s"
	    " ON s.id = o.sandbox WHERE o.sandbox = $1 AND o.step <> 'done' LIMIT 1", "s", sandbox);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1;
	if (rc == 1) {
		pg_copy(res, 0, 0, id, SPACE_ID_MAX + 1);
		pg_copy(res, 0, 1, kind, 16);
		pg_copy(res, 0, 2, owner, SPACE_ID_MAX + 1);
	}
	PQclear(res);
	return rc;
}

/* outside a transaction: each id is then driven in its own */
static int
r_ops_open_list(struct store *s, const char *sandbox, char (*ids)[SPACE_ID_MAX + 1],
    size_t cap, size_t *n)
{
	struct pgs *q = Q(s);
	PGresult *res;
	int rc, i;

	*n = 0;
	pg_lock(q);
	res = pg_read(q, &rc, "SELECT id FROM operations WHERE step <> 'done'"
	    " AND ($1::text IS NULL OR sandbox = $1) ORDER BY created, rowid LIMIT $2", "si",
	    sandbox, (int64_t)cap);
	if (res != NULL) {
		for (i = 0; i < PQntuples(res) && *n < cap; i++)
			pg_copy(res, i, 0, ids[(*n)++], SPACE_ID_MAX + 1);
		PQclear(res);
		rc = 0;
	}
	pg_unlock(q);
	return rc;
}

static int
r_op_insert(struct store *s, const struct op_new *o, int64_t now)
{
	return pg_run(Q(s), "INSERT INTO operations (id, sandbox, kind, target, step,"
	    " from_gen, to_gen, snapshot_id, reason, created, updated)"
	    " VALUES ($1,$2,$3,$4,$5,NULLIF($6,0),NULLIF($7,0),$8,$9,$10,$10)", "sssssiissi",
	    o->id, o->sandbox, o->kind, o->target, o->step, o->from_gen, o->to_gen,
	    o->snapshot_id, o->reason, now);
}

static int
r_op_get(struct store *s, const char *id, struct op_view *o)
{
	PGresult *res;
	int rc;

	memset(o, 0, sizeof(*o));
	res = pg_q(Q(s), &rc, "SELECT o.id, o.sandbox, o.kind, o.step, COALESCE(o.target,''),"
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
	    " WHERE o.id = $1 AND o.step <> 'done'", "s", id);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1;
	if (rc == 1) {
		pg_copy(res, 0, 0, o->id, sizeof(o->id));
		pg_copy(res, 0, 1, o->sandbox, sizeof(o->sandbox));
		pg_copy(res, 0, 2, o->kind, sizeof(o->kind));
		pg_copy(res, 0, 3, o->step, sizeof(o->step));
		pg_copy(res, 0, 4, o->target, sizeof(o->target));
		pg_copy(res, 0, 5, o->snapshot_id, sizeof(o->snapshot_id));
		o->from_gen = pg_i(res, 0, 6);
		o->to_gen = pg_i(res, 0, 7);
		pg_copy(res, 0, 8, o->owner, sizeof(o->owner));
		pg_copy(res, 0, 9, o->lease_owner, sizeof(o->lease_owner));
		o->lease_expiry = pg_i(res, 0, 10);
		o->leased = pg_b(res, 0, 11);
		pg_copy(res, 0, 12, o->sstate, sizeof(o->sstate));
		pg_copy(res, 0, 13, o->snapshot, sizeof(o->snapshot));
		pg_copy(res, 0, 14, o->pinned, sizeof(o->pinned));
		pg_copy(res, 0, 15, o->from_state, sizeof(o->from_state));
		pg_copy(res, 0, 16, o->from_worker, sizeof(o->from_worker));
		pg_copy(res, 0, 17, o->to_state, sizeof(o->to_state));
		pg_copy(res, 0, 18, o->snap_state, sizeof(o->snap_state));
		o->template_ = strdup(PQgetvalue(res, 0, 19));
		o->resources = strdup(PQgetvalue(res, 0, 20));
		pg_copy(res, 0, 21, o->from_snapshot, sizeof(o->from_snapshot));
		rc = o->template_ && o->resources ? 1 : -ENOMEM;
	}
	PQclear(res);
	return rc;
}

static int
r_op_set_installing(struct store *s, const char *id, int64_t to_gen, const char *target,
    int64_t now)
{
	return pg_run(Q(s), "UPDATE operations SET step = 'installing', to_gen = $1,"
	    " target = $2, updated = $3 WHERE id = $4", "isis", to_gen, target, now, id);
}

static int
r_op_end(struct store *s, const char *id, const char *result, int64_t now)
{
	return pg_run(Q(s), "UPDATE operations SET step = 'done', result = $1,"
	    " updated = $2, ended = $2 WHERE id = $3", "sis", result, now, id);
}

/* ---- snapshots ---- */

static int
r_snapshot_add(struct store *s, const char *id, const char *sandbox, int64_t gen,
    const char *name, const char *kind, const char *state, const char *digest, int64_t size,
    int64_t now)
{
	return pg_run(Q(s), "INSERT INTO snapshots (id, sandbox, generation,"
	    " name, kind, state, digest, size, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,"
	    " CASE WHEN $8 < 0 THEN NULL ELSE $8 END,$9)", "ssissssii", id, sandbox, gen, name,
	    kind, state, digest, size, now);
}

static int
r_snapshot_named_get(struct store *s, const char *id, struct snap_row *sn)
{
	PGresult *res;
	int rc;

	memset(sn, 0, sizeof(*sn));
	res = pg_q(Q(s), &rc, "SELECT sn.state, sn.sandbox, sn.generation, e.worker,"
	    " COALESCE(sn.digest,'') FROM snapshots sn JOIN executions e ON e.sandbox = sn.sandbox"
	    " AND e.generation = sn.generation WHERE sn.id = $1 AND sn.kind = 'named'", "s", id);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1;
	if (rc == 1) {
		pg_copy(res, 0, 0, sn->state, sizeof(sn->state));
		pg_copy(res, 0, 1, sn->sandbox, sizeof(sn->sandbox));
		sn->generation = pg_i(res, 0, 2);
		pg_copy(res, 0, 3, sn->worker, sizeof(sn->worker));
		pg_copy(res, 0, 4, sn->digest, sizeof(sn->digest));
	}
	PQclear(res);
	return rc;
}

static int
r_snapshot_named_count(struct store *s, const char *sandbox, int64_t *n)
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT COUNT(*) FROM snapshots WHERE sandbox = $1"
	    " AND kind = 'named' AND state <> 'failed'", "s", sandbox);
	if (res == NULL)
		return rc;
	*n = PQntuples(res) == 1 ? pg_i(res, 0, 0) : 0;
	PQclear(res);
	return 0;
}

static int
r_snapshot_named_bytes(struct store *s, const char *owner, int64_t *bytes)
{
	PGresult *res;
	int rc;

	*bytes = 0;
	res = pg_q(Q(s), &rc, "SELECT COALESCE(SUM(n.size), 0) FROM snapshots n"
	    " JOIN sandboxes s ON s.id = n.sandbox WHERE s.owner = $1 AND n.kind = 'named'"
	    " AND n.state = 'ready'", "s", owner);
	if (res == NULL)
		return rc;
	*bytes = PQntuples(res) == 1 ? pg_i(res, 0, 0) : 0;
	PQclear(res);
	return 0;
}

static int
r_snapshot_unname(struct store *s, const char *id, bool remove)
{
	return remove ?
	    pg_run(Q(s), "DELETE FROM snapshots WHERE id = $1 AND kind = 'named'", "s", id) :
	    pg_run(Q(s), "UPDATE snapshots SET kind = 'auto', name = NULL WHERE id = $1"
	    " AND kind = 'named'", "s", id);
}

static int
r_snapshot_set_base(struct store *s, const char *id, const char *base)
{
	return pg_run(Q(s), "UPDATE snapshots SET base = $1 WHERE id = $2", "ss", base, id);
}

static json_t *
on_snapshot(struct pgs *q, PGresult *r, int i, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s?,s:s?}", "id", pg_s(r, i, 0), "kind", pg_s(r, i, 1),
	    "state", pg_s(r, i, 2), "digest", pg_s(r, i, 3), "base", pg_s(r, i, 4));
}

static int
r_snapshots_of(struct store *s, const char *sandbox, json_t **out)
{
	PGresult *res;
	int err;

	res = pg_q(Q(s), &err, "SELECT id, kind, state, digest, base FROM snapshots"
	    " WHERE sandbox = $1 ORDER BY created_at, id", "s", sandbox);
	return pg_list(Q(s), res, err, on_snapshot, NULL, out);
}

static int
r_sandbox_latest(struct store *s, const char *id, char out[SPACE_ID_MAX + 1])
{
	PGresult *res;
	int rc;

	out[0] = '\0';
	res = pg_q(Q(s), &rc, "SELECT COALESCE(snapshot, '') FROM sandboxes WHERE id = $1", "s", id);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1 ? 0 : -ENOENT;
	if (rc == 0)
		pg_copy(res, 0, 0, out, SPACE_ID_MAX + 1);
	PQclear(res);
	return rc;
}

static int
r_snapshot_drop(struct store *s, const char *id)
{
	return pg_run(Q(s), "DELETE FROM snapshots WHERE id = $1 AND kind = 'auto'", "s", id);
}

static int
r_snapshot_set_ready(struct store *s, const char *id, const char *digest, int64_t size)
{
	return pg_run(Q(s), "UPDATE snapshots SET state = 'ready', digest = $1, size = $2"
	    " WHERE id = $3", "sis", digest, size, id);
}

static int
r_snapshot_set_failed(struct store *s, const char *id, const char *error)
{
	return pg_run(Q(s), "UPDATE snapshots SET state = 'failed', error = $1 WHERE id = $2",
	    "ss", error, id);
}

static int
r_snapshots_fail_pending(struct store *s, const char *sandbox, const char *error)
{
	return pg_run(Q(s), "UPDATE snapshots SET state = 'failed', error = $1"
	    " WHERE sandbox = $2 AND state = 'pending'", "ss", error, sandbox);
}

static int
r_snapshot_has(struct store *s, const char *sandbox, int64_t gen, const char *digest)
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT COUNT(*) FROM snapshots WHERE sandbox = $1 AND"
	    " generation = $2 AND digest = $3 AND state = 'ready'", "sis", sandbox, gen, digest);
	if (res == NULL)
		return rc;
	rc = pg_i(res, 0, 0) > 0;
	PQclear(res);
	return rc;
}

static int
r_audit(struct store *s, const char *principal, const char *action, const char *target,
    const char *detail)
{
	return pg_run(Q(s), "INSERT INTO audit (ts,principal,action,target,detail)"
	    " VALUES ($1,$2,$3,$4,$5)", "issss", now_unix(), principal, action, target, detail);
}

static int
r_key_usage(struct store *s, const char *key_id, int64_t now, struct key_quota *kq,
    int64_t *running, int64_t *memory_mb, int64_t *recent, int64_t *oldest)
{
	PGresult *res;
	int rc;

	res = pg_q(Q(s), &rc, "SELECT k.max_sandboxes, k.max_memory_mb, k.creates_per_minute,"
	    " (SELECT COUNT(*) FROM sandboxes s WHERE s.api_key = k.id"
	    "   AND s.state NOT IN ('killed','paused','failed')),"
	    " (SELECT COALESCE(SUM((s.resources::jsonb->>'memory_mb')::bigint), 0) FROM sandboxes s"
	    "   WHERE s.api_key = k.id AND s.state NOT IN ('killed','paused','failed')),"
	    " (SELECT COUNT(*) FROM sandboxes s WHERE s.api_key = k.id AND s.created_at > $2 - 60),"
	    " (SELECT COALESCE(MIN(created_at), 0) FROM sandboxes s WHERE s.api_key = k.id"
	    "   AND s.created_at > $2 - 60)"
	    " FROM api_keys k WHERE k.id = $1 AND k.revoked_at IS NULL", "si", key_id, now);
	if (res == NULL)
		return rc;
	rc = -ENOENT;
	if (PQntuples(res) == 1) {
		kq->max_sandboxes = pg_i(res, 0, 0);
		kq->max_memory_mb = pg_i(res, 0, 1);
		kq->creates_per_minute = pg_i(res, 0, 2);
		*running = pg_i(res, 0, 3);
		*memory_mb = pg_i(res, 0, 4);
		*recent = pg_i(res, 0, 5);
		*oldest = pg_i(res, 0, 6);
		rc = 0;
	}
	PQclear(res);
	return rc;
}

const struct store_rows pg_rows = {
	.tx = pg_tx,
	.sandbox_insert = r_sandbox_insert,
	.sandbox_cur = r_sandbox_cur,
	.sandbox_load = r_sandbox_load,
	.sandbox_set_state = r_sandbox_set_state,
	.sandbox_set_pin = r_sandbox_set_pin,
	.sandbox_set_snapshot = r_sandbox_set_snapshot,
	.lease_take = r_lease_take,
	.lease_renew = r_lease_renew,
	.lease_release = r_lease_release,
	.sandboxes_on = r_sandboxes_on,
	.lost_execs = pg_lost_execs,
	.exec_error = pg_exec_error,
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
	.sandbox_key = r_sandbox_key,
	.sandbox_set_key = r_sandbox_set_key,
	.sandbox_network_get = pg_sandbox_network_get,
	.sandbox_network_set = pg_sandbox_network_set,
	.sandbox_ports_get = pg_sandbox_ports_get,
	.sandbox_ports_set = pg_sandbox_ports_set,
	.worker_gateway_get = pg_worker_gateway_get,
	.worker_gateway_set = pg_worker_gateway_set,
	.sandbox_refusals_add = pg_sandbox_refusals_add,
	.sandbox_refusals_get = pg_sandbox_refusals_get,
	.archive_pending_add = pg_archive_pending_add,
	.archive_pending_prune = pg_archive_pending_prune,
	.ops_oldest_open = pg_ops_oldest_open,
	.archive_referenced = pg_archive_referenced,
	.edgecred_add = pg_edgecred_add,
	.edgecred_lookup = pg_edgecred_lookup,
	.edgecred_revoke = pg_edgecred_revoke,
	.traffic_token_set = pg_traffic_token_set,
	.traffic_token_get = pg_traffic_token_get,
	.sandbox_owner = pg_sandbox_owner,
	.access_token_add = pg_access_token_add,
	.access_token_lookup = pg_access_token_lookup,
};

/* ---- snapshot list, timeouts, activity (whole operations of their own) ---- */

static json_t *
snapshot_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	char ts[RFC3339_LEN + 1];

	rfc3339_format(pg_i(r, i, 6), ts);
	return json_pack("{s:s,s:s?,s:s,s:s?,s:o,s:I,s:s}",
	    "id", pg_s(r, i, 0), "name", pg_s(r, i, 1), "state", pg_s(r, i, 2),
	    "digest", pg_s(r, i, 3),
	    "size", pg_null(r, i, 4) ? json_null() : json_integer(pg_i(r, i, 4)),
	    "generation", (json_int_t)pg_i(r, i, 5), "created_at", ts);
}

int
pg_snapshots_list(struct store *s, const char *owner, const char *sandbox, json_t **out)
{
	struct pgs *q = Q(s);
	PGresult *res;
	int rc, err;

	pg_lock(q);
	res = pg_read(q, &rc, "SELECT 1 FROM sandboxes WHERE owner = $1 AND id = $2", "ss", owner,
	    sandbox);
	if (res == NULL)
		goto out;
	rc = PQntuples(res) == 1 ? 0 : -ENOENT;
	PQclear(res);
	if (rc < 0)
		goto out;
	res = pg_q(q, &err, "SELECT id, name, state, digest, size, generation, created_at"
	    " FROM snapshots WHERE sandbox = $1 ORDER BY created_at, rowid", "s", sandbox);
	rc = pg_list(q, res, err, snapshot_row, NULL, out);
out:
	pg_unlock(q);
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

	if ((rc = pg_run(Q(s), "UPDATE sandboxes SET timeouts = $1 WHERE owner = $2 AND id = $3",
	    "sss", x->timeouts, x->owner, x->id)) < 0)
		return rc;
	if (Q(s)->changes == 0)
		return -ENOENT;
	if ((rc = r_audit(s, x->owner, "sandbox.timeouts", x->id, x->timeouts)) < 0)
		return rc;
	json_decref(*x->out);   /* a retried transaction loads it again */
	*x->out = NULL;
	return pg_sandbox_load(Q(s), x->owner, x->id, x->out);
}

int
pg_sandbox_set_timeouts(struct store *s, const char *owner, const char *id,
    const char *timeouts, json_t **out)
{
	struct timeouts_ctx x = { owner, id, timeouts, out };
	int rc;

	*out = NULL;
	if ((rc = pg_tx(s, timeouts_tx, &x)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* one statement, so atomic against an operation's transaction */
int
pg_route_hold(struct store *s, const char *id, uint64_t gen, int64_t until_ms)
{
	struct pgs *q = Q(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "UPDATE sandboxes SET route_hold_until ="
	    " GREATEST(route_hold_until, $1) WHERE id = $2 AND state = 'running' AND EXISTS"
	    " (SELECT 1 FROM executions e WHERE e.sandbox = $2 AND e.generation = $3"
	    "  AND e.state = 'serving' AND e.generation ="
	    "  (SELECT MAX(generation) FROM executions WHERE sandbox = $2))", "isi",
	    until_ms, id, (int64_t)gen);
	if (rc == 0)
		rc = q->changes > 0 ? 1 : 0;
	pg_unlock(q);
	return rc;
}

int
pg_sandbox_touch(struct store *s, const char *id, int64_t now)
{
	struct pgs *q = Q(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "UPDATE sandboxes SET last_activity = $1 WHERE id = $2"
	    " AND last_activity < $1", "is", now, id);
	pg_unlock(q);
	return rc;
}

static json_t *
due_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	return json_pack("{s:s,s:s,s:s,s:s}", "owner", pg_s(r, i, 0), "id", pg_s(r, i, 1),
	    "action", pg_s(r, i, 2), "which", pg_s(r, i, 3));
}

int
pg_timeouts_due(struct store *s, int64_t now, json_t **out)
{
	struct pgs *q = Q(s);
	PGresult *res;
	int rc, err;

	pg_lock(q);
	res = pg_read(q, &err, "SELECT s.owner, s.id, COALESCE(s.timeouts::jsonb->>'action',"
	    " 'pause'),"
	    " CASE WHEN COALESCE((s.timeouts::jsonb->>'absolute')::bigint, 0) > 0"
	    "   AND $1 - e.created_at >= (s.timeouts::jsonb->>'absolute')::bigint THEN 'absolute'"
	    "   ELSE 'idle' END"
	    " FROM sandboxes s JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.state = 'running' AND e.state = 'serving'"
	    " AND (s.lease_owner IS NULL OR s.lease_expiry < $1)"
	    " AND NOT EXISTS (SELECT 1 FROM operations o WHERE o.sandbox = s.id AND o.step <> 'done')"
	    " AND ((COALESCE((s.timeouts::jsonb->>'idle')::bigint, 0) > 0"
	    "       AND $1 - GREATEST(s.last_activity, e.created_at)"
	    "         >= (s.timeouts::jsonb->>'idle')::bigint)"
	    "   OR (COALESCE((s.timeouts::jsonb->>'absolute')::bigint, 0) > 0"
	    "       AND $1 - e.created_at >= (s.timeouts::jsonb->>'absolute')::bigint))"
	    " LIMIT 256", "i", now);
	rc = pg_list(q, res, err, due_row, NULL, out);
	pg_unlock(q);
	return rc;
}
