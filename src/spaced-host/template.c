/* A template image as the jail's root (docs/templates.md, docs/jail.md):
 *
 *   RUNDIR/tpl    squashfs, loop device, ro,nodev,nosuid (host ids)
 *   RUNDIR/lower  idmapped clone of it: image uid N is uid_base + N, so
 *                 the sandbox's root owns what the image's root owns
 *   RUNDIR/root   overlay lowerdir=lower, upperdir=LAYER/upper,
 *                 workdir=LAYER/work: the sandbox's "/"; everything it
 *                 changes lands in the writable layer, so a snapshot of
 *                 the layer is a snapshot of the upper layer only
 *
 * All of it is mounted here, by the root monitor, before the clone; the
 * child binds RUNDIR/root as its new root. */
#include <errno.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer.h"
#include "log.h"
#include "template.h"
#include "tplimage.h"

/* attach fd read-only to a free loop device (autoclear) and mount it */
static int
loop_mount_ro(int ifd, const char *dir)
{
	struct loop_config lc;
	char dev[64];
	int ctl, lfd = -1, r = -EBUSY, n, tries;

	if ((ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC)) < 0)
		return -errno;
	for (tries = 0; tries < 16; tries++) {
		if ((n = ioctl(ctl, LOOP_CTL_GET_FREE)) < 0) {
			r = -errno;
			break;
		}
		snprintf(dev, sizeof(dev), "/dev/loop%d", n);
		if ((lfd = open(dev, O_RDONLY | O_CLOEXEC)) < 0) {
			r = -errno;
			break;
		}
		memset(&lc, 0, sizeof(lc));
		lc.fd = (uint32_t)ifd;
		lc.info.lo_flags = LO_FLAGS_AUTOCLEAR | LO_FLAGS_READ_ONLY;
		if (ioctl(lfd, LOOP_CONFIGURE, &lc) == 0) {
			r = 0;
			break;
		}
		r = -errno;
		close(lfd);
		lfd = -1;
		if (r != -EBUSY)
			break;
	}
	if (r == 0 && mount(dev, dir, "squashfs", MS_RDONLY | MS_NOSUID | MS_NODEV, NULL) < 0)
		r = -errno;
	if (lfd >= 0)
		close(lfd);     /* autoclear: the mount now holds the device */
	close(ctl);
	return r;
}

/* a user namespace mapping 0..JAIL_IDS-1 to uid_base.., held by a child
 * that waits on a pipe; *nsfd its /proc/PID/ns/user */
static int
idmap_userns(uid_t base, pid_t *pid, int *nsfd, int *hold)
{
	char p[64], map[64];
	int pp[2], fd, r = 0;
	const char *files[] = { "uid_map", "setgroups", "gid_map" };
	const char *vals[3];
	char c;

	if (pipe2(pp, O_CLOEXEC) < 0)
		return -errno;
	*pid = fork();
	if (*pid < 0) {
		r = -errno;
		close(pp[0]);
		close(pp[1]);
		return r;
	}
	if (*pid == 0) {
		close(pp[1]);
		if (unshare(CLONE_NEWUSER) < 0)
			_exit(1);
		/* tell the parent by closing nothing: it polls the ns link */
		if (read(pp[0], &c, 1) < 0)
			_exit(1);
		_exit(0);
	}
	close(pp[0]);
	*hold = pp[1];
	snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)base, JAIL_IDS);
	vals[0] = map;
	vals[1] = "deny";
	vals[2] = map;
	/* the child has unshared once its ns link differs from ours */
	for (int i = 0; i < 1000; i++) {
		struct stat a, b;
		snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)*pid);
		if (stat(p, &a) == 0 && stat("/proc/self/ns/user", &b) == 0 && a.st_ino != b.st_ino)
			break;
		usleep(1000);
	}
	for (int i = 0; i < 3; i++) {
		snprintf(p, sizeof(p), "/proc/%d/%s", (int)*pid, files[i]);
		if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
			return -errno;
		if (write(fd, vals[i], strlen(vals[i])) < 0)
			r = -errno;
		close(fd);
		if (r < 0)
			return r;
	}
	snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)*pid);
	if ((*nsfd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	return 0;
}

/* RUNDIR/tpl cloned with its ids shifted, attached at RUNDIR/lower */
static int
mount_idmapped(const char *from, const char *to, uid_t base)
{
	struct mount_attr a;
	pid_t pid = -1;
	int ns = -1, hold = -1, tree = -1, r, st;

	if ((r = idmap_userns(base, &pid, &ns, &hold)) < 0)
		goto out;
	if ((tree = (int)syscall(SYS_open_tree, AT_FDCWD, from, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC)) < 0) {
		r = -errno;
		goto out;
	}
	memset(&a, 0, sizeof(a));
	a.attr_set = MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;
	a.userns_fd = (uint64_t)ns;
	if (syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0 ||
	    syscall(SYS_move_mount, tree, "", AT_FDCWD, to, MOVE_MOUNT_F_EMPTY_PATH) < 0)
		r = -errno;
out:
	if (tree >= 0)
		close(tree);
	if (ns >= 0)
		close(ns);
	if (hold >= 0)
		close(hold);
	if (pid > 0) {
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
	}
	return r;
}

static int
mkdir_owned(const char *p, mode_t mode, uid_t u)
{
	struct stat st;

	if (mkdir(p, mode) < 0 && errno != EEXIST)
		return -errno;
	/* the layer is the sandbox's: what sits there must be a directory,
	 * not a link it planted */
	if (lstat(p, &st) < 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	if (chown(p, u, u) < 0 || chmod(p, mode) < 0)
		return -errno;
	return 0;
}

int
template_mount(struct tpl_mount *t, const struct substrate_config *cfg, const char *layer_rw)
{
	char digest[TPL_DIGEST_HEX + 1], upper[1100], work[1100], opts[3600];
	struct stat st;
	uint64_t size;
	int fd = -1, r;

	memset(t, 0, sizeof(*t));
	if (!tpl_digest_valid(cfg->template_name) || cfg->template_image == NULL)
		return -EINVAL;
	snprintf(t->ro, sizeof(t->ro), "%s/tpl", cfg->run_dir);
	snprintf(t->lower, sizeof(t->lower), "%s/lower", cfg->run_dir);
	snprintf(t->root, sizeof(t->root), "%s/root", cfg->run_dir);
	if ((fd = open(cfg->template_image, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		r = -errno;
		log_warn("template image %s", cfg->template_image);
		return r;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/* the bytes hashed are the bytes the loop device will read: the same
	 * open file, in a directory only root writes (the worker's cache) */
	if ((r = tpl_digest_fd(fd, digest, &size)) < 0) {
		close(fd);
		return r;
	}
	if (strcmp(digest, cfg->template_name) != 0) {
		log_warnx("template image %s has digest %s, not %s: refused",
		    cfg->template_image, digest, cfg->template_name);
		close(fd);
		return -EBADMSG;
	}
	if ((mkdir(t->ro, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(t->lower, 0700) < 0 && errno != EEXIST) ||
	    (mkdir(t->root, 0700) < 0 && errno != EEXIST)) {
		close(fd);
		return -errno;
	}
	/* what a dead bridge of this run directory left mounted */
	umount2(t->root, MNT_DETACH);
	umount2(t->lower, MNT_DETACH);
	umount2(t->ro, MNT_DETACH);
	r = loop_mount_ro(fd, t->ro);
	close(fd);
	if (r < 0) {
		log_warnx("cannot mount template %s: %s", cfg->template_name, strerror(-r));
		return r;
	}
	t->ro_mounted = true;
	if ((r = mount_idmapped(t->ro, t->lower, cfg->uid_base)) < 0) {
		log_warnx("cannot shift the template's ids: %s", strerror(-r));
		return r;
	}
	t->lower_mounted = true;
	/* upper: the sandbox root's; work: overlay's own, never visible inside */
	snprintf(upper, sizeof(upper), "%s/upper", layer_rw);
	snprintf(work, sizeof(work), "%s/work", layer_rw);
	if ((r = mkdir_owned(upper, 0755, cfg->uid_base)) < 0 ||
	    (r = mkdir_owned(work, 0700, 0)) < 0)
		return r;
	/* no redirects, metacopy or index: the upper layer is the sandbox's
	 * data (it comes back from snapshots), so overlay must not follow
	 * anything it says beyond plain files and whiteouts */
	snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s,"
	    "redirect_dir=off,metacopy=off,index=off,xino=off", t->lower, upper, work);
	if (mount("overlay", t->root, "overlay", MS_NOSUID | MS_NODEV, opts) < 0) {
		r = -errno;
		log_warn("mount the template overlay");
		return r;
	}
	t->root_mounted = true;
	log_info("template %s (%llu bytes) verified and mounted", cfg->template_name,
	    (unsigned long long)size);
	return 0;
}

/* the mounts a previous bridge of this run directory made for the kept
 * jail: ours to unmount when it ends */
void
template_adopt(struct tpl_mount *t, const struct substrate_config *cfg)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->ro, sizeof(t->ro), "%s/tpl", cfg->run_dir);
	snprintf(t->lower, sizeof(t->lower), "%s/lower", cfg->run_dir);
	snprintf(t->root, sizeof(t->root), "%s/root", cfg->run_dir);
	t->ro_mounted = t->lower_mounted = t->root_mounted = true;
}

void
template_unmount(struct tpl_mount *t)
{
	if (t->root_mounted && umount2(t->root, MNT_DETACH) < 0)
		log_warn("umount %s", t->root);
	if (t->lower_mounted && umount2(t->lower, MNT_DETACH) < 0)
		log_warn("umount %s", t->lower);
	if (t->ro_mounted && umount2(t->ro, MNT_DETACH) < 0)
		log_warn("umount %s", t->ro);
	t->root_mounted = t->lower_mounted = t->ro_mounted = false;
}
