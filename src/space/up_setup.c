/* space up: the data directory's files and the one-shot admin commands. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include <sodium.h>
#include <uv.h>

#include "up.h"
#include "util.h"

#define CAPTURE_MAX       8192
#define CAPTURE_TIMEOUT   30000   /* ms */
#define ENV_MAX           8192

int
up_lock(const char *dir, int *fdp)
{
	char path[UP_PATH_MAX + 16];
	int fd;

	snprintf(path, sizeof(path), "%s/up.lock", dir);
	if ((fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0)
		return -errno;
	/* held for the supervisor's whole life: the kernel drops it when we
	 * die, so a crashed supervisor never leaves a stale lock behind */
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno;
		close(fd);
		return e == EWOULDBLOCK ? -EWOULDBLOCK : -e;
	}
	if (ftruncate(fd, 0) == 0)
		dprintf(fd, "%d\n", (int)getpid());
	*fdp = fd;
	return 0;
}

struct capture {
	uv_pipe_t pipe;
	uv_process_t proc;
	uv_timer_t timer;
	char buf[CAPTURE_MAX];
	size_t len;
	int64_t status;
	int sig;
	int exited, overflow;
};

static void
cap_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
	struct capture *c = h->data;
	size_t room = sizeof(c->buf) - 1 - c->len;

	if (room == 0) {
		/* keep draining so the child never blocks on a full pipe */
		static char sink[4096];
		c->overflow = 1;
		*b = uv_buf_init(sink, sizeof(sink));
		return;
	}
	*b = uv_buf_init(c->buf + c->len, (unsigned)room);
}

static void
cap_done_if(struct capture *c)
{
	/* both the exit and the end of the output: nothing keeps the loop */
	if (c->exited && uv_is_closing((uv_handle_t *)&c->pipe) &&
	    !uv_is_closing((uv_handle_t *)&c->timer)) {
		uv_timer_stop(&c->timer);
		uv_close((uv_handle_t *)&c->timer, NULL);
	}
}

static void
cap_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b)
{
	struct capture *c = s->data;

	if (n > 0 && b->base != c->buf + c->len)
		return;         /* went to the sink */
	if (n > 0)
		c->len += (size_t)n;
	else if (n < 0 && !uv_is_closing((uv_handle_t *)s)) {
		uv_close((uv_handle_t *)s, NULL);
		cap_done_if(c);
	}
}

static void cap_timeout(uv_timer_t *t);

static void
cap_exit(uv_process_t *p, int64_t status, int sig)
{
	struct capture *c = p->data;

	c->exited = 1;
	c->status = status;
	c->sig = sig;
	uv_close((uv_handle_t *)p, NULL);
	/* a descendant may still hold the pipe open: give the output a
	 * moment to end, not forever */
	uv_timer_start(&c->timer, cap_timeout, 2000, 0);
	cap_done_if(c);
}

static void
cap_timeout(uv_timer_t *t)
{
	struct capture *c = t->data;

	if (!c->exited) {
		uv_process_kill(&c->proc, SIGKILL);
		return;
	}
	if (!uv_is_closing((uv_handle_t *)&c->pipe))
		uv_close((uv_handle_t *)&c->pipe, NULL);
	cap_done_if(c);
}

int
up_capture(char *const argv[], const char *log, char *out, size_t cap)
{
	uv_loop_t loop;
	uv_process_options_t o;
	uv_stdio_container_t io[3];
	struct capture *c;
	char *p, *e;
	int fd, rc;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600)) < 0) {
		rc = -errno;
		free(c);
		return rc;
	}
	/* a loop of its own: the command is short, and its output must not
	 * mix with the supervisor's children */
	if ((rc = uv_loop_init(&loop)) < 0) {
		close(fd);
		free(c);
		return rc;
	}
	uv_pipe_init(&loop, &c->pipe, 0);
	uv_timer_init(&loop, &c->timer);
	c->pipe.data = c->proc.data = c->timer.data = c;
	memset(&o, 0, sizeof(o));
	memset(io, 0, sizeof(io));
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
	io[1].data.stream = (uv_stream_t *)&c->pipe;
	io[2].flags = UV_INHERIT_FD;
	io[2].data.fd = fd;
	o.file = argv[0];
	o.args = (char **)argv;
	o.exit_cb = cap_exit;
	o.stdio = io;
	o.stdio_count = 3;
	if ((rc = uv_spawn(&loop, &c->proc, &o)) < 0) {
		uv_close((uv_handle_t *)&c->proc, NULL);
		uv_close((uv_handle_t *)&c->pipe, NULL);
		uv_close((uv_handle_t *)&c->timer, NULL);
		uv_run(&loop, UV_RUN_DEFAULT);
		goto out;
	}
	uv_read_start((uv_stream_t *)&c->pipe, cap_alloc, cap_read);
	uv_timer_start(&c->timer, cap_timeout, CAPTURE_TIMEOUT, 0);
	uv_run(&loop, UV_RUN_DEFAULT);
	if (c->sig || c->status != 0) {
		dprintf(fd, "space up: %s failed (%s %d)\n", argv[0],
		    c->sig ? "signal" : "status", c->sig ? c->sig : (int)c->status);
		rc = -EIO;
		goto out;
	}
	if (c->overflow) {
		rc = -EMSGSIZE;
		goto out;
	}
	c->buf[c->len] = '\0';
	/* the first line, trimmed */
	for (p = c->buf; *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'; p++)
		;
	e = p + strcspn(p, "\r\n");
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	if ((size_t)(e - p) >= cap) {
		rc = -EMSGSIZE;
		goto out;
	}
	memcpy(out, p, (size_t)(e - p));
	out[e - p] = '\0';
	rc = 0;
out:
	uv_loop_close(&loop);
	close(fd);
	sodium_memzero(c->buf, sizeof(c->buf));
	free(c);
	return rc;
}

int
up_token_ok(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == '\'' || s[i] == '"' || s[i] == '\\' ||
		    s[i] == '$' || s[i] == '`')
			return 0;
	return i > 0 && i < 1024;
}

int
up_env_get(const char *path, const char *key, char *out, size_t cap)
{
	char *buf = NULL, *line, *save = NULL;
	size_t len, kl = strlen(key);
	int rc = -ENOENT;

	if ((rc = read_file(path, ENV_MAX, &buf, &len)) < 0)
		return rc;
	rc = -ENOENT;
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, kl) == 0 && line[kl] == '=') {
			if (strlen(line + kl + 1) >= cap)
				rc = -EMSGSIZE;
			else {
				snprintf(out, cap, "%s", line + kl + 1);
				rc = 0;
			}
			break;
		}
	sodium_memzero(buf, len);
	free(buf);
	return rc;
}

int
up_env_write(const char *path, const char *url, const char *key)
{
	char buf[2048];
	int n, rc;

	/* plain KEY=value lines: both `. FILE` and `export $(cat FILE)` read
	 * them, which is why up_token_ok() refuses quotes and spaces */
	n = snprintf(buf, sizeof(buf), "SPACE_API_URL=%s\nSPACE_API_KEY=%s\n", url, key);
	if (n < 0 || (size_t)n >= sizeof(buf))
		return -EMSGSIZE;
	rc = write_file_atomic(path, buf, (size_t)n, 0600);
	sodium_memzero(buf, sizeof(buf));
	return rc;
}
