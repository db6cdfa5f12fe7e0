/* Sparse maps in hostile snapshot archives: libarchive reads a GNU sparse
 * map into one heap node per region while it reads the entry's header,
 * before any check of ours and before the digest, so a restore must
 * refuse a map our archiver never writes before libarchive parses it:
 * one of more than SPACE_SNAPSHOT_SPARSE_MAX (+1, the writer's last empty
 * region) regions, and every other sparse form (old GNU 'S' headers, pax
 * 0.0 and 0.1, Solaris' SUN.holesdata). The archives are built by hand,
 * byte by byte where libarchive's writer would not write them, as an
 * attacker with write access to the store (or a hostile worker) would. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <archive.h>
#include <archive_entry.h>
#include <sodium.h>
#include <zstd.h>

#include "limits.h"
#include "snapshot.h"
#include "util.h"
#include "tap.h"
#include "snaptest.h"

static char top[256], store[300];
static int ndest;

/* ---- a tar stream written byte by byte ---- */

struct raw {
	unsigned char *p;
	size_t len, cap;
};

static void
raw_put(struct raw *r, const void *p, size_t n)
{
	if (r->len + n > r->cap) {
		while (r->len + n > r->cap)
			r->cap = r->cap ? r->cap * 2 : 1u << 16;
		if ((r->p = realloc(r->p, r->cap)) == NULL)
			abort();
	}
	memcpy(r->p + r->len, p, n);
	r->len += n;
}

static void
raw_pad(struct raw *r)
{
	static const unsigned char z[512];

	if (r->len % 512)
		raw_put(r, z, 512 - r->len % 512);
}

static void
octal(unsigned char *f, size_t w, uint64_t v)
{
	char tmp[32];

	snprintf(tmp, sizeof(tmp), "%0*llo", (int)w - 1, (unsigned long long)v);
	memcpy(f, tmp, w);
}

/* a header block; gnu: the old GNU magic ("ustar  \0"). Left for the
 * caller to fill further, then raw_sum */
static void
raw_block(unsigned char h[512], const char *name, char type, uint64_t size, bool gnu)
{
	memset(h, 0, 512);
	snprintf((char *)h, 100, "%s", name);
	octal(h + 100, 8, type == '5' ? 0755 : 0644);
	octal(h + 108, 8, 0);
	octal(h + 116, 8, 0);
	octal(h + 124, 12, size);
	octal(h + 136, 12, 1700000000);
	h[156] = (unsigned char)type;
	memcpy(h + 257, gnu ? "ustar  \0" : "ustar\0" "00", 8);
}

static void
raw_sum(struct raw *r, unsigned char h[512])
{
	unsigned sum = 0;
	char tmp[8];

	memset(h + 148, ' ', 8);
	for (int i = 0; i < 512; i++)
		sum += h[i];
	snprintf(tmp, sizeof(tmp), "%06o", sum);
	memcpy(h + 148, tmp, 7);
	raw_put(r, h, 512);
}

static void
raw_header(struct raw *r, const char *name, char type, uint64_t size)
{
	unsigned char h[512];

	raw_block(h, name, type, size, false);
	raw_sum(r, h);
}

/* a pax header of "key=value" records, NULL-terminated */
static void
raw_pax(struct raw *r, const char *const *kv)
{
	struct raw body = { 0 };

	for (; *kv; kv++) {
		size_t n = strlen(*kv) + 2, len = n + 1;
		char *line;

		while (n + (size_t)snprintf(NULL, 0, "%zu", len) != len)
			len = n + (size_t)snprintf(NULL, 0, "%zu", len);
		if ((line = malloc(len + 1)) == NULL)
			abort();
		snprintf(line, len + 1, "%zu %s\n", len, *kv);
		raw_put(&body, line, len);
		free(line);
	}
	raw_header(r, "PaxHeader/f", 'x', body.len);
	raw_put(r, body.p, body.len);
	raw_pad(r);
	free(body.p);
}

/* the entry of a GNU sparse 1.0 file, as libarchive's pax writer makes
 * it: pax header, then the map and the data as the entry's data */
static void
raw_sparse10(struct raw *r, const char *name, uint64_t realsize, const void *map, size_t maplen,
    const void *data, size_t datalen)
{
	char nm[300], rs[64];
	const char *kv[] = { "GNU.sparse.major=1", "GNU.sparse.minor=0", nm, rs, NULL };
	struct raw body = { 0 };

	snprintf(nm, sizeof(nm), "GNU.sparse.name=%s", name);
	snprintf(rs, sizeof(rs), "GNU.sparse.realsize=%llu", (unsigned long long)realsize);
	raw_pax(r, kv);
	raw_put(&body, map, maplen);
	raw_pad(&body);
	raw_put(&body, data, datalen);
	snprintf(nm, sizeof(nm), "GNUSparseFile.0/%s", name);
	raw_header(r, nm, '0', body.len);
	raw_put(r, body.p, body.len);
	raw_pad(r);
	free(body.p);
}

static void
raw_file(struct raw *r, const char *name, const char *data)
{
	raw_header(r, name, '0', strlen(data));
	raw_put(r, data, strlen(data));
	raw_pad(r);
}

/* ends the stream, compresses it behind the marker and stores it under
 * its digest, as snapshot_create would */
static void
raw_store(struct raw *r, char hex[SNAPSHOT_DIGEST_HEX + 1])
{
	static const unsigned char z[1024];
	size_t zcap, zlen;
	unsigned char *c;

	raw_put(r, z, sizeof(z));
	zcap = sizeof(hand_mark) + ZSTD_compressBound(r->len);
	if ((c = malloc(zcap)) == NULL)
		abort();
	memcpy(c, hand_mark, sizeof(hand_mark));
	zlen = ZSTD_compress(c + sizeof(hand_mark), zcap - sizeof(hand_mark), r->p, r->len, 3);
	if (ZSTD_isError(zlen))
		abort();
	store_body(store, c, sizeof(hand_mark) + zlen, hex, false);
	free(c);
	free(r->p);
	memset(r, 0, sizeof(*r));
}

/* restores hex in a child process: its result, and the child's peak RSS
 * (KiB) in *peak, which is the restore's own */
static int
restore_in_child(const char *hex, uint64_t max_bytes, char *dest, size_t destcap, long *peak)
{
	struct rusage ru;
	int st, fds[2], r = -EIO;
	pid_t pid;

	snprintf(dest, destcap, "%s/dest%d", top, ndest++);
	if (pipe(fds) < 0)
		return -errno;
	fflush(stdout);
	if ((pid = fork()) == 0) {
		const char *why = NULL;
		char line[300];
		int rc = snapshot_restore(store, hex, dest, max_bytes, NULL, &why);

		snprintf(line, sizeof(line), "%d %s", rc, why ? why : "-");
		if (write(fds[1], line, strlen(line) + 1) < 0)
			_exit(2);
		_exit(0);
	}
	close(fds[1]);
	if (pid > 0) {
		char line[300] = "";
		ssize_t n = read(fds[0], line, sizeof(line) - 1);

		if (wait4(pid, &st, 0, &ru) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0 && n > 0) {
			char *sp = strchr(line, ' ');
			r = atoi(line);
			*peak = ru.ru_maxrss;
			diag("restore: %d (%s), peak RSS %ld KiB", r, sp ? sp + 1 : "-", *peak);
		} else
			diag("the restoring child failed");
	}
	close(fds[0]);
	return r;
}

static int
restore(const char *hex, uint64_t max_bytes, char *dest, size_t destcap, const char **why)
{
	snprintf(dest, destcap, "%s/dest%d", top, ndest++);
	*why = NULL;
	return snapshot_restore(store, hex, dest, max_bytes, NULL, why);
}

/* the byte at off of path */
static int
byte_at(const char *path, off_t off)
{
	unsigned char c;
	int fd = open(path, O_RDONLY | O_CLOEXEC), r = -1;

	if (fd >= 0 && pread(fd, &c, 1, off) == 1)
		r = c;
	if (fd >= 0)
		close(fd);
	return r;
}

/* ---- what the archiver writes: restored ---- */

/* libarchive's pax writer, as snapshot_create uses it: nreg one-byte
 * regions at even offsets; the writer adds a last, empty region at the
 * file's end, so the map holds nreg + 1 */
static void
writer_sparse(struct hand *h, size_t nreg)
{
	size_t size = 2 * nreg + 2;
	unsigned char *logical = calloc(1, size);

	if (logical == NULL)
		abort();
	h_start_cap(h, 16u << 20);
	h_head(h, AE_IFREG, 0644, "f", (int64_t)size);
	for (size_t i = 0; i < nreg; i++) {
		archive_entry_sparse_add_entry(h->ae, (la_int64_t)(2 * i), 1);
		logical[2 * i] = 'x';
	}
	h_put_entry(h);
	if (archive_write_data(h->a, logical, size) != (la_ssize_t)size)
		abort();
	free(logical);
}

static void
test_writer_bound(void)
{
	char hex[SNAPSHOT_DIGEST_HEX + 1], dest[400], p[500];
	const char *why;
	struct hand h;
	struct stat sb;
	int r;

	writer_sparse(&h, SPACE_SNAPSHOT_SPARSE_MAX);
	h_store(&h, store, hex);
	r = restore(hex, 0, dest, sizeof(dest), &why);
	is_int(r, 0, "a map of SPACE_SNAPSHOT_SPARSE_MAX regions (and the writer's last) restores (%s)",
	    why ? why : "-");
	path_join(p, sizeof(p), dest, "f");
	ok(stat(p, &sb) == 0 && sb.st_size == 2 * SPACE_SNAPSHOT_SPARSE_MAX + 2 &&
	    byte_at(p, 0) == 'x' && byte_at(p, 1) == 0 &&
	    byte_at(p, 2 * SPACE_SNAPSHOT_SPARSE_MAX - 2) == 'x' &&
	    byte_at(p, 2 * SPACE_SNAPSHOT_SPARSE_MAX - 1) == 0, "... with its data at its offsets");

	writer_sparse(&h, SPACE_SNAPSHOT_SPARSE_MAX + 1);
	h_store(&h, store, hex);
	r = restore(hex, 0, dest, sizeof(dest), &why);
	is_int(r, -EBADMSG, "one region more than the archiver ever writes: refused (%s)",
	    why ? why : "-");
	ok(!exists(dest), "... and nothing left");
}

/* the same form by hand: the builder is right, so what is refused
 * below is refused for its map */
static void
test_raw_control(void)
{
	static const char map[] = "2\n0\n3\n10\n2\n";
	char hex[SNAPSHOT_DIGEST_HEX + 1], dest[400], p[500];
	const char *why;
	struct raw r = { 0 };
	int rc;

	raw_header(&r, "d/", '5', 0);
	raw_sparse10(&r, "d/f", 12, map, sizeof(map) - 1, "abcyz", 5);
	raw_file(&r, "g", "hello");
	raw_store(&r, hex);
	rc = restore(hex, 0, dest, sizeof(dest), &why);
	is_int(rc, 0, "a hand-made sparse 1.0 entry restores (%s)", why ? why : "-");
	path_join(p, sizeof(p), dest, "d/f");
	ok(byte_at(p, 0) == 'a' && byte_at(p, 2) == 'c' && byte_at(p, 3) == 0 &&
	    byte_at(p, 10) == 'y' && byte_at(p, 11) == 'z', "... its regions at their offsets");
	path_join(p, sizeof(p), dest, "g");
	ok(file_is(p, "hello"), "... and the entry after it");
}

/* ---- the bomb: millions of regions from a few KiB ---- */

static void
test_bomb(void)
{
	const size_t n = 5000000;
	char hex[SNAPSHOT_DIGEST_HEX + 1], chex[SNAPSHOT_DIGEST_HEX + 1], dest[400], p[400];
	struct raw map = { 0 }, r = { 0 }, ctl = { 0 };
	struct stat sb;
	long peak = 0, base = 0;
	int rc;

	snprintf(p, sizeof(p), "%zu\n", n);
	raw_put(&map, p, strlen(p));
	for (size_t i = 0; i < n; i++)
		raw_put(&map, "0\n0\n", 4);
	raw_sparse10(&r, "f", 0, map.p, map.len, "", 0);
	free(map.p);
	raw_store(&r, hex);
	snprintf(p, sizeof(p), "%s/%s.snap", store, hex);
	if (stat(p, &sb) < 0)
		sb.st_size = -1;
	ok(sb.st_size > 0 && sb.st_size < 16 * 1024,
	    "a map of %zu regions (%zu bytes of tar stream) in an archive of %lld bytes", n,
	    4 * n, (long long)sb.st_size);
	/* the peak of a child restoring a small archive, forked from this
	 * same process (a child's RSS starts with what it shares of ours, and
	 * a sanitizer's shadow memory adds to both) */
	raw_file(&ctl, "g", "hello");
	raw_store(&ctl, chex);
	rc = restore_in_child(chex, 1ull << 30, dest, sizeof(dest), &base);
	is_int(rc, 0, "a small archive restores in a child (its peak is the baseline)");
	/* a 1 GiB layer: the stream bound (2 GiB + 64 MiB) does not stop it */
	rc = restore_in_child(hex, 1ull << 30, dest, sizeof(dest), &peak);
	is_int(rc, -EBADMSG, "refused");
	ok(!exists(dest), "... and nothing left");
	/* libarchive would allocate about 48 bytes a region (250 MB) */
	ok(peak > 0 && base > 0 && peak - base < 64 * 1024,
	    "... before libarchive allocated for the map (peak RSS %ld KiB, %ld over the baseline)",
	    peak, peak - base);
}

/* ---- the forms the archiver never writes ---- */

static void
refused(const char *label, struct raw *r)
{
	char hex[SNAPSHOT_DIGEST_HEX + 1], dest[400];
	const char *why;
	int rc;

	raw_store(r, hex);
	rc = restore(hex, 0, dest, sizeof(dest), &why);
	is_int(rc, -EBADMSG, "%s: refused (%s)", label, why ? why : "-");
	ok(!exists(dest), "%s: nothing left", label);
}

static void
test_other_forms(void)
{
	struct raw r = { 0 };
	unsigned char h[512];

	/* old GNU: 4 regions in the header, 21 in each extension block, as
	 * many blocks as it likes */
	raw_block(h, "f", 'S', 0, true);
	for (int i = 0; i < 4; i++) {
		octal(h + 386 + 24 * i, 12, 0);
		octal(h + 386 + 24 * i + 12, 12, 0);
	}
	h[482] = 1;
	octal(h + 483, 12, 0);
	raw_sum(&r, h);
	for (int b = 0; b < 1000; b++) {
		unsigned char e[512] = { 0 };

		for (int i = 0; i < 21; i++) {
			octal(e + 24 * i, 12, 0);
			octal(e + 24 * i + 12, 12, 0);
		}
		e[504] = b + 1 < 1000;
		raw_put(&r, e, 512);
	}
	refused("old GNU sparse header ('S') with 1000 extension blocks", &r);

	/* the GNU magic on a plain file: libarchive would read an old map
	 * from its sparse fields just the same */
	raw_block(h, "f", '0', 5, true);
	octal(h + 386, 12, 0);
	octal(h + 398, 12, 5);
	raw_sum(&r, h);
	raw_put(&r, "hello", 5);
	raw_pad(&r);
	refused("a file header with the old GNU magic", &r);

	raw_pax(&r, (const char *const[]){ "GNU.sparse.size=4", "GNU.sparse.map=0,2,2,2", NULL });
	raw_file(&r, "f", "abcd");
	refused("pax sparse 0.1 (GNU.sparse.map)", &r);

	raw_pax(&r, (const char *const[]){ "GNU.sparse.size=4", "GNU.sparse.numblocks=2",
	    "GNU.sparse.offset=0", "GNU.sparse.numbytes=2", "GNU.sparse.offset=2",
	    "GNU.sparse.numbytes=2", NULL });
	raw_file(&r, "f", "abcd");
	refused("pax sparse 0.0 (GNU.sparse.offset/numbytes)", &r);

	raw_pax(&r, (const char *const[]){ "SUN.holesdata= 0 2 2 4", NULL });
	raw_file(&r, "f", "abcd");
	refused("Solaris sparse (SUN.holesdata)", &r);

	/* 1.0 itself, but not as the writer makes it */
	raw_pax(&r, (const char *const[]){ "GNU.sparse.major=1", "GNU.sparse.name=f",
	    "GNU.sparse.realsize=2", NULL });
	raw_header(&r, "GNUSparseFile.0/f", '0', 512);
	raw_put(&r, "1\n0\n0\n", 6);
	raw_pad(&r);
	refused("GNU.sparse.major without its minor", &r);

	raw_sparse10(&r, "f", 2, "# comment\n1\n0\n2\n", 16, "ab", 2);
	refused("a map with a comment line", &r);

	/* libarchive takes the count as an int: 2^32 + 1 would be 1 */
	raw_sparse10(&r, "f", 2, "4294967297\n0\n2\n", 15, "ab", 2);
	refused("a count libarchive would cut to 1", &r);

	{
		/* the map runs on past the entry's data */
		struct raw b = { 0 };

		raw_pax(&r, (const char *const[]){ "GNU.sparse.major=1", "GNU.sparse.minor=0",
		    "GNU.sparse.name=f", "GNU.sparse.realsize=2", NULL });
		raw_put(&b, "3\n0\n0\n0\n0\n0\n0\n", 14);
		raw_header(&r, "GNUSparseFile.0/f", '0', 8);
		raw_put(&r, b.p, b.len);
		raw_pad(&r);
		free(b.p);
		refused("a map longer than its entry's data", &r);
	}

	/* data hidden in an entry libarchive gives none: a pax size on a
	 * symlink whose size reads 0 */
	{
		static const unsigned char hidden[1024];

		raw_pax(&r, (const char *const[]){ "size=1024", "GNU.sparse.realsize=0",
		    "linkpath=t", NULL });
		raw_header(&r, "l", '2', 0);
		raw_put(&r, hidden, sizeof(hidden));
		refused("a pax size on a symlink", &r);
	}

	raw_pax(&r, (const char *const[]){ "path=f", NULL });
	raw_pax(&r, (const char *const[]){ "path=g", NULL });
	raw_file(&r, "f", "x");
	refused("a pax header after a pax header", &r);
}

int
main(void)
{
	char cmd[600];

	if (sodium_init() < 0)
		return 1;
	snprintf(top, sizeof(top), "/tmp/test_snapsparse.XXXXXX");
	if (mkdtemp(top) == NULL)
		return 1;
	path_join(store, sizeof(store), top, "store");
	test_raw_control();
	test_writer_bound();
	test_bomb();
	test_other_forms();
	if (snprintf(cmd, sizeof(cmd), "chmod -R u+rwx %s 2>/dev/null; rm -rf %s", top, top) >=
	    (int)sizeof(cmd))
		return 1;
	if (system(cmd) != 0)
		diag("could not clean %s", top);
	return done_testing();
}
