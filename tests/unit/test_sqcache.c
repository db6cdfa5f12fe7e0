/* store_sqlite_cache.c: space-control's kept prepared statements. A text
 * is compiled once per connection and handed out again reset and
 * unbound; a text in use gets a statement of its own; texts compare by
 * content; a release ends the statement's read (the WAL snapshot moves
 * on); a schema change under a kept statement is seen; clear finalizes,
 * so the connection closes (SQLITE_OK, not SQLITE_BUSY). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "../../src/space-control/store_sqlite_cache.c"
#include "tap.h"

static int64_t
one_int(sqlite3_stmt *st)
{
	int64_t v = -1;

	if (st && sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	return v;
}

int
main(void)
{
	char dir[] = "/tmp/test_sqcache.XXXXXX", path[64], buf[64];
	sqlite3 *db, *db2, *other;
	sqlite3_stmt *a, *b, *c;
	int i, rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/t.db", dir);
	ok(sqlite3_open(path, &db) == SQLITE_OK, "open");
	sqlite3_exec(db, "PRAGMA journal_mode = WAL; CREATE TABLE t (k INTEGER, v INTEGER);"
	    "INSERT INTO t VALUES (1, 10), (2, 20), (3, 30);", NULL, NULL, NULL);

	a = sq_stmt_take(db, "SELECT v FROM t WHERE k = ?");
	sqlite3_bind_int(a, 1, 2);
	ok(one_int(a) == 20, "first take binds and steps");
	sq_stmt_release(a);
	ok(sq_stmt_count(db) == 1, "the text is kept");
	b = sq_stmt_take(db, "SELECT v FROM t WHERE k = ?");
	ok(b == a, "a second take of the text gets the kept statement");
	ok(sqlite3_bind_parameter_count(b) == 1 && sqlite3_stmt_busy(b) == 0,
	    "handed out reset");
	ok(one_int(b) == -1, "and unbound (k = NULL matches no row)");
	sq_stmt_release(b);

	/* re-entrancy: held by an outer loop, an inner take is another one */
	a = sq_stmt_take(db, "SELECT v FROM t WHERE k >= ? ORDER BY k");
	sqlite3_bind_int(a, 1, 1);
	ok(sqlite3_step(a) == SQLITE_ROW && sqlite3_column_int(a, 0) == 10, "outer: first row");
	b = sq_stmt_take(db, "SELECT v FROM t WHERE k >= ? ORDER BY k");
	ok(b != NULL && b != a, "a text in use is prepared again, not handed out twice");
	sqlite3_bind_int(b, 1, 3);
	ok(one_int(b) == 30, "inner statement runs on its own bindings");
	sq_stmt_release(b);
	ok(sqlite3_step(a) == SQLITE_ROW && sqlite3_column_int(a, 0) == 20,
	    "outer loop goes on where it was");
	sq_stmt_release(a);
	ok(sq_stmt_count(db) == 2, "the inner one was not kept (finalized at its release)");

	/* content, not the pointer: a buffer reused for another text */
	snprintf(buf, sizeof(buf), "SELECT %d", 7);
	a = sq_stmt_take(db, buf);
	ok(one_int(a) == 7, "a text in a buffer");
	sq_stmt_release(a);
	snprintf(buf, sizeof(buf), "SELECT %d", 8);
	a = sq_stmt_take(db, buf);
	ok(one_int(a) == 8, "the same buffer with another text is another statement");
	sq_stmt_release(a);

	/* per connection: another connection never gets this one's */
	ok(sqlite3_open(path, &db2) == SQLITE_OK, "second connection");
	a = sq_stmt_take(db2, "SELECT v FROM t WHERE k = ?");
	ok(a != NULL && sqlite3_db_handle(a) == db2, "kept per connection");
	sq_stmt_release(a);

	/* a release ends the read even with rows left: no read transaction
	 * (WAL snapshot) stays open on the connection between uses */
	a = sq_stmt_take(db, "SELECT v FROM t ORDER BY k");
	ok(sqlite3_step(a) == SQLITE_ROW && sqlite3_txn_state(db, NULL) == SQLITE_TXN_READ,
	    "a row stepped: the read is open");
	sq_stmt_release(a);
	ok(sqlite3_txn_state(db, NULL) == SQLITE_TXN_NONE && sqlite3_stmt_busy(a) == 0,
	    "released with rows left: the read is over");
	a = sq_stmt_take(db, "SELECT COUNT(*) FROM t");
	ok(one_int(a) == 3, "count before");
	sq_stmt_release(a);
	ok(sqlite3_open(path, &other) == SQLITE_OK &&
	    sqlite3_exec(other, "INSERT INTO t VALUES (4, 40)", NULL, NULL, NULL) == SQLITE_OK,
	    "another connection writes (a kept statement holds no read lock)");
	a = sq_stmt_take(db, "SELECT COUNT(*) FROM t");
	ok(one_int(a) == 4, "the kept statement sees the new row");
	sq_stmt_release(a);

	/* a schema change under a kept statement (another connection's) */
	ok(sqlite3_exec(other, "ALTER TABLE t ADD COLUMN w INTEGER NOT NULL DEFAULT 5;"
	    "DROP TABLE IF EXISTS u; CREATE TABLE u (x)", NULL, NULL, NULL) == SQLITE_OK,
	    "schema changed by another connection");
	a = sq_stmt_take(db, "SELECT v FROM t WHERE k = ?");
	sqlite3_bind_int(a, 1, 4);
	ok(one_int(a) == 40, "kept statement runs after the schema change");
	sq_stmt_release(a);
	ok(sqlite3_exec(other, "DROP TABLE t; CREATE TABLE t (k INTEGER, v INTEGER);"
	    "INSERT INTO t VALUES (2, 99)", NULL, NULL, NULL) == SQLITE_OK, "table rebuilt");
	a = sq_stmt_take(db, "SELECT v FROM t WHERE k = ?");
	sqlite3_bind_int(a, 1, 2);
	ok(one_int(a) == 99, "kept statement reads the rebuilt table");
	sq_stmt_release(a);
	sqlite3_close(other);

	/* a failing text is never kept */
	ok(sq_stmt_take(db, "SELECT nope FROM nowhere") == NULL, "a bad text: NULL");

	/* bounded: many distinct texts, the table never exceeds its size */
	for (i = 0; i < SQ_STMT_MAX + 40; i++) {
		snprintf(buf, sizeof(buf), "SELECT %d", 1000 + i);
		a = sq_stmt_take(db, buf);
		if (one_int(a) != 1000 + i)
			break;
		sq_stmt_release(a);
	}
	ok(i == SQ_STMT_MAX + 40, "every text ran, kept or not");
	ok(sq_stmt_count(db) + sq_stmt_count(db2) <= SQ_STMT_MAX, "kept at most %d", SQ_STMT_MAX);

	/* clear: a held statement is dropped and finalized by its release */
	(void)sq_stmt_clear(db);
	c = sq_stmt_take(db, "SELECT k FROM t");
	ok(sq_stmt_clear(db) == 1 && sq_stmt_count(db) == 0, "clear: one still held, none kept");
	ok(one_int(c) == 2, "the held statement still runs");
	sq_stmt_release(c);
	rc = sqlite3_close(db);
	ok(rc == SQLITE_OK, "connection closes: nothing left unfinalized (%d)", rc);
	(void)sq_stmt_clear(db2);
	ok(sqlite3_close(db2) == SQLITE_OK, "second connection closes");

	snprintf(buf, sizeof(buf), "rm -rf %s", dir);
	if (system(buf) != 0)
		return 1;
	return done_testing();
}
