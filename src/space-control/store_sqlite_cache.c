/* The SQLite backend's prepared statements, kept (store_sqlite.h,
 * sq_stmt_take and sq_stmt_release). sq_prep used to compile every
 * statement again at every call and sqlite3_finalize it after; a kept
 * statement is compiled once per connection and SQL text.
 *
 * Keyed by the connection and the SQL text's content (a hash and strcmp,
 * never the pointer alone: a text built in a buffer may later hold another
 * one at the same address). A kept statement handed out is marked in use
 * until it is released; a second take of the same text meanwhile (a loop
 * stepping rows that calls another store function preparing it) gets a
 * fresh statement of its own that its release finalizes. Release resets
 * the statement and clears its bindings at once, so a kept SELECT never
 * holds its read transaction (and the WAL snapshot) open between uses.
 *
 * Bounded: at most SQ_STMT_MAX kept statements in the process (the store
 * has about a hundred texts); once full, a new text is prepared and
 * finalized as before. One mutex of its own guards the table, so it does
 * not depend on the caller holding the connection's lock. sq_stmt_clear
 * finalizes a connection's statements: after the schema migrations, and
 * before the connection is closed. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sqlite3.h>

#include "log.h"
#include "store_sqlite.h"

#define SQ_STMT_MAX 256

struct kept {
	sqlite3 *db;            /* NULL: a free slot */
	sqlite3_stmt *st;
	char *sql;
	uint64_t hash;
	int busy;
};

static struct kept kept[SQ_STMT_MAX];
static int nkept;               /* slots [0, nkept) may be used */
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t
sql_hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 1099511628211ULL;
	return h;
}

sqlite3_stmt *
sq_stmt_take(sqlite3 *db, const char *sql)
{
	sqlite3_stmt *st = NULL;
	uint64_t h = sql_hash(sql);
	int i, found_busy = 0;
	char *copy;

	pthread_mutex_lock(&kept_mu);
	for (i = 0; i < nkept; i++) {
		struct kept *k = &kept[i];

		if (k->db != db || k->hash != h || strcmp(k->sql, sql) != 0)
			continue;
		if (k->busy) {
			found_busy = 1;
			continue;
		}
		k->busy = 1;
		st = k->st;
		break;
	}
	pthread_mutex_unlock(&kept_mu);
	if (st != NULL) {
		/* released reset and cleared; again here so a take never sees
		 * a half-run statement or an old binding */
		sqlite3_reset(st);
		sqlite3_clear_bindings(st);
		return st;
	}
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		log_warnx("store: prepare: %s", sqlite3_errmsg(db));
		sqlite3_finalize(st);
		return NULL;
	}
	/* in use by an outer caller: this one is its own, finalized on release */
	if (found_busy)
		return st;
	if ((copy = strdup(sql)) == NULL)
		return st;
	pthread_mutex_lock(&kept_mu);
	for (i = 0; i < nkept && kept[i].db != NULL; i++)
		;
	if (i == nkept && nkept < SQ_STMT_MAX)
		nkept++;
	if (i < nkept) {
		kept[i] = (struct kept){ .db = db, .st = st, .sql = copy, .hash = h,
		    .busy = 1 };
		copy = NULL;
	}
	pthread_mutex_unlock(&kept_mu);
	free(copy);             /* full: not kept, finalized on release */
	return st;
}

void
sq_stmt_release(sqlite3_stmt *st)
{
	int i;

	if (st == NULL)
		return;
	pthread_mutex_lock(&kept_mu);
	for (i = 0; i < nkept; i++) {
		if (kept[i].db != NULL && kept[i].st == st) {
			/* reset under the table's lock, so no other thread
			 * takes it half reset (the order is always this lock,
			 * then the connection's own mutex) */
			sqlite3_reset(st);
			sqlite3_clear_bindings(st);
			kept[i].busy = 0;
			pthread_mutex_unlock(&kept_mu);
			return;
		}
	}
	pthread_mutex_unlock(&kept_mu);
	sqlite3_finalize(st);
}

int
sq_stmt_clear(sqlite3 *db)
{
	int i, left = 0;

	pthread_mutex_lock(&kept_mu);
	for (i = 0; i < nkept; i++) {
		struct kept *k = &kept[i];

		if (k->db != db)
			continue;
		if (k->busy)
			/* a caller still holds it: dropped from the table
			 * here, so its release finalizes it */
			left++;
		else
			sqlite3_finalize(k->st);
		free(k->sql);
		*k = (struct kept){ 0 };
	}
	while (nkept > 0 && kept[nkept - 1].db == NULL)
		nkept--;
	pthread_mutex_unlock(&kept_mu);
	return left;
}

int
sq_stmt_count(sqlite3 *db)
{
	int i, n = 0;

	pthread_mutex_lock(&kept_mu);
	for (i = 0; i < nkept; i++)
		n += kept[i].db == db;
	pthread_mutex_unlock(&kept_mu);
	return n;
}
