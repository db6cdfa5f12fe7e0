/* Minimal TAP producer for unit tests: one binary per test file.
 * ok(cond, fmt, ...) prints "ok N - ..." or "not ok N - ..."; the exit status
 * of done_testing() is non-zero when anything failed or nothing ran. */
#ifndef SPACE_TAP_H
#define SPACE_TAP_H
#include <stdio.h>
#include <stdarg.h>
#include <string.h>
#include <inttypes.h>

static int tap_n, tap_failed;

__attribute__((format(printf, 4, 5), unused))
static int tap_ok(int cond, const char *file, int line, const char *fmt, ...)
{
	va_list ap;
	tap_n++;
	printf("%sok %d - ", cond ? "" : "not ", tap_n);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	if (!cond) {
		tap_failed++;
		printf("#   failed at %s:%d\n", file, line);
	}
	fflush(stdout);
	return cond;
}
#define ok(cond, ...) tap_ok(!!(cond), __FILE__, __LINE__, __VA_ARGS__)
#define is_int(a, b, ...) do { long long _a = (a), _b = (b); \
	if (!ok(_a == _b, __VA_ARGS__)) printf("#   got %lld, want %lld\n", _a, _b); } while (0)
#define is_str(a, b, ...) do { const char *_a = (a), *_b = (b); \
	if (!ok(_a && _b && strcmp(_a, _b) == 0, __VA_ARGS__)) \
		printf("#   got '%s', want '%s'\n", _a ? _a : "(null)", _b ? _b : "(null)"); } while (0)
#define diag(...) do { printf("# "); printf(__VA_ARGS__); printf("\n"); } while (0)

__attribute__((unused))
static int done_testing(void)
{
	printf("1..%d\n", tap_n);
	if (tap_n == 0) {
		printf("# no test ran\n");
		return 1;
	}
	return tap_failed ? 1 : 0;
}
#endif
