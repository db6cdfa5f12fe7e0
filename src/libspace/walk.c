/* walk.h */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "walk.h"

struct walk {
	unsigned max_depth, flags;
	dev_t dev;
	walk_fn fn;
	void *arg;
};

static void
keep(int *first, int r)
{
	if (r < 0 && *first == 0)
		*first = r;
}

static int
walk_dir(const struct walk *w, int dfd, unsigned depth)
{
	struct walk_entry e;
	struct dirent *de;
	DIR *d;
	int fd, first = 0;

	if (depth > w->max_depth)
		return -ELOOP;
	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -errno;
	}
	while ((de = readdir(d)) != NULL) {
		int r;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		memset(&e, 0, sizeof(e));
		e.parent = dfd;
		e.name = de->d_name;
		e.fd = -1;
		e.depth = depth;
		if (fstatat(dfd, de->d_name, &e.st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				keep(&first, -errno);
			continue;
		}
		if ((w->flags & WALK_ONE_FS) && e.st.st_dev != w->dev) {
			keep(&first, -EBUSY);   /* something mounted here */
			continue;
		}
		if (!S_ISDIR(e.st.st_mode)) {
			e.post = true;
			keep(&first, w->fn(&e, w->arg));
			continue;
		}
		if ((e.fd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
		    O_CLOEXEC)) < 0) {
			keep(&first, -errno);
			continue;
		}
		r = w->fn(&e, w->arg);
		keep(&first, r);
		if (r != 1)
			e.err = walk_dir(w, e.fd, depth + 1);
		keep(&first, e.err);
		e.post = true;
		keep(&first, w->fn(&e, w->arg));
		close(e.fd);
	}
	closedir(d);
	return first;
}

int
walk_beneath(int dfd, unsigned max_depth, unsigned flags, walk_fn fn, void *arg)
{
	struct walk w = { max_depth, flags, 0, fn, arg };
	struct stat st;

	if (fstat(dfd, &st) < 0)
		return -errno;
	w.dev = st.st_dev;
	return walk_dir(&w, dfd, 0);
}
