/* Database files created 0600, whatever the umask (dbfile.h). SQLite
 * creates a missing database 0644 & ~umask, which leaves credential hashes
 * and records readable by any local user the day the directory around
 * them is opened up; the mode of the file itself must not depend on that
 * directory. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbfile.h"
#include "log.h"

#define DB_MODE 0600

/* narrow one file (open already) to DB_MODE; the mode it had is logged,
 * because a database found readable by others may already have been read */
static int
narrow(int fd, const char *path)
{
	struct stat st;

	if (fstat(fd, &st) != 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		log_warnx("%s is not a regular file", path);
		return -EINVAL;
	}
	if ((st.st_mode & 07777) == DB_MODE)
		return 0;
	if (fchmod(fd, DB_MODE) != 0)
		return -errno;
	log_warnx("%s had mode %04o; set to %04o", path, (unsigned)(st.st_mode & 07777),
	    DB_MODE);
	return 0;
}

int
db_file_private(const char *path)
{
	static const char *const sfx[] = { "-wal", "-shm" };
	char side[4096];
	size_t i;
	int fd, rc;

	/* ":memory:" and "" are not files */
	if (path[0] == '\0' || strcmp(path, ":memory:") == 0)
		return 0;
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOCTTY, DB_MODE)) < 0)
		return -errno;
	rc = narrow(fd, path);
	close(fd);
	/* left by an earlier run, possibly created before this check existed */
	for (i = 0; rc == 0 && i < sizeof(sfx) / sizeof(sfx[0]); i++) {
		if ((size_t)snprintf(side, sizeof(side), "%s%s", path, sfx[i]) >= sizeof(side))
			return -ENAMETOOLONG;
		if ((fd = open(side, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)) < 0) {
			if (errno == ENOENT)
				continue;
			return -errno;
		}
		rc = narrow(fd, side);
		close(fd);
	}
	return rc;
}
