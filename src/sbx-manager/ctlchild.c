/* sbx-manager's control-plane client (docs/worker.md, "The control-plane
 * client"): the only process of the worker that speaks HTTP to
 * space-control and parses its JSON. sbx-manager execs it as
 * `sbx-manager control-client URL WORKER PARENT_PID [-v]` with the socket
 * pair on fd 3 and the credential file open on fd 4.
 *
 * Order matters:
 *   1. read the credential from fd 4 and close it (still root: the file
 *      is root's); the parent never reads it;
 *   2. libcurl's global set-up (it may read files);
 *   3. drop the bounding set, change to the unprivileged uid (the kernel
 *      clears the permitted and effective sets; checked), parent-death
 *      signal, no_new_privs, not dumpable;
 *   4. the seccomp allow list;
 *   5. then the first request. Each request runs on a thread of its own
 *      (the assignments long-poll lasts up to half a minute); the answer
 *      goes back re-encoded in ctlmsg.h's messages, never as JSON. */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <pwd.h>
#include <seccomp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "ctlmsg.h"
#include "dropuid.h"
#include "log.h"
#include "msg.h"
#include "sbx-manager.h"
#include "tplimage.h"
#include "util.h"

#define SOCK_FD         3
#define CRED_FD         4
#define RESP_MAX        (4u << 20)      /* a JSON answer, bytes */
#define INFLIGHT_MAX    32              /* requests served at once */
#define EXIT_BAD_CRED   78              /* the parent stops: a config error */

#define IDLE_KEEP_S     10              /* an idle job thread waits this long for the next */

struct job;

struct ctlc {
	char url[1024];
	char worker[SPACE_ID_MAX + 1];
	char credential[512];
	pthread_mutex_t send_lock;
	atomic_uint inflight;
	/* job threads kept after their job: the next request is handed to
	 * one (a wake-up) instead of a thread started for it (a report
	 * that starts a thread waits for the clone, its stack and its
	 * first scheduling; a create's report is on its client's path) */
	pthread_mutex_t idle_lock;
	pthread_cond_t idle_cv;
	struct job *handed;             /* the job given to an idle thread, not yet taken */
	unsigned idle;                  /* threads waiting for a job */
};

struct job {
	struct ctlc *c;
	struct ctlmsg req;
	int fd;
};

static noreturn void
die(const char *what)
{
	log_warn("control client: %s", what);
	_exit(1);
}

static void
read_credential(struct ctlc *c)
{
	ssize_t n;
	size_t len;

	n = pread(CRED_FD, c->credential, sizeof(c->credential) - 1, 0);
	close(CRED_FD);
	if (n <= 0)
		_exit(EXIT_BAD_CRED);
	len = (size_t)n;
	c->credential[len] = '\0';
	while (len && (c->credential[len - 1] == '\n' || c->credential[len - 1] == '\r' ||
	    c->credential[len - 1] == ' '))
		c->credential[--len] = '\0';
	if (len == 0 || strlen(c->credential) != len || strpbrk(c->credential, "\r\n \t") != NULL) {
		explicit_bzero(c->credential, sizeof(c->credential));
		_exit(EXIT_BAD_CRED);
	}
}

static void
drop_privileges(pid_t parent)
{
	struct passwd *pw = getpwnam("nobody");
	uid_t uid = pw ? pw->pw_uid : 65534;
	gid_t gid = pw ? pw->pw_gid : 65534;
	const char *why;

	if (uid == 0 || gid == 0)
		die("\"nobody\" is root");
	/* sbx-manager's death (even SIGKILL) ends us */
	if ((why = drop_to_uid(uid, gid, parent)) != NULL)
		die(why);
}

/* What an HTTP client needs: sockets of the internet families (and
 * AF_UNIX / AF_NETLINK, which the resolver of the C library uses), files
 * opened read-only (resolv.conf, hosts, CA certificates), threads. No
 * exec, no fork, no open for writing, no kill but of ourselves, no
 * ptrace, no mount, no id change. Anything else fails with EPERM. */
static void
confine(void)
{
	static const char *const allow[] = {
		"read", "write", "readv", "writev", "pread64", "close", "poll", "ppoll",
		"select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
		"connect", "recvfrom", "recvmsg", "recvmmsg", "sendto", "sendmsg", "sendmmsg",
		"shutdown", "getsockopt", "setsockopt", "getsockname", "getpeername", "bind",
		"socketpair", "pipe2", "eventfd2", "fcntl", "fstat", "newfstatat", "statx",
		"lseek", "access", "faccessat", "faccessat2", "readlink", "getdents64",
		"mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
		"futex", "set_robust_list", "get_robust_list", "rseq", "sched_yield",
		"sched_getaffinity", "getrandom", "rt_sigaction", "rt_sigprocmask",
		"rt_sigreturn", "sigaltstack", "restart_syscall", "clock_gettime",
		"clock_getres", "clock_nanosleep", "nanosleep", "gettimeofday", "time",
		"getpid", "gettid", "getppid", "getuid", "geteuid", "getgid", "getegid",
		"uname", "sysinfo", "exit", "exit_group", "membarrier", NULL
	};
	scmp_filter_ctx ctx;
	size_t i;
	int r = 0;

	if ((ctx = confine_threads_only(allow, &r)) == NULL)
		die("seccomp filter");
	for (i = 0; r == 0 && i < 4; i++) {
		static const int fam[] = { AF_INET, AF_INET6, AF_UNIX, AF_NETLINK };
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)fam[i]));
	}
	/* files read-only */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
		    SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC, O_RDONLY));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		    SCMP_A1(SCMP_CMP_EQ, FIONREAD));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
		    SCMP_A1(SCMP_CMP_EQ, FIONBIO));
	/* reading our own limits, never setting one */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
		    SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)getpid()));
	if (r == 0)
		r = seccomp_load(ctx);
	seccomp_release(ctx);
	if (r < 0)
		die("seccomp filter");
}

struct buf {
	char *p;
	size_t n;
	bool over;
	int fd;                         /* >= 0: the bytes go there */
	uint64_t total;
	uint64_t max;                   /* with fd: the most bytes taken */
	char *wb;                       /* with fd: pieces gathered for one write */
	size_t wn;
	int up_fd;                      /* > 0: the request's body is this file */
	bool up_pipe;                   /* ... or this pipe, to its end (chunked) */
	uint64_t up_size, up_off;
};

/* Bytes for a descriptor (a pipe to the parent) are written in pieces of
 * this size: libcurl hands the body over 16 KiB at a time, and a pipe
 * write per piece wakes the reader each time (writing 1 GiB in 16 KiB
 * pieces cost the writer about 0.9 CPU-seconds more than in 512 KiB ones
 * and the reader 0.5 to 0.8 more: docs/benchmarks.md) */
#define BODY_PIECE (512u << 10)

/* what was gathered, written out: at a full piece and at the end */
static bool
body_flush(struct buf *b)
{
	bool ok = b->wn == 0 || fd_write_all(b->fd, b->wb, b->wn) == 0;

	b->wn = 0;
	return ok;
}

static size_t
on_body(char *data, size_t sz, size_t nm, void *arg)
{
	struct buf *b = arg;
	size_t n = sz * nm, take;
	char *np;

	if (b->fd >= 0) {
		if (b->total + n > b->max) {
			b->over = true;
			return 0;
		}
		b->total += n;
		if (b->wb == NULL && (b->wb = malloc(BODY_PIECE)) == NULL)
			return fd_write_all(b->fd, data, n) == 0 ? n : 0;
		for (size_t off = 0; off < n; off += take) {
			take = n - off < BODY_PIECE - b->wn ? n - off : BODY_PIECE - b->wn;
			memcpy(b->wb + b->wn, data + off, take);
			b->wn += take;
			if (b->wn == BODY_PIECE && !body_flush(b))
				return 0;
		}
		return n;
	}
	if (b->n + n > RESP_MAX) {
		b->over = true;
		return 0;
	}
	if ((np = realloc(b->p, b->n + n + 1)) == NULL)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* the upload's bytes, read from the file the parent opened (pread: the
 * descriptor's offset is not ours to move) */
static size_t
on_upload(char *data, size_t sz, size_t nm, void *arg)
{
	struct buf *b = arg;
	size_t want = sz * nm;
	ssize_t n;

	if (b->up_pipe) {
		/* an archive while it is made: until the parent closes the
		 * pipe; never more than a control plane keeps by default */
		while ((n = read(b->up_fd, data, want)) < 0 && errno == EINTR)
			;
		if (n < 0 || b->up_off + (uint64_t)n > SPACE_ARCHIVE_MAX)
			return CURL_READFUNC_ABORT;
		b->up_off += (uint64_t)n;
		return (size_t)n;
	}
	if (b->up_off >= b->up_size)
		return 0;
	if (want > b->up_size - b->up_off)
		want = (size_t)(b->up_size - b->up_off);
	while ((n = pread(b->up_fd, data, want, (off_t)b->up_off)) < 0 && errno == EINTR)
		;
	if (n <= 0)
		return CURL_READFUNC_ABORT;     /* shorter than it was: no upload */
	b->up_off += (uint64_t)n;
	return (size_t)n;
}

/* Idle curl handles, with the connections they keep to space-control: a
 * small request (a report, a heartbeat, the next long-poll) takes one and
 * reuses its connection instead of a new TCP connection, and a new thread
 * on space-control's side, per request (a burst of creates is reported
 * one request per state change). A handle is reset (curl_easy_reset: every
 * option back to its default, the connection cache kept) before each
 * use, so nothing of one request (headers, body, credential) outlives it;
 * a handle whose transfer failed, or that streamed, is not kept. */
#define IDLE_HANDLES 8
static pthread_mutex_t idle_mu = PTHREAD_MUTEX_INITIALIZER;
static CURL *idle_h[IDLE_HANDLES];
static unsigned idle_n;

static CURL *
handle_take(void)
{
	CURL *cu = NULL;

	pthread_mutex_lock(&idle_mu);
	if (idle_n > 0)
		cu = idle_h[--idle_n];
	pthread_mutex_unlock(&idle_mu);
	if (cu != NULL) {
		curl_easy_reset(cu);
		return cu;
	}
	return curl_easy_init();
}

static void
handle_put(CURL *cu, bool keep)
{
	if (keep) {
		pthread_mutex_lock(&idle_mu);
		if (idle_n < IDLE_HANDLES) {
			idle_h[idle_n++] = cu;
			cu = NULL;
		}
		pthread_mutex_unlock(&idle_mu);
	}
	if (cu != NULL)
		curl_easy_cleanup(cu);
}

/* one request: result NO_ANSWER (no HTTP answer), REFUSED (not 2xx) or
 * OK with *status; the body in b (b->p malloc'd, or written to b->fd) */
static enum ctl_result
http_call(struct ctlc *c, const char *method, const char *path, const char *body,
    long timeout_s, bool auth, bool stream, uint16_t *status, struct buf *b)
{
	char url[2048], authz[600];
	struct curl_slist *h = NULL;
	CURL *cu;
	CURLcode rc;
	long st = 0;
	enum ctl_result res = CTL_NO_ANSWER;

	*status = 0;
	if ((cu = stream ? curl_easy_init() : handle_take()) == NULL)
		return CTL_NO_ANSWER;
	snprintf(url, sizeof(url), "%s%s", c->url, path);
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_CUSTOMREQUEST, method);
	if (stream) {
		/* no total timeout (images are large); a stalled transfer ends */
		curl_easy_setopt(cu, CURLOPT_LOW_SPEED_LIMIT, 1024L);
		curl_easy_setopt(cu, CURLOPT_LOW_SPEED_TIME, 30L);
		/* large pieces: fewer calls per byte of an archive or image
		 * (libcurl's defaults are 16 KiB down, 64 KiB up) */
		curl_easy_setopt(cu, CURLOPT_BUFFERSIZE, 512L << 10);
		curl_easy_setopt(cu, CURLOPT_UPLOAD_BUFFERSIZE, 512L << 10);
	} else
		curl_easy_setopt(cu, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(cu, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, b);
	if (auth) {
		snprintf(authz, sizeof(authz), "Authorization: Bearer %s", c->credential);
		h = curl_slist_append(h, authz);
		explicit_bzero(authz, sizeof(authz));
	}
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(cu, CURLOPT_POSTFIELDS, body);
	}
	if (b->up_fd > 0) {
		h = curl_slist_append(h, "Content-Type: application/octet-stream");
		curl_easy_setopt(cu, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(cu, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(cu, CURLOPT_READDATA, b);
		/* a pipe's length is known at its end only: chunked */
		curl_easy_setopt(cu, CURLOPT_INFILESIZE_LARGE,
		    b->up_pipe ? (curl_off_t)-1 : (curl_off_t)b->up_size);
	}
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(cu);
	/* the rest of the body, before the caller closes its descriptor */
	if (b->fd >= 0 && !body_flush(b) && rc == CURLE_OK)
		rc = CURLE_WRITE_ERROR;
	free(b->wb);
	b->wb = NULL;
	curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &st);
	if (st > 0 && st <= 999)
		*status = (uint16_t)st;
	if (rc == CURLE_OK)
		res = st >= 200 && st < 300 ? CTL_OK : CTL_REFUSED;
	else if (*status >= 200 && *status < 300 && b->over)
		res = CTL_MALFORMED;    /* answered, but more than we take */
	else if (*status && (*status < 200 || *status >= 300))
		res = CTL_REFUSED;
	else
		log_debug("control client: %s %s: %s", method, path, curl_easy_strerror(rc));
	/* the header list (with the credential) is freed: the handle is
	 * reset before its next use, so it never reads it again */
	curl_slist_free_all(h);
	handle_put(cu, !stream && rc == CURLE_OK && b->up_fd <= 0);
	return res;
}

static void
answer(struct ctlc *c, const struct ctlmsg *m)
{
	int r;

	pthread_mutex_lock(&c->send_lock);
	r = ctlmsg_send(SOCK_FD, m, -1);
	pthread_mutex_unlock(&c->send_lock);
	if (r < 0 && r != -EINVAL)
		_exit(0);       /* the parent is gone */
	if (r == -EINVAL)
		log_warnx("control client: cannot encode an answer of type %u", m->type);
}

/* {"bundle":"..."}: the signed bundle, verified by the parent */
static void
do_keys(struct ctlc *c, const struct ctlmsg *q)
{
	struct ctlmsg a = { .type = CTL_KEYS, .id = q->id };
	struct buf b = { .fd = -1 };
	const char *bundle = NULL;
	json_t *j = NULL;

	a.result = http_call(c, "GET", "/v1/keys", NULL, 10, false, false, &a.status, &b);
	if (a.result == CTL_OK) {
		a.result = CTL_MALFORMED;
		if (b.p && (j = json_loads(b.p, JSON_REJECT_DUPLICATES, NULL)) != NULL &&
		    json_unpack(j, "{s:s}", "bundle", &bundle) == 0 &&
		    strlen(bundle) <= SPACE_BUNDLE_TOKEN_MAX) {
			a.text = (char *)bundle;
			a.text_len = strlen(bundle);
			a.result = CTL_OK;
		}
	}
	answer(c, &a);
	json_decref(j);
	free(b.p);
}

static void
do_assignments(struct ctlc *c, const struct ctlmsg *q)
{
	struct ctlmsg a = { .type = CTL_ASSIGNMENTS, .id = q->id };
	struct ctlmsg one = { .type = CTL_ASSIGNMENT, .id = q->id };
	struct msg_assignments ms = { 0 };
	struct buf b = { .fd = -1 };
	uint8_t rec[MSG_ASSIGNMENT_WIRE_LEN];
	char path[256];
	const char *why;
	size_t i;
	bool good = true;

	snprintf(path, sizeof(path), "/v1/workers/%s/assignments?after=%llu&wait=%u",
	    c->worker, (unsigned long long)q->after, q->wait_s);
	a.result = http_call(c, "GET", path, NULL, (long)q->wait_s + 10, true, false, &a.status, &b);
	if (a.result == CTL_OK) {
		if (b.p == NULL || msg_assignments_decode(b.p, b.n, &ms, &why) != 0) {
			log_warnx("assignments: malformed answer (%s)", b.p ? why : "empty");
			a.result = CTL_MALFORMED;
		} else {
			/* every one must cross, or none: the parent moves its
			 * revision past what it was given */
			for (i = 0; i < ms.n && good; i++)
				good = msg_assignment_pack(&ms.a[i], rec) == 0;
			if (!good || ms.n > SPACE_ASSIGNMENTS_MAX) {
				log_warnx("assignments: an assignment cannot be handed over");
				a.result = CTL_MALFORMED;
			} else {
				a.revision = ms.revision;
				a.count = (uint32_t)ms.n;
			}
		}
	}
	free(b.p);
	/* the header and its records in one run, so that nothing else
	 * interleaves (the parent would take it, but it reads easier) */
	pthread_mutex_lock(&c->send_lock);
	if (ctlmsg_send(SOCK_FD, &a, -1) < 0)
		_exit(0);
	for (i = 0; i < a.count; i++) {
		one.index = (uint32_t)i;
		one.a = ms.a[i];
		if (ctlmsg_send(SOCK_FD, &one, -1) < 0)
			_exit(0);
	}
	pthread_mutex_unlock(&c->send_lock);
	msg_assignments_free(&ms);
}

/* {"collect":[digest...]}: exactly that key; entries that are not
 * digests are left out (never deleted), more than a batch is refused */
static void
do_archives(struct ctlc *c, const struct ctlmsg *q)
{
	struct ctlmsg a = { .type = CTL_COLLECT, .id = q->id };
	struct buf b = { .fd = -1 };
	char path[256];
	json_t *ans = NULL, *arr, *d;
	size_t k;

	snprintf(path, sizeof(path), "/v1/workers/%s/archives", c->worker);
	a.result = http_call(c, "POST", path, q->text, 10, true, false, &a.status, &b);
	if (a.result == CTL_OK) {
		a.result = CTL_MALFORMED;
		if (b.p && (ans = json_loads(b.p, JSON_REJECT_DUPLICATES, NULL)) != NULL &&
		    json_is_object(ans) && json_object_size(ans) == 1 &&
		    (arr = json_object_get(ans, "collect")) != NULL && json_is_array(arr) &&
		    json_array_size(arr) <= SPACE_ARCHIVE_BATCH_MAX &&
		    (json_array_size(arr) == 0 ||
		    (a.digests = calloc(json_array_size(arr), sizeof(*a.digests))) != NULL)) {
			a.result = CTL_OK;
			json_array_foreach(arr, k, d) {
				const char *s = json_string_value(d);
				size_t i;

				if (s == NULL || strlen(s) != CTL_DIGEST_HEX)
					continue;
				for (i = 0; i < CTL_DIGEST_HEX; i++)
					if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
						break;
				if (i == CTL_DIGEST_HEX)
					memcpy(a.digests[a.count++], s, CTL_DIGEST_HEX + 1);
			}
		}
	}
	answer(c, &a);
	free(a.digests);
	json_decref(ans);
	free(b.p);
}

static void
do_template(struct ctlc *c, const struct ctlmsg *q, int fd)
{
	struct ctlmsg a = { .type = CTL_DONE, .id = q->id };
	struct buf b = { .fd = fd, .max = TPL_IMAGE_MAX };
	char path[256];

	snprintf(path, sizeof(path), "/v1/workers/%s/templates/%s", c->worker, q->digest);
	a.result = http_call(c, "GET", path, NULL, 0, true, true, &a.status, &b);
	/* the end of the bytes is the pipe's end: closed before the answer */
	close(fd);
	if (b.over)
		a.result = CTL_MALFORMED;
	answer(c, &a);
}

/* an archive by digest (docs/worker.md section 9): downloaded into the
 * pipe the parent hashes from, or uploaded from the file it opened. The
 * bound of a download is the largest archive a control plane keeps by
 * default; the parent checks the digest and the control plane checks an
 * upload's. */
static void
do_snapshot_blob(struct ctlc *c, const struct ctlmsg *q, int fd)
{
	struct ctlmsg a = { .type = CTL_DONE, .id = q->id };
	struct buf b = { .fd = -1, .up_fd = -1 };
	struct stat st;
	char path[256];

	snprintf(path, sizeof(path), "/v1/workers/%s/archives/%s", c->worker, q->digest);
	if (q->type == CTL_SNAPSHOT_GET) {
		b.fd = fd;
		b.max = SPACE_ARCHIVE_MAX;
		a.result = http_call(c, "GET", path, NULL, 0, true, true, &a.status, &b);
		close(fd);      /* the end of the bytes: before the answer */
		if (b.over)
			a.result = CTL_MALFORMED;
	} else {
		if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
			a.result = CTL_NO_ANSWER;
		} else {
			b.up_fd = fd;
			b.up_size = (uint64_t)st.st_size;
			a.result = http_call(c, "PUT", path, NULL, 0, true, true, &a.status, &b);
			if (a.result == CTL_OK && b.up_off != b.up_size)
				a.result = CTL_NO_ANSWER;
		}
		close(fd);
		free(b.p);
	}
	answer(c, &a);
}

/* an archive uploaded while it is made (docs/recovery.md, "Archives over
 * HTTP"): its bytes come out of the pipe the parent writes them into, and
 * the control plane names it by the digest in its trailer (it checks that
 * the trailer names what came before it). The pipe's end is the body's:
 * a parent that stopped half way sends a body that is no archive, which
 * the control plane refuses and does not keep. */
static void
do_snapshot_stream(struct ctlc *c, const struct ctlmsg *q, int fd)
{
	struct ctlmsg a = { .type = CTL_DONE, .id = q->id };
	struct buf b = { .fd = -1, .up_fd = fd, .up_pipe = true };
	char path[256];
	struct stat st;

	snprintf(path, sizeof(path), "/v1/workers/%s/archives/stream", c->worker);
	if (fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode))
		a.result = CTL_NO_ANSWER;
	else
		a.result = http_call(c, "POST", path, NULL, 0, true, true, &a.status, &b);
	close(fd);      /* a parent still writing gets EPIPE */
	free(b.p);
	answer(c, &a);
}

static void
job_run(struct ctlc *c, struct job *j)
{
	struct ctlmsg a = { .type = CTL_DONE, .id = j->req.id };
	struct buf b = { .fd = -1 };

	switch (j->req.type) {
	case CTL_POST:
		a.result = http_call(c, "POST", j->req.path, j->req.text, j->req.timeout_s, true,
		    false, &a.status, &b);
		free(b.p);
		answer(c, &a);
		break;
	case CTL_KEYS_GET: do_keys(c, &j->req); break;
	case CTL_ASSIGN_GET: do_assignments(c, &j->req); break;
	case CTL_ARCHIVES_POST: do_archives(c, &j->req); break;
	case CTL_TEMPLATE_GET: do_template(c, &j->req, j->fd); break;
	case CTL_SNAPSHOT_GET:
	case CTL_SNAPSHOT_PUT: do_snapshot_blob(c, &j->req, j->fd); break;
	case CTL_SNAPSHOT_STREAM: do_snapshot_stream(c, &j->req, j->fd); break;
	default: break;
	}
	ctlmsg_clear(&j->req);
	free(j);
	atomic_fetch_sub(&c->inflight, 1);
}

/* one job, then the next one handed over, until none came for
 * IDLE_KEEP_S: the thread ends */
static void *
job_thread(void *arg)
{
	struct job *j = arg;
	struct ctlc *c = j->c;
	struct timespec ts;

	for (;;) {
		job_run(c, j);
		pthread_mutex_lock(&c->idle_lock);
		c->idle++;
		ts = mono_timespec(now_mono_ns() + (uint64_t)IDLE_KEEP_S * 1000000000u);
		while (c->handed == NULL)
			if (pthread_cond_timedwait(&c->idle_cv, &c->idle_lock, &ts) != 0 &&
			    c->handed == NULL)
				break;
		if ((j = c->handed) == NULL) {
			c->idle--;
			pthread_mutex_unlock(&c->idle_lock);
			return NULL;
		}
		c->handed = NULL;
		pthread_mutex_unlock(&c->idle_lock);
	}
}

/* j to a kept thread if one waits (it took the count off idle for it),
 * else false: the caller starts a thread */
static bool
job_hand(struct ctlc *c, struct job *j)
{
	bool given = false;

	pthread_mutex_lock(&c->idle_lock);
	if (c->idle > 0 && c->handed == NULL) {
		c->idle--;
		c->handed = j;
		pthread_cond_signal(&c->idle_cv);
		given = true;
	}
	pthread_mutex_unlock(&c->idle_lock);
	return given;
}

static uint8_t
answer_type(uint8_t req)
{
	switch (req) {
	case CTL_KEYS_GET: return CTL_KEYS;
	case CTL_ASSIGN_GET: return CTL_ASSIGNMENTS;
	case CTL_ARCHIVES_POST: return CTL_COLLECT;
	default: return CTL_DONE;
	}
}

int
ctlchild_main(int argc, char **argv)
{
	static struct ctlc ctl;
	struct ctlc *c = &ctl;
	pthread_attr_t attr;
	pthread_t t;
	struct ctlmsg q;
	const char *why;
	char *end;
	long parent;
	int fd, r;

	/* control-client URL WORKER PARENT_PID [-v] */
	if (argc < 5 || argc > 6)
		return 2;
	log_init("sbx-manager[control-client]", argc == 6 && strcmp(argv[5], "-v") == 0);
	(void)syscall(SYS_close_range, CRED_FD + 1, ~0u, 0);
	errno = 0;
	parent = strtol(argv[4], &end, 10);
	if (errno || *end || parent <= 1 || strlen(argv[2]) >= sizeof(c->url) ||
	    strlen(argv[3]) >= sizeof(c->worker) || !id_valid(argv[3]))
		return 2;
	memcpy(c->url, argv[2], strlen(argv[2]) + 1);
	memcpy(c->worker, argv[3], strlen(argv[3]) + 1);
	pthread_mutex_init(&c->send_lock, NULL);
	pthread_mutex_init(&c->idle_lock, NULL);
	cond_init_mono(&c->idle_cv);
	read_credential(c);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		die("curl init");
	drop_privileges((pid_t)parent);
	confine();
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		struct job *j;

		if ((r = ctlmsg_recv(SOCK_FD, &q, &fd, &why)) == -ECONNRESET)
			_exit(0);
		if (r < 0) {
			/* the parent does not send what does not decode */
			log_warnx("control client: request refused: %s", why ? why : strerror(-r));
			_exit(1);
		}
		if (!ctlmsg_is_request(q.type))
			die("an answer where a request belongs");
		if (atomic_load(&c->inflight) >= INFLIGHT_MAX ||
		    (j = calloc(1, sizeof(*j))) == NULL) {
			struct ctlmsg a = { .type = answer_type(q.type), .id = q.id, .result = CTL_BUSY };
			if (fd >= 0)
				close(fd);
			ctlmsg_clear(&q);
			answer(c, &a);
			continue;
		}
		j->c = c;
		j->req = q;
		j->fd = fd;
		atomic_fetch_add(&c->inflight, 1);
		if (!job_hand(c, j) && pthread_create(&t, &attr, job_thread, j) != 0) {
			struct ctlmsg a = { .type = answer_type(q.type), .id = q.id, .result = CTL_BUSY };
			atomic_fetch_sub(&c->inflight, 1);
			if (fd >= 0)
				close(fd);
			ctlmsg_clear(&j->req);
			free(j);
			answer(c, &a);
		}
	}
}
