/* libFuzzer: the snapshot reader (snapshot_restore) on arbitrary archive
 * bodies. The first input byte chooses what the rest is: even, a tar
 * stream that the harness compresses with zstd (so the mutations reach
 * libarchive's tar and pax parsing and our entry checks), behind the
 * marker naming SHA-256 when its bit 1 is set (the format before it
 * otherwise); odd, the compressed body itself (framing, our stream
 * bounds). The harness appends the trailer (the digest of the body) and
 * stores the file under that digest, as snapshot_create would, so every
 * input gets past the digest check and into the parser and the extractor.
 *
 * Oracles, besides ASan/UBSan/LeakSanitizer:
 *   - nothing is created outside the destination directory: the work
 *     directory holds only the store, the destination and a decoy
 *     directory, which must stay empty (an archive that reaches "../decoy"
 *     through a symlink or a dot-dot path would write there);
 *   - a refused archive leaves no destination behind (the restore removes
 *     what it created);
 *   - the store is not written to.
 *
 * The work directory lives on /dev/shm when there is one (the restore ends
 * with syncfs(), which costs nothing on tmpfs). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sodium.h>
#include <zstd.h>

#include "snapshot.h"
#include "util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char work[PATH_MAX], store[PATH_MAX], dest[PATH_MAX], decoy[PATH_MAX];

/* Removes everything beneath dfd (not dfd itself), never following a
 * symlink. Directories are made searchable first: an archive may restore
 * one with mode 0. Returns -1 on any failure. */
static int
empty_dir(int dfd, int depth)
{
	struct dirent *de;
	DIR *d;
	int fd, r = 0;

	if (depth > 512)
		return -1;
	if ((fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -1;
	if ((d = fdopendir(fd)) == NULL) {
		close(fd);
		return -1;
	}
	while ((de = readdir(d)) != NULL) {
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			r = -1;
			continue;
		}
		if (S_ISDIR(st.st_mode)) {
			int cfd;

			fchmodat(dfd, de->d_name, 0700, 0);
			cfd = openat(dfd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (cfd < 0 || empty_dir(cfd, depth + 1) < 0)
				r = -1;
			if (cfd >= 0)
				close(cfd);
			if (unlinkat(dfd, de->d_name, AT_REMOVEDIR) < 0)
				r = -1;
		} else if (unlinkat(dfd, de->d_name, 0) < 0)
			r = -1;
	}
	closedir(d);
	return r;
}

static int
remove_path(const char *path)
{
	int fd, r;

	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;
	r = empty_dir(fd, 0);
	close(fd);
	if (rmdir(path) < 0)
		r = -1;
	return r;
}

/* the names in dir, as a bit set over the expected ones; -1 for any other */
static int
list_names(const char *dir, const char *const *names, size_t n)
{
	struct dirent *de;
	DIR *d;
	int seen = 0;
	size_t i;

	if ((d = opendir(dir)) == NULL)
		return -1;
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		for (i = 0; i < n; i++)
			if (strcmp(de->d_name, names[i]) == 0)
				break;
		if (i == n) {
			seen = -1;
			break;
		}
		seen |= 1 << i;
	}
	closedir(d);
	return seen;
}

static void
cleanup(void)
{
	if (work[0] != '\0')
		remove_path(work);
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

	(void)argc;
	(void)argv;
	if (sodium_init() < 0)
		abort();
	snprintf(work, sizeof(work), "%s/fuzz_snapshot.XXXXXX", base);
	if (mkdtemp(work) == NULL)
		abort();
	snprintf(store, sizeof(store), "%s/store", work);
	snprintf(dest, sizeof(dest), "%s/dest", work);
	snprintf(decoy, sizeof(decoy), "%s/decoy", work);
	if (mkdir(store, 0700) < 0 || mkdir(decoy, 0700) < 0)
		abort();
	atexit(cleanup);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const top[] = { "store", "dest", "decoy" };
	static unsigned char zbuf[1 << 20];
	static const unsigned char mark[12] = { 0x5c, 0x2a, 0x4d, 0x18, 4, 0, 0, 0, 1, 0, 0, 0 };
	unsigned char digest[SNAPSHOT_DIGEST_LEN], trailer[8] = { 0x5e, 0x2a, 0x4d, 0x18, 32, 0, 0, 0 };
	char hex[SNAPSHOT_DIGEST_HEX + 1], file[PATH_MAX];
	struct snapshot_stats st;
	const char *why = NULL;
	int fd, r, names;

	if (size == 0)
		return 0;
	if ((data[0] & 1) == 0) {
		size_t z, m = data[0] & 2 ? sizeof(mark) : 0;

		if (m + ZSTD_compressBound(size - 1) > sizeof(zbuf))
			return 0;
		memcpy(zbuf, mark, m);
		z = ZSTD_compress(zbuf + m, sizeof(zbuf) - m, data + 1, size - 1, 1);
		if (ZSTD_isError(z))
			abort();
		data = zbuf;
		size = m + z;
	} else {
		data++;
		size--;
	}
	/* the file snapshot_create would have written for this body: named
	 * by SHA-256 behind the marker, else by BLAKE2b-256 (the format
	 * before it) */
	if (size >= sizeof(mark) && memcmp(data, mark, sizeof(mark)) == 0)
		crypto_hash_sha256(digest, data, size);
	else
		crypto_generichash(digest, sizeof(digest), data, size, NULL, 0);
	if (hex_encode(digest, sizeof(digest), hex, sizeof(hex)) != SNAPSHOT_DIGEST_HEX)
		abort();
	snprintf(file, sizeof(file), "%s/%s.snap", store, hex);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0444);
	if (fd < 0)
		abort();
	if ((size && write(fd, data, size) != (ssize_t)size) ||
	    write(fd, trailer, sizeof(trailer)) != (ssize_t)sizeof(trailer) ||
	    write(fd, digest, sizeof(digest)) != (ssize_t)sizeof(digest))
		abort();
	close(fd);

	/* a 1 MiB layer: the tar stream is bounded at 66 MiB */
	r = snapshot_restore(store, hex, dest, 1u << 20, &st, &why);
	if (r < 0 && why == NULL && r == -EBADMSG)
		abort();        /* every refused archive carries a reason */
	if (r == 0 && access(dest, F_OK) != 0)
		abort();

	/* nothing outside dest: the work dir holds what we put there (dest
	 * only after a success), the decoy is untouched, the store holds
	 * just our file */
	names = list_names(work, top, 3);
	if (names < 0 || !(names & 1) || !(names & 4) || (r < 0 && (names & 2)))
		abort();
	if (list_names(decoy, NULL, 0) != 0)
		abort();
	{
		char base[SNAPSHOT_DIGEST_HEX + 6];
		const char *one[] = { base };

		snprintf(base, sizeof(base), "%s.snap", hex);
		if (list_names(store, one, 1) != 1)
			abort();
	}

	if (unlink(file) < 0 || remove_path(dest) < 0)
		abort();
	return 0;
}
