/* The one store interface of space-control. A backend is a table of
 * operations behind an opaque handle; SQLite (store_sqlite.c) is the
 * embedded default. The entries that change a lifecycle state point to
 * lifecycle.c / lifecycle_ops.c, which run on the backend's row
 * operations (store_tx.h): a PostgreSQL backend is only its SQL.
 *
 * Every operation that changes more than one row does it in one
 * transaction. Errors follow docs/errors.md: 0 or a negative errno
 * (-ENOENT unknown id, -EEXIST duplicate, -EAGAIN no capacity, -EIO
 * storage failure); refusals that the caller shows set *why. */
#ifndef SPACE_CONTROL_STORE_H
#define SPACE_CONTROL_STORE_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "claims.h"
#include "keys.h"

#define STORE_STATE_MAX  15
#define STORE_ENDPOINT_MAX 255
#define STORE_HASH_LEN   32     /* BLAKE2b-256 of a secret */
#define STORE_CREDID_LEN 12     /* public lookup prefix of a secret */

/* the current execution of a sandbox, as routes need it */
struct exec_view {
	struct route_identity route;
	char    state[STORE_STATE_MAX + 1];          /* execution state */
	char    sandbox_state[STORE_STATE_MAX + 1];
	char    endpoint[STORE_ENDPOINT_MAX + 1];    /* worker's node-api */
	char    worker_state[STORE_STATE_MAX + 1];   /* live / lost */
};

/* a new sandbox: strings are validated JSON texts owned by the caller */
struct sandbox_spec {
	const char *template_;
	const char *resources;
	const char *timeouts;
	const char *metadata;
	const char *pinned;             /* NULL = scheduler's choice */
	const char *api_key;            /* id of the key that asks: its quota applies */
	const char *network;            /* egress policy, stored form (network.h); NULL = default */
	const char *ports;              /* declared service ports, stored form (ports.h); NULL = none */
	int        *retry_after;        /* out, on -EDQUOT: seconds until it may pass */
};

/* what one API key may hold; 0 = no limit */
struct key_quota {
	int64_t max_sandboxes;          /* not killed, paused or failed */
	int64_t max_memory_mb;          /* their memory_mb summed */
	int64_t creates_per_minute;     /* creates in the last 60 s */
};

struct key_row {
	char    kid[PASERK_K4_PID_LEN + 1];
	uint8_t pk[32];
	int64_t activate_at;            /* signing starts (publish delay) */
	int64_t not_before, not_after;  /* not_after 0 = open */
};

/* a lifecycle operation to start (lifecycle_ops.c): it takes the
 * sandbox's ownership lease by compare-and-swap, persists the operation
 * row and its first step, in one transaction */
struct op_request {
	const char *kind;               /* pause, resume, move, snapshot */
	const char *op_id;              /* "op_..." */
	const char *worker;             /* resume: wanted worker or NULL; move: target */
	const char *snapshot_id;        /* snapshot: id of the new snapshot */
	const char *name;               /* snapshot: its name */
	const char *lease_owner;        /* this daemon instance */
	int64_t     lease_ttl;          /* seconds */
	const char *reason;             /* audit detail: "api", "timeout idle", ... */
	bool        past_hold;          /* pause/move: start even while a repaired route is held */
	int        *retry_after;        /* out, on -EDQUOT (a resume over its key's quota) */
	const char *api_key;            /* resume: the asking key's id, NULL: none */
	int64_t     max_named;          /* snapshot: named snapshots a sandbox may hold, 0 = any */
	int64_t     max_named_mb;       /* snapshot: MiB of named snapshots its owner may hold, 0 = any */
};

/* a worker's retirement report may carry the archive of the retired layer */
struct snap_report {
	const char *id;                 /* id for the snapshot row, made by the caller */
	const char *digest;             /* lowercase hex BLAKE2b-256, NULL = none */
	int64_t     size;
	const char *base;               /* what it is a delta of, "" whole, NULL not known */
};

/* resources: what a sandbox asks for, what a worker reports it has */
struct res {
	int64_t memory_mb, cpu_percent, disk_mb;
};

/* a placement candidate: a worker and its load, read inside the create
 * transaction; scheduler_pick() (scheduler.c) holds the policy */
struct worker_load {
	char    id[SPACE_ID_MAX + 1];
	char    incarnation[SPACE_ID_MAX + 1];
	int64_t capacity;               /* sandboxes */
	int64_t active;                 /* pending, starting or serving executions */
	struct res total;               /* reported by the worker; 0 = not reported */
	struct res used;                /* asked by its active executions */
	bool    live;
};

/* how far the sum asked of a worker may exceed what it reported, in
 * percent per resource (100 = not at all); the daemon sets it once */
struct overcommit {
	int memory, cpu, disk;
};

/* true when want fits on w beside what it runs (a free slot, and each
 * reported resource within its overcommitted total) */
bool scheduler_fits(const struct worker_load *w, const struct res *want,
    const struct overcommit *oc);
/* index of the chosen worker, or -ENOENT (pinned unknown), -EHOSTDOWN
 * (pinned lost), -EAGAIN (no free capacity), with *why set */
int scheduler_pick(const struct worker_load *w, size_t n, const char *pinned,
    const struct res *want, const struct overcommit *oc, const char **why);

struct store;
struct store_ops {
	void (*close)(struct store *);

	/* credentials: id is the public prefix, hash the BLAKE2b-256 of the secret */
	int (*apikey_add)(struct store *, const char *principal, const char *key_id,
	    const uint8_t hash[STORE_HASH_LEN], const struct key_quota *);
	/* [{"id","principal","created_at","revoked_at","quota":{...}}] */
	int (*apikey_list)(struct store *, json_t **out);
	/* the key of that id, or every key of that principal: how many were
	 * revoked now (0: none, or already revoked); a revoked key is
	 * unknown to apikey_lookup from then on */
	int (*apikey_revoke)(struct store *, const char *id_or_principal);
	int (*apikey_lookup)(struct store *, const char *key_id,
	    char principal[SPACE_ID_MAX + 1], uint8_t hash[STORE_HASH_LEN]);
	int (*worker_add)(struct store *, const char *worker, const char *cred_id,
	    const uint8_t hash[STORE_HASH_LEN]);
	int (*worker_cred_lookup)(struct store *, const char *cred_id,
	    char worker[SPACE_ID_MAX + 1], uint8_t hash[STORE_HASH_LEN]);

	/* sandboxes; owner scopes every lookup (another owner's id is -ENOENT).
	 * create: *why set on -ENOENT / -EHOSTDOWN / -EAGAIN of a pinned worker,
	 * and on -EDQUOT: the key's quota refuses it */
	int (*sandbox_create)(struct store *, const char *owner, const char *id,
	    const struct sandbox_spec *, json_t **out, const char **why);
	int (*sandbox_get)(struct store *, const char *owner, const char *id, json_t **out);
	/* owner's sandboxes in the order they were made, after the one
	 * named `after` (NULL: from the first), at most limit of them, and
	 * of those not killed only when live */
	int (*sandbox_list)(struct store *, const char *owner, const char *after, bool live,
	    int64_t limit, json_t **out);
	int (*sandbox_kill)(struct store *, const char *owner, const char *id, json_t **out);
	int (*sandbox_current)(struct store *, const char *owner, const char *id,
	    struct exec_view *out);

	/* workers; register returns the worker object and the newest revision */
	int (*worker_register)(struct store *, const char *worker, const char *incarnation,
	    const char *endpoint, int64_t capacity, const struct res *total, json_t **out,
	    int64_t *revision, int *reassigned);
	/* capacity < 0 and total NULL: not reported, kept as they are */
	int (*worker_heartbeat)(struct store *, const char *worker, const char *incarnation,
	    int64_t capacity, const struct res *total);
	int (*assignments_after)(struct store *, const char *worker, int64_t after,
	    json_t **out, int64_t *revision);
	int (*execution_status)(struct store *, const char *worker,
	    const struct route_identity *, const char *state, const char *error,
	    const struct snap_report *snap, const char **why);
	int (*workers_reap)(struct store *, int64_t older_than);
	/* the failover (failover.c): the executions of workers lost with a
	 * last heartbeat before lost_before are retired in the record and
	 * their sandboxes placed elsewhere from their latest snapshot, or
	 * failed (*failed counts those); the number placed again */
	int (*workers_failover)(struct store *, const char *lease_owner, int64_t lease_ttl,
	    int64_t lost_before, int *failed);
	int (*worker_counts)(struct store *, int64_t *live, int64_t *lost);
	/* every worker: id, endpoint, state, capacity, running executions,
	 * reported resources and what its executions ask of them */
	int (*workers_list)(struct store *, json_t **out);

	/* signing keys and bundles */
	int (*key_add)(struct store *, const struct key_row *, int64_t old_not_after);
	int (*keys_list)(struct store *, struct key_row *rows, size_t cap, size_t *n);
	int (*keys_changed)(struct store *, int64_t *stamp);
	int (*bundle_latest)(struct store *, uint64_t *version, char **token);
	int (*bundle_add)(struct store *, uint64_t version, const char *token);

	/* lifecycle. op_start: -ENOENT unknown sandbox, -EALREADY lease held by
	 * another operation, -EPERM operation does not apply (*why), -EHOSTDOWN
	 * / -EAGAIN placement refused (*why); *out is the sandbox object, or
	 * {"snapshot":{...}} for a snapshot */
	int (*op_start)(struct store *, const char *owner, const char *sandbox,
	    const struct op_request *, json_t **out, const char **why);
	/* renew the leases lease_owner holds, take over expired ones, and move
	 * every unfinished operation (of sandbox, or all when NULL) as far as
	 * the persisted rows allow; advance false only renews and takes over.
	 * Returns the number of operations that changed step. */
	int (*ops_drive)(struct store *, const char *lease_owner, int64_t lease_ttl,
	    const char *sandbox, bool advance);
	/* a worker's answer to a snapshot assignment (digest NULL + error);
	 * base: what the archive is a delta of, "" whole, NULL not known */
	int (*snapshot_report)(struct store *, const char *worker, const char *snapshot_id,
	    const char *sandbox, int64_t generation, const char *digest, const char *base,
	    int64_t size, const char *error, const char **why);
	/* a worker's checkpoint of a serving execution (r): an automatic
	 * snapshot, ready, that the sandbox's later archives may be deltas
	 * of; not its latest (docs/worker.md, "Checkpoints"). -ENOENT,
	 * -EPERM, -ESTALE with *why as an execution report */
	int (*checkpoint_report)(struct store *, const char *worker, const struct route_identity *r,
	    const struct snap_report *snap, const char *layer_base, const char **why);
	int (*snapshots_list)(struct store *, const char *owner, const char *sandbox,
	    json_t **out);
	/* a named snapshot deleted by its owner: 0, -ENOENT (no such named
	 * snapshot of owner's sandbox), -EPERM with *why (still pending) */
	int (*snapshot_forget)(struct store *, const char *owner, const char *sandbox,
	    const char *id, const char **why);
	int (*sandbox_set_timeouts)(struct store *, const char *owner, const char *id,
	    const char *timeouts, json_t **out);
	/* activity: a capability was issued for the sandbox at now */
	int (*sandbox_touch)(struct store *, const char *id, int64_t now);
	/* hold the route of generation gen (the current execution, serving,
	 * of a running sandbox) until until_ms: a pause or move that would
	 * retire it waits (op_start -EBUSY) unless past_hold. 1 held, 0 the
	 * route is no longer current and serving. */
	int (*route_hold)(struct store *, const char *id, uint64_t gen, int64_t until_ms);
	/* running sandboxes whose idle or absolute timeout has passed and whose
	 * lease is free: [{"owner","id","action","which"}] */
	int (*timeouts_due)(struct store *, int64_t now, json_t **out);

	int (*audit)(struct store *, const char *principal, const char *action,
	    const char *target, const char *detail);
	/* at most limit audit rows older than before (unix seconds) removed,
	 * oldest first: how many */
	int (*audit_prune)(struct store *, int64_t before, int limit);

	/* the snapshot store's collection (store_archives.c): a digest
	 * a worker reported is referenced until `until` (unix seconds);
	 * of archives [{"digest","age"}] (validated) that came from worker
	 * (its cache, its uploads; NULL: not known), the digests nothing
	 * references, as an array of strings */
	int (*archive_seen)(struct store *, const char *digest, int64_t until);
	int (*archives_collectable)(struct store *, json_t *archives, int64_t now,
	    const char *worker, json_t **out);
	/* sandboxes, not killed, made from the template of that digest */
	int (*template_refs)(struct store *, const char *digest, int64_t *n);
	/* executions placed on worker, not ended, whose sandbox's snapshots
	 * name that digest: the archives the worker may download */
	int (*archive_worker_refs)(struct store *, const char *worker, const char *digest, int64_t *n);

	/* wake-ups across daemons (PostgreSQL: LISTEN/NOTIFY; NULL on a
	 * backend without them): wake(arg, n) runs on a thread of the store
	 * when n > 0 assignments were committed by any daemon on the store,
	 * and with n 0 when the listener (re)connected (what was committed
	 * meanwhile is unknown). listening: true while those wake-ups are
	 * certain to come, so a long-poll need not look at the store itself. */
	int  (*listen)(struct store *, void (*wake)(void *arg, unsigned n), void *arg);
	bool (*listening)(struct store *);
};
struct store_rows;
struct store {
	const struct store_ops *ops;
	const struct store_rows *rows;  /* store_tx.h: what lifecycle.c runs on */
	struct overcommit oc;           /* placement policy; the daemon sets it */
};

/* "sqlite:PATH" (or a bare path), or "postgres://..." (a libpq URL).
 * Runs pending migrations. NULL + errno. */
struct store *store_open(const char *spec);
struct store *store_sqlite_open(const char *path);
struct store *store_pg_open(const char *conninfo);       /* store_pg.c */

/* latency observer the daemon installs (metrics); NULL outside serve */
extern void (*store_observe)(double seconds);
/* lifecycle outcome observer (metrics): kind and result are static strings */
extern void (*store_op_observe)(const char *kind, const char *result);
#endif
