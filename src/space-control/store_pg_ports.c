/* Declared service ports of a sandbox and the netgtw listener of a worker
 * (schema 9) on the PostgreSQL backend, for api_ports.c: the statements
 * of store_sqlite_ports.c, run inside the caller's transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <libpq-fe.h>

#include "store_pg.h"
#include "store_tx.h"

/* 1 and *out (malloc'd, NULL when the column is NULL), 0 no row */
static int
text_row(PGresult *res, int err, char **out)
{
	int rc = 0;

	*out = NULL;
	if (res == NULL)
		return err;
	if (PQntuples(res) == 1) {
		rc = 1;
		if (!pg_null(res, 0, 0) && (*out = strdup(pg_s(res, 0, 0))) == NULL)
			rc = -ENOMEM;
	}
	PQclear(res);
	return rc;
}

/* 1 and *out (malloc'd, NULL when none are declared) or 0 unknown
 * sandbox; owner NULL: any */
int
pg_sandbox_ports_get(struct store *s, const char *owner, const char *id, char **out)
{
	PGresult *res;
	int err;

	res = owner ? pg_q(PGS(s), &err, "SELECT ports FROM sandboxes WHERE owner = $1 AND id = $2",
	    "ss", owner, id) : pg_q(PGS(s), &err, "SELECT ports FROM sandboxes WHERE id = $1", "s", id);
	return text_row(res, err, out);
}

int
pg_sandbox_ports_set(struct store *s, const char *id, const char *json)
{
	return pg_run(PGS(s), "UPDATE sandboxes SET ports = $1 WHERE id = $2", "ss", json, id);
}

int
pg_worker_gateway_get(struct store *s, const char *worker, char **out)
{
	PGresult *res;
	int err;

	res = pg_q(PGS(s), &err, "SELECT gateway FROM workers WHERE id = $1", "s", worker);
	return text_row(res, err, out);
}

int
pg_worker_gateway_set(struct store *s, const char *worker, const char *gateway)
{
	return pg_run(PGS(s), "UPDATE workers SET gateway = $1 WHERE id = $2", "ss", gateway, worker);
}
