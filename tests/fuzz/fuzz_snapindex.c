/* libFuzzer: the decoder of a layer's index of unchanged files
 * (snapshot_index_decode, src/libspace/snapindex.c) on arbitrary bytes.
 *
 * Oracles, besides ASan/UBSan/LeakSanitizer:
 *   - a refusal is -EBADMSG (or -ENOMEM) and returns no index;
 *   - an accepted index is the bytes read again by the layout alone (a
 *     parser of its own here): its base is the 64 lowercase hex digits of
 *     bytes 8..40, its depth at most SNAPSHOT_DELTA_DEPTH_MAX, its count
 *     the header's and at most what the bytes can hold (a file is at
 *     least 43 bytes), its paths strictly ascending in byte order with
 *     no "." or ".." component, and the files end exactly at the end;
 *   - every file of it is found by snapshot_index_same under its path
 *     with exactly its inode, size, mtime and ctime, and not with
 *     another inode;
 *   - the same bytes but the last are refused (nothing may follow, and
 *     nothing may be missing). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEAD    48
#define FIXED   42      /* u16 length + 40 bytes of numbers */

static uint64_t
be(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

static int
path_cmp(const uint8_t *a, size_t la, const uint8_t *b, size_t lb)
{
	int c = memcmp(a, b, la < lb ? la : lb);

	return c ? c : (la > lb) - (la < lb);
}

static void
check(const struct snapshot_index *x, const uint8_t *data, size_t size)
{
	static const char hexd[] = "0123456789abcdef";
	char want[SNAPSHOT_DIGEST_HEX + 1], path[70000];
	const char *base = snapshot_index_base(x);
	const uint8_t *p, *prev = NULL, *end = data + size;
	size_t count = snapshot_index_count(x), prevlen = 0;

	if (size < HEAD || memcmp(data, "SPXIDX1\n", 8) != 0)
		abort();
	for (int i = 0; i < 32; i++) {
		want[2 * i] = hexd[data[8 + i] >> 4];
		want[2 * i + 1] = hexd[data[8 + i] & 15];
	}
	want[SNAPSHOT_DIGEST_HEX] = '\0';
	if (!snapshot_digest_valid(base) || strcmp(base, want) != 0)
		abort();
	if (snapshot_index_depth(x) > SNAPSHOT_DELTA_DEPTH_MAX ||
	    snapshot_index_depth(x) != be(data + 40, 4))
		abort();
	if (count != be(data + 44, 4) || count > (size - HEAD) / (FIXED + 1))
		abort();
	p = data + HEAD;
	for (size_t i = 0; i < count; i++) {
		size_t l, s;
		struct stat st;

		if (end - p < FIXED)
			abort();
		l = (size_t)be(p, 2);
		if (l == 0 || (size_t)(end - p) < FIXED + l || memchr(p + 2, '\0', l) != NULL)
			abort();
		/* strictly ascending: one answer per path */
		if (prev != NULL && path_cmp(prev, prevlen, p + 2, l) >= 0)
			abort();
		prev = p + 2;
		prevlen = l;
		memcpy(path, p + 2, l);
		path[l] = '\0';
		if (path[0] == '/')
			abort();
		for (s = 0; s <= l;) {
			size_t e = s;

			while (e < l && path[e] != '/')
				e++;
			if (e == s || (e - s == 1 && path[s] == '.') ||
			    (e - s == 2 && path[s] == '.' && path[s + 1] == '.'))
				abort();
			s = e + 1;
		}
		p += 2 + l;
		memset(&st, 0, sizeof(st));
		st.st_mode = S_IFREG | 0644;
		st.st_ino = (ino_t)be(p, 8);
		st.st_size = (off_t)be(p + 8, 8);
		st.st_mtim.tv_sec = (time_t)be(p + 16, 8);
		st.st_mtim.tv_nsec = (long)be(p + 24, 4);
		st.st_ctim.tv_sec = (time_t)be(p + 28, 8);
		st.st_ctim.tv_nsec = (long)be(p + 36, 4);
		if (st.st_mtim.tv_nsec >= 1000000000L || st.st_ctim.tv_nsec >= 1000000000L ||
		    st.st_size < 0)
			abort();
		if (!snapshot_index_same(x, path, &st))
			abort();
		st.st_ino++;
		if (snapshot_index_same(x, path, &st))
			abort();
		p += FIXED - 2;
	}
	if (p != end)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct snapshot_index *x = (struct snapshot_index *)1;
	unsigned char *copy;
	int r;

	/* a buffer of exactly size bytes: any read past it is seen */
	if ((copy = malloc(size ? size : 1)) == NULL)
		return 0;
	if (size)
		memcpy(copy, data, size);
	r = snapshot_index_decode(copy, size, &x);
	if (r != 0) {
		if ((r != -EBADMSG && r != -ENOMEM) || x != NULL)
			abort();
		free(copy);
		return 0;
	}
	if (x == NULL)
		abort();
	check(x, copy, size);
	snapshot_index_free(x);
	/* one byte less: refused */
	x = (struct snapshot_index *)1;
	if (snapshot_index_decode(copy, size - 1, &x) == 0 || x != NULL)
		abort();
	free(copy);
	return 0;
}
