/* The snapshot store's references on the PostgreSQL backend: the row
 * operations of its collection (store_archives.c says when an archive is
 * needed) in PostgreSQL's dialect, run inside the caller's transaction. */
#include <errno.h>
#include <string.h>
#include <libpq-fe.h>

#include "store.h"
#include "store_pg.h"

int
pg_archive_pending_add(struct store *s, const char *digest, int64_t until)
{
	return pg_run(PGS(s), "INSERT INTO archive_pending (digest, until) VALUES ($1, $2)"
	    " ON CONFLICT (digest) DO UPDATE SET until = GREATEST(archive_pending.until, $2)",
	    "si", digest, until);
}

int
pg_archive_pending_prune(struct store *s, int64_t now)
{
	return pg_run(PGS(s), "DELETE FROM archive_pending WHERE until < $1", "i", now);
}

int
pg_ops_oldest_open(struct store *s, const char *worker, int64_t *created)
{
	PGresult *res;
	int rc;

	*created = 0;
	res = worker == NULL ? pg_q(PGS(s), &rc, "SELECT COALESCE(MIN(created), 0) FROM operations"
	    " WHERE step <> 'done'", NULL) :
	    pg_q(PGS(s), &rc, "SELECT COALESCE(MIN(o.created), 0) FROM operations o"
	    " LEFT JOIN executions e ON e.sandbox = o.sandbox AND e.generation = o.from_gen"
	    " WHERE o.step <> 'done' AND (e.worker IS NULL OR e.worker = $1)", "s", worker);
	if (res == NULL)
		return rc;
	*created = pg_i(res, 0, 0);
	PQclear(res);
	return 0;
}

int
pg_archive_referenced(struct store *s, const char *digest)
{
	PGresult *res;
	int rc;

	res = pg_q(PGS(s), &rc, "SELECT"
	    " EXISTS (SELECT 1 FROM snapshots sn JOIN sandboxes s ON s.id = sn.sandbox"
	    "   WHERE sn.digest = $1 AND (sn.kind = 'named' OR s.state <> 'killed'))"
	    " OR EXISTS (SELECT 1 FROM sandboxes WHERE snapshot = $1 AND state <> 'killed')"
	    " OR EXISTS (SELECT 1 FROM archive_pending WHERE digest = $1)"
	    " OR EXISTS (SELECT 1 FROM assignments a JOIN executions e ON e.sandbox = a.sandbox"
	    "   AND e.generation = a.generation WHERE a.action = 'install'"
	    "   AND e.state IN ('pending','starting') AND a.spec::jsonb->>'snapshot' = $1)",
	    "s", digest);
	if (res == NULL)
		return rc;
	rc = pg_b(res, 0, 0);
	PQclear(res);
	return rc;
}
