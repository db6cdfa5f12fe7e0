/* A database's write-ahead log grown once to the size it reaches between
 * checkpoints (dbfile.h). While SQLite's -wal file still grows, each
 * commit's fdatasync must also write the inode (its size changed) and the
 * allocation: measured here 0.19 ms at the median and 0.85 ms at the 90th
 * percentile for an append, against 0.13 and 0.14 ms for the same write
 * into blocks already there. A fresh daemon's first thousand commits
 * paid that; after the first checkpoint SQLite writes the log from its
 * start again, into the blocks it left. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "dbfile.h"
#include "util.h"

#define WAL_HDR 32              /* SQLite's WAL header */
#define WAL_FRAME_HDR 24        /* and each frame's */
#define WAL_GROW_MAX (64ll << 20)

static int64_t
pragma_int(sqlite3 *db, const char *sql, int64_t dflt)
{
	sqlite3_stmt *st = NULL;
	int64_t v = dflt;

	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return v;
}

int
db_wal_presize(sqlite3 *db, const char *path)
{
	static const char zero[65536];
	char wal[4096];
	int64_t page, want, at;
	struct stat st;
	int fd = -1, ret = 0;

	if (path[0] == '\0' || strcmp(path, ":memory:") == 0)
		return 0;
	if ((size_t)snprintf(wal, sizeof(wal), "%s-wal", path) >= sizeof(wal))
		return -ENAMETOOLONG;
	page = pragma_int(db, "PRAGMA page_size", 4096);
	if (page <= 0 || page > 65536)
		return 0;
	/* the log is checkpointed once it passes DB_CKPT_HARD frames (the
	 * hook of db_ckpt, or SQLite's own at the same count): the
	 * transaction that crosses it, and a reader that holds it back a
	 * little, take it past; a quarter more covers both */
	want = WAL_HDR + (DB_CKPT_HARD + DB_CKPT_HARD / 4) * (page + WAL_FRAME_HDR);
	if (want > WAL_GROW_MAX)
		want = WAL_GROW_MAX;
	/* SQLite's write lock, held by every process that opens this file:
	 * no one appends frames while the zeros go in after the last byte.
	 * The zeros are never frames: a frame counts only with the log's
	 * salts and a checksum chained from the header */
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
		return -EBUSY;
	if ((fd = open(wal, O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY)) < 0) {
		/* SQLite opens its log with the first transaction: none yet */
		ret = errno == ENOENT ? 0 : -errno;
		goto out;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		ret = -EINVAL;
		goto out;
	}
	for (at = st.st_size; at < want;) {
		size_t n = (size_t)(want - at) < sizeof(zero) ? (size_t)(want - at) : sizeof(zero);
		ssize_t w = pwrite(fd, zero, n, at);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ret = w < 0 ? -errno : -EIO;
			goto out;
		}
		at += w;
	}
	if (at > st.st_size && fdatasync(fd) != 0)
		ret = -errno;
out:
	if (fd >= 0)
		close(fd);
	sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
	return ret;
}

/* Checkpoints in idle moments (dbfile.h, struct db_ckpt). */

static int
ckpt_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct db_ckpt *k = arg;

	atomic_store(&k->frames, frames);
	atomic_store(&k->last_ns, now_mono_ns());
	/* what SQLite's own hook does at wal_autocheckpoint: a log that no
	 * idle moment emptied is checkpointed by the commit that fills it */
	if (frames >= DB_CKPT_HARD) {
		atomic_fetch_add(&k->inline_runs, 1);
		(void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
	}
	return SQLITE_OK;
}

/* with the connection held: the checkpoint, and when it emptied the log,
 * the write that starts it again from its first frame (and pays that
 * header's sync) */
static void
ckpt_idle(struct db_ckpt *k)
{
	int log_frames = -1, done = -1;

	if (atomic_load(&k->frames) < DB_CKPT_SOFT ||
	    now_mono_ns() - atomic_load(&k->last_ns) < DB_CKPT_IDLE_MS * 1000000ull)
		return;
	if (sqlite3_wal_checkpoint_v2(k->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &log_frames,
	    &done) != SQLITE_OK || log_frames < 0 || done != log_frames) {
		/* a reader holds part of the log: later */
		atomic_store(&k->last_ns, now_mono_ns());
		return;
	}
	atomic_fetch_add(&k->idle_runs, 1);
	atomic_store(&k->frames, 0);
	if (k->touch != NULL) {
		/* another process writing now: its commit restarts the log */
		sqlite3_busy_timeout(k->db, 0);
		(void)sqlite3_exec(k->db, k->touch, NULL, NULL, NULL);
		sqlite3_busy_timeout(k->db, k->busy_ms);
	}
}

static void *
ckpt_main(void *arg)
{
	struct db_ckpt *k = arg;

	pthread_mutex_lock(&k->mu);
	while (!k->stop) {
		struct timespec ts = mono_timespec(now_mono_ns() + DB_CKPT_TICK_MS * 1000000ull);

		(void)pthread_cond_timedwait(&k->cv, &k->mu, &ts);
		if (k->stop)
			break;
		if (atomic_load(&k->frames) < DB_CKPT_SOFT)
			continue;
		pthread_mutex_unlock(&k->mu);
		k->lock(k->arg);
		ckpt_idle(k);
		k->unlock(k->arg);
		pthread_mutex_lock(&k->mu);
	}
	pthread_mutex_unlock(&k->mu);
	return NULL;
}

int
db_ckpt_start(struct db_ckpt *k, sqlite3 *db, void (*lock)(void *), void (*unlock)(void *),
    void *arg, const char *touch, int busy_ms)
{
	int rc;

	memset(k, 0, sizeof(*k));
	k->db = db;
	k->lock = lock;
	k->unlock = unlock;
	k->arg = arg;
	k->touch = touch;
	k->busy_ms = busy_ms;
	atomic_store(&k->last_ns, now_mono_ns());
	pthread_mutex_init(&k->mu, NULL);
	cond_init_mono(&k->cv);
	/* replaces SQLite's autocheckpoint hook (ckpt_hook does its part) */
	lock(arg);
	sqlite3_wal_hook(db, ckpt_hook, k);
	unlock(arg);
	if ((rc = pthread_create(&k->thread, NULL, ckpt_main, k)) != 0) {
		lock(arg);
		sqlite3_wal_autocheckpoint(db, DB_CKPT_HARD);
		unlock(arg);
		return -rc;
	}
	k->started = true;
	return 0;
}

void
db_ckpt_stop(struct db_ckpt *k)
{
	if (!k->started)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_cond_signal(&k->cv);
	pthread_mutex_unlock(&k->mu);
	pthread_join(k->thread, NULL);
	pthread_cond_destroy(&k->cv);
	pthread_mutex_destroy(&k->mu);
	k->started = false;
	k->lock(k->arg);
	sqlite3_wal_autocheckpoint(k->db, DB_CKPT_HARD);
	k->unlock(k->arg);
}
