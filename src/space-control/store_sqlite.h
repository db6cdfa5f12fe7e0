/* Internals of the SQLite backend shared by its files: store_sqlite.c
 * (schema, connection, transaction helper, credentials, keys),
 * store_sqlite_read.c (sandbox and worker reads) and store_sqlite_rows.c
 * (the row operations of store_tx.h, snapshots, timeouts). Nothing outside the backend includes this. */
#ifndef SPACE_CONTROL_STORE_SQLITE_H
#define SPACE_CONTROL_STORE_SQLITE_H
#include <pthread.h>
#include <time.h>
#include <sqlite3.h>
#include <jansson.h>
#include "dbfile.h"
#include "store.h"
#include "store_tx.h"

struct sq {
	struct store base;      /* first: a struct store * is a struct sq * */
	sqlite3 *db;
	pthread_mutex_t mu;
	struct timespec t0;
	struct db_ckpt ckpt;    /* checkpoints in idle moments (dbfile.h) */
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
/* lock, BEGIN IMMEDIATE, fn, COMMIT; ROLLBACK when fn or the commit
 * fails. The row operations (store_tx.h) run inside one. */
int  sq_tx(struct store *, store_tx_fn fn, void *arg);
/* prepare and bind: fmt letters s (text, NULL allowed), i (int64),
 * b (blob: pointer, int length); NULL on failure. Release with
 * sq_stmt_release, never sqlite3_finalize. */
sqlite3_stmt *sq_prep(sqlite3 *db, const char *sql, const char *fmt, ...);
/* store_sqlite_cache.c: the kept prepared statements. take: the
 * connection's kept statement of this SQL text, reset and unbound, or a
 * new one (kept when the table has room and no caller holds the text's);
 * NULL when it does not compile. release: instead of sqlite3_finalize on
 * every statement of sq_prep (NULL allowed): a kept one is reset, unbound
 * and free again, any other finalized. clear: finalize the connection's
 * kept statements (after migrations, before close); the count of those
 * still held, which are dropped and finalized by their release. */
sqlite3_stmt *sq_stmt_take(sqlite3 *db, const char *sql);
void sq_stmt_release(sqlite3_stmt *st);
int  sq_stmt_clear(sqlite3 *db);
int  sq_stmt_count(sqlite3 *db);
/* step a statement that returns no row and release it: 0, -EEXIST, -EIO */
int  sq_run(sqlite3 *db, sqlite3_stmt *st);
/* 1 row, 0 done, -EIO */
int  sq_step_row(sqlite3 *db, sqlite3_stmt *st);
/* one element of a list query's answer, built from the current row (ctx:
 * the query's own state); NULL when out of memory */
typedef json_t *(*sq_row_fn)(struct sq *q, sqlite3_stmt *st, void *ctx);
/* steps st to its end and releases it: 0 with *out, an array of row()
 * per row (caller decrefs); -EIO (st NULL: a failed sq_prep, or a step
 * error) or -ENOMEM with nothing built. Caller holds the lock. */
int  sq_list(struct sq *q, sqlite3_stmt *st, sq_row_fn row, void *ctx, json_t **out);
void sq_col_copy(sqlite3_stmt *st, int i, char *dst, size_t cap);
json_t *sq_col_json(sqlite3_stmt *st, int i);

/* a LEFT JOIN giving each worker row w (current incarnation) u.n active
 * executions and u.m, u.c, u.d the memory, cpu and disk they ask */
#define SQ_WORKER_USAGE \
	" LEFT JOIN (SELECT e.worker AS worker, e.resident AS resident, COUNT(*) AS n," \
	"   SUM(COALESCE(json_extract(s.resources, '$.memory_mb'), 0)) AS m," \
	"   SUM(COALESCE(json_extract(s.resources, '$.cpu_percent'), 0)) AS c," \
	"   SUM(COALESCE(json_extract(s.resources, '$.disk_mb'), 0)) AS d" \
	"   FROM executions e JOIN sandboxes s ON s.id = e.sandbox" \
	"   WHERE e.state IN ('pending','starting','serving') GROUP BY e.worker, e.resident) u" \
	"   ON u.worker = w.id AND u.resident = w.incarnation"

/* the sandbox object (history included); caller holds the lock */
int  sq_sandbox_load(struct sq *q, const char *owner, const char *id, json_t **out);

/* store_sqlite_read.c: reads of the ops table */
int sq_sandbox_get(struct store *, const char *owner, const char *id, json_t **out);
int sq_sandbox_list(struct store *, const char *owner, const char *after, bool live,
    int64_t limit, json_t **out);
/* store_sqlite_net.c */
int sq_sandbox_network_get(struct store *, const char *owner, const char *id, char **out);
int sq_sandbox_network_set(struct store *, const char *id, const char *json);
/* store_sqlite_ports.c */
int sq_sandbox_ports_get(struct store *, const char *owner, const char *id, char **out);
int sq_sandbox_ports_set(struct store *, const char *id, const char *json);
/* store_sqlite_refusals.c */
int sq_sandbox_refusals_add(struct store *, const char *worker, const char *sandbox,
    const int64_t n[3]);
int sq_sandbox_refusals_get(struct store *, const char *owner, const char *id, int64_t n[3]);
int sq_worker_gateway_get(struct store *, const char *worker, char **out);
int sq_worker_gateway_set(struct store *, const char *worker, const char *gateway);
int sq_sandbox_current(struct store *, const char *owner, const char *id,
    struct exec_view *out);
int sq_worker_heartbeat(struct store *, const char *worker, const char *incarnation,
    int64_t capacity, const struct res *total);
int sq_assignments_after(struct store *, const char *worker, int64_t after,
    json_t **out, int64_t *revision);
int sq_workers_reap(struct store *, int64_t older_than);
/* store_sqlite_lost.c: the failover's row operations (store_tx.h) */
int sq_lost_execs(struct store *, int64_t lost_before, const char *sandbox, json_t **out);
int sq_exec_error(struct store *, const char *sandbox, int64_t gen, char *err, size_t cap);
int sq_worker_counts(struct store *, int64_t *live, int64_t *lost);
int sq_template_refs(struct store *, const char *digest, int64_t *n);
int sq_archive_worker_refs(struct store *, const char *worker, const char *digest, int64_t *n);
int sq_workers_list(struct store *, json_t **out);

/* store_sqlite_rows.c: the row table and the lifecycle's plain entries */
extern const struct store_rows sq_rows;
int sq_snapshots_list(struct store *, const char *owner, const char *sandbox, json_t **out);
int sq_sandbox_set_timeouts(struct store *, const char *owner, const char *id,
    const char *timeouts, json_t **out);
int sq_sandbox_touch(struct store *, const char *id, int64_t now);
int sq_route_hold(struct store *, const char *id, uint64_t gen, int64_t until_ms);
int sq_timeouts_due(struct store *, int64_t now, json_t **out);

/* store_sqlite_archives.c: references of the snapshot store (row operations) */
int sq_archive_pending_add(struct store *, const char *digest, int64_t until);
int sq_archive_pending_prune(struct store *, int64_t now);
int sq_ops_oldest_open(struct store *, const char *worker, int64_t *created);
int sq_archive_referenced(struct store *, const char *digest);
/* store_sqlite_edge.c: the rows of the public entry (store_tx.h) */
int sq_edgecred_add(struct store *, const char *name, const char *id,
    const uint8_t hash[STORE_HASH_LEN]);
int sq_edgecred_lookup(struct store *, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN]);
int sq_edgecred_revoke(struct store *, const char *name);
int sq_traffic_token_set(struct store *, const char *owner, const char *id,
    const uint8_t hash[STORE_HASH_LEN]);
int sq_traffic_token_get(struct store *, const char *id, uint8_t hash[STORE_HASH_LEN]);
int sq_sandbox_owner(struct store *, const char *id, char owner[SPACE_ID_MAX + 1]);
/* store_sqlite_access.c: per-sandbox access tokens (store_tx.h) */
int sq_access_token_add(struct store *, const char *owner, const char *sandbox,
    const char *id, const uint8_t hash[STORE_HASH_LEN]);
int sq_access_token_lookup(struct store *, const char *id, char sandbox[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN]);
#endif
