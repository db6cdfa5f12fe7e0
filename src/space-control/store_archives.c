/* The snapshot store's references, for its garbage collection
 * (docs/recovery.md, "Collecting the snapshot store"), shared by both
 * backends: the decisions are here, the statements are the row operations
 * (store_tx.h) of store_sqlite_archives.c and store_pg_archives.c.
 * Workers hold the store and offer the archives they found there; the
 * control plane, which holds every reference, answers which of them
 * nothing needs.
 *
 * An archive is needed while:
 *  - a snapshot row names it: a named snapshot always (the retention
 *    policy keeps named snapshots until their sandbox's record is gone),
 *    an automatic one while its sandbox is not killed. An incremental
 *    archive's base is an earlier snapshot of the same sandbox
 *    (docs/recovery.md, "Incremental archives"): automatic snapshots are
 *    therefore never collected one by one while their sandbox lives;
 *  - a sandbox not killed restores from it (sandboxes.snapshot), or an
 *    install not yet serving names it;
 *  - it was reported (accepted or not) less than the grace ago: a
 *    pending reference (archive_pending), so a report that is being
 *    committed, or arrives late, never meets a deleted archive;
 *  - it may be the archive of a lifecycle operation still open (a pause,
 *    move or snapshot whose worker has not reported yet): an archive
 *    younger than the oldest open operation (plus a margin) is kept.
 *    Only that operation's worker makes it: when the archives offered are
 *    known to come from one worker (its cache, its uploads), only that
 *    worker's operations count, so that one operation that never ends
 *    holds the archives of its own worker, not everyone's. */
#include <errno.h>
#include <string.h>

#include "store.h"
#include "store_tx.h"

/* seconds added to the oldest open operation's age: the worker's and
 * the control plane's clocks measure the two ages */
#define ARCHIVE_OP_MARGIN 60

struct seen {
	const char *digest;
	int64_t until;
};

static int
seen_tx(struct store *s, void *arg)
{
	struct seen *x = arg;

	return R(s)->archive_pending_add(s, x->digest, x->until);
}

int
st_archive_seen(struct store *s, const char *digest, int64_t until)
{
	struct seen x = { digest, until };

	return R(s)->tx(s, seen_tx, &x);
}

struct collect {
	json_t *in;             /* [{"digest","age"}], validated by the caller */
	int64_t now;
	const char *worker;     /* where they came from; NULL: not known */
	json_t *out;
};

static int
collect_tx(struct store *s, void *arg)
{
	struct collect *c = arg;
	int64_t oldest = 0;
	json_t *a;
	size_t i;
	int rc;

	json_array_clear(c->out);       /* a retried transaction starts again */
	if ((rc = R(s)->archive_pending_prune(s, c->now)) < 0 ||
	    (rc = R(s)->ops_oldest_open(s, c->worker, &oldest)) < 0)
		return rc;
	json_array_foreach(c->in, i, a) {
		const char *d = json_string_value(json_object_get(a, "digest"));
		int64_t age = json_integer_value(json_object_get(a, "age"));

		if (oldest > 0 && age <= c->now - oldest + ARCHIVE_OP_MARGIN)
			continue;       /* it may be what an open operation waits for */
		if ((rc = R(s)->archive_referenced(s, d)) < 0)
			return rc;
		if (rc == 0 && json_array_append_new(c->out, json_string(d)) < 0)
			return -ENOMEM;
	}
	return 0;
}

int
st_archives_collectable(struct store *s, json_t *archives, int64_t now, const char *worker,
    json_t **out)
{
	struct collect c = { archives, now, worker, json_array() };
	int rc;

	if (c.out == NULL)
		return -ENOMEM;
	if ((rc = R(s)->tx(s, collect_tx, &c)) < 0) {
		json_decref(c.out);
		return rc;
	}
	*out = c.out;
	return 0;
}
