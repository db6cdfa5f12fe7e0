/* walk.c: post-order, symlinks never followed, depth bound, skipping a
 * directory's contents, errors kept while the walk goes on. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "walk.h"
#include "tap.h"

struct log {
	char order[1024];
	int visits;
};

static int
record(const struct walk_entry *e, void *arg)
{
	struct log *l = arg;

	l->visits++;
	snprintf(l->order + strlen(l->order), sizeof(l->order) - strlen(l->order), "%s%s%s,",
	    e->post ? "" : "<", e->name, S_ISDIR(e->st.st_mode) && e->post ? ">" : "");
	return 0;
}

static int
rm_cb(const struct walk_entry *e, void *arg)
{
	(void)arg;
	if (!e->post)
		return 0;
	return unlinkat(e->parent, e->name, S_ISDIR(e->st.st_mode) ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
}

static int
skip_b(const struct walk_entry *e, void *arg)
{
	struct log *l = arg;

	l->visits++;
	return !e->post && strcmp(e->name, "b") == 0 ? 1 : 0;
}

static int
fail_files(const struct walk_entry *e, void *arg)
{
	int *n = arg;

	(*n)++;
	return S_ISREG(e->st.st_mode) ? -EPERM : 0;
}

static int
mk(const char *path, const char *data)
{
	FILE *f = fopen(path, "w");

	if (f == NULL)
		return -1;
	fputs(data, f);
	return fclose(f);
}

int
main(void)
{
	char top[] = "/tmp/walkXXXXXX", p[512], outside[600];
	struct log l;
	struct stat st;
	int fd, n = 0, rc;

	if (mkdtemp(top) == NULL)
		return 1;
	/* top/t: a/b/c/f, a/g, a/link -> top/outside (a directory with a file) */
	snprintf(p, sizeof(p), "%s/t", top); mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/t/a", top); mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/t/a/b", top); mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/t/a/b/c", top); mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/t/a/b/c/f", top); mk(p, "f");
	snprintf(p, sizeof(p), "%s/t/a/g", top); mk(p, "g");
	snprintf(outside, sizeof(outside), "%s/outside", top); mkdir(outside, 0700);
	snprintf(p, sizeof(p), "%s/outside/keep", top); mk(p, "keep");
	snprintf(p, sizeof(p), "%s/t/a/link", top);
	ok(symlink(outside, p) == 0, "a symlink to a directory outside the tree");
	snprintf(p, sizeof(p), "%s/t", top);
	fd = open(p, O_RDONLY | O_DIRECTORY);

	memset(&l, 0, sizeof(l));
	ok(walk_beneath(fd, 8, WALK_ONE_FS, record, &l) == 0, "walk: 0");
	ok(l.visits == 9, "every entry once, directories twice (%d visits: %s)", l.visits, l.order);
	ok(strstr(l.order, "<a,") == l.order, "a directory's first visit comes before its contents");
	ok(strstr(l.order, "f,") < strstr(l.order, "c>,") && strstr(l.order, "c>,") < strstr(l.order, "b>,") &&
	    strstr(l.order, "b>,") < strstr(l.order, "a>,"), "post-order: contents before their directory");
	ok(strstr(l.order, "keep") == NULL, "the symlink is an entry, never followed");

	memset(&l, 0, sizeof(l));
	ok(walk_beneath(fd, 1, 0, record, &l) == -ELOOP, "deeper than max_depth: -ELOOP");
	ok(strstr(l.order, "f,") == NULL, "... and nothing beyond it visited");

	memset(&l, 0, sizeof(l));
	rc = walk_beneath(fd, 8, 0, skip_b, &l);
	ok(rc == 0 && l.visits == 6, "returning 1 before a directory's contents skips them (%d visits)",
	    l.visits);

	rc = walk_beneath(fd, 8, 0, fail_files, &n);
	ok(rc == -EPERM && n == 9, "an error is kept and the walk goes on (%d visits)", n);

	ok(walk_beneath(fd, 8, WALK_ONE_FS, rm_cb, NULL) == 0, "removing everything beneath: 0");
	memset(&l, 0, sizeof(l));
	walk_beneath(fd, 8, 0, record, &l);
	ok(l.visits == 0, "... nothing is left");
	snprintf(p, sizeof(p), "%s/outside/keep", top);
	ok(stat(p, &st) == 0, "... and the link's target outside is untouched");
	close(fd);

	snprintf(p, sizeof(p), "rm -rf '%s'", top);
	if (system(p) != 0)
		return 1;
	return done_testing();
}
