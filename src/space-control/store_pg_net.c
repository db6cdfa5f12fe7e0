/* The sandbox's egress policy column (schema 7) on the PostgreSQL
 * backend, for network.c: the statements of store_sqlite_net.c, run
 * inside the caller's transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

#include "store_pg.h"
#include "store_tx.h"

/* 1 and *out (malloc'd, NULL when none is set) or 0 unknown sandbox;
 * owner NULL: any */
int
pg_sandbox_network_get(struct store *s, const char *owner, const char *id, char **out)
{
	PGresult *res;
	int rc;

	*out = NULL;
	res = owner ? pg_q(PGS(s), &rc, "SELECT network FROM sandboxes WHERE owner = $1 AND id = $2",
	    "ss", owner, id) : pg_q(PGS(s), &rc, "SELECT network FROM sandboxes WHERE id = $1", "s", id);
	if (res == NULL)
		return rc;
	rc = 0;
	if (PQntuples(res) == 1) {
		rc = 1;
		if (!pg_null(res, 0, 0) && (*out = strdup(pg_s(res, 0, 0))) == NULL)
			rc = -ENOMEM;
	}
	PQclear(res);
	return rc;
}

int
pg_sandbox_network_set(struct store *s, const char *id, const char *json)
{
	return pg_run(PGS(s), "UPDATE sandboxes SET network = $1 WHERE id = $2", "ss", json, id);
}
