/* The SQLite backend of the store (store.h): the embedded default.
 *
 * One connection per process, serialized by a mutex, so that a transaction
 * of one thread never interleaves with another's statements. Other
 * processes (the `apikey add`, `worker add`, `keys rotate` subcommands)
 * share the file through WAL and busy_timeout. Every multi-row change runs
 * in BEGIN IMMEDIATE ... COMMIT: the write lock is taken at BEGIN, so the
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
#include "util.h"

void (*store_observe)(double seconds);
void (*store_op_observe)(const char *kind, const char *result);


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

int sq_begin(sqlite3 *db)    { return sq_xexec(db, "BEGIN IMMEDIATE"); }
int sq_commit(sqlite3 *db)   { return sq_xexec(db, "COMMIT"); }
void sq_rollback(sqlite3 *db)
{
	if (!sqlite3_get_autocommit(db))
		(void)sq_xexec(db, "ROLLBACK");
}

/* prepare and bind: fmt letters s (text, NULL allowed), i (int64),
 * b (blob: pointer, int length) */
sqlite3_stmt *
sq_prep(sqlite3 *db, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *st = NULL;
	va_list ap;
	int i, rc = SQLITE_OK;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_warnx("store: prepare: %s", sqlite3_errmsg(db));
		return NULL;
	}
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
		sqlite3_finalize(st);
		return NULL;
	}
	return st;
}

/* run a statement that returns no row; finalizes it */
int
sq_run(sqlite3 *db, sqlite3_stmt *st)
{
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sqlite3_step(st);
	sqlite3_finalize(st);
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
		sqlite3_finalize(st);
		return -ENOMEM;
	}
	while ((rc = sq_step_row(q->db, st)) == 1) {
		/* json_array_append_new drops o itself when it fails */
		if ((o = row(q, st, ctx)) == NULL || json_array_append_new(arr, o) < 0) {
			rc = -ENOMEM;
			break;
		}
	}
	sqlite3_finalize(st);
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
migrate(sqlite3 *db)
{
	sqlite3_stmt *st;
	int v = 0, rc = 0;
	char sql[64];

	if (sq_begin(db) < 0)
		return -EIO;
	st = sq_prep(db, "PRAGMA user_version", NULL);
	if (st && sq_step_row(db, st) == 1)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (v > NMIGRATIONS) {
		log_warnx("store: schema version %d is newer than this build (%d)", v, NMIGRATIONS);
		rc = -EPROTO;
		goto out;
	}
	for (; v < NMIGRATIONS; v++) {
		if ((rc = sq_xexec(db, migrations[v])) < 0)
			goto out;
		snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", v + 1);
		if ((rc = sq_xexec(db, sql)) < 0)
			goto out;
		log_info("store: migrated schema to version %d", v + 1);
	}
	rc = sq_commit(db);
out:
	if (rc < 0)
		sq_rollback(db);
	return rc;
}

/* ---- credentials ---- */

static int
sq_apikey_add(struct store *s, const char *principal, const char *key_id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct sq *q = SQ(s);
	int64_t now = now_unix();
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT OR IGNORE INTO principals VALUES (?,?)",
	    "si", principal, now))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO api_keys VALUES (?,?,?,?)",
	    "ssbi", key_id, principal, hash, STORE_HASH_LEN, now))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,principal,action,target) "
	    "VALUES (?,?,'apikey.add',?)", "iss", now, principal, key_id))) < 0)
		goto out;
	rc = sq_commit(q->db);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
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
	sqlite3_finalize(st);
out:
	sq_unlock(q);
	return rc;
}

static int
sq_apikey_lookup(struct store *s, const char *key_id, char principal[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	return lookup_cred(SQ(s), "SELECT principal, hash FROM api_keys WHERE id = ?",
	    key_id, principal, hash);
}

static int
sq_worker_cred_lookup(struct store *s, const char *cred_id, char worker[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	return lookup_cred(SQ(s), "SELECT id, cred_hash FROM workers WHERE cred_id = ?",
	    cred_id, worker, hash);
}

static int
sq_worker_add(struct store *s, const char *worker, const char *cred_id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct sq *q = SQ(s);
	int64_t now = now_unix();
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO workers (id, cred_id, cred_hash, created_at) "
	    "VALUES (?,?,?,?)", "ssbi", worker, cred_id, hash, STORE_HASH_LEN, now))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,action,target) "
	    "VALUES (?,'worker.add',?)", "is", now, worker))) < 0)
		goto out;
	rc = sq_commit(q->db);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
}

/* ---- sandboxes ---- */

#define SANDBOX_SELECT \
	"SELECT s.id, s.state, s.template, s.resources, s.timeouts, s.metadata, s.created_at," \
	" e.generation, e.worker, e.substrate, e.activation, e.resident, e.state, w.endpoint," \
	" s.snapshot" \
	" FROM sandboxes s" \
	" LEFT JOIN executions e ON e.sandbox = s.id AND e.generation =" \
	"   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)" \
	" LEFT JOIN workers w ON w.id = e.worker"

static json_t *
sandbox_row(sqlite3_stmt *st)
{
	char ts[RFC3339_LEN + 1];
	json_t *o, *ex = json_null();
	const char *ep;

	rfc3339_format(sqlite3_column_int64(st, 6), ts);
	if (sqlite3_column_type(st, 7) != SQLITE_NULL) {
		ep = (const char *)sqlite3_column_text(st, 13);
		ex = json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s?}",
		    "generation", (json_int_t)sqlite3_column_int64(st, 7),
		    "worker", (const char *)sqlite3_column_text(st, 8),
		    "substrate", (const char *)sqlite3_column_text(st, 9),
		    "activation", (json_int_t)sqlite3_column_int64(st, 10),
		    "resident", (const char *)sqlite3_column_text(st, 11),
		    "state", (const char *)sqlite3_column_text(st, 12),
		    "endpoint", ep);
	}
	o = json_pack("{s:s,s:s,s:s,s:o,s:o,s:o,s:s,s:o,s:s?}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "state", (const char *)sqlite3_column_text(st, 1),
	    "template", (const char *)sqlite3_column_text(st, 2),
	    "resources", sq_col_json(st, 3),
	    "timeouts", sq_col_json(st, 4),
	    "metadata", sq_col_json(st, 5),
	    "created_at", ts,
	    "execution", ex ? ex : json_null(),
	    "snapshot", (const char *)sqlite3_column_text(st, 14));
	return o;
}

static json_t *
history_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char ts[RFC3339_LEN + 1], te[RFC3339_LEN + 1];
	bool ended = sqlite3_column_type(st, 7) != SQLITE_NULL;

	rfc3339_format(sqlite3_column_int64(st, 6), ts);
	if (ended)
		rfc3339_format(sqlite3_column_int64(st, 7), te);
	return json_pack("{s:I,s:s,s:s,s:I,s:s,s:s,s:s,s:s?}",
	    "generation", (json_int_t)sqlite3_column_int64(st, 0),
	    "worker", (const char *)sqlite3_column_text(st, 1),
	    "substrate", (const char *)sqlite3_column_text(st, 2),
	    "activation", (json_int_t)sqlite3_column_int64(st, 3),
	    "resident", (const char *)sqlite3_column_text(st, 4),
	    "state", (const char *)sqlite3_column_text(st, 5),
	    "created_at", ts, "ended_at", ended ? te : NULL);
}

/* "history": every execution of the sandbox, oldest first */
static int
sandbox_history(struct sq *q, json_t *o)
{
	sqlite3_stmt *st;
	json_t *arr;
	int rc;

	if (o == NULL)
		return -ENOMEM;
	st = sq_prep(q->db, "SELECT generation, worker, substrate, activation, resident, state,"
	    " created_at, ended_at FROM executions WHERE sandbox = ? ORDER BY generation", "s",
	    json_string_value(json_object_get(o, "id")));
	if ((rc = sq_list(q, st, history_row, NULL, &arr)) < 0)
		return rc;
	return json_object_set_new(o, "history", arr) < 0 ? -ENOMEM : 0;
}

/* the sandbox object; caller holds the lock */
int
sq_sandbox_load(struct sq *q, const char *owner, const char *id, json_t **out)
{
	sqlite3_stmt *st = sq_prep(q->db, SANDBOX_SELECT " WHERE s.owner = ? AND s.id = ?",
	    "ss", owner, id);
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		*out = sandbox_row(st);
		rc = *out ? 0 : -ENOMEM;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sqlite3_finalize(st);
	if (rc == 0 && (rc = sandbox_history(q, *out)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* loaded inside the transaction, so the answer is what gets committed */
int
sq_commit_sandbox(struct sq *q, const char *owner, const char *id, json_t **out)
{
	int rc;

	if ((rc = sq_sandbox_load(q, owner, id, out)) < 0)
		return rc;
	if ((rc = sq_commit(q->db)) < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return rc;
}

/* Place a new execution of sandbox on a worker: the next generation, an
 * install assignment. Caller is inside a write transaction, which is what
 * makes MAX(generation) + 1 unique and increasing: no other writer can
 * commit between the read and the insert. */
int
sq_place_execution(struct sq *q, const char *sandbox, const char *pinned, const char *prefer,
    const char *spec, const char **why, int64_t *gen_out, char worker_out[SPACE_ID_MAX + 1])
{
	struct worker_load wl[64];
	sqlite3_stmt *st;
	size_t n = 0, i;
	int64_t gen = 0, now = now_unix();
	int rc, pick = -1;

	/* the preferred worker sorts first so that it is among the 64 */
	st = sq_prep(q->db,
	    "SELECT w.id, COALESCE(w.incarnation,''), w.capacity, w.state = 'live',"
	    " (SELECT COUNT(*) FROM executions e WHERE e.worker = w.id AND e.resident = w.incarnation"
	    "   AND e.state IN ('pending','starting','serving'))"
	    " FROM workers w WHERE (?1 IS NULL AND w.state = 'live' AND w.incarnation IS NOT NULL)"
	    "   OR w.id = ?1 ORDER BY w.id IS ?2 DESC, 5, w.id LIMIT 64", "ss", pinned, prefer);
	if (st == NULL)
		return -EIO;
	while ((rc = sq_step_row(q->db, st)) == 1) {
		sq_col_copy(st, 0, wl[n].id, sizeof(wl[n].id));
		sq_col_copy(st, 1, wl[n].incarnation, sizeof(wl[n].incarnation));
		wl[n].capacity = sqlite3_column_int64(st, 2);
		wl[n].live = sqlite3_column_int(st, 3) && wl[n].incarnation[0];
		wl[n].active = sqlite3_column_int64(st, 4);
		n++;
	}
	sqlite3_finalize(st);
	if (rc < 0)
		return rc;
	/* a preferred worker (resume: the previous one, its data is near) is
	 * taken when it could be pinned; otherwise the ordinary policy */
	if (pinned == NULL && prefer != NULL) {
		for (i = 0; i < n; i++)
			if (strcmp(wl[i].id, prefer) == 0 && wl[i].live && wl[i].active < wl[i].capacity)
				pick = (int)i;
	}
	if (pick < 0)
		pick = scheduler_pick(wl, n, pinned, why);
	if (pick < 0)
		return pick;

	st = sq_prep(q->db, "SELECT COALESCE(MAX(generation), 0) + 1 FROM executions WHERE sandbox = ?",
	    "s", sandbox);
	if (st == NULL)
		return -EIO;
	if (sq_step_row(q->db, st) == 1)
		gen = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	if (gen < 1)
		return -EIO;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO executions (sandbox, generation, worker,"
	    " substrate, activation, resident, state, created_at, updated_at)"
	    " VALUES (?,?,?,'jail',1,?,'pending',?,?)", "sissii", sandbox, gen, wl[pick].id,
	    wl[pick].incarnation, now, now))) < 0)
		return rc;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO assignments (worker, sandbox, generation,"
	    " action, spec, created_at) VALUES (?,?,?,'install',?,?)", "ssisi",
	    wl[pick].id, sandbox, gen, spec, now))) < 0)
		return rc;
	if (gen_out)
		*gen_out = gen;
	if (worker_out)
		snprintf(worker_out, SPACE_ID_MAX + 1, "%s", wl[pick].id);
	return 0;
}

char *
sq_spec_json(const char *template_, const char *resources, const char *snapshot)
{
	json_t *res = json_loads(resources, 0, NULL);
	json_t *o = json_pack("{s:s,s:o,s:s?}", "template", template_, "resources",
	    res ? res : json_object(), "snapshot", snapshot);
	char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

	json_decref(o);
	return s;
}

static int
sq_sandbox_create(struct store *s, const char *owner, const char *id,
    const struct sandbox_spec *sp, json_t **out, const char **why)
{
	struct sq *q = SQ(s);
	int64_t now = now_unix();
	char *spec = sq_spec_json(sp->template_, sp->resources, NULL);
	int rc;

	if (spec == NULL)
		return -ENOMEM;
	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO sandboxes (id, owner, state, template,"
	    " resources, timeouts, metadata, pinned_worker, created_at)"
	    " VALUES (?,?,'creating',?,?,?,?,?,?)", "sssssssi", id, owner, sp->template_,
	    sp->resources, sp->timeouts, sp->metadata, sp->pinned, now))) < 0)
		goto out;
	if ((rc = sq_place_execution(q, id, sp->pinned, NULL, spec, why, NULL, NULL)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,principal,action,target) "
	    "VALUES (?,?,'sandbox.create',?)", "iss", now, owner, id))) < 0)
		goto out;
	rc = sq_commit_sandbox(q, owner, id, out);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	free(spec);
	return rc;
}

static int
sq_sandbox_get(struct store *s, const char *owner, const char *id, json_t **out)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_sandbox_load(q, owner, id, out);
	sq_unlock(q);
	return rc;
}

/* a list entry is the whole sandbox object, history included */
static json_t *
sandbox_list_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	json_t *o = sandbox_row(st);

	if (o != NULL && sandbox_history(q, o) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int
sq_sandbox_list(struct store *s, const char *owner, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, SANDBOX_SELECT " WHERE s.owner = ? ORDER BY s.created_at, s.id",
	    "s", owner);
	rc = sq_list(q, st, sandbox_list_row, NULL, out);
	sq_unlock(q);
	return rc;
}

static int
sq_sandbox_kill(struct store *s, const char *owner, const char *id, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int64_t now = now_unix(), gen = 0;
	char worker[SPACE_ID_MAX + 1] = "", state[STORE_STATE_MAX + 1] = "";
	char *spec = NULL;
	const char *abandoned = NULL;
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	st = sq_prep(q->db, "SELECT s.template, s.resources, e.generation, e.worker, e.state"
	    " FROM sandboxes s LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    " (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " WHERE s.owner = ? AND s.id = ?", "ss", owner, id);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		/* a kill keeps nothing: the layer is not archived */
		spec = strdup("{\"snapshot\":false}");
		gen = sqlite3_column_int64(st, 2);
		sq_col_copy(st, 3, worker, sizeof(worker));
		sq_col_copy(st, 4, state, sizeof(state));
	}
	sqlite3_finalize(st);
	if (rc == 0)
		rc = -ENOENT;
	if (rc < 0)
		goto out;
	if (spec == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	/* a kill wins over a lifecycle operation in progress: the operation
	 * is abandoned and its lease released in this same transaction, so
	 * no later step of it can place an execution for a killed sandbox */
	if ((rc = sq_ops_abandon(q, id, &abandoned)) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'killed' WHERE id = ?",
	    "s", id))) < 0)
		goto out;
	if (gen > 0 && (strcmp(state, "pending") == 0 || strcmp(state, "starting") == 0 ||
	    strcmp(state, "serving") == 0)) {
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'retiring',"
		    " updated_at = ? WHERE sandbox = ? AND generation = ?", "isi", now, id, gen))) < 0)
			goto out;
		if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO assignments (worker, sandbox,"
		    " generation, action, spec, created_at) VALUES (?,?,?,'retire',?,?)",
		    "ssisi", worker, id, gen, spec, now))) < 0)
			goto out;
	}
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,principal,action,target) "
	    "VALUES (?,?,'sandbox.kill',?)", "iss", now, owner, id))) < 0)
		goto out;
	rc = sq_commit_sandbox(q, owner, id, out);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	free(spec);
	if (rc == 0 && abandoned && store_op_observe)
		store_op_observe(abandoned, "abandoned");
	return rc;
}

static int
sq_sandbox_current(struct store *s, const char *owner, const char *id, struct exec_view *v)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	memset(v, 0, sizeof(*v));
	sq_lock(q);
	st = sq_prep(q->db, "SELECT s.state, e.generation, e.worker, e.substrate, e.activation,"
	    " e.resident, e.state, w.endpoint, w.state FROM sandboxes s"
	    " LEFT JOIN executions e ON e.sandbox = s.id AND e.generation ="
	    "   (SELECT MAX(generation) FROM executions WHERE sandbox = s.id)"
	    " LEFT JOIN workers w ON w.id = e.worker"
	    " WHERE s.owner = ? AND s.id = ?", "ss", owner, id);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, v->sandbox_state, sizeof(v->sandbox_state));
		snprintf(v->route.sandbox, sizeof(v->route.sandbox), "%s", id);
		if (sqlite3_column_type(st, 1) != SQLITE_NULL) {
			v->route.generation = (uint64_t)sqlite3_column_int64(st, 1);
			sq_col_copy(st, 2, v->route.worker, sizeof(v->route.worker));
			sq_col_copy(st, 3, v->route.substrate, sizeof(v->route.substrate));
			v->route.activation = (uint32_t)sqlite3_column_int64(st, 4);
			sq_col_copy(st, 5, v->route.resident, sizeof(v->route.resident));
			sq_col_copy(st, 6, v->state, sizeof(v->state));
			sq_col_copy(st, 7, v->endpoint, sizeof(v->endpoint));
			sq_col_copy(st, 8, v->worker_state, sizeof(v->worker_state));
		}
		rc = 0;
	} else if (rc == 0) {
		rc = -ENOENT;
	}
	sqlite3_finalize(st);
out:
	sq_unlock(q);
	return rc;
}

/* ---- workers ---- */

static int64_t
worker_revision(struct sq *q, const char *worker)
{
	sqlite3_stmt *st = sq_prep(q->db, "SELECT COALESCE(MAX(revision), 0) FROM assignments"
	    " WHERE worker = ?", "s", worker);
	int64_t r = -EIO;

	if (st && sq_step_row(q->db, st) == 1)
		r = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return r;
}

/* A worker that registers with a new incarnation was re-created: whatever
 * ran under the old incarnation is gone. Its executions fail, and each
 * sandbox that was live on one gets a new execution (next generation) in
 * the same transaction. */
static int
reassign_lost(struct sq *q, const char *worker, const char *old_inc, int *reassigned)
{
	sqlite3_stmt *st;
	char (*ids)[SPACE_ID_MAX + 1] = NULL;
	char **specs = NULL, **pins = NULL;
	size_t n = 0, cap = 0, i;
	int64_t now = now_unix();
	int rc;

	st = sq_prep(q->db, "SELECT e.sandbox, s.template, s.resources, s.pinned_worker"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.worker = ? AND e.resident = ? AND e.state IN ('pending','starting','serving')"
	    " AND s.state IN ('creating','running')"
	    " AND e.generation = (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)",
	    "ss", worker, old_inc);
	if (st == NULL)
		return -EIO;
	while ((rc = sq_step_row(q->db, st)) == 1) {
		if (n == cap) {
			size_t nc = cap ? cap * 2 : 16;
			void *a = realloc(ids, nc * sizeof(*ids));
			if (a == NULL) { rc = -ENOMEM; break; }
			ids = a;
			if ((a = realloc(specs, nc * sizeof(*specs))) == NULL) { rc = -ENOMEM; break; }
			specs = a;
			if ((a = realloc(pins, nc * sizeof(*pins))) == NULL) { rc = -ENOMEM; break; }
			pins = a;
			cap = nc;
		}
		sq_col_copy(st, 0, ids[n], sizeof(ids[n]));
		specs[n] = sq_spec_json((const char *)sqlite3_column_text(st, 1),
		    (const char *)sqlite3_column_text(st, 2), NULL);
		pins[n] = sqlite3_column_type(st, 3) == SQLITE_NULL ? NULL :
		    strdup((const char *)sqlite3_column_text(st, 3));
		n++;
	}
	sqlite3_finalize(st);
	if (rc < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'failed',"
	    " error = 'worker re-created', updated_at = ?1, ended_at = ?1 WHERE worker = ?2 AND resident = ?3"
	    " AND state NOT IN ('retired','failed')", "iss", now, worker, old_inc))) < 0)
		goto out;
	for (i = 0; i < n; i++) {
		const char *why = NULL;
		if (specs[i] == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		rc = sq_place_execution(q, ids[i], pins[i], NULL, specs[i], &why, NULL, NULL);
		if (rc == -EAGAIN || rc == -EHOSTDOWN || rc == -ENOENT) {
			/* nowhere to run it now: the sandbox fails visibly */
			rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'failed'"
			    " WHERE id = ?", "s", ids[i]));
		} else if (rc == 0) {
			rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'creating'"
			    " WHERE id = ?", "s", ids[i]));
			(*reassigned)++;
		}
		if (rc < 0)
			goto out;
	}
	rc = 0;
out:
	for (i = 0; i < n; i++) {
		free(specs[i]);
		free(pins[i]);
	}
	free(ids);
	free(specs);
	free(pins);
	return rc;
}

static int
sq_worker_register(struct store *s, const char *worker, const char *incarnation,
    const char *endpoint, int64_t capacity, json_t **out, int64_t *revision, int *reassigned)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	char old[SPACE_ID_MAX + 1] = "";
	int64_t now = now_unix();
	int rc;

	*reassigned = 0;
	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	st = sq_prep(q->db, "SELECT COALESCE(incarnation, '') FROM workers WHERE id = ?", "s", worker);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1)
		sq_col_copy(st, 0, old, sizeof(old));
	sqlite3_finalize(st);
	if (rc == 0)
		rc = -ENOENT;
	if (rc < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE workers SET incarnation = ?, endpoint = ?,"
	    " capacity = ?, state = 'live', last_heartbeat = ? WHERE id = ?", "ssiis",
	    incarnation, endpoint, capacity, now, worker))) < 0)
		goto out;
	if (old[0] && strcmp(old, incarnation) != 0) {
		log_info("worker %s re-created (incarnation changed)", worker);
		if ((rc = reassign_lost(q, worker, old, reassigned)) < 0)
			goto out;
	}
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,action,target,detail) "
	    "VALUES (?,'worker.register',?,?)", "iss", now, worker, incarnation))) < 0)
		goto out;
	if ((*revision = worker_revision(q, worker)) < 0) {
		rc = -EIO;
		goto out;
	}
	if ((rc = sq_commit(q->db)) < 0)
		goto out;
	*out = json_pack("{s:s,s:s,s:s,s:I,s:s}", "id", worker, "incarnation", incarnation,
	    "endpoint", endpoint, "capacity", (json_int_t)capacity, "state", "live");
	if (*out == NULL)
		rc = -ENOMEM;
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
}

static int
sq_worker_heartbeat(struct store *s, const char *worker, const char *incarnation)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE workers SET last_heartbeat = ?, state = 'live'"
	    " WHERE id = ? AND incarnation = ?", "iss", now_unix(), worker, incarnation));
	if (rc == 0 && sqlite3_changes(q->db) == 0)
		rc = -ESTALE;
	sq_unlock(q);
	return rc;
}

/* ctx: the revision of the last row, the worker's next cursor */
static json_t *
assignment_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	int64_t *rev = ctx;
	struct route_identity r;
	json_t *id;

	memset(&r, 0, sizeof(r));
	*rev = sqlite3_column_int64(st, 0);
	sq_col_copy(st, 3, r.sandbox, sizeof(r.sandbox));
	r.generation = (uint64_t)sqlite3_column_int64(st, 4);
	sq_col_copy(st, 5, r.worker, sizeof(r.worker));
	sq_col_copy(st, 6, r.substrate, sizeof(r.substrate));
	r.activation = (uint32_t)sqlite3_column_int64(st, 7);
	sq_col_copy(st, 8, r.resident, sizeof(r.resident));
	id = route_identity_pack(&r);
	return json_pack("{s:I,s:s,s:o,s:o}", "revision", (json_int_t)*rev,
	    "action", (const char *)sqlite3_column_text(st, 1),
	    "identity", id ? id : json_null(), "spec", sq_col_json(st, 2));
}

static int
sq_assignments_after(struct store *s, const char *worker, int64_t after, json_t **out,
    int64_t *revision)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int64_t rev;
	int rc;

	sq_lock(q);
	/* a cursor beyond every revision ever issued comes from another
	 * store (restored or re-created): replay the whole stream so the
	 * worker converges instead of waiting for revisions it already "has" */
	st = sq_prep(q->db, "SELECT COALESCE((SELECT seq FROM sqlite_sequence"
	    " WHERE name = 'assignments'), 0)", NULL);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	if (sq_step_row(q->db, st) == 1 && after > sqlite3_column_int64(st, 0))
		after = 0;
	sqlite3_finalize(st);
	rev = after;
	/* only what concerns the worker's current incarnation: a re-created
	 * worker must not install the executions of its previous life */
	st = sq_prep(q->db, "SELECT a.revision, a.action, a.spec, e.sandbox, e.generation, e.worker,"
	    " e.substrate, e.activation, e.resident FROM assignments a"
	    " JOIN executions e ON e.sandbox = a.sandbox AND e.generation = a.generation"
	    " JOIN workers w ON w.id = a.worker"
	    " WHERE a.worker = ? AND a.revision > ? AND e.resident = w.incarnation"
	    " ORDER BY a.revision LIMIT 1000", "si", worker, after);
	rc = sq_list(q, st, assignment_row, &rev, out);
	if (rc == 0)
		*revision = rev;
out:
	sq_unlock(q);
	return rc;
}

static bool
streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* the archive a worker reported with an execution's end becomes the
 * sandbox's latest snapshot (an automatic one, ready) */
static int
snap_latest(struct sq *q, const struct route_identity *r, const struct snap_report *snap,
    int64_t now)
{
	int rc;

	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO snapshots (id, sandbox, generation,"
	    " name, kind, state, digest, size, created_at) VALUES (?,?,?,NULL,'auto','ready',?,?,?)",
	    "ssisii", snap->id, r->sandbox, (int64_t)r->generation, snap->digest, snap->size,
	    now))) < 0)
		return rc;
	return sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET snapshot = ? WHERE id = ?",
	    "ss", snap->digest, r->sandbox));
}

static int
sq_execution_status(struct store *s, const char *worker, const struct route_identity *r,
    const char *state, const char *error, const struct snap_report *snap, const char **why)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	char ew[SPACE_ID_MAX + 1], es[SPACE_SUBSTRATE_MAX + 2], er[SPACE_ID_MAX + 1];
	char estate[STORE_STATE_MAX + 1], sstate[STORE_STATE_MAX + 1];
	int64_t act = 0, maxgen = 0, now = now_unix();
	int rc;

	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	st = sq_prep(q->db, "SELECT e.worker, e.substrate, e.resident, e.activation, e.state, s.state,"
	    " (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)"
	    " FROM executions e JOIN sandboxes s ON s.id = e.sandbox"
	    " WHERE e.sandbox = ? AND e.generation = ?", "si", r->sandbox, (int64_t)r->generation);
	if (st == NULL) {
		rc = -EIO;
		goto out;
	}
	rc = sq_step_row(q->db, st);
	if (rc == 1) {
		sq_col_copy(st, 0, ew, sizeof(ew));
		sq_col_copy(st, 1, es, sizeof(es));
		sq_col_copy(st, 2, er, sizeof(er));
		act = sqlite3_column_int64(st, 3);
		sq_col_copy(st, 4, estate, sizeof(estate));
		sq_col_copy(st, 5, sstate, sizeof(sstate));
		maxgen = sqlite3_column_int64(st, 6);
	}
	sqlite3_finalize(st);
	if (rc == 0) {
		*why = "no such execution";
		rc = -ENOENT;
	}
	if (rc < 0)
		goto out;
	/* a worker reports only on what was placed on it, in its current life */
	if (!streq(ew, worker) || !streq(r->worker, worker)) {
		*why = "execution is not placed on this worker";
		rc = -EPERM;
		goto out;
	}
	if (!streq(es, r->substrate) || !streq(er, r->resident)) {
		*why = "identity does not match the execution";
		rc = -ESTALE;
		goto out;
	}
	if ((int64_t)r->activation < act) {
		*why = "activation is older than the recorded one";
		rc = -ESTALE;
		goto out;
	}
	if (streq(state, "serving")) {
		if (!streq(estate, "pending") && !streq(estate, "starting") && !streq(estate, "serving")) {
			*why = "execution is no longer wanted";
			rc = -ESTALE;
			goto out;
		}
		/* a new activation is a bridge relaunch of the same execution:
		 * only the current generation may move forward */
		if ((int64_t)r->activation > act && (int64_t)r->generation != maxgen) {
			*why = "activation change on a replaced generation";
			rc = -ESTALE;
			goto out;
		}
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'serving',"
		    " activation = ?, error = NULL, updated_at = ? WHERE sandbox = ? AND generation = ?",
		    "iisi", (int64_t)r->activation, now, r->sandbox, (int64_t)r->generation))) < 0)
			goto out;
		if ((int64_t)r->generation == maxgen && (streq(sstate, "creating") ||
		    streq(sstate, "running")))
			rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'running'"
			    " WHERE id = ?", "s", r->sandbox));
	} else if (streq(state, "failed")) {
		if (streq(estate, "retired")) {
			*why = "execution is already retired";
			rc = -ESTALE;
			goto out;
		}
		/* a failure reported again (after a restart of the worker)
		 * keeps the error first reported */
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'failed',"
		    " error = CASE WHEN state = 'failed' AND error IS NOT NULL THEN error ELSE ?1 END,"
		    " updated_at = ?2, ended_at = COALESCE(ended_at, ?2)"
		    " WHERE sandbox = ?3 AND generation = ?4", "sisi",
		    error ? error : "failed", now, r->sandbox, (int64_t)r->generation))) < 0)
			goto out;
		if ((int64_t)r->generation == maxgen && (streq(sstate, "creating") ||
		    streq(sstate, "running")))
			rc = sq_run(q->db, sq_prep(q->db, "UPDATE sandboxes SET state = 'failed'"
			    " WHERE id = ?", "s", r->sandbox));
		/* the worker archived the failed execution's layer: the
		 * current generation's archive becomes the latest, which is
		 * what lets a resume bring the sandbox back (an older
		 * generation's failure must not replace a newer archive) */
		if (rc >= 0 && snap != NULL && snap->digest != NULL &&
		    (int64_t)r->generation == maxgen)
			rc = snap_latest(q, r, snap, now);
	} else {
		if (streq(estate, "failed") || streq(estate, "retired")) {
			/* already ended: a repeated report changes nothing */
			rc = 0;
			goto done;
		}
		if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE executions SET state = 'retired',"
		    " updated_at = ?1, ended_at = ?1 WHERE sandbox = ?2 AND generation = ?3",
		    "isi", now, r->sandbox, (int64_t)r->generation))) < 0)
			goto out;
		/* the archive of the retired layer is what a resume or the
		 * second half of a move restores: it becomes the latest */
		if (snap != NULL && snap->digest != NULL)
			rc = snap_latest(q, r, snap, now);
	}
done:
	if (rc < 0)
		goto out;
	rc = sq_commit(q->db);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
}

static int
sq_workers_reap(struct store *s, int64_t older_than)
{
	struct sq *q = SQ(s);
	int rc;

	sq_lock(q);
	rc = sq_run(q->db, sq_prep(q->db, "UPDATE workers SET state = 'lost'"
	    " WHERE state = 'live' AND last_heartbeat < ?", "i", older_than));
	if (rc == 0)
		rc = sqlite3_changes(q->db);
	sq_unlock(q);
	return rc;
}

static int
sq_worker_counts(struct store *s, int64_t *live, int64_t *lost)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc = -EIO;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT COALESCE(SUM(state = 'live'), 0), COALESCE(SUM(state = 'lost'), 0)"
	    " FROM workers", NULL);
	if (st && sq_step_row(q->db, st) == 1) {
		*live = sqlite3_column_int64(st, 0);
		*lost = sqlite3_column_int64(st, 1);
		rc = 0;
	}
	sqlite3_finalize(st);
	sq_unlock(q);
	return rc;
}

static json_t *
worker_row(struct sq *q, sqlite3_stmt *st, void *ctx)
{
	char ts[RFC3339_LEN + 1];
	int64_t hb = sqlite3_column_int64(st, 4);

	if (hb > 0)
		rfc3339_format(hb, ts);
	return json_pack("{s:s,s:s?,s:s,s:I,s:I,s:s?}",
	    "id", (const char *)sqlite3_column_text(st, 0),
	    "endpoint", (const char *)sqlite3_column_text(st, 1),
	    "state", (const char *)sqlite3_column_text(st, 2),
	    "capacity", (json_int_t)sqlite3_column_int64(st, 3),
	    "sandboxes", (json_int_t)sqlite3_column_int64(st, 5),
	    "last_heartbeat", hb > 0 ? ts : NULL);
}

static int
sq_workers_list(struct store *s, json_t **out)
{
	struct sq *q = SQ(s);
	sqlite3_stmt *st;
	int rc;

	sq_lock(q);
	st = sq_prep(q->db, "SELECT w.id, w.endpoint, w.state, w.capacity, w.last_heartbeat,"
	    " (SELECT COUNT(*) FROM executions e WHERE e.worker = w.id AND e.resident = w.incarnation"
	    "   AND e.state IN ('pending','starting','serving'))"
	    " FROM workers w ORDER BY w.id", NULL);
	rc = sq_list(q, st, worker_row, NULL, out);
	sq_unlock(q);
	return rc;
}

/* ---- keys ---- */

static int
sq_key_add(struct store *s, const struct key_row *k, int64_t old_not_after)
{
	struct sq *q = SQ(s);
	char pub[PASERK_K4_PUBLIC_LEN + 1];
	int64_t now = now_unix();
	int rc;

	if ((rc = paserk_k4_public_encode(k->pk, pub)) < 0)
		return rc;
	sq_lock(q);
	if ((rc = sq_begin(q->db)) < 0)
		goto out;
	/* every key still open stops being valid once its last token can
	 * have expired: tokens signed up to the switch live 120 s + skew */
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE signing_keys SET not_after = ?"
	    " WHERE not_after = 0", "i", old_not_after))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO signing_keys VALUES (?,?,?,?,?,?)",
	    "ssiiii", k->kid, pub, k->activate_at, k->not_before, k->not_after, now))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "UPDATE meta SET v = v + 1 WHERE k = 'keys_serial'",
	    NULL))) < 0)
		goto out;
	if ((rc = sq_run(q->db, sq_prep(q->db, "INSERT INTO audit (ts,action,target) "
	    "VALUES (?,'keys.add',?)", "is", now, k->kid))) < 0)
		goto out;
	rc = sq_commit(q->db);
out:
	if (rc < 0)
		sq_rollback(q->db);
	sq_unlock(q);
	return rc;
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
	sqlite3_finalize(st);
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
	sqlite3_finalize(st);
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
	sqlite3_finalize(st);
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

static void
sq_close(struct store *s)
{
	struct sq *q = SQ(s);

	if (q == NULL)
		return;
	sqlite3_close(q->db);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static const struct store_ops sqlite_ops = {
	.close = sq_close,
	.apikey_add = sq_apikey_add,
	.apikey_lookup = sq_apikey_lookup,
	.worker_add = sq_worker_add,
	.worker_cred_lookup = sq_worker_cred_lookup,
	.sandbox_create = sq_sandbox_create,
	.sandbox_get = sq_sandbox_get,
	.sandbox_list = sq_sandbox_list,
	.sandbox_kill = sq_sandbox_kill,
	.sandbox_current = sq_sandbox_current,
	.worker_register = sq_worker_register,
	.worker_heartbeat = sq_worker_heartbeat,
	.assignments_after = sq_assignments_after,
	.execution_status = sq_execution_status,
	.workers_reap = sq_workers_reap,
	.worker_counts = sq_worker_counts,
	.workers_list = sq_workers_list,
	.key_add = sq_key_add,
	.keys_list = sq_keys_list,
	.keys_changed = sq_keys_changed,
	.bundle_latest = sq_bundle_latest,
	.bundle_add = sq_bundle_add,
	.op_start = sqo_op_start,
	.ops_drive = sqo_ops_drive,
	.snapshot_report = sqo_snapshot_report,
	.snapshots_list = sqo_snapshots_list,
	.sandbox_set_timeouts = sqo_sandbox_set_timeouts,
	.sandbox_touch = sqo_sandbox_touch,
	.timeouts_due = sqo_timeouts_due,
	.audit = sq_audit,
};

struct store *
store_sqlite_open(const char *path)
{
	struct sq *q;
	int rc;

	if ((q = calloc(1, sizeof(*q))) == NULL)
		return NULL;
	q->base.ops = &sqlite_ops;
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
	sqlite3_busy_timeout(q->db, 10000);
	/* WAL lets the subcommands write while the daemon runs; FULL makes
	 * every acknowledged commit survive power loss, not only kill -9 */
	if (sq_xexec(q->db, "PRAGMA journal_mode = WAL") < 0 ||
	    sq_xexec(q->db, "PRAGMA synchronous = FULL") < 0 ||
	    sq_xexec(q->db, "PRAGMA foreign_keys = ON") < 0)
		goto fail;
	if (migrate(q->db) < 0)
		goto fail;
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
	if (strstr(spec, "://") != NULL || strncmp(spec, "postgres", 8) == 0) {
		errno = ENOTSUP;
		return NULL;
	}
	return store_sqlite_open(spec);
}
