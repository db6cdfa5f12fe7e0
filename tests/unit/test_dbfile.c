/* dbfile.c: SQLite databases and their -wal / -shm are 0600 whatever the
 * umask, and a wider file left by an earlier run is narrowed. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "dbfile.h"
#include "log.h"
#include "tap.h"

static unsigned
mode_of(const char *path)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return 01000000;        /* no such file: never a valid mode */
	return st.st_mode & 07777;
}

static void
make(const char *path, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);

	if (fd >= 0) {
		fchmod(fd, mode);
		close(fd);
	}
}

static long long
size_of(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static int
count_rows(sqlite3 *h)
{
	sqlite3_stmt *st = NULL;
	int n = -1;

	if (sqlite3_prepare_v2(h, "SELECT count(*) FROM t", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int(st, 0);
	sqlite3_finalize(st);
	return n;
}

static bool
integrity_ok(sqlite3 *h)
{
	sqlite3_stmt *st = NULL;
	bool fine = sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(st, 0), "ok") == 0;

	sqlite3_finalize(st);
	return fine;
}

static bool
copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	bool good = true;

	if (in < 0)
		return false;
	if ((out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		close(in);
		return false;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			good = false;
	close(in);
	close(out);
	return good && n == 0;
}

/* db_wal_presize: the log grown with zeros after its last byte, and what
 * it holds still what SQLite finds, running and after a crash */
static void
wal_presize(const char *dir)
{
	char db[256], wal[256], cdb[256], cwal[256];
	sqlite3 *h = NULL, *c = NULL;
	long long want = 32 + (1000 + 250) * (4096 + 24), before;
	int i;

	snprintf(db, sizeof(db), "%s/p.db", dir);
	snprintf(wal, sizeof(wal), "%s/p.db-wal", dir);
	snprintf(cdb, sizeof(cdb), "%s/crash.db", dir);
	snprintf(cwal, sizeof(cwal), "%s/crash.db-wal", dir);
	ok(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, "PRAGMA page_size=4096; PRAGMA journal_mode=WAL; "
	    "PRAGMA synchronous=FULL; CREATE TABLE t(x); INSERT INTO t VALUES(1);",
	    NULL, NULL, NULL) == SQLITE_OK, "presize: a database in WAL mode with a row");
	before = size_of(wal);
	ok(before > 0 && before < want, "presize: its log is short (%lld bytes)", before);
	is_int(db_wal_presize(h, db), 0, "presize: grown");
	is_int((int)(size_of(wal) == want), 1, "presize: the log is %lld bytes (%lld wanted)",
	    size_of(wal), want);
	is_int(db_wal_presize(h, db), 0, "presize: again, nothing to do");
	is_int((int)(size_of(wal) == want), 1, "presize: ... still %lld bytes", size_of(wal));
	is_int(count_rows(h), 1, "presize: the row written before is read");
	for (i = 0; i < 20; i++)
		sqlite3_exec(h, "INSERT INTO t VALUES(randomblob(3000))", NULL, NULL, NULL);
	is_int(count_rows(h), 21, "presize: 20 commits after it are read");
	is_int((int)(size_of(wal) == want), 1, "presize: they went into the blocks made ahead");

	/* a crash now: the database and its log as they are on disk, opened
	 * by a new process (the copy), whose recovery reads the frames up to
	 * the zeros */
	ok(copy_file(db, cdb) && copy_file(wal, cwal), "presize: the files copied as a crash leaves them");
	ok(sqlite3_open_v2(cdb, &c, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK,
	    "presize: the copy opens");
	is_int(count_rows(c), 21, "presize: recovery finds all 21 committed rows, no more");
	ok(integrity_ok(c), "presize: integrity_check of the recovered copy says ok");
	sqlite3_close(c);

	/* a second connection (another process's, as a subcommand's) is held
	 * off by the write lock the growth takes */
	ok(sqlite3_open_v2(db, &c, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_exec(c, "BEGIN IMMEDIATE", NULL, NULL, NULL) == SQLITE_OK,
	    "presize: another connection holds the write lock");
	sqlite3_busy_timeout(h, 0);
	is_int(db_wal_presize(h, db), -EBUSY, "presize: refused while another writes (-EBUSY)");
	sqlite3_exec(c, "COMMIT", NULL, NULL, NULL);
	sqlite3_close(c);
	is_int(db_wal_presize(h, ":memory:"), 0, "presize: \":memory:\" has no log");
	sqlite3_close(h);
	unlink(cdb);
	unlink(cwal);
}

static pthread_mutex_t ck_mu = PTHREAD_MUTEX_INITIALIZER;

static void
ck_lock(void *arg)
{
	pthread_mutex_lock(arg);
}

static void
ck_unlock(void *arg)
{
	pthread_mutex_unlock(arg);
}

static void
exec_locked(sqlite3 *h, const char *sql)
{
	pthread_mutex_lock(&ck_mu);
	sqlite3_exec(h, sql, NULL, NULL, NULL);
	pthread_mutex_unlock(&ck_mu);
}

/* db_ckpt: the checkpoint in an idle moment, the log restarted by the
 * touch write, and the commit beyond DB_CKPT_HARD still checkpointing */
static void
wal_ckpt(const char *dir)
{
	char db[256];
	sqlite3 *h = NULL;
	struct db_ckpt k;
	int i, n;

	snprintf(db, sizeof(db), "%s/ck.db", dir);
	ok(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_FULLMUTEX, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
	    "CREATE TABLE t(x); CREATE TABLE meta (k TEXT PRIMARY KEY, v INTEGER);",
	    NULL, NULL, NULL) == SQLITE_OK, "ckpt: a database in WAL mode");
	is_int(db_ckpt_start(&k, h, ck_lock, ck_unlock, &ck_mu,
	    "INSERT OR REPLACE INTO meta (k, v) VALUES ('wal_restart', 0)", 1000), 0,
	    "ckpt: the idle thread started");
	/* the commits under the connection's lock, as a daemon's: the thread
	 * waits for it, then finds the last commit too recent */
	pthread_mutex_lock(&ck_mu);
	for (i = 0; i < DB_CKPT_SOFT + 20; i++)
		sqlite3_exec(h, "INSERT INTO t VALUES (randomblob(100))", NULL, NULL, NULL);
	pthread_mutex_unlock(&ck_mu);
	ok(atomic_load(&k.frames) >= DB_CKPT_SOFT, "ckpt: %d frames in the log after %d commits",
	    atomic_load(&k.frames), i);
	is_int((int)atomic_load(&k.idle_runs), 0, "ckpt: none while the commits came one after another");
	/* an idle moment: the thread's tick, then the idle time */
	for (n = 0; n < 40 && atomic_load(&k.idle_runs) == 0; n++)
		usleep(50 * 1000);
	is_int((int)atomic_load(&k.idle_runs), 1, "ckpt: one checkpoint in the idle moment");
	ok(atomic_load(&k.frames) > 0 && atomic_load(&k.frames) <= 2,
	    "ckpt: the touch write restarted the log (%d frames)", atomic_load(&k.frames));
	exec_locked(h, "INSERT INTO t VALUES (1)");
	ok(atomic_load(&k.frames) > 0 && atomic_load(&k.frames) <= 3,
	    "ckpt: the next commit went to the start of the log (%d frames)",
	    atomic_load(&k.frames));
	is_int(count_rows(h), DB_CKPT_SOFT + 21, "ckpt: every row is there");

	/* no idle moment: the commit past DB_CKPT_HARD checkpoints, as
	 * SQLite's own hook did */
	pthread_mutex_lock(&ck_mu);
	for (i = 0; i < DB_CKPT_HARD + 50; i++)
		sqlite3_exec(h, "INSERT INTO t VALUES (randomblob(100))", NULL, NULL, NULL);
	pthread_mutex_unlock(&ck_mu);
	ok(atomic_load(&k.inline_runs) >= 1, "ckpt: %u checkpoint(s) by the commit past %d frames",
	    atomic_load(&k.inline_runs), DB_CKPT_HARD);
	ok(atomic_load(&k.frames) < DB_CKPT_HARD, "ckpt: the log restarted (%d frames)",
	    atomic_load(&k.frames));
	db_ckpt_stop(&k);
	is_int(count_rows(h), DB_CKPT_SOFT + 21 + DB_CKPT_HARD + 50, "ckpt: stopped; every row is there");
	ok(integrity_ok(h), "ckpt: integrity_check says ok");
	sqlite3_close(h);
}

int
main(void)
{
	char dir[] = "/tmp/test_dbfile.XXXXXX", db[256], wal[256], shm[256], cmd[300];
	sqlite3 *h = NULL;

	log_init("test_dbfile", 0);
	if (mkdtemp(dir) == NULL) {
		ok(0, "mkdtemp");
		return done_testing();
	}
	snprintf(db, sizeof(db), "%s/x.db", dir);
	snprintf(wal, sizeof(wal), "%s/x.db-wal", dir);
	snprintf(shm, sizeof(shm), "%s/x.db-shm", dir);

	/* the umask a daemon may inherit does not widen the file */
	umask(0);
	is_int(db_file_private(db), 0, "a missing database is created");
	is_int(mode_of(db), 0600, "... 0600 under umask 0");
	ok(mode_of(wal) == 01000000 && mode_of(shm) == 01000000, "... and no -wal / -shm invented");

	/* SQLite in WAL mode: its -wal and -shm follow the database's mode */
	ok(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t VALUES(1);",
	    NULL, NULL, NULL) == SQLITE_OK, "sqlite writes the database in WAL mode");
	is_int(mode_of(wal), 0600, "-wal created 0600 by sqlite (umask 0)");
	is_int(mode_of(shm), 0600, "-shm created 0600 by sqlite (umask 0)");
	sqlite3_close(h);
	h = NULL;

	/* files left wider by an earlier run are narrowed */
	chmod(db, 0644);
	make(wal, 0666);
	make(shm, 0640);
	is_int(db_file_private(db), 0, "existing database, -wal and -shm accepted");
	is_int(mode_of(db), 0600, "... database narrowed from 0644");
	is_int(mode_of(wal), 0600, "... -wal narrowed from 0666");
	is_int(mode_of(shm), 0600, "... -shm narrowed from 0640");
	ok(sqlite3_open_v2(db, &h, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
	    sqlite3_exec(h, "SELECT x FROM t", NULL, NULL, NULL) == SQLITE_OK,
	    "... and the data is still there");
	sqlite3_close(h);

	/* a narrower mode is the owner's choice, not widened */
	chmod(db, 0400);
	unlink(wal);
	unlink(shm);
	is_int(db_file_private(db), 0, "a 0400 database is accepted");
	is_int(mode_of(db), 0600, "... and set to 0600, the one mode");

	/* not a regular file: refused before SQLite sees it */
	unlink(db);
	mkdir(db, 0700);
	is_int(db_file_private(db), -EISDIR, "a directory in place of the database is refused");
	rmdir(db);
	make(db, 0600);
	mkfifo(wal, 0644);
	is_int(db_file_private(db), -EINVAL, "a FIFO in place of -wal is refused");
	is_int(db_file_private(":memory:"), 0, "\":memory:\" is not a file");

	unlink(wal);
	unlink(db);
	wal_presize(dir);
	wal_ckpt(dir);

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		diag("cleanup of %s failed", dir);
	return done_testing();
}
