/* The sandbox's egress policy column (schema 7), for network.c; run inside
 * the caller's transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store_sqlite.h"
#include "store_tx.h"

#define DB(s) (SQ(s)->db)

/* 1 and *out (malloc'd, NULL when none is set) or 0 unknown sandbox;
 * owner NULL: any */
int
sq_sandbox_network_get(struct store *s, const char *owner, const char *id, char **out)
{
	sqlite3_stmt *st;
	int rc;

	*out = NULL;
	st = owner ? sq_prep(DB(s), "SELECT network FROM sandboxes WHERE owner = ? AND id = ?",
	    "ss", owner, id) : sq_prep(DB(s), "SELECT network FROM sandboxes WHERE id = ?", "s", id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1 && sqlite3_column_type(st, 0) != SQLITE_NULL &&
	    (*out = strdup((const char *)sqlite3_column_text(st, 0))) == NULL)
		rc = -ENOMEM;
	sq_stmt_release(st);
	return rc;
}

int
sq_sandbox_network_set(struct store *s, const char *id, const char *json)
{
	return sq_run(DB(s), sq_prep(DB(s), "UPDATE sandboxes SET network = ? WHERE id = ?", "ss",
	    json, id));
}
