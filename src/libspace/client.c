/* HTTP client on libcurl: JSON requests with a bearer, streamed uploads and
 * downloads, error decoding. See client.h. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <jansson.h>
#include <sodium.h>

#include "client.h"
#include "limits.h"

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
	int read_failed;        /* errno of a failed read from in_fd */
	int is_json;
};

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
	size_t n = sz * nm, off;
	long st = xfer_status(x);

	if (x->out_fd >= 0 && st >= 200 && st < 300) {
		for (off = 0; off < n;) {
			ssize_t w = write(x->out_fd, p + off, n - off);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				x->write_failed = w < 0 ? errno : EIO;
				return 0;       /* aborts the transfer */
			}
			off += (size_t)w;
		}
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

int
space_http(const char *url, const char *bearer, const char *method,
    json_t *body, int in_fd, int out_fd, long connect_timeout, long timeout,
    struct space_answer *a)
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
	x.in_fd = in_fd;
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
	curl_easy_setopt(x.h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(x.h, CURLOPT_WRITEDATA, &x);
	curl_easy_setopt(x.h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(x.h, CURLOPT_HEADERDATA, &x);

	if (in_fd >= 0) {
		/* streamed: the body is never held whole, so a file of any
		 * size goes through; a regular file gets a Content-Length,
		 * a pipe is sent chunked */
		curl_easy_setopt(x.h, CURLOPT_UPLOAD, 1L);
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

static int
sbx_op_once(const struct space_route *r, const char *sbx,
    const struct space_data_op *op, struct space_answer *a, long connect_timeout)
{
	char url[SPACE_HTTP_URL_MAX + SPACE_PATH_MAX * 3 + 256];
	char *esc;
	size_t epl;
	int n;

	if ((esc = space_url_escape(sbx)) == NULL)
		return -ENOMEM;
	epl = strlen(r->endpoint);
	while (epl > 0 && r->endpoint[epl - 1] == '/')
		epl--;
	n = snprintf(url, sizeof(url), "%.*s/v1/sandboxes/%s/%s", (int)epl, r->endpoint,
	    esc, op->path);
	free(esc);
	if (n < 0 || (size_t)n >= sizeof(url)) {
		space_answer_clear(a);
		snprintf(a->message, sizeof(a->message), "URL too long");
		return -ENAMETOOLONG;
	}
	return space_http(url, r->capability, op->method, op->body, op->in_fd,
	    op->out_fd, connect_timeout, op->timeout, a);
}

int
space_sbx_op(struct space_client *c, const char *sbx,
    const struct space_data_op *op, struct space_answer *a)
{
	struct space_route r;
	json_t *req;
	int ret;

	/* ask for exactly the access this operation needs: a leaked
	 * capability should grant no more than the call that made it */
	req = json_pack("{s:[s]}", "access", op->access);
	if (req == NULL)
		return -ENOMEM;
	ret = space_route_get(c, sbx, req, &r, a);
	json_decref(req);
	if (ret < 0)
		return ret;
	/* Route repair (DESIGN section 8) goes here: on 409 refresh_route,
	 * ask again sending r.identity as "rejected" and retry once; on 401
	 * capability_expired renew and retry once; never retry a deny. */
	ret = sbx_op_once(&r, sbx, op, a, c->connect_timeout);
	space_route_free(&r);
	return ret;
}
