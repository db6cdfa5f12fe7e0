/* Internals of the PostgreSQL backend shared by its files: store_pg.c
 * (schema, connection, reconnection, the transaction helper, credentials,
 * keys), store_pg_read.c (sandbox and worker reads) and store_pg_rows.c
 * (the row operations of store_tx.h, snapshots, timeouts). The same
 * statements as the SQLite backend (store_sqlite*.c), in PostgreSQL's
 * dialect. Nothing outside the backend includes this. */
#ifndef SPACE_CONTROL_STORE_PG_H
#define SPACE_CONTROL_STORE_PG_H
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>
#include <libpq-fe.h>
#include <jansson.h>
#include "store.h"
#include "store_tx.h"

struct pgs {
	struct store base;      /* first: a struct store * is a struct pgs * */
	PGconn *conn;           /* NULL or broken: reconnected on next use */
	char   *conninfo;
	pthread_mutex_t mu;
	struct timespec t0;
	char    sqlstate[6];    /* of the last failed statement, "" none */
	int64_t changes;        /* rows the last statement changed */
	/* store_pg_listen.c: the LISTEN connection's thread */
	void  (*wake)(void *, unsigned);
	void   *wake_arg;
	pthread_t lthread;
	bool    lstarted;
	int     lstop, listening;       /* atomics */
};

static inline struct pgs *
PGS(struct store *s)
{
	return (struct pgs *)s;
}

/* the connection mutex; unlock reports the time held to store_observe */
void pg_lock(struct pgs *q);
void pg_unlock(struct pgs *q);
/* a new connection of conninfo (the URL's own settings win over the
 * defaults: connect timeout, application name); caller checks PQstatus */
PGconn *pg_dial(const char *conninfo);
/* a live connection (reconnecting when there is none or it broke): 0, -EIO */
int  pg_connect(struct pgs *q);
/* run sql with parameters: fmt letters s (text, NULL allowed), i (int64),
 * b (bytea: pointer, int length). The result (rows or none), or NULL with
 * q->sqlstate set and *err a negative errno: -EEXIST for a constraint
 * (class 23), -EIO otherwise. Caller holds the lock, PQclear()s. */
PGresult *pg_q(struct pgs *q, int *err, const char *sql, const char *fmt, ...);
/* outside a transaction, caller holding the lock: a read (dialling when
 * needed, run once more on a new connection when the old one was lost),
 * and a write of one statement (not replayed: -EIO) */
PGresult *pg_read(struct pgs *q, int *err, const char *sql, const char *fmt, ...);
int  pg_write(struct pgs *q, const char *sql, const char *fmt, ...);
/* a statement without rows: 0, -EEXIST, -EIO; q->changes set */
int  pg_run(struct pgs *q, const char *sql, const char *fmt, ...);
/* one element of a list query's answer from row i of res */
typedef json_t *(*pg_row_fn)(struct pgs *q, PGresult *res, int i, void *ctx);
/* every row of res (NULL: the failed query's err) as an array of row();
 * PQclear()s res. 0 with *out, or -EIO / -ENOMEM and nothing built */
int  pg_list(struct pgs *q, PGresult *res, int err, pg_row_fn row, void *ctx, json_t **out);
/* lock, BEGIN ISOLATION LEVEL SERIALIZABLE, fn, COMMIT; ROLLBACK when fn
 * or the commit fails; serialization failures and deadlocks retried */
int  pg_tx(struct store *, store_tx_fn fn, void *arg);

/* column accessors: "" / 0 for NULL */
const char *pg_s(PGresult *r, int i, int c);          /* NULL when NULL */
void    pg_copy(PGresult *r, int i, int c, char *dst, size_t cap);
int64_t pg_i(PGresult *r, int i, int c);
bool    pg_b(PGresult *r, int i, int c);
bool    pg_null(PGresult *r, int i, int c);
json_t *pg_json(PGresult *r, int i, int c);

/* a LEFT JOIN giving each worker row w (current incarnation) u.n active
 * executions and u.m, u.c, u.d the memory, cpu and disk they ask */
#define PG_WORKER_USAGE \
	" LEFT JOIN (SELECT e.worker AS worker, e.resident AS resident, COUNT(*) AS n," \
	"   SUM(COALESCE((s.resources::jsonb->>'memory_mb')::bigint, 0)) AS m," \
	"   SUM(COALESCE((s.resources::jsonb->>'cpu_percent')::bigint, 0)) AS c," \
	"   SUM(COALESCE((s.resources::jsonb->>'disk_mb')::bigint, 0)) AS d" \
	"   FROM executions e JOIN sandboxes s ON s.id = e.sandbox" \
	"   WHERE e.state IN ('pending','starting','serving') GROUP BY e.worker, e.resident) u" \
	"   ON u.worker = w.id AND u.resident = w.incarnation"

/* the sandbox object (history included); caller holds the lock */
int  pg_sandbox_load(struct pgs *q, const char *owner, const char *id, json_t **out);

/* store_pg_listen.c: wake-ups from other replicas' commits */
int  pg_listen(struct store *, void (*wake)(void *, unsigned), void *arg);
bool pg_listening(struct store *);
void pg_listen_stop(struct pgs *q);

/* store_pg_read.c */
int pg_sandbox_get(struct store *, const char *owner, const char *id, json_t **out);
int pg_sandbox_list(struct store *, const char *owner, const char *after, bool live,
    int64_t limit, json_t **out);
int pg_sandbox_current(struct store *, const char *owner, const char *id,
    struct exec_view *out);
int pg_worker_heartbeat(struct store *, const char *worker, const char *incarnation,
    int64_t capacity, const struct res *total);
int pg_assignments_after(struct store *, const char *worker, int64_t after,
    json_t **out, int64_t *revision);
int pg_workers_reap(struct store *, int64_t older_than);
/* store_pg_lost.c: the failover's row operations (store_tx.h) */
int pg_lost_execs(struct store *, int64_t lost_before, const char *sandbox, json_t **out);
int pg_exec_error(struct store *, const char *sandbox, int64_t gen, char *err, size_t cap);
int pg_worker_counts(struct store *, int64_t *live, int64_t *lost);
int pg_workers_list(struct store *, json_t **out);
int pg_template_refs(struct store *, const char *digest, int64_t *n);
int pg_archive_worker_refs(struct store *, const char *worker, const char *digest, int64_t *n);

/* store_pg_archives.c: the snapshot store's references (row operations) */
int pg_archive_pending_add(struct store *, const char *digest, int64_t until);
int pg_archive_pending_prune(struct store *, int64_t now);
int pg_ops_oldest_open(struct store *, const char *worker, int64_t *created);
int pg_archive_referenced(struct store *, const char *digest);
/* store_pg_edge.c: the rows of the public entry (store_tx.h) */
int pg_edgecred_add(struct store *, const char *name, const char *id,
    const uint8_t hash[STORE_HASH_LEN]);
int pg_edgecred_lookup(struct store *, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN]);
int pg_edgecred_revoke(struct store *, const char *name);
int pg_traffic_token_set(struct store *, const char *owner, const char *id,
    const uint8_t hash[STORE_HASH_LEN]);
int pg_traffic_token_get(struct store *, const char *id, uint8_t hash[STORE_HASH_LEN]);
int pg_sandbox_owner(struct store *, const char *id, char owner[SPACE_ID_MAX + 1]);
/* store_pg_access.c: per-sandbox access tokens (store_tx.h) */
int pg_access_token_add(struct store *, const char *owner, const char *sandbox,
    const char *id, const uint8_t hash[STORE_HASH_LEN]);
int pg_access_token_lookup(struct store *, const char *id, char sandbox[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN]);
/* store_pg_ports.c: declared ports, a worker's gateway (row operations) */
int pg_sandbox_ports_get(struct store *, const char *owner, const char *id, char **out);
int pg_sandbox_ports_set(struct store *, const char *id, const char *json);
/* store_pg_refusals.c */
int pg_sandbox_refusals_add(struct store *, const char *worker, const char *sandbox,
    const int64_t n[3]);
int pg_sandbox_refusals_get(struct store *, const char *owner, const char *id, int64_t n[3]);
int pg_worker_gateway_get(struct store *, const char *worker, char **out);
int pg_worker_gateway_set(struct store *, const char *worker, const char *gateway);
/* store_pg_net.c: the egress policy column (row operations) */
int pg_sandbox_network_get(struct store *, const char *owner, const char *id, char **out);
int pg_sandbox_network_set(struct store *, const char *id, const char *json);

/* store_pg_rows.c */
extern const struct store_rows pg_rows;
int pg_snapshots_list(struct store *, const char *owner, const char *sandbox, json_t **out);
int pg_sandbox_set_timeouts(struct store *, const char *owner, const char *id,
    const char *timeouts, json_t **out);
int pg_sandbox_touch(struct store *, const char *id, int64_t now);
int pg_route_hold(struct store *, const char *id, uint64_t gen, int64_t until_ms);
int pg_timeouts_due(struct store *, int64_t now, json_t **out);
#endif
