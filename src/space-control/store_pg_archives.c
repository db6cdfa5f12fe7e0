/* The snapshot store's references on the PostgreSQL backend: the
 * statements of store_sqlite_archives.c (which explains when an archive
 * is needed) in PostgreSQL's dialect. */
#include <errno.h>
#include <string.h>
#include <libpq-fe.h>

#include "log.h"
#include "store.h"
#include "store_pg.h"

/* seconds added to the oldest open operation's age (as in SQLite's) */
#define ARCHIVE_OP_MARGIN 60

struct collect {
	json_t *in;             /* [{"digest","age"}], validated by the caller */
	int64_t now;
	json_t *out;
};

int
pg_archive_seen(struct store *s, const char *digest, int64_t until)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "INSERT INTO archive_pending (digest, until) VALUES ($1, $2)"
	    " ON CONFLICT (digest) DO UPDATE SET until = GREATEST(archive_pending.until, $2)",
	    "si", digest, until);
	pg_unlock(q);
	return rc;
}

static int
referenced(struct pgs *q, const char *digest)
{
	PGresult *res;
	int rc;

	res = pg_q(q, &rc, "SELECT"
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

static int
collect_tx(struct store *s, void *arg)
{
	struct collect *c = arg;
	struct pgs *q = PGS(s);
	PGresult *res;
	int64_t oldest;
	json_t *a;
	size_t i;
	int rc;

	json_array_clear(c->out);       /* a retried transaction starts again */
	if ((rc = pg_run(q, "DELETE FROM archive_pending WHERE until < $1", "i", c->now)) < 0)
		return rc;
	res = pg_q(q, &rc, "SELECT COALESCE(MIN(created), 0) FROM operations WHERE step <> 'done'",
	    NULL);
	if (res == NULL)
		return rc;
	oldest = pg_i(res, 0, 0);
	PQclear(res);
	json_array_foreach(c->in, i, a) {
		const char *d = json_string_value(json_object_get(a, "digest"));
		int64_t age = json_integer_value(json_object_get(a, "age"));

		if (oldest > 0 && age <= c->now - oldest + ARCHIVE_OP_MARGIN)
			continue;       /* it may be what an open operation waits for */
		if ((rc = referenced(q, d)) < 0)
			return rc;
		if (rc == 0 && json_array_append_new(c->out, json_string(d)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int
pg_archives_collectable(struct store *s, json_t *archives, int64_t now, json_t **out)
{
	struct collect c = { archives, now, json_array() };
	int rc;

	if (c.out == NULL)
		return -ENOMEM;
	if ((rc = pg_tx(s, collect_tx, &c)) < 0) {
		json_decref(c.out);
		return rc;
	}
	*out = c.out;
	return 0;
}
