/* Making a template's tree and image on the machine of the CLI
 * (docs/templates.md): Debian's tools do the work (mmdebstrap, umoci,
 * skopeo, mksquashfs); this file runs them, neutralises what an imported
 * image may carry, and writes the template's metadata into the tree. */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <glob.h>
#include <grp.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "space.h"
#include "template.h"

/* a/b, or "" when it would not fit (then every use of it fails) */
static void
pjoin(char *out, size_t cap, const char *a, const char *b)
{
	if ((size_t)snprintf(out, cap, "%s/%s", a, b) >= cap)
		out[0] = '\0';
}

int
tpl_run(const char *verb, char *const argv[], long as_uid)
{
	pid_t pid;
	int st;

	if ((pid = fork()) < 0)
		return cli_fail(verb, "fork: %s", strerror(errno));
	if (pid == 0) {
		/* an untrusted image is unpacked by an unprivileged process */
		if (as_uid >= 0 && (setgroups(0, NULL) < 0 || setgid((gid_t)as_uid) < 0 ||
		    setuid((uid_t)as_uid) < 0))
			_exit(126);
		execvp(argv[0], argv);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return cli_fail(verb, "wait: %s", strerror(errno));
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	return cli_fail(verb, "%s failed (%s %d)", argv[0],
	    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* first URL of a "deb URL SUITE ..." line or a deb822 "URIs:" field that
 * is not a security archive */
static char *
mirror_in(const char *path)
{
	char line[1024], url[1024];
	FILE *f = fopen(path, "re");
	char *out = NULL;

	if (f == NULL)
		return NULL;
	while (out == NULL && fgets(line, sizeof(line), f)) {
		if (sscanf(line, " deb %1023s", url) == 1 || sscanf(line, " URIs: %1023s", url) == 1) {
			if (url[0] == '[')      /* "deb [options] URL": not handled */
				continue;
			if (strstr(url, "-security") || strncmp(url, "http", 4) != 0)
				continue;
			out = strdup(url);
		}
	}
	fclose(f);
	return out;
}

char *
tpl_apt_mirror(void)
{
	glob_t g;
	char *m = mirror_in("/etc/apt/sources.list");
	size_t i;

	if (m != NULL)
		return m;
	if (glob("/etc/apt/sources.list.d/*", 0, NULL, &g) != 0)
		return NULL;
	for (i = 0; m == NULL && i < g.gl_pathc; i++)
		m = mirror_in(g.gl_pathv[i]);
	globfree(&g);
	return m;
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	return (flag == FTW_DP ? rmdir(p) : unlink(p)) < 0 && errno != ENOENT ? -1 : 0;
}

int
tpl_rmtree(const char *path)
{
	struct stat st;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) < 0 ? -errno : 0;
	return nftw(path, rm_one, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) == 0 ? 0 : -EIO;
}

int
tpl_write_meta(const char *verb, const char *root, json_t *meta)
{
	char p[4200];
	char *s;
	int dfd = -1, fd = -1, ret = 1;
	size_t n;

	/* whatever the image put at /.space (a link out of the tree, say)
	 * goes first; then a fresh directory and file, no link followed */
	pjoin(p, sizeof(p), root, ".space");
	if (tpl_rmtree(p) < 0)
		return cli_fail(verb, "cannot clear %s", p);
	if ((s = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS)) == NULL)
		return cli_fail(verb, "out of memory");
	n = strlen(s);
	if (mkdir(p, 0755) < 0 || (dfd = open(p, O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0 ||
	    (fd = openat(dfd, "template.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
	    O_CLOEXEC, 0644)) < 0 || write(fd, s, n) != (ssize_t)n || fchmod(dfd, 0755) < 0) {
		cli_fail(verb, "cannot write %s/template.json: %s", p, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	free(s);
	return ret;
}

int
tpl_resolve_user(const char *verb, const char *root, const char *user, long *uid, long *gid)
{
	struct open_how how = { .flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
	char line[1024], *end;
	int rfd, fd;
	FILE *f;

	*uid = *gid = -1;
	if (user[0] >= '0' && user[0] <= '9') {
		errno = 0;
		*uid = strtol(user, &end, 10);
		*gid = *end == ':' ? strtol(end + 1, &end, 10) : *uid;
		if (errno || *end || *uid < 0 || *uid > 65534 || *gid < 0 || *gid > 65534)
			return cli_fail(verb, "bad user '%s' (NAME, UID or UID:GID, at most 65534)", user);
		return 0;
	}
	/* the tree may be an image's: its /etc/passwd is read as if the tree
	 * were /, so a link in it cannot point at this machine's files */
	if ((rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC)) < 0)
		return cli_fail(verb, "%s: %s", root, strerror(errno));
	fd = (int)syscall(SYS_openat2, rfd, "etc/passwd", &how, sizeof(how));
	close(rfd);
	if (fd < 0 || (f = fdopen(fd, "r")) == NULL) {
		if (fd >= 0)
			close(fd);
		return cli_fail(verb, "user '%s': the tree has no /etc/passwd", user);
	}
	while (fgets(line, sizeof(line), f)) {
		char *name = strtok(line, ":"), *pw = strtok(NULL, ":"), *u = strtok(NULL, ":"),
		    *g = strtok(NULL, ":");
		if (name && pw && u && g && strcmp(name, user) == 0) {
			*uid = strtol(u, NULL, 10);
			*gid = strtol(g, NULL, 10);
			break;
		}
	}
	fclose(f);
	if (*uid < 0 || *uid > 65534 || *gid < 0 || *gid > 65534)
		return cli_fail(verb, "user '%s' is not in the tree's /etc/passwd (or its id is "
		    "over 65534)", user);
	return 0;
}

static unsigned n_dev, n_setid;

static int
neutral_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)flag;
	(void)ftw;
	if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) || S_ISFIFO(st->st_mode) ||
	    S_ISSOCK(st->st_mode)) {
		if (unlink(p) < 0)
			return -1;
		n_dev++;
	} else if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)) &&
	    !S_ISDIR(st->st_mode)) {
		if (chmod(p, st->st_mode & 0777 & ~(mode_t)(S_ISUID | S_ISGID)) < 0)
			return -1;
		n_setid++;
	}
	return 0;
}

int
tpl_neutralise(const char *root, unsigned *devices, unsigned *setid)
{
	int r;

	n_dev = n_setid = 0;
	r = nftw(root, neutral_one, 32, FTW_PHYS | FTW_MOUNT);
	*devices = n_dev;
	*setid = n_setid;
	return r == 0 ? 0 : -EIO;
}

int
tpl_squash(const char *verb, const char *root, const char *img, bool all_root)
{
	/* reproducible: fixed times, no xattrs, one order; zstd reads fast */
	char *argv[] = { "mksquashfs", (char *)root, (char *)img, "-noappend", "-quiet",
	    "-no-progress", "-comp", "zstd", "-reproducible", "-mkfs-time", "0", "-all-time",
	    "0", "-no-xattrs", "-no-exports", all_root ? "-all-root" : NULL, NULL };

	return tpl_run(verb, argv, -1);
}

/* the tag of the first manifest of an OCI layout's index.json */
static char *
layout_tag(const char *layout)
{
	char p[4200];
	json_error_t e;
	json_t *idx, *m;
	const char *t;
	char *out = NULL;

	pjoin(p, sizeof(p), layout, "index.json");
	if ((idx = json_load_file(p, JSON_REJECT_DUPLICATES, &e)) == NULL)
		return NULL;
	m = json_array_get(json_object_get(idx, "manifests"), 0);
	t = json_string_value(json_object_get(json_object_get(m, "annotations"),
	    "org.opencontainers.image.ref.name"));
	if (t != NULL && strlen(t) < 128 && strspn(t, "abcdefghijklmnopqrstuvwxyz"
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == strlen(t))
		out = strdup(t);
	json_decref(idx);
	return out;
}

/* the runtime config umoci derived from the image's: env, user, cwd, args */
static int
config_meta(const char *verb, const char *bundle, json_t *meta)
{
	char p[4200];
	json_error_t e;
	json_t *cfg, *proc, *env, *v, *o;
	size_t i;
	const char *s, *eq;

	pjoin(p, sizeof(p), bundle, "config.json");
	if ((cfg = json_load_file(p, JSON_REJECT_DUPLICATES, &e)) == NULL)
		return cli_fail(verb, "the unpacked image has no readable config.json");
	proc = json_object_get(cfg, "process");
	env = json_object_get(proc, "env");
	o = json_object();
	json_array_foreach(env, i, v) {
		char k[256];
		s = json_string_value(v);
		if (s == NULL || (eq = strchr(s, '=')) == NULL || eq == s || eq - s > 255)
			continue;
		memcpy(k, s, (size_t)(eq - s));
		k[eq - s] = '\0';
		json_object_set_new(o, k, json_string(eq + 1));
	}
	json_object_set_new(meta, "env", o);
	v = json_object_get(json_object_get(proc, "user"), "uid");
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 65534)
		json_object_set_new(meta, "uid", json_integer(json_integer_value(v)));
	v = json_object_get(json_object_get(proc, "user"), "gid");
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 65534)
		json_object_set_new(meta, "gid", json_integer(json_integer_value(v)));
	s = json_string_value(json_object_get(proc, "cwd"));
	if (s != NULL && s[0] == '/' && strcmp(s, "/") != 0)
		json_object_set_new(meta, "workdir", json_string(s));
	if (json_is_array(v = json_object_get(proc, "args")))
		json_object_set(meta, "cmd", v);
	json_decref(cfg);
	return 0;
}

int
tpl_import_tree(const char *verb, const char *file, const char *work, const char *root,
    json_t *meta)
{
	char layout[4200], ref[4400], bundle[4200], src[4200];
	struct stat st;
	char *tag = NULL;
	long as = geteuid() == 0 ? 65534 : -1;  /* nobody: see tpl_run */
	int ret = 1;
	unsigned ndev, nsetid;

	if (stat(file, &st) < 0)
		return cli_fail(verb, "%s: %s", file, strerror(errno));
	pjoin(bundle, sizeof(bundle), work, "bundle");
	if (as >= 0 && chown(work, (uid_t)as, (gid_t)as) < 0)
		return cli_fail(verb, "chown %s: %s", work, strerror(errno));
	if (S_ISDIR(st.st_mode)) {
		snprintf(layout, sizeof(layout), "%s", file);
		if ((tag = layout_tag(layout)) == NULL)
			return cli_fail(verb, "%s: an OCI layout whose first manifest is tagged "
			    "(org.opencontainers.image.ref.name) is needed", file);
	} else {
		/* an archive: skopeo turns it into a layout (docker save, or an
		 * OCI layout as a tar), read by the unprivileged user */
		pjoin(layout, sizeof(layout), work, "layout");
		snprintf(ref, sizeof(ref), "oci:%s:img", layout);
		snprintf(src, sizeof(src), "docker-archive:%s", file);
		char *cp[] = { "skopeo", "copy", "--quiet", src, ref, NULL };
		if (tpl_run(verb, cp, -1) != 0) {
			snprintf(src, sizeof(src), "oci-archive:%s", file);
			if (tpl_run(verb, cp, -1) != 0)
				return cli_fail(verb, "%s is neither a docker save archive nor an OCI "
				    "archive", file);
		}
		tag = strdup("img");
		if (as >= 0) {
			char *ch[] = { "chown", "-R", "65534:65534", layout, NULL };
			if (tpl_run(verb, ch, -1) != 0)
				goto out;
		}
	}
	snprintf(ref, sizeof(ref), "%s:%s", layout, tag);
	{
		/* umoci applies the layers in order, with whiteouts, never
		 * leaving the bundle (its paths are resolved inside it); rootless:
		 * no device nodes, no ownership, as an unprivileged user */
		char *up[] = { "umoci", "--log", "error", "unpack", "--rootless", "--image", ref,
		    bundle, NULL };
		if (tpl_run(verb, up, as) != 0)
			goto out;
	}
	pjoin(src, sizeof(src), bundle, "rootfs");
	if (rename(src, root) < 0) {
		cli_fail(verb, "rename %s: %s", src, strerror(errno));
		goto out;
	}
	if (tpl_neutralise(root, &ndev, &nsetid) < 0) {
		cli_fail(verb, "cannot walk the unpacked tree");
		goto out;
	}
	if (ndev || nsetid)
		fprintf(stderr, "space: %s: removed %u device nodes, fifos or sockets; cleared the "
		    "set-id bits of %u files\n", verb, ndev, nsetid);
	if (config_meta(verb, bundle, meta) != 0)
		goto out;
	ret = 0;
out:
	free(tag);
	return ret;
}
