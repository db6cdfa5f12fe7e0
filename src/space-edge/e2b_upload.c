/* /files uploads of the E2B sandbox API, streamed to the sandbox as they
 * arrive (docs/e2b.md, "Files"): never held whole, in memory or on disk.
 *
 * The upload is admitted with the request's head (sandbox id, port, access
 * token: the checks e2b_envd() answers with), before any of its body is
 * read. Each file (a multipart part, or the one octet-stream body) then
 * goes as it comes: its parent directory is made first (one node-api call
 * through the route cache, which also resolves and checks the route), then
 * a sender thread runs the node-api PUT reading a socket pair, and the
 * connection's thread writes the body into the other end. Memory per
 * upload is bounded by the socket buffers, libcurl's upload buffer and
 * libmicrohttpd's connection buffer, whatever the file's size; a slow
 * sandbox slows the client down (the socket pair fills up).
 *
 * The route cache rules hold with one difference (libspace's in_once): a
 * part whose first bytes were taken by an attempt that was then refused
 * (its execution replaced between the parent's creation and the PUT) is
 * not sent again, since those bytes are gone; the answer is `unavailable`
 * and nothing was written. After the first failed part, the rest of the
 * body is read and dropped, and the answer is that failure. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sodium.h>
#include <zlib.h>

#include "e2b.h"
#include "limits.h"
#include "log.h"
#include "util.h"

#define UPLOAD_SOCKBUF  (64u << 10)     /* the socket pair's send buffer */

struct e2b_upload {
	char sbx[SPACE_ID_MAX + 1];
	char key[SPACE_TOKEN_MAX + 1];
	char qpath[SPACE_PATH_MAX + 1];         /* ?path=, "" when absent */
	unsigned nparts;
	uint64_t total;                         /* bytes of every part so far */
	json_t *done;                           /* the written files' entries */
	/* the part being sent: its name as the request gave it, its bytes */
	bool sending;
	char part_name[SPACE_PATH_MAX + 1];
	uint64_t part_bytes;
	int wfd, rfd;
	pthread_t t;
	char path[SPACE_PATH_MAX + 1];
	struct space_answer a;
	int rc;
	/* Content-Encoding: gzip (an octet-stream upload of the SDK's
	 * files.write(..., {gzip: true})): inflated as it arrives */
	bool gzip, gz_end;
	z_stream z;
	/* the first failure: its status and message; the rest is dropped */
	unsigned err_status;
	char err[600];
};

static void
fail(struct e2b_upload *u, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void
fail(struct e2b_upload *u, unsigned status, const char *fmt, ...)
{
	va_list ap;

	if (u->err_status)
		return;
	u->err_status = status;
	va_start(ap, fmt);
	vsnprintf(u->err, sizeof(u->err), fmt, ap);
	va_end(ap);
}

/* one node-api operation with the caller's token (the route cache rules) */
static int
op(struct e2b_upload *u, struct space_data_op *o, struct space_answer *a)
{
	struct e2b_cl *cl;
	int r;

	space_answer_init(a);
	if ((cl = e2b_client(u->key)) == NULL) {
		a->status = 503;
		snprintf(a->message, sizeof(a->message), "too many clients at once");
		return -EBUSY;
	}
	r = space_sbx_op(e2b_cl_client(cl), u->sbx, o, a);
	e2b_client_release(cl);
	return r;
}

static void *
sender(void *arg)
{
	struct e2b_upload *u = arg;
	struct space_data_op o;
	char *esc = space_url_escape(u->path), *q = NULL;

	memset(&o, 0, sizeof(o));
	if (esc == NULL || asprintf(&q, "files?path=%s", esc) < 0) {
		q = NULL;
		space_answer_init(&u->a);
		snprintf(u->a.message, sizeof(u->a.message), "out of memory");
		u->rc = -ENOMEM;
	} else {
		o.access = "fs:w";
		o.method = "PUT";
		o.path = q;
		o.in_fd = u->rfd;
		o.in_once = 1;
		o.out_fd = -1;
		o.timeout = 0;          /* as long as the client sends; a stall of 60 s ends it */
		u->rc = op(u, &o, &u->a);
	}
	free(esc);
	free(q);
	/* the writer sees EPIPE from here on, if it is still writing */
	shutdown(u->rfd, SHUT_RDWR);
	return NULL;
}

/* waits for the part being sent and records its outcome */
static void
part_end(struct e2b_upload *u)
{
	const char *slash;

	if (!u->sending)
		return;
	close(u->wfd);                  /* end of the part's body */
	u->wfd = -1;
	pthread_join(u->t, NULL);
	close(u->rfd);
	u->rfd = -1;
	u->sending = false;
	if (u->rc < 0 || !space_answer_ok(&u->a)) {
		fail(u, e2b_status_of(&u->a), "%s: %s", u->path, e2b_msg_of(&u->a));
	} else {
		slash = strrchr(u->path, '/');
		json_array_append_new(u->done, json_pack("{s:s,s:s,s:s}", "name",
		    slash ? slash + 1 : u->path, "type", "file", "path", u->path));
	}
	space_answer_clear(&u->a);
}

/* ends the part being sent as a cut body: its reader gets ECONNRESET
 * (a byte left unread in the closing end's queue makes Linux report it to
 * the peer) instead of an end of file, so libcurl aborts the chunked
 * body and the guest, which writes into a temporary file renamed only
 * once the body is whole, keeps nothing of it */
static void
part_abort(struct e2b_upload *u)
{
	if (!u->sending)
		return;
	(void)send(u->rfd, "x", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	part_end(u);
}

/* the parent directory of path, made (as envd does); 0 or -1 failed */
static int
make_parent(struct e2b_upload *u, const char *path)
{
	char parent[SPACE_PATH_MAX + 1], *slash;
	struct space_data_op o;
	struct space_answer a;
	json_t *b;
	int r;

	snprintf(parent, sizeof(parent), "%s", path);
	if ((slash = strrchr(parent, '/')) == NULL || slash == parent)
		return 0;               /* the root is there */
	*slash = '\0';
	b = json_pack("{s:s,s:b}", "path", parent, "parents", 1);
	memset(&o, 0, sizeof(o));
	o.access = "fs:w";
	o.method = "POST";
	o.path = "fs/mkdir";
	o.body = b;
	o.in_fd = o.out_fd = -1;
	o.timeout = 120;
	r = op(u, &o, &a);
	json_decref(b);
	if (r < 0 || !space_answer_ok(&a)) {
		fail(u, e2b_status_of(&a), "%s: %s", path, e2b_msg_of(&a));
		space_answer_clear(&a);
		return -1;
	}
	space_answer_clear(&a);
	return 0;
}

/* an absolute path inside the sandbox (relative ones are under the home) */
static int
abs_path(const char *p, char *out, size_t cap)
{
	int n;

	if (p[0] == '/')
		n = snprintf(out, cap, "%s", p);
	else
		n = snprintf(out, cap, "%s/%s", E2B_HOME, p);
	return n < 0 || (size_t)n >= cap || (size_t)n > SPACE_PATH_MAX ? -1 : 0;
}

struct e2b_upload *
e2b_upload_new(struct MHD_Connection *c)
{
	const char *sbx = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Id");
	const char *port = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Access-Token");
	const char *qp = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "path");
	struct e2b_upload *u;

	if (key == NULL)
		key = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-API-KEY");
	/* the checks e2b_envd() answers with: not admitted, nothing is sent */
	if (sbx == NULL || !id_valid(sbx) || (port && strcmp(port, "49983") != 0) ||
	    !e2b_key_ok(key) || strlen(key) > SPACE_TOKEN_MAX)
		return NULL;
	if ((u = calloc(1, sizeof(*u))) == NULL)
		return NULL;
	if ((u->done = json_array()) == NULL) {
		free(u);
		return NULL;
	}
	snprintf(u->sbx, sizeof(u->sbx), "%s", sbx);
	snprintf(u->key, sizeof(u->key), "%s", key);
	if (qp && *qp && abs_path(qp, u->qpath, sizeof(u->qpath)) < 0)
		fail(u, 400, "each file needs a path (at most %d bytes)", SPACE_PATH_MAX);
	u->wfd = u->rfd = -1;
	return u;
}

int
e2b_upload_part(struct e2b_upload *u, const char *filename)
{
	int sv[2], sz = UPLOAD_SOCKBUF;

	/* libmicrohttpd may announce a part with an empty piece at offset 0
	 * and then give its first bytes at offset 0 again (a body sent in
	 * several chunks, as Node.js sends a small file): the same part, not
	 * a second file */
	if (u->sending && u->part_bytes == 0 &&
	    strcmp(filename ? filename : "", u->part_name) == 0)
		return 0;
	part_end(u);
	if (u->err_status)
		return -1;
	if (u->nparts >= E2B_UPLOAD_FILES_MAX) {
		fail(u, 400, "too many files in one upload");
		return -1;
	}
	/* ?path= names the first file; the others are named by their part */
	if (u->nparts == 0 && u->qpath[0])
		snprintf(u->path, sizeof(u->path), "%s", u->qpath);
	else if (filename == NULL || !*filename || abs_path(filename, u->path, sizeof(u->path)) < 0) {
		fail(u, 400, "each file needs a path");
		return -1;
	}
	u->nparts++;
	snprintf(u->part_name, sizeof(u->part_name), "%s", filename ? filename : "");
	u->part_bytes = 0;
	if (make_parent(u, u->path) < 0)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) {
		fail(u, 500, "cannot stream the upload: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
	u->rfd = sv[0];
	u->wfd = sv[1];
	space_answer_init(&u->a);
	if (pthread_create(&u->t, NULL, sender, u) != 0) {
		close(sv[0]);
		close(sv[1]);
		u->rfd = u->wfd = -1;
		fail(u, 503, "cannot stream the upload now");
		return -1;
	}
	u->sending = true;
	return 0;
}

static int send_plain(struct e2b_upload *u, const char *data, size_t n);

int
e2b_upload_gzip(struct e2b_upload *u)
{
	memset(&u->z, 0, sizeof(u->z));
	/* 16 + MAX_WBITS: a gzip member, its header and trailer checked */
	if (inflateInit2(&u->z, 16 + MAX_WBITS) != Z_OK) {
		fail(u, 500, "cannot inflate the upload");
		return -1;
	}
	u->gzip = true;
	return 0;
}

int
e2b_upload_data(struct e2b_upload *u, const char *data, size_t n)
{
	unsigned char out[64 << 10];
	int zr;

	if (!u->gzip)
		return send_plain(u, data, n);
	if (u->err_status || !u->sending)
		return -1;
	u->z.next_in = (unsigned char *)(uintptr_t)data;
	u->z.avail_in = (uInt)n;
	/* until the input is used up and nothing more is pending (a full
	 * output buffer may leave some in zlib), or the member ends */
	while (!u->gz_end) {
		u->z.next_out = out;
		u->z.avail_out = sizeof(out);
		zr = inflate(&u->z, Z_NO_FLUSH);
		if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
			fail(u, 400, "the body is not gzip (Content-Encoding: gzip): %s",
			    u->z.msg ? u->z.msg : "inflate failed");
			part_abort(u);
			return -1;
		}
		if (sizeof(out) - u->z.avail_out > 0 &&
		    send_plain(u, (const char *)out, sizeof(out) - u->z.avail_out) < 0)
			return -1;
		if (zr == Z_STREAM_END)
			u->gz_end = true;
		else if (zr == Z_BUF_ERROR || (u->z.avail_in == 0 && u->z.avail_out != 0))
			break;          /* more input wanted */
	}
	if (u->gz_end && u->z.avail_in > 0) {
		fail(u, 400, "bytes after the gzip body");
		part_abort(u);
		return -1;
	}
	return 0;
}

static int
send_plain(struct e2b_upload *u, const char *data, size_t n)
{
	size_t off = 0;
	ssize_t w;

	if (u->err_status || !u->sending)
		return -1;              /* dropped: the answer is the failure */
	if (n > E2B_UPLOAD_MAX - u->total) {
		fail(u, 400, "upload larger than %u MiB", (unsigned)(E2B_UPLOAD_MAX >> 20));
		part_abort(u);
		return -1;
	}
	u->total += n;
	u->part_bytes += n;
	while (off < n) {
		w = send(u->wfd, data + off, n - off, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			/* the sender ended early: node-api refused the part, or
			 * the sandbox went; its answer says why */
			part_end(u);
			fail(u, 502, "the sandbox stopped taking the upload");
			return -1;
		}
		off += (size_t)w;
	}
	return 0;
}

bool
e2b_upload_failed(const struct e2b_upload *u)
{
	return u->err_status != 0;
}

enum MHD_Result
e2b_upload_answer(struct e2b_upload *u, struct MHD_Connection *c)
{
	json_t *out;

	/* a gzip body cut short ends no file */
	if (u->gzip && !u->gz_end && !u->err_status && u->sending) {
		fail(u, 400, "the gzip body ends before its end");
		part_abort(u);
	}
	part_end(u);
	if (u->err_status)
		return e2b_api_error(c, u->err_status, "%s", u->err);
	if (u->nparts == 0)
		return e2b_api_error(c, 400, "no file in the upload");
	out = u->done;
	u->done = NULL;
	return e2b_send_json(c, 200, out);
}

void
e2b_upload_free(struct e2b_upload *u)
{
	if (u == NULL)
		return;
	/* the client went away mid-part: nothing of it is kept */
	part_abort(u);
	if (u->gzip)
		inflateEnd(&u->z);
	json_decref(u->done);
	sodium_memzero(u->key, sizeof(u->key));
	free(u);
}
