/* File operations, run as the sandbox user (the operation child has
 * already become uid 1000), so the kernel applies the user's permissions
 * and the jail's mounts: no path check here decides what is reachable.
 * Relative paths are relative to /home/user (the child's cwd). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <sodium.h>

#include "fsplice.h"
#include "guest.h"
#include "limits.h"
#include "msg.h"
#include "proto.h"
#include "util.h"

#define FS_MODE_DEFAULT 0644
/* a listing answer must fit one RESPONSE frame (plus the bridge's
 * "serving" field); what does not fit is cut and flagged */
#define FS_LIST_SLACK 2048

static const char *
type_str(mode_t m)
{
	if (S_ISREG(m))
		return "file";
	if (S_ISDIR(m))
		return "dir";
	if (S_ISLNK(m))
		return "symlink";
	return "other";
}

static json_t *
stat_obj(const char *name, const struct stat *st)
{
	char t[RFC3339_LEN + 1];
	json_t *n = json_string(name);

	if (n == NULL)
		return NULL;    /* not UTF-8: cannot be named in JSON */
	rfc3339_format((int64_t)st->st_mtime, t);
	return json_pack("{s:o,s:s,s:I,s:i,s:s}", "name", n, "type", type_str(st->st_mode),
	    "size", (json_int_t)st->st_size, "mode", (int)(st->st_mode & 07777), "mtime", t);
}

static bool
bad_args(int fd, json_t *args, const char *const *keys)
{
	const char *bad;

	if (args_only(args, keys, &bad) < 0) {
		send_error(fd, 400, "bad_request", "unknown field in args");
		return true;
	}
	return false;
}

static const char *
need_path(int fd, json_t *args, const char *key)
{
	const char *p = arg_path(args, key);

	if (p == NULL)
		send_error(fd, 400, "bad_request", "a path argument is missing or invalid");
	return p;
}

static bool
opt_bool(json_t *args, const char *key, bool *out)
{
	json_t *v = json_object_get(args, key);

	if (v == NULL)
		return true;
	if (!json_is_boolean(v))
		return false;
	*out = json_is_true(v);
	return true;
}

/* A file this small (most reads) is read whole first and answered with
 * its RESPONSE, DATA and END in one write: the bridge is woken once, not
 * once per frame. Only when what was read is the whole file its size
 * announced (EOF seen); anything else (a /proc file with no size, a file
 * that grew) goes the streamed way from its start. */
#define FS_READ_SMALL (64u << 10)

/* read until EOF or cap bytes; the count, or -errno */
static ssize_t
read_upto(int f, char *buf, size_t cap)
{
	size_t got = 0;
	ssize_t n;

	while (got < cap) {
		n = read(f, buf + got, cap - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return (ssize_t)got;
}

/* 1 when answered whole, 0 when the streamed way must answer (the file is
 * back at offset 0), -1 when the operation is over (an error answered, or
 * the bridge left) */
static int
read_small(int fd, int f, const struct stat *st, char *buf)
{
	json_t *res = json_pack("{s:I}", "size", (json_int_t)st->st_size);
	struct msg_response m = { .result = res };
	uint8_t *out;
	char *js = NULL;
	size_t jn, total;
	ssize_t got;
	int r;

	if ((got = read_upto(f, buf, FS_READ_SMALL + 1)) < 0) {
		json_decref(res);
		send_errno(fd, (int)-got, "read");
		return -1;
	}
	if ((off_t)got != st->st_size || res == NULL ||
	    msg_response_encode(&m, MSG_FORM_GUEST, &js, &jn) != 0)
		goto streamed;
	total = FRAME_HDR_LEN + jn + (got ? FRAME_HDR_LEN + (size_t)got : 0) + FRAME_HDR_LEN;
	if ((out = malloc(total)) == NULL)
		goto streamed;
	json_decref(res);
	frame_hdr_encode(out, MSG_RESPONSE, (uint32_t)jn);
	memcpy(out + FRAME_HDR_LEN, js, jn);
	total = FRAME_HDR_LEN + jn;
	if (got) {
		frame_hdr_encode(out + total, MSG_DATA, (uint32_t)got);
		memcpy(out + total + FRAME_HDR_LEN, buf, (size_t)got);
		total += FRAME_HDR_LEN + (size_t)got;
	}
	frame_hdr_encode(out + total, MSG_END, 0);
	total += FRAME_HDR_LEN;
	free(js);
	r = fd_write_all(fd, out, total);
	free(out);
	if (r < 0)
		guest_op_broken = true;         /* the bridge left mid-answer */
	return r < 0 ? -1 : 1;
streamed:
	json_decref(res);
	free(js);
	if (lseek(f, 0, SEEK_SET) < 0) {
		send_errno(fd, errno, "seek");
		return -1;
	}
	return 0;
}


/* path opened as open(2) would, except through a /proc "magic" link
 * (/proc/self/fd/N, /proc/self/exe, /dev/stderr -> /proc/self/fd/2):
 * such a link jumps to whatever a descriptor of this process names,
 * past the jail's root, and an operation's descriptors include host
 * files (its stderr is the bridge's, its executable the host's). A
 * kernel without openat2 (before 5.6) gets open(2). */
static int
open_nomagic(const char *path, int flags)
{
	struct open_how how = { .flags = (uint64_t)flags, .resolve = RESOLVE_NO_MAGICLINKS };
	int f = (int)syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof(how));

	return f < 0 && errno == ENOSYS ? open(path, flags) : f;
}

void
op_fs_read(int fd, json_t *args)
{
	static const char *const keys[] = { "path", "descriptor", NULL };
	const char *path, *why;
	struct stat st;
	char *buf = NULL;
	off_t off = 0;
	ssize_t n;
	uint64_t size;
	bool descriptor = false;
	int f = -1;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if (!opt_bool(args, "descriptor", &descriptor)) {
		send_error(fd, 400, "bad_request", "descriptor must be a boolean");
		return;
	}
	/* O_NONBLOCK: opening a FIFO must not hang the operation */
	if ((f = open_nomagic(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)) < 0) {
		if (errno == ELOOP)
			send_error(fd, 403, "permission_denied", "a link loop, or a /proc link to "
			    "an open file (not followed)");
		else
			send_errno(fd, errno, "open");
		return;
	}
	if (fstat(f, &st) < 0) {
		send_errno(fd, errno, "stat");
		goto out;
	}
	if (S_ISDIR(st.st_mode)) {
		send_errno(fd, EISDIR, "read");
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		send_error(fd, 400, "bad_request", "not a regular file");
		goto out;
	}
	if ((buf = malloc(SPACE_CHUNK)) == NULL) {
		send_error(fd, 500, "internal", "out of memory");
		goto out;
	}
	if (st.st_size <= (off_t)FS_READ_SMALL && read_small(fd, f, &st, buf) != 0)
		goto out;
	/* a larger file, for a reader that takes it so (node-api): the
	 * descriptor opened here, as the user, goes up with the answer and
	 * the body is sent from it at the far end (each hop checks it, see
	 * fd_file_passable); its size is what the descriptor says there.
	 * A file that does not qualify (procfs, a FUSE mount) streams. */
	if (descriptor && fd_file_passable(f, &size, &why) == 0) {
		send_result_fd(fd, json_pack("{s:I,s:b}", "size", (json_int_t)size,
		    "descriptor", 1), f);
		goto out;
	}
	fsplice_sockbufs(fd);
	if (send_result(fd, json_pack("{s:I}", "size", (json_int_t)st.st_size)) < 0)
		goto out;
	/* streamed chunk by chunk: memory stays at one chunk whatever the
	 * size. While the file's size says bytes remain, a chunk goes from
	 * the page cache to the socket with sendfile, not through this
	 * process; then it is read until EOF, which is all there is for a
	 * file that reports no size (/proc) or grew meanwhile. */
	for (;;) {
		struct stat now;
		uint8_t hdr[FRAME_HDR_LEN];
		size_t want;

		if (fstat(f, &now) < 0 || now.st_size <= off)
			break;
		want = (uint64_t)(now.st_size - off) < SPACE_CHUNK ?
		    (size_t)(now.st_size - off) : SPACE_CHUNK;
		frame_hdr_encode(hdr, MSG_DATA, (uint32_t)want);
		if (fd_write_all(fd, hdr, sizeof(hdr)) < 0)
			goto out;       /* the bridge left */
		while (want > 0) {
			n = sendfile(fd, f, &off, want);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0) {
				/* the file shrank, or the bridge left: the frame
				 * announced cannot be completed, so neither can
				 * the operation, and this socket carries no other */
				guest_op_broken = true;
				goto out;
			}
			want -= (size_t)n;
		}
	}
	/* sendfile left the file position alone */
	if (off > 0 && lseek(f, off, SEEK_SET) < 0) {
		send_errno(fd, errno, "seek");
		goto out;
	}
	for (;;) {
		n = read(f, buf, SPACE_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			send_errno(fd, errno, "read");
			goto out;
		}
		if (n == 0)
			break;
		if (frame_write(fd, MSG_DATA, buf, (size_t)n) < 0)
			goto out;       /* the bridge left */
	}
	frame_write(fd, MSG_END, NULL, 0);
out:
	free(buf);
	close(f);
}

static int
fsync_dir_of(const char *path)
{
	char *d = strdup(path);
	int f, r = 0;

	if (d == NULL)
		return -ENOMEM;
	if ((f = open(dirname(d), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		r = -errno;
	else {
		if (fsync(f) < 0)
			r = -errno;
		close(f);
	}
	free(d);
	return r;
}

/* The file a write fills: unnamed (O_TMPFILE) in the target's directory
 * when the file system allows it, so a write cut short (the operation
 * killed, the sandbox stopped, the worker down) leaves nothing behind;
 * else named tmp (a hidden name beside the target), *named set. The
 * descriptor, or -1 with errno. */
static int
write_open(const char *dir, const char *tmp, char *named, size_t cap, bool *is_named)
{
	int out = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);

	*is_named = false;
	if (out >= 0 || (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL))
		return out;
	snprintf(named, cap, "%s", tmp);
	if ((out = mkostemp(named, O_CLOEXEC)) >= 0)
		*is_named = true;
	return out;
}

/* an unnamed file given a name in its directory: a fresh hidden one from
 * tmp's pattern (renamed over the target next), 0 or -errno */
static int
write_name(int out, char *tmp)
{
	char proc[64], *x = tmp + strlen(tmp) - 6;
	unsigned char rnd[6];
	int i, tries;

	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", out);
	for (tries = 0; tries < 16; tries++) {
		randombytes_buf(rnd, sizeof(rnd));
		for (i = 0; i < 6; i++)
			x[i] = "abcdefghijklmnopqrstuvwxyz0123456789"[rnd[i] % 36];
		if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return -errno;
	}
	return -EEXIST;
}

void
op_fs_write(int fd, json_t *args)
{
	static const char *const keys[] = { "path", "mode", NULL };
	const char *path;
	json_t *jm = json_object_get(args, "mode");
	char tmp[SPACE_PATH_MAX + 64], named[SPACE_PATH_MAX + 64], *d = NULL, *b = NULL, *dir;
	bool is_named = false;
	struct frame f = { 0 };
	struct fsplice sp = FSPLICE_INIT;
	struct stat st;
	mode_t mode = FS_MODE_DEFAULT;
	uint64_t size = 0, started = 0;
	int out = -1, r;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if (jm != NULL) {
		if (!json_is_integer(jm) || json_integer_value(jm) < 0 ||
		    json_integer_value(jm) > 0777) {
			send_error(fd, 400, "bad_request", "mode must be an integer 0..0777");
			return;
		}
		mode = (mode_t)json_integer_value(jm);
	}
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
		send_errno(fd, EISDIR, "write");
		return;
	}
	if ((d = strdup(path)) == NULL || (b = strdup(path)) == NULL) {
		send_error(fd, 500, "internal", "out of memory");
		goto out;
	}
	/* the temporary file lives next to the target, so the rename that
	 * publishes it is atomic and never crosses a file system */
	/* the name part is cut so a long target name still leaves room */
	dir = dirname(d);
	snprintf(tmp, sizeof(tmp), "%s/.%.200s.space-XXXXXX", dir, basename(b));
	if ((out = write_open(dir, tmp, named, sizeof(named), &is_named)) < 0) {
		send_errno(fd, errno, "create");
		goto out;
	}
	if (is_named)
		snprintf(tmp, sizeof(tmp), "%s", named);
	fsplice_sockbufs(fd);
	for (;;) {
		uint16_t type;
		uint32_t len;

		if ((r = fsplice_hdr_read(fd, &type, &len)) < 0)
			goto fail_quiet;        /* the bridge left: nothing to answer */
		if (type == MSG_END)
			break;
		if (type != MSG_DATA) {
			send_error(fd, 400, "bad_request", "expected DATA or END");
			goto fail_quiet;
		}
		if (len >= FSPLICE_MIN) {
			/* socket -> pipe -> file: the bytes never pass
			 * through this process */
			if ((r = fsplice_move(&sp, fd, out, len)) < 0) {
				if (sp.to_failed)
					send_errno(fd, -r, "write");
				goto fail_quiet;
			}
			size += len;
			/* the disk starts on what arrived while the rest
			 * still comes: the fsync below waits for the tail */
			fd_writeback_ahead(out, &started, size);
			continue;
		}
		if ((r = fsplice_payload_read(fd, type, len, &f)) < 0)
			goto fail_quiet;
		for (size_t off = 0; off < f.len;) {
			ssize_t n = write(out, f.payload + off, f.len - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				send_errno(fd, errno, "write");
				goto fail_quiet;
			}
			off += (size_t)n;
		}
		size += f.len;
		frame_free(&f);
	}
	/* acknowledged only once the bytes and the new name are on disk */
	if (fchmod(out, mode) < 0 || fsync(out) < 0) {
		send_errno(fd, errno, "fsync");
		goto fail_quiet;
	}
	/* an unnamed file gets its hidden name only now: what a crash can
	 * leave behind is the moment between this link and the rename */
	if (!is_named) {
		if ((r = write_name(out, tmp)) < 0) {
			send_errno(fd, -r, "create");
			goto out;
		}
		is_named = true;
	}
	close(out);
	out = -1;
	if (rename(tmp, path) < 0) {
		send_errno(fd, errno, "rename");
		goto fail_quiet;
	}
	if ((r = fsync_dir_of(path)) < 0) {
		send_errno(fd, -r, "fsync directory");
		goto out;
	}
	send_result(fd, json_pack("{s:I}", "size", (json_int_t)size));
	goto out;
fail_quiet:
	if (is_named)
		unlink(tmp);
out:
	fsplice_free(&sp);
	frame_free(&f);
	if (out >= 0)
		close(out);
	free(d);
	free(b);
}

void
op_fs_list(int fd, json_t *args)
{
	static const char *const keys[] = { "path", NULL };
	const char *path;
	json_t *arr = NULL, *e;
	struct dirent *de;
	struct stat st;
	size_t used = 64;
	bool truncated = false;
	DIR *dir;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if ((dir = opendir(path)) == NULL) {
		send_errno(fd, errno, "list");
		return;
	}
	if ((arr = json_array()) == NULL)
		goto oom;
	while ((de = readdir(dir)) != NULL) {
		char *s;
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dirfd(dir), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;       /* removed meanwhile */
		if ((e = stat_obj(de->d_name, &st)) == NULL)
			continue;
		s = json_dumps(e, JSON_COMPACT);
		used += (s ? strlen(s) : 0) + 1;
		free(s);
		if (used + FS_LIST_SLACK > frame_max_len(MSG_RESPONSE)) {
			json_decref(e);
			truncated = true;
			break;
		}
		json_array_append_new(arr, e);
	}
	closedir(dir);
	dir = NULL;
	send_result(fd, truncated ? json_pack("{s:o,s:b}", "entries", arr, "truncated", 1) :
	    json_pack("{s:o}", "entries", arr));
	return;
oom:
	json_decref(arr);
	if (dir)
		closedir(dir);
	send_error(fd, 500, "internal", "out of memory");
}

void
op_fs_stat(int fd, json_t *args)
{
	static const char *const keys[] = { "path", NULL };
	const char *path;
	struct stat st;
	char *b;
	json_t *o;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if (lstat(path, &st) < 0) {
		send_errno(fd, errno, "stat");
		return;
	}
	if ((b = strdup(path)) == NULL) {
		send_error(fd, 500, "internal", "out of memory");
		return;
	}
	o = stat_obj(basename(b), &st);
	free(b);
	if (o == NULL)
		send_error(fd, 400, "bad_request", "the name is not UTF-8");
	else
		send_result(fd, o);
}

static int
mkdir_parents(const char *path)
{
	char *p = strdup(path), *s;
	struct stat st;
	int r = 0;

	if (p == NULL)
		return -ENOMEM;
	for (s = p + 1; ; s++) {
		if (*s != '/' && *s != '\0')
			continue;
		char c = *s;
		*s = '\0';
		if (mkdir(p, 0755) < 0) {
			if (errno != EEXIST) {
				r = -errno;
				break;
			}
			/* an existing component must be a directory */
			if (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)) {
				r = c == '\0' ? -EEXIST : -ENOTDIR;
				break;
			}
		}
		*s = c;
		if (c == '\0')
			break;
	}
	free(p);
	return r;
}

void
op_fs_mkdir(int fd, json_t *args)
{
	static const char *const keys[] = { "path", "parents", NULL };
	const char *path;
	bool parents = false;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if (!opt_bool(args, "parents", &parents)) {
		send_error(fd, 400, "bad_request", "parents must be a boolean");
		return;
	}
	if (parents) {
		int r = mkdir_parents(path);
		if (r < 0) {
			send_errno(fd, -r, "mkdir");
			return;
		}
	} else if (mkdir(path, 0755) < 0) {
		send_errno(fd, errno, "mkdir");
		return;
	}
	send_result(fd, json_object());
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
	int r;

	(void)st;
	(void)ftw;
	if (flag == FTW_DNR) {
		/* a directory this user may not read: removed when it is
		 * empty (as rm -rf does), else refused for what it is */
		if (rmdir(p) == 0)
			return 0;
		return errno == ENOTEMPTY || errno == EEXIST ? EACCES : errno;
	}
	r = flag == FTW_DP ? rmdir(p) : unlink(p);
	/* gone since the walk saw it: as asked */
	return r == 0 || errno == ENOENT ? 0 : errno;
}

void
op_fs_remove(int fd, json_t *args)
{
	static const char *const keys[] = { "path", "recursive", NULL };
	const char *path;
	bool recursive = false;
	struct stat st;
	int r;

	if (bad_args(fd, args, keys) || (path = need_path(fd, args, "path")) == NULL)
		return;
	if (!opt_bool(args, "recursive", &recursive)) {
		send_error(fd, 400, "bad_request", "recursive must be a boolean");
		return;
	}
	if (lstat(path, &st) < 0) {
		send_errno(fd, errno, "remove");
		return;
	}
	if (!S_ISDIR(st.st_mode))
		r = unlink(path) < 0 ? errno : 0;
	else if (!recursive)
		r = rmdir(path) < 0 ? errno : 0;
	else {
		/* FTW_PHYS: a symlink is removed, never followed; FTW_MOUNT:
		 * never descend into another mount */
		r = nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
		if (r < 0)
			r = errno;
	}
	if (r != 0) {
		send_errno(fd, r, "remove");
		return;
	}
	send_result(fd, json_object());
}

void
op_fs_rename(int fd, json_t *args)
{
	static const char *const keys[] = { "from", "to", NULL };
	const char *from, *to;

	if (bad_args(fd, args, keys) || (from = need_path(fd, args, "from")) == NULL ||
	    (to = need_path(fd, args, "to")) == NULL)
		return;
	if (rename(from, to) < 0) {
		send_errno(fd, errno, "rename");
		return;
	}
	send_result(fd, json_object());
}
