/* A lost worker's executions on the PostgreSQL backend: the row operations
 * of the failover (failover.c decides) in PostgreSQL's dialect, run inside
 * the caller's transaction. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <libpq-fe.h>

#include "store.h"
#include "store_pg.h"

static json_t *
lost_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	(void)q;
	(void)ctx;
	return json_pack("{s:s,s:s,s:I,s:s}", "owner", pg_s(r, i, 0), "sandbox", pg_s(r, i, 1),
	    "generation", (json_int_t)pg_i(r, i, 2), "worker", pg_s(r, i, 3));
}

int
pg_lost_execs(struct store *s, int64_t lost_before, const char *sandbox, json_t **out)
{
	PGresult *res;
	int err;

	res = pg_q(PGS(s), &err, "SELECT s.owner, e.sandbox, e.generation, e.worker"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " JOIN workers w ON w.id = e.worker AND w.incarnation = e.resident"
	    " WHERE w.state = 'lost' AND w.last_heartbeat < $1"
	    " AND e.state IN ('pending','starting','serving') AND s.state IN ('creating','running')"
	    " AND ($2::text IS NULL OR e.sandbox = $2)"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " ORDER BY e.rowid LIMIT 64", "is", lost_before, sandbox);
	return pg_list(PGS(s), res, err, lost_row, NULL, out);
}

int
pg_exec_error(struct store *s, const char *sandbox, int64_t gen, char *err, size_t cap)
{
	PGresult *res;
	int rc;

	err[0] = '\0';
	res = pg_q(PGS(s), &rc, "SELECT COALESCE(error, '') FROM executions"
	    " WHERE sandbox = $1 AND generation = $2", "si", sandbox, gen);
	if (res == NULL)
		return rc;
	rc = PQntuples(res) == 1;
	if (rc == 1) {
		const char *v = pg_s(res, 0, 0);

		snprintf(err, cap, "%s", v ? v : "");
	}
	PQclear(res);
	return rc;
}
