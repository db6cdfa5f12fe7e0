/* util.c: strict encodings, RFC 3339, ids and files. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sodium.h>

#include "limits.h"
#include "util.h"
#include "tap.h"

static void
test_b64url(void)
{
	static const struct { const char *bin; const char *txt; } rfc[] = {
		{ "", "" }, { "f", "Zg" }, { "fo", "Zm8" }, { "foo", "Zm9v" },
		{ "foob", "Zm9vYg" }, { "fooba", "Zm9vYmE" }, { "foobar", "Zm9vYmFy" },
	};
	static const char *bad[] = {
		"Zg==",         /* padding */
		"Zm8=",         /* padding */
		"Z",            /* dangling character: 6 bits */
		"Zh",           /* non-canonical: low bits of last character set */
		"Zm9",          /* Zm9 decodes "fo" with bits left in '9' */
		"Zm+v",         /* standard alphabet '+' */
		"Zm/v",         /* standard alphabet '/' */
		"Zm9v Yg",      /* whitespace */
		"Zm9v\nYg",
		"Zm9vYg.",
		"Zm\x80v",
	};
	char out[64];
	unsigned char bin[64], buf[256], rt[256];
	size_t i, j;
	ssize_t n;

	for (i = 0; i < sizeof(rfc) / sizeof(rfc[0]); i++) {
		n = b64url_encode(rfc[i].bin, strlen(rfc[i].bin), out, sizeof(out));
		is_int(n, (long long)strlen(rfc[i].txt), "b64url_encode length of '%s'", rfc[i].bin);
		is_str(out, rfc[i].txt, "b64url_encode '%s'", rfc[i].bin);
		n = b64url_decode(rfc[i].txt, strlen(rfc[i].txt), bin, sizeof(bin));
		ok(n == (ssize_t)strlen(rfc[i].bin) && memcmp(bin, rfc[i].bin, (size_t)n) == 0,
		    "b64url_decode '%s'", rfc[i].txt);
		is_int(b64url_encoded_len(strlen(rfc[i].bin)), strlen(rfc[i].txt), "encoded_len %zu", i);
		ok(b64url_decoded_max(strlen(rfc[i].txt)) >= strlen(rfc[i].bin), "decoded_max %zu", i);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		is_int(b64url_decode(bad[i], strlen(bad[i]), bin, sizeof(bin)), -EINVAL,
		    "b64url_decode refuses bad input #%zu", i);
	/* every byte outside the alphabet, in any position, is refused */
	{
		int wrong = 0, c;

		for (c = 0; c < 256; c++) {
			char t[5] = "AAAA";

			if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
			    (c >= '0' && c <= '9') || c == '-' || c == '_')
				continue;
			t[c % 4] = (char)c;
			if (b64url_decode(t, 4, bin, sizeof(bin)) != -EINVAL)
				wrong++;
			t[c % 4] = 'A';
			t[1] = (char)c;
			if (hex_decode(t, 2, bin, sizeof(bin)) != -EINVAL &&
			    !((c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
				wrong++;
		}
		is_int(wrong, 0, "no byte outside the alphabet decodes (incl. >= 0x80)");
	}
	/* the URL-safe alphabet is accepted */
	n = b64url_decode("-_-_", 4, bin, sizeof(bin));
	ok(n == 3 && bin[0] == 0xfb && bin[1] == 0xff && bin[2] == 0xbf, "'-' and '_' decode");
	is_int(b64url_encode("foobar", 6, out, 8), -ENOSPC, "encode: no room for NUL");
	is_int(b64url_decode("Zm9vYmFy", 8, bin, 5), -ENOSPC, "decode: output too small");
	/* round trips over random lengths: one encoding per value */
	for (i = 0; i < 200; i++) {
		size_t len = i % 190;

		randombytes_buf(buf, len);
		{
			char txt[300];
			ssize_t e = b64url_encode(buf, len, txt, sizeof(txt));
			ssize_t d = b64url_decode(txt, (size_t)e, rt, sizeof(rt));

			if (!(d == (ssize_t)len && memcmp(buf, rt, len) == 0)) {
				ok(0, "round trip of %zu bytes", len);
				return;
			}
		}
	}
	ok(1, "200 random round trips");
	/* every last character with unused bits set is refused */
	{
		const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		int accepted2 = 0, accepted3 = 0;
		char t[4];

		for (j = 0; j < 64; j++) {
			t[0] = 'A'; t[1] = alpha[j];
			if (b64url_decode(t, 2, bin, sizeof(bin)) == 1)
				accepted2++;
			t[0] = 'A'; t[1] = 'A'; t[2] = alpha[j];
			if (b64url_decode(t, 3, bin, sizeof(bin)) == 2)
				accepted3++;
		}
		is_int(accepted2, 4, "2-char tail: only 4 of 64 last characters canonical");
		is_int(accepted3, 16, "3-char tail: only 16 of 64 last characters canonical");
	}
	/* every byte value in every position of a full quad and of both tails,
	 * and in the last quad of a longer text */
	{
		static const char *base[] = { "QUJD", "QUJDRA", "QUJDREU", "QUJDREVGR0hJ" };
		int wrong = 0, c;
		size_t b, pos;

		for (b = 0; b < sizeof(base) / sizeof(base[0]); b++)
			for (pos = 0; pos < strlen(base[b]); pos++)
				for (c = 0; c < 256; c++) {
					char t[16];
					bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
					    (c >= '0' && c <= '9') || c == '-' || c == '_';

					memcpy(t, base[b], strlen(base[b]));
					t[pos] = (char)c;
					n = b64url_decode(t, strlen(base[b]), bin, sizeof(bin));
					if (!alpha && n != -EINVAL)
						wrong++;
					/* the last character of a tail is canonical or not
					 * by its low bits, counted above */
					if (alpha && n < 0 && (pos + 1 < strlen(base[b]) ||
					    strlen(base[b]) % 4 == 0))
						wrong++;
				}
		is_int(wrong, 0, "each byte in each position: only the alphabet decodes");
	}
	/* a malformed text is -EINVAL even when the output is also too small */
	is_int(b64url_decode("Zm9v=mFy", 8, bin, 5), -EINVAL, "bad text with no room: -EINVAL");
	is_int(b64url_decode("Zm9vYmE", 7, bin, 4), -ENOSPC, "good text with no room: -ENOSPC");
	is_int(b64url_decode("Zm9vYmE", 7, bin, 5), 5, "exact room is enough");
	is_int(b64url_decode("", 0, NULL, 0), 0, "empty text decodes to nothing");
	/* differential: the same answer as libsodium's own strict decoder (behind
	 * the alphabet check it lacks for bytes >= 0x80) on random texts made of
	 * the alphabet and a few bytes it must refuse */
	{
		static const char pool[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
		    "0123456789-_ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
		    "=+/ .\x80\xff";
		int mism = 0, agreed_ok = 0;

		for (i = 0; i < 20000; i++) {
			char t[40];
			unsigned char mine[40], ref[40];
			size_t len = randombytes_uniform(sizeof(t)), rn = 0, k;
			bool clean = true;
			int rr;

			for (k = 0; k < len; k++) {
				/* mostly clean texts, so that the success path and the
				 * trailing-bit check are exercised as much as the refusals */
				t[k] = i % 4 ? pool[randombytes_uniform(128)] :
				    pool[randombytes_uniform(sizeof(pool) - 1)];
				if (!((t[k] >= 'A' && t[k] <= 'Z') || (t[k] >= 'a' && t[k] <= 'z') ||
				    (t[k] >= '0' && t[k] <= '9') || t[k] == '-' || t[k] == '_'))
					clean = false;
			}
			n = b64url_decode(t, len, mine, sizeof(mine));
			rr = !clean || len % 4 == 1 ? -1 : len == 0 ? 0 :
			    sodium_base642bin(ref, sizeof(ref), t, len, NULL, &rn, NULL,
			    sodium_base64_VARIANT_URLSAFE_NO_PADDING);
			if (rr != 0 ? n != -EINVAL :
			    !(n == (ssize_t)rn && memcmp(mine, ref, rn) == 0))
				mism++;
			if (rr == 0 && n >= 0)
				agreed_ok++;
		}
		is_int(mism, 0, "20000 random texts: same verdict and bytes as libsodium");
		ok(agreed_ok > 1000, "differential test exercised the success path (%d)", agreed_ok);
	}
}

static void
test_hex(void)
{
	unsigned char b[4];
	char out[16];

	is_int(hex_encode("\x01\xab\xff", 3, out, sizeof(out)), 6, "hex_encode length");
	is_str(out, "01abff", "hex_encode lowercase");
	ok(hex_decode("01ABff", 6, b, sizeof(b)) == 3 && b[1] == 0xab, "hex_decode either case");
	is_int(hex_decode("01a", 3, b, sizeof(b)), -EINVAL, "hex_decode odd length");
	is_int(hex_decode("0g", 2, b, sizeof(b)), -EINVAL, "hex_decode non-hex digit");
	is_int(hex_decode("01 2", 4, b, sizeof(b)), -EINVAL, "hex_decode space");
	is_int(hex_decode("0102030405", 10, b, sizeof(b)), -ENOSPC, "hex_decode too long for output");
	is_int(hex_encode("abc", 3, out, 6), -ENOSPC, "hex_encode no room for NUL");
}

static void
test_rfc3339(void)
{
	static const struct { const char *s; int64_t t; } good[] = {
		{ "1970-01-01T00:00:00Z", 0 },
		{ "2022-01-01T00:00:00+00:00", 1640995200 },
		{ "2022-01-01T01:00:00+01:00", 1640995200 },
		{ "2021-12-31T23:30:00-00:30", 1640995200 },
		{ "2022-01-01T00:00:00.999999Z", 1640995200 },
		{ "2000-02-29T12:00:00Z", 951825600 },
		{ "2024-02-29T00:00:00Z", 1709164800 },
		{ "1969-12-31T23:59:59Z", -1 },
		{ "9999-12-31T23:59:59Z", 253402300799LL },
		{ "2038-01-19T03:14:08Z", 2147483648LL },
		{ "0000-01-01T00:00:00Z", -62167219200LL },
		{ "0000-01-01T00:00:00-00:01", -62167219140LL },
	};
	static const char *bad[] = {
		"", "2022-01-01", "2022-01-01T00:00:00", "2022-01-01 00:00:00Z",
		"2022-01-01t00:00:00z", "2022-13-01T00:00:00Z", "2022-00-01T00:00:00Z",
		"2022-01-00T00:00:00Z", "2022-01-32T00:00:00Z", "2022-02-29T00:00:00Z",
		"1900-02-29T00:00:00Z", "2022-04-31T00:00:00Z", "2022-01-01T24:00:00Z",
		"2022-01-01T00:60:00Z", "2022-01-01T00:00:60Z", "2022-01-01T00:00:00.Z",
		"2022-01-01T00:00:00+24:00", "2022-01-01T00:00:00+00:60", "2022-01-01T00:00:00+0000",
		"2022-01-01T00:00:00Z ", " 2022-01-01T00:00:00Z", "2022-1-01T00:00:00Z",
		"+2022-01-01T00:00:00Z", "2022-01-01T00:00:00ZZ", "2022-01-01T00:00:00+00:00Z",
		"20a2-01-01T00:00:00Z", "2022-01-01T00:00:0aZ", "2022-01-01T00:00:00.1a2Z",
		"0000-01-01T00:00:00+00:01",    /* before year 0 once the offset applies */
		"9999-12-31T23:59:59-00:01",    /* after year 9999 */
	};
	size_t i;
	int64_t t;
	char out[RFC3339_LEN + 1];

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		t = 12345;
		ok(rfc3339_parse(good[i].s, strlen(good[i].s), &t) == 0 && t == good[i].t,
		    "rfc3339_parse '%s'", good[i].s);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		is_int(rfc3339_parse(bad[i], strlen(bad[i]), &t), -EINVAL, "rfc3339_parse refuses '%s'", bad[i]);
	/* the length bounds the parse: no reading past len */
	is_int(rfc3339_parse("2022-01-01T00:00:00Zjunk", 20, &t), 0, "parse honours len");
	is_int(rfc3339_parse("2022-01-01T00:00:00Z", 19, &t), -EINVAL, "parse within len only");

	ok(rfc3339_format(1640995200, out) == 0, "format ok");
	is_str(out, "2022-01-01T00:00:00Z", "format 2022");
	rfc3339_format(951825600, out);
	is_str(out, "2000-02-29T12:00:00Z", "format leap day");
	rfc3339_format(-1, out);
	is_str(out, "1969-12-31T23:59:59Z", "format before epoch");
	is_int(rfc3339_format(253402300800LL, out), -ERANGE, "format year 10000 refused");
	/* format then parse is the identity over a wide range */
	for (i = 0; i < 5000; i++) {
		int64_t v = (int64_t)(randombytes_uniform(2000000000u)) * 4 - 2000000000LL, back = 0;

		if (rfc3339_format(v, out) != 0 || rfc3339_parse(out, strlen(out), &back) != 0 || back != v) {
			ok(0, "format/parse round trip of %lld ('%s')", (long long)v, out);
			return;
		}
	}
	ok(1, "5000 format/parse round trips");
}

static void
test_ids(void)
{
	char id[SPACE_ID_MAX + 1], other[SPACE_ID_MAX + 1], long_id[SPACE_ID_MAX + 2];
	size_t i;

	ok(id_valid("sbx_abc-DEF_09"), "id_valid plain");
	ok(!id_valid(""), "empty id refused");
	ok(!id_valid(NULL), "NULL id refused");
	ok(!id_valid("a/b"), "slash refused");
	ok(!id_valid("a.b"), "dot refused");
	ok(!id_valid("a b"), "space refused");
	ok(!id_valid("caf\xc3\xa9"), "non-ASCII refused");
	memset(long_id, 'a', SPACE_ID_MAX);
	long_id[SPACE_ID_MAX] = '\0';
	ok(id_valid(long_id), "id of SPACE_ID_MAX chars accepted");
	long_id[SPACE_ID_MAX] = 'a';
	long_id[SPACE_ID_MAX + 1] = '\0';
	ok(!id_valid(long_id), "id of SPACE_ID_MAX+1 chars refused");

	is_int(id_random("sbx_", id, sizeof(id)), 0, "id_random");
	is_int(strlen(id), 30, "prefix + 26 characters");
	ok(strncmp(id, "sbx_", 4) == 0 && id_valid(id), "id_random is a valid id with the prefix");
	for (i = 4; i < strlen(id); i++)
		if (!strchr("abcdefghijklmnopqrstuvwxyz234567", id[i]))
			break;
	is_int(i, 30, "base32 lowercase alphabet");
	id_random("sbx_", other, sizeof(other));
	ok(strcmp(id, other) != 0, "two random ids differ");
	is_int(id_random("sbx_", id, 30), -ENOSPC, "id_random: no room");
	is_int(id_random("bad/", id, sizeof(id)), -EINVAL, "id_random: bad prefix");
}

static void
test_files(void)
{
	char dir[] = "/tmp/test_util.XXXXXX", path[256], sub[256], *data = NULL;
	size_t len = 0;
	struct stat st;

	ok(mkdtemp(dir) != NULL, "mkdtemp");
	snprintf(sub, sizeof(sub), "%s/a/b/c", dir);
	is_int(mkdir_p(sub, 0700), 0, "mkdir_p nested");
	ok(stat(sub, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "mkdir_p mode");
	is_int(mkdir_p(sub, 0700), 0, "mkdir_p existing");

	snprintf(path, sizeof(path), "%s/a/key", dir);
	is_int(write_file_atomic(path, "secret\0x", 8, 0600), 0, "write_file_atomic");
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "written with mode 0600");
	is_int(read_file(path, 100, &data, &len), 0, "read_file");
	ok(len == 8 && memcmp(data, "secret\0x", 9) == 0, "content and NUL terminator");
	free(data);
	data = NULL;
	is_int(read_file(path, 8, &data, &len), 0, "read_file at exactly max");
	free(data);
	data = NULL;
	is_int(read_file(path, 7, &data, &len), -EFBIG, "read_file over max: -EFBIG");
	ok(data == NULL, "nothing returned on -EFBIG");
	is_int(write_file_atomic(path, "new", 3, 0644), 0, "overwrite atomically");
	read_file(path, 100, &data, &len);
	ok(data && len == 3 && strcmp(data, "new") == 0, "new content");
	free(data);
	data = NULL;
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0644, "new mode");
	is_int(write_file_atomic(path, "", 0, 0600), 0, "empty file");
	ok(read_file(path, 0, &data, &len) == 0 && len == 0 && data && data[0] == '\0', "read empty file");
	free(data);
	data = NULL;
	is_int(mkdir_p(path, 0700), -ENOTDIR, "mkdir_p over a file: -ENOTDIR");
	is_int(read_file("/nonexistent/x", 10, &data, &len), -ENOENT, "read_file missing");
	snprintf(sub, sizeof(sub), "%s/none/key", dir);
	ok(write_file_atomic(sub, "x", 1, 0600) < 0, "write into missing dir fails");
	{
		char cmd[300];

		snprintf(cmd, sizeof(cmd), "ls -a %s/a | grep -c tmp >/dev/null", dir);
		ok(system(cmd) != 0, "no temporary file left behind");
		snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
		if (system(cmd) != 0)
			diag("cleanup failed");
	}
}

/* a pipe takes at most its capacity per write(): larger buffers come back
 * short, and every byte must still arrive in order */
static void
test_write_all(void)
{
	enum { N = 1 << 20 };
	unsigned char *in = malloc(N), *out = malloc(N);
	size_t got = 0;
	int p[2], fd, rc = -1;
	pid_t pid;

	if (in == NULL || out == NULL || pipe(p) != 0) {
		ok(0, "fd_write_all setup");
		goto out;
	}
	randombytes_buf(in, N);
	if ((pid = fork()) == 0) {
		close(p[0]);
		_exit(fd_write_all(p[1], in, N) == 0 ? 0 : 1);
	}
	close(p[1]);
	while (got < N) {
		ssize_t n = read(p[0], out + got, N - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	if (pid > 0 && waitpid(pid, &rc, 0) == pid)
		rc = WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
	is_int(rc, 0, "fd_write_all through a pipe: success");
	ok(got == N && memcmp(in, out, N) == 0, "fd_write_all: 1 MiB arrives whole, in order");
	fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		is_int(fd_write_all(fd, in, 10), -ENOSPC, "fd_write_all on a full device: -ENOSPC");
		close(fd);
	} else
		diag("no /dev/full: the error path is not checked here");
	is_int(fd_write_all(-1, in, 1), -EBADF, "fd_write_all on a bad fd: -EBADF");
	is_int(fd_write_all(-1, in, 0), 0, "fd_write_all of nothing writes nothing");
out:
	free(in);
	free(out);
}

static void
test_misc(void)
{
	int64_t a = now_unix();
	uint64_t m1 = now_mono_ns(), m2;

	ok(a > 1600000000, "now_unix plausible");
	m2 = now_mono_ns();
	ok(m2 >= m1, "monotonic");
	ok(ct_equal("abc", "abc", 3), "ct_equal equal");
	ok(!ct_equal("abc", "abd", 3), "ct_equal differ");
}

/* what a hop accepts as a passed file descriptor, from the side of a
 * peer that passes anything it can open */
static void
test_passable(void)
{
	char dir[] = "/tmp/test_util.XXXXXX", p[64];
	const char *why = NULL;
	uint64_t size = 0;
	int fd, pp[2], r;

	if (mkdtemp(dir) == NULL)
		abort();
	snprintf(p, sizeof(p), "%s/f", dir);
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, "hello, world", 12) != 12)
		abort();
	r = fd_file_passable(fd, &size, &why);
	is_int(r, -EACCES, "a file open for writing is refused (%s)", why);
	close(fd);
	fd = open(p, O_RDWR | O_CLOEXEC);
	is_int(fd_file_passable(fd, &size, &why), -EACCES, "... and one open for both (%s)", why);
	close(fd);
	fd = open(p, O_PATH | O_CLOEXEC);
	ok(fd_file_passable(fd, &size, &why) < 0, "an O_PATH descriptor is refused (%s)", why);
	close(fd);
	fd = open(p, O_RDONLY | O_CLOEXEC);
	r = fd_file_passable(fd, &size, &why);
	ok(r == 0 && size == 12, "a regular file open for reading passes, with its size (%d, %llu)",
	    r, (unsigned long long)size);
	close(fd);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	is_int(fd_file_passable(fd, &size, &why), -EINVAL, "a directory is refused (%s)", why);
	close(fd);
	if (pipe2(pp, O_CLOEXEC) != 0)
		abort();
	is_int(fd_file_passable(pp[0], &size, &why), -EINVAL, "a pipe is refused (%s)", why);
	close(pp[0]);
	close(pp[1]);
	fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
	is_int(fd_file_passable(fd, &size, &why), -EINVAL, "a device is refused (%s)", why);
	close(fd);
	fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	r = fd_file_passable(fd, &size, &why);
	ok(r == -EINVAL && strcmp(why, "not on a file system of files") == 0,
	    "a procfs file (regular, readable) is refused (%s)", why);
	close(fd);
	fd = open("/sys/kernel/mm/transparent_hugepage/enabled", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		fd = open("/sys/power/state", O_RDONLY | O_CLOEXEC);
	r = fd < 0 ? -EINVAL : fd_file_passable(fd, &size, &why);
	ok(fd >= 0 && r == -EINVAL, "a sysfs file is refused (%s)", why);
	close(fd);
	is_int(fd_file_passable(-1, &size, &why), -EBADF, "no descriptor at all is refused");
	unlink(p);
	rmdir(dir);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	test_b64url();
	test_hex();
	test_rfc3339();
	test_ids();
	test_files();
	test_write_all();
	test_misc();
	test_passable();
	return done_testing();
}
