/* Incremental ("delta") snapshot archives: a delta made from a restored
 * layer and its index, restored onto its base's state, equals the layer;
 * it is small when little changed and the same for the same tree; the
 * index codec is strict; and a restore refuses every delta that does not
 * fit the base it is applied to, tested with archives built by hand the
 * way an attacker with write access to the store would build them. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <zstd.h>

#include "snapshot.h"
#include "util.h"
#include "tap.h"
#include "snaptest.h"

/* where a delta made by snapshot_create_delta holds its base's digest:
 * after the marker (12 bytes) and the delta frame's magic and length */
#define HEAD_BASE       (12 + 8)

static char top[256];

static void
rm_rf(const char *p)
{
	char cmd[700];

	snprintf(cmd, sizeof(cmd), "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", p, p);
	if (system(cmd) != 0)
		diag("could not remove %s", p);
}

/* ctime comes from the kernel's coarse clock: a change made within the
 * same tick as the index would keep its ctime */
static void
tick(void)
{
	usleep(30000);
}

static uint64_t
file_size(const char *p)
{
	struct stat st;
	return stat(p, &st) == 0 ? (uint64_t)st.st_size : 0;
}

static void
archive_path(char *out, size_t cap, const char *store, const char *dg)
{
	if (snprintf(out, cap, "%s/%s.snap", store, dg) >= (int)cap)
		abort();
}

/* a ".space-base-*" or ".space-new-*" directory anywhere directly in dir */
static bool
has_staging(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	bool found = false;

	if (d == NULL)
		return false;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".space-base-", 12) == 0 ||
		    strncmp(de->d_name, ".space-new-", 11) == 0)
			found = true;
	closedir(d);
	return found;
}

/* ---- the layer ---- */

#define UNTOUCHED_FILES 5       /* keep1.txt keep2.bin sparse.img empty d/nested.txt */
#define SPARSE_SIZE     (16u << 20)

static void
make_tree(const char *root)
{
	unsigned char buf[100000];
	char p[512];
	int fd;

	must(mkdir(root, 0755), root);
	path_join(p, sizeof(p), root, "keep1.txt");
	write_bytes(p, "unchanged one\n", 14, 0644);
	set_mtime(p, 1700000001, 111111111);
	path_join(p, sizeof(p), root, "keep2.bin");
	randombytes_buf(buf, sizeof(buf));
	write_bytes(p, buf, sizeof(buf), 0600);
	set_mtime(p, 1700000002, 222222222);
	path_join(p, sizeof(p), root, "sparse.img");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
	if (fd < 0 || ftruncate(fd, SPARSE_SIZE) < 0 || pwrite(fd, "head", 4, 0) != 4 ||
	    pwrite(fd, "middle", 6, SPARSE_SIZE / 2) != 6 || pwrite(fd, "tail", 4, SPARSE_SIZE - 4) != 4)
		must(-1, "sparse file");
	close(fd);
	set_mtime(p, 1700000003, 333);
	path_join(p, sizeof(p), root, "empty");
	write_bytes(p, "", 0, 0600);
	path_join(p, sizeof(p), root, "d");
	must(mkdir(p, 0750), p);
	path_join(p, sizeof(p), root, "d/nested.txt");
	write_bytes(p, "nested\n", 7, 0444);
	path_join(p, sizeof(p), root, "d/empty-dir");
	must(mkdir(p, 0555), p);
	path_join(p, sizeof(p), root, "mod.txt");
	write_bytes(p, "original content\n", 17, 0644);
	path_join(p, sizeof(p), root, "app.txt");
	write_bytes(p, "line1\n", 6, 0644);
	path_join(p, sizeof(p), root, "perm.txt");
	write_bytes(p, "perm\n", 5, 0644);
	path_join(p, sizeof(p), root, "del.txt");
	write_bytes(p, "delete me\n", 10, 0644);
	path_join(p, sizeof(p), root, "becomes_dir");
	write_bytes(p, "a file for now\n", 15, 0644);
	path_join(p, sizeof(p), root, "link");
	must(symlink("keep1.txt", p), "symlink");
	set_mtime(p, 1600000000, 5);
	path_join(p, sizeof(p), root, "d/empty-dir");
	set_mtime(p, 1650000001, 0);
	path_join(p, sizeof(p), root, "d");
	set_mtime(p, 1650000002, 999);
}

/* the changes of the round trip: every kind but "untouched" */
static void
change_tree(const char *r)
{
	char p[512];
	int fd;

	tick();
	path_join(p, sizeof(p), r, "mod.txt");
	write_bytes(p, "changed!\n", 9, 0644);
	path_join(p, sizeof(p), r, "app.txt");
	if ((fd = open(p, O_WRONLY | O_APPEND | O_CLOEXEC)) < 0 || write(fd, "line2\n", 6) != 6)
		must(-1, p);
	close(fd);
	path_join(p, sizeof(p), r, "perm.txt");
	must(chmod(p, 0600), p);
	path_join(p, sizeof(p), r, "del.txt");
	must(unlink(p), p);
	path_join(p, sizeof(p), r, "new.txt");
	write_bytes(p, "brand new\n", 10, 0644);
	path_join(p, sizeof(p), r, "becomes_dir");
	must(unlink(p), p);
	must(mkdir(p, 0711), p);
	path_join(p, sizeof(p), r, "becomes_dir/inside.txt");
	write_bytes(p, "inside\n", 7, 0640);
	path_join(p, sizeof(p), r, "newlink");
	must(symlink("d/nested.txt", p), "symlink");
}

/* Shared by the tests: the original tree T and its whole archive A, a
 * layer R restored from A and changed since its index, and the delta B
 * of R. */
static char store[300], tree[300], lay[300], idxp[300];
static char dga[SNAPSHOT_DIGEST_HEX + 1], dgb[SNAPSHOT_DIGEST_HEX + 1];

/* dir holding A's state, fresh */
static void
base_copy(const char *dir)
{
	const char *why = NULL;
	int r;

	rm_rf(dir);
	r = snapshot_restore(store, dga, dir, 0, NULL, &why);
	if (r != 0) {
		diag("restore of the base into %s: %d (%s)", dir, r, why ? why : "-");
		exit(1);
	}
}

static void
test_round_trip(void)
{
	struct snapshot_index *ix = NULL;
	struct snapshot_stats st = { 0 }, rst = { 0 };
	char s[300], base[SNAPSHOT_DIGEST_HEX + 1], p[512];
	const char *why = NULL;
	struct stat sb;
	int r;

	path_join(store, sizeof(store), top, "store");
	path_join(tree, sizeof(tree), top, "tree");
	path_join(lay, sizeof(lay), top, "layer");
	path_join(idxp, sizeof(idxp), top, "layer.idx");
	make_tree(tree);
	r = snapshot_create(tree, store, 0, dga, NULL);
	is_int(r, 0, "whole archive A of the tree");
	r = snapshot_restore(store, dga, lay, 0, NULL, &why);
	is_int(r, 0, "A restored into the layer (%s)", why ? why : "-");
	r = snapshot_index_save(lay, idxp, dga, 0);
	is_int(r, 0, "the layer's index saved");
	change_tree(lay);
	r = snapshot_index_load(idxp, &ix);
	is_int(r, 0, "the index loaded");
	if (ix == NULL)
		exit(1);
	is_int(snapshot_index_count(ix), 10, "... 10 regular files in it");
	is_str(snapshot_index_base(ix), dga, "... naming A");
	is_int(snapshot_index_depth(ix), 0, "... at depth 0");

	r = snapshot_create_delta(lay, store, 0, -1, NULL, 0, ix, dgb, &st);
	is_int(r, 0, "delta B of the changed layer");
	is_int(st.unchanged, UNTOUCHED_FILES, "... exactly the untouched files are unchanged");
	ok(strcmp(dga, dgb) != 0, "... a digest of its own");

	memset(base, 0, sizeof(base));
	is_int(snapshot_base_of(store, dgb, base), 1, "B is a delta");
	is_str(base, dga, "... of A");
	is_int(snapshot_base_of(store, dga, base), 0, "A is a whole archive");

	path_join(s, sizeof(s), top, "rt-onto");
	base_copy(s);
	r = snapshot_restore_onto(store, dgb, dga, s, 0, &rst, &why);
	is_int(r, 0, "B restored onto a copy of A's state (%s)", why ? why : "-");
	is_int(tree_diff(lay, s, false), 0, "... which now equals the layer exactly");
	ok(!has_staging(s), "... no staging directory left");
	is_int(rst.entries, st.entries, "... as many entries extracted as archived");
	path_join(p, sizeof(p), s, "sparse.img");
	ok(lstat(p, &sb) == 0 && sb.st_size == SPARSE_SIZE &&
	    (uint64_t)sb.st_blocks * 512 < (1u << 20),
	    "... the unchanged sparse file is still sparse (%lld blocks)", (long long)sb.st_blocks);

	snapshot_index_free(ix);
}

/* ---- a restore while the archive arrives ---- */

struct feed_sim {
	uint64_t size, shown;
	size_t step;
};

static int64_t
feed_more(void *ctx, uint64_t have, bool *end)
{
	struct feed_sim *f = ctx;

	f->shown = f->shown + f->step > f->size ? f->size : f->shown + f->step;
	if (f->shown <= have && f->shown < f->size)
		f->shown = have + 1 > f->size ? f->size : have + 1;
	*end = f->shown == f->size;
	return (int64_t)f->shown;
}

static void
test_feed(void)
{
	char s[300], p[512], base[SNAPSHOT_DIGEST_HEX + 1];
	const char *why = NULL;
	struct feed_sim sim = { 0 };
	struct snapshot_feed f = { .more = feed_more, .ctx = &sim };
	int r;

	archive_path(p, sizeof(p), store, dgb);
	sim.size = file_size(p);
	sim.step = 1000;
	if ((f.fd = open(p, O_RDONLY | O_CLOEXEC)) < 0)
		must(-1, p);
	memset(base, 0, sizeof(base));
	is_int(snapshot_feed_base_of(&f, base), 1, "a delta arriving is one");
	is_str(base, dga, "... of A");
	sim.shown = 0;
	path_join(s, sizeof(s), top, "feed-onto");
	base_copy(s);
	r = snapshot_restore_feed_onto(&f, dgb, dga, s, 0, NULL, &why);
	is_int(r, 0, "B restored onto A's state while it arrives, 1000 bytes at a time (%s)",
	    why ? why : "-");
	is_int(tree_diff(lay, s, false), 0, "... equals the layer");
	ok(!has_staging(s), "... no staging directory left");
	sim.shown = 0;
	rm_rf(s);
	r = snapshot_restore_feed(&f, dgb, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta arriving restored without a base: refused (%s)",
	    why ? why : "-");
	ok(!exists(s), "... nothing left");
	close(f.fd);
}

/* one small file changed in a large layer: the delta is small, and the
 * same tree with the same index gives the same delta */
static void
test_small_and_deterministic(void)
{
	struct snapshot_index *ix = NULL;
	struct snapshot_stats st = { 0 };
	char t[300], l[300], ip[300], s[300], st2[300], p[512], pa[512], pb[512];
	char da[SNAPSHOT_DIGEST_HEX + 1], db[SNAPSHOT_DIGEST_HEX + 1], db2[SNAPSHOT_DIGEST_HEX + 1];
	size_t big = 8u << 20;
	unsigned char *buf = malloc(big);
	char *ca = NULL, *cb = NULL;
	size_t la = 0, lb = 0;
	const char *why = NULL;
	int r;

	if (buf == NULL)
		abort();
	path_join(t, sizeof(t), top, "big-tree");
	path_join(l, sizeof(l), top, "big-layer");
	path_join(ip, sizeof(ip), top, "big.idx");
	path_join(s, sizeof(s), top, "big-onto");
	path_join(st2, sizeof(st2), top, "store2");
	must(mkdir(t, 0755), t);
	path_join(p, sizeof(p), t, "big.bin");
	randombytes_buf(buf, big);
	write_bytes(p, buf, big, 0644);
	free(buf);
	path_join(p, sizeof(p), t, "small.txt");
	write_bytes(p, "0123456789", 10, 0644);
	is_int(snapshot_create(t, store, 0, da, NULL), 0, "whole archive of an 8 MiB layer");
	archive_path(pa, sizeof(pa), store, da);
	ok(file_size(pa) > big, "... larger than 8 MiB (%llu bytes)", (unsigned long long)file_size(pa));
	is_int(snapshot_restore(store, da, l, 0, NULL, &why), 0, "... restored");
	is_int(snapshot_index_save(l, ip, da, 2), 0, "... indexed (depth 2)");
	tick();
	path_join(p, sizeof(p), l, "small.txt");
	write_bytes(p, "abcdefghij", 10, 0644);
	is_int(snapshot_index_load(ip, &ix), 0, "index loaded");
	if (ix == NULL)
		exit(1);
	is_int(snapshot_index_depth(ix), 2, "... depth 2");
	r = snapshot_create_delta(l, store, 0, -1, NULL, 0, ix, db, &st);
	is_int(r, 0, "delta after a 10-byte change");
	is_int(st.unchanged, 1, "... the big file unchanged");
	archive_path(pb, sizeof(pb), store, db);
	ok(file_size(pb) < 64u << 10, "... the delta is small (%llu bytes)",
	    (unsigned long long)file_size(pb));
	r = snapshot_create_delta(l, st2, 0, -1, NULL, 0, ix, db2, NULL);
	is_int(r, 0, "the same delta again, into another store");
	is_str(db2, db, "... the same digest");
	archive_path(pa, sizeof(pa), st2, db2);
	ok(read_file(pa, 1u << 20, &ca, &la) == 0 && read_file(pb, 1u << 20, &cb, &lb) == 0 &&
	    la == lb && memcmp(ca, cb, la) == 0, "... byte for byte");
	free(ca);
	free(cb);
	r = snapshot_create_delta(l, st2, 0, -1, NULL, 0, ix, db2, NULL);
	is_int(r, 0, "and once more into the store that has it");
	is_str(db2, db, "... the same digest");
	r = snapshot_restore(store, da, s, 0, NULL, &why);
	r = r ? r : snapshot_restore_onto(store, db, da, s, 0, NULL, &why);
	is_int(r, 0, "the small delta restored onto its base (%s)", why ? why : "-");
	is_int(tree_diff(l, s, false), 0, "... equals the layer");
	snapshot_index_free(ix);
	rm_rf(s);
	rm_rf(l);
	rm_rf(t);
}

/* ---- a hand-made archive: libarchive's pax writer used raw, zstd, the
 * trailer; with a delta's frame in front when head is set ---- */

/* the file's bytes, mode and mtime, to see that nothing touched it */
struct snap_of {
	char *data;
	size_t len;
	struct stat st;
};

static void
look(const char *p, struct snap_of *o)
{
	memset(o, 0, sizeof(*o));
	if (lstat(p, &o->st) < 0 || read_file(p, 1u << 20, &o->data, &o->len) < 0)
		must(-1, p);
}

static bool
same_as(const char *p, const struct snap_of *o)
{
	struct snap_of n;
	bool same;

	memset(&n, 0, sizeof(n));
	if (lstat(p, &n.st) < 0 || read_file(p, 1u << 20, &n.data, &n.len) < 0)
		return false;
	same = S_ISREG(n.st.st_mode) && n.st.st_ino == o->st.st_ino && n.len == o->len &&
	    memcmp(n.data, o->data, n.len) == 0 && n.st.st_mode == o->st.st_mode &&
	    n.st.st_mtim.tv_sec == o->st.st_mtim.tv_sec &&
	    n.st.st_mtim.tv_nsec == o->st.st_mtim.tv_nsec && n.st.st_nlink == 1;
	free(n.data);
	return same;
}

static void
test_hostile(void)
{
	char s[300], p[512], q[512], out[300], outd[300], hs[300];
	char dg[SNAPSHOT_DIGEST_HEX + 1], other[SNAPSHOT_DIGEST_HEX + 1], base[SNAPSHOT_DIGEST_HEX + 1];
	struct snap_of before;
	const char *why = NULL;
	unsigned char *all = NULL;
	size_t len = 0;
	struct hand h;
	int r;

	path_join(s, sizeof(s), top, "h-onto");
	path_join(hs, sizeof(hs), top, "hstore");

	/* a delta without its base */
	rm_rf(s);
	r = snapshot_restore(store, dgb, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta restored without a base: refused (%s)", why ? why : "-");
	ok(why && strstr(why, "without its base"), "... as a delta without its base");
	ok(!exists(s), "... nothing left");

	/* onto another base than the one it names */
	memset(other, 'a', SNAPSHOT_DIGEST_HEX);
	other[SNAPSHOT_DIGEST_HEX] = '\0';
	base_copy(s);
	r = snapshot_restore_onto(store, dgb, other, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta onto another base: refused (%s)", why ? why : "-");
	ok(why && strstr(why, "another base"), "... as a delta of another base");

	/* a whole archive where a delta was expected */
	base_copy(s);
	r = snapshot_restore_onto(store, dga, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a whole archive restored as a delta: refused (%s)", why ? why : "-");
	ok(why && strstr(why, "whole archive"), "... as a whole archive");

	/* bad base digest strings */
	base_copy(s);
	r = snapshot_restore_onto(store, dgb, "../../etc", s, 0, NULL, &why);
	is_int(r, -EINVAL, "a base that is no digest: -EINVAL (%s)", why ? why : "-");

	/* an unchanged file the base does not hold */
	base_copy(s);
	path_join(p, sizeof(p), s, "keep1.txt");
	must(unlink(p), p);
	r = snapshot_restore_onto(store, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "an unchanged file missing from the base: refused (%s)", why ? why : "-");
	ok(why && strstr(why, "does not hold"), "... as a file the base does not hold");

	/* ... a symlink there, to a file outside dest */
	path_join(out, sizeof(out), top, "outside.txt");
	write_bytes(out, "secret outside\n", 15, 0600);
	set_mtime(out, 1500000000, 42);
	look(out, &before);
	base_copy(s);
	path_join(p, sizeof(p), s, "keep1.txt");
	must(unlink(p), p);
	must(symlink(out, p), "symlink");
	r = snapshot_restore_onto(store, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "an unchanged file that is a symlink in the base: refused (%s)",
	    why ? why : "-");
	ok(same_as(out, &before), "... the file it points to is untouched (data, mode, mtime, inode)");

	/* ... a directory there */
	base_copy(s);
	path_join(p, sizeof(p), s, "keep1.txt");
	must(unlink(p), p);
	must(mkdir(p, 0755), p);
	r = snapshot_restore_onto(store, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "an unchanged file that is a directory in the base: refused (%s)",
	    why ? why : "-");

	/* ... its parent directory a symlink to a directory outside */
	path_join(outd, sizeof(outd), top, "outside-dir");
	rm_rf(outd);
	must(mkdir(outd, 0755), outd);
	path_join(q, sizeof(q), outd, "nested.txt");
	write_bytes(q, "outside nested\n", 15, 0644);
	set_mtime(q, 1500000000, 43);
	free(before.data);
	look(q, &before);
	base_copy(s);
	path_join(p, sizeof(p), s, "d");
	rm_rf(p);
	must(symlink(outd, p), "symlink");
	r = snapshot_restore_onto(store, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "an unchanged file beneath a symlinked directory of the base: refused (%s)",
	    why ? why : "-");
	ok(same_as(q, &before), "... the file outside is untouched");
	free(before.data);

	/* a whole archive with a hard link to its own path */
	h_start(&h);
	h_file(&h, "f", 0644, "x");
	h_hardlink(&h, "g", "g");
	h_store(&h, hs, dg);
	rm_rf(s);
	r = snapshot_restore(hs, dg, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a whole archive with a hard link to its own path: refused (%s)",
	    why ? why : "-");
	is_str(why, "hard link", "... as a hard link");
	ok(!exists(s), "... nothing left");

	/* the control: a hand-made delta of A restores onto A */
	h_start(&h);
	h_delta(&h, dga);
	h_hardlink(&h, "keep1.txt", "keep1.txt");
	h_file(&h, "x.txt", 0644, "hand");
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, 0, "a hand-made delta of A restores onto A (%s)", why ? why : "-");
	path_join(p, sizeof(p), s, "keep1.txt");
	{
		char *c = NULL;
		size_t l = 0;
		struct stat sb;
		ok(read_file(p, 100, &c, &l) == 0 && l == 14 && memcmp(c, "unchanged one\n", 14) == 0 &&
		    lstat(p, &sb) == 0 && (sb.st_mode & 07777) == 0644 &&
		    sb.st_mtim.tv_sec == 1700000000 && sb.st_mtim.tv_nsec == 0,
		    "... its unchanged file has the base's data and the entry's mode and mtime");
		free(c);
	}
	path_join(p, sizeof(p), s, "keep2.bin");
	ok(!exists(p), "... what the delta does not hold is gone");
	ok(!has_staging(s), "... no staging directory left");
	/* ... and not without its base, nor as a whole archive */
	rm_rf(s);
	r = snapshot_restore(hs, dg, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "... but not restored whole (%s)", why ? why : "-");

	/* a delta of the format before the marker (a chain made by an
	 * earlier version): restored onto its base, its base read from it */
	h_start(&h);
	h_legacy(&h);
	h_delta(&h, dga);
	h_hardlink(&h, "keep1.txt", "keep1.txt");
	h_file(&h, "x.txt", 0644, "old");
	h_store(&h, hs, dg);
	memset(base, 0, sizeof(base));
	ok(snapshot_base_of(hs, dg, base) == 1 && strcmp(base, dga) == 0,
	    "a delta of the format before the marker names its base");
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, 0, "... and restores onto it (%s)", why ? why : "-");
	path_join(p, sizeof(p), s, "x.txt");
	ok(file_is(p, "old"), "... its new file there");
	/* the marker after the delta's frame: not a format */
	h_start(&h);
	h_delta(&h, dga);
	h.mark_last = true;
	h_hardlink(&h, "keep1.txt", "keep1.txt");
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "the marker after the delta's frame: refused (%s)", why ? why : "-");

	/* a delta with a hard link to another path */
	h_start(&h);
	h_delta(&h, dga);
	h_hardlink(&h, "keep1.txt", "keep2.bin");
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta with a hard link to another path: refused (%s)", why ? why : "-");
	is_str(why, "hard link", "... as a hard link");

	/* ... to a path outside */
	h_start(&h);
	h_delta(&h, dga);
	h_hardlink(&h, "keep1.txt", out);
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta with a hard link to an absolute path: refused (%s)",
	    why ? why : "-");

	/* ... an "unchanged" directory */
	h_start(&h);
	h_delta(&h, dga);
	h_head(&h, AE_IFDIR, 0755, "d", 0);
	archive_entry_copy_hardlink(h.ae, "d");
	if (archive_write_header(h.a, h.ae) != ARCHIVE_OK)
		abort();
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a delta with an \"unchanged\" directory: refused (%s)", why ? why : "-");

	/* ... the same file unchanged twice */
	h_start(&h);
	h_delta(&h, dga);
	h_hardlink(&h, "keep1.txt", "keep1.txt");
	h_hardlink(&h, "keep1.txt", "keep1.txt");
	h_store(&h, hs, dg);
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	ok(r < 0, "a delta with one file unchanged twice: refused (%d, %s)", r, why ? why : "-");

	/* ... a file beneath a path the delta made a symlink */
	h_start(&h);
	h_delta(&h, dga);
	h_head(&h, AE_IFLNK, 0777, "d", 0);
	archive_entry_copy_symlink(h.ae, outd);
	if (archive_write_header(h.a, h.ae) != ARCHIVE_OK)
		abort();
	h_hardlink(&h, "d/nested.txt", "d/nested.txt");
	h_store(&h, hs, dg);
	base_copy(s);
	path_join(q, sizeof(q), outd, "nested.txt");
	look(q, &before);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	/* as for a whole archive (test_snapshot): the entry fails first,
	 * the archive is intact, the answer is the entry's errno */
	is_int(r, -ENOTDIR, "a delta with an unchanged file beneath its own symlink: refused (%s)",
	    why ? why : "-");
	ok(same_as(q, &before), "... the file outside is untouched");
	free(before.data);

	/* a frame with the magic and the wrong length */
	h_start(&h);
	h_delta(&h, dga);
	h.head[4] = 33;
	h_file(&h, "x.txt", 0644, "hand");
	h_store(&h, hs, dg);
	is_int(snapshot_base_of(hs, dg, base), -EBADMSG, "a malformed delta frame: not an archive");
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "... refused onto the base (%s)", why ? why : "-");
	rm_rf(s);
	r = snapshot_restore(hs, dg, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "... and whole (%s)", why ? why : "-");
	ok(!exists(s), "... nothing left");

	/* one byte of the base digest flipped: in place (the digest no
	 * longer matches), and re-hashed under its own name (another base) */
	archive_path(p, sizeof(p), store, dgb);
	if (read_file(p, 64u << 20, (char **)&all, &len) < 0 || len < 200)
		must(-1, p);
	all[HEAD_BASE + 5] ^= 0x01;
	archive_path(q, sizeof(q), hs, dgb);
	unlink(q);
	write_bytes(q, all, len, 0444);
	base_copy(s);
	r = snapshot_restore_onto(hs, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "the base digest flipped in place: refused (%s)", why ? why : "-");
	store_body(hs, all, len - 40, dg, false);
	memset(base, 0, sizeof(base));
	is_int(snapshot_base_of(hs, dg, base), 1, "the flipped delta re-hashed: still a delta");
	ok(strcmp(base, dga) != 0, "... naming another base");
	base_copy(s);
	r = snapshot_restore_onto(hs, dg, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "... refused onto A (%s)", why ? why : "-");
	ok(why && strstr(why, "another base"), "... as a delta of another base");
	/* a byte flipped in the compressed stream: the digest */
	all[HEAD_BASE + 5] ^= 0x01;
	all[len / 2] ^= 0x10;
	write_bytes(q, all, len, 0444);
	base_copy(s);
	r = snapshot_restore_onto(hs, dgb, dga, s, 0, NULL, &why);
	is_int(r, -EBADMSG, "a byte flipped in the delta's stream: refused (%s)", why ? why : "-");
	free(all);
	rm_rf(s);
	rm_rf(outd);
}

/* ---- the index codec ---- */

struct ixe {
	const char *path;
	uint64_t ino, size;
	int64_t ms;
	uint32_t mns;
	int64_t cs;
	uint32_t cns;
};

static size_t
ix_build(uint8_t *b, const char *magic, uint32_t depth, uint32_t count, const struct ixe *e, size_t n)
{
	size_t o = 48;

	memcpy(b, magic, 8);
	for (int i = 0; i < 32; i++)
		b[8 + i] = (uint8_t)(0xa0 + i);
	be_store(b + 40, depth, 4);
	be_store(b + 44, count, 4);
	for (size_t i = 0; i < n; i++) {
		size_t l = strlen(e[i].path);
		be_store(b + o, l, 2);
		memcpy(b + o + 2, e[i].path, l);
		o += 2 + l;
		be_store(b + o, e[i].ino, 8);
		be_store(b + o + 8, e[i].size, 8);
		be_store(b + o + 16, (uint64_t)e[i].ms, 8);
		be_store(b + o + 24, e[i].mns, 4);
		be_store(b + o + 28, (uint64_t)e[i].cs, 8);
		be_store(b + o + 36, e[i].cns, 4);
		o += 40;
	}
	return o;
}

/* decodes exactly len bytes (a buffer of that size: ASan sees any read
 * past it) */
static int
decode(const uint8_t *b, size_t len, struct snapshot_index **out)
{
	unsigned char *c = malloc(len ? len : 1);
	int r;

	if (c == NULL)
		abort();
	memcpy(c, b, len);
	r = snapshot_index_decode(c, len, out);
	free(c);
	return r;
}

static void
bad_index(const char *label, const uint8_t *b, size_t len)
{
	struct snapshot_index *x = (struct snapshot_index *)1;

	is_int(decode(b, len, &x), -EBADMSG, "index %s: refused", label);
	ok(x == NULL, "... and nothing returned");
}

static void
test_index_codec(void)
{
	static const struct ixe good[] = {
		{ "a", 11, 1, 1700000000, 1, 1700000001, 2 },
		{ "b/c", 12, 0, -5, 999999999, 0, 0 },
		{ "b/d", 13, 100, 1, 0, 2, 0 },
	};
	struct ixe e[3];
	uint8_t b[1024];
	struct snapshot_index *x = NULL;
	char p[300], cmd[700];
	size_t n;
	struct stat st;

	n = ix_build(b, "SPXIDX1\n", 3, 3, good, 3);
	is_int(decode(b, n, &x), 0, "a valid index decodes");
	if (x) {
		is_int(snapshot_index_count(x), 3, "... 3 files");
		is_int(snapshot_index_depth(x), 3, "... depth 3");
		is_str(snapshot_index_base(x),
		    "a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf", "... its base");
		memset(&st, 0, sizeof(st));
		st.st_mode = S_IFREG | 0644;
		st.st_ino = 12;
		st.st_size = 0;
		st.st_mtim.tv_sec = -5;
		st.st_mtim.tv_nsec = 999999999;
		ok(snapshot_index_same(x, "b/c", &st), "... a file exactly as indexed is the same");
		st.st_ino = 13;
		ok(!snapshot_index_same(x, "b/c", &st), "... another inode is not");
		st.st_ino = 12;
		st.st_mode = S_IFLNK | 0777;
		ok(!snapshot_index_same(x, "b/c", &st), "... nor a symlink");
		st.st_mode = S_IFREG | 0644;
		ok(!snapshot_index_same(x, "b/e", &st), "... nor a path not in it");
		snapshot_index_free(x);
	}
	x = NULL;
	n = ix_build(b, "SPXIDX1\n", 0, 0, NULL, 0);
	is_int(decode(b, n, &x), 0, "an empty index decodes");
	ok(x && snapshot_index_count(x) == 0, "... with no file");
	snapshot_index_free(x);

	n = ix_build(b, "SPXIDX1\n", 3, 3, good, 3);
	bad_index("cut by one byte", b, n - 1);
	b[n] = 0;
	bad_index("with one byte more", b, n + 1);
	bad_index("of its head alone", b, 47);
	bad_index("empty", b, 0);
	n = ix_build(b, "SPXIDX2\n", 3, 3, good, 3);
	bad_index("with the wrong magic", b, n);
	n = ix_build(b, "SPXIDX1\n", SNAPSHOT_DELTA_DEPTH_MAX + 1, 3, good, 3);
	bad_index("deeper than SNAPSHOT_DELTA_DEPTH_MAX", b, n);
	n = ix_build(b, "SPXIDX1\n", SNAPSHOT_DELTA_DEPTH_MAX, 3, good, 3);
	x = NULL;
	is_int(decode(b, n, &x), 0, "an index at SNAPSHOT_DELTA_DEPTH_MAX decodes");
	snapshot_index_free(x);
	n = ix_build(b, "SPXIDX1\n", 3, 4, good, 3);
	bad_index("counting one file more", b, n);
	n = ix_build(b, "SPXIDX1\n", 3, 2, good, 3);
	bad_index("counting one file less", b, n);
	n = ix_build(b, "SPXIDX1\n", 3, 0xffffffffu, good, 3);
	bad_index("counting 2^32-1 files", b, n);

	memcpy(e, good, sizeof(e));
	e[0] = good[1];
	e[1] = good[0];
	n = ix_build(b, "SPXIDX1\n", 3, 3, e, 3);
	bad_index("unsorted", b, n);
	memcpy(e, good, sizeof(e));
	e[2].path = "b/c";
	n = ix_build(b, "SPXIDX1\n", 3, 3, e, 3);
	bad_index("with a path twice", b, n);
	static const char *const badpaths[] = { "..", "b/../c", "/etc/passwd", "", "b//c", "./b",
	    "b/", "b/." };
	for (size_t i = 0; i < sizeof(badpaths) / sizeof(*badpaths); i++) {
		char label[64];

		memcpy(e, good, sizeof(e));
		e[0].path = badpaths[i];
		n = ix_build(b, "SPXIDX1\n", 3, 1, e, 1);
		snprintf(label, sizeof(label), "with path \"%s\"", badpaths[i]);
		bad_index(label, b, n);
	}
	n = ix_build(b, "SPXIDX1\n", 3, 1, good, 1);
	b[50] = '\0';       /* the path "a" a NUL */
	bad_index("with a NUL in a path", b, n);
	memcpy(e, good, sizeof(e));
	e[1].mns = 1000000000u;
	n = ix_build(b, "SPXIDX1\n", 3, 3, e, 3);
	bad_index("with mtime nanoseconds 1e9", b, n);
	memcpy(e, good, sizeof(e));
	e[2].cns = 0xffffffffu;
	n = ix_build(b, "SPXIDX1\n", 3, 3, e, 3);
	bad_index("with ctime nanoseconds 2^32-1", b, n);
	memcpy(e, good, sizeof(e));
	e[0].size = (uint64_t)INT64_MAX + 1;
	n = ix_build(b, "SPXIDX1\n", 3, 3, e, 3);
	bad_index("with a size over INT64_MAX", b, n);
	n = ix_build(b, "SPXIDX1\n", 3, 3, good, 3);
	be_store(b + 48, 0xffff, 2);        /* the first path's length past the end */
	bad_index("with a path longer than the file", b, n);

	/* save and load: the layer's files */
	path_join(p, sizeof(p), top, "tree.idx");
	is_int(snapshot_index_save(tree, p, dga, 3), 0, "the tree's index saved at depth 3");
	x = NULL;
	is_int(snapshot_index_load(p, &x), 0, "... loaded");
	if (x) {
		is_int(snapshot_index_count(x), 10, "... its 10 regular files");
		is_str(snapshot_index_base(x), dga, "... its base");
		is_int(snapshot_index_depth(x), 3, "... depth 3");
		snapshot_index_free(x);
	}
	is_int(snapshot_index_save(tree, p, dga, SNAPSHOT_DELTA_DEPTH_MAX + 1), -EINVAL,
	    "an index deeper than the bound is not saved");
	is_int(snapshot_index_save(tree, p, "../x", 0), -EINVAL, "nor one of a base that is no digest");
	snprintf(cmd, sizeof(cmd), "truncate -s -1 '%s'", p);
	if (system(cmd) != 0)
		diag("truncate failed");
	x = (struct snapshot_index *)1;
	is_int(snapshot_index_load(p, &x), -EBADMSG, "a saved index cut by one byte: refused");
	ok(x == NULL, "... nothing returned");
	path_join(p, sizeof(p), top, "no-such.idx");
	is_int(snapshot_index_load(p, &x), -ENOENT, "a missing index: -ENOENT");
}

/* snapshot_index_same on a live file */
static void
test_index_same(void)
{
	struct snapshot_index *x = NULL;
	char d[300], f[512], g[512], ip[300];
	struct stat st, old;
	int fd;

	path_join(d, sizeof(d), top, "same");
	path_join(ip, sizeof(ip), top, "same.idx");
	must(mkdir(d, 0755), d);
	path_join(f, sizeof(f), d, "f");
	path_join(g, sizeof(g), d, "g");
	write_bytes(f, "0123456789", 10, 0644);
	write_bytes(g, "9876543210", 10, 0644);

#define RELOAD() do { snapshot_index_free(x); x = NULL; \
	if (snapshot_index_save(d, ip, dga, 0) < 0 || snapshot_index_load(ip, &x) < 0) \
		must(-1, "index"); } while (0)
	RELOAD();
	is_int(snapshot_index_count(x), 2, "index of two files");
	ok(lstat(f, &st) == 0 && snapshot_index_same(x, "f", &st), "an untouched file is the same");
	ok(!snapshot_index_same(x, "f/", &st) && !snapshot_index_same(x, "h", &st),
	    "... under its own path only");

	tick();
	must(utimensat(AT_FDCWD, f, NULL, 0), "touch");
	ok(lstat(f, &st) == 0 && !snapshot_index_same(x, "f", &st), "after touch (mtime): not the same");

	RELOAD();
	ok(lstat(f, &old) == 0 && snapshot_index_same(x, "f", &old), "re-indexed: the same");
	tick();
	must(chmod(f, 0644), "chmod");
	ok(lstat(f, &st) == 0 && !snapshot_index_same(x, "f", &st),
	    "after chmod to the same mode (ctime only): not the same");

	RELOAD();
	ok(lstat(f, &old) == 0 && snapshot_index_same(x, "f", &old), "re-indexed: the same");
	tick();
	if ((fd = open(f, O_WRONLY | O_CLOEXEC)) < 0 || pwrite(fd, "ABCDEFGHIJ", 10, 0) != 10)
		must(-1, f);
	close(fd);
	/* the mtime put back: only the ctime tells */
	set_mtime(f, old.st_mtim.tv_sec, old.st_mtim.tv_nsec);
	ok(lstat(f, &st) == 0 && st.st_size == old.st_size &&
	    st.st_mtim.tv_nsec == old.st_mtim.tv_nsec && !snapshot_index_same(x, "f", &st),
	    "after a rewrite of the same size, mtime put back: not the same");

	RELOAD();
	ok(lstat(f, &old) == 0 && snapshot_index_same(x, "f", &old), "re-indexed: the same");
	tick();
	must(rename(g, f), "rename");
	ok(lstat(f, &st) == 0 && !snapshot_index_same(x, "f", &st),
	    "another file renamed over it: not the same");
#undef RELOAD
	snapshot_index_free(x);
	rm_rf(d);
}

/* snapshot_index_build_live: files changed at or after the threshold are
 * left out; the index written names its base and loads back */
static void
test_index_live(void)
{
	struct snapshot_index *x = NULL, *y = NULL;
	char d[300], f[512], g[512], h[512], ip[300];
	struct timespec before;
	struct stat st;

	path_join(d, sizeof(d), top, "live");
	path_join(ip, sizeof(ip), top, "live.idx");
	must(mkdir(d, 0755), d);
	path_join(f, sizeof(f), d, "old1");
	path_join(g, sizeof(g), d, "old2");
	path_join(h, sizeof(h), d, "new");
	write_bytes(f, "old", 3, 0644);
	write_bytes(g, "old", 3, 0644);
	tick();
	must(lstat(g, &st), g);
	before = st.st_ctim;
	before.tv_nsec++;
	if (before.tv_nsec >= 1000000000L) {
		before.tv_sec++;
		before.tv_nsec -= 1000000000L;
	}
	tick();
	write_bytes(h, "new", 3, 0644);
	must(chmod(f, 0600), "chmod");         /* changed after the threshold too */
	is_int(snapshot_index_build_live(d, &before, &x), 0, "a live index built");
	if (x == NULL)
		return;
	is_int(snapshot_index_count(x), 1, "... of the one file unchanged since the threshold");
	ok(lstat(g, &st) == 0 && snapshot_index_same(x, "old2", &st), "... that file");
	ok(lstat(h, &st) == 0 && !snapshot_index_same(x, "new", &st), "... not the new one");
	ok(lstat(f, &st) == 0 && !snapshot_index_same(x, "old1", &st), "... nor the one changed since");
	is_int(snapshot_index_write(x, ip, dga, SNAPSHOT_DELTA_DEPTH_MAX + 1), -EINVAL,
	    "written deeper than the bound: refused");
	is_int(snapshot_index_write(x, ip, dga, 2), 0, "written, naming its archive at depth 2");
	is_int(snapshot_index_load(ip, &y), 0, "... loaded back");
	if (y) {
		is_int(snapshot_index_count(y), 1, "... its file");
		is_str(snapshot_index_base(y), dga, "... its base");
		is_int(snapshot_index_depth(y), 2, "... its depth");
		snapshot_index_free(y);
	}
	snapshot_index_free(x);
	x = NULL;
	before.tv_sec -= 3600;
	is_int(snapshot_index_build_live(d, &before, &x), 0, "a threshold an hour back");
	if (x)
		is_int(snapshot_index_count(x), 0, "... leaves every file out");
	snapshot_index_free(x);
	rm_rf(d);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	snprintf(top, sizeof(top), "/tmp/test_snapdelta.XXXXXX");
	if (mkdtemp(top) == NULL)
		return 1;
	test_round_trip();
	test_feed();
	test_small_and_deterministic();
	test_hostile();
	test_index_codec();
	test_index_same();
	test_index_live();
	rm_rf(top);
	return done_testing();
}
