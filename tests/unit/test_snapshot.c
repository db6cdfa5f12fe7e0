/* Snapshot store: round trip of a tree, content addressing, and the
 * restore-side refusals, tested with archives built by hand the way an
 * attacker with write access to the store would build them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <unistd.h>

#include <sodium.h>

#include "snapshot.h"
#include "util.h"
#include "tap.h"

static char top[256];

static void
path_join(char *out, size_t cap, const char *a, const char *b)
{
	if (snprintf(out, cap, "%s/%s", a, b) >= (int)cap)
		abort();
}

static void
must(int r, const char *what)
{
	if (r < 0) {
		perror(what);
		exit(1);
	}
}

static void
write_bytes(const char *path, const void *buf, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, buf, len) != (ssize_t)len) {
		perror(path);
		exit(1);
	}
	fchmod(fd, mode);
	close(fd);
}

static void
set_mtime(const char *path, time_t sec, long nsec)
{
	struct timespec ts[2] = { { sec, nsec }, { sec, nsec } };
	utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW);
}

static bool have_whiteout;

/* the tree of the round trip; returns the big file's size */
static size_t
make_tree(const char *root)
{
	char p[512];
	size_t big = 3u * 1024 * 1024 + 12345;
	unsigned char *buf = malloc(big);

	randombytes_buf(buf, big);
	mkdir(root, 0755);
	path_join(p, sizeof(p), root, "big.bin");
	write_bytes(p, buf, big, 0640);
	set_mtime(p, 1700000000, 123456789);
	free(buf);
	path_join(p, sizeof(p), root, "empty");
	write_bytes(p, "", 0, 0600);
	path_join(p, sizeof(p), root, "run.sh");
	write_bytes(p, "#!/bin/sh\necho hi\n", 18, 0755);
	path_join(p, sizeof(p), root, "a");
	mkdir(p, 0750);
	path_join(p, sizeof(p), root, "a/b");
	mkdir(p, 0700);
	path_join(p, sizeof(p), root, "a/b/c");
	mkdir(p, 01777);
	chmod(p, 01777);
	path_join(p, sizeof(p), root, "a/b/c/deep.txt");
	write_bytes(p, "deep\n", 5, 0444);
	path_join(p, sizeof(p), root, "a/b/c/empty-dir");
	mkdir(p, 0555);
	path_join(p, sizeof(p), root, "link-rel");
	must(symlink("a/b/c/deep.txt", p), "symlink");
	set_mtime(p, 1600000000, 5);
	path_join(p, sizeof(p), root, "a/link-abs");
	must(symlink("/etc/passwd", p), "symlink");
	path_join(p, sizeof(p), root, "a/dangling");
	must(symlink("../nowhere/at/all", p), "symlink");
	/* a fifo is not layer content: left out */
	path_join(p, sizeof(p), root, "fifo");
	mkfifo(p, 0600);
	/* an overlay whiteout (char 0:0) is kept */
	path_join(p, sizeof(p), root, "a/deleted-from-template");
	have_whiteout = mknod(p, S_IFCHR | 0, makedev(0, 0)) == 0;
	path_join(p, sizeof(p), root, "a/b/c");
	set_mtime(p, 1650000000, 0);
	path_join(p, sizeof(p), root, "a/b/c/empty-dir");
	set_mtime(p, 1650000001, 0);
	path_join(p, sizeof(p), root, "a");
	set_mtime(p, 1650000002, 999);
	return big;
}

/* Compares two trees entry by entry (type, permission bits, mtime, data,
 * link target); returns the number of differences and prints them. */
static int
tree_diff(const char *a, const char *b, bool skip_specials_in_a)
{
	DIR *d = opendir(a);
	struct dirent *de;
	int diffs = 0, na = 0, nb = 0;

	if (d == NULL)
		return 1;
	while ((de = readdir(d)) != NULL) {
		char pa[1024], pb[1024];
		struct stat sa, sb;
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path_join(pa, sizeof(pa), a, de->d_name);
		path_join(pb, sizeof(pb), b, de->d_name);
		lstat(pa, &sa);
		if (skip_specials_in_a && (S_ISFIFO(sa.st_mode) || S_ISSOCK(sa.st_mode) ||
		    S_ISBLK(sa.st_mode) || (S_ISCHR(sa.st_mode) && sa.st_rdev != 0))) {
			if (lstat(pb, &sb) == 0) {
				diag("special file %s was restored", pb);
				diffs++;
			}
			continue;
		}
		na++;
		if (lstat(pb, &sb) < 0) {
			diag("missing %s", pb);
			diffs++;
			continue;
		}
		if ((sa.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
			diag("type differs %s", pb);
			diffs++;
			continue;
		}
		if (!S_ISLNK(sa.st_mode) && (sa.st_mode & 07777) != (sb.st_mode & 07777)) {
			diag("mode %o vs %o at %s", sa.st_mode & 07777, sb.st_mode & 07777, pb);
			diffs++;
		}
		if (!S_ISCHR(sa.st_mode) && (sa.st_mtim.tv_sec != sb.st_mtim.tv_sec ||
		    sa.st_mtim.tv_nsec != sb.st_mtim.tv_nsec)) {
			diag("mtime differs at %s", pb);
			diffs++;
		}
		if (S_ISREG(sa.st_mode)) {
			char *ca = NULL, *cb = NULL;
			size_t la = 0, lb = 0;
			if (read_file(pa, 64u << 20, &ca, &la) < 0 || read_file(pb, 64u << 20, &cb, &lb) < 0 ||
			    la != lb || memcmp(ca, cb, la) != 0) {
				diag("content differs at %s", pb);
				diffs++;
			}
			free(ca);
			free(cb);
		} else if (S_ISLNK(sa.st_mode)) {
			char ta[512] = "", tb[512] = "";
			ssize_t la = readlink(pa, ta, sizeof(ta) - 1);
			ssize_t lb = readlink(pb, tb, sizeof(tb) - 1);
			if (la < 0 || lb < 0 || strcmp(ta, tb) != 0) {
				diag("link target differs at %s", pb);
				diffs++;
			}
		} else if (S_ISCHR(sa.st_mode)) {
			if (sb.st_rdev != makedev(0, 0)) {
				diag("whiteout differs at %s", pb);
				diffs++;
			}
		} else if (S_ISDIR(sa.st_mode))
			diffs += tree_diff(pa, pb, skip_specials_in_a);
	}
	closedir(d);
	/* and nothing extra in b */
	if ((d = opendir(b)) != NULL) {
		while ((de = readdir(d)) != NULL)
			if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
				nb++;
		closedir(d);
	}
	if (na != nb) {
		diag("%s has %d entries, %s has %d", a, na, b, nb);
		diffs++;
	}
	return diffs;
}

static bool
exists(const char *p)
{
	struct stat st;
	return lstat(p, &st) == 0;
}

static bool
empty_dir(const char *p)
{
	DIR *d = opendir(p);
	struct dirent *de;
	int n = 0;

	if (d == NULL)
		return false;
	while ((de = readdir(d)) != NULL)
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	return n == 0;
}

/* ---- a hand-made archive, written from the format in docs/recovery.md ---- */

struct hand {
	unsigned char *b;
	size_t len, cap;
	uint64_t count;
};

static void
h_put(struct hand *h, const void *p, size_t n)
{
	if (h->len + n > h->cap) {
		h->cap = (h->len + n) * 2 + 64;
		h->b = realloc(h->b, h->cap);
	}
	memcpy(h->b + h->len, p, n);
	h->len += n;
}

static void
h_be(struct hand *h, uint64_t v, int bytes)
{
	unsigned char b[8];
	for (int i = 0; i < bytes; i++)
		b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
	h_put(h, b, (size_t)bytes);
}

static void
h_start(struct hand *h)
{
	memset(h, 0, sizeof(*h));
	h_put(h, "SPACESNP", 8);
	h_be(h, 1, 4);
	h_be(h, 0, 4);
}

static void
h_entry(struct hand *h, int type, uint32_t mode, const char *path)
{
	h_put(h, (unsigned char[]){ (unsigned char)type, 0 }, 2);
	h_be(h, strlen(path), 2);
	h_be(h, mode, 4);
	h_be(h, 1700000000, 8);
	h_be(h, 0, 4);
	h_put(h, path, strlen(path));
	h->count++;
}

static void
h_file(struct hand *h, const char *path, uint32_t mode, const char *data)
{
	h_entry(h, 'F', mode, path);
	h_be(h, strlen(data), 8);
	h_put(h, data, strlen(data));
}

static void
h_dir(struct hand *h, const char *path)
{
	h_entry(h, 'D', 0755, path);
}

static void
h_link(struct hand *h, const char *path, const char *target)
{
	h_entry(h, 'L', 0, path);
	h_be(h, strlen(target), 2);
	h_put(h, target, strlen(target));
}

/* ends, hashes and stores the archive under its digest */
static void
h_store(struct hand *h, const char *store, char hex[SNAPSHOT_DIGEST_HEX + 1])
{
	unsigned char dg[32];
	char p[512];

	h_put(h, "E", 1);
	h_be(h, h->count, 8);
	crypto_generichash(dg, sizeof(dg), h->b, h->len, NULL, 0);
	h_put(h, dg, sizeof(dg));
	hex_encode(dg, sizeof(dg), hex, SNAPSHOT_DIGEST_HEX + 1);
	mkdir(store, 0700);
	snprintf(p, sizeof(p), "%s/%s.snap", store, hex);
	write_bytes(p, h->b, h->len, 0444);
	free(h->b);
	h->b = NULL;
}

static void
test_round_trip(void)
{
	char layer[300], store[300], dest[300], dest2[300], copyd[300];
	char d1[SNAPSHOT_DIGEST_HEX + 1], d2[SNAPSHOT_DIGEST_HEX + 1], d3[SNAPSHOT_DIGEST_HEX + 1];
	struct snapshot_stats st = { 0 }, rs = { 0 };
	const char *why = NULL;
	char p[512];
	struct stat sb;
	size_t big;
	int r;

	path_join(layer, sizeof(layer), top, "layer");
	path_join(store, sizeof(store), top, "store");
	path_join(dest, sizeof(dest), top, "restored");
	path_join(dest2, sizeof(dest2), top, "restored2");
	path_join(copyd, sizeof(copyd), top, "store2");
	big = make_tree(layer);

	r = snapshot_create(layer, store, d1, &st);
	is_int(r, 0, "snapshot_create of a tree");
	ok(strlen(d1) == 64 && strspn(d1, "0123456789abcdef") == 64, "digest is 64 lowercase hex");
	ok(st.skipped == 1, "the fifo was left out (%llu skipped)", (unsigned long long)st.skipped);
	ok(st.bytes == big + 18 + 5, "file bytes counted (%llu)", (unsigned long long)st.bytes);
	snprintf(p, sizeof(p), "%s/%s.snap", store, d1);
	ok(stat(p, &sb) == 0 && (sb.st_mode & 0777) == 0444, "archive stored read-only under its digest");
	ok(stat(store, &sb) == 0 && (sb.st_mode & 0777) == 0700, "store directory created 0700");
	{
		DIR *dd = opendir(store);
		struct dirent *de;
		int tmp = 0;
		while (dd && (de = readdir(dd)) != NULL)
			tmp += strncmp(de->d_name, ".tmp", 4) == 0;
		if (dd)
			closedir(dd);
		is_int(tmp, 0, "no temporary file left in the store");
	}
	{
		unsigned char *all = NULL;
		size_t len = 0;
		unsigned char dg[32];
		char hex[65];
		read_file(p, 64u << 20, (char **)&all, &len);
		ok(len < big + 4096, "archive is the data plus small framing (%zu bytes)", len);
		/* the name is BLAKE2b-256 of the body; the trailer repeats it */
		crypto_generichash(dg, 32, all, len - 32, NULL, 0);
		hex_encode(dg, 32, hex, sizeof(hex));
		ok(strcmp(hex, d1) == 0 && memcmp(all + len - 32, dg, 32) == 0,
		    "name and trailer are the BLAKE2b-256 of the body");
		free(all);
	}

	r = snapshot_restore(store, d1, dest, &rs, &why);
	is_int(r, 0, "restore into a new directory (%s)", why ? why : "-");
	is_int(tree_diff(layer, dest, true), 0, "restored tree equals the original (types, modes, mtimes, data, links)");
	ok(rs.entries == st.entries && rs.bytes == st.bytes, "restore stats match");
	path_join(p, sizeof(p), dest, "a/link-abs");
	{
		char t[64] = "";
		ok(readlink(p, t, sizeof(t) - 1) == 11, "link readable");
		is_str(t, "/etc/passwd", "an absolute symlink is restored as a link, not followed");
	}
	if (have_whiteout) {
		path_join(p, sizeof(p), dest, "a/deleted-from-template");
		ok(lstat(p, &sb) == 0 && S_ISCHR(sb.st_mode) && sb.st_rdev == makedev(0, 0),
		    "overlay whiteout restored");
	} else
		ok(1, "# SKIP mknod of a whiteout not permitted here");

	/* same content, same digest: twice, and from the restored copy */
	r = snapshot_create(layer, store, d2, NULL);
	ok(r == 0 && strcmp(d1, d2) == 0, "same tree -> same digest");
	r = snapshot_create(dest, copyd, d3, NULL);
	ok(r == 0 && strcmp(d1, d3) == 0, "restored copy -> same digest in another store");

	/* a one-byte change gives another digest */
	path_join(p, sizeof(p), dest, "a/b/c/deep.txt");
	chmod(p, 0644);
	write_bytes(p, "deeP\n", 5, 0444);
	set_mtime(p, 0, 0);
	{
		char l[300];
		path_join(l, sizeof(l), layer, "a/b/c/deep.txt");
		lstat(l, &sb);
		set_mtime(p, sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
	}
	r = snapshot_create(dest, copyd, d3, NULL);
	ok(r == 0 && strcmp(d1, d3) != 0, "one changed byte -> another digest");

	/* a non-empty destination is refused and left alone */
	r = snapshot_restore(store, d1, dest, NULL, &why);
	is_int(r, -ENOTEMPTY, "restore into a non-empty directory refused");
	ok(exists(p), "existing content untouched");

	/* an empty existing destination is fine */
	mkdir(dest2, 0711);
	r = snapshot_restore(store, d1, dest2, NULL, &why);
	is_int(r, 0, "restore into an existing empty directory");
	is_int(tree_diff(layer, dest2, true), 0, "and it equals the original");
}

static void
test_tamper(void)
{
	char layer[300], store[300], dest[300], p[512], p2[512];
	char dg[SNAPSHOT_DIGEST_HEX + 1], hex[65];
	const char *why = NULL;
	unsigned char *all = NULL;
	size_t len = 0;
	int r;

	path_join(layer, sizeof(layer), top, "layer");
	path_join(store, sizeof(store), top, "tstore");
	path_join(dest, sizeof(dest), top, "tdest");
	r = snapshot_create(layer, store, dg, NULL);
	is_int(r, 0, "archive for tampering");
	snprintf(p, sizeof(p), "%s/%s.snap", store, dg);
	read_file(p, 64u << 20, (char **)&all, &len);

	/* one flipped bit deep in the big file's data, same name */
	all[len / 2] ^= 0x01;
	chmod(p, 0644);
	write_bytes(p, all, len, 0444);
	why = NULL;
	r = snapshot_restore(store, dg, dest, NULL, &why);
	is_int(r, -EBADMSG, "tampered archive refused (%s)", why ? why : "-");
	ok(!exists(dest), "nothing extracted: destination not even created");

	/* the same bytes renamed to their new digest: the trailer still
	 * names the original content, so it is refused too */
	{
		unsigned char d[32];
		crypto_generichash(d, 32, all, len - 32, NULL, 0);
		hex_encode(d, 32, hex, sizeof(hex));
		snprintf(p2, sizeof(p2), "%s/%s.snap", store, hex);
		rename(p, p2);
	}
	r = snapshot_restore(store, hex, dest, NULL, &why);
	is_int(r, -EBADMSG, "tampered archive under its own digest refused (trailer)");
	ok(!exists(dest), "nothing extracted");

	/* truncated */
	all[len / 2] ^= 0x01;
	snprintf(p, sizeof(p), "%s/%s.snap", store, dg);
	write_bytes(p, all, len - 100, 0444);
	r = snapshot_restore(store, dg, dest, NULL, &why);
	is_int(r, -EBADMSG, "truncated archive refused");
	ok(!exists(dest), "nothing extracted");
	free(all);

	r = snapshot_restore(store, "../../../../etc/passwd", dest, NULL, &why);
	is_int(r, -EINVAL, "digest that is a path refused");
	r = snapshot_restore(store, "ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789", dest, NULL, &why);
	is_int(r, -EINVAL, "uppercase digest refused (one spelling per archive)");
	r = snapshot_restore(store, "0000000000000000000000000000000000000000000000000000000000000000", dest, NULL, &why);
	is_int(r, -ENOENT, "unknown digest: not found");
}

/* a malicious archive with a correct digest: the attacker controls the
 * store, not the restorer's checks */
static void
hostile(const char *label, struct hand *h, int want, const char *outside)
{
	static int n;
	char store[300], dest[300], dg[SNAPSHOT_DIGEST_HEX + 1];
	const char *why = NULL;
	int r;

	path_join(store, sizeof(store), top, "hstore");
	snprintf(dest, sizeof(dest), "%s/hdest%d", top, n++);
	h_store(h, store, dg);
	r = snapshot_restore(store, dg, dest, NULL, &why);
	is_int(r, want, "%s refused (%s)", label, why ? why : "-");
	ok(!exists(dest), "%s: destination removed again", label);
	if (outside)
		ok(!exists(outside), "%s: nothing written outside (%s)", label, outside);
}

static void
test_hostile(void)
{
	char store[300], dest[300], outside[300], dg[SNAPSHOT_DIGEST_HEX + 1], p[512];
	const char *why = NULL;
	struct hand h;
	int r;

	path_join(store, sizeof(store), top, "hstore");
	path_join(outside, sizeof(outside), top, "x");

	/* the control: the builder makes archives restore accepts */
	h_start(&h);
	h_dir(&h, "d");
	h_file(&h, "d/f", 0644, "hello");
	h_link(&h, "d/l", "../../../../etc/shadow");
	h_store(&h, store, dg);
	path_join(dest, sizeof(dest), top, "hgood");
	r = snapshot_restore(store, dg, dest, NULL, &why);
	is_int(r, 0, "hand-made well-formed archive restores (%s)", why ? why : "-");
	path_join(p, sizeof(p), dest, "d/f");
	{
		char *c = NULL;
		size_t l = 0;
		ok(read_file(p, 100, &c, &l) == 0 && l == 5 && memcmp(c, "hello", 5) == 0,
		    "its file has the data");
		free(c);
	}

	h_start(&h);
	h_file(&h, "../x", 0644, "pwned");
	hostile("\"../x\"", &h, -EBADMSG, outside);

	h_start(&h);
	h_file(&h, outside, 0644, "pwned");
	hostile("absolute path", &h, -EBADMSG, outside);

	h_start(&h);
	h_dir(&h, "d");
	h_file(&h, "d/../../x", 0644, "pwned");
	hostile("\"d/../../x\"", &h, -EBADMSG, outside);

	h_start(&h);
	h_file(&h, "ok", 0644, "fine");
	h_file(&h, "./x", 0644, "pwned");
	hostile("\".\" component", &h, -EBADMSG, NULL);

	h_start(&h);
	h_file(&h, "a//b", 0644, "x");
	hostile("empty component", &h, -EBADMSG, NULL);

	/* the escape through a symlink the archive itself creates: the link
	 * is legal, writing through it is not */
	h_start(&h);
	h_file(&h, "first", 0644, "this one is extracted before the escape");
	h_link(&h, "esc", top);
	h_file(&h, "esc/x", 0644, "pwned");
	hostile("symlink escape (esc -> outside, then esc/x)", &h, -ENOTDIR, outside);

	h_start(&h);
	h_link(&h, "up", "..");
	h_dir(&h, "up/x");
	hostile("symlink escape with a directory (up -> .., then up/x)", &h, -ENOTDIR, outside);

	/* a symlink where a later file of the same name is written */
	h_start(&h);
	h_link(&h, "f", outside);
	h_file(&h, "f", 0644, "pwned");
	hostile("file over a planted symlink", &h, -EEXIST, outside);

	h_start(&h);
	h_file(&h, "f", 0644, "one");
	h_file(&h, "f", 0644, "two");
	hostile("duplicate entry", &h, -EEXIST, NULL);

	h_start(&h);
	h_file(&h, "f", 0644, "one");
	h_file(&h, "f/x", 0644, "two");
	hostile("entry beneath a file", &h, -ENOTDIR, NULL);

	h_start(&h);
	h_file(&h, "nodir/x", 0644, "two");
	hostile("entry beneath a missing directory", &h, -ENOENT, NULL);

	h_start(&h);
	h_file(&h, "suid", 04755, "#!/bin/sh\n");
	hostile("setuid file", &h, -EBADMSG, NULL);

	h_start(&h);
	h_entry(&h, 'B', 0644, "blockdev");
	hostile("unknown entry type (device)", &h, -EBADMSG, NULL);

	/* a file whose size runs past the archive */
	h_start(&h);
	h_entry(&h, 'F', 0644, "f");
	h_be(&h, 1u << 30, 8);
	h_put(&h, "short", 5);
	hostile("file size past the end", &h, -EBADMSG, NULL);

	/* wrong entry count in the end record */
	h_start(&h);
	h_file(&h, "f", 0644, "x");
	h.count = 7;
	hostile("wrong entry count", &h, -EBADMSG, NULL);

	/* a path over the limit */
	{
		char *lp = malloc(5000);
		memset(lp, 'a', 4999);
		lp[4999] = '\0';
		for (int i = 200; i < 4999; i += 201)
			lp[i] = '/';
		h_start(&h);
		h_file(&h, lp, 0644, "x");
		hostile("path over SPACE_PATH_MAX", &h, -EBADMSG, NULL);
		free(lp);
	}
	/* too deep */
	{
		char lp[1024];
		size_t o = 0;
		for (int i = 0; i < 200; i++) {
			lp[o++] = 'd';
			lp[o++] = '/';
		}
		lp[o++] = 'f';
		lp[o] = '\0';
		h_start(&h);
		h_file(&h, lp, 0644, "x");
		hostile("nesting over SPACE_SNAPSHOT_DEPTH_MAX", &h, -EBADMSG, NULL);
	}
	/* an existing empty destination stays, emptied, after a refusal */
	h_start(&h);
	h_file(&h, "a", 0644, "x");
	h_link(&h, "b", "/");
	h_file(&h, "b/etc-x", 0644, "x");
	h_store(&h, store, dg);
	path_join(dest, sizeof(dest), top, "hkeep");
	mkdir(dest, 0700);
	r = snapshot_restore(store, dg, dest, NULL, &why);
	ok(r < 0 && exists(dest) && empty_dir(dest), "existing destination left empty after a refusal");
	ok(!exists("/etc-x"), "nothing written at /etc-x");
}

/* the layer is hostile too: a symlink in it is archived, never followed */
static void
test_layer_symlinks(void)
{
	char layer[300], store[300], dest[300], p[512], secret[300], dg[SNAPSHOT_DIGEST_HEX + 1];
	struct snapshot_stats st;
	int r;

	path_join(layer, sizeof(layer), top, "hostile-layer");
	path_join(store, sizeof(store), top, "store3");
	path_join(dest, sizeof(dest), top, "hostile-restored");
	path_join(secret, sizeof(secret), top, "secret-dir");
	mkdir(secret, 0700);
	path_join(p, sizeof(p), secret, "key");
	write_bytes(p, "TOPSECRET", 9, 0600);
	mkdir(layer, 0755);
	path_join(p, sizeof(p), layer, "to-secret-dir");
	must(symlink(secret, p), "symlink");
	path_join(p, sizeof(p), layer, "to-key");
	{
		char k[400];
		path_join(k, sizeof(k), secret, "key");
		must(symlink(k, p), "symlink");
	}
	r = snapshot_create(layer, store, dg, &st);
	is_int(r, 0, "layer with symlinks to host files archived");
	is_int((long long)st.bytes, 0, "no host file data was read through the links");
	r = snapshot_restore(store, dg, dest, NULL, NULL);
	path_join(p, sizeof(p), dest, "to-key");
	{
		struct stat sb;
		ok(r == 0 && lstat(p, &sb) == 0 && S_ISLNK(sb.st_mode), "restored as symlinks");
	}
}

int
main(void)
{
	char cmd[400];

	if (sodium_init() < 0)
		return 1;
	snprintf(top, sizeof(top), "/tmp/test_snapshot.XXXXXX");
	if (mkdtemp(top) == NULL)
		return 1;
	test_round_trip();
	test_tamper();
	test_hostile();
	test_layer_symlinks();
	if (snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", top, top) >= (int)sizeof(cmd))
		return 1;
	if (system(cmd) != 0)
		diag("could not clean %s", top);
	return done_testing();
}
