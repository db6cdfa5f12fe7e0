/* A lost worker's executions on the SQLite backend: the row operations of
 * the failover (failover.c decides), run inside the caller's transaction. */
#include <errno.h>
#include <string.h>
#include <sqlite3.h>

#include "store.h"
#include "store_sqlite.h"

#define DB(s) (SQ(s)->db)

static json_t *
lost_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	(void)q;
	(void)ctx;
	return json_pack("{s:s,s:s,s:I,s:s}",
	    "owner", (const char *)sqlite3_column_text(st, 0),
	    "sandbox", (const char *)sqlite3_column_text(st, 1),
	    "generation", (json_int_t)sqlite3_column_int64(st, 2),
	    "worker", (const char *)sqlite3_column_text(st, 3));
}

int
sq_lost_execs(struct store *s, int64_t lost_before, const char *sandbox, json_t **out)
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT s.owner, e.sandbox, e.generation, e.worker"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " JOIN workers w ON w.id = e.worker AND w.incarnation = e.resident"
	    " WHERE w.state = 'lost' AND w.last_heartbeat < ?1"
	    " AND e.state IN ('pending','starting','serving') AND s.state IN ('creating','running')"
	    " AND (?2 IS NULL OR e.sandbox = ?2)"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " ORDER BY e.rowid LIMIT 64", "is", lost_before, sandbox);

	return sq_list(SQ(s), st, lost_row, NULL, out);
}

int
sq_exec_error(struct store *s, const char *sandbox, int64_t gen, char *err, size_t cap)
{
	sqlite3_stmt *st;
	int rc;

	err[0] = '\0';
	st = sq_prep(DB(s), "SELECT COALESCE(error, '') FROM executions"
	    " WHERE sandbox = ? AND generation = ?", "si", sandbox, gen);
	if (st == NULL)
		return -EIO;
	if ((rc = sq_step_row(DB(s), st)) == 1)
		sq_col_copy(st, 0, err, cap);
	sq_stmt_release(st);
	return rc;
}
