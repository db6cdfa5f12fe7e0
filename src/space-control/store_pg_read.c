/* The PostgreSQL backend, reads: sandboxes as the API shows them, a
 * worker's heartbeat and assignment stream, the worker list; the
 * statements of store_sqlite_read.c in PostgreSQL's dialect. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

#include "claims.h"
#include "log.h"
#include "store.h"
#include "store_pg.h"
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
sandbox_row(PGresult *r, int i)
{
	char ts[RFC3339_LEN + 1];
	json_t *o, *ex = json_null();

	rfc3339_format(pg_i(r, i, 6), ts);
	if (!pg_null(r, i, 7)) {
		ex = json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s?,s:s?}",
		    "generation", (json_int_t)pg_i(r, i, 7),
		    "worker", pg_s(r, i, 8),
		    "substrate", pg_s(r, i, 9),
		    "activation", (json_int_t)pg_i(r, i, 10),
		    "resident", pg_s(r, i, 11),
		    "state", pg_s(r, i, 12),
		    "endpoint", pg_s(r, i, 13),
		    "error", pg_s(r, i, 15));
	}
	o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:s?}",
	    "id", pg_s(r, i, 0),
	    "state", pg_s(r, i, 1),
	    "template", pg_s(r, i, 2),
	    "resources", pg_json(r, i, 3),
	    "timeouts", pg_json(r, i, 4),
	    "metadata", pg_json(r, i, 5),
	    "created_at", ts,
	    "execution", ex ? ex : json_null(),
	    "snapshot", pg_s(r, i, 14));
	/* the declared service ports ([{"port","public"}], api_ports.c) */
	if (o != NULL)
		json_object_set_new(o, "ports", pg_null(r, i, 16) ? json_array() : pg_json(r, i, 16));
	return o;
}

static json_t *
history_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	char ts[RFC3339_LEN + 1], te[RFC3339_LEN + 1];
	bool ended = !pg_null(r, i, 7);

	rfc3339_format(pg_i(r, i, 6), ts);
	if (ended)
		rfc3339_format(pg_i(r, i, 7), te);
	return json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s,s:s?,s:s?}",
	    "generation", (json_int_t)pg_i(r, i, 0),
	    "worker", pg_s(r, i, 1),
	    "substrate", pg_s(r, i, 2),
	    "activation", (json_int_t)pg_i(r, i, 3),
	    "resident", pg_s(r, i, 4),
	    "state", pg_s(r, i, 5),
	    "created_at", ts, "ended_at", ended ? te : NULL,
	    "error", pg_s(r, i, 8));
}

/* "history": every execution of the sandbox, oldest first */
static int
sandbox_history(struct pgs *q, json_t *o)
{
	PGresult *res;
	json_t *arr;
	int rc, err;

	if (o == NULL)
		return -ENOMEM;
	res = pg_q(q, &err, "SELECT generation, worker, substrate, activation, resident, state,"
	    " created_at, ended_at, error FROM executions WHERE sandbox = $1 ORDER BY generation",
	    "s", json_string_value(json_object_get(o, "id")));
	if ((rc = pg_list(q, res, err, history_row, NULL, &arr)) < 0)
		return rc;
	return json_object_set_new(o, "history", arr) < 0 ? -ENOMEM : 0;
}

/* the sandbox object; caller holds the lock (and the connection is up) */
int
pg_sandbox_load(struct pgs *q, const char *owner, const char *id, json_t **out)
{
	PGresult *res;
	int rc;

	res = pg_q(q, &rc, SANDBOX_SELECT " WHERE s.owner = $1 AND s.id = $2", "ss", owner, id);
	if (res == NULL)
		return rc;
	if (PQntuples(res) == 1) {
		*out = sandbox_row(res, 0);
		rc = *out ? 0 : -ENOMEM;
	} else {
		rc = -ENOENT;
	}
	PQclear(res);
	if (rc == 0 && (rc = sandbox_history(q, *out)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

int
pg_sandbox_get(struct store *s, const char *owner, const char *id, json_t **out)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	if ((rc = pg_connect(q)) == 0)
		rc = pg_sandbox_load(q, owner, id, out);
	pg_unlock(q);
	return rc;
}

static json_t *
sandbox_list_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	json_t *o = sandbox_row(r, i);

	if (o != NULL && sandbox_history(q, o) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

int
pg_sandbox_list(struct store *s, const char *owner, const char *after, bool live,
    int64_t limit, json_t **out)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc, err;

	pg_lock(q);
	res = pg_read(q, &err, SANDBOX_SELECT " WHERE s.owner = $1"
	    " AND ($2::text IS NULL OR (s.created_at, s.id) >"
	    "   (SELECT created_at, id FROM sandboxes WHERE id = $2 AND owner = $1))"
	    " AND ($3 = 0 OR s.state <> 'killed')"
	    " ORDER BY s.created_at, s.id LIMIT $4",
	    "ssii", owner, after, (int64_t)live, limit);
	rc = pg_list(q, res, err, sandbox_list_row, NULL, out);
	pg_unlock(q);
	return rc;
}

int
pg_sandbox_current(struct store *s, const char *owner, const char *id, struct exec_view *v)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	memset(v, 0, sizeof(*v));
	pg_lock(q);
	res = pg_read(q, &rc, "SELECT s.state, e.generation, e.worker, e.substrate, e.activation,"
	    " e.resident, e.state, w.endpoint, w.state FROM sandboxes s"
	    " LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " LEFT JOIN workers w ON w.id = e.worker"
	    " WHERE s.owner = $1 AND s.id = $2", "ss", owner, id);
	if (res != NULL) {
		rc = -ENOENT;
		if (PQntuples(res) == 1) {
			pg_copy(res, 0, 0, v->sandbox_state, sizeof(v->sandbox_state));
			snprintf(v->route.sandbox, sizeof(v->route.sandbox), "%s", id);
			if (!pg_null(res, 0, 1)) {
				v->route.generation = (uint64_t)pg_i(res, 0, 1);
				pg_copy(res, 0, 2, v->route.worker, sizeof(v->route.worker));
				pg_copy(res, 0, 3, v->route.substrate, sizeof(v->route.substrate));
				v->route.activation = (uint32_t)pg_i(res, 0, 4);
				pg_copy(res, 0, 5, v->route.resident, sizeof(v->route.resident));
				pg_copy(res, 0, 6, v->state, sizeof(v->state));
				pg_copy(res, 0, 7, v->endpoint, sizeof(v->endpoint));
				pg_copy(res, 0, 8, v->worker_state, sizeof(v->worker_state));
			}
			rc = 0;
		}
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

/* ---- workers ---- */

int
pg_worker_heartbeat(struct store *s, const char *worker, const char *incarnation,
    int64_t capacity, const struct res *total)
{
	struct pgs *q = PGS(s);
	int rc;

	/* as sq_worker_heartbeat: a negative figure is not reported */
	pg_lock(q);
	rc = pg_write(q, "UPDATE workers SET last_heartbeat = $1, state = 'live',"
	    " capacity = CASE WHEN $4 < 0 THEN capacity ELSE $4 END,"
	    " memory_mb = CASE WHEN $5 < 0 THEN memory_mb ELSE $5 END,"
	    " cpu_percent = CASE WHEN $6 < 0 THEN cpu_percent ELSE $6 END,"
	    " disk_mb = CASE WHEN $7 < 0 THEN disk_mb ELSE $7 END"
	    " WHERE id = $2 AND incarnation = $3", "issiiii", now_unix(), worker, incarnation,
	    capacity, total ? total->memory_mb : -1, total ? total->cpu_percent : -1,
	    total ? total->disk_mb : -1);
	if (rc == 0 && q->changes == 0)
		rc = -ESTALE;
	pg_unlock(q);
	return rc;
}

/* ctx: the revision of the last row, the worker's next cursor */
static json_t *
assignment_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	int64_t *rev = ctx;
	struct route_identity id;
	json_t *o;

	memset(&id, 0, sizeof(id));
	*rev = pg_i(r, i, 0);
	pg_copy(r, i, 3, id.sandbox, sizeof(id.sandbox));
	id.generation = (uint64_t)pg_i(r, i, 4);
	pg_copy(r, i, 5, id.worker, sizeof(id.worker));
	pg_copy(r, i, 6, id.substrate, sizeof(id.substrate));
	id.activation = (uint32_t)pg_i(r, i, 7);
	pg_copy(r, i, 8, id.resident, sizeof(id.resident));
	o = route_identity_pack(&id);
	return json_pack("{s:I,s:s,s:o,s:o}", "revision", (json_int_t)*rev,
	    "action", pg_s(r, i, 1), "identity", o ? o : json_null(), "spec", pg_json(r, i, 2));
}

int
pg_assignments_after(struct store *s, const char *worker, int64_t after, json_t **out,
    int64_t *revision)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int64_t rev;
	int rc, err;

	pg_lock(q);
	/* a cursor beyond every revision ever issued comes from another
	 * store (restored or re-created): replay the whole stream */
	res = pg_read(q, &rc, "SELECT COALESCE(pg_sequence_last_value("
	    "pg_get_serial_sequence('assignments', 'revision')), 0)", NULL);
	if (res == NULL)
		goto out;
	if (PQntuples(res) == 1 && after > pg_i(res, 0, 0))
		after = 0;
	PQclear(res);
	rev = after;
	res = pg_q(q, &err, "SELECT a.revision, a.action, a.spec, e.sandbox, e.generation, e.worker,"
	    " e.substrate, e.activation, e.resident FROM assignments a"
	    " JOIN executions e ON e.sandbox = a.sandbox AND e.generation = a.generation"
	    " JOIN workers w ON w.id = a.worker"
	    " WHERE a.worker = $1 AND a.revision > $2 AND e.resident = w.incarnation"
	    " ORDER BY a.revision LIMIT 1000", "si", worker, after);
	rc = pg_list(q, res, err, assignment_row, &rev, out);
	if (rc == 0)
		*revision = rev;
out:
	pg_unlock(q);
	return rc;
}

int
pg_workers_reap(struct store *s, int64_t older_than)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "UPDATE workers SET state = 'lost' WHERE state = 'live'"
	    " AND last_heartbeat < $1", "i", older_than);
	if (rc == 0)
		rc = (int)q->changes;
	pg_unlock(q);
	return rc;
}

int
pg_worker_counts(struct store *s, int64_t *live, int64_t *lost)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	pg_lock(q);
	res = pg_read(q, &rc, "SELECT COUNT(*) FILTER (WHERE state = 'live'),"
	    " COUNT(*) FILTER (WHERE state = 'lost') FROM workers", NULL);
	if (res != NULL) {
		*live = pg_i(res, 0, 0);
		*lost = pg_i(res, 0, 1);
		rc = 0;
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

static json_t *
worker_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	char ts[RFC3339_LEN + 1];
	int64_t hb = pg_i(r, i, 4);

	if (hb > 0)
		rfc3339_format(hb, ts);
	return json_pack("{s:s,s:s?,s:s,s:I,s:I,s:s?,s:{s:I,s:I,s:I},s:{s:I,s:I,s:I}}",
	    "id", pg_s(r, i, 0),
	    "endpoint", pg_s(r, i, 1),
	    "state", pg_s(r, i, 2),
	    "capacity", (json_int_t)pg_i(r, i, 3),
	    "sandboxes", (json_int_t)pg_i(r, i, 5),
	    "last_heartbeat", hb > 0 ? ts : NULL,
	    "resources", "memory_mb", (json_int_t)pg_i(r, i, 6),
	    "cpu_percent", (json_int_t)pg_i(r, i, 7),
	    "disk_mb", (json_int_t)pg_i(r, i, 8),
	    "used", "memory_mb", (json_int_t)pg_i(r, i, 9),
	    "cpu_percent", (json_int_t)pg_i(r, i, 10),
	    "disk_mb", (json_int_t)pg_i(r, i, 11));
}

int
pg_workers_list(struct store *s, json_t **out)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc, err;

	pg_lock(q);
	res = pg_read(q, &err, "SELECT w.id, w.endpoint, w.state, w.capacity, w.last_heartbeat,"
	    " COALESCE(u.n, 0), w.memory_mb, w.cpu_percent, w.disk_mb, COALESCE(u.m, 0),"
	    " COALESCE(u.c, 0), COALESCE(u.d, 0) FROM workers w" PG_WORKER_USAGE
	    " ORDER BY w.id", NULL);
	rc = pg_list(q, res, err, worker_row, NULL, out);
	pg_unlock(q);
	return rc;
}

/* as sq_archive_worker_refs */
int
pg_archive_worker_refs(struct store *s, const char *worker, const char *digest, int64_t *n)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	pg_lock(q);
	res = pg_read(q, &rc, "SELECT COUNT(*) FROM executions e WHERE e.worker = $1"
	    " AND e.state IN ('pending','starting','serving','retiring')"
	    " AND (EXISTS (SELECT 1 FROM snapshots a WHERE a.sandbox = e.sandbox AND a.digest = $2)"
	    "  OR EXISTS (SELECT 1 FROM sandboxes x WHERE x.id = e.sandbox AND x.snapshot = $2))", "ss", worker, digest);
	if (res != NULL) {
		*n = pg_i(res, 0, 0);
		rc = 0;
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

/* sandboxes not killed whose template is that digest (a paused one may
 * resume, a failed one be repaired) */
int
pg_template_refs(struct store *s, const char *digest, int64_t *n)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	pg_lock(q);
	res = pg_read(q, &rc, "SELECT COUNT(*) FROM sandboxes WHERE template = $1"
	    " AND state <> 'killed'", "s", digest);
	if (res != NULL) {
		*n = pg_i(res, 0, 0);
		rc = 0;
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}
