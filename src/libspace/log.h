/* Structured logs: one JSON object per line on stderr,
 * {"ts":"...","level":"info","prog":"space-control","msg":"...", ...}.
 * Never log secrets (tokens, keys, API keys). */
#ifndef SPACE_LOG_H
#define SPACE_LOG_H
#include <stdnoreturn.h>

void log_init(const char *prog, int verbose);
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));   /* appends strerror(errno) */
void log_warnx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* setup errors and broken invariants only */
noreturn void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
noreturn void fatalx(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* an event with extra JSON fields: fields_json is an object's inside,
 * e.g. "\"outcome\":\"deny\",\"reason\":\"bad_signature\"" (caller escapes) */
void log_event(const char *level, const char *msg, const char *fields_json);
#endif
