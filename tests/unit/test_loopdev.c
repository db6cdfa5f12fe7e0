/* loopdev.c: which loop devices back an image, and detaching the mounts a
 * killed process left on one. Real loop devices and mounts: needs root
 * (the tests run as root). */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <linux/limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "loopdev.h"
#include "tap.h"

__attribute__((format(printf, 1, 2)))
static int
sh(const char *fmt, ...)
{
	char cmd[3 * PATH_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

static int
mounted_at(const char *dir)
{
	char line[4096], mp[PATH_MAX];
	FILE *f = fopen("/proc/self/mountinfo", "re");
	int hit = 0;

	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "%*d %*d %*s %*s %4095s", mp) == 1 && strcmp(mp, dir) == 0)
			hit = 1;
	fclose(f);
	return hit;
}

int
main(void)
{
	char tmpl[] = "/tmp/loopdev.XXXXXX", img[PATH_MAX], real[PATH_MAX];
	char m1[PATH_MAX], m2[PATH_MAX], devs[4][16];
	int n, i, rfd, wfd;

	log_init("test_loopdev", 0);
	if (geteuid() != 0) {
		ok(0, "loop devices need root (the tests run as root)");
		return done_testing();
	}
	if (mkdtemp(tmpl) == NULL) {
		ok(0, "mkdtemp: %s", strerror(errno));
		return done_testing();
	}
	snprintf(img, sizeof(img), "%s/disk.img", tmpl);
	snprintf(m1, sizeof(m1), "%s/a", tmpl);
	snprintf(m2, sizeof(m2), "%s/b", tmpl);
	mkdir(m1, 0700);
	mkdir(m2, 0700);
	ok(sh("truncate -s 16M %s && mkfs.ext4 -q -F %s >/dev/null 2>&1", img, img) == 0,
	    "a 16 MiB ext4 image");
	ok(realpath(img, real) != NULL, "its realpath");

	is_int(loopdev_backing(real, devs, 4), 0, "no loop device backs an unmounted image");
	is_int(loopdev_backing("/nonexistent/disk.img", NULL, 0), 0, "nor a file that does not exist");
	is_int(loopdev_detach_mounts(real, "nobody"), 0, "nothing to detach");

	/* the O(1) question asked before the scan: nothing else has it */
	rfd = open(img, O_RDONLY | O_CLOEXEC);
	ok(rfd >= 0, "the image opened read-only (as the layer's lock is)");
	is_int(loopdev_open_elsewhere(rfd), 0, "nothing else has an idle image open");
	wfd = open(img, O_RDWR | O_CLOEXEC);
	is_int(loopdev_open_elsewhere(rfd), 1, "another descriptor open for writing is seen");
	close(wfd);
	is_int(loopdev_open_elsewhere(rfd), 0, "and is gone once closed");
	wfd = open(img, O_RDONLY | O_CLOEXEC);
	is_int(loopdev_open_elsewhere(rfd), 1, "another read-only descriptor is seen too");
	close(wfd);

	/* an archive's read-only mount (a read-only loop device) left
	 * behind holds the image open read-only: it is seen and detached */
	ok(sh("mount -o loop,ro %s %s", img, m1) == 0, "mounted read-only on a read-only loop device");
	is_int(loopdev_open_elsewhere(rfd), 1, "a read-only loop device's hold is seen");
	is_int(loopdev_detach_mounts(real, "a test"), 1, "and its mount detached");
	for (i = 0; i < 200 && loopdev_open_elsewhere(rfd) != 0; i++)
		usleep(10000);
	is_int(loopdev_open_elsewhere(rfd), 0, "nothing holds the image once it is gone");

	ok(sh("mount -o loop %s %s", img, m1) == 0, "mounted on a loop device");
	/* the loop device holds its backing file open read-write: a mount
	 * left by a killed bridge is never taken for an idle image */
	is_int(loopdev_open_elsewhere(rfd), 1, "a mounted image is held (its loop device)");
	n = loopdev_backing(real, devs, 4);
	is_int(n, 1, "one loop device backs it");
	ok(n == 1 && strchr(devs[0], ':') != NULL, "its device number (%s)", n == 1 ? devs[0] : "-");
	is_int(loopdev_backing(real, NULL, 0), 1, "counted without the numbers too");

	/* a second mount of the same device (a bind mount), as a killed
	 * bridge's mount and its jail's copy would be */
	ok(mount(m1, m2, NULL, MS_BIND, NULL) == 0, "a bind mount of it");
	is_int(loopdev_detach_mounts(real, "a test"), 2, "both mounts of it detached");
	ok(mounted_at(m1) == 0 && mounted_at(m2) == 0, "neither is mounted any more");
	for (i = 0; i < 200 && loopdev_backing(real, NULL, 0) != 0; i++)
		usleep(10000);
	is_int(loopdev_backing(real, NULL, 0), 0,
	    "the loop device detached itself once its file system ended (%d ms)", i * 10);
	is_int(loopdev_open_elsewhere(rfd), 0, "nothing holds it once the loop device is gone");

	/* an image of another name is not confused with this one */
	ok(sh("mount -o loop %s %s", img, m1) == 0, "mounted again");
	{
		char other[PATH_MAX + 8];
		snprintf(other, sizeof(other), "%s.other", real);
		is_int(loopdev_backing(other, NULL, 0), 0, "a path that only starts like it does not match");
	}
	umount2(m1, MNT_DETACH);
	close(rfd);
	sh("rm -rf %s", tmpl);
	return done_testing();
}
