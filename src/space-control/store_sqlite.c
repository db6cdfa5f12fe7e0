/* The SQLite backend of the store (store.h): the embedded default. This
 * file holds the schema, the connection and its one transaction helper,
 * credentials and keys; store_sqlite_read.c the reads;
 * store_sqlite_rows.c the row operations the lifecycle (lifecycle.c,
 * lifecycle_ops.c) runs on.
 *
 * One connection per process, serialized by a mutex, so that a transaction
 * of one thread never interleaves with another's statements. Other
 * processes (the `apikey add`, `worker add`, `keys rotate` subcommands)
 * share the file through WAL and busy_timeout. Every multi-row change runs
 * in sq_tx (BEGIN IMMEDIATE ... COMMIT): the write lock is taken at BEGIN, so the
 * reads inside (MAX(generation), worker load) see the rows the change is
 * based on, and a kill -9 leaves either all rows of a change or none. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sqlite3.h>

#include "claims.h"
#include "dbfile.h"
#include "log.h"
#include "store.h"
#include "store_sqlite.h"
#include "store_tx.h"
#include "util.h"

void (*store_observe)(double seconds);
void (*store_op_observe)(const char *kind, const char *result);


/* how long a statement waits for another process's write lock */
#define SQ_BUSY_MS 10000

/* Versioned migrations: entry i brings the schema from user_version i to
 * i + 1. Append, never edit a shipped entry. */
static const char *const migrations[] = {
	/* 1: the initial schema */
	"CREATE TABLE principals ("
	"  id TEXT PRIMARY KEY, created_at INTEGER NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"                       /* public lookup prefix */
	"  principal TEXT NOT NULL REFERENCES principals(id),"
	"  hash BLOB NOT NULL,"                        /* BLAKE2b-256 of the key */
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE workers ("
	"  id TEXT PRIMARY KEY, incarnation TEXT, endpoint TEXT,"
	"  capacity INTEGER NOT NULL DEFAULT 0,"
	"  cred_id TEXT NOT NULL UNIQUE, cred_hash BLOB NOT NULL,"
	"  state TEXT NOT NULL DEFAULT 'lost' CHECK (state IN ('live','lost')),"
	"  last_heartbeat INTEGER NOT NULL DEFAULT 0, created_at INTEGER NOT NULL);"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY, owner TEXT NOT NULL REFERENCES principals(id),"
	"  state TEXT NOT NULL, template TEXT NOT NULL, resources TEXT NOT NULL,"
	"  timeouts TEXT NOT NULL, metadata TEXT NOT NULL, pinned_worker TEXT,"
	"  created_at INTEGER NOT NULL, lease_owner TEXT, lease_expiry INTEGER);"
	"CREATE INDEX sandboxes_owner ON sandboxes(owner, created_at);"
	"CREATE TABLE executions ("
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  generation INTEGER NOT NULL CHECK (generation >= 1),"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  substrate TEXT NOT NULL,"
	"  activation INTEGER NOT NULL CHECK (activation >= 1),"
	"  resident TEXT NOT NULL,"
	"  state TEXT NOT NULL CHECK (state IN ('pending','starting','serving','retiring','retired','failed')),"
	"  error TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL,"
	"  PRIMARY KEY (sandbox, generation));"
	"CREATE INDEX executions_worker ON executions(worker, resident, state);"
	"CREATE TABLE assignments ("
	"  revision INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  sandbox TEXT NOT NULL, generation INTEGER NOT NULL,"
	"  action TEXT NOT NULL CHECK (action IN ('install','retire')),"
	"  spec TEXT NOT NULL, created_at INTEGER NOT NULL,"
	"  FOREIGN KEY (sandbox, generation) REFERENCES executions(sandbox, generation));"
	"CREATE INDEX assignments_worker ON assignments(worker, revision);"
	"CREATE TABLE snapshots ("
	"  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  generation INTEGER NOT NULL, digest TEXT NOT NULL, size INTEGER NOT NULL,"
	"  created_at INTEGER NOT NULL);"
	"CREATE TABLE signing_keys ("
	"  kid TEXT PRIMARY KEY, public TEXT NOT NULL,"
	"  activate_at INTEGER NOT NULL,"              /* first second it signs */
	"  not_before INTEGER NOT NULL, not_after INTEGER NOT NULL DEFAULT 0,"
	"  created INTEGER NOT NULL);"
	"CREATE TABLE bundles ("
	"  version INTEGER PRIMARY KEY, token TEXT NOT NULL, created INTEGER NOT NULL);"
	"CREATE TABLE audit ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT, ts INTEGER NOT NULL, principal TEXT,"
	"  action TEXT NOT NULL, target TEXT, detail TEXT);"
	"CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
	"INSERT INTO meta VALUES ('keys_serial', 0);",

	/* 2: lifecycle. Operations and their leases, snapshot rows that a
	 * named snapshot creates before the worker has archived anything, the
	 * 'snapshot' assignment action, activity and end times. SQLite cannot
	 * change a CHECK constraint, so assignments and snapshots are rebuilt;
	 * the revision sequence is carried over so no revision is reused. */
	"ALTER TABLE sandboxes ADD COLUMN last_activity INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT;"
	"ALTER TABLE executions ADD COLUMN ended_at INTEGER;"
	"CREATE TABLE assignments_v2 ("
	"  revision INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  sandbox TEXT NOT NULL, generation INTEGER NOT NULL,"
	"  action TEXT NOT NULL CHECK (action IN ('install','retire','snapshot')),"
	"  spec TEXT NOT NULL, created_at INTEGER NOT NULL,"
	"  FOREIGN KEY (sandbox, generation) REFERENCES executions(sandbox, generation));"
	"INSERT INTO assignments_v2 SELECT * FROM assignments;"
	"DELETE FROM sqlite_sequence WHERE name = 'assignments_v2';"
	"INSERT INTO sqlite_sequence (name, seq) SELECT 'assignments_v2', seq FROM sqlite_sequence"
	"  WHERE name = 'assignments';"
	"DROP TABLE assignments;"
	"ALTER TABLE assignments_v2 RENAME TO assignments;"
	"CREATE INDEX assignments_worker ON assignments(worker, revision);"
	"CREATE TABLE snapshots_v2 ("
	"  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  generation INTEGER NOT NULL, name TEXT,"
	"  kind TEXT NOT NULL CHECK (kind IN ('auto','named')),"
	"  state TEXT NOT NULL CHECK (state IN ('pending','ready','failed')),"
	"  digest TEXT, size INTEGER, error TEXT, created_at INTEGER NOT NULL);"
	"INSERT INTO snapshots_v2 SELECT id, sandbox, generation, NULL, 'auto', 'ready', digest,"
	"  size, NULL, created_at FROM snapshots;"
	"DROP TABLE snapshots;"
	"ALTER TABLE snapshots_v2 RENAME TO snapshots;"
	"CREATE INDEX snapshots_sandbox ON snapshots(sandbox, created_at);"
	"CREATE TABLE operations ("
	"  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  kind TEXT NOT NULL CHECK (kind IN ('pause','resume','move','snapshot')),"
	"  target TEXT,"                               /* worker of a move or resume */
	"  step TEXT NOT NULL CHECK (step IN ('retiring','installing','snapshotting','done')),"
	"  from_gen INTEGER, to_gen INTEGER, snapshot_id TEXT, reason TEXT,"
	"  result TEXT CHECK (result IN ('ok','failed','abandoned')),"
	"  created INTEGER NOT NULL, updated INTEGER NOT NULL, ended INTEGER);"
	/* partial: only unfinished operations are ever looked up by step */
	"CREATE INDEX operations_open ON operations(sandbox) WHERE step <> 'done';",

	/* 3: what a worker reports it has (0 = not reported, not accounted) */
	"ALTER TABLE workers ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE workers ADD COLUMN cpu_percent INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE workers ADD COLUMN disk_mb INTEGER NOT NULL DEFAULT 0;",

	/* 4: per-key quotas (0 = no limit), revocation, and the key each
	 * sandbox was created with (NULL before this version: no quota) */
	"ALTER TABLE api_keys ADD COLUMN max_sandboxes INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN max_memory_mb INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN creates_per_minute INTEGER NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN revoked_at INTEGER;"
	"ALTER TABLE sandboxes ADD COLUMN api_key TEXT;"
	"CREATE INDEX sandboxes_api_key ON sandboxes(api_key, created_at);",

	/* 5: a route handed to a repair is held (ms, wall clock) */
	"ALTER TABLE sandboxes ADD COLUMN route_hold_until INTEGER NOT NULL DEFAULT 0;",

	/* 6: archives reported lately (a pending reference until `until`,
	 * unix seconds), for the snapshot store's collection */
	"CREATE TABLE archive_pending (digest TEXT PRIMARY KEY, until INTEGER NOT NULL);",

	/* 7: egress policies (docs/network.md): the sandbox's, and the
	 * 'network' assignment that changes a serving execution's. The
	 * assignments table is rebuilt for its CHECK as in version 2. */
	"ALTER TABLE sandboxes ADD COLUMN network TEXT;"
	"CREATE TABLE assignments_v7 ("
	"  revision INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  sandbox TEXT NOT NULL, generation INTEGER NOT NULL,"
	"  action TEXT NOT NULL CHECK (action IN ('install','retire','snapshot','network')),"
	"  spec TEXT NOT NULL, created_at INTEGER NOT NULL,"
	"  FOREIGN KEY (sandbox, generation) REFERENCES executions(sandbox, generation));"
	"INSERT INTO assignments_v7 SELECT * FROM assignments;"
	"DELETE FROM sqlite_sequence WHERE name = 'assignments_v7';"
	"INSERT INTO sqlite_sequence (name, seq) SELECT 'assignments_v7', seq FROM sqlite_sequence"
	"  WHERE name = 'assignments';"
	"DROP TABLE assignments;"
	"ALTER TABLE assignments_v7 RENAME TO assignments;"
	"CREATE INDEX assignments_worker ON assignments(worker, revision);",

	/* 8: the public entry (docs/network.md): edge credentials (hashed as
	 * API keys are) and each sandbox's traffic token (its hash only) */
	"CREATE TABLE edge_creds (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	"  hash BLOB NOT NULL, created_at INTEGER NOT NULL, revoked_at INTEGER);"
	"CREATE TABLE traffic_tokens (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id),"
	"  hash BLOB NOT NULL, created_at INTEGER NOT NULL);",

	/* 9: declared service ports of a sandbox (JSON [{"port","public"}],
	 * api_ports.c) and the netgtw listener a worker registered */
	"ALTER TABLE sandboxes ADD COLUMN ports TEXT;"
	"ALTER TABLE workers ADD COLUMN gateway TEXT;",

	/* 10: refusals counted per sandbox and outcome, summed from the
	 * workers' heartbeats (docs/console.md "Refused routes") */
	"CREATE TABLE sandbox_refusals (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id),"
	"  refresh_route INTEGER NOT NULL DEFAULT 0, deny INTEGER NOT NULL DEFAULT 0,"
	"  expired INTEGER NOT NULL DEFAULT 0);",

	/* 11: per-sandbox access tokens (api_access.c): several per sandbox
	 * (each create or connect of the E2B API makes one), hashed as API
	 * keys are, looked up by their public id */
	"CREATE TABLE access_tokens (id TEXT PRIMARY KEY,"
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  hash BLOB NOT NULL, created_at INTEGER NOT NULL);"
	"CREATE INDEX access_tokens_sandbox ON access_tokens(sandbox, created_at);",

	/* 12: the base of each snapshot's archive (docs/recovery.md, "Collecting
	 * the snapshot store"): NULL not known, '' whole, else the digest of
	 * the archive it is a delta of */
	"ALTER TABLE snapshots ADD COLUMN base TEXT;",

	/* 13: what every create's transaction counts, over live rows only:
	 * a key's live sandboxes (its quota, key_usage) and each worker's
	 * active executions (placement, the worker usage join). Without
	 * them both counts read every row ever made, killed and retired
	 * ones included, and a create slowed down with the history. Each
	 * condition is its query's, word for word, for the planner. */
	"CREATE INDEX sandboxes_key_live ON sandboxes(api_key)"
	"  WHERE state NOT IN ('killed','paused','failed');"
	"CREATE INDEX executions_live ON executions(worker, resident)"
	"  WHERE state IN ('pending','starting','serving');",
};
#define NMIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))


void
sq_lock(struct sq *q)
{
	pthread_mutex_lock(&q->mu);
	clock_gettime(CLOCK_MONOTONIC, &q->t0);
}

void
sq_unlock(struct sq *q)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_mutex_unlock(&q->mu);
	if (store_observe)
		store_observe((double)(t1.tv_sec - q->t0.tv_sec) +
		    (double)(t1.tv_nsec - q->t0.tv_nsec) / 1e9);
}

int
sq_xexec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		log_warnx("store: %s: %s", sql[0] == 'B' || sql[0] == 'C' ||
		    sql[0] == 'R' ? sql : "statement", err ? err : "?");
		sqlite3_free(err);
		return -EIO;
	}
	return 0;
}

/* The one transaction helper of the backend. BEGIN IMMEDIATE takes the
 * write lock at once, so the reads inside see the rows the change is based
 * on; another process holding it (a subcommand, a second daemon) is waited
 * for by busy_timeout, not retried here. */
int
sq_tx(struct store *s, store_tx_fn fn, void *arg)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	if ((rc = sq_xexec(q->db, "BEGIN IMMEDIATE")) == 0) {
		if ((rc = fn(s, arg)) >= 0)
			rc = sq_xexec(q->db, "COMMIT");
		if (rc < 0 && !sqlite3_get_autocommit(q->db))
			(void)sq_xexec(q->db, "ROLLBACK");
	}
	sq_unlock(q);
	return rc < 0 ? rc : 0;
}

/* prepare (or take the kept statement, store_sqlite_cache.c) and bind: fmt letters s (text, NULL allowed), i (int64),
 * b (blob: pointer, int length) */
sqlite3_stmt *
sq_prep(sqlite3 *db, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int i, rc = SQLITE_OK;

	if ((st = sq_stmt_take(db, sql)) == NULL)
		return NULL;
	va_start(ap, fmt);
	for (i = 0; fmt && fmt[i] && rc == SQLITE_OK; i++) {
		if (fmt[i] == 's') {
			const char *v = va_arg(ap, const char *);
			rc = v ? sqlite3_bind_text(st, i + 1, v, -1, SQLITE_TRANSIENT)
			       : sqlite3_bind_null(st, i + 1);
		} else if (fmt[i] == 'i') {
			rc = sqlite3_bind_int64(st, i + 1, va_arg(ap, int64_t));
		} else if (fmt[i] == 'b') {
			const void *p = va_arg(ap, const void *);
			int n = va_arg(ap, int);
			rc = sqlite3_bind_blob(st, i + 1, p, n, SQLITE_TRANSIENT);
		}
	}
	va_end(ap);
	if (rc != SQLITE_OK) {
		log_warnx("store: bind: %s", sqlite3_errmsg(db));
		sq_stmt_release(st);
		return NULL;
	}
	return st;
}

/* run a statement that returns no row; releases it */
int
sq_run(sqlite3 *db, sqlite3_stmt *st)
{
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sqlite3_step(st);
	sq_stmt_release(st);
	if (rc == SQLITE_CONSTRAINT)
		return -EEXIST;
	if (rc != SQLITE_DONE) {
		log_warnx("store: step: %s", sqlite3_errmsg(db));
		return -EIO;
	}
	return 0;
}

int
sq_step_row(sqlite3 *db, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	log_warnx("store: step: %s", sqlite3_errmsg(db));
	return -EIO;
}

/* The tail every list query shares: a failed prepare is -EIO, each row
 * becomes row()'s object (NULL: out of memory), and a step error or a
 * failed append drops what was built so a caller never sees half a list. */
int
sq_list(struct sq *q, sqlite3_stmt *st, sq_row_fn row, void *ctx, json_t **out)
{
	json_t *arr, *o;
	int rc;

	if (st == NULL)
		return -EIO;
	if ((arr = json_array()) == NULL) {
		sq_stmt_release(st);
		return -ENOMEM;
	}
	while ((rc = sq_step_row(q->db, st)) == 1) {
		/* json_array_append_new drops o itself when it fails */
		if ((o = row(q, st, ctx)) == NULL || json_array_append_new(arr, o) < 0) {
			rc = -ENOMEM;
			break;
		}
	}
	sq_stmt_release(st);
	if (rc < 0) {
		json_decref(arr);
		return rc;
	}
	*out = arr;
	return 0;
}

void
sq_col_copy(sqlite3_stmt *st, int i, char *dst, size_t cap)
{
	const unsigned char *t = sqlite3_column_text(st, i);

	snprintf(dst, cap, "%s", t ? (const char *)t : "");
}

/* a stored JSON text as a value (stored texts were validated on the way in) */
json_t *
sq_col_json(sqlite3_stmt *st, int i)
{
	const char *t = (const char *)sqlite3_column_text(st, i);
	json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;

	return v ? v : json_null();
}

static int
migrate_tx(struct store *s, void *arg)
{
	sqlite3 *db = SQ(s)->db;
	sqlite3_stmt *st;
	int v = 0, rc;
	char sql[64];

	st = sq_prep(db, "PRAGMA user_version", NULL);
	if (st && sq_step_row(db, st) == 1)
		v = sqlite3_column_int(st, 0);
	sq_stmt_release(st);
	if (v > NMIGRATIONS) {
		log_warnx("store: schema version %d is newer than this build (%d)", v, NMIGRATIONS);
		return -EPROTO;
	}
	for (; v < NMIGRATIONS; v++) {
		if ((rc = sq_xexec(db, migrations[v])) < 0)
			return rc;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if ((rc = sq_xexec(db, sql)) < 0)
			return rc;
		log_info("store: migrated schema to version %d", v + 1);
	}
	return 0;
}

/* ---- credentials ---- */

struct cred_ctx {
	const char *name, *id;
	const uint8_t *hash;
	const struct key_quota *q;
};

static int
apikey_add_tx(struct store *s, void *arg)
{
	struct cred_ctx *x = arg;
	sqlite3 *db = SQ(s)->db;
	int64_t now = now_unix();
	int rc;

	if ((rc = sq_run(db, sq_prep(db, "INSERT OR IGNORE INTO principals VALUES (?,?)",
	    "si", x->name, now))) < 0)
		return rc;
	if ((rc = sq_run(db, sq_prep(db, "INSERT INTO api_keys (id, principal, hash, created_at,"
	    " max_sandboxes, max_memory_mb, creates_per_minute) VALUES (?,?,?,?,?,?,?)",
	    "ssbiiii", x->id, x->name, x->hash, STORE_HASH_LEN, now, x->q->max_sandboxes,
	    x->q->max_memory_mb, x->q->creates_per_minute))) < 0)
		return rc;
	return sq_run(db, sq_prep(db, "INSERT INTO audit (ts,principal,action,target) "
	    "VALUES (?,?,'apikey.add',?)", "iss", now, x->name, x->id));
}

static int
sq_apikey_add(struct store *s, const char *principal, const char *key_id,
    const uint8_t hash[STORE_HASH_LEN], const struct key_quota *q)
{
	static const struct key_quota none;
	struct cred_ctx x = { principal, key_id, hash, q ? q : &none };

	return sq_tx(s, apikey_add_tx, &x);
}

static json_t *
apikey_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char tc[RFC3339_LEN + 1], tr[RFC3339_LEN + 1];
	bool revoked = sqlite3_column_type(st, 3) != SQLITE_NULL;

	rfc3339_format(sqlite3_column_int64(st, 2), tc);
	if (revoked)
		rfc3339_format(sqlite3_column_int64(st, 3), tr);
	return json_pack("{s:s,s:s,s:s,s:s?,s:{s:I,s:I,s:I}}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "principal", (const char *)sqlite3_column_text(st, 1),
	    "created_at", tc, "revoked_at", revoked ? tr : NULL,
	    "quota", "max_sandboxes", (json_int_t)sqlite3_column_int64(st, 4),
	    "max_memory_mb", (json_int_t)sqlite3_column_int64(st, 5),
	    "creates_per_minute", (json_int_t)sqlite3_column_int64(st, 6));
}

static int
sq_apikey_list(struct store *s, json_t **out)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_list(q, sq_prep(q->db, "SELECT id, principal, created_at, revoked_at,"
	    " max_sandboxes, max_memory_mb, creates_per_minute FROM api_keys"
	    " ORDER BY principal, created_at, id", NULL), apikey_row, NULL, out);
	sq_unlock(q);
	return rc;
}

struct revoke_ctx {
	const char *who;
	int n;
};

static int
apikey_revoke_tx(struct store *s, void *arg)
{
	struct revoke_ctx *x = arg;
	sqlite3 *db = SQ(s)->db;
	int rc;

	if ((rc = sq_run(db, sq_prep(db, "UPDATE api_keys SET revoked_at = ?1 WHERE"
	    " (id = ?2 OR principal = ?2) AND revoked_at IS NULL", "is", now_unix(), x->who))) < 0)
		return rc;
	if ((x->n = sqlite3_changes(db)) == 0)
		return 0;
	return sq_run(db, sq_prep(db, "INSERT INTO audit (ts,action,target,detail) "
	    "VALUES (?,'apikey.revoke',?,?)", "isi", now_unix(), x->who, (int64_t)x->n));
}

static int
sq_apikey_revoke(struct store *s, const char *id_or_principal)
{
	struct revoke_ctx x = { id_or_principal, 0 };
	int rc = sq_tx(s, apikey_revoke_tx, &x);

	return rc < 0 ? rc : x.n;
}

static int
lookup_cred(struct sq *q, const char *sql, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, sql, "s", id);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1 && sqlite3_column_bytes(st, 1) == STORE_HASH_LEN) {
		sq_col_copy(st, 0, name, SPACE_ID_MAX + 1);
		memcpy(hash, sqlite3_column_blob(st, 1), STORE_HASH_LEN);
		rc = 0;
	} else if (rc >= 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
out:
	sq_unlock(q);
	return rc;
}

static int
sq_apikey_lookup(struct store *s, const char *key_id, char principal[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	/* a revoked key is refused from the next request on: nothing caches it */
	return lookup_cred(SQ(s), "SELECT principal, hash FROM api_keys WHERE id = ?"
	    " AND revoked_at IS NULL", key_id, principal, hash);
}

static int
sq_worker_cred_lookup(struct store *s, const char *cred_id, char worker[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	return lookup_cred(SQ(s), "SELECT id, cred_hash FROM workers WHERE cred_id = ?",
	    cred_id, worker, hash);
}

static int
worker_add_tx(struct store *s, void *arg)
{
	struct cred_ctx *x = arg;
	sqlite3 *db = SQ(s)->db;
	int64_t now = now_unix();
	int rc;

	if ((rc = sq_run(db, sq_prep(db, "INSERT INTO workers (id, cred_id, cred_hash, created_at) "
	    "VALUES (?,?,?,?)", "ssbi", x->name, x->id, x->hash, STORE_HASH_LEN, now))) < 0)
		return rc;
	return sq_run(db, sq_prep(db, "INSERT INTO audit (ts,action,target) "
	    "VALUES (?,'worker.add',?)", "is", now, x->name));
}

static int
sq_worker_add(struct store *s, const char *worker, const char *cred_id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct cred_ctx x = { worker, cred_id, hash, NULL };

	return sq_tx(s, worker_add_tx, &x);
}

/* ---- keys ---- */

struct key_ctx {
	const struct key_row *k;
	const char *pub;
	int64_t old_not_after;
};

static int
key_add_tx(struct store *s, void *arg)
{
	struct key_ctx *x = arg;
	sqlite3 *db = SQ(s)->db;
	int64_t now = now_unix();
	int rc;

	/* every key still open stops being valid once its last token can
	 * have expired: tokens signed up to the switch live 120 s + skew */
	if ((rc = sq_run(db, sq_prep(db, "UPDATE signing_keys SET not_after = ?"
	    " WHERE not_after = 0", "i", x->old_not_after))) < 0)
		return rc;
	if ((rc = sq_run(db, sq_prep(db, "INSERT INTO signing_keys VALUES (?,?,?,?,?,?)",
	    "ssiiii", x->k->kid, x->pub, x->k->activate_at, x->k->not_before, x->k->not_after,
	    now))) < 0)
		return rc;
	if ((rc = sq_run(db, sq_prep(db, "UPDATE meta SET v = v + 1 WHERE k = 'keys_serial'",
	    NULL))) < 0)
		return rc;
	return sq_run(db, sq_prep(db, "INSERT INTO audit (ts,action,target) "
	    "VALUES (?,'keys.add',?)", "is", now, x->k->kid));
}

static int
sq_key_add(struct store *s, const struct key_row *k, int64_t old_not_after)
{
	char pub[PASERK_K4_PUBLIC_LEN + 1];
	struct key_ctx x = { k, pub, old_not_after };
	int rc;

	if ((rc = paserk_k4_public_encode(k->pk, pub)) < 0)
		return rc;
	return sq_tx(s, key_add_tx, &x);
}

static int
sq_keys_list(struct store *s, struct key_row *rows, size_t cap, size_t *n)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	*n = 0;
	sq_lock(q);
	/* the newest keys that may still be in use, newest first */
	st = sq_prep(q->db, "SELECT kid, public, activate_at, not_before, not_after FROM signing_keys"
	    " WHERE not_after = 0 OR not_after >= ? ORDER BY activate_at DESC, created DESC LIMIT ?",
	    "ii", now_unix(), (int64_t)cap);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	while ((rc = sq_step_row(q->db, st)) == 1 && *n < cap) {
		struct key_row *k = &rows[*n];
		sq_col_copy(st, 0, k->kid, sizeof(k->kid));
		if (paserk_k4_public_decode((const char *)sqlite3_column_text(st, 1), k->pk) < 0) {
			rc = -EIO;
			break;
		}
		k->activate_at = sqlite3_column_int64(st, 2);
		k->not_before = sqlite3_column_int64(st, 3);
		k->not_after = sqlite3_column_int64(st, 4);
		(*n)++;
	}
	sq_stmt_release(st);
out:
	sq_unlock(q);
	return rc < 0 ? rc : 0;
}

static int
sq_keys_changed(struct store *s, int64_t *stamp)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc = -EIO;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT v FROM meta WHERE k = 'keys_serial'", NULL);
	if (st && sq_step_row(q->db, st) == 1) {
		*stamp = sqlite3_column_int64(st, 0);
		rc = 0;
	}
	sq_stmt_release(st);
	sq_unlock(q);
	return rc;
}

static int
sq_bundle_latest(struct store *s, uint64_t *version, char **token)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	*version = 0;
	*token = NULL;
	sq_lock(q);
	st = sq_prep(q->db, "SELECT version, token FROM bundles ORDER BY version DESC LIMIT 1", NULL);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		*version = (uint64_t)sqlite3_column_int64(st, 0);
		*token = strdup((const char *)sqlite3_column_text(st, 1));
		rc = *token ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sq_stmt_release(st);
out:
	sq_unlock(q);
	return rc;
}

static int
sq_bundle_add(struct store *s, uint64_t version, const char *token)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO bundles VALUES (?,?,?)", "isi",
	    (int64_t)version, token, now_unix()));
	sq_unlock(q);
	return rc;
}

static int
sq_audit(struct store *s, const char *principal, const char *action, const char *target,
    const char *detail)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,principal,action,target,detail)"
	    " VALUES (?,?,?,?,?)", "issss", now_unix(), principal, action, target, detail));
	sq_unlock(q);
	return rc;
}

static int
sq_audit_prune(struct store *s, int64_t before, int limit)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "DELETE FROM audit WHERE id IN (SELECT id FROM audit"
	    " WHERE ts < ? ORDER BY id LIMIT ?)", "ii", before, (int64_t)limit));
	if (rc == 0)
		rc = sqlite3_changes(q->db);
	sq_unlock(q);
	return rc;
}

static void
ck_lock(void *arg)
{
	sq_lock(arg);
}

static void
ck_unlock(void *arg)
{
	sq_unlock(arg);
}

static void
sq_close(struct store *s)
{
	struct sq *q = SQ(s);

	if (q == NULL)
		return;
	db_ckpt_stop(&q->ckpt);
	(void)sq_stmt_clear(q->db);
	sqlite3_close(q->db);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static const struct store_ops sqlite_ops = {
	.close = sq_close,
	.apikey_add = sq_apikey_add,
	.apikey_lookup = sq_apikey_lookup,
	.apikey_list = sq_apikey_list,
	.apikey_revoke = sq_apikey_revoke,
	.worker_add = sq_worker_add,
	.worker_cred_lookup = sq_worker_cred_lookup,
	.sandbox_create = lc_sandbox_create,
	.sandbox_get = sq_sandbox_get,
	.sandbox_list = sq_sandbox_list,
	.sandbox_kill = lc_sandbox_kill,
	.sandbox_current = sq_sandbox_current,
	.worker_register = lc_worker_register,
	.worker_heartbeat = sq_worker_heartbeat,
	.assignments_after = sq_assignments_after,
	.execution_status = lc_execution_status,
	.workers_reap = sq_workers_reap,
	.workers_failover = lc_workers_failover,
	.worker_counts = sq_worker_counts,
	.workers_list = sq_workers_list,
	.key_add = sq_key_add,
	.keys_list = sq_keys_list,
	.keys_changed = sq_keys_changed,
	.bundle_latest = sq_bundle_latest,
	.bundle_add = sq_bundle_add,
	.op_start = lc_op_start,
	.snapshot_forget = lc_snapshot_forget,
	.ops_drive = lc_ops_drive,
	.snapshot_report = lc_snapshot_report,
	.checkpoint_report = lc_checkpoint_report,
	.snapshots_list = sq_snapshots_list,
	.sandbox_set_timeouts = sq_sandbox_set_timeouts,
	.sandbox_touch = sq_sandbox_touch,
	.route_hold = sq_route_hold,
	.timeouts_due = sq_timeouts_due,
	.audit = sq_audit,
	.audit_prune = sq_audit_prune,
	.archive_seen = st_archive_seen,
	.archives_collectable = st_archives_collectable,
	.template_refs = sq_template_refs,
	.archive_worker_refs = sq_archive_worker_refs,
};

struct store *
store_sqlite_open(const char *path)
{
	struct sq *q;
	int rc;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->base.ops = &sqlite_ops;
	q->base.rows = &sq_rows;
	pthread_mutex_init(&q->mu, NULL);
	/* API key and worker credential hashes: 0600, with -wal and -shm */
	if ((rc = db_file_private(path)) < 0) {
		log_warnx("store: %s: %s", path, strerror(-rc));
		goto fail;
	}
	rc = sqlite3_open_v2(path, &q->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL);
	if (rc != SQLITE_OK) {
		log_warnx("store: open %s: %s", path, q->db ? sqlite3_errmsg(q->db) : "?");
		goto fail;
	}
	sqlite3_busy_timeout(q->db, SQ_BUSY_MS);
	/* WAL lets the subcommands write while the daemon runs; FULL makes
	 * every acknowledged commit survive power loss, not only kill -9 */
	if (sq_xexec(q->db, "PRAGMA journal_mode = WAL") < 0 ||
	    sq_xexec(q->db, "PRAGMA synchronous = FULL") < 0 ||
	    sq_xexec(q->db, "PRAGMA foreign_keys = ON") < 0)
		goto fail;
	if (sq_tx(&q->base, migrate_tx, NULL) < 0)
		goto fail;
	/* the log's blocks made once: a commit does not grow the file */
	if ((rc = db_wal_presize(q->db, path)) < 0)
		log_warnx("store: %s-wal not grown ahead: %s", path, strerror(-rc));
	/* its checkpoints in idle moments, not in a create's commit */
	if ((rc = db_ckpt_start(&q->ckpt, q->db, ck_lock, ck_unlock, q,
	    "INSERT OR REPLACE INTO meta (k, v) VALUES ('wal_restart', 0)", SQ_BUSY_MS)) < 0)
		log_warnx("store: checkpoints left to SQLite: %s", strerror(-rc));
	/* nothing prepared before a schema change is kept past it */
	(void)sq_stmt_clear(q->db);
	return &q->base;
fail:
	sq_close(&q->base);
	errno = EIO;
	return NULL;
}

struct store *
store_open(const char *spec)
{
	if (strncmp(spec, "sqlite:", 7) == 0)
		return store_sqlite_open(spec + 7);
	if (strncmp(spec, "postgres://", 11) == 0 || strncmp(spec, "postgresql://", 13) == 0)
		return store_pg_open(spec);
	if (strstr(spec, "://") != NULL || strncmp(spec, "postgres", 8) == 0) {
		errno = ENOTSUP;
		return NULL;
	}
	return store_sqlite_open(spec);
}
