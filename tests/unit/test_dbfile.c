/* dbfile.c: SQLite databases and their -wal / -shm are 0600 whatever the
 * umask, and a wider file left by an earlier run is narrowed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
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

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		diag("cleanup of %s failed", dir);
	return done_testing();
}
