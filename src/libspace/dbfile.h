/* The files of an SQLite database that holds credentials or records are
 * the owner's alone. */
#ifndef SPACE_DBFILE_H
#define SPACE_DBFILE_H

/* Call before sqlite3_open_v2(path): path exists with mode 0600 (created
 * so when missing, narrowed and logged when wider), and so do path-wal and
 * path-shm when they exist. SQLite gives the -wal and -shm files it
 * creates the mode of the database file, so they follow. 0 or -errno. */
int db_file_private(const char *path);

/* dbwal.c. Call after opening path in WAL mode: its -wal file, if shorter,
 * is written with zeros up to a little more than the size it reaches
 * between two automatic checkpoints (under SQLite's write lock, after its
 * last byte), so that commits overwrite blocks already there instead of
 * growing the file, which costs each fdatasync the inode too. Performance
 * only: 0, or -errno (the database is usable either way). */
struct sqlite3;
int db_wal_presize(struct sqlite3 *db, const char *path);

/* Checkpoints in idle moments (dbwal.c). SQLite checkpoints its log in the
 * commit that takes it past 1,000 frames: that commit's caller waits for
 * the pages copied into the database and its fsync (1.5 to 2 ms here),
 * and the next commit, the first of the restarted log, for one more sync
 * (its header's). Once per 60 to 80 creates each of the control plane and
 * the worker's records did so, on a create's path. With db_ckpt_start a
 * thread checkpoints instead once the log holds DB_CKPT_SOFT frames and
 * nothing was committed for DB_CKPT_IDLE_MS, then runs touch (a one-row
 * write) so that the restart and its header's sync happen then too. A log
 * that no idle moment empties is checkpointed as before, by the commit
 * that takes it past DB_CKPT_HARD. lock/unlock(arg): the connection's
 * own mutex, held around everything the thread does with db; busy_ms the
 * connection's busy timeout (touch runs with none: another process
 * writing restarts the log itself). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define DB_CKPT_SOFT 256
#define DB_CKPT_HARD 1000
#define DB_CKPT_IDLE_MS 100
#define DB_CKPT_TICK_MS 50

struct db_ckpt {
	struct sqlite3 *db;
	void (*lock)(void *);
	void (*unlock)(void *);
	void *arg;
	const char *touch;
	int busy_ms;
	atomic_int frames;              /* in the log after the last commit */
	atomic_uint_fast64_t last_ns;   /* that commit, CLOCK_MONOTONIC */
	atomic_uint idle_runs, inline_runs;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stop, started;
};
/* 0, or -errno (then SQLite's own checkpoints stay) */
int db_ckpt_start(struct db_ckpt *k, struct sqlite3 *db, void (*lock)(void *),
    void (*unlock)(void *), void *arg, const char *touch, int busy_ms);
/* before the connection is closed: the thread ends, SQLite's hook is back */
void db_ckpt_stop(struct db_ckpt *k);
#endif
