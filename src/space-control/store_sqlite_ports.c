/* Declared service ports of a sandbox and the netgtw listener of a worker
 * (schema 8), for api_ports.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_sqlite.h"
#include "store_tx.h"

#define DB(s) (SQ(s)->db)

static int
text_row(sqlite3 *db, sqlite3_stmt *st, char **out)
{
	int rc;

	*out = NULL;
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(db, st);
	if (rc == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL &&
	    (*out = strdup((const char *)sqlite3_column_text(st, 0))) == NULL)
		rc = -ENOMEM;
	sq_stmt_release(st);
	return rc;
}

/* 1 and *out (malloc'd, NULL when none are declared) or 0 unknown
 * sandbox; owner NULL: any */
int
sq_sandbox_ports_get(struct store *s, const char *owner, const char *id, char **out)
{
	return text_row(DB(s), owner ?
	    sq_prep(DB(s), "SELECT ports FROM sandboxes WHERE owner = ? AND id = ?", "ss", owner, id) :
	    sq_prep(DB(s), "SELECT ports FROM sandboxes WHERE id = ?", "s", id), out);
}

int
sq_sandbox_ports_set(struct store *s, const char *id, const char *json)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET ports = ? WHERE id = ?", "ss",
	    json, id));
}

int
sq_worker_gateway_get(struct store *s, const char *worker, char **out)
{
	return text_row(DB(s), sq_prep(DB(s), "SELECT gateway FROM workers WHERE id = ?", "s",
	    worker), out);
}

int
sq_worker_gateway_set(struct store *s, const char *worker, const char *gateway)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE workers SET gateway = ? WHERE id = ?", "ss",
	    gateway, worker));
}
