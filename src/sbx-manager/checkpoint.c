/* Checkpoints (docs/worker.md, "Checkpoints"): a serving layer that grew
 * by --checkpoint-mb since its last archive is archived while its sandbox
 * runs, in its sandbox's lane (assign.c, do_checkpoint), and the control
 * plane records it as an automatic snapshot. The layer's next archive (a
 * pause, a move) is then a delta of it: a move carries what changed since
 * the checkpoint, not the whole layer, and the control plane's store
 * already holds the rest.
 *
 * This thread looks at every serving layer's use (statfs of its file
 * system) every CHECKPOINT_SCAN_S seconds, and checkpoints one that grew
 * enough once it stopped growing (its use moved by less than
 * CHECKPOINT_QUIET bytes since the scan before): a checkpoint taken in
 * the middle of a large write would leave the file being written to the
 * next archive whole. One that keeps growing is checkpointed all the
 * same once it grew by CHECKPOINT_BUSY times the bound. What a layer held when its
 * execution was first seen here counts as archived when it was restored
 * from an archive, as new when the layer was made empty; after a
 * checkpoint, what it held when the checkpoint began. At most one
 * checkpoint of an execution is queued or running, and two begin at
 * least --checkpoint-interval seconds apart. The table lives in memory: a
 * restart of sbx-manager counts what a serving layer with an index holds
 * then as archived (a checkpoint waits for more growth), which only
 * delays one. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "log.h"
#include "sbx-manager.h"
#include "util.h"

#define CHECKPOINT_SCAN_S 5
#define CHECKPOINT_QUIET (1u << 20)
#define CHECKPOINT_BUSY 8

struct ck {
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	uint64_t archived;      /* bytes of the layer's use its base archive covers */
	uint64_t prev;          /* its use at the scan before */
	uint64_t last_ns;       /* now_mono_ns() the last one began, 0 none */
	bool busy;              /* queued or running */
	bool seen;              /* serving at the last scan */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct ck *tab;
static size_t ntab, captab;

static struct ck *
ck_find(const char *sandbox, uint64_t generation)
{
	for (size_t i = 0; i < ntab; i++)
		if (tab[i].generation == generation && strcmp(tab[i].sandbox, sandbox) == 0)
			return &tab[i];
	return NULL;
}

/* the layer has an index (a restore's or a checkpoint's) */
static bool
has_index(const char *layer_dir)
{
	char p[PATH_MAX + 16];

	snprintf(p, sizeof(p), "%s/base.idx", layer_dir);
	return access(p, F_OK) == 0;
}

static int64_t
used_of(const char *run_dir)
{
	char rw[PATH_MAX + 8];
	struct statvfs sv;

	snprintf(rw, sizeof(rw), "%s/rw", run_dir);
	if (statvfs(rw, &sv) != 0)
		return -errno;
	return (int64_t)((uint64_t)(sv.f_blocks - sv.f_bfree) * sv.f_frsize);
}

int64_t
checkpoint_used(const struct record *r)
{
	return used_of(r->run_dir);
}

void
checkpoint_done(const char *sandbox, uint64_t generation, bool ok, uint64_t used)
{
	struct ck *c;

	pthread_mutex_lock(&mu);
	if ((c = ck_find(sandbox, generation)) != NULL) {
		c->busy = false;
		if (ok)
			c->archived = used;
	}
	pthread_mutex_unlock(&mu);
}

/* one scan: every serving record; entries of executions no longer
 * serving are dropped */
static void
scan(struct mgr *m)
{
	uint64_t grow = (uint64_t)m->cfg.checkpoint_mb << 20, now = now_mono_ns();
	uint64_t every = (uint64_t)m->cfg.checkpoint_interval * 1000000000ull;
	struct record_brief *recs = NULL;
	size_t n = 0, i, k;

	/* a few hundred bytes a serving record, not the records (some 9 KiB
	 * each): the pass stays cheap at a thousand sandboxes */
	if (records_serving_brief(m, &recs, &n) != 0)
		return;
	pthread_mutex_lock(&mu);
	for (k = 0; k < ntab; k++)
		tab[k].seen = false;
	pthread_mutex_unlock(&mu);
	for (i = 0; i < n; i++) {
		const struct record_brief *r = &recs[i];
		int64_t used;
		struct ck *c;
		bool go = false, quiet;

		if ((used = used_of(r->run_dir)) < 0)
			continue;
		pthread_mutex_lock(&mu);
		if ((c = ck_find(r->id.sandbox, r->id.generation)) == NULL) {
			if (ntab == captab) {
				size_t nc = captab ? captab * 2 : 64;
				struct ck *t = realloc(tab, nc * sizeof(*t));

				if (t == NULL) {
					pthread_mutex_unlock(&mu);
					continue;
				}
				tab = t;
				captab = nc;
			}
			c = &tab[ntab++];
			memset(c, 0, sizeof(*c));
			snprintf(c->sandbox, sizeof(c->sandbox), "%s", r->id.sandbox);
			c->generation = r->id.generation;
			/* restored, or checkpointed before a restart of ours:
			 * its archive covers what it holds now */
			c->archived = r->restored || has_index(r->layer_dir) ? (uint64_t)used : 0;
			c->prev = 0;
		}
		c->seen = true;
		quiet = (uint64_t)used <= c->prev + CHECKPOINT_QUIET &&
		    (uint64_t)used + CHECKPOINT_QUIET >= c->prev;
		c->prev = (uint64_t)used;
		if (!c->busy && (uint64_t)used >= c->archived + grow &&
		    (quiet || (uint64_t)used >= c->archived + CHECKPOINT_BUSY * grow) &&
		    (c->last_ns == 0 || now - c->last_ns >= every)) {
			c->busy = true;
			c->last_ns = now;
			go = true;
		}
		pthread_mutex_unlock(&mu);
		if (go && assign_checkpoint(m, &r->id) != 0) {
			log_warnx("checkpoint of %s: no lane free; later", r->id.sandbox);
			checkpoint_done(r->id.sandbox, r->id.generation, false, 0);
		}
	}
	pthread_mutex_lock(&mu);
	for (k = 0; k < ntab; )
		if (!tab[k].seen && !tab[k].busy)
			tab[k] = tab[--ntab];
		else
			k++;
	pthread_mutex_unlock(&mu);
	free(recs);
}

void *
checkpoint_thread(void *arg)
{
	struct mgr *m = arg;

	/* no incremental archives (--kept-layers 0): nothing to be a base of */
	if (m->cfg.checkpoint_mb == 0 || !m->cfg.snapshot_dir[0] || m->cfg.kept_layers == 0)
		return NULL;
	while (!atomic_load(&m->stopping)) {
		sleep(CHECKPOINT_SCAN_S);
		if (atomic_load(&m->registered))
			scan(m);
	}
	return NULL;
}
