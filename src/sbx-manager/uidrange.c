/* Host uid ranges. Every sandbox gets 65536 host uids of its own
 * (its user namespace maps onto them), and two sandboxes must never share
 * one, not even when several workers (sbx-managers with different data
 * directories, as `space up` runs them) share a machine.
 *
 * So each data directory claims a run of consecutive windows of
 * MGR_SLOTS_MAX slots each (as many as --capacity needs: 1 up to 256
 * sandboxes, 4 up to MGR_CAPACITY_MAX) in a host-wide registry,
 * /var/lib/space/uid-windows/<n> (created with O_EXCL, holding the data
 * directory's path), and remembers the first and the count in
 * D/uid-window ("N" for one window, as before; "N K" for K). Slot s of the
 * worker is uid_base_for(first, s): the slots of window first + 1 follow
 * those of first, so the uid bases of a worker that grew stay where they
 * were. Inside the run, a slot is held by a live record (records.c). A
 * registry entry whose data directory is gone, or no longer says it owns
 * that window, is stale and may be claimed again. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sbx-manager.h"
#include "util.h"

#define REGISTRY "/var/lib/space/uid-windows"

/* D/uid-window: "N\n" (one window) or "N K\n" (K windows from N) */
static int
read_window(const char *dir, long *n, long *k)
{
	char path[PATH_MAX + 32], *buf = NULL, *end, *p;
	size_t len;
	int ret = -ENOENT;

	snprintf(path, sizeof(path), "%s/uid-window", dir);
	if (read_file(path, 32, &buf, &len) != 0)
		return -ENOENT;
	errno = 0;
	*n = strtol(buf, &end, 10);
	*k = 1;
	if (errno == 0 && end != buf && *end == ' ') {
		p = end + 1;
		*k = strtol(p, &end, 10);
		if (end == p || *p == '-' || *p == '+')
			*k = 0;
	}
	if (errno == 0 && end != buf && (*end == '\0' || *end == '\n') && *n >= 0 &&
	    *k >= 1 && *k <= MGR_WINDOWS_PER_WORKER && *n + *k <= MGR_WINDOWS_MAX)
		ret = 0;
	free(buf);
	return ret;
}

/* does dir's D/uid-window cover window m? */
static bool
dir_covers(const char *dir, long m)
{
	long n, k;

	return read_window(dir, &n, &k) == 0 && m >= n && m < n + k;
}

/* does the registry entry m name dir, and dir cover m? */
static bool
entry_owned_by(long m, const char *dir)
{
	char path[64], *buf = NULL;
	size_t len;
	bool ok;

	snprintf(path, sizeof(path), REGISTRY "/%ld", m);
	if (read_file(path, PATH_MAX, &buf, &len) != 0)
		return false;
	ok = strcmp(buf, dir) == 0 && dir_covers(buf, m);
	free(buf);
	return ok;
}

static bool
entry_stale(long m)
{
	char path[64], *buf = NULL;
	size_t len;
	bool stale;

	snprintf(path, sizeof(path), REGISTRY "/%ld", m);
	if (read_file(path, PATH_MAX, &buf, &len) != 0)
		return false;   /* unreadable: leave it alone */
	stale = !dir_covers(buf, m);
	free(buf);
	return stale;
}

/* take registry entry m for dir: 0, or -EEXIST when another owns it */
static int
entry_take(long m, const char *dir)
{
	char path[64];
	int fd, err;

	snprintf(path, sizeof(path), REGISTRY "/%ld", m);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	err = fd < 0 ? errno : 0;
	if (fd < 0 && err == EEXIST && entry_stale(m)) {
		unlink(path);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		err = fd < 0 ? errno : 0;
	}
	if (fd < 0)
		return err != 0 ? -err : -EIO;
	if (write(fd, dir, strlen(dir)) != (ssize_t)strlen(dir) || fsync(fd) != 0) {
		close(fd);
		unlink(path);
		return -EIO;
	}
	close(fd);
	return 0;
}

static void
entry_drop(long m)
{
	char path[64];

	snprintf(path, sizeof(path), REGISTRY "/%ld", m);
	unlink(path);
}

static int
write_window(const char *data_dir, long n, long k)
{
	char wpath[PATH_MAX + 32], num[48];

	snprintf(wpath, sizeof(wpath), "%s/uid-window", data_dir);
	if (k == 1)
		snprintf(num, sizeof(num), "%ld\n", n);  /* as older versions wrote it */
	else
		snprintf(num, sizeof(num), "%ld %ld\n", n, k);
	return write_file_atomic(wpath, num, strlen(num), 0644) != 0 ? -EIO : 0;
}

unsigned
uid_windows_for(unsigned capacity)
{
	return capacity == 0 ? 1 : (capacity + MGR_SLOTS_MAX - 1) / MGR_SLOTS_MAX;
}

/* claim (or find again) the windows of data_dir: at least `want`
 * consecutive ones. A data directory that holds fewer grows in place (the
 * windows after its own must be free or stale: its records' uid bases do
 * not move); one that holds more keeps them. */
int
uid_window_claim(const char *data_dir, unsigned want, uint32_t *window, uint32_t *count)
{
	char dir[PATH_MAX];
	long n, k, m, have = 0;
	int lock = -1, r, ret = -ENOSPC;

	if (want < 1 || want > MGR_WINDOWS_PER_WORKER)
		return -EINVAL;
	if (realpath(data_dir, dir) == NULL)
		return -errno;
	if (mkdir_p(REGISTRY, 0700) != 0)
		return -EIO;
	/* one claimant at a time on this host */
	if ((lock = open(REGISTRY, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0 ||
	    flock(lock, LOCK_EX) != 0) {
		ret = -errno;
		goto out;
	}
	if (read_window(data_dir, &n, &k) == 0 && entry_owned_by(n, dir)) {
		/* ours already: the first window, and as many after it as
		 * still name this directory */
		for (have = 1; have < k && entry_owned_by(n + have, dir); have++)
			;
		for (m = n + have; m < n + (long)want; m++) {
			if (m >= MGR_WINDOWS_MAX || (r = entry_take(m, dir)) != 0) {
				log_warnx("cannot grow the host uid windows to %u from %ld: window %ld is taken",
				    want, n, m);
				ret = m >= MGR_WINDOWS_MAX ? -ENOSPC : -EADDRINUSE;
				while (--m >= n + have)
					entry_drop(m);
				goto out;
			}
		}
		if (have < (long)want)
			have = want;
		if (have != k && (ret = write_window(data_dir, n, have)) != 0)
			goto out;
		*window = (uint32_t)n;
		*count = (uint32_t)have;
		if (have != k)
			log_info("host uid windows %ld..%ld (grown from %ld)", n, n + have - 1, k);
		ret = 0;
		goto out;
	}
	/* the first run of `want` free (or stale) windows */
	for (n = 0; n + (long)want <= MGR_WINDOWS_MAX; n++) {
		for (m = n; m < n + (long)want; m++)
			if ((r = entry_take(m, dir)) != 0)
				break;
		if (m < n + (long)want) {
			while (--m >= n)
				entry_drop(m);
			if (r == -EEXIST)
				continue;
			ret = r;
			goto out;
		}
		if ((ret = write_window(data_dir, n, want)) != 0) {
			for (m = n; m < n + (long)want; m++)
				entry_drop(m);
			goto out;
		}
		if (want == 1)
			log_info("claimed host uid window %ld", n);
		else
			log_info("claimed host uid windows %ld..%ld", n, n + (long)want - 1);
		*window = (uint32_t)n;
		*count = want;
		ret = 0;
		goto out;
	}
out:
	if (lock >= 0)
		close(lock);
	return ret;
}

uint32_t
uid_base_for(uint32_t window, uint32_t slot)
{
	return MGR_UID_BASE0 + (window * MGR_SLOTS_MAX + slot) * MGR_UID_RANGE;
}
