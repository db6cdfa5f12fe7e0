/* Encoding, time, comparison and file helpers shared by every program.
 * Encoders and the hex decoder are libsodium's; the base64url decoder is a
 * table (tokens are public and decoded on every cold admission). This file
 * adds the strictness and the error convention of docs/errors.md on top. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/statfs.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "limits.h"
#include "util.h"

/* ---- base64url (RFC 4648 section 5), no padding ---- */

size_t
b64url_encoded_len(size_t n)
{
	return n / 3 * 4 + (n % 3 == 0 ? 0 : n % 3 + 1);
}

size_t
b64url_decoded_max(size_t n)
{
	/* a remainder of 1 character can never be valid: it carries 6 bits */
	return n / 4 * 3 + (n % 4 == 0 ? 0 : n % 4 - 1);
}

ssize_t
b64url_encode(const void *in, size_t len, char *out, size_t outcap)
{
	size_t n;

	if (len > (SIZE_MAX - 4) / 4 * 3)
		return -E2BIG;
	n = b64url_encoded_len(len);
	if (out == NULL || outcap < n + 1)
		return -ENOSPC;
	sodium_bin2base64(out, outcap, in, len, sodium_base64_VARIANT_URLSAFE_NO_PADDING);
	return (ssize_t)n;
}

/*
 * One plus the value of each byte of the base64url alphabet; 0 for every
 * other byte (padding, whitespace, the standard alphabet's '+' and '/', NUL,
 * every byte >= 0x80). Subtracting one maps those to 0xff, B64_BAD. The
 * decoder's alphabet is this table and nothing else.
 */
#define B64_BAD 0xff
static const uint8_t b64url_val1[256] = {
	['A'] = 1, ['B'] = 2, ['C'] = 3, ['D'] = 4, ['E'] = 5, ['F'] = 6, ['G'] = 7,
	['H'] = 8, ['I'] = 9, ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13,
	['N'] = 14, ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19,
	['T'] = 20, ['U'] = 21, ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25,
	['Z'] = 26, ['a'] = 27, ['b'] = 28, ['c'] = 29, ['d'] = 30, ['e'] = 31,
	['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35, ['j'] = 36, ['k'] = 37,
	['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42, ['q'] = 43,
	['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
	['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55,
	['3'] = 56, ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61,
	['9'] = 62, ['-'] = 63, ['_'] = 64,
};

static inline uint8_t
b64v(unsigned char c)
{
	return (uint8_t)(b64url_val1[c] - 1);
}

/*
 * Table-driven and NOT constant time: its running time depends on the
 * input text. Every caller decodes public data (tokens, PASERK public keys,
 * nonces and MACs as received from the peer, who already knows them);
 * secrets are never base64url-encoded here, they travel as hex and go
 * through hex_decode(), which stays libsodium's constant-time decoder.
 *
 * Strictness is that of RFC 4648 section 5 without padding, with one
 * accepted spelling per value, because tokens are compared and cached by
 * their text: only the 64 alphabet characters (no '=', no whitespace, no
 * byte >= 0x80), no dangling single character, and the unused low bits of
 * the last character must be zero.
 */
ssize_t
b64url_decode(const char *in, size_t len, void *out, size_t outcap)
{
	const unsigned char *s = (const unsigned char *)in;
	uint8_t *o = out;
	size_t full = len / 4, rem = len % 4, i;
	uint8_t a, b, c, d;

	if (rem == 1)
		return -EINVAL;
	if (b64url_decoded_max(len) > outcap) {
		/* a malformed text is reported as such whatever the room */
		for (i = 0; i < len; i++)
			if (b64v(s[i]) == B64_BAD)
				return -EINVAL;
		return -ENOSPC;
	}
	for (i = 0; i < full; i++, s += 4) {
		a = b64v(s[0]);
		b = b64v(s[1]);
		c = b64v(s[2]);
		d = b64v(s[3]);
		/* values are < 64, so bit 7 of the OR is set only by B64_BAD */
		if ((a | b | c | d) & 0x80)
			return -EINVAL;
		*o++ = (uint8_t)(a << 2 | b >> 4);
		*o++ = (uint8_t)(b << 4 | c >> 2);
		*o++ = (uint8_t)(c << 6 | d);
	}
	if (rem >= 2) {
		a = b64v(s[0]);
		b = b64v(s[1]);
		c = rem == 3 ? b64v(s[2]) : 0;
		if ((a | b | c) & 0x80)
			return -EINVAL;
		/* bits past the last whole byte must be zero: "Zh" and "Zg"
		 * would otherwise both decode to "f" */
		if (rem == 2 ? (b & 0x0f) != 0 : (c & 0x03) != 0)
			return -EINVAL;
		*o++ = (uint8_t)(a << 2 | b >> 4);
		if (rem == 3)
			*o++ = (uint8_t)(b << 4 | c >> 2);
	}
	return (ssize_t)(o - (uint8_t *)out);
}

/* ---- hex ---- */

ssize_t
hex_encode(const void *in, size_t len, char *out, size_t outcap)
{
	if (len > (SIZE_MAX - 1) / 2)
		return -E2BIG;
	if (out == NULL || outcap < len * 2 + 1)
		return -ENOSPC;
	sodium_bin2hex(out, outcap, in, len);
	return (ssize_t)(len * 2);
}

ssize_t
hex_decode(const char *in, size_t len, void *out, size_t outcap)
{
	size_t n = 0;

	if (len % 2 != 0)
		return -EINVAL;
	if (len / 2 > outcap)
		return -ENOSPC;
	if (len == 0)
		return 0;
	if (sodium_hex2bin(out, outcap, in, len, NULL, &n, NULL) != 0 || n != len / 2)
		return -EINVAL;
	return (ssize_t)n;
}

/* ---- RFC 3339 ---- */

#define RFC3339_MIN (-62167219200LL)    /* 0000-01-01T00:00:00Z */
#define RFC3339_MAX 253402300799LL      /* 9999-12-31T23:59:59Z */

/* days since 1970-01-01 of a proleptic Gregorian date (y >= 0) */
static int64_t
days_from_civil(int64_t y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

static void
civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d)
{
	int64_t era;
	unsigned doe, yoe, doy, mp;

	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	*y = (int64_t)yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = doy - (153 * mp + 2) / 5 + 1;
	*m = mp < 10 ? mp + 3 : mp - 9;
	*y += *m <= 2;
}

static bool
is_leap(int64_t y)
{
	return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static unsigned
days_in_month(int64_t y, unsigned m)
{
	static const unsigned char dim[12] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };

	return m == 2 && is_leap(y) ? 29 : dim[m - 1];
}

/* exactly n decimal digits at s */
static int
digits(const char *s, size_t n, unsigned *v)
{
	size_t i;

	*v = 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		*v = *v * 10 + (unsigned)(s[i] - '0');
	}
	return 0;
}

int
rfc3339_parse(const char *s, size_t len, int64_t *unix_out)
{
	unsigned y, mo, d, h, mi, sec, oh = 0, om = 0;
	size_t p;
	int64_t t, off = 0;

	/* "YYYY-MM-DDTHH:MM:SS" then [.frac] then Z | +hh:mm | -hh:mm */
	if (len < 20)
		return -EINVAL;
	if (digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) || s[7] != '-' ||
	    digits(s + 8, 2, &d) || s[10] != 'T' || digits(s + 11, 2, &h) ||
	    s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' || digits(s + 17, 2, &sec))
		return -EINVAL;
	/* a leap second (60) is refused: our own issuer never writes one and
	 * accepting it would give two spellings of one instant */
	if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 ||
	    mi > 59 || sec > 59)
		return -EINVAL;
	p = 19;
	if (p < len && s[p] == '.') {
		size_t start = ++p;

		while (p < len && s[p] >= '0' && s[p] <= '9')
			p++;
		if (p == start)
			return -EINVAL;         /* "." without digits */
	}
	if (p >= len)
		return -EINVAL;
	if (s[p] == 'Z') {
		p++;
	} else if (s[p] == '+' || s[p] == '-') {
		if (len - p < 6 || digits(s + p + 1, 2, &oh) || s[p + 3] != ':' ||
		    digits(s + p + 4, 2, &om) || oh > 23 || om > 59)
			return -EINVAL;
		off = (int64_t)oh * 3600 + om * 60;
		if (s[p] == '-')
			off = -off;
		p += 6;
	} else
		return -EINVAL;
	if (p != len)
		return -EINVAL;
	t = days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + mi * 60 + sec - off;
	/* an offset can carry 0000-01-01 or 9999-12-31 out of the four-digit
	 * years: refuse what rfc3339_format could not write back */
	if (t < RFC3339_MIN || t > RFC3339_MAX)
		return -EINVAL;
	*unix_out = t;
	return 0;
}

int
rfc3339_format(int64_t unix_time, char out[RFC3339_LEN + 1])
{
	int64_t days, rem, y;
	unsigned m, d;

	/* 0000-01-01T00:00:00Z .. 9999-12-31T23:59:59Z: four-digit years only */
	if (unix_time < RFC3339_MIN || unix_time > RFC3339_MAX)
		return -ERANGE;
	days = unix_time / 86400;
	rem = unix_time % 86400;
	if (rem < 0) {
		rem += 86400;
		days--;
	}
	civil_from_days(days, &y, &m, &d);
	{
		char buf[64];   /* roomy for the compiler's range analysis */

		snprintf(buf, sizeof(buf), "%04u-%02u-%02uT%02u:%02u:%02uZ",
		    (unsigned)y % 10000, m % 100, d % 100, (unsigned)(rem / 3600) % 100,
		    (unsigned)(rem / 60 % 60), (unsigned)(rem % 60));
		memcpy(out, buf, RFC3339_LEN + 1);
	}
	return 0;
}

/* ---- comparison, identifiers, clocks ---- */

bool
ct_equal(const void *a, const void *b, size_t len)
{
	return sodium_memcmp(a, b, len) == 0;
}

bool
id_valid(const char *s)
{
	size_t i;

	if (s == NULL)
		return false;
	for (i = 0; s[i] != '\0'; i++) {
		char c = s[i];

		if (i >= SPACE_ID_MAX)
			return false;
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return i > 0;
}

int
id_random(const char *prefix, char *out, size_t outcap)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyz234567";
	unsigned char r[26];
	size_t plen, i;

	if (prefix == NULL)
		prefix = "";
	plen = strlen(prefix);
	if (plen + sizeof(r) > SPACE_ID_MAX)
		return -EINVAL;
	if (outcap < plen + sizeof(r) + 1)
		return -ENOSPC;
	if (sodium_init() < 0)
		return -EIO;
	randombytes_buf(r, sizeof(r));
	memcpy(out, prefix, plen);
	/* 256 is a multiple of 32, so the low five bits are uniform */
	for (i = 0; i < sizeof(r); i++)
		out[plen + i] = alpha[r[i] & 31];
	out[plen + sizeof(r)] = '\0';
	sodium_memzero(r, sizeof(r));
	if (!id_valid(out)) {
		out[0] = '\0';
		return -EINVAL;         /* the prefix held a character ids may not */
	}
	return 0;
}

int64_t
now_unix(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec;
}

int64_t
now_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
now_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void
cond_init_mono(pthread_cond_t *cv)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
}

struct timespec
mono_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = (time_t)(ns / 1000000000u),
	    .tv_nsec = (long)(ns % 1000000000u) };
}

/* ---- files ---- */

int
read_file(const char *path, size_t max, char **out, size_t *len)
{
	char *buf = NULL, *nb;
	size_t cap = 0, n = 0;
	ssize_t r;
	int fd, err = 0;

	*out = NULL;
	if (len)
		*len = 0;
	if (max >= SIZE_MAX - 1)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return -errno;
	/* read at most max + 1 bytes: the extra byte tells "too large" without
	 * trusting st_size (a file can grow, /proc files report 0) */
	for (;;) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 4096;

			if (ncap > max + 2)
				ncap = max + 2; /* max + 1 data bytes + NUL */
			nb = realloc(buf, ncap);
			if (nb == NULL) {
				err = -ENOMEM;
				goto out;
			}
			buf = nb;
			cap = ncap;
		}
		r = read(fd, buf + n, cap - n);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			err = -errno;
			goto out;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n > max) {
			err = -EFBIG;
			goto out;
		}
	}
	if (n == cap) {
		nb = realloc(buf, n + 1);
		if (nb == NULL) {
			err = -ENOMEM;
			goto out;
		}
		buf = nb;
	}
	if (buf == NULL && (buf = malloc(1)) == NULL) {
		err = -ENOMEM;
		goto out;
	}
	buf[n] = '\0';
	*out = buf;
	buf = NULL;
	if (len)
		*len = n;
out:
	free(buf);
	close(fd);
	return err;
}

/* fsync the directory holding path so a rename into it is durable */
static int
fsync_parent(const char *path)
{
	char *dir, *slash;
	int fd, err = 0;

	dir = strdup(path);
	if (dir == NULL)
		return -ENOMEM;
	slash = strrchr(dir, '/');
	if (slash == NULL)
		strcpy(dir, ".");
	else if (slash == dir)
		dir[1] = '\0';
	else
		*slash = '\0';
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		err = -errno;
	else {
		if (fsync(fd) != 0)
			err = -errno;
		close(fd);
	}
	free(dir);
	return err;
}

void
fd_writeback_ahead(int fd, uint64_t *started, uint64_t written)
{
	if (written < *started + FD_WRITEBACK_STEP)
		return;
	(void)sync_file_range(fd, (off_t)*started, (off_t)(written - *started),
	    SYNC_FILE_RANGE_WRITE);
	*started = written;
}

void
fd_drop_behind(int fd, uint64_t *dropped, uint64_t started)
{
	uint64_t from, to;

	if (started < *dropped + 2 * (uint64_t)FD_WRITEBACK_STEP)
		return;
	/* up to a step behind the writeback just started; the steps before
	 * the last call again, for pages that were still being written */
	to = started - FD_WRITEBACK_STEP;
	from = *dropped > 4 * (uint64_t)FD_WRITEBACK_STEP ? *dropped - 4 * (uint64_t)FD_WRITEBACK_STEP : 0;
	(void)posix_fadvise(fd, (off_t)from, (off_t)(to - from), POSIX_FADV_DONTNEED);
	*dropped = to;
}

void
fd_drop_read(int fd, uint64_t *dropped, uint64_t read, bool end)
{
	if (read <= *dropped || (!end && read < *dropped + FD_WRITEBACK_STEP))
		return;
	(void)posix_fadvise(fd, (off_t)*dropped, (off_t)(read - *dropped), POSIX_FADV_DONTNEED);
	*dropped = read;
}

int
fd_file_passable(int fd, uint64_t *size, const char **why)
{
	/* f_type of the file systems a sandbox's files live on */
	static const unsigned long kinds[] = {
		0xEF53,         /* ext2, ext3, ext4 */
		0x58465342,     /* xfs */
		0x9123683E,     /* btrfs */
		0x01021994,     /* tmpfs */
		0x794C7630,     /* overlayfs */
		0x73717368,     /* squashfs */
		0xE0F5E1E2,     /* erofs */
	};
	struct statfs sf;
	struct stat st;
	size_t i;
	int fl;

	if (fstat(fd, &st) < 0 || (fl = fcntl(fd, F_GETFL)) < 0) {
		*why = "not an open descriptor";
		return -EBADF;
	}
	if (!S_ISREG(st.st_mode)) {
		*why = "not a regular file";
		return -EINVAL;
	}
	if ((fl & O_PATH) || (fl & O_ACCMODE) != O_RDONLY) {
		*why = "not open for reading only";
		return -EACCES;
	}
	if (fstatfs(fd, &sf) < 0) {
		*why = "its file system is unknown";
		return -EINVAL;
	}
	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
		if ((unsigned long)sf.f_type == kinds[i])
			break;
	if (i == sizeof(kinds) / sizeof(kinds[0])) {
		*why = "not on a file system of files";
		return -EINVAL;
	}
	*size = (uint64_t)st.st_size;
	return 0;
}

int
fd_write_all(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int
write_file_renamed(const char *path, const void *buf, size_t len, mode_t mode, bool durable)
{
	char *tmp = NULL;
	int fd = -1, err = 0;

	if (asprintf(&tmp, "%s.tmp.XXXXXX", path) < 0) {
		tmp = NULL;
		return -ENOMEM;
	}
	/* the temporary lives in the same directory so rename() is atomic */
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(tmp);
		return err;
	}
	/* before any byte is written: a secret must never sit in a file that
	 * others may read, even briefly */
	if (fchmod(fd, mode) != 0) {
		err = -errno;
		goto out;
	}
	if ((err = fd_write_all(fd, buf, len)) < 0)
		goto out;
	if (durable && fsync(fd) != 0) {
		err = -errno;
		goto out;
	}
	if (close(fd) != 0) {
		fd = -1;
		err = -errno;
		goto out;
	}
	fd = -1;
	if (rename(tmp, path) != 0) {
		err = -errno;
		goto out;
	}
	err = durable ? fsync_parent(path) : 0;
	free(tmp);
	return err;
out:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return err;
}

int
write_file_atomic(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_renamed(path, buf, len, mode, true);
}

int
write_file_replace(const char *path, const void *buf, size_t len, mode_t mode)
{
	return write_file_renamed(path, buf, len, mode, false);
}

int
mkdir_p(const char *path, mode_t mode)
{
	char *buf, *p;
	struct stat st;
	int err = 0;

	if (path == NULL || *path == '\0')
		return -EINVAL;
	buf = strdup(path);
	if (buf == NULL)
		return -ENOMEM;
	for (p = buf + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		{
			char c = *p;

			*p = '\0';
			if (mkdir(buf, mode) != 0 && errno != EEXIST) {
				err = -errno;
				goto out;
			}
			*p = c;
			if (c == '\0')
				break;
		}
	}
	/* EEXIST above may have been a file: the final path must be a directory */
	if (stat(buf, &st) != 0)
		err = -errno;
	else if (!S_ISDIR(st.st_mode))
		err = -ENOTDIR;
out:
	free(buf);
	return err;
}

int
tcp_keepalive(int fd, unsigned idle_s)
{
	int on = 1, idle, intvl, cnt = 3, domain = 0;
	unsigned int user_ms;
	socklen_t sl = sizeof(domain);

	if (idle_s == 0)
		return 0;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &sl) != 0)
		return -errno;
	if (domain != AF_INET && domain != AF_INET6)
		return 0;
	if (idle_s > 86400)
		idle_s = 86400;
	idle = (int)idle_s;
	intvl = idle / 3 > 0 ? idle / 3 : 1;
	user_ms = (unsigned int)(idle + intvl * cnt) * 1000u;
	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof(on)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0 ||
	    setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_ms, sizeof(user_ms)) != 0)
		return -errno;
	return 0;
}

long
nofile_raise(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
		return -errno;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
			return -errno;
	}
	return rl.rlim_cur > (rlim_t)0x7fffffff ? 0x7fffffff : (long)rl.rlim_cur;
}

int
unix_bind_private(const char *path, int type)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	mode_t old;
	int fd, r;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	unlink(path);
	old = umask(077);
	r = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (r < 0 || chmod(path, 0600) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	return fd;
}

uint64_t
be_load(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v = v << 8 | p[i];
	return v;
}

void
be_store(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * (n - 1 - i)));
}

uint64_t
le_load(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = n - 1; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

void
le_store(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

size_t
lstr_put(uint8_t *p, const char *s, int lb)
{
	size_t l = strlen(s);

	be_store(p, l, lb);
	memcpy(p + lb, s, l);
	return (size_t)lb + l;
}

int
lstr_get(const uint8_t **p, const uint8_t *end, int lb, char *dst, size_t max)
{
	size_t l;

	if (end - *p < lb)
		return -EPROTO;
	l = (size_t)be_load(*p, lb);
	if (l > max || (size_t)(end - *p - lb) < l || memchr(*p + lb, '\0', l) != NULL)
		return -EPROTO;
	memcpy(dst, *p + lb, l);
	dst[l] = '\0';
	*p += lb + l;
	return 0;
}

int
dir_lock(const char *dir)
{
	int fd, r;

	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
		return -errno;
	while (flock(fd, LOCK_EX) < 0) {
		if (errno != EINTR) {
			r = -errno;
			close(fd);
			return r;
		}
	}
	return fd;
}
