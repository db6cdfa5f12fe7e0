/* Host uid ranges. Every sandbox gets 65536 host uids of its own
 * (its user namespace maps onto them), and two sandboxes must never share
 * one, not even when several workers (sbx-managers with different data
 * directories, as `space up` runs them) share a machine.
 *
 * So each data directory claims a window of MGR_SLOTS_MAX slots in a
 * host-wide registry, /var/lib/space/uid-windows/<n> (created with O_EXCL,
 * holding the data directory's path), and remembers it in D/uid-window.
 * Inside the window, a slot is held by a live record (records.c). A
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

static int
read_window(const char *dir, long *n)
{
	char path[PATH_MAX + 32], *buf = NULL, *end;
	size_t len;
	int ret = -ENOENT;

	snprintf(path, sizeof(path), "%s/uid-window", dir);
	if (read_file(path, 32, &buf, &len) != 0)
		return -ENOENT;
	errno = 0;
	*n = strtol(buf, &end, 10);
	if (errno == 0 && end != buf && (*end == '\0' || *end == '\n') && *n >= 0 &&
	    *n < MGR_WINDOWS_MAX)
		ret = 0;
	free(buf);
	return ret;
}

/* does the registry entry n name dir, and dir name n? */
static bool
entry_owned_by(long n, const char *dir)
{
	char path[64], *buf = NULL;
	size_t len;
	long m;
	bool ok;

	snprintf(path, sizeof(path), REGISTRY "/%ld", n);
	if (read_file(path, PATH_MAX, &buf, &len) != 0)
		return false;
	ok = strcmp(buf, dir) == 0 && read_window(buf, &m) == 0 && m == n;
	free(buf);
	return ok;
}

static bool
entry_stale(long n)
{
	char path[64], *buf = NULL;
	size_t len;
	long m;
	bool stale;

	snprintf(path, sizeof(path), REGISTRY "/%ld", n);
	if (read_file(path, PATH_MAX, &buf, &len) != 0)
		return false;   /* unreadable: leave it alone */
	stale = read_window(buf, &m) != 0 || m != n;
	free(buf);
	return stale;
}

int
uid_window_claim(const char *data_dir, uint32_t *window)
{
	char dir[PATH_MAX], path[64], wpath[PATH_MAX + 32], num[24];
	long n;
	int lock = -1, fd, ret = -ENOSPC;

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
	if (read_window(data_dir, &n) == 0 && entry_owned_by(n, dir)) {
		*window = (uint32_t)n;
		ret = 0;
		goto out;
	}
	for (n = 0; n < MGR_WINDOWS_MAX; n++) {
		snprintf(path, sizeof(path), REGISTRY "/%ld", n);
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0 && errno == EEXIST && entry_stale(n)) {
			unlink(path);
			fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		}
		if (fd < 0)
			continue;
		if (write(fd, dir, strlen(dir)) != (ssize_t)strlen(dir) || fsync(fd) != 0) {
			close(fd);
			unlink(path);
			ret = -EIO;
			goto out;
		}
		close(fd);
		snprintf(wpath, sizeof(wpath), "%s/uid-window", data_dir);
		snprintf(num, sizeof(num), "%ld\n", n);
		if (write_file_atomic(wpath, num, strlen(num), 0644) != 0) {
			unlink(path);
			ret = -EIO;
			goto out;
		}
		log_info("claimed host uid window %ld", n);
		*window = (uint32_t)n;
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
