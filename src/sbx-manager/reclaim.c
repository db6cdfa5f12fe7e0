/* Disk reclamation (docs/worker.md, "Disk reclamation").
 *
 * A retired execution's layer image (D/exec/<sandbox>.g<gen>) and run
 * directory (D/run/<sandbox>.g<gen>) are deleted once nothing can need
 * them: its archive is durable in the snapshot store (a pause or a move),
 * or none was asked for (a kill). Restores only ever read archives, so a
 * retired layer has no reader left.
 *
 * Crash-safe by mark-then-delete: a journal entry D/reclaim/<sandbox>.g<gen>
 * is made durable first (file and directory fsync'd), then the directories
 * are removed, and the entry last. A restart finishes every entry it finds
 * (reclaim_resume), so a kill -9 in the middle leaves nothing behind for
 * long. An entry is written only for an execution whose record is
 * retired, or failed with nothing in its layer that is not elsewhere (its
 * caller says so: see reclaim_execution), and the removal never crosses a
 * mount point, never follows a symlink and only touches the two
 * directories the entry's name gives. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "limits.h"
#include "log.h"
#include "netns.h"
#include "sbx-manager.h"
#include "util.h"
#include "walk.h"

/* one reclamation at a time: the assignment thread's and the periodic
 * pass's never interleave on the same entry */
struct mgr_reclaim {
	pthread_mutex_t lock;
};

int
reclaim_init(struct mgr *m)
{
	struct mgr_reclaim *rc = calloc(1, sizeof(*rc));

	if (rc == NULL)
		return -ENOMEM;
	pthread_mutex_init(&rc->lock, NULL);
	m->reclaim = rc;
	return 0;
}

/* "<id>.g<generation>": the only names reclamation touches */
static bool
exec_name_valid(const char *name, char sandbox[SPACE_ID_MAX + 1], uint64_t *gen)
{
	const char *g = strrchr(name, '.');
	char *end;
	size_t n;

	if (g == NULL || g[1] != 'g' || g[2] < '1' || g[2] > '9')
		return false;
	n = (size_t)(g - name);
	if (n == 0 || n > SPACE_ID_MAX)
		return false;
	memcpy(sandbox, name, n);
	sandbox[n] = '\0';
	if (!id_valid(sandbox))
		return false;
	errno = 0;
	*gen = strtoull(g + 2, &end, 10);
	return errno == 0 && *end == '\0';
}

/* the post-visit of each entry beneath a reclaimed directory: deleted,
 * a directory only when everything in it went */
static int
remove_entry_cb(const struct walk_entry *e, void *arg)
{
	(void)arg;
	if (!e->post || e->err < 0)
		return 0;
	if (unlinkat(e->parent, e->name, S_ISDIR(e->st.st_mode) ? AT_REMOVEDIR : 0) < 0 &&
	    errno != ENOENT)
		return -errno;
	return 0;
}

/* Removes everything beneath dfd: no symlink followed (they are removed as
 * links), no other file system entered (a mount point stays, and so does
 * the entry's directory, to be retried: -EBUSY). 0 or -errno. */
static int
remove_beneath(int dfd)
{
	return walk_beneath(dfd, 256, WALK_ONE_FS, remove_entry_cb, NULL);
}

/* D/<area>/<name> and all beneath it; a missing one is done already */
static int
remove_entry(struct mgr *m, const char *area, const char *name)
{
	char dir[PATH_MAX];
	struct stat st;
	int afd, fd, r;

	snprintf(dir, sizeof(dir), "%s/%s", m->cfg.data_dir, area);
	if ((afd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -errno;
	fd = openat(afd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		r = errno == ENOENT ? 0 : -errno;
		close(afd);
		return r;
	}
	if (fstat(fd, &st) < 0)
		r = -errno;
	else
		r = remove_beneath(fd);
	close(fd);
	if (r == 0 && unlinkat(afd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
		r = -errno;
	close(afd);
	return r;
}

static int
fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r = 0;

	if (fd < 0)
		return -errno;
	if (fsync(fd) < 0)
		r = -errno;
	close(fd);
	return r;
}

/* the deletion of one journalled execution; the entry goes last */
static int
reclaim_finish(struct mgr *m, const char *name)
{
	char jdir[PATH_MAX], entry[PATH_MAX + 300];
	struct record tmp;
	int r;

	memset(&tmp, 0, sizeof(tmp));
	snprintf(tmp.layer_dir, sizeof(tmp.layer_dir), "%s/exec/%s/layer", m->cfg.data_dir, name);
	/* a loop device or a leftover mount of a killed bridge still on
	 * the image: let go of it first (the image's blocks are only
	 * freed when nothing holds it) */
	layer_release(&tmp);
	/* the namespace's bind is a mount point the removal would not cross */
	snprintf(jdir, sizeof(jdir), "%s/run/%s", m->cfg.data_dir, name);
	netns_release_dir(jdir);
	if ((r = remove_entry(m, "exec", name)) < 0 || (r = remove_entry(m, "run", name)) < 0) {
		log_warnx("reclaim %s: %s (kept for a later attempt)", name, strerror(-r));
		return r;
	}
	snprintf(jdir, sizeof(jdir), "%s/reclaim", m->cfg.data_dir);
	snprintf(entry, sizeof(entry), "%s/%s", jdir, name);
	if (unlink(entry) < 0 && errno != ENOENT)
		return -errno;
	fsync_dir(jdir);
	log_info("reclaimed the layer and run directory of %s", name);
	metrics_inc(m, MC_RECLAIMS);
	return 0;
}

/* the mark, durable before the first deletion, then the deletion */
static int
mark_and_finish(struct mgr *m, const char *name)
{
	char jdir[PATH_MAX], entry[PATH_MAX + 300];
	int fd, ret;

	snprintf(jdir, sizeof(jdir), "%s/reclaim", m->cfg.data_dir);
	snprintf(entry, sizeof(entry), "%s/%s", jdir, name);
	if (mkdir(jdir, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((fd = open(entry, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600)) < 0)
		return -errno;
	ret = fsync(fd) < 0 ? -errno : 0;
	close(fd);
	if (ret == 0)
		ret = fsync_dir(jdir);
	if (ret < 0)
		return ret;
	return reclaim_finish(m, name);
}

/* a retired execution; or a failed one whose layer holds nothing that is
 * not elsewhere: it never served (activation 1: empty or restored from an
 * archive), its restore failed, or it was archived when it failed. A
 * failed layer that is the only copy of the user's files is reclaimed
 * when the sandbox is killed (the control plane retires it then). */
int
reclaim_execution(struct mgr *m, const struct record *r)
{
	char name[SPACE_ID_MAX + 32];
	int ret;

	if (r->state != EXEC_RETIRED && r->state != EXEC_FAILED)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.g%llu", r->id.sandbox, (unsigned long long)r->id.generation);
	pthread_mutex_lock(&m->reclaim->lock);
	ret = mark_and_finish(m, name);
	pthread_mutex_unlock(&m->reclaim->lock);
	return ret;
}

/* Executions of a sandbox older than the one its record holds: a newer
 * generation was installed here (from an archive), so nothing reads the
 * old layer any more. This also collects what builds before reclamation
 * left behind. */
static void
reclaim_superseded(struct mgr *m)
{
	char dir[PATH_MAX], sandbox[SPACE_ID_MAX + 1];
	struct dirent *de;
	struct record r;
	uint64_t gen;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/exec", m->cfg.data_dir);
	if ((d = opendir(dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		if (!exec_name_valid(de->d_name, sandbox, &gen))
			continue;
		if (records_get(m, sandbox, &r) != 0)
			continue;       /* no record: an install cut short, left alone */
		if (r.id.generation > gen)
			mark_and_finish(m, de->d_name);
	}
	closedir(d);
}

static void
resume_locked(struct mgr *m)
{
	char dir[PATH_MAX], sandbox[SPACE_ID_MAX + 1];
	struct dirent *de;
	struct record r;
	uint64_t gen;
	DIR *d;

	snprintf(dir, sizeof(dir), "%s/reclaim", m->cfg.data_dir);
	if ((d = opendir(dir)) != NULL) {
		while ((de = readdir(d)) != NULL) {
			if (!exec_name_valid(de->d_name, sandbox, &gen))
				continue;
			/* never the layer of an execution that runs here */
			if (records_get(m, sandbox, &r) == 0 && r.id.generation == gen &&
			    r.state != EXEC_RETIRED && r.state != EXEC_FAILED) {
				log_warnx("reclaim %s: its execution is not retired, entry dropped",
				    de->d_name);
				unlinkat(dirfd(d), de->d_name, 0);
				continue;
			}
			reclaim_finish(m, de->d_name);
		}
		closedir(d);
	}
	reclaim_superseded(m);
}

/* at start, and periodically: finish every journalled reclamation (one
 * cut short by a crash, or by a mount still in the way), and collect the
 * layers of generations superseded here */
void
reclaim_resume(struct mgr *m)
{
	pthread_mutex_lock(&m->reclaim->lock);
	resume_locked(m);
	pthread_mutex_unlock(&m->reclaim->lock);
	template_sweep(m);
}

/* bytes allocated beneath a directory, not crossing into another file
 * system: every entry counted once, at its last visit */
static int
du_cb(const struct walk_entry *e, void *arg)
{
	if (e->post)
		*(uint64_t *)arg += (uint64_t)e->st.st_blocks * 512;
	return 0;
}

uint64_t
reclaim_du(const char *dir)
{
	struct stat st;
	uint64_t sum;
	int fd;

	if (dir == NULL || !dir[0] ||
	    (fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return 0;
	sum = 0;
	if (fstat(fd, &st) == 0) {
		sum = (uint64_t)st.st_blocks * 512;
		(void)walk_beneath(fd, 64, WALK_ONE_FS, du_cb, &sum);   /* what it could read */
	}
	close(fd);
	return sum;
}
