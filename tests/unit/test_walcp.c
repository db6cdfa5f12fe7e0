/* walcp.c: the WAL's checkpoints run in a thread of their own, the WAL
 * stays bounded under writes without a pause, and nothing committed is
 * lost across the checkpoints, the stop and a reopen. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "log.h"
#include "tap.h"
#include "walcp.h"

#define PAGES 64
#define ROWS 3000

static long long
size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int
count_rows(const char *path)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	int n = -1;

	if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, "SELECT COUNT(*) FROM t", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(h);
	return n;
}

int
main(void)
{
	char dir[] = "/tmp/test_walcp.XXXXXX", db[256], wal[256], missing[256], cmd[300];
	unsigned long runs, inl;
	long long wal_max = 0, wal_bound;
	sqlite3 *h = NULL;
	sqlite3_stmt *ins = NULL;
	struct walcp *w;
	char blob[3000];
	int i, bad = 0;

	log_init("test_walcp", 0);
	if (mkdtemp(dir) == NULL) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	snprintf(db, sizeof(db), "%s/x.db", dir);
	snprintf(wal, sizeof(wal), "%s/x.db-wal", dir);
	snprintf(missing, sizeof(missing), "%s/none.db", dir);
	ok(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"
	    "CREATE TABLE t (i INTEGER PRIMARY KEY, b BLOB);", NULL, NULL, NULL) == SQLITE_OK,
	    "a database in WAL mode");

	ok(walcp_start(h, missing, PAGES) == NULL, "no checkpoint thread for a file that is not there");
	ok(access(missing, F_OK) != 0, "... and it is not created");

	w = walcp_start(h, db, PAGES);
	ok(w != NULL, "a checkpoint thread for the database");
	memset(blob, 'x', sizeof(blob));
	sqlite3_prepare_v2(h, "INSERT INTO t (b) VALUES (?)", -1, &ins, NULL);
	for (i = 0; i < ROWS; i++) {
		long long z;

		sqlite3_bind_blob(ins, 1, blob, sizeof(blob), SQLITE_STATIC);
		if (sqlite3_step(ins) != SQLITE_DONE)
			bad++;
		sqlite3_reset(ins);
		if ((z = size_of(wal)) > wal_max)
			wal_max = z;
		/* a pause now and then, as between requests */
		if (i % 100 == 99)
			usleep(20000);
	}
	sqlite3_finalize(ins);
	is_int(bad, 0, "%d commits, one row each", ROWS);
	runs = walcp_runs(w, &inl);
	ok(runs > 0, "checkpoints ran in the thread (%lu; %lu by commits far behind)", runs, inl);
	/* the WAL restarts after a complete checkpoint: at most the inline
	 * bound (4 x PAGES frames) and what came in meanwhile */
	wal_bound = 8LL * PAGES * (4096 + 24) + 32;
	ok(wal_max > 0 && wal_max <= wal_bound, "the WAL stayed bounded: %lld bytes at most (bound %lld)",
	    wal_max, wal_bound);
	walcp_stop(w);
	walcp_stop(NULL);
	ok(sqlite3_close(h) == SQLITE_OK, "stopped, then the database closes");
	is_int(count_rows(db), ROWS, "every committed row is there after a reopen");

	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		diag("cannot remove %s", dir);
	return done_testing();
}
