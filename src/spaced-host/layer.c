/* The writable layer of a jail: an ext4 image in LAYERDIR, loop-mounted
 * at RUNDIR/rw, so the sandbox can fill only the image, never the host's
 * disk (docs/jail.md, "Disk limit"). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/limits.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer.h"
#include "log.h"
#include "loopdev.h"
#include "util.h"


static int
run_mkfs(const char *img, uid_t base)
{
	char owner[64];
	pid_t pid;
	int st;

	/* lazy_journal_init: the image is a new sparse file (O_EXCL), whose
	 * holes read as zeros; writing 64 MiB of zeros into the journal of
	 * a 4 GiB image only made them real disk blocks (and dirty pages
	 * every fsync on the host waits behind) */
	snprintf(owner, sizeof(owner), "root_owner=%u:%u,lazy_journal_init=1", (unsigned)base,
	    (unsigned)base);
	if ((pid = fork()) < 0)
		return -errno;
	if (pid == 0) {
		int nul = open("/dev/null", O_RDWR);
		if (nul >= 0) {
			dup2(nul, 0);
			dup2(nul, 1);
		}
		execl("/sbin/mkfs.ext4", "mkfs.ext4", "-q", "-F", "-E", owner,
		    "-m", "0", img, (char *)NULL);
		execl("/usr/sbin/mkfs.ext4", "mkfs.ext4", "-q", "-F", "-E", owner,
		    "-m", "0", img, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &st, 0) < 0)
		return -errno;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

/* attach img to a free loop device (autoclear: it goes away with the last
 * mount) and mount it at dir, nosuid/nodev. The device does direct I/O
 * on the image file when the file's file system allows it: the layer's
 * pages live once, in its own file system's page cache (charged to the
 * sandbox's memory cgroup), not a second time in the image file's (which
 * nothing charged, and whose dirty pages an fsync in the sandbox then had
 * to push out all at once). Asked for in LOOP_CONFIGURE, before the
 * device serves: switched on afterwards (LOOP_SET_DIRECT_IO) the kernel
 * freezes the device's queue, 10 to 30 ms here. */
static int
loop_mount(const char *img, const char *dir)
{
	struct loop_config lc;
	char dev[64];
	int ctl = -1, lfd = -1, ifd = -1, r, n, tries;
	bool dio = true;

	if ((ifd = open(img, O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	/* another process may take the device between GET_FREE and CONFIGURE */
	for (tries = 0; tries < 16; tries++) {
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			r = -errno;
			goto out;
		}
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		if ((lfd = open(dev, O_RDWR | O_CLOEXEC)) < 0) {
			r = -errno;
			goto out;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)ifd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | (dio ? LO_FLAGS_DIRECT_IO : 0);
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0)
			break;
		r = -errno;
		close(lfd);
		lfd = -1;
		if (r != -EBUSY && dio) {
			/* a kernel that refuses direct I/O on this file
			 * rather than leaving it off: the page cache, then
			 * (any other refusal comes back on the next try) */
			log_debug("%s: no direct I/O for its loop device: %s", img, strerror(-r));
			dio = false;
			continue;
		}
		if (r != -EBUSY)
			goto out;
	}
	if (lfd < 0) {
		r = -EBUSY;
		goto out;
	}
	r = 0;
	if (mount(dev, dir, "ext4", MS_NOSUID | MS_NODEV, "errors=remount-ro") < 0)
		r = -errno;
out:
	/* with AUTOCLEAR the device detaches when lfd closes and no mount
	 * holds it, so a failed mount leaves nothing behind */
	if (lfd >= 0)
		close(lfd);
	if (ctl >= 0)
		close(ctl);
	if (ifd >= 0)
		close(ifd);
	return r;
}

/* how long a layer image mounted in another mount namespace is waited
 * for before the bridge refuses to mount it (ms) */
#define LAYER_STALE_WAIT_MS 5000

/* A bridge killed with SIGKILL leaves its layer mounted (at its RUNDIR/rw,
 * which may not be ours). Mounting the image again beside that mount would
 * have two ext4 instances write one file: find every loop device backed by
 * the image and detach its mounts first. We hold the layer's flock, so no
 * live bridge owns them. */
static int
layer_unmount_stale(const char *img, int lock_fd)
{
	char real[PATH_MAX];
	int i;

	/* every mount of the image is on a loop device, and a loop device
	 * (read-write or read-only) holds the image open: when the kernel
	 * says nothing but our lock has it open (an O(1) question), there
	 * is nothing to detach. Otherwise (or when it cannot tell) every
	 * loop device is looked at, which costs one sysfs read per loop
	 * device the machine ever made */
	if (loopdev_open_elsewhere(lock_fd) == 0)
		return 0;
	if (realpath(img, real) == NULL)
		return -errno;
	loopdev_detach_mounts(real, "a dead bridge");
	/* a mount in another mount namespace (an old jail whose last
	 * processes are still dying) keeps its loop device and its ext4
	 * alive where we cannot detach it: wait for it to end, and refuse
	 * rather than mount a second ext4 on the same image */
	for (i = 0; i < LAYER_STALE_WAIT_MS / 10; i++) {
		if (loopdev_backing(real, NULL, 0) == 0)
			return 0;
		usleep(10000);
	}
	log_warnx("layer image %s is still mounted elsewhere %d ms on: not mounted again", img,
	    LAYER_STALE_WAIT_MS);
	return -EBUSY;
}

/* ids of the previous owner of the layer, to move files to our range */
static uid_t shift_from, shift_to;

static int
shift_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	uid_t u = st->st_uid;
	gid_t g = st->st_gid;

	if (u >= shift_from && u - shift_from < JAIL_IDS)
		u = u - shift_from + shift_to;
	if (g >= shift_from && g - shift_from < JAIL_IDS)
		g = g - shift_from + shift_to;
	if ((u != st->st_uid || g != st->st_gid) && lchown(p, u, g) < 0)
		return -1;
	/* lchown clears set-id bits; the layer is nosuid anyway */
	return 0;
}

static int
ensure_dir(const char *path, mode_t mode, uid_t uid, gid_t gid)
{
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -errno;
	if (chown(path, uid, gid) < 0 || chmod(path, mode) < 0)
		return -errno;
	return 0;
}

int
layer_open(struct layer *s, const struct substrate_config *cfg)
{
	char img[1024], p[1100];
	struct stat st;
	int fd, r;

	snprintf(img, sizeof(img), "%s/disk.img", cfg->layer_dir);
	s->mkfs_ns = 0;
	if (stat(img, &st) < 0) {
		uint64_t t0 = now_mono_ns();

		/* first run of this layer: a sparse image, so only what the
		 * sandbox writes uses host disk, and never more than disk_mb */
		if ((fd = open(img, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0)
			return -errno;
		r = ftruncate(fd, (off_t)cfg->disk_mb << 20) < 0 ? -errno : 0;
		close(fd);
		if (r == 0)
			r = run_mkfs(img, cfg->uid_base);
		s->mkfs_ns = now_mono_ns() - t0;
		if (r < 0) {
			unlink(img);
			log_warnx("cannot make the layer image %s: %s", img, strerror(-r));
			return r;
		}
	} else if (st.st_size < ((off_t)cfg->disk_mb << 20)) {
		log_info("layer image %s is smaller than --disk-mb; kept as is", img);
	}
	/* one user of a layer at a time: the same ext4 image mounted twice
	 * (two bridges of one execution) would corrupt it */
	if ((s->lock_fd = open(img, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		log_warnx("layer %s is in use by another bridge", img);
		return -EBUSY;
	}
	if ((r = layer_unmount_stale(img, s->lock_fd)) < 0)
		return r;
	snprintf(s->rw, sizeof(s->rw), "%s/rw", cfg->run_dir);
	if (mkdir(s->rw, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((r = loop_mount(img, s->rw)) < 0) {
		log_warnx("cannot mount the layer image %s: %s", img, strerror(-r));
		return r;
	}
	s->mounted = true;
	/* a layer restored on another worker carries that worker's uid range:
	 * move it to ours, or the user could not read its own files */
	if (stat(s->rw, &st) < 0)
		return -errno;
	if (st.st_uid != cfg->uid_base) {
		shift_from = st.st_uid;
		shift_to = cfg->uid_base;
		if (nftw(s->rw, shift_one, 32, FTW_PHYS | FTW_MOUNT) != 0)
			return -EIO;
	}
	/* the layer root: owned by root of the sandbox, not writable by the user */
	if (chown(s->rw, cfg->uid_base, cfg->uid_base) < 0 || chmod(s->rw, 0755) < 0)
		return -errno;
	snprintf(p, sizeof(p), "%s/home", s->rw);
	if ((r = ensure_dir(p, 0755, cfg->uid_base + JAIL_USER_UID, cfg->uid_base + JAIL_USER_UID)) < 0)
		return r;
	snprintf(p, sizeof(p), "%s/tmp", s->rw);
	if ((r = ensure_dir(p, 01777, cfg->uid_base, cfg->uid_base)) < 0)
		return r;
	snprintf(p, sizeof(p), "%s/lost+found", s->rw);
	(void)chmod(p, 0700);
	return 0;
}

/* the layer of a kept jail (docs/jail.md): take its lock (a live bridge
 * holds it: -EBUSY) and adopt the mount the previous bridge left at
 * RUNDIR/rw, to unmount it when the jail ends; -ENOENT: no image yet. */
int
layer_adopt(struct layer *s, const struct substrate_config *cfg)
{
	char img[1024];
	struct stat a, b;

	snprintf(img, sizeof(img), "%s/disk.img", cfg->layer_dir);
	s->mkfs_ns = 0;
	s->mounted = false;
	if ((s->lock_fd = open(img, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0) {
		log_warnx("layer %s is in use by another bridge", img);
		close(s->lock_fd);
		s->lock_fd = -1;
		return -EBUSY;
	}
	snprintf(s->rw, sizeof(s->rw), "%s/rw", cfg->run_dir);
	s->mounted = stat(s->rw, &a) == 0 && stat(cfg->run_dir, &b) == 0 && a.st_dev != b.st_dev;
	return 0;
}

void
layer_close(struct layer *s)
{
	if (s->mounted) {
		/* lazy: a process of the host still walking it (nftw, a
		 * snapshot) does not keep the jail's layer busy forever */
		if (umount2(s->rw, MNT_DETACH) < 0)
			log_warn("umount %s", s->rw);
		s->mounted = false;
	}
	if (s->lock_fd >= 0) {
		close(s->lock_fd);
		s->lock_fd = -1;
	}
}
