/* libcurl, loaded on the first HTTP request instead of at exec.
 *
 * libcurl brings about thirty shared libraries with it (OpenSSL, GnuTLS
 * through librtmp, Kerberos, LDAP, ...); mapping and relocating them, and
 * running their constructors, cost several times what the CLI itself does
 * when a verb never talks HTTP (`space version`, `space token`, `space up`
 * and the help texts). So the CLI is not linked with -lcurl: this file
 * defines the few libcurl entry points libspace's client.c calls, and each
 * one loads the library (once) and forwards to it. The daemons link libcurl
 * directly. docs/benchmarks.md has the figures.
 *
 * The soname is the ABI the headers describe; a missing library makes
 * every call fail the way libcurl reports a failure (NULL, an error code),
 * which client.c already turns into "cannot initialise libcurl". */
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>

#define LIBCURL_SONAME "libcurl.so.4"

static struct {
	CURLcode (*global_init)(long);
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char *(*easy_escape)(CURL *, const char *, int);
	void (*free)(void *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
} cu;
static int cu_ok;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

#define SYM(field, name) \
	((*(void **)&cu.field = dlsym(h, name)) != NULL)

static void
cu_load(void)
{
	void *h;

	if ((h = dlopen(LIBCURL_SONAME, RTLD_NOW | RTLD_LOCAL)) == NULL)
		return;
	/* all or nothing: a library without one of these is not the ABI */
	cu_ok = SYM(global_init, "curl_global_init") &&
	    SYM(easy_init, "curl_easy_init") &&
	    SYM(easy_setopt, "curl_easy_setopt") &&
	    SYM(easy_perform, "curl_easy_perform") &&
	    SYM(easy_getinfo, "curl_easy_getinfo") &&
	    SYM(easy_cleanup, "curl_easy_cleanup") &&
	    SYM(easy_strerror, "curl_easy_strerror") &&
	    SYM(easy_escape, "curl_easy_escape") &&
	    SYM(free, "curl_free") &&
	    SYM(slist_append, "curl_slist_append") &&
	    SYM(slist_free_all, "curl_slist_free_all");
	/* the handle stays open for the life of the process, as a link would */
}

static int
loaded(void)
{
	pthread_once(&cu_once, cu_load);
	return cu_ok;
}

CURLcode
curl_global_init(long flags)
{
	return loaded() ? cu.global_init(flags) : CURLE_FAILED_INIT;
}

CURL *
curl_easy_init(void)
{
	return loaded() ? cu.easy_init() : NULL;
}

/* The option number says the type of the one argument (curl.h's
 * CURLOPTTYPE_* bands): forward it as that type. */
CURLcode
curl_easy_setopt(CURL *c, CURLoption opt, ...)
{
	va_list ap;
	CURLcode rc;

	if (!loaded())
		return CURLE_FAILED_INIT;
	va_start(ap, opt);
	if (opt < CURLOPTTYPE_OBJECTPOINT)
		rc = cu.easy_setopt(c, opt, va_arg(ap, long));
	else if (opt < CURLOPTTYPE_FUNCTIONPOINT)
		rc = cu.easy_setopt(c, opt, va_arg(ap, void *));
	else if (opt < CURLOPTTYPE_OFF_T)
		rc = cu.easy_setopt(c, opt, va_arg(ap, void (*)(void)));
	else if (opt < CURLOPTTYPE_BLOB)
		rc = cu.easy_setopt(c, opt, va_arg(ap, curl_off_t));
	else
		rc = cu.easy_setopt(c, opt, va_arg(ap, void *));
	va_end(ap);
	return rc;
}

CURLcode
curl_easy_perform(CURL *c)
{
	return loaded() ? cu.easy_perform(c) : CURLE_FAILED_INIT;
}

/* every CURLINFO_* takes one pointer to where the answer goes */
CURLcode
curl_easy_getinfo(CURL *c, CURLINFO info, ...)
{
	va_list ap;
	void *p;

	if (!loaded())
		return CURLE_FAILED_INIT;
	va_start(ap, info);
	p = va_arg(ap, void *);
	va_end(ap);
	return cu.easy_getinfo(c, info, p);
}

void
curl_easy_cleanup(CURL *c)
{
	if (loaded())
		cu.easy_cleanup(c);
}

const char *
curl_easy_strerror(CURLcode rc)
{
	return loaded() ? cu.easy_strerror(rc) : "cannot load " LIBCURL_SONAME;
}

char *
curl_easy_escape(CURL *c, const char *s, int len)
{
	return loaded() ? cu.easy_escape(c, s, len) : NULL;
}

void
curl_free(void *p)
{
	if (loaded())
		cu.free(p);
}

struct curl_slist *
curl_slist_append(struct curl_slist *l, const char *s)
{
	return loaded() ? cu.slist_append(l, s) : NULL;
}

void
curl_slist_free_all(struct curl_slist *l)
{
	if (loaded())
		cu.slist_free_all(l);
}
