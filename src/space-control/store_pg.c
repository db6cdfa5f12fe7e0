/* The PostgreSQL backend of the store (store.h): several space-control
 * replicas on one database. This file holds the schema, the connection,
 * its reconnection and the one transaction helper, credentials and keys;
 * store_pg_read.c the reads; store_pg_rows.c the row operations the
 * lifecycle (lifecycle.c, lifecycle_ops.c) runs on. The statements are
 * those of the SQLite backend in PostgreSQL's dialect; every decision is
 * in lifecycle.c, shared by both.
 *
 * One connection per process, serialized by a mutex, as in the SQLite
 * backend. Where SQLite takes its write lock at BEGIN IMMEDIATE, every
 * transaction here runs SERIALIZABLE: two replicas that read the same
 * rows (MAX(generation), a lease, a worker's load) and both write cannot
 * both commit; the loser's serialization failure (SQLSTATE 40001) or
 * deadlock (40P01) is retried by pg_tx from the start. Assignment
 * revisions are issued under a transaction-level advisory lock, so they
 * become visible in the order they were issued (a worker's cursor never
 * skips a revision committed late).
 *
 * The database away: a statement fails, the request answers 503 with
 * Retry-After (-EIO), and the next use reconnects. A transaction is
 * replayed on a new connection only when its COMMIT was never sent, so an
 * acknowledged change is committed and an unacknowledged one is at most
 * committed without its answer, as with a crash. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <libpq-fe.h>

#include "claims.h"
#include "log.h"
#include "store.h"
#include "store_pg.h"
#include "store_tx.h"
#include "util.h"

#define PG_MAXPARAMS    16
#define PG_TX_TRIES     20      /* serialization failures before giving up (503) */
/* key of the advisory locks: schema migration, assignment revisions */
#define PG_LOCK_MIGRATE 0x73706d69   /* "spmi" */
#define PG_LOCK_ASSIGN  0x73706173   /* "spas" */

/* Versioned migrations: entry i brings the schema from version i to
 * i + 1, as the SQLite backend's entry i does (same tables, columns and
 * constraints). Append, never edit a shipped entry. Each table that the
 * SQLite backend orders by its implicit rowid has an identity column
 * named rowid. */
static const char *const migrations[] = {
	/* 1: the initial schema */
	"CREATE TABLE principals ("
	"  id TEXT PRIMARY KEY, created_at BIGINT NOT NULL);"
	"CREATE TABLE api_keys ("
	"  id TEXT PRIMARY KEY,"
	"  principal TEXT NOT NULL REFERENCES principals(id),"
	"  hash BYTEA NOT NULL,"
	"  created_at BIGINT NOT NULL);"
	"CREATE TABLE workers ("
	"  id TEXT PRIMARY KEY, incarnation TEXT, endpoint TEXT,"
	"  capacity BIGINT NOT NULL DEFAULT 0,"
	"  cred_id TEXT NOT NULL UNIQUE, cred_hash BYTEA NOT NULL,"
	"  state TEXT NOT NULL DEFAULT 'lost' CHECK (state IN ('live','lost')),"
	"  last_heartbeat BIGINT NOT NULL DEFAULT 0, created_at BIGINT NOT NULL);"
	"CREATE TABLE sandboxes ("
	"  id TEXT PRIMARY KEY, owner TEXT NOT NULL REFERENCES principals(id),"
	"  state TEXT NOT NULL, template TEXT NOT NULL, resources TEXT NOT NULL,"
	"  timeouts TEXT NOT NULL, metadata TEXT NOT NULL, pinned_worker TEXT,"
	"  created_at BIGINT NOT NULL, lease_owner TEXT, lease_expiry BIGINT);"
	"CREATE INDEX sandboxes_owner ON sandboxes(owner, created_at);"
	"CREATE TABLE executions ("
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  generation BIGINT NOT NULL CHECK (generation >= 1),"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  substrate TEXT NOT NULL,"
	"  activation BIGINT NOT NULL CHECK (activation >= 1),"
	"  resident TEXT NOT NULL,"
	"  state TEXT NOT NULL CHECK (state IN ('pending','starting','serving','retiring','retired','failed')),"
	"  error TEXT, created_at BIGINT NOT NULL, updated_at BIGINT NOT NULL,"
	"  rowid BIGINT GENERATED ALWAYS AS IDENTITY,"
	"  PRIMARY KEY (sandbox, generation));"
	"CREATE INDEX executions_worker ON executions(worker, resident, state);"
	"CREATE TABLE assignments ("
	"  revision BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
	"  worker TEXT NOT NULL REFERENCES workers(id),"
	"  sandbox TEXT NOT NULL, generation BIGINT NOT NULL,"
	"  action TEXT NOT NULL CONSTRAINT assignments_action CHECK (action IN ('install','retire')),"
	"  spec TEXT NOT NULL, created_at BIGINT NOT NULL,"
	"  FOREIGN KEY (sandbox, generation) REFERENCES executions(sandbox, generation));"
	"CREATE INDEX assignments_worker ON assignments(worker, revision);"
	"CREATE TABLE snapshots ("
	"  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  generation BIGINT NOT NULL, digest TEXT NOT NULL, size BIGINT NOT NULL,"
	"  created_at BIGINT NOT NULL, rowid BIGINT GENERATED ALWAYS AS IDENTITY);"
	"CREATE TABLE signing_keys ("
	"  kid TEXT PRIMARY KEY, public TEXT NOT NULL,"
	"  activate_at BIGINT NOT NULL,"
	"  not_before BIGINT NOT NULL, not_after BIGINT NOT NULL DEFAULT 0,"
	"  created BIGINT NOT NULL);"
	"CREATE TABLE bundles ("
	"  version BIGINT PRIMARY KEY, token TEXT NOT NULL, created BIGINT NOT NULL);"
	"CREATE TABLE audit ("
	"  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, ts BIGINT NOT NULL, principal TEXT,"
	"  action TEXT NOT NULL, target TEXT, detail TEXT);"
	"CREATE TABLE meta (k TEXT PRIMARY KEY, v BIGINT NOT NULL);"
	"INSERT INTO meta VALUES ('keys_serial', 0);",

	/* 2: lifecycle: operations and their leases, pending named
	 * snapshots, the 'snapshot' assignment action, activity and end times
	 * (PostgreSQL changes the CHECK constraints in place) */
	"ALTER TABLE sandboxes ADD COLUMN last_activity BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE sandboxes ADD COLUMN snapshot TEXT;"
	"ALTER TABLE executions ADD COLUMN ended_at BIGINT;"
	"ALTER TABLE assignments DROP CONSTRAINT assignments_action;"
	"ALTER TABLE assignments ADD CONSTRAINT assignments_action"
	"  CHECK (action IN ('install','retire','snapshot'));"
	"ALTER TABLE snapshots ALTER COLUMN digest DROP NOT NULL,"
	"  ALTER COLUMN size DROP NOT NULL, ADD COLUMN name TEXT,"
	"  ADD COLUMN kind TEXT NOT NULL DEFAULT 'auto' CHECK (kind IN ('auto','named')),"
	"  ADD COLUMN state TEXT NOT NULL DEFAULT 'ready' CHECK (state IN ('pending','ready','failed')),"
	"  ADD COLUMN error TEXT;"
	"ALTER TABLE snapshots ALTER COLUMN kind DROP DEFAULT, ALTER COLUMN state DROP DEFAULT;"
	"CREATE INDEX snapshots_sandbox ON snapshots(sandbox, created_at);"
	"CREATE TABLE operations ("
	"  id TEXT PRIMARY KEY, sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  kind TEXT NOT NULL CHECK (kind IN ('pause','resume','move','snapshot')),"
	"  target TEXT,"
	"  step TEXT NOT NULL CHECK (step IN ('retiring','installing','snapshotting','done')),"
	"  from_gen BIGINT, to_gen BIGINT, snapshot_id TEXT, reason TEXT,"
	"  result TEXT CHECK (result IN ('ok','failed','abandoned')),"
	"  created BIGINT NOT NULL, updated BIGINT NOT NULL, ended BIGINT,"
	"  rowid BIGINT GENERATED ALWAYS AS IDENTITY);"
	"CREATE INDEX operations_open ON operations(sandbox) WHERE step <> 'done';",

	/* 3: what a worker reports it has (0 = not reported, not accounted) */
	"ALTER TABLE workers ADD COLUMN memory_mb BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE workers ADD COLUMN cpu_percent BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE workers ADD COLUMN disk_mb BIGINT NOT NULL DEFAULT 0;",

	/* 4: per-key quotas (0 = no limit), revocation, the key of each sandbox */
	"ALTER TABLE api_keys ADD COLUMN max_sandboxes BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN max_memory_mb BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN creates_per_minute BIGINT NOT NULL DEFAULT 0;"
	"ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT;"
	"ALTER TABLE sandboxes ADD COLUMN api_key TEXT;"
	"CREATE INDEX sandboxes_api_key ON sandboxes(api_key, created_at);",

	/* 5: a route handed to a repair is held (ms, wall clock) */
	"ALTER TABLE sandboxes ADD COLUMN route_hold_until BIGINT NOT NULL DEFAULT 0;",

	/* 6: archives reported lately (a pending reference until `until`,
	 * unix seconds), for the snapshot store's collection */
	"CREATE TABLE archive_pending (digest TEXT PRIMARY KEY, until BIGINT NOT NULL);",

	/* 7: egress policies (docs/network.md): the sandbox's, and the
	 * 'network' assignment that changes a serving execution's */
	"ALTER TABLE sandboxes ADD COLUMN network TEXT;"
	"ALTER TABLE assignments DROP CONSTRAINT assignments_action;"
	"ALTER TABLE assignments ADD CONSTRAINT assignments_action"
	"  CHECK (action IN ('install','retire','snapshot','network'));",

	/* 8: the public entry (docs/network.md): edge credentials (hashed as
	 * API keys are) and each sandbox's traffic token (its hash only) */
	"CREATE TABLE edge_creds (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE,"
	"  hash BYTEA NOT NULL, created_at BIGINT NOT NULL, revoked_at BIGINT);"
	"CREATE TABLE traffic_tokens (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id),"
	"  hash BYTEA NOT NULL, created_at BIGINT NOT NULL);",

	/* 9: declared service ports and a worker's netgtw listener, as in
	 * store_sqlite.c; the PostgreSQL store does not read or write them
	 * yet (the port calls answer 501), the schemas stay at one version */
	"ALTER TABLE sandboxes ADD COLUMN ports TEXT;"
	"ALTER TABLE workers ADD COLUMN gateway TEXT;",

	/* 10: refusals counted per sandbox and outcome, as in store_sqlite.c */
	"CREATE TABLE sandbox_refusals (sandbox TEXT PRIMARY KEY REFERENCES sandboxes(id),"
	"  refresh_route BIGINT NOT NULL DEFAULT 0, deny BIGINT NOT NULL DEFAULT 0,"
	"  expired BIGINT NOT NULL DEFAULT 0);",

	/* 11: per-sandbox access tokens (api_access.c): several per sandbox
	 * (each create or connect of the E2B API makes one), hashed as API
	 * keys are, looked up by their public id */
	"CREATE TABLE access_tokens (id TEXT PRIMARY KEY,"
	"  sandbox TEXT NOT NULL REFERENCES sandboxes(id),"
	"  hash BYTEA NOT NULL, created_at BIGINT NOT NULL);"
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
pg_lock(struct pgs *q)
{
	pthread_mutex_lock(&q->mu);
	clock_gettime(CLOCK_MONOTONIC, &q->t0);
}

void
pg_unlock(struct pgs *q)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	pthread_mutex_unlock(&q->mu);
	if (store_observe)
		store_observe((double)(t1.tv_sec - q->t0.tv_sec) +
		    (double)(t1.tv_nsec - q->t0.tv_nsec) / 1e9);
}

/* the URL's own settings win over these defaults */
PGconn *
pg_dial(const char *conninfo)
{
	const char *const keys[] = { "connect_timeout", "application_name", "dbname", NULL };
	const char *const vals[] = { "3", "space-control", conninfo, NULL };

	return PQconnectdbParams(keys, vals, 1);
}

static void
pg_silence(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;      /* NOTICEs (e.g. "relation already exists, skipping") */
}

int
pg_connect(struct pgs *q)
{
	static bool was_down;

	if (q->conn != NULL && PQstatus(q->conn) == CONNECTION_OK)
		return 0;
	if (q->conn != NULL)
		PQfinish(q->conn);
	q->conn = pg_dial(q->conninfo);
	if (q->conn == NULL || PQstatus(q->conn) != CONNECTION_OK) {
		if (!was_down)
			log_warnx("store: postgresql: %s", q->conn ? PQerrorMessage(q->conn) : "out of memory");
		was_down = true;
		if (q->conn != NULL)
			PQfinish(q->conn);
		q->conn = NULL;
		snprintf(q->sqlstate, sizeof(q->sqlstate), "08001");
		return -EIO;
	}
	PQsetNoticeProcessor(q->conn, pg_silence, NULL);
	if (was_down)
		log_info("store: postgresql: connected again");
	was_down = false;
	return 0;
}

static bool
conn_lost(struct pgs *q)
{
	return q->conn == NULL || PQstatus(q->conn) != CONNECTION_OK ||
	    strncmp(q->sqlstate, "08", 2) == 0 || strncmp(q->sqlstate, "57P", 3) == 0;
}

static PGresult *
pg_vq(struct pgs *q, int *err, const char *sql, const char *fmt, va_list ap)
{
	const char *vals[PG_MAXPARAMS];
	Oid types[PG_MAXPARAMS];
	int lens[PG_MAXPARAMS], fmts[PG_MAXPARAMS], n = 0;
	char nums[PG_MAXPARAMS][24];
	PGresult *res;
	ExecStatusType st;
	const char *code;

	for (; fmt && fmt[n] && n < PG_MAXPARAMS; n++) {
		lens[n] = 0;
		fmts[n] = 0;
		if (fmt[n] == 's') {
			vals[n] = va_arg(ap, const char *);
			types[n] = 25;          /* text */
		} else if (fmt[n] == 'i') {
			snprintf(nums[n], sizeof(nums[n]), "%lld", (long long)va_arg(ap, int64_t));
			vals[n] = nums[n];
			types[n] = 20;          /* int8 */
		} else {
			vals[n] = va_arg(ap, const char *);
			lens[n] = va_arg(ap, int);
			fmts[n] = 1;
			types[n] = 17;          /* bytea, binary */
		}
	}
	q->sqlstate[0] = '\0';
	q->changes = 0;
	if (q->conn == NULL) {
		snprintf(q->sqlstate, sizeof(q->sqlstate), "08003");
		*err = -EIO;
		return NULL;
	}
	res = PQexecParams(q->conn, sql, n, types, vals, lens, fmts, 0);
	st = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
	if (st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK) {
		q->changes = strtoll(PQcmdTuples(res), NULL, 10);
		*err = 0;
		return res;
	}
	code = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
	snprintf(q->sqlstate, sizeof(q->sqlstate), "%s", code ? code : "08006");
	if (PQstatus(q->conn) != CONNECTION_OK)
		snprintf(q->sqlstate, sizeof(q->sqlstate), "08006");
	*err = strncmp(q->sqlstate, "23", 2) == 0 ? -EEXIST : -EIO;
	/* a constraint is the caller's to report; a serialization failure
	 * is retried by pg_tx; anything else is worth a line */
	if (*err == -EIO && strcmp(q->sqlstate, "40001") != 0 && strcmp(q->sqlstate, "40P01") != 0 &&
	    strcmp(q->sqlstate, "25P02") != 0)
		log_warnx("store: postgresql [%s]: %s", q->sqlstate,
		    res ? PQresultErrorMessage(res) : PQerrorMessage(q->conn));
	PQclear(res);
	return NULL;
}

PGresult *
pg_q(struct pgs *q, int *err, const char *sql, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;

	va_start(ap, fmt);
	res = pg_vq(q, err, sql, fmt, ap);
	va_end(ap);
	return res;
}

int
pg_run(struct pgs *q, const char *sql, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;
	int err;

	va_start(ap, fmt);
	res = pg_vq(q, &err, sql, fmt, ap);
	va_end(ap);
	PQclear(res);
	return err;
}

int
pg_list(struct pgs *q, PGresult *res, int err, pg_row_fn row, void *ctx, json_t **out)
{
	json_t *arr, *o;
	int i, n;

	if (res == NULL)
		return err < 0 ? err : -EIO;
	if ((arr = json_array()) == NULL) {
		PQclear(res);
		return -ENOMEM;
	}
	n = PQntuples(res);
	for (i = 0; i < n; i++) {
		if ((o = row(q, res, i, ctx)) == NULL || json_array_append_new(arr, o) < 0) {
			PQclear(res);
			json_decref(arr);
			return -ENOMEM;
		}
	}
	PQclear(res);
	*out = arr;
	return 0;
}

const char *
pg_s(PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c) ? NULL : PQgetvalue(r, i, c);
}

void
pg_copy(PGresult *r, int i, int c, char *dst, size_t cap)
{
	snprintf(dst, cap, "%s", PQgetisnull(r, i, c) ? "" : PQgetvalue(r, i, c));
}

int64_t
pg_i(PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c) ? 0 : strtoll(PQgetvalue(r, i, c), NULL, 10);
}

bool
pg_b(PGresult *r, int i, int c)
{
	return !PQgetisnull(r, i, c) && PQgetvalue(r, i, c)[0] == 't';
}

bool
pg_null(PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c);
}

json_t *
pg_json(PGresult *r, int i, int c)
{
	const char *t = pg_s(r, i, c);
	json_t *v = t ? json_loads(t, JSON_DECODE_ANY, NULL) : NULL;

	return v ? v : json_null();
}

static bool
retryable(const struct pgs *q)
{
	return strcmp(q->sqlstate, "40001") == 0 || strcmp(q->sqlstate, "40P01") == 0;
}

/* The one transaction helper of the backend. A serialization failure or
 * deadlock anywhere (a statement of fn or the COMMIT) rolls back and runs
 * fn again from the start, after a short random pause; a connection lost
 * before the COMMIT was sent is dialled again and the transaction run
 * once more. A failure of the COMMIT itself on a lost connection is not
 * replayed: it answers -EIO (503), as its outcome is unknown. */
int
pg_tx(struct store *s, store_tx_fn fn, void *arg)
{
	struct pgs *q = PGS(s);
	int rc = -EIO, tries, redial = 1;
	bool committing;

	pg_lock(q);
	for (tries = 0; tries < PG_TX_TRIES; tries++) {
		committing = false;
		if ((rc = pg_connect(q)) < 0)
			break;
		if ((rc = pg_run(q, "BEGIN ISOLATION LEVEL SERIALIZABLE", NULL)) == 0) {
			if ((rc = fn(s, arg)) >= 0) {
				committing = true;
				rc = pg_run(q, "COMMIT", NULL);
			}
		}
		if (rc >= 0)
			break;
		if (q->conn != NULL && PQstatus(q->conn) == CONNECTION_OK &&
		    PQtransactionStatus(q->conn) != PQTRANS_IDLE) {
			char keep[6];
			memcpy(keep, q->sqlstate, sizeof(keep));
			(void)pg_run(q, "ROLLBACK", NULL);
			memcpy(q->sqlstate, keep, sizeof(keep));
		}
		if (retryable(q)) {
			pg_unlock(q);
			usleep((useconds_t)(1000 + (rand() % 1000) * (tries + 1)));
			pg_lock(q);
			continue;
		}
		if (conn_lost(q) && !committing && redial-- > 0)
			continue;
		break;
	}
	if (rc < 0 && retryable(q)) {
		log_warnx("store: postgresql: a transaction lost %d serialization races", tries);
		rc = -EBUSY;
	}
	pg_unlock(q);
	return rc < 0 ? rc : 0;
}

/* A read outside a transaction: dial when needed, and once more when the
 * connection turns out lost (a database restarted since the last use) */
PGresult *
pg_read(struct pgs *q, int *err, const char *sql, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;
	int i;

	for (i = 0; i < 2; i++) {
		if ((*err = pg_connect(q)) < 0)
			return NULL;
		va_start(ap, fmt);
		res = pg_vq(q, err, sql, fmt, ap);
		va_end(ap);
		if (res != NULL || !conn_lost(q))
			return res;
	}
	return NULL;
}

/* a write of one statement outside a transaction: not replayed */
int
pg_write(struct pgs *q, const char *sql, const char *fmt, ...)
{
	va_list ap;
	PGresult *res;
	int err;

	if ((err = pg_connect(q)) < 0)
		return err;
	va_start(ap, fmt);
	res = pg_vq(q, &err, sql, fmt, ap);
	va_end(ap);
	PQclear(res);
	return err;
}

/* Run every pending migration in one transaction, under an advisory lock
 * so that replicas starting together migrate once. A schema newer than
 * this build is refused: -EPROTO. */
static int
migrate(struct pgs *q)
{
	PGresult *res;
	int v = 0, rc, err;

	if ((rc = pg_run(q, "BEGIN", NULL)) < 0)
		return rc;
	if ((rc = pg_run(q, "SELECT pg_advisory_xact_lock($1)", "i", (int64_t)PG_LOCK_MIGRATE)) < 0 ||
	    (rc = pg_run(q, "CREATE TABLE IF NOT EXISTS schema_version ("
	    " version INTEGER NOT NULL, applied BIGINT NOT NULL)", NULL)) < 0)
		goto fail;
	if ((res = pg_q(q, &err, "SELECT COALESCE(MAX(version), 0) FROM schema_version", NULL)) == NULL) {
		rc = err;
		goto fail;
	}
	v = (int)pg_i(res, 0, 0);
	PQclear(res);
	if (v > NMIGRATIONS) {
		log_warnx("store: schema version %d is newer than this build (%d): refusing to start",
		    v, NMIGRATIONS);
		rc = -EPROTO;
		goto fail;
	}
	for (; v < NMIGRATIONS; v++) {
		/* several statements: the simple protocol, no parameters */
		res = PQexec(q->conn, migrations[v]);
		if (PQresultStatus(res) != PGRES_COMMAND_OK) {
			log_warnx("store: migration to version %d: %s", v + 1, PQresultErrorMessage(res));
			PQclear(res);
			rc = -EIO;
			goto fail;
		}
		PQclear(res);
		if ((rc = pg_run(q, "INSERT INTO schema_version VALUES ($1, $2)", "ii", (int64_t)v + 1,
		    now_unix())) < 0)
			goto fail;
		log_info("store: migrated schema to version %d", v + 1);
	}
	return pg_run(q, "COMMIT", NULL);
fail:
	(void)pg_run(q, "ROLLBACK", NULL);
	return rc;
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
	struct pgs *q = PGS(s);
	int64_t now = now_unix();
	int rc;

	if ((rc = pg_run(q, "INSERT INTO principals VALUES ($1,$2) ON CONFLICT DO NOTHING",
	    "si", x->name, now)) < 0)
		return rc;
	if ((rc = pg_run(q, "INSERT INTO api_keys (id, principal, hash, created_at,"
	    " max_sandboxes, max_memory_mb, creates_per_minute) VALUES ($1,$2,$3,$4,$5,$6,$7)",
	    "ssbiiii", x->id, x->name, x->hash, STORE_HASH_LEN, now, x->q->max_sandboxes,
	    x->q->max_memory_mb, x->q->creates_per_minute)) < 0)
		return rc;
	return pg_run(q, "INSERT INTO audit (ts,principal,action,target) "
	    "VALUES ($1,$2,'apikey.add',$3)", "iss", now, x->name, x->id);
}

static int
p_apikey_add(struct store *s, const char *principal, const char *key_id,
    const uint8_t hash[STORE_HASH_LEN], const struct key_quota *kq)
{
	static const struct key_quota none;
	struct cred_ctx x = { principal, key_id, hash, kq ? kq : &none };

	return pg_tx(s, apikey_add_tx, &x);
}

static json_t *
apikey_row(struct pgs *q, PGresult *r, int i, void *ctx)
{
	char tc[RFC3339_LEN + 1], tr[RFC3339_LEN + 1];
	bool revoked = !pg_null(r, i, 3);

	rfc3339_format(pg_i(r, i, 2), tc);
	if (revoked)
		rfc3339_format(pg_i(r, i, 3), tr);
	return json_pack("{s:s,s:s,s:s,s:s?,s:{s:I,s:I,s:I}}",
	    "id", pg_s(r, i, 0), "principal", pg_s(r, i, 1),
	    "created_at", tc, "revoked_at", revoked ? tr : NULL,
	    "quota", "max_sandboxes", (json_int_t)pg_i(r, i, 4),
	    "max_memory_mb", (json_int_t)pg_i(r, i, 5),
	    "creates_per_minute", (json_int_t)pg_i(r, i, 6));
}

static int
p_apikey_list(struct store *s, json_t **out)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc, err;

	pg_lock(q);
	res = pg_read(q, &err, "SELECT id, principal, created_at, revoked_at,"
	    " max_sandboxes, max_memory_mb, creates_per_minute FROM api_keys"
	    " ORDER BY principal, created_at, id", NULL);
	rc = pg_list(q, res, err, apikey_row, NULL, out);
	pg_unlock(q);
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
	struct pgs *q = PGS(s);
	int rc;

	if ((rc = pg_run(q, "UPDATE api_keys SET revoked_at = $1 WHERE"
	    " (id = $2 OR principal = $2) AND revoked_at IS NULL", "is", now_unix(), x->who)) < 0)
		return rc;
	if ((x->n = (int)q->changes) == 0)
		return 0;
	return pg_run(q, "INSERT INTO audit (ts,action,target,detail) "
	    "VALUES ($1,'apikey.revoke',$2,$3::bigint::text)", "isi", now_unix(), x->who,
	    (int64_t)x->n);
}

static int
p_apikey_revoke(struct store *s, const char *id_or_principal)
{
	struct revoke_ctx x = { id_or_principal, 0 };
	int rc = pg_tx(s, apikey_revoke_tx, &x);

	return rc < 0 ? rc : x.n;
}

static int
lookup_cred(struct pgs *q, const char *sql, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	PGresult *res;
	const char *h;
	int rc;

	pg_lock(q);
	res = pg_read(q, &rc, sql, "s", id);
	if (res != NULL) {
		rc = -ENOENT;
		if (PQntuples(res) == 1 && (h = pg_s(res, 0, 1)) != NULL &&
		    hex_decode(h, strlen(h), hash, STORE_HASH_LEN) == STORE_HASH_LEN) {
			pg_copy(res, 0, 0, name, SPACE_ID_MAX + 1);
			rc = 0;
		}
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

static int
p_apikey_lookup(struct store *s, const char *key_id, char principal[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	/* a revoked key is refused from the next request on: nothing caches it */
	return lookup_cred(PGS(s), "SELECT principal, encode(hash, 'hex') FROM api_keys"
	    " WHERE id = $1 AND revoked_at IS NULL", key_id, principal, hash);
}

static int
p_worker_cred_lookup(struct store *s, const char *cred_id, char worker[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	return lookup_cred(PGS(s), "SELECT id, encode(cred_hash, 'hex') FROM workers"
	    " WHERE cred_id = $1", cred_id, worker, hash);
}

static int
worker_add_tx(struct store *s, void *arg)
{
	struct cred_ctx *x = arg;
	struct pgs *q = PGS(s);
	int64_t now = now_unix();
	int rc;

	if ((rc = pg_run(q, "INSERT INTO workers (id, cred_id, cred_hash, created_at) "
	    "VALUES ($1,$2,$3,$4)", "ssbi", x->name, x->id, x->hash, STORE_HASH_LEN, now)) < 0)
		return rc;
	return pg_run(q, "INSERT INTO audit (ts,action,target) VALUES ($1,'worker.add',$2)",
	    "is", now, x->name);
}

static int
p_worker_add(struct store *s, const char *worker, const char *cred_id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct cred_ctx x = { worker, cred_id, hash, NULL };

	return pg_tx(s, worker_add_tx, &x);
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
	struct pgs *q = PGS(s);
	int64_t now = now_unix();
	int rc;

	if ((rc = pg_run(q, "UPDATE signing_keys SET not_after = $1 WHERE not_after = 0", "i",
	    x->old_not_after)) < 0)
		return rc;
	if ((rc = pg_run(q, "INSERT INTO signing_keys VALUES ($1,$2,$3,$4,$5,$6)", "ssiiii",
	    x->k->kid, x->pub, x->k->activate_at, x->k->not_before, x->k->not_after, now)) < 0)
		return rc;
	if ((rc = pg_run(q, "UPDATE meta SET v = v + 1 WHERE k = 'keys_serial'", NULL)) < 0)
		return rc;
	return pg_run(q, "INSERT INTO audit (ts,action,target) VALUES ($1,'keys.add',$2)", "is",
	    now, x->k->kid);
}

static int
p_key_add(struct store *s, const struct key_row *k, int64_t old_not_after)
{
	char pub[PASERK_K4_PUBLIC_LEN + 1];
	struct key_ctx x = { k, pub, old_not_after };
	int rc;

	if ((rc = paserk_k4_public_encode(k->pk, pub)) < 0)
		return rc;
	return pg_tx(s, key_add_tx, &x);
}

static int
p_keys_list(struct store *s, struct key_row *rows, size_t cap, size_t *n)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc, i;

	*n = 0;
	pg_lock(q);
	res = pg_read(q, &rc, "SELECT kid, public, activate_at, not_before, not_after FROM signing_keys"
	    " WHERE not_after = 0 OR not_after >= $1 ORDER BY activate_at DESC, created DESC LIMIT $2",
	    "ii", now_unix(), (int64_t)cap);
	if (res != NULL) {
		for (i = 0; i < PQntuples(res) && *n < cap; i++) {
			struct key_row *k = &rows[*n];
			pg_copy(res, i, 0, k->kid, sizeof(k->kid));
			if (paserk_k4_public_decode(PQgetvalue(res, i, 1), k->pk) < 0) {
				rc = -EIO;
				break;
			}
			k->activate_at = pg_i(res, i, 2);
			k->not_before = pg_i(res, i, 3);
			k->not_after = pg_i(res, i, 4);
			(*n)++;
		}
		PQclear(res);
	}
	pg_unlock(q);
	return rc < 0 ? rc : 0;
}

static int
p_keys_changed(struct store *s, int64_t *stamp)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	pg_lock(q);
	res = pg_read(q, &rc, "SELECT v FROM meta WHERE k = 'keys_serial'", NULL);
	if (res != NULL) {
		rc = PQntuples(res) == 1 ? 0 : -EIO;
		if (rc == 0)
			*stamp = pg_i(res, 0, 0);
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

static int
p_bundle_latest(struct store *s, uint64_t *version, char **token)
{
	struct pgs *q = PGS(s);
	PGresult *res;
	int rc;

	*version = 0;
	*token = NULL;
	pg_lock(q);
	res = pg_read(q, &rc, "SELECT version, token FROM bundles ORDER BY version DESC LIMIT 1",
	    NULL);
	if (res != NULL) {
		rc = -ENOENT;
		if (PQntuples(res) == 1) {
			*version = (uint64_t)pg_i(res, 0, 0);
			*token = strdup(PQgetvalue(res, 0, 1));
			rc = *token ? 0 : -ENOMEM;
		}
		PQclear(res);
	}
	pg_unlock(q);
	return rc;
}

static int
p_bundle_add(struct store *s, uint64_t version, const char *token)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "INSERT INTO bundles VALUES ($1,$2,$3)", "isi", (int64_t)version, token,
	    now_unix());
	pg_unlock(q);
	return rc;
}

static int
p_audit(struct store *s, const char *principal, const char *action, const char *target,
    const char *detail)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "INSERT INTO audit (ts,principal,action,target,detail)"
	    " VALUES ($1,$2,$3,$4,$5)", "issss", now_unix(), principal, action, target, detail);
	pg_unlock(q);
	return rc;
}

static int
p_audit_prune(struct store *s, int64_t before, int limit)
{
	struct pgs *q = PGS(s);
	int rc;

	pg_lock(q);
	rc = pg_write(q, "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE ts < $1"
	    " ORDER BY id LIMIT $2)", "ii", before, (int64_t)limit);
	if (rc == 0)
		rc = (int)q->changes;
	pg_unlock(q);
	return rc;
}

static void
p_close(struct store *s)
{
	struct pgs *q = PGS(s);

	if (q == NULL)
		return;
	pg_listen_stop(q);
	if (q->conn != NULL)
		PQfinish(q->conn);
	free(q->conninfo);
	pthread_mutex_destroy(&q->mu);
	free(q);
}

static const struct store_ops pg_ops = {
	.close = p_close,
	.apikey_add = p_apikey_add,
	.apikey_lookup = p_apikey_lookup,
	.apikey_list = p_apikey_list,
	.apikey_revoke = p_apikey_revoke,
	.worker_add = p_worker_add,
	.worker_cred_lookup = p_worker_cred_lookup,
	.sandbox_create = lc_sandbox_create,
	.sandbox_get = pg_sandbox_get,
	.sandbox_list = pg_sandbox_list,
	.sandbox_kill = lc_sandbox_kill,
	.sandbox_current = pg_sandbox_current,
	.worker_register = lc_worker_register,
	.worker_heartbeat = pg_worker_heartbeat,
	.assignments_after = pg_assignments_after,
	.execution_status = lc_execution_status,
	.workers_reap = pg_workers_reap,
	.workers_failover = lc_workers_failover,
	.worker_counts = pg_worker_counts,
	.workers_list = pg_workers_list,
	.key_add = p_key_add,
	.keys_list = p_keys_list,
	.keys_changed = p_keys_changed,
	.bundle_latest = p_bundle_latest,
	.bundle_add = p_bundle_add,
	.op_start = lc_op_start,
	.snapshot_forget = lc_snapshot_forget,
	.ops_drive = lc_ops_drive,
	.snapshot_report = lc_snapshot_report,
	.checkpoint_report = lc_checkpoint_report,
	.snapshots_list = pg_snapshots_list,
	.sandbox_set_timeouts = pg_sandbox_set_timeouts,
	.sandbox_touch = pg_sandbox_touch,
	.route_hold = pg_route_hold,
	.timeouts_due = pg_timeouts_due,
	.archive_seen = st_archive_seen,
	.archives_collectable = st_archives_collectable,
	.template_refs = pg_template_refs,
	.archive_worker_refs = pg_archive_worker_refs,
	.listen = pg_listen,
	.listening = pg_listening,
	.audit = p_audit,
	.audit_prune = p_audit_prune,
};

/* "postgres://..." or "postgresql://...": a connection string libpq
 * parses, a database that answers, and a schema this build knows (older
 * ones are migrated). Any of them missing is an error at start, never
 * retried: NULL with errno EINVAL (the string), EHOSTUNREACH (no
 * answer), EPROTO (a newer schema) or EIO. */
struct store *
store_pg_open(const char *conninfo)
{
	PQconninfoOption *opts;
	struct pgs *q;
	char *err = NULL;
	int rc;

	if ((opts = PQconninfoParse(conninfo, &err)) == NULL) {
		/* err may quote the string, which may hold a password: not shown */
		log_warnx("store: not a PostgreSQL connection string");
		PQfreemem(err);
		errno = EINVAL;
		return NULL;
	}
	PQconninfoFree(opts);
	if ((q = calloc(1, sizeof(*q))) == NULL || (q->conninfo = strdup(conninfo)) == NULL) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->base.ops = &pg_ops;
	q->base.rows = &pg_rows;
	pthread_mutex_init(&q->mu, NULL);
	if (pg_connect(q) < 0) {
		p_close(&q->base);
		errno = EHOSTUNREACH;
		return NULL;
	}
	if ((rc = migrate(q)) < 0) {
		p_close(&q->base);
		errno = rc == -EPROTO ? EPROTO : EIO;
		return NULL;
	}
	return &q->base;
}
