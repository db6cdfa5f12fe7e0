/* Checkpoints of an SQLite WAL off the commit path (walcp.h). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>

#include "log.h"
#include "walcp.h"

struct walcp {
	sqlite3 *db, *own;
	int pages;
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool due, stop;
	atomic_ulong runs, inline_runs;
};

#define WALCP_BEHIND 4

/* after each commit of db, in the committing thread: a signal, no I/O.
 * The WAL starts over only when a checkpoint has copied all of it; under
 * writes without a pause the thread's checkpoints never quite catch up,
 * so past WALCP_BEHIND times the threshold the commit checkpoints itself,
 * as SQLite's automatic checkpoint would: the WAL stays bounded */
static int
wal_hook(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct walcp *w = arg;

	if (frames >= WALCP_BEHIND * w->pages) {
		(void)sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
		atomic_fetch_add(&w->inline_runs, 1);
		return SQLITE_OK;
	}
	if (frames >= w->pages) {
		pthread_mutex_lock(&w->mu);
		if (!w->due) {
			w->due = true;
			pthread_cond_signal(&w->cv);
		}
		pthread_mutex_unlock(&w->mu);
	}
	return SQLITE_OK;
}

static void *
cp_thread(void *arg)
{
	struct walcp *w = arg;
	int frames, done, rc;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		while (!w->due && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		w->due = false;
		pthread_mutex_unlock(&w->mu);
		/* PASSIVE: as much as no reader still needs, without waiting
		 * for anyone; BUSY is another checkpoint running (a subcommand
		 * of ours on the same file): the next commit signals again */
		rc = sqlite3_wal_checkpoint_v2(w->own, "main", SQLITE_CHECKPOINT_PASSIVE, &frames,
		    &done);
		if (rc != SQLITE_OK && rc != SQLITE_BUSY)
			log_warnx("checkpoint: %s", sqlite3_errmsg(w->own));
		atomic_fetch_add(&w->runs, 1);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct walcp *
walcp_start(sqlite3 *db, const char *path, int pages)
{
	struct walcp *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->db = db;
	w->pages = pages > 0 ? pages : WALCP_PAGES;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	/* the file exists (db has it open, in WAL mode): never created here */
	if (sqlite3_open_v2(path, &w->own, SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX,
	    NULL) != SQLITE_OK)
		goto fail;
	if (pthread_create(&w->t, NULL, cp_thread, w) != 0)
		goto fail;
	sqlite3_wal_hook(db, wal_hook, w);
	return w;
fail:
	log_warnx("checkpoint: no thread for %s; commits checkpoint as they go", path);
	sqlite3_close(w->own);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	return NULL;
}

void
walcp_stop(struct walcp *w)
{
	if (w == NULL)
		return;
	/* commits from now on signal nobody; the automatic checkpoint is
	 * back for whatever the caller still writes before its close */
	sqlite3_wal_autocheckpoint(w->db, w->pages);
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->t, NULL);
	sqlite3_close(w->own);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

unsigned long
walcp_runs(const struct walcp *w, unsigned long *inline_runs)
{
	if (inline_runs != NULL)
		*inline_runs = w ? atomic_load(&w->inline_runs) : 0;
	return w ? atomic_load(&w->runs) : 0;
}
