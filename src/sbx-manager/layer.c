/* Snapshots of the writable layer (docs/protocol.md section 5).
 *
 * On the jail substrate the layer is an ext4 image, LAYER/disk.img, that
 * spaced-host loop-mounts at RUNDIR/rw while it serves. The archive format
 * (libspace snapshot.c) holds the files of that file system, not the image:
 *   - a live snapshot reads RUNDIR/rw while the bridge serves (retried when
 *     the layer changes under the reader);
 *   - a retirement with a snapshot reads the image after the bridge has
 *     stopped, mounted read-only here;
 *   - an install from a snapshot builds the image here (the same mkfs as
 *     spaced-host) and extracts the verified archive into it. Archives do
 *     not record owners: everything restored belongs to the sandbox user,
 *     which is who could have written it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "loopdev.h"
#include "sbx-manager.h"
#include "snapshot.h"
#include "util.h"

#define JAIL_USER_UID 1000      /* the sandbox user inside (spaced-host, spaced-guest) */
/* how long a dead bridge's jail may take to let go of the layer */
/* a killed jail's file system ends when its last process has exited and
 * ext4 has written its journal out, which a loaded disk can stretch to
 * seconds; a pause, move or relaunch that gave up too early failed */
#define LAYER_RELEASE_WAIT_MS 30000

static int
run(char *const argv[])
{
	pid_t pid;
	int st, nul;

	if ((pid = fork()) < 0)
		return -errno;
	if (pid == 0) {
		if ((nul = open("/dev/null", O_RDWR)) >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		execv(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

static const char *
tool(const char *a, const char *b)
{
	return access(a, X_OK) == 0 ? a : b;
}

static int
mount_image(const char *img, const char *dir, bool ro)
{
	char *const argv[] = { (char *)tool("/bin/mount", "/usr/bin/mount"), "-o",
	    ro ? "loop,ro,nosuid,nodev,noexec" : "loop,nosuid,nodev,noexec",
	    (char *)img, (char *)dir, NULL };

	return run(argv);
}

/* never an archive larger than the layer's quota (-EFBIG). The archive
 * goes to the control plane while it is made (snapblob_stream_begin: one
 * pass over the layer feeds the upload, and the cache's copy of an
 * archive up to SPACE_TEE_CACHE_MAX); the cache's copy is then not
 * fsync'd, since the digest is reported only once the control plane's
 * copy is stored (fsync'd there). A larger archive is not kept in the
 * cache at all (SNAPSHOT_TEE_UNCACHED): the disk takes it once, in the
 * control plane's store, and a later need of it here (a restore without
 * the image kept of it, a retirement replayed) fetches it from there.
 * Without a control client, or when the streamed upload failed, *uploaded
 * stays false and the caller sends the cache's file (snapblob_put,
 * retried); an upload that failed after the archive had left the cache's
 * bound leaves no copy, so the archive is made again, alone, into the
 * cache, and sent the same way. */
static int
archive_dir(struct mgr *m, const struct record *r0, const char *dir, unsigned flags,
    const struct snapshot_index *base, char digest[SNAPSHOT_DIGEST_HEX + 1], uint64_t *size,
    bool *uploaded)
{
	struct snapshot_stats ss = { 0 };
	bool alone = false;
	int r, tries;

	*uploaded = false;
	for (tries = 0; tries < 3; tries++) {
		struct ctl_call *k = NULL;
		int wfd = -1, tee_err = 0;
		bool streamed = !alone && snapblob_stream_begin(m, &wfd, &k) == 0;

		memset(&ss, 0, sizeof(ss));
		r = snapshot_create_delta(dir, m->cfg.snapshot_dir, (uint64_t)r0->disk_mb << 20,
		    wfd, &tee_err, streamed ? flags | SNAPSHOT_TEE_UNCACHED : flags, base, digest, &ss);
		if (streamed) {
			*uploaded = snapblob_stream_end(m, k, wfd, r == 0 && tee_err == 0 && ss.size > 0,
			    digest, ss.size) == 0;
			if (r == -ECOMM || (r == 0 && ss.uncached && !*uploaded)) {
				log_info("archive of %s: its upload failed past the cache's bound (%u MiB), "
				    "no copy is left: archived again into the cache", r0->id.sandbox,
				    (unsigned)(SPACE_TEE_CACHE_MAX >> 20));
				alone = true;
				r = -EAGAIN;
				continue;
			}
		}
		if (r != -EBUSY)
			break;
	}
	if (r != 0)
		return r == -EAGAIN ? -ECOMM : r;
	*size = ss.size;
	return 0;
}

/* The bridge is gone and has let go of the image (its flock): is the file
 * system on it gone too? A bridge killed with SIGKILL leaves its mount at
 * RUNDIR/rw, and its jail holds a copy of that mount until the jail's
 * last process has exited. Mounting the image again before that (to
 * archive it, or in a relaunched bridge) would run two ext4 instances on
 * one image, so the leftover is detached and we wait, bounded, until no
 * loop device backs the image any more (they detach themselves when their
 * file system ends). */
static int
image_release(const char *img)
{
	char real[PATH_MAX];
	int i, fd;

	if (realpath(img, real) == NULL)
		return errno == ENOENT ? 0 : -errno;
	/* a loop device (a bridge's, read-write, or an archive's, read-only)
	 * holds the image open until it detaches: when the kernel says
	 * nothing but our descriptor has it open (O(1), loopdev.h), no loop
	 * device and no file system of it is left, and the scans below (one
	 * sysfs read per loop device the machine ever made) are skipped */
	if ((fd = open(real, O_RDONLY | O_CLOEXEC)) >= 0) {
		int w = loopdev_open_elsewhere(fd);

		close(fd);
		if (w == 0)
			return 0;
	}
	/* at RUNDIR/rw (a killed bridge) or RUNDIR/snap (an earlier life of
	 * ours killed while archiving) */
	loopdev_detach_mounts(real, "a dead bridge or an archive cut short");
	for (i = 0; i < LAYER_RELEASE_WAIT_MS / 10; i++) {
		if (loopdev_backing(real, NULL, 0) == 0)
			return 0;
		usleep(10000);
	}
	log_warnx("layer %s still in use %d ms after its bridge ended", img, LAYER_RELEASE_WAIT_MS);
	return -EBUSY;
}

int
layer_release(const struct record *r)
{
	char img[PATH_MAX + 16];

	snprintf(img, sizeof(img), "%s/disk.img", r->layer_dir);
	return image_release(img);
}

int
layer_snapshot_live(struct mgr *m, const struct record *r,
    char digest[SNAPSHOT_DIGEST_HEX + 1], uint64_t *size, bool *uploaded)
{
	char rw[PATH_MAX + 8];

	if (!m->cfg.snapshot_dir[0])
		return -ENOTSUP;
	snprintf(rw, sizeof(rw), "%s/rw", r->run_dir);
	/* a named snapshot is whole: it outlives the automatic ones */
	return archive_dir(m, r, rw, 0, NULL, digest, size, uploaded);
}

/* the index a restore left beside the image (layer_restore): what the
 * next archive of the layer can be a delta of */
static void
index_path(const struct record *r, char *out, size_t cap)
{
	snprintf(out, cap, "%s/base.idx", r->layer_dir);
}

/* The layer's index, when its next archive may be a delta of its base
 * (*depth: how many deltas deep that archive is); NULL when it is to be
 * whole (no index, an unreadable one, or a chain as deep as it may be) */
static struct snapshot_index *
base_index(const struct record *r, unsigned *depth)
{
	struct snapshot_index *base = NULL;
	char idx[PATH_MAX + 16];
	int ret;

	*depth = 0;
	index_path(r, idx, sizeof(idx));
	if ((ret = snapshot_index_load(idx, &base)) != 0) {
		if (ret != -ENOENT)
			log_warnx("layer of %s: its index is unreadable (%d): archived whole",
			    r->id.sandbox, ret);
		return NULL;
	}
	if (snapshot_index_depth(base) + 1 > SNAPSHOT_DELTA_DEPTH_MAX) {
		snapshot_index_free(base);
		return NULL;
	}
	*depth = snapshot_index_depth(base) + 1;
	return base;
}

/* A file changed within this much before the checkpoint's sync is left
 * out of its index: several ticks of the coarsest timestamps a file
 * system keeps (a jiffy, 10 ms at HZ=100), so that a change after the
 * sync cannot be given the ctime the index recorded */
#define CHECKPOINT_CTIME_MARGIN_NS 50000000L

int
layer_checkpoint(struct mgr *m, const struct record *r, char digest[SNAPSHOT_DIGEST_HEX + 1],
    uint64_t *size, unsigned *depth, char layer_base[SNAPSHOT_DIGEST_HEX + 1],
    struct snapshot_index **next)
{
	char rw[PATH_MAX + 8];
	struct snapshot_index *base, *x = NULL;
	struct timespec before;
	bool uploaded = false;
	int fd, ret;

	*next = NULL;
	*depth = 0;
	layer_base[0] = '\0';
	if (!m->cfg.snapshot_dir[0])
		return -ENOTSUP;
	snprintf(rw, sizeof(rw), "%s/rw", r->run_dir);
	/* the threshold first, then the sync: what the sandbox changes from
	 * the sync on (a write, or a page of a shared mapping the sync wrote
	 * back and protected again) is stamped after the threshold */
	clock_gettime(CLOCK_REALTIME, &before);
	if (before.tv_nsec >= CHECKPOINT_CTIME_MARGIN_NS)
		before.tv_nsec -= CHECKPOINT_CTIME_MARGIN_NS;
	else {
		before.tv_sec--;
		before.tv_nsec += 1000000000L - CHECKPOINT_CTIME_MARGIN_NS;
	}
	if ((fd = open(rw, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	ret = syncfs(fd) < 0 ? -errno : 0;
	close(fd);
	if (ret != 0)
		return ret;
	if ((ret = snapshot_index_build_live(rw, &before, &x)) < 0)
		return ret;
	if ((base = base_index(r, depth)) != NULL)
		snprintf(layer_base, SNAPSHOT_DIGEST_HEX + 1, "%s", snapshot_index_base(base));
	ret = archive_dir(m, r, rw, 0, base, digest, size, &uploaded);
	snapshot_index_free(base);
	if (ret == 0 && !uploaded) {
		const char *why = NULL;

		if ((ret = snapblob_put(m, digest, &why)) != 0)
			log_warnx("checkpoint of %s: archive %s: %s", r->id.sandbox, digest,
			    why ? why : "upload failed");
	}
	if (ret != 0) {
		snapshot_index_free(x);
		return ret;
	}
	*next = x;
	return 0;
}

int
layer_checkpoint_commit(const struct record *r, struct snapshot_index *next, const char *digest,
    unsigned depth)
{
	char idx[PATH_MAX + 16];

	index_path(r, idx, sizeof(idx));
	return snapshot_index_write(next, idx, digest, depth);
}

int
layer_snapshot_stopped(struct mgr *m, const struct record *r,
    char digest[SNAPSHOT_DIGEST_HEX + 1], uint64_t *size, bool *uploaded, unsigned *depth)
{
	char img[PATH_MAX + 16], mnt[PATH_MAX + 16];
	struct snapshot_index *base;
	int ret;

	*depth = 0;
	if (!m->cfg.snapshot_dir[0])
		return -ENOTSUP;
	/* a delta of the archive the layer was restored from (or last
	 * checkpointed as), unless the chain is as deep as it may be: then
	 * whole again */
	base = base_index(r, depth);
	snprintf(img, sizeof(img), "%s/disk.img", r->layer_dir);
	snprintf(mnt, sizeof(mnt), "%s/snap", r->run_dir);
	if (mkdir(mnt, 0700) != 0 && errno != EEXIST) {
		ret = -errno;
		snapshot_index_free(base);
		return ret;
	}
	if ((ret = mount_image(img, mnt, true)) != 0)
		goto out;
	/* the serving layer's loop device wrote the image with direct I/O
	 * (spaced-host/layer.c): its bytes are on the disk, not in the
	 * image file's page cache, so this mount reads them the same way,
	 * straight into its own pages, in the file system's large reads,
	 * instead of through a second, fresh copy in the image file's */
	loopdev_direct_io(mnt);
	/* a mount of its own, read once and unmounted: its pages need not
	 * stay cached */
	ret = archive_dir(m, r, mnt, SNAPSHOT_DROP_READ, base, digest, size, uploaded);
	if (umount2(mnt, 0) != 0)
		umount2(mnt, MNT_DETACH);
out:
	rmdir(mnt);
	snapshot_index_free(base);
	return ret;
}

/* everything beneath dfd to uid:uid; no symlink followed (a link is
 * given, not its target), no other file system entered. 0 or -errno. */
static int
chown_beneath(int dfd, dev_t dev, uid_t uid, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (depth > 256)
		return -ELOOP;
	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL && r == 0) {
		struct stat st;
		int cfd;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (st.st_dev != dev)
			continue;
		if (fchownat(dfd, de->d_name, uid, uid, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -errno;
			break;
		}
		if (!S_ISDIR(st.st_mode))
			continue;
		cfd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (cfd < 0) {
			r = -errno;
			break;
		}
		r = chown_beneath(cfd, dev, uid, depth + 1);
		close(cfd);
	}
	closedir(d);
	return r;
}

/* the restored files to the sandbox user; the layer root stays the
 * sandbox's root */
static int
chown_restored(const char *dir, uid_t uid)
{
	struct stat st;
	int fd, r;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return -errno;
	r = fstat(fd, &st) == 0 ? chown_beneath(fd, st.st_dev, uid, 0) : -errno;
	close(fd);
	return r;
}

/* digest from the cache: whole into mnt, or onto its base */
static int
restore_cached(const struct mgr *m, const char *digest, const char *onto, const char *mnt,
    uint64_t quota, const char **why)
{
	return onto ? snapshot_restore_onto(m->cfg.snapshot_dir, digest, onto, mnt, quota, NULL, why) :
	    snapshot_restore(m->cfg.snapshot_dir, digest, mnt, quota, NULL, why);
}

/* The archive into the mounted fresh image (mnt, empty). Read along its
 * download when one was started (*dl, consumed): the restore hashes the
 * bytes it reads of the downloaded file, the image is used only if they
 * were the digest, and the file enters the cache only then (one hash, of
 * the bytes the image was built from; the download did not end, or was
 * not the digest: the image is discarded). Otherwise from the cache, where a copy that fails
 * is dropped and fetched again, once: the cache's copy is not fsync'd
 * when it is fetched (nor trusted). A failed restore leaves mnt empty.
 * onto: NULL for a whole archive into an empty mnt, or the base a delta
 * is restored onto (mnt holds its state; a delta that fails leaves mnt
 * in no particular state, and is not tried again here). */
static int
restore_archive(const struct mgr *m0, const struct record *r, const char *digest, const char *onto,
    const char *mnt, struct snapblob_dl **dl, int rfd, const char **why)
{
	struct mgr *m = (struct mgr *)m0;
	uint64_t quota = (uint64_t)r->disk_mb << 20;
	const char *fwhy = NULL;
	int ret, fr;

	if (*dl != NULL) {
		struct snapshot_feed f = { .fd = rfd, .more = snapblob_more,
		    .passed = snapblob_passed, .ctx = *dl };

		ret = onto ? snapshot_restore_feed_onto(&f, digest, onto, mnt, quota, NULL, why) :
		    snapshot_restore_feed(&f, digest, mnt, quota, NULL, why);
		fr = snapblob_follow_end(*dl, ret == 0 ? SNAPBLOB_RESTORED : SNAPBLOB_REFUSED, &fwhy);
		*dl = NULL;
		if (fr == 0)
			return ret;     /* the bytes were the digest: the restore decides */
		if (fr == -ESTALE) {
			/* a large download, released behind the restore that
			 * refused it: fetched again whole into the cache (where
			 * its bytes are held to the digest), then, for a whole
			 * archive, restored from there: the verdict is the
			 * copy's own; a delta's mnt no longer holds its base,
			 * so the caller starts again, from the cache */
			log_warnx("archive %s: the restore along its download failed (%s): fetching "
			    "it whole to check it", digest, *why ? *why : "-");
			if ((fr = snapblob_fetch(m, digest, &fwhy)) != 0) {
				*why = fwhy;
				return fr;
			}
			if (onto != NULL)
				return ret;
			*why = NULL;
			return restore_cached(m, digest, onto, mnt, quota, why);
		}
		if (fr != -EAGAIN) {
			*why = fwhy;
			return fr;
		}
		/* the control plane went away during the download: fetched
		 * again with the usual retries, then restored from the cache;
		 * a delta's mnt no longer holds its base: the caller starts
		 * again (layer_restore) */
		log_info("archive %s: download cut short, fetching it again", digest);
		if (onto != NULL) {
			*why = "the archive's download was cut short";
			return -EAGAIN;
		}
		if ((ret = snapblob_fetch(m, digest, why)) != 0)
			return ret;
		*why = NULL;
		return restore_cached(m, digest, onto, mnt, quota, why);
	}
	ret = restore_cached(m, digest, onto, mnt, quota, why);
	if (ret == -EBADMSG) {
		log_warnx("archive %s: the cached copy failed verification (%s): fetching it again",
		    digest, *why ? *why : "-");
		snapblob_drop(m, digest);
		if (onto != NULL)
			return ret;     /* as above: the caller starts again */
		if ((ret = snapblob_fetch(m, digest, &fwhy)) != 0) {
			*why = fwhy;
			return ret;
		}
		*why = NULL;
		ret = restore_cached(m, digest, onto, mnt, quota, why);
	}
	return ret;
}

/* digest, a base of the archive being installed, into the empty mnt:
 * its own base first when it is a delta too (from the cache, fetched
 * when missing). *depth: how many deltas deep it is. */
static int
restore_chain(const struct mgr *m0, const struct record *r, const char *digest, const char *mnt,
    unsigned level, unsigned *depth, const char **why)
{
	struct mgr *m = (struct mgr *)m0;
	char base[SNAPSHOT_DIGEST_HEX + 1];
	struct snapblob_dl *none = NULL;
	int ret, isd;

	if (level > SNAPSHOT_DELTA_DEPTH_MAX) {
		*why = "incremental archives chained deeper than allowed";
		return -EBADMSG;
	}
	if ((isd = snapshot_base_of(m->cfg.snapshot_dir, digest, base)) == -ENOENT) {
		if ((ret = snapblob_fetch(m, digest, why)) != 0)
			return ret;
		isd = snapshot_base_of(m->cfg.snapshot_dir, digest, base);
	}
	if (isd < 0) {
		*why = "cannot read a base archive";
		return isd;
	}
	*depth = 0;
	if (isd == 1) {
		unsigned d = 0;

		if ((ret = restore_chain(m, r, base, mnt, level + 1, &d, why)) != 0)
			return ret;
		*depth = d + 1;
	}
	return restore_archive(m, r, digest, isd == 1 ? base : NULL, mnt, &none, -1, why);
}

/* the kept image's root to the new execution's sandbox root (mkfs gave
 * a fresh image's root to it) */
static int
chown_root(const char *dir, uid_t uid)
{
	return lchown(dir, uid, uid) == 0 ? 0 : -errno;
}

/* Builds r's layer image from digest. The image is, in order of
 * preference: the one this worker kept of the sandbox when it retired
 * (kept.c), as it is when it holds digest itself, or with digest
 * restored onto it when digest is a delta of what it holds; else a
 * fresh one, with digest's chain of bases restored first when digest is
 * a delta. The restored layer's index is written beside it (the next
 * archive's base). When a kept image or a delta fails, *again says so:
 * the caller builds the layer once more, fresh (the image may have been
 * the cause, or a cached copy, which was dropped). */
static int
restore_image(const struct mgr *m, const struct record *r, const char *digest, bool use_kept,
    bool *again, const char **why)
{
	char img[PATH_MAX + 16], fin[PATH_MAX + 16], mnt[PATH_MAX + 16], lf[PATH_MAX + 32];
	char owner[128], base[SNAPSHOT_DIGEST_HEX + 1], kd[SNAPSHOT_DIGEST_HEX + 1];
	char idx[PATH_MAX + 16];
	struct snapblob_dl *dl = NULL;
	const char *dwhy = NULL;
	unsigned kdepth = 0, depth = 0;
	int fd, ret, rfd = -1, isd = 0;
	bool kept = false, as_is = false;
	char *const mkfs[] = { (char *)tool("/sbin/mkfs.ext4", "/usr/sbin/mkfs.ext4"), "-q", "-F",
	    "-E", owner, "-m", "0", img, NULL };

	*why = "cannot build the layer";
	/* an archive the cache lacks is downloaded by digest from the
	 * control plane while the image is made and restored as it arrives
	 * (restore_archive); when no download can start now, it is fetched
	 * first with the usual retries: one that fails builds nothing */
	if (snapblob_follow((struct mgr *)m, digest, &dl, &rfd, &dwhy) < 0 &&
	    (ret = snapblob_fetch((struct mgr *)m, digest, why)) != 0)
		return ret;
	/* whole or a delta, and of what: read from its first bytes (the
	 * restore checks them again, hashed with the rest) */
	if (dl != NULL) {
		struct snapshot_feed f = { .fd = rfd, .more = snapblob_more, .ctx = dl };

		if ((isd = snapshot_feed_base_of(&f, base)) < 0) {
			/* the download failed before its first bytes: fetched
			 * with the usual retries, then read from the cache */
			(void)snapblob_follow_end(dl, SNAPBLOB_UNREAD, &dwhy);
			dl = NULL;
			close(rfd);
			rfd = -1;
			if ((ret = snapblob_fetch((struct mgr *)m, digest, why)) != 0)
				return ret;
			isd = snapshot_base_of(m->cfg.snapshot_dir, digest, base);
		}
	} else
		isd = snapshot_base_of(m->cfg.snapshot_dir, digest, base);
	/* built under another name and renamed into place when complete: a
	 * restore interrupted by a crash leaves no disk.img a bridge could
	 * start on, and the restart restores again (the digest is recorded) */
	snprintf(img, sizeof(img), "%s/disk.img.part", r->layer_dir);
	snprintf(fin, sizeof(fin), "%s/disk.img", r->layer_dir);
	snprintf(mnt, sizeof(mnt), "%s/restore", r->run_dir);
	index_path(r, idx, sizeof(idx));
	/* a fresh sparse file: its journal reads as zeros unwritten
	 * (spaced-host's layer.c makes its images the same way) */
	snprintf(owner, sizeof(owner), "root_owner=%u:%u,lazy_itable_init=1,lazy_journal_init=1",
	    r->uid_base, r->uid_base);
	/* a fresh image every time: a half-restored one from an interrupted
	 * attempt is not trusted (nor left mounted) */
	umount2(mnt, MNT_DETACH);
	unlink(img);
	unlink(fin);
	unlink(idx);
	if (use_kept && kept_peek(m, r->id.sandbox, kd, &kdepth) == 0 &&
	    (strcmp(kd, digest) == 0 || (isd == 1 && strcmp(kd, base) == 0)) &&
	    kept_take(m, r->id.sandbox, img, (uint64_t)r->disk_mb << 20) == 0) {
		kept = true;
		as_is = strcmp(kd, digest) == 0;
	}
	if (!kept) {
		if ((fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
			ret = -errno;
			goto fail;
		}
		ret = ftruncate(fd, (off_t)r->disk_mb << 20) == 0 ? 0 : -errno;
		close(fd);
		if (ret != 0 || (ret = run(mkfs)) != 0)
			goto fail;
	}
	/* a kept image was archived through a read-only loop device, which
	 * detaches itself once its file system is gone: not mounted again
	 * before it has */
	if (kept && (ret = image_release(img)) != 0)
		goto fail;
	if (mkdir(mnt, 0700) != 0 && errno != EEXIST) {
		ret = -errno;
		goto fail;
	}
	if ((ret = mount_image(img, mnt, false)) != 0)
		goto fail_dir;
	loopdev_direct_io(mnt);
	if (as_is) {
		/* the image is the archive's state: nothing to read */
		ret = 0;
		depth = kdepth;
		if (dl != NULL)
			(void)snapblob_follow_end(dl, SNAPBLOB_UNREAD, &dwhy);
		dl = NULL;
		log_info("layer of %s: the image kept here is %s itself", r->id.sandbox, digest);
		metrics_inc((struct mgr *)m, MC_KEPT_AS_IS);
	} else if (kept) {
		ret = restore_archive(m, r, digest, base, mnt, &dl, rfd, why);
		depth = kdepth + 1;
		if (ret == 0) {
			log_info("layer of %s: %s restored onto the image kept here", r->id.sandbox,
			    digest);
			metrics_inc((struct mgr *)m, MC_KEPT_ONTO);
		}
	} else {
		/* snapshot_restore wants an empty destination; spaced-host
		 * makes what it needs (home, tmp) when it mounts the layer */
		snprintf(lf, sizeof(lf), "%s/lost+found", mnt);
		rmdir(lf);
		if (isd == 1) {
			unsigned d = 0;

			/* the bases first (from the cache, or fetched),
			 * while the download goes on */
			if ((ret = restore_chain(m, r, base, mnt, 1, &d, why)) == 0) {
				depth = d + 1;
				ret = restore_archive(m, r, digest, base, mnt, &dl, rfd, why);
			}
		} else
			ret = restore_archive(m, r, digest, NULL, mnt, &dl, rfd, why);
	}
	if (ret == 0) {
		if (chown_restored(mnt, r->uid_base + JAIL_USER_UID) != 0 ||
		    (kept && chown_root(mnt, r->uid_base) != 0)) {
			*why = "cannot give the restored files to the sandbox user";
			ret = -EIO;
		} else if (m->cfg.kept_layers > 0 && depth <= SNAPSHOT_DELTA_DEPTH_MAX &&
		    (fd = snapshot_index_save(mnt, idx, digest, depth)) != 0) {
			/* no index: the next archive is whole */
			log_info("layer of %s: no index of the restored files (%d)", r->id.sandbox, fd);
			unlink(idx);
		}
	} else if (*why == NULL)
		*why = ret == -ENOENT ? "no such snapshot in the store" : "snapshot restore failed";
	if (umount2(mnt, 0) != 0)
		umount2(mnt, MNT_DETACH);
fail_dir:
	rmdir(mnt);
	if (ret == 0 && rename(img, fin) != 0) {
		*why = "cannot publish the restored layer";
		ret = -errno;
	}
fail:
	if (dl != NULL)         /* the image failed before the restore began */
		(void)snapblob_follow_end(dl, SNAPBLOB_UNREAD, &dwhy);
	if (rfd >= 0)
		close(rfd);
	if (ret != 0) {
		unlink(img);
		unlink(idx);
		/* a kept image, or a delta restored onto its bases: a
		 * failure may be the image's, or a cached copy's (dropped),
		 * so the layer is built once more, fresh */
		*again = kept || isd == 1;
	}
	return ret;
}

int
layer_restore(const struct mgr *m, const struct record *r, const char *digest, const char **why)
{
	bool again = false;
	int ret;

	if (!m->cfg.snapshot_dir[0]) {
		*why = "no snapshot store on this worker (--snapshot-dir)";
		return -ENOTSUP;
	}
	ret = restore_image(m, r, digest, true, &again, why);
	if (ret != 0 && again) {
		log_warnx("layer of %s: restoring %s failed (%s): building it fresh once more",
		    r->id.sandbox, digest, *why ? *why : "-");
		*why = NULL;
		metrics_inc((struct mgr *)m, MC_RESTORE_AGAIN);
		ret = restore_image(m, r, digest, false, &again, why);
	}
	return ret;
}
