/* Durable runtime records. records.db is the truth: every change is
 * committed (WAL, synchronous=FULL) before the in-memory mirror changes and
 * before anyone is told about it, so what admission reads is always
 * something that survives kill -9. One row per sandbox: installing a new
 * generation replaces the row, and a retired execution keeps its row (state
 * retired) so late requests get REFRESH_ROUTE rather than "unknown".
 *
 * Group commit: records_put queues its record and waits until it is
 * committed. The first caller to find no commit running takes everything
 * queued and commits it as one transaction (one fsync for the records of
 * several lanes); the others wait for it, and those that queued while it
 * was on disk go in the next one. So each record is still on disk before
 * records_put returns, in the order the callers queued them, and the
 * mirror (which admission reads) is never held across an fsync. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbfile.h"
#include "log.h"
#include "sbx-manager.h"

/* how long a statement waits for another process's write lock */
#define RECORDS_BUSY_MS 5000

/* a record on its way to disk, on its caller's stack */
struct pending {
	struct pending *next;
	struct record r;
	int ret;
	bool done;
};

struct mgr_records {
	sqlite3 *db;
	pthread_mutex_t db_lock;        /* the connection */
	pthread_mutex_t lock;           /* the mirror and the queue */
	pthread_cond_t committed;       /* a group commit ended */
	struct db_ckpt ckpt;            /* checkpoints in idle moments (dbfile.h) */
	struct record *mirror;
	size_t n, cap;
	struct pending *head, *tail;    /* queued for the next commit */
	struct pending *batch;          /* being committed; NULL when none */
	uint64_t commits, written;      /* transactions and records (the log) */
	uint8_t reserved[MGR_CAPACITY_MAX / 8]; /* slots of prepared jails (jailpool.c) */
	uint8_t draining[MGR_CAPACITY_MAX];     /* holds of ended executions still stopping */
};

/* Versioned migrations of records.db: entry i brings the file from
 * PRAGMA user_version i to i + 1, in one transaction with the version.
 * Append, never edit a shipped entry. Entries 2-4 are columns added before
 * the file had a version: a file from then has user_version 0 and some or
 * all of them already, so those add a column only when it is missing. */
struct migration {
	const char *sql;                /* or, when NULL: */
	const char *column, *decl;      /* ALTER TABLE records ADD COLUMN, if missing */
};

static const struct migration migrations[] = {
	/* 1: the first schema */
	{ "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL);"
	  "CREATE TABLE IF NOT EXISTS records ("
	  " sandbox TEXT PRIMARY KEY, generation INTEGER NOT NULL, worker TEXT NOT NULL,"
	  " substrate TEXT NOT NULL, activation INTEGER NOT NULL, resident TEXT NOT NULL,"
	  " state TEXT NOT NULL, epoch INTEGER NOT NULL, slot INTEGER NOT NULL,"
	  " uid_base INTEGER NOT NULL, template TEXT NOT NULL, memory_mb INTEGER NOT NULL,"
	  " pids INTEGER NOT NULL, cpu_percent INTEGER NOT NULL,"
	  " bridge_pid INTEGER NOT NULL, bridge_uid INTEGER NOT NULL,"
	  " bridge_start INTEGER NOT NULL, exe_dev INTEGER NOT NULL, exe_ino INTEGER NOT NULL,"
	  " exe_hash TEXT NOT NULL, run_dir TEXT NOT NULL, layer_dir TEXT NOT NULL);",
	  NULL, NULL },
	/* 2: the writable layer's size */
	{ NULL, "disk_mb", "INTEGER NOT NULL DEFAULT 1024" },
	/* 3: the snapshot a layer was restored from (or archived as) */
	{ NULL, "snapshot", "TEXT NOT NULL DEFAULT ''" },
	/* 4, 5: the serving process; a record from before names none (0): its
	 * bridge fails the identity check and is relaunched, not adopted */
	{ NULL, "serve_pid", "INTEGER NOT NULL DEFAULT 0" },
	{ NULL, "serve_start", "INTEGER NOT NULL DEFAULT 0" },
};
#define NMIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

static int
has_column(sqlite3 *db, const char *column)
{
	sqlite3_stmt *st = NULL;
	int found = 0;

	if (sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info('records') WHERE name = ?",
	    -1, &st, NULL) != SQLITE_OK)
		return -EIO;
	sqlite3_bind_text(st, 1, column, -1, SQLITE_STATIC);
	if (sqlite3_step(st) == SQLITE_ROW)
		found = 1;
	sqlite3_finalize(st);
	return found;
}

static int
migrate_one(sqlite3 *db, const struct migration *mg, int to)
{
	char sql[256];
	int r;

	if (mg->sql != NULL) {
		if (sqlite3_exec(db, mg->sql, NULL, NULL, NULL) != SQLITE_OK)
			return -EIO;
	} else {
		if ((r = has_column(db, mg->column)) < 0)
			return r;
		snprintf(sql, sizeof(sql), "ALTER TABLE records ADD COLUMN %s %s", mg->column,
		    mg->decl);
		if (r == 0 && sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
			return -EIO;
	}
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", to);
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

/* brings the file to NMIGRATIONS; -EPROTO for a file of a newer build */
static int
migrate(sqlite3 *db)
{
	sqlite3_stmt *st = NULL;
	int v = -1, r;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	if (v < 0)
		return -EIO;
	if (v > NMIGRATIONS) {
		log_warnx("records: schema version %d is newer than this build's (%d)", v,
		    NMIGRATIONS);
		return -EPROTO;
	}
	for (; v < NMIGRATIONS; v++) {
		if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
			return -EIO;
		if ((r = migrate_one(db, &migrations[v], v + 1)) != 0 ||
		    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
			log_warnx("records: migration to version %d: %s", v + 1, sqlite3_errmsg(db));
			sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
			return r ? r : -EIO;
		}
		log_info("records: migrated records.db to version %d", v + 1);
	}
	return 0;
}

static void
copy_text(char *dst, size_t cap, const unsigned char *src)
{
	size_t l;

	if (src == NULL) {
		dst[0] = '\0';
		return;
	}
	l = strlen((const char *)src);
	if (l >= cap)
		l = cap - 1;
	memcpy(dst, src, l);
	dst[l] = '\0';
}

static int
row_to_record(sqlite3_stmt *st, struct record *r)
{
	const char *state = (const char *)sqlite3_column_text(st, 6);

	memset(r, 0, sizeof(*r));
	copy_text(r->id.sandbox, sizeof(r->id.sandbox), sqlite3_column_text(st, 0));
	r->id.generation = (uint64_t)sqlite3_column_int64(st, 1);
	copy_text(r->id.worker, sizeof(r->id.worker), sqlite3_column_text(st, 2));
	copy_text(r->id.substrate, sizeof(r->id.substrate), sqlite3_column_text(st, 3));
	r->id.activation = (uint32_t)sqlite3_column_int64(st, 4);
	copy_text(r->id.resident, sizeof(r->id.resident), sqlite3_column_text(st, 5));
	if (state == NULL || exec_state_parse(state, &r->state) != 0)
		return -EINVAL;
	r->epoch = (uint64_t)sqlite3_column_int64(st, 7);
	r->slot = (uint32_t)sqlite3_column_int64(st, 8);
	r->uid_base = (uint32_t)sqlite3_column_int64(st, 9);
	copy_text(r->template_name, sizeof(r->template_name), sqlite3_column_text(st, 10));
	r->memory_mb = (uint32_t)sqlite3_column_int64(st, 11);
	r->pids = (uint32_t)sqlite3_column_int64(st, 12);
	r->cpu_percent = (uint32_t)sqlite3_column_int64(st, 13);
	r->disk_mb = (uint32_t)sqlite3_column_int64(st, 22);
	copy_text(r->snapshot, sizeof(r->snapshot), sqlite3_column_text(st, 23));
	r->bridge_pid = (pid_t)sqlite3_column_int64(st, 14);
	r->bridge_uid = (uid_t)sqlite3_column_int64(st, 15);
	r->bridge_start = (uint64_t)sqlite3_column_int64(st, 16);
	r->exe_dev = (uint64_t)sqlite3_column_int64(st, 17);
	r->exe_ino = (uint64_t)sqlite3_column_int64(st, 18);
	copy_text(r->exe_hash, sizeof(r->exe_hash), sqlite3_column_text(st, 19));
	copy_text(r->run_dir, sizeof(r->run_dir), sqlite3_column_text(st, 20));
	copy_text(r->layer_dir, sizeof(r->layer_dir), sqlite3_column_text(st, 21));
	r->serve_pid = (pid_t)sqlite3_column_int64(st, 24);
	r->serve_start = (uint64_t)sqlite3_column_int64(st, 25);
	return 0;
}

/* mirror helpers; rs->lock held */
static struct record *
mirror_find(struct mgr_records *rs, const char *sandbox)
{
	size_t i;

	for (i = 0; i < rs->n; i++)
		if (strcmp(rs->mirror[i].id.sandbox, sandbox) == 0)
			return &rs->mirror[i];
	return NULL;
}

static int
mirror_set(struct mgr_records *rs, const struct record *r)
{
	struct record *slot = mirror_find(rs, r->id.sandbox), *n;

	if (slot == NULL) {
		if (rs->n == rs->cap) {
			size_t nc = rs->cap ? rs->cap * 2 : 16;
			n = realloc(rs->mirror, nc * sizeof(*n));
			if (n == NULL)
				return -ENOMEM;
			rs->mirror = n;
			rs->cap = nc;
		}
		slot = &rs->mirror[rs->n++];
	}
	*slot = *r;
	return 0;
}

static void
ck_lock(void *arg)
{
	pthread_mutex_lock(&((struct mgr_records *)arg)->db_lock);
}

static void
ck_unlock(void *arg)
{
	pthread_mutex_unlock(&((struct mgr_records *)arg)->db_lock);
}

int
records_open(struct mgr *m, const char *path)
{
	struct mgr_records *rs;
	sqlite3_stmt *st = NULL;
	struct record r;
	int rc, ret = -EIO;

	if ((rs = calloc(1, sizeof(*rs))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&rs->lock, NULL);
	pthread_mutex_init(&rs->db_lock, NULL);
	pthread_cond_init(&rs->committed, NULL);
	m->records = rs;

	/* 0600 from the first byte, -wal and -shm too: not a chmod after */
	if ((rc = db_file_private(path)) < 0) {
		log_warnx("records: %s: %s", path, strerror(-rc));
		goto out;
	}
	if (sqlite3_open_v2(path, &rs->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL) != SQLITE_OK) {
		log_warnx("records: open %s: %s", path, sqlite3_errmsg(rs->db));
		goto out;
	}
	sqlite3_busy_timeout(rs->db, RECORDS_BUSY_MS);
	/* WAL + FULL: a commit is on disk when sqlite3_step returns, which is
	 * what "committed before acknowledged" relies on */
	if (sqlite3_exec(rs->db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;",
	    NULL, NULL, NULL) != SQLITE_OK) {
		log_warnx("records: %s", sqlite3_errmsg(rs->db));
		goto out;
	}
	if (migrate(rs->db) != 0)
		goto out;
	/* the log's blocks made once: a commit does not grow the file */
	if ((rc = db_wal_presize(rs->db, path)) < 0)
		log_warnx("records: %s-wal not grown ahead: %s", path, strerror(-rc));
	if (sqlite3_prepare_v2(rs->db, "SELECT sandbox, generation, worker, substrate, activation,"
	    " resident, state, epoch, slot, uid_base, template, memory_mb, pids, cpu_percent,"
	    " bridge_pid, bridge_uid, bridge_start, exe_dev, exe_ino, exe_hash, run_dir,"
	    " layer_dir, disk_mb, snapshot, serve_pid, serve_start FROM records", -1, &st,
	    NULL) != SQLITE_OK)
		goto out;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (row_to_record(st, &r) != 0) {
			log_warnx("records: a row with an unknown state; refusing to start");
			goto out;
		}
		if (mirror_set(rs, &r) != 0)
			goto out;
	}
	if (rc != SQLITE_DONE)
		goto out;
	/* its checkpoints in idle moments, not in an install's commit */
	if ((rc = db_ckpt_start(&rs->ckpt, rs->db, ck_lock, ck_unlock, rs,
	    "INSERT OR REPLACE INTO meta (k, v) VALUES ('wal_restart', 0)", RECORDS_BUSY_MS)) < 0)
		log_warnx("records: checkpoints left to SQLite: %s", strerror(-rc));
	ret = 0;
out:
	sqlite3_finalize(st);
	return ret;
}

void
records_close(struct mgr *m)
{
	struct mgr_records *rs = m->records;

	if (rs == NULL)
		return;
	m->records = NULL;
	db_ckpt_stop(&rs->ckpt);
	if (rs->commits)
		log_info("records: %llu records in %llu commits", (unsigned long long)rs->written,
		    (unsigned long long)rs->commits);
	sqlite3_close(rs->db);
	free(rs->mirror);
	pthread_cond_destroy(&rs->committed);
	pthread_mutex_destroy(&rs->db_lock);
	pthread_mutex_destroy(&rs->lock);
	free(rs);
}

int
records_get(struct mgr *m, const char *sandbox, struct record *out)
{
	struct mgr_records *rs = m->records;
	struct record *r;
	int ret = -ENOENT;

	pthread_mutex_lock(&rs->lock);
	if ((r = mirror_find(rs, sandbox)) != NULL) {
		*out = *r;
		ret = 0;
	}
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int
records_all(struct mgr *m, struct record **out, size_t *n)
{
	struct mgr_records *rs = m->records;
	int ret = 0;

	pthread_mutex_lock(&rs->lock);
	*n = rs->n;
	*out = malloc((rs->n ? rs->n : 1) * sizeof(**out));
	if (*out == NULL)
		ret = -ENOMEM;
	else if (rs->n)
		memcpy(*out, rs->mirror, rs->n * sizeof(**out));
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int
records_serving_brief(struct mgr *m, struct record_brief **out, size_t *n)
{
	struct mgr_records *rs = m->records;
	size_t i, len = 0, at, k = 0;
	struct record_brief *b;
	char *s;

	pthread_mutex_lock(&rs->lock);
	for (i = 0; i < rs->n; i++)
		if (rs->mirror[i].state == EXEC_SERVING) {
			len += strlen(rs->mirror[i].run_dir) + strlen(rs->mirror[i].layer_dir) + 2;
			k++;
		}
	*n = 0;
	at = k * sizeof(*b);
	if ((b = malloc(at + len + 1)) == NULL) {
		pthread_mutex_unlock(&rs->lock);
		*out = NULL;
		return -ENOMEM;
	}
	s = (char *)b;
	for (i = 0; i < rs->n; i++) {
		const struct record *r = &rs->mirror[i];
		size_t l1, l2;

		if (r->state != EXEC_SERVING)
			continue;
		l1 = strlen(r->run_dir) + 1;
		l2 = strlen(r->layer_dir) + 1;
		b[*n].id = r->id;
		b[*n].restored = r->snapshot[0] != '\0';
		memcpy(s + at, r->run_dir, l1);
		b[*n].run_dir = s + at;
		at += l1;
		memcpy(s + at, r->layer_dir, l2);
		b[*n].layer_dir = s + at;
		at += l2;
		(*n)++;
	}
	pthread_mutex_unlock(&rs->lock);
	*out = b;
	return 0;
}

/* one INSERT OR REPLACE of r, inside the caller's transaction or as
 * one of its own; db_lock held */
static int
put_one(sqlite3 *db, sqlite3_stmt *st, const struct record *r)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
	sqlite3_bind_text(st, 1, r->id.sandbox, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)r->id.generation);
	sqlite3_bind_text(st, 3, r->id.worker, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 4, r->id.substrate, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 5, r->id.activation);
	sqlite3_bind_text(st, 6, r->id.resident, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 7, exec_state_str(r->state), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)r->epoch);
	sqlite3_bind_int64(st, 9, r->slot);
	sqlite3_bind_int64(st, 10, r->uid_base);
	sqlite3_bind_text(st, 11, r->template_name, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 12, r->memory_mb);
	sqlite3_bind_int64(st, 13, r->pids);
	sqlite3_bind_int64(st, 14, r->cpu_percent);
	sqlite3_bind_int64(st, 15, r->bridge_pid);
	sqlite3_bind_int64(st, 16, r->bridge_uid);
	sqlite3_bind_int64(st, 17, (sqlite3_int64)r->bridge_start);
	sqlite3_bind_int64(st, 18, (sqlite3_int64)r->exe_dev);
	sqlite3_bind_int64(st, 19, (sqlite3_int64)r->exe_ino);
	sqlite3_bind_text(st, 20, r->exe_hash, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 21, r->run_dir, -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 22, r->layer_dir, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 23, r->disk_mb);
	sqlite3_bind_text(st, 24, r->snapshot, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 25, r->serve_pid);
	sqlite3_bind_int64(st, 26, (sqlite3_int64)r->serve_start);
	if (sqlite3_step(st) != SQLITE_DONE) {
		log_warnx("records: commit %s: %s", r->id.sandbox, sqlite3_errmsg(db));
		return -EIO;
	}
	return 0;
}

/* commit every record of batch, setting each one's ret: in one
 * transaction when there are several; should that fail, each alone, so
 * that one record the database refuses fails only its own caller.
 * db_lock held. */
static void
commit_batch(struct mgr_records *rs, struct pending *batch)
{
	sqlite3_stmt *st = NULL;
	struct pending *p;
	int ret = -EIO;

	if (sqlite3_prepare_v2(rs->db, "INSERT OR REPLACE INTO records (sandbox, generation,"
	    " worker, substrate, activation, resident, state, epoch, slot, uid_base, template,"
	    " memory_mb, pids, cpu_percent, bridge_pid, bridge_uid, bridge_start, exe_dev,"
	    " exe_ino, exe_hash, run_dir, layer_dir, disk_mb, snapshot, serve_pid, serve_start)"
	    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)", -1, &st, NULL) !=
	    SQLITE_OK) {
		log_warnx("records: %s", sqlite3_errmsg(rs->db));
		for (p = batch; p != NULL; p = p->next)
			p->ret = -EIO;
		return;
	}
	if (batch->next != NULL) {
		if (sqlite3_exec(rs->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK) {
			ret = 0;
			for (p = batch; p != NULL && ret == 0; p = p->next)
				ret = put_one(rs->db, st, &p->r);
			sqlite3_reset(st);
			if (ret == 0 && sqlite3_exec(rs->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
				ret = -EIO;
			if (ret != 0)
				sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
		}
		if (ret == 0) {
			for (p = batch; p != NULL; p = p->next) {
				p->ret = 0;
				rs->written++;
			}
			rs->commits++;
			goto out;
		}
		log_warnx("records: a group commit failed; committing its records one by one");
	}
	for (p = batch; p != NULL; p = p->next) {
		if ((p->ret = put_one(rs->db, st, &p->r)) == 0) {
			rs->written++;
			rs->commits++;
		}
	}
out:
	sqlite3_finalize(st);
}

/* queue me and return once it is committed (or failed); rs->lock held
 * on entry and on return */
static int
put_locked(struct mgr *m, struct mgr_records *rs, struct pending *me)
{
	struct pending *batch, *p;
	uint64_t commits, written;

	if (rs->tail != NULL)
		rs->tail->next = me;
	else
		rs->head = me;
	rs->tail = me;
	while (!me->done) {
		if (rs->batch != NULL) {
			/* a commit is on disk: ours goes in the next one */
			pthread_cond_wait(&rs->committed, &rs->lock);
			continue;
		}
		/* no commit running: this caller commits all that is queued
		 * (its own record among them) */
		batch = rs->batch = rs->head;
		rs->head = rs->tail = NULL;
		pthread_mutex_unlock(&rs->lock);
		pthread_mutex_lock(&rs->db_lock);
		commits = rs->commits;
		written = rs->written;
		commit_batch(rs, batch);
		commits = rs->commits - commits;
		written = rs->written - written;
		pthread_mutex_unlock(&rs->db_lock);
		while (m->metrics != NULL && commits-- > 0)
			metrics_inc(m, MC_RECORD_COMMITS);
		while (m->metrics != NULL && written-- > 0)
			metrics_inc(m, MC_RECORDS_WRITTEN);
		pthread_mutex_lock(&rs->lock);
		/* only a committed record becomes visible to admission, in
		 * commit order; each caller is woken once its record is there */
		for (p = batch; p != NULL; p = p->next) {
			if (p->ret == 0)
				p->ret = mirror_set(rs, &p->r);
			p->done = true;
		}
		rs->batch = NULL;
		pthread_cond_broadcast(&rs->committed);
	}
	return me->ret;
}

int
records_put(struct mgr *m, const struct record *r)
{
	struct mgr_records *rs = m->records;
	struct pending me;
	int ret;

	memset(&me, 0, sizeof(me));
	me.r = *r;
	pthread_mutex_lock(&rs->lock);
	ret = put_locked(m, rs, &me);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

/* whether r holds its slot: live (not retired / failed), and of another
 * sandbox than `sandbox` when one is named */
static bool
holds_slot(const struct record *r, const char *sandbox)
{
	return r->state != EXEC_RETIRED && r->state != EXEC_FAILED &&
	    (sandbox == NULL || strcmp(r->id.sandbox, sandbox) != 0);
}

/* the first slot below nslots that no live (not retired / failed) record
 * of another sandbox than `sandbox` holds, committed or on its way to be;
 * nslots when none. One pass over the records, not one per slot: a full
 * worker of 1,000 sandboxes would otherwise compare a million times per
 * install. rs->lock held */
static uint32_t
first_free_slot(struct mgr_records *rs, const char *sandbox, uint32_t nslots)
{
	const struct pending *lists[2] = { rs->batch, rs->head }, *p;
	uint8_t used[MGR_CAPACITY_MAX / 8] = { 0 };
	uint32_t s;
	size_t i;
	int l;

	for (i = 0; i < rs->n; i++)
		if (rs->mirror[i].slot < nslots && holds_slot(&rs->mirror[i], NULL))
			used[rs->mirror[i].slot / 8] |= (uint8_t)(1u << (rs->mirror[i].slot % 8));
	for (l = 0; l < 2; l++)
		for (p = lists[l]; p != NULL; p = p->next)
			if (p->r.slot < nslots && holds_slot(&p->r, sandbox))
				used[p->r.slot / 8] |= (uint8_t)(1u << (p->r.slot % 8));
	for (s = 0; s < nslots; s++)
		if (!(used[s / 8] & (1u << (s % 8))) && !(rs->reserved[s / 8] & (1u << (s % 8))) &&
		    rs->draining[s] == 0)
			break;
	return s;
}

/* whether slot is held by a live record of another sandbox than
 * `sandbox` (committed or on its way to be) or reserved for a prepared
 * jail. rs->lock held */
static bool
slot_held(struct mgr_records *rs, uint32_t slot, const char *sandbox)
{
	const struct pending *lists[2] = { rs->batch, rs->head }, *p;
	size_t i;
	int l;

	if (slot >= MGR_CAPACITY_MAX || (rs->reserved[slot / 8] & (1u << (slot % 8))) ||
	    rs->draining[slot] != 0)
		return true;
	for (i = 0; i < rs->n; i++)
		if (rs->mirror[i].slot == slot && holds_slot(&rs->mirror[i], sandbox))
			return true;
	for (l = 0; l < 2; l++)
		for (p = lists[l]; p != NULL; p = p->next)
			if (p->r.slot == slot && holds_slot(&p->r, sandbox))
				return true;
	return false;
}

static uint32_t
slot_count(const struct mgr *m)
{
	uint32_t nslots = m->cfg.uid_windows * MGR_SLOTS_MAX;

	return nslots > MGR_CAPACITY_MAX ? MGR_CAPACITY_MAX : nslots;
}

int
records_slot_reserve(struct mgr *m, uint32_t *slot)
{
	struct mgr_records *rs = m->records;
	uint32_t s;

	pthread_mutex_lock(&rs->lock);
	/* a name no sandbox has: no record's slot is its own */
	s = first_free_slot(rs, "", slot_count(m));
	if (s < slot_count(m))
		rs->reserved[s / 8] |= (uint8_t)(1u << (s % 8));
	pthread_mutex_unlock(&rs->lock);
	if (s >= slot_count(m))
		return -ENOSPC;
	*slot = s;
	return 0;
}

void
records_slot_release(struct mgr *m, uint32_t slot)
{
	struct mgr_records *rs = m->records;

	if (slot >= slot_count(m))
		return;
	pthread_mutex_lock(&rs->lock);
	rs->reserved[slot / 8] &= (uint8_t)~(1u << (slot % 8));
	pthread_mutex_unlock(&rs->lock);
}

void
records_slot_draining(struct mgr *m, uint32_t slot)
{
	struct mgr_records *rs = m->records;

	if (slot >= MGR_CAPACITY_MAX)
		return;
	pthread_mutex_lock(&rs->lock);
	if (rs->draining[slot] < UINT8_MAX)
		rs->draining[slot]++;
	pthread_mutex_unlock(&rs->lock);
}

void
records_slot_drained(struct mgr *m, uint32_t slot)
{
	struct mgr_records *rs = m->records;

	if (slot >= MGR_CAPACITY_MAX)
		return;
	pthread_mutex_lock(&rs->lock);
	if (rs->draining[slot] > 0)
		rs->draining[slot]--;
	pthread_mutex_unlock(&rs->lock);
}

/* r on slot, queued and committed; rs->lock held, released */
static int
put_on_slot(struct mgr *m, struct mgr_records *rs, struct record *r,
    uint32_t uid_window, uint32_t slot)
{
	struct pending me;
	int ret;

	r->slot = slot;
	r->uid_base = uid_base_for(uid_window, slot);
	memset(&me, 0, sizeof(me));
	me.r = *r;
	ret = put_locked(m, rs, &me);
	pthread_mutex_unlock(&rs->lock);
	return ret;
}

int
records_put_claimed(struct mgr *m, struct record *r, uint32_t uid_window, uint32_t slot)
{
	struct mgr_records *rs = m->records;

	if (slot >= slot_count(m))
		return -EINVAL;
	pthread_mutex_lock(&rs->lock);
	if (mirror_find(rs, r->id.sandbox) != NULL ||
	    !(rs->reserved[slot / 8] & (1u << (slot % 8)))) {
		pthread_mutex_unlock(&rs->lock);
		return -EEXIST;
	}
	/* from the pool's to the record's in one step under the lock */
	rs->reserved[slot / 8] &= (uint8_t)~(1u << (slot % 8));
	return put_on_slot(m, rs, r, uid_window, slot);
}

int
records_put_slotted(struct mgr *m, struct record *r, uint32_t uid_window)
{
	struct mgr_records *rs = m->records;
	struct record *own;
	uint32_t s, nslots = m->cfg.uid_windows * MGR_SLOTS_MAX;

	if (nslots > MGR_CAPACITY_MAX)
		nslots = MGR_CAPACITY_MAX;
	pthread_mutex_lock(&rs->lock);
	/* a sandbox keeps its uid range across generations, unless another
	 * sandbox took that slot while this one was away (retired or failed
	 * here): two live sandboxes never share a uid range, an address or a
	 * chain. A new slot costs the bridge a shift of the layer's owners. */
	if ((own = mirror_find(rs, r->id.sandbox)) != NULL && own->slot < nslots &&
	    !slot_held(rs, own->slot, r->id.sandbox))
		s = own->slot;
	else
		s = first_free_slot(rs, r->id.sandbox, nslots);
	if (s >= nslots) {
		pthread_mutex_unlock(&rs->lock);
		return -ENOSPC;
	}
	/* queued under the same lock: the next install that looks for a
	 * slot sees this one taken */
	return put_on_slot(m, rs, r, uid_window, s);
}

int
records_meta_get(struct mgr *m, const char *key, uint64_t *val)
{
	struct mgr_records *rs = m->records;
	sqlite3_stmt *st = NULL;
	int rc, ret = -EIO;

	pthread_mutex_lock(&rs->db_lock);
	if (sqlite3_prepare_v2(rs->db, "SELECT v FROM meta WHERE k = ?", -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*val = (uint64_t)sqlite3_column_int64(st, 0);
		ret = 0;
	} else if (rc == SQLITE_DONE)
		ret = -ENOENT;
out:
	sqlite3_finalize(st);
	pthread_mutex_unlock(&rs->db_lock);
	return ret;
}

int
records_meta_set(struct mgr *m, const char *key, uint64_t val)
{
	struct mgr_records *rs = m->records;
	sqlite3_stmt *st = NULL;
	int ret = -EIO;

	pthread_mutex_lock(&rs->db_lock);
	/* no fsync of its own: the log is written in order, so the next
	 * record's commit makes this one durable with it, and a power loss
	 * before that leaves an older value, which is only where re-applying
	 * starts (sbx-manager.h). Its fsync ran beside the control plane's
	 * commit of the report, on the same disk, and held db_lock (so the
	 * next install's commit) meanwhile. */
	if (sqlite3_exec(rs->db, "PRAGMA synchronous=OFF", NULL, NULL, NULL) != SQLITE_OK)
		goto out;
	if (sqlite3_prepare_v2(rs->db, "INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)",
	    -1, &st, NULL) != SQLITE_OK)
		goto out;
	sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)val);
	if (sqlite3_step(st) == SQLITE_DONE)
		ret = 0;
out:
	sqlite3_finalize(st);
	/* every other write of this connection is durable when it returns */
	if (sqlite3_exec(rs->db, "PRAGMA synchronous=FULL", NULL, NULL, NULL) != SQLITE_OK) {
		log_warnx("records: cannot set synchronous=FULL again: %s", sqlite3_errmsg(rs->db));
		fatalx("records: commits would not be durable");
	}
	pthread_mutex_unlock(&rs->db_lock);
	return ret;
}
