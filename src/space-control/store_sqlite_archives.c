/* The snapshot store's references on the SQLite backend: the row
 * operations of its collection (store_archives.c says when an archive is
 * needed), run inside the caller's transaction. */
#include <errno.h>
#include <string.h>
#include <sqlite3.h>

#include "store.h"
#include "store_sqlite.h"

#define DB(s) (SQ(s)->db)

int
sq_archive_pending_add(struct store *s, const char *digest, int64_t until)
{
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO archive_pending (digest, until)"
	    " VALUES (?1, ?2) ON CONFLICT (digest) DO UPDATE SET until = MAX(until, ?2)", "si",
	    digest, until));
}

int
sq_archive_pending_prune(struct store *s, int64_t now)
{
	return sq_run(DB(s), sq_prep(DB(s), "DELETE FROM archive_pending WHERE until < ?", "i", now));
}

int
sq_ops_oldest_open(struct store *s, const char *worker, int64_t *created)
{
	sqlite3_stmt *st;
	int rc;

	*created = 0;
	st = worker == NULL ? sq_prep(DB(s), "SELECT COALESCE(MIN(created), 0) FROM operations"
	    " WHERE step <> 'done'", NULL) :
	    sq_prep(DB(s), "SELECT COALESCE(MIN(o.created), 0) FROM operations o"
	    " LEFT JOIN executions e ON e.sandbox = o.sandbox AND e.generation = o.from_gen"
	    " WHERE o.step <> 'done' AND (e.worker IS NULL OR e.worker = ?)", "s", worker);
	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		*created = sqlite3_column_int64(st, 0);
	sq_stmt_release(st);
	return rc < 0 ? rc : 0;
}

int
sq_archive_referenced(struct store *s, const char *digest)
{
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT"
	    " EXISTS (SELECT 1 FROM snapshots sn JOIN sandboxes s ON s.id = sn.sandbox"
	    "   WHERE sn.digest = ?1 AND (sn.kind = 'named' OR s.state <> 'killed'))"
	    " OR EXISTS (SELECT 1 FROM sandboxes WHERE snapshot = ?1 AND state <> 'killed')"
	    " OR EXISTS (SELECT 1 FROM archive_pending WHERE digest = ?1)"
	    " OR EXISTS (SELECT 1 FROM assignments a JOIN executions e ON e.sandbox = a.sandbox"
	    "   AND e.generation = a.generation WHERE a.action = 'install'"
	    "   AND e.state IN ('pending','starting') AND json_extract(a.spec, '$.snapshot') = ?1)",
	    "s", digest);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1)
		rc = sqlite3_column_int(st, 0) != 0;
	sq_stmt_release(st);
	return rc;
}
