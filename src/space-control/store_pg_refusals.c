/* Refusals counted per sandbox (schema 10) on the PostgreSQL backend, for
 * api_refusals.c: the statements of store_sqlite_refusals.c, run inside
 * the caller's transaction. */
#include <errno.h>
#include <stdint.h>
#include <libpq-fe.h>

#include "store_pg.h"
#include "store_tx.h"

int
pg_sandbox_refusals_add(struct store *s, const char *worker, const char *sandbox,
    const int64_t n[3])
{
	struct pgs *q = PGS(s);
	int rc = pg_run(q, "INSERT INTO sandbox_refusals"
	    " (sandbox, refresh_route, deny, expired) SELECT $1, $2, $3, $4"
	    " WHERE EXISTS (SELECT 1 FROM executions WHERE sandbox = $1 AND worker = $5)"
	    " ON CONFLICT (sandbox) DO UPDATE SET"
	    /* saturating: a sum past the bigint's bound stays there (one
	     * worker's reports must not make every later one fail) */
	    " refresh_route = LEAST(sandbox_refusals.refresh_route,"
	    "  9223372036854775807 - excluded.refresh_route) + excluded.refresh_route,"
	    " deny = LEAST(sandbox_refusals.deny, 9223372036854775807 - excluded.deny)"
	    "  + excluded.deny,"
	    " expired = LEAST(sandbox_refusals.expired, 9223372036854775807 - excluded.expired)"
	    "  + excluded.expired",
	    "siiis", sandbox, n[0], n[1], n[2], worker);

	return rc < 0 ? rc : q->changes > 0;
}

int
pg_sandbox_refusals_get(struct store *s, const char *owner, const char *id, int64_t n[3])
{
	PGresult *res;
	int err, rc = 0;

	res = pg_q(PGS(s), &err, "SELECT COALESCE(r.refresh_route, 0),"
	    " COALESCE(r.deny, 0), COALESCE(r.expired, 0) FROM sandboxes s"
	    " LEFT JOIN sandbox_refusals r ON r.sandbox = s.id WHERE s.owner = $1 AND s.id = $2",
	    "ss", owner, id);
	if (res == NULL)
		return err;
	if (PQntuples(res) == 1) {
		n[0] = pg_i(res, 0, 0);
		n[1] = pg_i(res, 0, 1);
		n[2] = pg_i(res, 0, 2);
		rc = 1;
	}
	PQclear(res);
	return rc;
}
