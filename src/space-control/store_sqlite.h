/* Internals of the SQLite backend shared by its files: store_sqlite.c
 * (schema, credentials, sandboxes, workers, keys) and store_sqlite_ops.c
 * (lifecycle operations, leases, snapshots, timeouts). Nothing outside
 * the backend includes this. */
#ifndef SPACE_CONTROL_STORE_SQLITE_H
#define SPACE_CONTROL_STORE_SQLITE_H
#include <pthread.h>
#include <time.h>
#include <sqlite3.h>
#include <jansson.h>
#include "store.h"

struct sq {
	struct store base;      /* first: a struct store * is a struct sq * */
	sqlite3 *db;
	pthread_mutex_t mu;
	struct timespec t0;
};

static inline struct sq *
SQ(struct store *s)
{
	return (struct sq *)s;
}

/* the connection mutex; unlock reports the time held to store_observe */
void sq_lock(struct sq *q);
void sq_unlock(struct sq *q);
int  sq_xexec(sqlite3 *db, const char *sql);
int  sq_begin(sqlite3 *db);
int  sq_commit(sqlite3 *db);
void sq_rollback(sqlite3 *db);
/* prepare and bind: fmt letters s (text, NULL allowed), i (int64),
 * b (blob: pointer, int length); NULL on failure */
sqlite3_stmt *sq_prep(sqlite3 *db, const char *sql, const char *fmt, ...);
/* step a statement that returns no row and finalize it: 0, -EEXIST, -EIO */
int  sq_run(sqlite3 *db, sqlite3_stmt *st);
/* 1 row, 0 done, -EIO */
int  sq_step_row(sqlite3 *db, sqlite3_stmt *st);
/* one element of a list query's answer, built from the current row (ctx:
 * the query's own state); NULL when out of memory */
typedef json_t *(*sq_row_fn)(struct sq *q, sqlite3_stmt *st, void *ctx);
/* steps st to its end and finalizes it: 0 with *out, an array of row()
 * per row (caller decrefs); -EIO (st NULL: a failed sq_prep, or a step
 * error) or -ENOMEM with nothing built. Caller holds the lock. */
int  sq_list(struct sq *q, sqlite3_stmt *st, sq_row_fn row, void *ctx, json_t **out);
void sq_col_copy(sqlite3_stmt *st, int i, char *dst, size_t cap);
json_t *sq_col_json(sqlite3_stmt *st, int i);

/* install spec {"template","resources","snapshot"} (snapshot NULL = none) */
char *sq_spec_json(const char *template_, const char *resources, const char *snapshot);
/* the next generation of sandbox on a worker, with its install assignment;
 * inside a write transaction. pinned: that worker or nothing; prefer: that
 * worker when it is live with room, else the scheduler's choice. */
int  sq_place_execution(struct sq *q, const char *sandbox, const char *pinned,
    const char *prefer, const char *spec, const char **why, int64_t *gen_out,
    char worker_out[SPACE_ID_MAX + 1]);
/* the sandbox object (history included); caller holds the lock */
int  sq_sandbox_load(struct sq *q, const char *owner, const char *id, json_t **out);
/* a write transaction's end when it answers with the sandbox: loads it,
 * then commits; 0 with *out (caller decrefs), or <0 with nothing to free
 * and the transaction left for the caller to roll back */
int  sq_commit_sandbox(struct sq *q, const char *owner, const char *id, json_t **out);
/* abandon the unfinished operation of sandbox (a kill wins over it) and
 * release its lease; inside a write transaction. *kind: the abandoned
 * operation's kind (static string) or NULL when there was none */
int  sq_ops_abandon(struct sq *q, const char *sandbox, const char **kind);

/* store_sqlite_ops.c: the lifecycle entries of the ops table */
int sqo_op_start(struct store *, const char *owner, const char *sandbox,
    const struct op_request *, json_t **out, const char **why);
int sqo_ops_drive(struct store *, const char *lease_owner, int64_t lease_ttl,
    const char *sandbox, bool advance);
int sqo_snapshot_report(struct store *, const char *worker, const char *snapshot_id,
    const char *sandbox, int64_t generation, const char *digest, int64_t size,
    const char *error, const char **why);
int sqo_snapshots_list(struct store *, const char *owner, const char *sandbox, json_t **out);
int sqo_sandbox_set_timeouts(struct store *, const char *owner, const char *id,
    const char *timeouts, json_t **out);
int sqo_sandbox_touch(struct store *, const char *id, int64_t now);
int sqo_timeouts_due(struct store *, int64_t now, json_t **out);
#endif
