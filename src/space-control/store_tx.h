/* What a store backend gives the lifecycle (lifecycle.c): one transaction
 * helper and row operations, each one statement (or a fixed pair) of SQL
 * run inside the caller's transaction. Every decision (which state follows
 * which, who may report what, where an execution goes) is in lifecycle.c,
 * so a backend is only its SQL: a PostgreSQL backend fills this table with
 * the same statements in its dialect.
 *
 * Returns follow store.h: 0 (or a count, or 1 found / 0 not found where
 * said) and a negative errno otherwise. Strings in the row structs are
 * NUL-terminated copies bounded by their arrays. */
#ifndef SPACE_CONTROL_STORE_TX_H
#define SPACE_CONTROL_STORE_TX_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "store.h"

/* the work of one transaction; 0 commits, <0 rolls back */
typedef int (*store_tx_fn)(struct store *, void *arg);

/* the sandbox and its current (highest) execution */
struct sbx_cur {
	char    state[STORE_STATE_MAX + 1];
	char    lease_owner[SPACE_ID_MAX + 1];
	char    snapshot[SPACE_ID_MAX + 1];    /* latest digest, "" = none */
	char    pinned[SPACE_ID_MAX + 1];      /* "" = not pinned */
	char   *template_, *resources;          /* owned: lc_cur_free */
	int64_t gen;                            /* 0 = no execution */
	char    worker[SPACE_ID_MAX + 1];
	char    exec_state[STORE_STATE_MAX + 1];
	int64_t route_hold_until;               /* ms, wall clock; 0 = none */
};

/* an unfinished operation with everything its next step depends on */
struct op_view {
	char    id[SPACE_ID_MAX + 1], sandbox[SPACE_ID_MAX + 1], kind[16], step[16];
	char    target[SPACE_ID_MAX + 1], snapshot_id[SPACE_ID_MAX + 1];
	int64_t from_gen, to_gen;
	char    owner[SPACE_ID_MAX + 1], lease_owner[SPACE_ID_MAX + 1];
	int64_t lease_expiry;
	bool    leased;
	char    sstate[STORE_STATE_MAX + 1], snapshot[SPACE_ID_MAX + 1], pinned[SPACE_ID_MAX + 1];
	char    from_state[STORE_STATE_MAX + 1], from_worker[SPACE_ID_MAX + 1];
	char    to_state[STORE_STATE_MAX + 1], snap_state[STORE_STATE_MAX + 1];
	char    from_snapshot[SPACE_ID_MAX + 1];    /* archive of from_gen, "" = none */
	char   *template_, *resources;               /* owned */
};

/* a new operation row */
struct op_new {
	const char *id, *sandbox, *kind, *target, *step, *snapshot_id, *reason;
	int64_t     from_gen, to_gen;               /* 0 = NULL */
};

/* an execution as a worker's report is checked against it */
struct exec_row {
	char    worker[SPACE_ID_MAX + 1], substrate[SPACE_SUBSTRATE_MAX + 2];
	char    resident[SPACE_ID_MAX + 1];
	int64_t activation;
	char    state[STORE_STATE_MAX + 1], sandbox_state[STORE_STATE_MAX + 1];
	int64_t maxgen;                         /* the sandbox's highest generation */
};

/* a named snapshot as its worker's report is checked against it */
struct snap_row {
	char    state[STORE_STATE_MAX + 1], sandbox[SPACE_ID_MAX + 1];
	int64_t generation;
	char    worker[SPACE_ID_MAX + 1], digest[80];
};

struct store_rows {
	/* lock the store for this thread, BEGIN (taking the write lock at
	 * once, so the reads inside see the rows the change is based on),
	 * fn, COMMIT; ROLLBACK when fn or the commit fails */
	int (*tx)(struct store *, store_tx_fn fn, void *arg);

	/* sandboxes */
	int (*sandbox_insert)(struct store *, const char *owner, const char *id,
	    const struct sandbox_spec *, int64_t now);
	int (*sandbox_cur)(struct store *, const char *owner, const char *id, struct sbx_cur *);
	int (*sandbox_load)(struct store *, const char *owner, const char *id, json_t **out);
	int (*sandbox_set_state)(struct store *, const char *id, const char *state);
	int (*sandbox_set_pin)(struct store *, const char *id, const char *worker);
	int (*sandbox_set_snapshot)(struct store *, const char *id, const char *digest);
	/* the id of the API key the sandbox was created with: 1 found (key
	 * "" when it predates keys' quotas), 0 no such sandbox */
	int (*sandbox_key)(struct store *, const char *id, char key[STORE_CREDID_LEN + 1]);
	/* the key whose quota the sandbox counts against from now on */
	int (*sandbox_set_key)(struct store *, const char *id, const char *key);
	/* the egress policy's stored form (network.h): 1 and *json (malloc'd,
	 * NULL when none is set), 0 unknown; owner NULL: any owner */
	int (*sandbox_network_get)(struct store *, const char *owner, const char *id, char **json);
	int (*sandbox_network_set)(struct store *, const char *id, const char *json);
	/* declared service ports, stored form (ports.h): as the network
	 * pair (store_sqlite_ports.c, store_pg_ports.c) */
	int (*sandbox_ports_get)(struct store *, const char *owner, const char *id, char **json);
	int (*sandbox_ports_set)(struct store *, const char *id, const char *json);
	/* the netgtw listener a worker registered ("tcp://HOST:PORT"): 1 and
	 * *out (malloc'd, NULL when it runs none), 0 unknown worker */
	int (*worker_gateway_get)(struct store *, const char *worker, char **out);
	int (*worker_gateway_set)(struct store *, const char *worker, const char *gateway);
	/* refusals counted by worker for sandbox (refresh_route, deny,
	 * expired) added to the sandbox's, when worker ran an execution of
	 * it: 1 added, 0 not (unknown sandbox, another worker's) */
	int (*sandbox_refusals_add)(struct store *, const char *worker, const char *sandbox,
	    const int64_t n[3]);
	/* 1 and n[] (zeros when none were counted) or 0 unknown sandbox */
	int (*sandbox_refusals_get)(struct store *, const char *owner, const char *id,
	    int64_t n[3]);
	/* 1 taken (free or expired at now), 0 held by someone else */
	int (*lease_take)(struct store *, const char *id, const char *who, int64_t expiry,
	    int64_t now);
	int (*lease_renew)(struct store *, const char *id, const char *who, int64_t expiry);
	/* who NULL: whoever holds it */
	int (*lease_release)(struct store *, const char *id, const char *who);
	/* the live executions of a re-created worker's old incarnation whose
	 * sandbox still runs: [{"id","template","resources","pinned"}] */
	int (*sandboxes_on)(struct store *, const char *worker, const char *resident,
	    json_t **out);

	/* executions and assignments */
	int (*exec_get)(struct store *, const char *sandbox, int64_t gen, struct exec_row *);
	/* the next generation of sandbox, pending on worker; *gen set */
	int (*exec_insert)(struct store *, const char *sandbox, const char *worker,
	    const char *incarnation, int64_t now, int64_t *gen);
	int (*exec_set_retiring)(struct store *, const char *sandbox, int64_t gen, int64_t now);
	int (*exec_set_serving)(struct store *, const char *sandbox, int64_t gen,
	    int64_t activation, int64_t now);
	/* a failure already recorded keeps its first error */
	int (*exec_set_failed)(struct store *, const char *sandbox, int64_t gen,
	    const char *error, int64_t now);
	int (*exec_set_retired)(struct store *, const char *sandbox, int64_t gen, int64_t now);
	/* every unended execution of worker's incarnation resident fails */
	int (*execs_fail_resident)(struct store *, const char *worker, const char *resident,
	    const char *error, int64_t now);
	int (*assignment_add)(struct store *, const char *worker, const char *sandbox,
	    int64_t gen, const char *action, const char *spec, int64_t now);

	/* workers: the placement candidates (live ones with an incarnation,
	 * or only pinned), prefer first then the least loaded, at most cap */
	int (*workers_load)(struct store *, const char *pinned, const char *prefer,
	    struct worker_load *wl, size_t cap, size_t *n);
	/* "" when the worker has never registered; -ENOENT unknown */
	int (*worker_incarnation)(struct store *, const char *worker, char inc[SPACE_ID_MAX + 1]);
	int (*worker_set_live)(struct store *, const char *worker, const char *incarnation,
	    const char *endpoint, int64_t capacity, const struct res *total, int64_t now);
	/* the newest assignment revision of worker (0 none) */
	int (*worker_revision)(struct store *, const char *worker, int64_t *rev);

	/* operations */
	/* the unfinished operation of sandbox: 1 found (id, kind, owner), 0 none */
	int (*op_open)(struct store *, const char *sandbox, char id[SPACE_ID_MAX + 1],
	    char kind[16], char owner[SPACE_ID_MAX + 1]);
	int (*ops_open_list)(struct store *, const char *sandbox, char (*ids)[SPACE_ID_MAX + 1],
	    size_t cap, size_t *n);
	int (*op_insert)(struct store *, const struct op_new *, int64_t now);
	/* 1 found (unfinished), 0 done or unknown; o->template_/resources owned */
	int (*op_get)(struct store *, const char *id, struct op_view *o);
	int (*op_set_installing)(struct store *, const char *id, int64_t to_gen,
	    const char *target, int64_t now);
	int (*op_end)(struct store *, const char *id, const char *result, int64_t now);

	/* snapshots */
	int (*snapshot_add)(struct store *, const char *id, const char *sandbox, int64_t gen,
	    const char *name, const char *kind, const char *state, const char *digest,
	    int64_t size, int64_t now);
	int (*snapshot_named_get)(struct store *, const char *id, struct snap_row *);
	int (*snapshot_set_ready)(struct store *, const char *id, const char *digest, int64_t size);
	int (*snapshot_set_failed)(struct store *, const char *id, const char *error);
	/* every pending snapshot of sandbox fails with error */
	int (*snapshots_fail_pending)(struct store *, const char *sandbox, const char *error);
	/* 1 when a ready snapshot of (sandbox, gen) has digest, else 0 */
	int (*snapshot_has)(struct store *, const char *sandbox, int64_t gen, const char *digest);
	/* the named snapshots of sandbox that did not fail (pending, ready) */
	int (*snapshot_named_count)(struct store *, const char *sandbox, int64_t *n);
	/* bytes of the ready named snapshots of every sandbox of owner, the
	 * killed ones' too */
	int (*snapshot_named_bytes)(struct store *, const char *owner, int64_t *bytes);
	/* a named snapshot made automatic (its name dropped), or its row
	 * removed (remove: its sandbox is killed) */
	int (*snapshot_unname)(struct store *, const char *id, bool remove);
	/* the base of a snapshot's archive: "" whole, else the digest it is
	 * a delta of (NULL: not known, the column is left NULL) */
	int (*snapshot_set_base)(struct store *, const char *id, const char *base);
	/* every snapshot of sandbox: [{"id","kind","state","digest"?,"base"?}]
	 * (digest and base null when not known) */
	int (*snapshots_of)(struct store *, const char *sandbox, json_t **out);
	/* an automatic snapshot's row removed (superseded: lifecycle.c) */
	int (*snapshot_drop)(struct store *, const char *id);
	/* the sandbox's latest snapshot (sandboxes.snapshot) into out, ""
	 * none; 0, or -ENOENT for no such sandbox */
	int (*sandbox_latest)(struct store *, const char *id, char out[SPACE_ID_MAX + 1]);

	int (*audit)(struct store *, const char *principal, const char *action,
	    const char *target, const char *detail);

	/* an API key's quota and what its sandboxes hold at now: running
	 * (not killed, paused or failed), their memory, creates in the 60 s
	 * before now and the oldest of those; -ENOENT unknown or revoked */
	int (*key_usage)(struct store *, const char *key_id, int64_t now, struct key_quota *q,
	    int64_t *running, int64_t *memory_mb, int64_t *recent, int64_t *oldest);
	/* the public entry (store_sqlite_edge.c, store_pg_edge.c; NULL on a
	 * backend without them: the API answers 501). Each runs as its own
	 * transaction.
	 * edge credentials: add (-EEXIST name taken), lookup by the public id
	 * (-ENOENT unknown or revoked), revoke by name (1 revoked, 0 none) */
	int (*edgecred_add)(struct store *, const char *name, const char *id,
	    const uint8_t hash[STORE_HASH_LEN]);
	int (*edgecred_lookup)(struct store *, const char *id, char name[SPACE_ID_MAX + 1],
	    uint8_t hash[STORE_HASH_LEN]);
	int (*edgecred_revoke)(struct store *, const char *name);
	/* the sandbox's traffic token (one, replaced by each set): set 1, or
	 * 0 no such sandbox of owner; get 1 and *hash, 0 none set */
	int (*traffic_token_set)(struct store *, const char *owner, const char *id,
	    const uint8_t hash[STORE_HASH_LEN]);
	int (*traffic_token_get)(struct store *, const char *id, uint8_t hash[STORE_HASH_LEN]);
	/* 1 and the owner of a sandbox that is not killed, 0 none */
	int (*sandbox_owner)(struct store *, const char *id, char owner[SPACE_ID_MAX + 1]);
	/* per-sandbox access tokens (store_sqlite_access.c, store_pg_access.c;
	 * api_access.c): add 1, or 0 no such sandbox of owner (killed ones
	 * included); a sandbox keeps its ACCESS_TOKENS_KEPT newest, older ones
	 * are deleted. lookup by the public id: 0 and the sandbox, -ENOENT
	 * unknown, or its sandbox is stopping or killed (revoked with it) */
	int (*access_token_add)(struct store *, const char *owner, const char *sandbox,
	    const char *id, const uint8_t hash[STORE_HASH_LEN]);
	int (*access_token_lookup)(struct store *, const char *id, char sandbox[SPACE_ID_MAX + 1],
	    uint8_t hash[STORE_HASH_LEN]);

	/* the snapshot store's references (store_archives.c): a reported
	 * digest stays referenced until `until` (the later one kept); the
	 * expired ones pruned at now; the creation time of the oldest
	 * unfinished operation whose execution is (or was) on worker, or
	 * whose execution is not known (worker NULL: of any), 0 none; 1 when
	 * anything references digest */
	int (*archive_pending_add)(struct store *, const char *digest, int64_t until);
	int (*archive_pending_prune)(struct store *, int64_t now);
	int (*ops_oldest_open)(struct store *, const char *worker, int64_t *created);
	int (*archive_referenced)(struct store *, const char *digest);

	/* a lost worker's executions (failover.c; store_sqlite_lost.c,
	 * store_pg_lost.c): the current, active executions of the current
	 * incarnation of workers lost with a last heartbeat before
	 * lost_before, of creating or running sandboxes (only sandbox's when
	 * not NULL), at most 64: [{"owner","sandbox","generation","worker"}] */
	int (*lost_execs)(struct store *, int64_t lost_before, const char *sandbox, json_t **out);
	/* an execution's recorded error: 1 found ("" none), 0 unknown */
	int (*exec_error)(struct store *, const char *sandbox, int64_t gen, char *err, size_t cap);
};
#define ACCESS_TOKENS_KEPT 32   /* per sandbox: a create and its connects */

/* a store's row operations */
#define R(s) ((s)->rows)


/* lifecycle.c: the entries of store_ops every backend shares */
int lc_sandbox_create(struct store *, const char *owner, const char *id,
    const struct sandbox_spec *, json_t **out, const char **why);
int lc_sandbox_kill(struct store *, const char *owner, const char *id, json_t **out);
int lc_worker_register(struct store *, const char *worker, const char *incarnation,
    const char *endpoint, int64_t capacity, const struct res *total, json_t **out,
    int64_t *revision, int *reassigned);
int lc_execution_status(struct store *, const char *worker, const struct route_identity *,
    const char *state, const char *error, const struct snap_report *snap, const char **why);
int lc_snapshot_forget(struct store *, const char *owner, const char *sandbox, const char *id,
    const char **why);
int lc_op_start(struct store *, const char *owner, const char *sandbox,
    const struct op_request *, json_t **out, const char **why);
int lc_ops_drive(struct store *, const char *lease_owner, int64_t lease_ttl,
    const char *sandbox, bool advance);
int lc_workers_failover(struct store *, const char *lease_owner, int64_t lease_ttl,
    int64_t lost_before, int *failed);
int lc_lost_resumable(struct store *, const char *sandbox, int64_t gen, const char *snapshot);
int lc_snapshot_report(struct store *, const char *worker, const char *snapshot_id,
    const char *sandbox, int64_t generation, const char *digest, const char *base,
    int64_t size, const char *error, const char **why);
int lc_checkpoint_report(struct store *, const char *worker, const struct route_identity *r,
    const struct snap_report *snap, const char *layer_base, const char **why);
/* lifecycle.c: the automatic snapshots of sandbox that root (its latest)
 * superseded removed; *dropped counts them */
int lc_snapshots_prune(struct store *, const char *sandbox, const char *const *roots,
    int *dropped);

/* store_archives.c: the snapshot store's collection, on the row operations */
int st_archive_seen(struct store *, const char *digest, int64_t until);
int st_archives_collectable(struct store *, json_t *archives, int64_t now, const char *worker,
    json_t **out);
#endif
