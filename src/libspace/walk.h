/* One walker for the trees the daemons delete or measure (a restore cut
 * short, a reclaimed execution, disk use): openat/fstatat relative to
 * directory fds, a symlink is an entry and never a way in, optionally
 * never another file system. */
#ifndef SPACE_WALK_H
#define SPACE_WALK_H
#include <stdbool.h>
#include <sys/stat.h>

#define WALK_ONE_FS 1u  /* an entry on another file system (a mount point):
                         * not visited, the walk's result is -EBUSY */

struct walk_entry {
	int parent;             /* fd of the directory that holds it */
	const char *name;
	struct stat st;         /* fstatat(AT_SYMLINK_NOFOLLOW) */
	int fd;                 /* a directory: its fd (O_NOFOLLOW), else -1 */
	bool post;              /* a directory's visit after its contents; any other entry's only visit */
	int err;                /* post visit of a directory: the first error beneath it, or 0 */
	unsigned depth;         /* 0 for the entries of the start directory */
};

/* fn is called for each entry; a directory twice: before its contents
 * (post false: returning 1 skips them) and after (post true). A negative
 * return is recorded as an error and the walk goes on. */
typedef int (*walk_fn)(const struct walk_entry *e, void *arg);

/* everything beneath the directory dfd (not dfd itself), directories at
 * most max_depth deep: 0, or the first error (-errno of a stat or open,
 * -EBUSY of a mount point with WALK_ONE_FS, -ELOOP beyond max_depth, or
 * what fn returned) */
int walk_beneath(int dfd, unsigned max_depth, unsigned flags, walk_fn fn, void *arg);
#endif
