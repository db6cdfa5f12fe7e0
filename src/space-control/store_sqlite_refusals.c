/* Refusals counted per sandbox (schema 10), for api_refusals.c: the sums
 * of what the workers reported with their heartbeats. */
#include <errno.h>
#include <stdint.h>

#include "store_sqlite.h"
#include "store_tx.h"

#define DB(s) (SQ(s)->db)

/* only for a sandbox the reporting worker ran an execution of: a worker
 * adds nothing to another worker's sandboxes nor creates rows for ids
 * that exist nowhere */
int
sq_sandbox_refusals_add(struct store *s, const char *worker, const char *sandbox,
    const int64_t n[3])
{
	int rc = sq_run(DB(s), sq_prep(DB(s), "INSERT INTO sandbox_refusals"
	    " (sandbox, refresh_route, deny, expired) SELECT ?1, ?2, ?3, ?4"
	    " WHERE EXISTS (SELECT 1 FROM executions WHERE sandbox = ?1 AND worker = ?5)"
	    " ON CONFLICT (sandbox) DO UPDATE SET"
	    /* saturating: a sum past INT64_MAX stays there (SQLite would
	     * turn it into a REAL, PostgreSQL refuse the statement) */
	    " refresh_route = MIN(refresh_route, 9223372036854775807 - excluded.refresh_route)"
	    "  + excluded.refresh_route,"
	    " deny = MIN(deny, 9223372036854775807 - excluded.deny) + excluded.deny,"
	    " expired = MIN(expired, 9223372036854775807 - excluded.expired) + excluded.expired",
	    "siiis", sandbox, n[0], n[1], n[2], worker));

	return rc < 0 ? rc : sqlite3_changes(DB(s)) > 0;
}

int
sq_sandbox_refusals_get(struct store *s, const char *owner, const char *id, int64_t n[3])
{
	sqlite3_stmt *st = sq_prep(DB(s), "SELECT COALESCE(r.refresh_route, 0),"
	    " COALESCE(r.deny, 0), COALESCE(r.expired, 0) FROM sandboxes s"
	    " LEFT JOIN sandbox_refusals r ON r.sandbox = s.id WHERE s.owner = ? AND s.id = ?",
	    "ss", owner, id);
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		n[0] = sqlite3_column_int64(st, 0);
		n[1] = sqlite3_column_int64(st, 1);
		n[2] = sqlite3_column_int64(st, 2);
	}
	sq_stmt_release(st);
	return rc;
}
