/* Loop devices behind layer images (loopdev.h): read from sysfs and
 * /proc/self/mountinfo, never from a cache, since what matters is what the
 * kernel holds now. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "log.h"
#include "loopdev.h"

/* one line of a sysfs file, without its newline */
static int
sysfs_line(const char *path, char *buf, size_t cap)
{
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	n = read(fd, buf, cap - 1);
	close(fd);
	if (n <= 0)
		return -EIO;
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

int
loopdev_backing(const char *real, char devs[][16], int max)
{
	char path[300], buf[PATH_MAX + 2];
	struct dirent *de;
	int n = 0;
	DIR *d;

	if ((d = opendir("/sys/block")) == NULL)
		return 0;
	while ((de = readdir(d)) != NULL) {
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		/* the file exists only while the device is attached */
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		if (sysfs_line(path, buf, sizeof(buf)) != 0 || strcmp(buf, real) != 0)
			continue;
		if (devs != NULL && n < max) {
			snprintf(path, sizeof(path), "/sys/block/%s/dev", de->d_name);
			if (sysfs_line(path, buf, sizeof(buf)) != 0 || strlen(buf) >= sizeof(devs[0]))
				continue;
			memcpy(devs[n], buf, strlen(buf) + 1);
		}
		n++;
	}
	closedir(d);
	return n;
}

int
loopdev_detach_mounts(const char *real, const char *who)
{
	char devs[8][16], line[4096], mdev[32], mpoint[PATH_MAX];
	int n, i, detached = 0;
	FILE *mi;

	if ((n = loopdev_backing(real, devs, 8)) > 8)
		n = 8;
	if (n <= 0 || (mi = fopen("/proc/self/mountinfo", "re")) == NULL)
		return 0;
	/* mountinfo: id parent major:minor root mountpoint ... */
	while (fgets(line, sizeof(line), mi) != NULL) {
		if (sscanf(line, "%*d %*d %31s %*s %4095s", mdev, mpoint) != 2)
			continue;
		for (i = 0; i < n && strcmp(mdev, devs[i]) != 0; i++)
			;
		if (i == n)
			continue;
		log_warnx("layer %s still mounted at %s by %s: detaching", real, mpoint, who);
		if (umount2(mpoint, MNT_DETACH) < 0)
			log_warn("umount %s", mpoint);
		else
			detached++;
	}
	fclose(mi);
	return detached;
}

int
loopdev_open_elsewhere(int fd)
{
	int r = 0;

	/* the lease's break would be signalled to us (SIGIO, whose default
	 * ends the process) if someone opened the file in the instant we
	 * hold it: SIGURG is ignored by default */
	if (fcntl(fd, F_SETSIG, SIGURG) < 0)
		return -errno;
	/* a write lease, though fd is read-only: the kernel grants it only
	 * when fd is the file's one open (no reader, no writer besides) */
	if (fcntl(fd, F_SETLEASE, F_WRLCK) < 0)
		return errno == EAGAIN ? 1 : -errno;
	if (fcntl(fd, F_SETLEASE, F_UNLCK) < 0)
		r = -errno;
	return r;
}

/* The loop device under a mounted image, switched to direct I/O: what
 * the file system on it writes goes to the image file's blocks without
 * passing through the image file's page cache too (one cached copy of
 * the data, not two, and no copy between them) (loopdev.h). */
void
loopdev_direct_io(const char *mnt)
{
	char sys[64], link[256], dev[sizeof(link) + 8];
	const char *name;
	struct stat st;
	ssize_t n;
	int fd;

	if (stat(mnt, &st) != 0)
		return;
	snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", major(st.st_dev), minor(st.st_dev));
	if ((n = readlink(sys, link, sizeof(link) - 1)) <= 0)
		return;
	link[n] = '\0';
	name = strrchr(link, '/') ? strrchr(link, '/') + 1 : link;
	/* a whole loop device ("loopN"), not a partition of one */
	if (strncmp(name, "loop", 4) != 0 || name[4] == '\0' ||
	    strspn(name + 4, "0123456789") != strlen(name + 4))
		return;
	snprintf(dev, sizeof(dev), "/dev/%s", name);
	if ((fd = open(dev, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	if (ioctl(fd, LOOP_SET_DIRECT_IO, 1UL) != 0)
		log_debug("%s: no direct I/O on %s: %s", mnt, dev, strerror(errno));
	close(fd);
}
