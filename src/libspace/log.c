/* Structured JSON logs on stderr, one object per line. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static const char *log_prog = "space";
static int log_verbose;

void
log_init(const char *prog, int verbose)
{
	log_prog = prog;
	log_verbose = verbose;
}

/* JSON-escape src into dst (always NUL-terminated, truncated if needed) */
static void
json_escape(char *dst, size_t cap, const char *src)
{
	size_t o = 0;

	for (; *src && o + 7 < cap; src++) {
		unsigned char c = (unsigned char)*src;
		if (c == '"' || c == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)c;
		} else if (c < 0x20) {
			o += (size_t)snprintf(dst + o, cap - o, "\\u%04x", c);
		} else
			dst[o++] = (char)c;
	}
	dst[o] = '\0';
}

void
log_event(const char *level, const char *msg, const char *fields_json)
{
	char ts[32], esc[2048];
	struct timespec now;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	json_escape(esc, sizeof(esc), msg);
	fprintf(stderr, "{\"ts\":\"%s.%06ldZ\",\"level\":\"%s\",\"prog\":\"%s\",\"pid\":%d,\"msg\":\"%s\"%s%s}\n",
	    ts, now.tv_nsec / 1000, level, log_prog, (int)getpid(), esc,
	    fields_json && *fields_json ? "," : "", fields_json ? fields_json : "");
}

static void
vlog(const char *level, int with_errno, const char *fmt, va_list ap)
{
	char buf[1536];
	int saved = errno;

	vsnprintf(buf, sizeof(buf), fmt, ap);
	if (with_errno) {
		size_t l = strlen(buf);
		snprintf(buf + l, sizeof(buf) - l, ": %s", strerror(saved));
	}
	log_event(level, buf, NULL);
	errno = saved;
}

#define LOGFN(name, level, with_errno, cond)		\
void name(const char *fmt, ...)				\
{							\
	va_list ap;					\
	if (!(cond)) return;				\
	va_start(ap, fmt);				\
	vlog(level, with_errno, fmt, ap);		\
	va_end(ap);					\
}
LOGFN(log_debug, "debug", 0, log_verbose)
LOGFN(log_info, "info", 0, 1)
LOGFN(log_warn, "warn", 1, 1)
LOGFN(log_warnx, "warn", 0, 1)

void
fatal(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("fatal", 1, fmt, ap);
	va_end(ap);
	exit(1);
}

void
fatalx(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vlog("fatal", 0, fmt, ap);
	va_end(ap);
	exit(1);
}
