/* The snapshot store's references, for its garbage collection
 * (docs/recovery.md, "Collecting the snapshot store"). Workers hold the
 * store and offer the archives they found there; the control plane, which
 * holds every reference, answers which of them nothing needs.
 *
 * An archive is needed while:
 *  - a snapshot row names it: a named snapshot always (the retention
 *    policy keeps named snapshots until their sandbox's record is gone),
 *    an automatic one while its sandbox is not killed;
 *  - a sandbox not killed restores from it (sandboxes.snapshot), or an
 *    install not yet serving names it;
 *  - it was reported (accepted or not) less than the grace ago: a
 *    pending reference (archive_pending), so a report that is being
 *    committed, or arrives late, never meets a deleted archive;
 *  - it may be the archive of a lifecycle operation still open (a pause,
 *    move or snapshot whose worker has not reported yet): an archive
 *    younger than the oldest open operation (plus a margin) is kept. */
#include <errno.h>
#include <string.h>
#include <sqlite3.h>

#include "log.h"
#include "snapshot.h"
#include "store.h"
#include "store_sqlite.h"

/* seconds added to the oldest open operation's age: the worker's and
 * the control plane's clocks measure the two ages */
#define ARCHIVE_OP_MARGIN 60

struct collect {
	json_t *in;             /* [{"digest","age"}], validated by the caller */
	int64_t now;
	json_t *out;
};

int
sq_archive_seen(struct store *s, const char *digest, int64_t until)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO archive_pending (digest, until) VALUES (?1, ?2)"
	    " ON CONFLICT (digest) DO UPDATE SET until = MAX(until, ?2)", "si", digest, until));
	sq_unlock(q);
	return rc;
}

static int
referenced(sqlite3 *db, const char *digest)
{
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(db, "SELECT"
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
	rc = sq_step_row(db, st);
	if (rc == 1)
		rc = sqlite3_column_int(st, 0) != 0;
	sqlite3_finalize(st);
	return rc;
}

static int
collect_tx(struct store *s, void *arg)
{
	struct collect *c = arg;
	sqlite3 *db = SQ(s)->db;
	sqlite3_stmt *st;
	int64_t oldest = 0;
	json_t *a;
	size_t i;
	int rc;

	if ((rc = sq_run(db, sq_prep(db, "DELETE FROM archive_pending WHERE until < ?", "i",
	    c->now))) < 0)
		return rc;
	if ((st = sq_prep(db, "SELECT COALESCE(MIN(created), 0) FROM operations"
	    " WHERE step <> 'done'", NULL)) == NULL)
		return -EIO;
	if ((rc = sq_step_row(db, st)) == 1)
		oldest = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (rc < 0)
		return rc;
	json_array_foreach(c->in, i, a) {
		const char *d = json_string_value(json_object_get(a, "digest"));
		int64_t age = json_integer_value(json_object_get(a, "age"));

		if (oldest > 0 && age <= c->now - oldest + ARCHIVE_OP_MARGIN)
			continue;       /* it may be what an open operation waits for */
		if ((rc = referenced(db, d)) < 0)
			return rc;
		if (rc == 0 && json_array_append_new(c->out, json_string(d)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int
sq_archives_collectable(struct store *s, json_t *archives, int64_t now, json_t **out)
{
	struct collect c = { archives, now, json_array() };
	int rc;

	if (c.out == NULL)
		return -ENOMEM;
	if ((rc = sq_tx(s, collect_tx, &c)) < 0) {
		json_decref(c.out);
		return rc;
	}
	*out = c.out;
	return 0;
}
