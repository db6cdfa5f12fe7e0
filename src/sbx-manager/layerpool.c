/* Fresh layer images made ahead of creates (docs/worker.md, "Layer pool").
 *
 * A new execution's writable layer is an empty ext4 image; making it
 * (mkfs.ext4 of a sparse file) was the largest single cost of a create
 * (docs/benchmarks.md, "Where a create's time goes"). This thread keeps up
 * to cfg.layer_pool such images of the worker's default size in
 * D/layer-pool (root, 0700), and an install whose layer is new takes one:
 * a rename into its layer directory, after the execution's record (its
 * identity, uid range and epoch) is committed and before its bridge is
 * spawned. The bridge then finds disk.img there and mounts it as it mounts
 * any layer, shifting the fresh root into the sandbox's uid range
 * (spaced-host layer.c). Nothing else changes: a claim is the mkfs the
 * bridge would have run, done earlier, by the same root process that made
 * the layer directory.
 *
 * What the pool guarantees, and how:
 *   - an image is only ever claimed once: rename moves it out of the pool;
 *   - an image is complete when it is in the pool: made as .mk-N and
 *     renamed to N.img after mkfs exits 0;
 *   - an image is never one a sandbox used: nothing but this file writes
 *     D/layer-pool, and everything found there at start is deleted (a
 *     crash may have left an image whose pages never reached the disk);
 *   - a claimed image is what the record says: a regular file of root's,
 *     one link, exactly disk_mb MiB, checked before the rename (RENAME_
 *     NOREPLACE: a layer already there, a restored one, is never replaced).
 * An execution of another size leaves the layer to spaced-host's own mkfs,
 * as before.
 *
 * One mkfs per worker start, not per image: the thread first makes a blank
 * image (D/layer-pool/.blank, by the same mkfs, complete once renamed from
 * .mk-blank), and every pool image is a sparse copy of its allocated
 * extents (about 2 MiB of 4 GiB; SEEK_DATA/SEEK_HOLE and copy_file_range,
 * then fdatasync as mkfs's own fsync): a fraction of an mkfs's CPU (its
 * exec, loading and ext2fs's set-up). A claim that finds the pool empty (a
 * burst larger than the pool: the refill waits for an idle moment) copies
 * the blank into the layer directory itself (made as .disk.img.new, renamed
 * without replacing) instead of leaving an mkfs to spaced-host. The copies
 * are byte for byte the blank: every layer of one worker run has the same
 * ext4 UUID and directory hash seed (mkfs's random ones of that run). No
 * check or tool of the platform uses them: layers are mounted by their loop
 * device, one mount per image, and a sandbox never sees the superblock.
 * If the blank cannot be made, each image is made by mkfs as before.
 *
 * Other sizes: an execution whose disk is not the pool's size gets a
 * sparse copy of a blank of its own size (D/layer-pool/.blank-MiB), made
 * by mkfs at the first claim of that size and kept for the run; up to
 * BLANKS_MAX sizes, beyond which each such layer is left to spaced-host's
 * mkfs. An mkfs reads the whole mount table and asks every mounted loop
 * device for its backing file, so on a worker with a thousand layers it
 * took three times its time on an idle one (docs/benchmarks.md,
 * "Density: a layer of another size"); a copy reads neither. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "sbx-manager.h"
#include "util.h"

#define POOL_MAX MGR_SLOTS_MAX

static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cv = PTHREAD_COND_INITIALIZER;
static unsigned ready_n;                /* complete images in the pool */
static unsigned seq;                    /* the next image's name */
static unsigned next_claim;             /* where claims look first */
static char pool_dir[PATH_MAX];
static int blank_fd = -1;               /* the blank image, read only; set once */
static off_t blank_size;

/* blanks of other sizes, made at the first claim of each; an entry is
 * never removed nor its descriptor closed, so a copy from it needs no
 * lock (a failed size is remembered too: fd -1, not tried again) */
#define BLANKS_MAX 8
static pthread_mutex_t blanks_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { uint32_t mb; int fd; } blanks[BLANKS_MAX];
static unsigned blanks_n;

/* mkfs.ext4 of path, its stdin and stdout nul: its pid or -1. vfork, as
 * bridge.c: a fork of this multi-threaded process copied its page tables
 * and write-protected its memory while a create's thread was working;
 * the child shares our memory until its exec and makes system calls
 * only, in a function of its own */
static pid_t __attribute__((noinline))
spawn_mkfs(const char *mkfs, const char *path, int nul, bool ahead)
{
	pid_t pid = vfork();

	if (pid != 0)
		return pid;
	if (dup2(nul, 0) < 0 || dup2(nul, 1) < 0)
		_exit(127);
	if (ahead) {
		/* made ahead of time: the creates running now go first (if
		 * the priority cannot be lowered, it is made all the same) */
		(void)setpriority(PRIO_PROCESS, 0, 10);
		/* and its writes after theirs: best effort, lowest level */
		(void)syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0,
		    (2 << 13) /* IOPRIO_CLASS_BE */ | 7);
	}
	/* the same file system spaced-host makes on a new layer; its root is
	 * root's here and moved into the sandbox's range when the bridge
	 * mounts it. The journal is not zeroed: the file is new and sparse
	 * (O_EXCL in make_image), its holes read as zeros, and zeroing would
	 * turn 64 MiB of them into written disk blocks per image */
	execl(mkfs, "mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_journal_init=1", path,
	    (char *)NULL);
	_exit(127);
}

/* mkfs.ext4 of a sparse image of mb MiB at path (ahead: at a low
 * priority, no create waits for it); 0 or -errno */
static int
make_image(const char *path, uint32_t mb, bool ahead)
{
	const char *mkfs = access("/sbin/mkfs.ext4", X_OK) == 0 ? "/sbin/mkfs.ext4" :
	    "/usr/sbin/mkfs.ext4";
	pid_t pid;
	int fd, st, r, nul;

	if ((fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return -errno;
	r = ftruncate(fd, (off_t)mb << 20) == 0 ? 0 : -errno;
	close(fd);
	if (r != 0)
		return r;
	if ((nul = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	pid = spawn_mkfs(mkfs, path, nul, ahead);
	close(nul);
	if (pid < 0)
		return -errno;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* dst (new, O_EXCL, 0600) as a sparse copy of the blank bfd of size
 * bsize: its data extents copied, its holes left holes, then fdatasync;
 * 0 or -errno (the caller removes a partial dst) */
static int
copy_blank(const char *dst, int bfd, off_t bsize)
{
	off_t off = 0, data, hole;
	int fd, r = 0;

	if ((fd = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
		return -errno;
	if (ftruncate(fd, bsize) != 0) {
		r = -errno;
		goto out;
	}
	while (off < bsize) {
		if ((data = lseek(bfd, off, SEEK_DATA)) < 0) {
			r = errno == ENXIO ? 0 : -errno;    /* only a hole left */
			break;
		}
		if ((hole = lseek(bfd, data, SEEK_HOLE)) < 0) {
			r = -errno;
			break;
		}
		for (off = data; off < hole;) {
			loff_t in = off, o = off;
			ssize_t n = copy_file_range(bfd, &in, fd, &o, (size_t)(hole - off), 0);

			if (n <= 0) {
				r = n == 0 ? -EIO : -errno;
				goto out;
			}
			off += n;
		}
	}
	if (r == 0 && fdatasync(fd) != 0)
		r = -errno;
out:
	close(fd);
	return r;
}

/* a blank of mb MiB named name (".blank...") in the pool directory: mkfs
 * once as .mk-blank..., complete when renamed, then opened read only; its
 * descriptor, or -1 */
static int
make_blank_named(const char *name, uint32_t mb, bool ahead)
{
	char tmp[PATH_MAX + 32], fin[PATH_MAX + 32];
	struct stat st;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/.mk-%s", pool_dir, name + 1);
	snprintf(fin, sizeof(fin), "%s/%s", pool_dir, name);
	unlink(tmp);
	if (make_image(tmp, mb, ahead) != 0 || rename(tmp, fin) != 0) {
		unlink(tmp);
		return -1;
	}
	if ((fd = open(fin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)) < 0)
		return -1;
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size != (off_t)mb << 20) {
		close(fd);
		return -1;
	}
	return fd;
}

/* the blank every pool image is copied from: set once; false if it
 * cannot be made */
static bool
make_blank(uint32_t mb)
{
	int fd = make_blank_named(".blank", mb, true);

	if (fd < 0)
		return false;
	blank_size = (off_t)mb << 20;
	__atomic_store_n(&blank_fd, fd, __ATOMIC_RELEASE);
	return true;
}

/* the blank of mb MiB for a layer of another size than the pool's: made
 * now by the first claim of that size (others of that size wait for it);
 * -1 when none can be (the table is full, or its mkfs failed) */
static int
blank_of(uint32_t mb)
{
	char name[32];
	unsigned i;
	int fd;

	if (pool_dir[0] == '\0')       /* before the pool's start */
		return -1;
	pthread_mutex_lock(&blanks_mu);
	for (i = 0; i < blanks_n; i++)
		if (blanks[i].mb == mb) {
			fd = blanks[i].fd;
			pthread_mutex_unlock(&blanks_mu);
			return fd;
		}
	if (blanks_n == BLANKS_MAX) {
		pthread_mutex_unlock(&blanks_mu);
		return -1;
	}
	snprintf(name, sizeof(name), ".blank-%" PRIu32, mb);
	/* a create waits for it, as for the mkfs it replaces */
	if ((fd = make_blank_named(name, mb, false)) < 0)
		log_warnx("layer pool: no blank image of %" PRIu32 " MiB; such layers are made by mkfs",
		    mb);
	blanks[blanks_n].mb = mb;
	blanks[blanks_n].fd = fd;
	blanks_n++;
	pthread_mutex_unlock(&blanks_mu);
	return fd;
}

/* everything in the pool directory goes: images of an earlier run are not
 * trusted (see above), nor half-made ones */
static void
pool_wipe(void)
{
	char p[PATH_MAX + 300];
	struct dirent *e;
	DIR *d;

	if ((d = opendir(pool_dir)) == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(p, sizeof(p), "%s/%s", pool_dir, e->d_name);
		if (unlink(p) != 0)
			log_warn("layer pool: cannot remove %s", p);
	}
	closedir(d);
}

static void *
pool_thread(void *arg)
{
	struct mgr *m = arg;
	char tmp[PATH_MAX + 32], fin[PATH_MAX + 32];
	unsigned failures = 0;

	/* the blank first (an idle moment, like every image); without it,
	 * each image is an mkfs of its own */
	if (!idle_wait())
		return NULL;
	if (!make_blank(m->cfg.disk_mb))
		log_warnx("layer pool: no blank image; each image is made by mkfs");
	for (;;) {
		unsigned n;
		int r;

		pthread_mutex_lock(&pool_mu);
		while (ready_n >= m->cfg.layer_pool)
			pthread_cond_wait(&pool_cv, &pool_mu);
		n = seq++;
		pthread_mutex_unlock(&pool_mu);
		/* never beside a create (idle.c); a stop ends the thread */
		if (!idle_wait())
			return NULL;
		snprintf(tmp, sizeof(tmp), "%s/.mk-%u", pool_dir, n);
		unlink(tmp);
		if ((r = blank_fd >= 0 ? copy_blank(tmp, blank_fd, blank_size) :
		    make_image(tmp, m->cfg.disk_mb, true)) == 0) {
			/* a name no image in the pool has (never replaced: the
			 * count would be wrong) */
			for (unsigned k = 0; k < POOL_MAX * 4; k++, n++) {
				snprintf(fin, sizeof(fin), "%s/%u.img", pool_dir, n % (POOL_MAX * 4));
				if ((r = renameat2(AT_FDCWD, tmp, AT_FDCWD, fin, RENAME_NOREPLACE)) == 0 ||
				    errno != EEXIST)
					break;
			}
			if (r != 0)
				r = -errno;
		}
		if (r != 0) {
			unlink(tmp);
			/* a full disk or no mkfs: creates make their own layers,
			 * as without a pool; try again later */
			if (failures++ == 0)
				log_warnx("layer pool: cannot make an image: %s", strerror(-r));
			sleep(failures < 6 ? 1u << failures : 60);
			continue;
		}
		failures = 0;
		pthread_mutex_lock(&pool_mu);
		ready_n++;
		pthread_mutex_unlock(&pool_mu);
	}
	return NULL;
}

void
layerpool_start(struct mgr *m)
{
	pthread_t t;

	if (m->cfg.layer_pool == 0)
		return;
	if (m->cfg.layer_pool > POOL_MAX)
		m->cfg.layer_pool = POOL_MAX;
	snprintf(pool_dir, sizeof(pool_dir), "%s/layer-pool", m->cfg.data_dir);
	if (mkdir(pool_dir, 0700) != 0 && errno != EEXIST) {
		log_warn("layer pool: mkdir %s", pool_dir);
		m->cfg.layer_pool = 0;
		return;
	}
	{
		struct stat st;
		if (lstat(pool_dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0 ||
		    chmod(pool_dir, 0700) != 0) {
			log_warnx("layer pool: %s is not root's directory; no pool", pool_dir);
			m->cfg.layer_pool = 0;
			return;
		}
	}
	pool_wipe();
	if (pthread_create(&t, NULL, pool_thread, m) != 0) {
		log_warnx("layer pool: no thread; no pool");
		m->cfg.layer_pool = 0;
		return;
	}
	pthread_detach(t);
	log_info("layer pool: keeping %u fresh %u MiB layer images in %s", m->cfg.layer_pool,
	    m->cfg.disk_mb, pool_dir);
}

/* r's layer dst as a copy of the blank bfd (none: -1, false), made
 * beside it and renamed without replacing */
static bool
copy_into(const struct record *r, const char *dst, int bfd, off_t bsize)
{
	char tmp[PATH_MAX + 32];

	if (bfd < 0)
		return false;
	snprintf(tmp, sizeof(tmp), "%s/.disk.img.new", r->layer_dir);
	unlink(tmp);
	if (copy_blank(tmp, bfd, bsize) == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, dst, RENAME_NOREPLACE) == 0)
		return true;
	log_warn("layer pool: copy of the blank for %s", r->id.sandbox);
	unlink(tmp);
	return false;
}

bool
layerpool_claim(struct mgr *m, const struct record *r)
{
	char src[PATH_MAX + 32], dst[PATH_MAX + 16];
	struct stat st;
	unsigned i, n;

	if (m->cfg.layer_pool == 0)
		return false;
	snprintf(dst, sizeof(dst), "%s/disk.img", r->layer_dir);
	/* a layer that exists (a relaunch, a restored snapshot) is kept */
	if (lstat(dst, &st) == 0 || errno != ENOENT)
		return false;
	if (r->disk_mb != m->cfg.disk_mb)
		return copy_into(r, dst, blank_of(r->disk_mb), (off_t)r->disk_mb << 20);
	pthread_mutex_lock(&pool_mu);
	/* claims are serialised here: two lanes never take one image */
	for (i = 0; i < POOL_MAX * 4 && ready_n > 0; i++) {
		n = (next_claim + i) % (POOL_MAX * 4);
		snprintf(src, sizeof(src), "%s/%u.img", pool_dir, n);
		if (lstat(src, &st) != 0)
			continue;
		if (!S_ISREG(st.st_mode) || st.st_uid != 0 || st.st_nlink != 1 ||
		    st.st_size != (off_t)r->disk_mb << 20) {
			/* not one this thread made: never used, never counted */
			log_warnx("layer pool: %s is not a pool image; removed", src);
			unlink(src);
			continue;
		}
		if (renameat2(AT_FDCWD, src, AT_FDCWD, dst, RENAME_NOREPLACE) != 0) {
			log_warn("layer pool: claim %s for %s", src, r->id.sandbox);
			break;
		}
		ready_n--;
		next_claim = n + 1;
		pthread_cond_signal(&pool_cv);
		pthread_mutex_unlock(&pool_mu);
		return true;
	}
	pthread_mutex_unlock(&pool_mu);
	/* the pool is empty (a burst): a copy of the blank, made here and
	 * now, rather than an mkfs in the bridge. The blank is only read:
	 * copies of several lanes run side by side */
	return copy_into(r, dst, __atomic_load_n(&blank_fd, __ATOMIC_ACQUIRE), blank_size);
}
