/* HTTP client on libcurl: JSON requests with a bearer, streamed uploads and
 * downloads, error decoding. See client.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <inttypes.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "claims.h"
#include "client.h"
#include "fsplice.h"
#include "limits.h"
#include "util.h"

/* A JSON answer is buffered whole. The largest one is an exec result: two
 * captured outputs of SPACE_EXEC_OUTPUT_MAX each, which JSON escaping can
 * grow up to six times (\u0001), plus the rest of the object. */
#define ANSWER_MAX      (12u * SPACE_EXEC_OUTPUT_MAX + SPACE_HTTP_BODY_MAX)
/* an error body that interrupts a streamed download is small */
#define ERROR_BODY_MAX  (64u << 10)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;

static void
curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

void
space_answer_init(struct space_answer *a)
{
	memset(a, 0, sizeof(*a));
	a->retry_after = -1;
}

void
space_answer_clear(struct space_answer *a)
{
	json_decref(a->body);
	space_answer_init(a);
}

int
space_answer_ok(const struct space_answer *a)
{
	return a->status >= 200 && a->status < 300;
}

const char *
space_answer_strerror(const struct space_answer *a, char *buf, size_t cap)
{
	if (a->status == 0)
		snprintf(buf, cap, "%s", a->message[0] ? a->message : "no answer");
	else if (a->error[0] && a->message[0] && a->reason[0])
		snprintf(buf, cap, "%s: %s (%s)", a->error, a->message, a->reason);
	else if (a->error[0] && a->reason[0])
		snprintf(buf, cap, "%s: %s", a->error, a->reason);
	else if (a->error[0] && a->message[0])
		snprintf(buf, cap, "%s: %s", a->error, a->message);
	else if (a->error[0])
		snprintf(buf, cap, "%s (HTTP %ld)", a->error, a->status);
	else
		snprintf(buf, cap, "HTTP %ld%s%s", a->status,
		    a->message[0] ? ": " : "", a->message);
	return buf;
}

static int
url_ok(const char *u)
{
	return strncmp(u, "http://", 7) == 0 || strncmp(u, "https://", 8) == 0;
}

struct space_client *
space_client_new(const char *api_url, const char *api_key)
{
	struct space_client *c;
	size_t n;

	if (api_url == NULL || !url_ok(api_url) || strlen(api_url) > SPACE_HTTP_URL_MAX / 2) {
		errno = EINVAL;
		return NULL;
	}
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		errno = ENOMEM;
		return NULL;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->connect_timeout = 10;
	{
		const char *dbg = getenv("SPACE_DEBUG");
		c->verbose = dbg != NULL && dbg[0] != '\0' && strcmp(dbg, "0") != 0;
	}
	c->api_url = strdup(api_url);
	c->api_key = strdup(api_key ? api_key : "");
	if (c->api_url == NULL || c->api_key == NULL) {
		space_client_free(c);
		errno = ENOMEM;
		return NULL;
	}
	n = strlen(c->api_url);
	while (n > 0 && c->api_url[n - 1] == '/')
		c->api_url[--n] = '\0';
	return c;
}

void
space_client_free(struct space_client *c)
{
	if (c == NULL)
		return;
	if (c->rc) {
		int r = route_cache_save(c->rc);
		if (r < 0)
			fprintf(stderr, "space: warning: cannot save the route cache %s: %s\n",
			    route_cache_path(c->rc) ? route_cache_path(c->rc) : "", strerror(-r));
		route_cache_free(c->rc);
	}
	free(c->route_cache_path);
	free(c->api_url);
	if (c->api_key) {
		sodium_memzero(c->api_key, strlen(c->api_key));
		free(c->api_key);
	}
	free(c);
}

char *
space_url_escape(const char *s)
{
	char *e, *out;

	if ((e = curl_easy_escape(NULL, s, 0)) == NULL)
		return NULL;
	out = strdup(e);
	curl_free(e);
	return out;
}

/* ---- one exchange ---- */

struct xfer {
	CURL *h;
	struct space_answer *a;
	int out_fd;             /* 2xx body goes here when >= 0 */
	int in_fd;
	char *buf;              /* buffered body (JSON, or an error) */
	size_t len, cap, max;
	int overflow;
	int write_failed;       /* errno of a failed write to out_fd */
	long long out_max;      /* > 0: the most a streamed body may be */
	int out_overflow;       /* the streamed body passed out_max */
	int read_failed;        /* errno of a failed read from in_fd */
	int is_json;
	/* the execution that must have served a 2xx answer, when known */
	const char *expect_gen, *expect_worker;
	int checked;
};

/* Before the first byte of a 2xx body is used: it must come from the
 * execution the capability names (X-Space-Generation / X-Space-Worker).
 * A receiver that answers for another execution is a routing fault; its
 * data is never written out or parsed. */
static int
serving_ok(struct xfer *x)
{
	struct space_answer *a = x->a;

	if (x->expect_gen == NULL || x->checked)
		return !a->foreign;
	x->checked = 1;
	if (strcmp(a->generation, x->expect_gen) != 0 || strcmp(a->worker, x->expect_worker) != 0)
		a->foreign = 1;
	return !a->foreign;
}

static long
xfer_status(struct xfer *x)
{
	long st = 0;

	curl_easy_getinfo(x->h, CURLINFO_RESPONSE_CODE, &st);
	return st;
}

static size_t
on_body(char *p, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	size_t n = sz * nm;
	long st = xfer_status(x);
	int r;

	if (st >= 200 && st < 300 && !serving_ok(x))
		return 0;       /* aborts the transfer */
	if (x->out_fd >= 0 && st >= 200 && st < 300) {
		if (x->out_max > 0 && (long long)n > x->out_max - x->a->out_written) {
			x->out_overflow = 1;
			return 0;       /* aborts the transfer */
		}
		if ((r = fd_write_all(x->out_fd, p, n)) < 0) {
			x->write_failed = -r;
			return 0;       /* aborts the transfer */
		}
		x->a->out_written += (long long)n;
		return n;
	}
	/* buffer, bounded: the peer decides how much it sends, we decide how
	 * much we keep */
	if (n > x->max - x->len) {
		x->overflow = 1;
		return 0;
	}
	if (x->len + n + 1 > x->cap) {
		size_t ncap = x->cap ? x->cap : 4096;
		char *nb;
		while (ncap < x->len + n + 1)
			ncap *= 2;
		if ((nb = realloc(x->buf, ncap)) == NULL)
			return 0;
		x->buf = nb;
		x->cap = ncap;
	}
	memcpy(x->buf + x->len, p, n);
	x->len += n;
	x->buf[x->len] = '\0';
	return n;
}

static void
hdr_copy(char *dst, size_t cap, const char *v, size_t n)
{
	while (n > 0 && (*v == ' ' || *v == '\t'))
		v++, n--;
	while (n > 0 && (v[n - 1] == '\r' || v[n - 1] == '\n' || v[n - 1] == ' '))
		n--;
	if (n >= cap)
		n = cap - 1;
	memcpy(dst, v, n);
	dst[n] = '\0';
}

static size_t
on_header(char *p, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	size_t n = sz * nm;
	char tmp[32];

#define HDR(name) (n > sizeof(name) - 1 && strncasecmp(p, name, sizeof(name) - 1) == 0)
	if (HDR("X-Space-Generation:"))
		hdr_copy(x->a->generation, sizeof(x->a->generation), p + 19, n - 19);
	else if (HDR("X-Space-Worker:"))
		hdr_copy(x->a->worker, sizeof(x->a->worker), p + 15, n - 15);
	else if (HDR("Retry-After:")) {
		hdr_copy(tmp, sizeof(tmp), p + 12, n - 12);
		x->a->retry_after = strtol(tmp, NULL, 10);
	} else if (HDR("Content-Type:")) {
		hdr_copy(tmp, sizeof(tmp), p + 13, n - 13);
		x->is_json = strncasecmp(tmp, "application/json", 16) == 0;
	} else if (n >= 5 && strncmp(p, "HTTP/", 5) == 0) {
		/* a new status line (after 100 Continue, or a redirect): the
		 * headers that matter belong to the last answer */
		x->a->generation[0] = x->a->worker[0] = '\0';
		x->a->retry_after = -1;
		x->is_json = 0;
	}
#undef HDR
	return n;
}

static size_t
on_read(char *p, size_t sz, size_t nm, void *arg)
{
	struct xfer *x = arg;
	ssize_t r;

	do
		r = read(x->in_fd, p, sz * nm);
	while (r < 0 && errno == EINTR);
	if (r < 0) {
		x->read_failed = errno;
		return CURL_READFUNC_ABORT;
	}
	x->a->in_read += r;
	return (size_t)r;
}

static void
copy_str(char *dst, size_t cap, json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	if (s)
		snprintf(dst, cap, "%s", s);
}

/* decode the buffered body into a->body and the error fields */
static void
decode_body(struct xfer *x)
{
	struct space_answer *a = x->a;
	json_error_t je;
	json_t *j;

	if (x->len == 0)
		return;
	j = json_loadb(x->buf, x->len, JSON_REJECT_DUPLICATES, &je);
	if (j == NULL) {
		if (!space_answer_ok(a) && !a->message[0]) {
			/* not JSON: show its first line, sanitized */
			size_t i, o = 0;
			for (i = 0; i < x->len && o + 1 < sizeof(a->message); i++) {
				unsigned char ch = (unsigned char)x->buf[i];
				if (ch == '\n' || ch == '\r')
					break;
				a->message[o++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
			}
			a->message[o] = '\0';
		}
		return;
	}
	a->body = j;
	if (!space_answer_ok(a) && json_is_object(j)) {
		copy_str(a->error, sizeof(a->error), j, "error");
		copy_str(a->reason, sizeof(a->reason), j, "reason");
		copy_str(a->message, sizeof(a->message), j, "message");
	}
}

/* SPACE_ENDPOINT_SOCKETS: "ENDPOINT=PATH[,ENDPOINT=PATH...]", endpoints a
 * client on this machine reaches through a local socket of the same
 * node-api (`space up` writes it; docs/worker.md, section 1). Only the
 * transport changes: the URL, the capability and every check are those
 * of the endpoint. A path that is not a socket now is passed over (the
 * endpoint's TCP port then serves). 0 and the path in out, or -1. */
static int
endpoint_socket(const char *endpoint, char *out, size_t cap)
{
	const char *map = getenv("SPACE_ENDPOINT_SOCKETS"), *p, *end, *eq;
	size_t el = strlen(endpoint), n;
	struct stat st;

	while (el > 0 && endpoint[el - 1] == '/')
		el--;
	for (p = map; p != NULL && *p != '\0'; p = *end ? end + 1 : end) {
		if ((end = strchr(p, ',')) == NULL)
			end = p + strlen(p);
		if ((eq = memchr(p, '=', (size_t)(end - p))) == NULL)
			continue;
		n = (size_t)(eq - p);
		while (n > 0 && p[n - 1] == '/')
			n--;
		if (n != el || memcmp(p, endpoint, el) != 0)
			continue;
		n = (size_t)(end - eq - 1);
		if (n == 0 || n >= cap || n >= SPACE_UNIX_PATH_MAX || eq[1] != '/')
			return -1;
		memcpy(out, eq + 1, n);
		out[n] = '\0';
		return stat(out, &st) == 0 && S_ISSOCK(st.st_mode) ? 0 : -1;
	}
	return -1;
}

/* a body sent from a descriptor through a local socket: buffers of
 * SPACE_BULK_SOCKBUF (fsplice_sockbufs), so its 1 MiB pieces go out
 * whole, not a fifth at a time (a local socket's default send buffer;
 * over TCP the kernel's autotuning grows it and is left alone). `space
 * fs write` of 512 MiB went from about 800 to 1,000 MB/s
 * (docs/benchmarks.md, "Issue 17 figures, set 19") */
static int
bulk_sockopt(void *ctx, curl_socket_t fd, curlsocktype purpose)
{
	(void)ctx;
	if (purpose == CURLSOCKTYPE_IPCXN)
		fsplice_sockbufs(fd);
	return CURL_SOCKOPT_OK;
}

static int
http_exchange(const char *url, const char *unix_path, const char *bearer, const char *method,
    json_t *body, int in_fd, int out_fd, long long out_max, long connect_timeout, long timeout,
    const char *expect_gen, const char *expect_worker, struct space_answer *a)
{
	struct xfer x;
	struct curl_slist *hdrs = NULL;
	char *auth = NULL, *json = NULL;
	char errbuf[CURL_ERROR_SIZE];
	struct stat st;
	CURLcode rc;
	int ret = -EIO;

	space_answer_clear(a);
	memset(&x, 0, sizeof(x));
	x.a = a;
	x.out_fd = out_fd;
	x.out_max = out_max;
	x.in_fd = in_fd;
	x.expect_gen = expect_gen;
	x.expect_worker = expect_worker;
	x.max = out_fd >= 0 ? ERROR_BODY_MAX : ANSWER_MAX;
	errbuf[0] = '\0';

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK || (x.h = curl_easy_init()) == NULL) {
		snprintf(a->message, sizeof(a->message), "cannot initialise libcurl");
		return -ENOMEM;
	}
	if (bearer && bearer[0]) {
		size_t n = strlen(bearer) + 32;
		if ((auth = malloc(n)) == NULL) {
			ret = -ENOMEM;
			goto out;
		}
		snprintf(auth, n, "Authorization: Bearer %s", bearer);
		hdrs = curl_slist_append(hdrs, auth);
	}
	hdrs = curl_slist_append(hdrs, "Accept: application/json");
	curl_easy_setopt(x.h, CURLOPT_URL, url);
	if (unix_path != NULL)
		curl_easy_setopt(x.h, CURLOPT_UNIX_SOCKET_PATH, unix_path);
	curl_easy_setopt(x.h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(x.h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(x.h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(x.h, CURLOPT_CONNECTTIMEOUT, connect_timeout);
	if (timeout > 0)
		curl_easy_setopt(x.h, CURLOPT_TIMEOUT, timeout);
	else {
		/* a stream of any length has no deadline, but one that
		 * stalls for a minute is dead */
		curl_easy_setopt(x.h, CURLOPT_LOW_SPEED_LIMIT, 1L);
		curl_easy_setopt(x.h, CURLOPT_LOW_SPEED_TIME, 60L);
	}
	/* a body to a descriptor is received in pieces of 512 KiB, not 16:
	 * `space fs read` of 512 MiB went from about 1,180 to 1,770 MB/s
	 * (docs/benchmarks.md, "Large reads: the last hop's pieces") */
	if (out_fd >= 0)
		curl_easy_setopt(x.h, CURLOPT_BUFFERSIZE, (long)(512 << 10));
	curl_easy_setopt(x.h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x.h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(x.h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x.h, CURLOPT_HEADERDATA, &x);

	if (in_fd >= 0) {
		/* streamed: the body is never held whole, so a file of any
		 * size goes through; a regular file gets a Content-Length,
		 * a pipe is sent chunked */
		curl_easy_setopt(x.h, CURLOPT_UPLOAD, 1L);
		/* sent in pieces of 1 MiB, not 64 KiB: `space fs write` of
		 * 512 MiB went from about 650 to 890 MB/s through the local
		 * socket, 700 to 770 over TCP (docs/benchmarks.md, "Large
		 * writes: the CLI's pieces") */
		curl_easy_setopt(x.h, CURLOPT_UPLOAD_BUFFERSIZE, (long)(1 << 20));
		if (unix_path != NULL)
			curl_easy_setopt(x.h, CURLOPT_SOCKOPTFUNCTION, bulk_sockopt);
		curl_easy_setopt(x.h, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(x.h, CURLOPT_READDATA, &x);
		if (fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode)) {
			off_t pos = lseek(in_fd, 0, SEEK_CUR);
			curl_easy_setopt(x.h, CURLOPT_INFILESIZE_LARGE,
			    (curl_off_t)(st.st_size - (pos > 0 ? pos : 0)));
		}
		hdrs = curl_slist_append(hdrs, "Content-Type: application/octet-stream");
		curl_easy_setopt(x.h, CURLOPT_CUSTOMREQUEST, method);
	} else if (body != NULL) {
		if ((json = json_dumps(body, JSON_COMPACT)) == NULL) {
			ret = -ENOMEM;
			goto out;
		}
		hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, json);
		curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE, (long)strlen(json));
		curl_easy_setopt(x.h, CURLOPT_CUSTOMREQUEST, method);
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(x.h, CURLOPT_CUSTOMREQUEST, method);
		if (strcmp(method, "POST") == 0) {
			curl_easy_setopt(x.h, CURLOPT_POSTFIELDS, "");
			curl_easy_setopt(x.h, CURLOPT_POSTFIELDSIZE, 0L);
		}
	}
	curl_easy_setopt(x.h, CURLOPT_HTTPHEADER, hdrs);

	rc = curl_easy_perform(x.h);
	a->status = xfer_status(&x);
	if (space_answer_ok(a) && !serving_ok(&x)) {
		snprintf(a->message, sizeof(a->message), "answer from gen %s on %s, not from gen "
		    "%s on %s: dropped", a->generation[0] ? a->generation : "-",
		    a->worker[0] ? a->worker : "-", expect_gen, expect_worker);
		a->status = 0;
		ret = -EPROTO;
		goto out;
	}
	{
		/* nothing of the request left this host: a retry cannot run
		 * the operation twice (docs/recovery.md, transport rules) */
		long reqsize = 0;
		curl_easy_getinfo(x.h, CURLINFO_REQUEST_SIZE, &reqsize);
		a->not_sent = a->status == 0 && reqsize == 0;
	}
	if (x.write_failed) {
		snprintf(a->message, sizeof(a->message), "writing output: %s",
		    strerror(x.write_failed));
		ret = -x.write_failed;
		goto out;
	}
	if (x.read_failed) {
		snprintf(a->message, sizeof(a->message), "reading input: %s",
		    strerror(x.read_failed));
		a->status = 0;
		ret = -x.read_failed;
		goto out;
	}
	if (x.out_overflow) {
		/* an answer, not a transport failure: asking again would
		 * fetch the same bytes again */
		snprintf(a->message, sizeof(a->message), "answer larger than %lld bytes", x.out_max);
		snprintf(a->error, sizeof(a->error), "too_large");
		a->status = 413;
		ret = -EMSGSIZE;
		goto out;
	}
	if (x.overflow) {
		snprintf(a->message, sizeof(a->message), "answer larger than %zu bytes", x.max);
		a->status = 0;
		ret = -EMSGSIZE;
		goto out;
	}
	if (rc != CURLE_OK && !(a->status >= 400 && x.len > 0)) {
		/* A server may answer an upload with an error and close before
		 * reading it all; then the error answer is what counts. */
		snprintf(a->message, sizeof(a->message), "%s: %s", url,
		    errbuf[0] ? errbuf : curl_easy_strerror(rc));
		a->status = 0;
		ret = rc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT : -ECONNREFUSED;
		goto out;
	}
	decode_body(&x);
	ret = 0;
out:
	if (auth) {
		sodium_memzero(auth, strlen(auth));
		free(auth);
	}
	curl_slist_free_all(hdrs);
	free(json);
	free(x.buf);
	curl_easy_cleanup(x.h);
	return ret;
}

int
space_http(const char *url, const char *bearer, const char *method,
    json_t *body, int in_fd, int out_fd, long connect_timeout, long timeout,
    struct space_answer *a)
{
	return http_exchange(url, NULL, bearer, method, body, in_fd, out_fd, 0, connect_timeout,
	    timeout, NULL, NULL, a);
}

int
space_sandboxes(struct space_client *c, bool live, unsigned max_pages, json_t **out,
    struct space_answer *a)
{
	char path[96], after[SPACE_ID_MAX + 1] = "";
	json_t *all = json_array(), *page, *next;
	unsigned n;

	space_answer_init(a);
	for (n = 0; all != NULL && n < max_pages; n++) {
		snprintf(path, sizeof(path), "/v1/sandboxes?live=%s%s%s", live ? "true" : "false",
		    after[0] ? "&after=" : "", after);
		space_answer_clear(a);
		if (space_control(c, "GET", path, NULL, a) < 0 || !space_answer_ok(a))
			break;
		page = json_object_get(a->body, "sandboxes");
		next = json_object_get(a->body, "next");
		if (!json_is_array(page) || (!json_is_null(next) &&
		    !(json_is_string(next) && id_valid(json_string_value(next))))) {
			a->status = 502;
			snprintf(a->message, sizeof(a->message), "malformed answer: no page of sandboxes");
			break;
		}
		json_array_extend(all, page);
		if (json_is_null(next)) {
			*out = all;
			return 0;
		}
		snprintf(after, sizeof(after), "%s", json_string_value(next));
	}
	if (all != NULL && n == max_pages) {
		*out = all;             /* as many pages as the caller reads */
		return 0;
	}
	json_decref(all);
	return -1;
}

int
space_control(struct space_client *c, const char *method, const char *path,
    json_t *body, struct space_answer *a)
{
	char url[SPACE_HTTP_URL_MAX];
	int n;

	n = snprintf(url, sizeof(url), "%s%s", c->api_url, path);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		space_answer_clear(a);
		snprintf(a->message, sizeof(a->message), "URL too long");
		return -ENAMETOOLONG;
	}
	return space_http(url, c->api_key, method, body, -1, -1, c->connect_timeout,
	    60, a);
}

/* ---- routes ---- */

void
space_route_free(struct space_route *r)
{
	if (r == NULL)
		return;
	free(r->endpoint);
	if (r->capability) {
		sodium_memzero(r->capability, strlen(r->capability));
		free(r->capability);
	}
	free(r->expires_at);
	json_decref(r->identity);
	json_decref(r->answer);
	memset(r, 0, sizeof(*r));
}

int
space_route_get(struct space_client *c, const char *sbx, json_t *req,
    struct space_route *r, struct space_answer *a)
{
	char path[SPACE_ID_MAX * 3 + 64];
	char *esc;
	const char *ep, *cap, *exp;
	json_t *id;
	int ret;

	memset(r, 0, sizeof(*r));
	if ((esc = space_url_escape(sbx)) == NULL)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v1/sandboxes/%.*s/routes", SPACE_ID_MAX * 3, esc);
	free(esc);
	if ((ret = space_control(c, "POST", path, req, a)) < 0)
		return ret;
	if (!space_answer_ok(a))
		return -EREMOTEIO;
	ep = json_string_value(json_object_get(a->body, "endpoint"));
	cap = json_string_value(json_object_get(a->body, "capability"));
	exp = json_string_value(json_object_get(a->body, "expires_at"));
	id = json_object_get(a->body, "route");
	/* the endpoint is where a capability will be sent: only http(s) */
	if (ep == NULL || !url_ok(ep) || strlen(ep) > SPACE_HTTP_URL_MAX / 2 ||
	    cap == NULL || strlen(cap) > SPACE_TOKEN_MAX || !json_is_object(id)) {
		snprintf(a->message, sizeof(a->message), "malformed route answer");
		a->status = 0;
		return -EPROTO;
	}
	r->endpoint = strdup(ep);
	r->capability = strdup(cap);
	r->expires_at = strdup(exp ? exp : "");
	r->identity = json_incref(id);
	r->answer = json_incref(a->body);
	if (!r->endpoint || !r->capability || !r->expires_at) {
		space_route_free(r);
		return -ENOMEM;
	}
	return 0;
}

/* ---- data plane ---- */

/* a resolve that meets 503 + Retry-After (the execution is starting, or
 * the control plane still names the route that was just rejected) waits
 * and asks again, a bounded number of times */
#define RESOLVE_TRIES           4
#define RESOLVE_WAIT_MAX        5       /* seconds, per wait */
#define SPOOL_BUF               (64u << 10)

struct op_ctx {
	struct space_client *c;
	const char *sbx;
	const struct space_data_op *op;
	struct route_ops *ops;          /* idempotent is cleared once output went out */
	struct space_answer *a;
	uint32_t want;                  /* ACC_* bits asked for */
	off_t in_off;                   /* where the upload starts, when seekable */
	int in_seekable;                /* always, once a pipe is spooled */
	int mismatch;                   /* an answer came from another execution */
	int repair_pending;             /* the next attempt is the rebuilt one */
	long long in_taken;             /* bytes of in_fd earlier attempts read */
	char refused[384];              /* last refusal, for the repair line */
};

struct route_cache *
space_client_routes(struct space_client *c)
{
	const char *p;

	if (c->rc != NULL)
		return c->rc;
	p = c->route_cache_path;
	if (p == NULL || p[0] == '\0')
		p = getenv("SPACE_ROUTE_CACHE");
	if (p != NULL && p[0] == '\0')
		p = NULL;
	c->rc = route_cache_open(p);
	return c->rc;
}

static void
vlog(const struct op_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
vlog(const struct op_ctx *x, const char *fmt, ...)
{
	va_list ap;

	if (!x->c->verbose)
		return;
	fputs("route: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static json_t *
access_array(uint32_t bits)
{
	json_t *arr = json_array();
	uint32_t b;

	if (arr == NULL)
		return NULL;
	for (b = 1; b <= ACC_ALL; b <<= 1)
		if ((bits & b) && acc_name(b) != NULL)
			json_array_append_new(arr, json_string(acc_name(b)));
	return arr;
}

static int
op_resolve(void *arg, const char *sandbox, const struct route_identity *rejected,
    struct route_entry *out)
{
	struct op_ctx *x = arg;
	struct space_answer ra, *a = &ra;
	struct space_route r;
	json_t *req, *acc, *rj = NULL;
	int64_t exp = 0;
	int tries, ret = -EIO;

	if ((acc = access_array(x->want)) == NULL)
		return -ENOMEM;
	if ((req = json_pack("{s:o}", "access", acc)) == NULL)
		return -ENOMEM;
	space_answer_init(a);
	if (rejected != NULL) {
		/* the control plane must not answer with the route that was
		 * just refused: it says 503 while it converges */
		if ((rj = route_identity_pack(rejected)) == NULL ||
		    json_object_set_new(req, "rejected", rj) < 0) {
			json_decref(req);
			return -ENOMEM;
		}
	}
	for (tries = 1;; tries++) {
		ret = space_route_get(x->c, sandbox, req, &r, a);
		if (ret == 0 || a->status != 503 || tries >= RESOLVE_TRIES)
			break;
		{
			long w = a->retry_after < 1 ? 1 : a->retry_after;
			if (w > RESOLVE_WAIT_MAX)
				w = RESOLVE_WAIT_MAX;
			vlog(x, "control plane: %s; retry in %ld s", a->message[0] ? a->message :
			    "unavailable", w);
			sleep((unsigned)w);
		}
	}
	json_decref(req);
	if (ret < 0) {
		if (rejected != NULL) {
			/* the refusal stays the answer; why it could not be
			 * repaired goes with it */
			char why[256];
			space_answer_strerror(a, why, sizeof(why));
			snprintf(x->a->message, sizeof(x->a->message), "route repair failed: %s", why);
		} else {
			space_answer_clear(x->a);
			*x->a = *a;
			space_answer_init(a);
		}
		space_answer_clear(a);
		return ret;
	}
	space_answer_clear(a);
	memset(out, 0, sizeof(*out));
	if (route_identity_unpack(r.identity, &out->route) < 0 ||
	    strlen(r.endpoint) > SPACE_ENDPOINT_MAX || strlen(r.capability) > SPACE_TOKEN_MAX ||
	    rfc3339_parse(r.expires_at, strlen(r.expires_at), &exp) < 0) {
		space_answer_clear(x->a);
		snprintf(x->a->message, sizeof(x->a->message), "malformed route answer");
		space_route_free(&r);
		return -EPROTO;
	}
	snprintf(out->endpoint, sizeof(out->endpoint), "%s", r.endpoint);
	snprintf(out->capability, sizeof(out->capability), "%s", r.capability);
	out->access = x->want;
	out->cap_exp = exp;
	space_route_free(&r);
	return 0;
}

static int
sbx_op_once(const struct route_entry *e, const char *sock, const char *sbx,
    const struct space_data_op *op, struct space_answer *a, long connect_timeout)
{
	char url[SPACE_HTTP_URL_MAX + SPACE_PATH_MAX * 3 + 256], gen[24];
	char *esc;
	size_t epl;
	int n;

	if ((esc = space_url_escape(sbx)) == NULL)
		return -ENOMEM;
	epl = strlen(e->endpoint);
	while (epl > 0 && e->endpoint[epl - 1] == '/')
		epl--;
	n = snprintf(url, sizeof(url), "%.*s/v1/sandboxes/%s/%s", (int)epl, e->endpoint,
	    esc, op->path);
	free(esc);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		space_answer_clear(a);
		snprintf(a->message, sizeof(a->message), "URL too long");
		return -ENAMETOOLONG;
	}
	snprintf(gen, sizeof(gen), "%" PRIu64, e->route.generation);
	if (op->open_ws != NULL)
		return op->open_ws(op->ws_ctx, url, sock, e->capability, a);
	return http_exchange(url, sock, e->capability, op->method, op->body, op->in_fd,
	    op->out_fd, op->out_max, connect_timeout, op->timeout, gen, e->route.worker, a);
}

static enum route_outcome
op_attempt(void *arg, const struct route_entry *e)
{
	struct op_ctx *x = arg;
	struct space_answer *a = x->a;
	char gen[24], sock[SPACE_UNIX_PATH_MAX], via[SPACE_UNIX_PATH_MAX + 16];
	enum route_outcome o;
	int n = x->c->last.attempts + 1;

	x->c->last.attempts = n;
	if (x->repair_pending) {
		x->repair_pending = 0;
		x->c->rebuilt++;
	}
	if (x->op->in_fd >= 0 && x->op->in_once && x->in_taken > 0) {
		/* the upload went partly to an attempt that did not take it:
		 * it cannot be read again, so it is not sent again */
		space_answer_clear(a);
		a->status = 503;
		snprintf(a->error, sizeof(a->error), "unavailable");
		snprintf(a->message, sizeof(a->message), "the upload began on an execution that "
		    "was then replaced; nothing was written, send it again");
		return ROUTE_OK;        /* final: this answer is the caller's */
	}
	if (x->op->in_fd >= 0) {
		if (x->in_seekable) {
			if (lseek(x->op->in_fd, x->in_off, SEEK_SET) < 0) {
				space_answer_clear(a);
				snprintf(a->message, sizeof(a->message), "rewinding the input: %s",
				    strerror(errno));
				return ROUTE_DENY;      /* final: nothing more is tried */
			}
		}
	}
	if (endpoint_socket(e->endpoint, sock, sizeof(sock)) == 0)
		snprintf(via, sizeof(via), " through %s", sock);
	else
		sock[0] = via[0] = '\0';
	sbx_op_once(e, sock[0] ? sock : NULL, x->sbx, x->op, a, x->c->connect_timeout);
	x->in_taken += a->in_read;
	snprintf(gen, sizeof(gen), "%" PRIu64, e->route.generation);
	if (a->foreign) {
		/* final: a receiver that answers for another execution is
		 * not asked again, and nothing it sent was used */
		x->mismatch = 1;
		vlog(x, "attempt %d: gen %s on %s: %s (MISMATCH)", n, gen, e->route.worker,
		    a->message);
		return ROUTE_OK;
	}
	if (a->status == 0) {
		o = a->not_sent ? ROUTE_TRANSPORT_BEFORE_SEND : ROUTE_TRANSPORT_AFTER_SEND;
		/* part of the file already went to our output: sending the
		 * read again would repeat it */
		if (a->out_written > 0)
			x->ops->idempotent = false;
		vlog(x, "attempt %d: gen %s on %s at %s%s: %s (%s)", n, gen, e->route.worker,
		    e->endpoint, via, a->message, o == ROUTE_TRANSPORT_BEFORE_SEND ?
		    "not sent" : "may have been received");
		return o;
	}
	if (a->status == 409 && strcmp(a->error, "refresh_route") == 0)
		o = ROUTE_REFRESH;
	else if (a->status == 403 && strcmp(a->error, "deny") == 0)
		o = ROUTE_DENY;
	else if (a->status == 401 && strcmp(a->error, "capability_expired") == 0)
		o = ROUTE_EXPIRED;
	else if (a->status == 503 && strcmp(a->error, "unavailable") == 0 &&
	    strcmp(a->reason, "execution_replaced") == 0)
		/* forwarded, then cut when a replacement execution was
		 * installed: a read is sent again, a write is not */
		o = ROUTE_TRANSPORT_AFTER_SEND;
	else if (a->status == 503 && strcmp(a->error, "unavailable") == 0)
		/* node-api could not reach the execution: not forwarded */
		o = ROUTE_TRANSPORT_BEFORE_SEND;
	else
		o = ROUTE_OK;
	if (o != ROUTE_OK) {
		snprintf(x->refused, sizeof(x->refused), "gen %s on %s refused: %s (%.100s)",
		    gen, e->route.worker, a->error, a->reason[0] ? a->reason : a->message);
		vlog(x, "attempt %d: %s", n, x->refused);
		if (o != ROUTE_TRANSPORT_BEFORE_SEND)
			snprintf(x->c->refusal, sizeof(x->c->refusal), "%.150s", x->refused);
		return o;
	}
	/* a 2xx answer was checked by http_exchange before its body was
	 * used; an error answer names its execution too when it has one */
	if (a->generation[0] != '\0' && (strcmp(a->generation, gen) != 0 ||
	    strcmp(a->worker, e->route.worker) != 0))
		x->mismatch = 1;
	vlog(x, "attempt %d: gen %s on %s: HTTP %ld, served by gen %s on %s%s%s", n, gen,
	    e->route.worker, a->status, a->generation[0] ? a->generation : "-",
	    a->worker[0] ? a->worker : "-", x->mismatch ? " (MISMATCH)" : "", via);
	return ROUTE_OK;
}

static int
op_resolve_logged(void *arg, const char *sandbox, const struct route_identity *rejected,
    struct route_entry *out)
{
	struct op_ctx *x = arg;
	int r = op_resolve(arg, sandbox, rejected, out);

	if (r < 0)
		vlog(x, "resolve%s failed: %s", rejected ? " (with the rejected route)" : "",
		    x->a->message[0] ? x->a->message : strerror(-r));
	else if (rejected != NULL) {
		x->repair_pending = 1;
		vlog(x, "%s; repaired to gen %" PRIu64 " on %s; 1 rebuilt attempt",
		    x->refused[0] ? x->refused : "refused", out->route.generation,
		    out->route.worker);
	} else
		vlog(x, "resolved: gen %" PRIu64 " on %s at %s", out->route.generation,
		    out->route.worker, out->endpoint);
	return r;
}

/* An upload from a pipe is copied first into an unnamed temporary file
 * (O_TMPFILE: never linked, 0600), so that the one rebuilt attempt after a
 * route repair can send it again; memory stays bounded whatever its size.
 * The fd, or a negative errno with a->message set. */
static int
spool_input(int in_fd, struct space_answer *a)
{
	const char *dir = getenv("TMPDIR");
	char *buf;
	ssize_t r;
	int fd, err = 0;

	if (dir == NULL || dir[0] != '/')
		dir = "/tmp";
	fd = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0) {
		snprintf(a->message, sizeof(a->message), "cannot spool the input in %s: %s", dir,
		    strerror(errno));
		return -errno;
	}
	if ((buf = malloc(SPOOL_BUF)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		r = read(in_fd, buf, SPOOL_BUF);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			err = -errno;
		if (r <= 0 || (err = fd_write_all(fd, buf, (size_t)r)) < 0)
			break;
	}
	free(buf);
	if (err == 0 && lseek(fd, 0, SEEK_SET) != 0)
		err = -errno;
	if (err < 0) {
		snprintf(a->message, sizeof(a->message), "spooling the input: %s", strerror(-err));
		close(fd);
		return err;
	}
	return fd;
}

int
space_sbx_op(struct space_client *c, const char *sbx,
    const struct space_data_op *op, struct space_answer *a)
{
	struct route_ops ops;
	struct route_call_result res;
	struct route_entry held;
	struct route_cache *rc;
	struct op_ctx x;
	struct space_data_op local;
	uint32_t need = 0;
	int ret, spool = -1;

	memset(&c->last, 0, sizeof(c->last));
	c->rebuilt = 0;
	c->refusal[0] = '\0';
	space_answer_clear(a);
	if (acc_parse_list(op->access, &need) < 0) {
		snprintf(a->message, sizeof(a->message), "unknown access '%s'", op->access);
		return -EINVAL;
	}
	if ((rc = space_client_routes(c)) == NULL) {
		snprintf(a->message, sizeof(a->message), "route cache: %s", strerror(errno));
		return -errno;
	}
	memset(&x, 0, sizeof(x));
	memset(&ops, 0, sizeof(ops));
	x.c = c;
	x.sbx = sbx;
	x.op = op;
	x.ops = &ops;
	x.a = a;
	/* Ask for what this operation needs, plus what the cached
	 * capability already grants, so one entry serves the next verbs
	 * without widening anything beyond what this client used. */
	x.want = need;
	if (route_cache_get(rc, sbx, (int64_t)time(NULL), &held) == 0)
		x.want |= held.access;
	sodium_memzero(&held, sizeof(held));
	if (op->in_fd >= 0) {
		struct stat st;
		x.in_off = lseek(op->in_fd, 0, SEEK_CUR);
		x.in_seekable = x.in_off >= 0 && fstat(op->in_fd, &st) == 0 &&
		    S_ISREG(st.st_mode);
		if (!x.in_seekable && !op->in_once &&
		    (spool = spool_input(op->in_fd, a)) < 0) {
			ret = spool;
			spool = -1;
			goto out;
		}
		if (spool >= 0) {
			/* the rebuilt attempt reads the upload again from here */
			local = *op;
			local.in_fd = spool;
			x.op = &local;
			x.in_off = 0;
			x.in_seekable = 1;
		}
	}
	ops.resolve = op_resolve_logged;
	ops.attempt = op_attempt;
	ops.access = need;
	/* reads have no effect: a transport failure after sending may
	 * send them again; exec and writes never run twice */
	ops.idempotent = strcmp(op->method, "GET") == 0;

	ret = route_call(rc, sbx, &ops, &x, &res);
	c->last = res;
	vlog(&x, "done: %d attempt%s, %d resolve%s, %d rebuilt attempt%s, result %s%s",
	    res.attempts, res.attempts == 1 ? "" : "s", res.resolves,
	    res.resolves == 1 ? "" : "s", c->rebuilt, c->rebuilt == 1 ? "" : "s",
	    x.mismatch ? "refused (another execution answered)" : ret == 0 ? "answer" :
	    strerror(-ret), res.from_cache ? "; first route from the cache" : "");
	if (ret == -EACCES && res.outcome == ROUTE_DENY && res.from_cache && !res.repaired &&
	    !res.renewed && !res.transport_retried)
		/* a cached capability that is denied is not used again: the
		 * next call asks the control plane (this one is not retried) */
		route_cache_drop(rc, sbx, &res.route);
	if (x.mismatch) {
		snprintf(a->message, sizeof(a->message), "the answer came from gen %s on %s, "
		    "not from gen %" PRIu64 " on %s that the capability names; refused",
		    a->generation[0] ? a->generation : "-", a->worker[0] ? a->worker : "-",
		    res.route.generation, res.route.worker);
		a->status = 0;
		ret = -EPROTO;
		goto out;
	}
	if (ret == -ESTALE)
		snprintf(a->message + strlen(a->message), sizeof(a->message) - strlen(a->message),
		    "%s", " [refused again after one rebuilt attempt]");
	/* an answer arrived: the caller reads its status */
	if (ret < 0 && a->status != 0)
		ret = 0;
	if (ret < 0 && a->message[0] == '\0')
		snprintf(a->message, sizeof(a->message), "%s", strerror(-ret));
out:
	if (spool >= 0)
		close(spool);
	return ret < 0 ? ret : 0;
}
