/* The process manager of a sandbox (guest.h, docs/protocol.md "Streams").
 *
 * One long-lived process, the sandbox user, one poll loop. It is the parent
 * of every process proc.start runs, so a process belongs to the sandbox and
 * not to the connection that started it: a client leaving only detaches.
 *
 * Memory is bounded whatever the processes write:
 *   - a process's output is read only when it can go somewhere: to its
 *     attached client when that client's queue is empty (one frame queued
 *     at most, so a slow reader blocks the process in write), or, with no
 *     client, into its replay ring (SPACE_PROC_REPLAY, oldest bytes
 *     dropped) so a background process never blocks;
 *   - a client's input is read only when the process's stdin queue has
 *     room for one more frame (PROC_INQ_MAX);
 *   - at most SPACE_PROCS_MAX processes and PM_CONNS_MAX connections.
 * Everything a client sends is decoded by the one codec (msg.h,
 * msg_stream.h) and checked against the process it names. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "framepump.h"
#include "guest.h"
#include "limits.h"
#include "log.h"
#include "msg.h"
#include "msg_stream.h"
#include "proto.h"
#include "util.h"

#define PM_CONNS_MAX    (SPACE_STREAMS_PER_SBX + 8)
#define PROC_INQ_MAX    (128u << 10)    /* stdin bytes queued for one process */
#define PROC_LINGER_MS  200             /* output read after the process exited */
#define ARGV_KEEP_MAX   4096            /* argv bytes kept for proc.list */
#define TERM_MAX        64

struct conn;

struct proc {
	bool used, pty, reaped, finished, timed_out, in_eof;
	pid_t pid;
	int pidfd;
	int out_fd, err_fd;             /* pipes (err -1 on a terminal: one stream) */
	int in_fd;                      /* stdin pipe or a dup of the master; -1 closed */
	int wst;
	int64_t started;                /* unix seconds */
	uint64_t seq;                   /* start order, for eviction */
	int64_t deadline_ms;            /* 0: no timeout */
	int64_t linger_ms;              /* after the exit: give up on output then */
	json_t *argv;                   /* what proc.list shows */
	bool argv_truncated;
	uint8_t *ring;                  /* records: u8 kind, u16 len, bytes */
	size_t ring_len;
	uint8_t *inq;                   /* stdin not yet written */
	size_t inq_len;
	struct conn *att;
};

struct conn {
	bool used, closing;
	int fd;
	struct proc *p;                 /* attached to; NULL once detached */
	struct frame_rd rd;
	struct frame_wr q;
	uint8_t *replay;                /* a copy of the ring, sent first */
	size_t replay_len, replay_off;
};

static struct proc procs[SPACE_PROCS_MAX];
static struct conn conns[PM_CONNS_MAX];
static uint64_t proc_seq;

static int64_t
mono_ms(void)
{
	return (int64_t)(now_mono_ns() / 1000000u);
}

static void
close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* ---- answers, through the connection's queue ---- */

static void
q_error(struct conn *c, int status, const char *code, const char *message)
{
	struct msg_error m = { .status = status };
	char *s;
	size_t n;

	snprintf(m.error, sizeof(m.error), "%s", code);
	m.has_message = true;
	snprintf(m.message, sizeof(m.message), "%s", message ? message : code);
	if (msg_error_encode(&m, &s, &n) == 0) {
		frame_wr_add(&c->q, MSG_ERROR, s, n);
		free(s);
	}
	c->closing = true;
}

static void
q_errno(struct conn *c, int err, const char *what)
{
	char msg[256];
	int status = 500;
	const char *code = "internal";

	switch (err) {
	case ENOENT: status = 404; code = "not_found"; break;
	case EACCES: case EPERM: status = 403; code = "permission_denied"; break;
	case ENOTDIR: status = 409; code = "not_a_directory"; break;
	case EAGAIN: case ENOMEM: status = 503; code = "unavailable"; break;
	}
	snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
	q_error(c, status, code, msg);
}

/* steals result */
static int
q_result(struct conn *c, json_t *result)
{
	struct msg_response m = { .result = result };
	char *s;
	size_t n;
	int r;

	if (result == NULL) {
		q_error(c, 500, "internal", "out of memory");
		return -ENOMEM;
	}
	r = msg_response_encode(&m, MSG_FORM_GUEST, &s, &n);
	json_decref(result);
	if (r != 0) {
		q_error(c, 500, "internal", "cannot encode the result");
		return r;
	}
	r = frame_wr_add(&c->q, MSG_RESPONSE, s, n);
	free(s);
	return r;
}

static void
q_stream(struct conn *c, const struct msg_stream *m)
{
	uint8_t buf[64];
	size_t n;

	/* only the small kinds go through here (EXIT); data is added by
	 * q_data without a copy through the codec */
	if (msg_stream_encode(m, buf, sizeof(buf), &n) == 0)
		frame_wr_add(&c->q, MSG_STREAM, buf, n);
}

static void
q_data(struct conn *c, uint8_t kind, const uint8_t *p, size_t n)
{
	uint8_t *buf = malloc(n + 1);

	if (buf == NULL)
		return;
	buf[0] = kind;
	memcpy(buf + 1, p, n);
	frame_wr_add(&c->q, MSG_STREAM, buf, n + 1);
	free(buf);
}

static void
q_exit(struct conn *c, const struct proc *p)
{
	struct msg_stream m = { .kind = STREAM_EXIT };

	m.exit.timed_out = p->timed_out;
	if (WIFSIGNALED(p->wst))
		m.exit.signal = (uint8_t)WTERMSIG(p->wst);
	else
		m.exit.exit_code = (uint8_t)WEXITSTATUS(p->wst);
	q_stream(c, &m);
	frame_wr_add(&c->q, MSG_END, NULL, 0);
	c->closing = true;
}

/* ---- the replay ring ---- */

static void
ring_add(struct proc *p, uint8_t kind, const uint8_t *d, size_t n)
{
	size_t need, drop;

	if (p->ring == NULL && (p->ring = malloc(SPACE_PROC_REPLAY)) == NULL)
		return;
	/* a chunk larger than the ring: its tail is what is kept */
	if (n > SPACE_PROC_REPLAY - 3) {
		d += n - (SPACE_PROC_REPLAY - 3);
		n = SPACE_PROC_REPLAY - 3;
	}
	need = n + 3;
	/* drop the oldest bytes: whole records, then the head of one */
	while (p->ring_len + need > SPACE_PROC_REPLAY) {
		size_t rl = (size_t)p->ring[1] << 8 | p->ring[2];
		size_t over = p->ring_len + need - SPACE_PROC_REPLAY;

		if (over >= rl + 3 || rl <= over) {
			drop = rl + 3;
		} else {
			/* keep the tail of the first record */
			memmove(p->ring + 3, p->ring + 3 + over, p->ring_len - 3 - over);
			p->ring_len -= over;
			rl -= over;
			p->ring[1] = (uint8_t)(rl >> 8);
			p->ring[2] = (uint8_t)rl;
			continue;
		}
		memmove(p->ring, p->ring + drop, p->ring_len - drop);
		p->ring_len -= drop;
	}
	p->ring[p->ring_len] = kind;
	p->ring[p->ring_len + 1] = (uint8_t)(n >> 8);
	p->ring[p->ring_len + 2] = (uint8_t)n;
	memcpy(p->ring + p->ring_len + 3, d, n);
	p->ring_len += need;
}

/* the next replay record as a frame; true when one was queued */
static bool
replay_step(struct conn *c)
{
	size_t rl;

	if (c->replay == NULL || c->replay_off >= c->replay_len)
		return false;
	rl = (size_t)c->replay[c->replay_off + 1] << 8 | c->replay[c->replay_off + 2];
	q_data(c, c->replay[c->replay_off], c->replay + c->replay_off + 3, rl);
	c->replay_off += 3 + rl;
	if (c->replay_off >= c->replay_len) {
		free(c->replay);
		c->replay = NULL;
	}
	return true;
}

/* ---- processes ---- */

static void
conn_detach(struct conn *c)
{
	if (c->p != NULL && c->p->att == c)
		c->p->att = NULL;
	c->p = NULL;
	free(c->replay);
	c->replay = NULL;
}

static void
conn_close(struct conn *c)
{
	conn_detach(c);
	close_fd(&c->fd);
	frame_rd_free(&c->rd);
	frame_wr_free(&c->q);
	c->used = false;
	c->closing = false;
}

static void
proc_free(struct proc *p)
{
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->in_fd);
	close_fd(&p->pidfd);
	json_decref(p->argv);
	free(p->ring);
	free(p->inq);
	memset(p, 0, sizeof(*p));
	p->out_fd = p->err_fd = p->in_fd = p->pidfd = -1;
}

static struct proc *
proc_find(json_t *args, struct conn *c)
{
	json_t *v = json_object_get(args, "pid");

	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX) {
		q_error(c, 400, "bad_request", "pid must be a positive integer");
		return NULL;
	}
	for (int i = 0; i < SPACE_PROCS_MAX; i++)
		if (procs[i].used && procs[i].pid == (pid_t)json_integer_value(v))
			return &procs[i];
	q_error(c, 404, "not_found", "no such process");
	return NULL;
}

/* a free slot, evicting the oldest exited process nobody is attached to */
static struct proc *
proc_slot(void)
{
	struct proc *old = NULL;

	for (int i = 0; i < SPACE_PROCS_MAX; i++)
		if (!procs[i].used)
			return &procs[i];
	for (int i = 0; i < SPACE_PROCS_MAX; i++)
		if (procs[i].finished && procs[i].att == NULL &&
		    (old == NULL || procs[i].seq < old->seq))
			old = &procs[i];
	if (old != NULL)
		proc_free(old);
	return old;
}

/* the process's output is closed (or gave up on) and it was reaped: tell
 * its client, keep the entry for proc.list and late attaches */
static void
proc_finish(struct proc *p)
{
	close_fd(&p->out_fd);
	close_fd(&p->err_fd);
	close_fd(&p->in_fd);
	close_fd(&p->pidfd);
	free(p->inq);
	p->inq = NULL;
	p->inq_len = 0;
	p->finished = true;
	if (p->att != NULL && p->att->replay == NULL)
		q_exit(p->att, p);
}

static bool
signal_allowed(int sig)
{
	static const int ok_sigs[] = { SIGHUP, SIGINT, SIGQUIT, SIGKILL, SIGUSR1, SIGUSR2,
	    SIGTERM, SIGCONT, SIGSTOP, SIGTSTP, SIGWINCH };

	for (size_t i = 0; i < sizeof(ok_sigs) / sizeof(ok_sigs[0]); i++)
		if (ok_sigs[i] == sig)
			return true;
	return false;
}

/* 0, or an answer queued on c */
static int
proc_signal(struct proc *p, int sig, struct conn *c)
{
	if (!signal_allowed(sig)) {
		q_error(c, 400, "bad_request", "signal not allowed");
		return -EINVAL;
	}
	if (p->reaped) {
		q_error(c, 409, "not_running", "the process has exited");
		return -ESRCH;
	}
	/* its own process group (or session, on a terminal): everything it
	 * started gets the signal too */
	if (kill(-p->pid, sig) < 0 && kill(p->pid, sig) < 0) {
		q_errno(c, errno, "kill");
		return -errno;
	}
	return 0;
}

static int
stdin_queue(struct proc *p, const uint8_t *d, size_t n, struct conn *c)
{
	uint8_t *nb;

	if (p->in_fd < 0 || p->in_eof) {
		q_error(c, 409, "stdin_closed", "the process's stdin is closed");
		return -EPIPE;
	}
	if (p->inq_len + n > PROC_INQ_MAX) {
		q_error(c, 409, "stdin_full", "the process has not read its stdin yet; try again");
		return -EAGAIN;
	}
	if ((nb = realloc(p->inq, p->inq_len + n)) == NULL) {
		q_error(c, 503, "unavailable", "out of memory");
		return -ENOMEM;
	}
	p->inq = nb;
	memcpy(p->inq + p->inq_len, d, n);
	p->inq_len += n;
	return 0;
}

static int
stdin_eof(struct proc *p, struct conn *c)
{
	/* a terminal has no end of input: its EOF character is what a
	 * person would type (^D at the start of a line) */
	if (p->pty) {
		uint8_t eot = 0x04;
		return stdin_queue(p, &eot, 1, c);
	}
	if (p->in_fd < 0)
		return 0;
	p->in_eof = true;
	if (p->inq_len == 0)
		close_fd(&p->in_fd);
	return 0;
}

static int
proc_resize(struct proc *p, unsigned rows, unsigned cols, struct conn *c)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };

	if (!p->pty) {
		q_error(c, 409, "not_a_tty", "the process has no terminal");
		return -ENOTTY;
	}
	if (p->finished || p->out_fd < 0) {
		q_error(c, 409, "not_running", "the process has exited");
		return -ESRCH;
	}
	/* the kernel sends SIGWINCH to the terminal's foreground group */
	if (ioctl(p->out_fd, TIOCSWINSZ, &ws) < 0) {
		q_errno(c, errno, "resize");
		return -errno;
	}
	return 0;
}

/* attach c to p: replay first, then live output */
static void
proc_attach(struct proc *p, struct conn *c)
{
	if (p->att != NULL && p->att != c) {
		struct conn *old = p->att;

		conn_detach(old);
		q_error(old, 409, "attached_elsewhere", "another client attached to this process");
	}
	p->att = c;
	c->p = p;
	if (p->ring_len > 0 && (c->replay = malloc(p->ring_len)) != NULL) {
		memcpy(c->replay, p->ring, p->ring_len);
		c->replay_len = p->ring_len;
		c->replay_off = 0;
	}
	if (p->finished && c->replay == NULL)
		q_exit(c, p);
}

/* ---- proc.start ---- */

struct start_req {
	char **argv, **envp;
	const char *cwd;
	int timeout;
	bool pty, stdin_open, attach;
	unsigned rows, cols;
	char term[TERM_MAX + 1];
};

static bool
term_ok(const char *s, size_t n)
{
	if (n == 0 || n > TERM_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9') || strchr("._+-", s[i]) != NULL))
			return false;
	return true;
}

static bool
dim_ok(json_t *v)
{
	return json_is_integer(v) && json_integer_value(v) >= 1 &&
	    json_integer_value(v) <= SPACE_PTY_DIM_MAX;
}

static int
start_parse(json_t *args, struct start_req *s, const char **why)
{
	static const char *const keys[] = { "argv", "env", "cwd", "user", "timeout", "pty",
	    "stdin", "attach", NULL };
	static const char *const pty_keys[] = { "rows", "cols", "term", NULL };
	json_t *argv = json_object_get(args, "argv"), *to = json_object_get(args, "timeout");
	json_t *pty = json_object_get(args, "pty"), *user = json_object_get(args, "user");
	json_t *in = json_object_get(args, "stdin"), *att = json_object_get(args, "attach"), *v;
	const char *bad;
	size_t i, n;

	memset(s, 0, sizeof(*s));
	s->stdin_open = s->attach = true;
	if (args_only(args, keys, &bad) < 0)
		return *why = "unknown field in proc.start args", -EINVAL;
	if (!json_is_array(argv) || (n = json_array_size(argv)) == 0 || n > SPACE_ARGV_MAX)
		return *why = "argv must be a non-empty array of at most SPACE_ARGV_MAX strings", -EINVAL;
	if ((s->argv = calloc(n + 1, sizeof(char *))) == NULL)
		return *why = "out of memory", -ENOMEM;
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return *why = "argv holds a non-string or a NUL", -EINVAL;
		s->argv[i] = (char *)json_string_value(v);
	}
	/* one account runs commands in a sandbox */
	if (user != NULL && (!json_is_string(user) || strcmp(json_string_value(user), "user") != 0))
		return *why = "user must be \"user\"", -EINVAL;
	if (json_object_get(args, "cwd") != NULL && (s->cwd = arg_path(args, "cwd")) == NULL)
		return *why = "cwd must be a path", -EINVAL;
	if (to != NULL) {
		if (!json_is_integer(to) || json_integer_value(to) < 1 ||
		    json_integer_value(to) > SPACE_EXEC_TIMEOUT_MAX)
			return *why = "timeout must be an integer 1..SPACE_EXEC_TIMEOUT_MAX", -EINVAL;
		s->timeout = (int)json_integer_value(to);
	}
	if (in != NULL && !json_is_boolean(in))
		return *why = "stdin must be a boolean", -EINVAL;
	if (in != NULL)
		s->stdin_open = json_is_true(in);
	if (att != NULL && !json_is_boolean(att))
		return *why = "attach must be a boolean", -EINVAL;
	if (att != NULL)
		s->attach = json_is_true(att);
	if (pty != NULL && !json_is_null(pty)) {
		json_t *term = json_object_get(pty, "term");

		if (!json_is_object(pty) || args_only(pty, pty_keys, &bad) < 0 ||
		    !dim_ok(json_object_get(pty, "rows")) || !dim_ok(json_object_get(pty, "cols")))
			return *why = "pty must be {\"rows\",\"cols\",\"term\"?} with sizes 1..4096", -EINVAL;
		if (term != NULL && (!json_is_string(term) ||
		    !term_ok(json_string_value(term), json_string_length(term))))
			return *why = "pty.term must be [A-Za-z0-9._+-]{1,64}", -EINVAL;
		s->pty = true;
		s->rows = (unsigned)json_integer_value(json_object_get(pty, "rows"));
		s->cols = (unsigned)json_integer_value(json_object_get(pty, "cols"));
		snprintf(s->term, sizeof(s->term), "%s", term ? json_string_value(term) : "xterm-256color");
	}
	if (env_build(json_object_get(args, "env"), s->pty ? s->term : NULL, &s->envp, why) < 0)
		return -EINVAL;
	return 0;
}

static json_t *
argv_keep(char **argv, bool *truncated)
{
	json_t *a = json_array();
	size_t used = 0;

	*truncated = false;
	for (size_t i = 0; a != NULL && argv[i]; i++) {
		size_t n = strlen(argv[i]);

		if (used + n > ARGV_KEEP_MAX) {
			*truncated = true;
			break;
		}
		/* text that is not UTF-8 is shown as nothing rather than refused */
		json_array_append_new(a, json_stringn(argv[i], n) ?: json_string(""));
		used += n;
	}
	return a;
}

static int
open_pty(unsigned rows, unsigned cols, int *master, int *slave)
{
	struct winsize ws = { .ws_row = (unsigned short)rows, .ws_col = (unsigned short)cols };
	int m, s;

	/* the jail's own devpts instance (docs/jail.md) */
	if ((m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		return -errno;
	if (unlockpt(m) < 0 || ioctl(m, TIOCSWINSZ, &ws) < 0)
		goto fail;
	/* the peer of this master, without a path lookup in /dev/pts */
	if ((s = ioctl(m, TIOCGPTPEER, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
		goto fail;
	*master = m;
	*slave = s;
	return 0;
fail:
	{
		int e = errno;
		close(m);
		return -e;
	}
}

static noreturn void
child_exec(const struct start_req *s, int in, int out, int err, int slave, int report)
{
	sigset_t none;
	int en;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	/* a command starts with every signal at its default, whatever was
	 * ignored by whoever started the sandbox (a shell's background job
	 * ignores SIGINT and SIGQUIT) */
	for (int sig = 1; sig < NSIG; sig++)
		signal(sig, SIG_DFL);
	if (slave >= 0) {
		/* a session of its own with the terminal as its controlling
		 * one: ^C, job control and SIGWINCH work as in a shell */
		if (setsid() < 0 || ioctl(slave, TIOCSCTTY, 0) < 0)
			goto fail;
		in = out = err = slave;
	} else
		setpgid(0, 0);
	if (dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
		goto fail;
	if (report != 3 && (dup2(report, 3) < 0 || fcntl(3, F_SETFD, FD_CLOEXEC) < 0))
		goto fail;
	/* nothing of the manager reaches the command: the clients' sockets,
	 * the other processes' pipes and terminals */
	if (syscall(SYS_close_range, 4u, ~0u, 0u) < 0)
		goto fail;
	report = 3;
	if (s->cwd && chdir(s->cwd) < 0)
		goto fail;
	execvpe(s->argv[0], s->argv, s->envp);
fail:
	en = errno;
	if (write(report, &en, sizeof(en)) < 0)
		_exit(127);
	_exit(127);
}

static void
op_start(struct conn *c, json_t *args)
{
	struct start_req s;
	struct proc *p;
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int rep[2] = { -1, -1 }, master = -1, slave = -1, nul = -1, en = 0, r;
	const char *why = "bad proc.start args";
	pid_t pid;
	ssize_t n;

	if (start_parse(args, &s, &why) < 0) {
		q_error(c, 400, "bad_request", why);
		goto out;
	}
	if ((p = proc_slot()) == NULL) {
		q_error(c, 429, "too_many_processes", "the sandbox's process table is full");
		goto out;
	}
	if (s.pty) {
		if ((r = open_pty(s.rows, s.cols, &master, &slave)) < 0) {
			q_errno(c, -r, "open a terminal");
			goto out;
		}
	} else if (pipe2(pout, O_CLOEXEC) < 0 || pipe2(perr, O_CLOEXEC) < 0 ||
	    (s.stdin_open ? pipe2(pin, O_CLOEXEC) :
	    ((pin[0] = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0 ? -1 : 0)) < 0) {
		q_errno(c, errno, "pipe");
		goto out;
	}
	if (pipe2(rep, O_CLOEXEC) < 0) {
		q_errno(c, errno, "pipe");
		goto out;
	}
	if ((pid = fork()) < 0) {
		q_errno(c, errno, "fork");
		goto out;
	}
	if (pid == 0)
		child_exec(&s, pin[0], pout[1], perr[1], slave, rep[1]);
	if (!s.pty)
		setpgid(pid, pid);
	close_fd(&rep[1]);
	close_fd(&slave);
	close_fd(&pin[0]);
	close_fd(&pout[1]);
	close_fd(&perr[1]);
	/* a command that cannot start is an error of the request */
	while ((n = read(rep[0], &en, sizeof(en))) < 0 && errno == EINTR)
		;
	if (n == (ssize_t)sizeof(en)) {
		waitpid(pid, NULL, 0);
		q_errno(c, en, s.cwd && en == ENOENT ? "cwd or program" : s.argv[0]);
		goto out;
	}
	memset(p, 0, sizeof(*p));
	p->used = true;
	p->pid = pid;
	p->pty = s.pty;
	p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	p->started = (int64_t)time(NULL);
	p->seq = ++proc_seq;
	p->deadline_ms = s.timeout > 0 ? mono_ms() + (int64_t)s.timeout * 1000 : 0;
	p->linger_ms = -1;
	p->argv = argv_keep(s.argv, &p->argv_truncated);
	if (s.pty) {
		p->out_fd = master;
		p->err_fd = -1;
		p->in_fd = fcntl(master, F_DUPFD_CLOEXEC, 3);
		master = -1;
	} else {
		p->out_fd = pout[0];
		p->err_fd = perr[0];
		p->in_fd = pin[1];
		pout[0] = perr[0] = pin[1] = -1;
	}
	fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
	if (p->err_fd >= 0)
		fcntl(p->err_fd, F_SETFL, O_NONBLOCK);
	if (p->in_fd >= 0)
		fcntl(p->in_fd, F_SETFL, O_NONBLOCK);
	q_result(c, json_pack("{s:i}", "pid", (json_int_t)pid));
	if (s.attach)
		proc_attach(p, c);
	else
		c->closing = true;
out:
	close_fd(&pin[0]); close_fd(&pin[1]);
	close_fd(&pout[0]); close_fd(&pout[1]);
	close_fd(&perr[0]); close_fd(&perr[1]);
	close_fd(&rep[0]); close_fd(&rep[1]);
	close_fd(&master); close_fd(&slave);
	close_fd(&nul);
	free(s.argv);
	env_free(s.envp);
}

/* ---- the unary operations ---- */

static void
op_list(struct conn *c, json_t *args)
{
	json_t *list = json_array();

	if (json_object_size(args) != 0) {
		json_decref(list);
		q_error(c, 400, "bad_request", "proc.list takes no args");
		return;
	}
	for (int i = 0; list != NULL && i < SPACE_PROCS_MAX; i++) {
		struct proc *p = &procs[i];
		char when[RFC3339_LEN + 1] = "";
		json_t *e;

		if (!p->used)
			continue;
		rfc3339_format(p->started, when);
		e = json_pack("{s:i,s:O,s:b,s:s,s:s,s:b,s:b}", "pid", (json_int_t)p->pid,
		    "argv", p->argv, "pty", p->pty, "started", when,
		    "state", p->reaped ? "exited" : "running", "timed_out", p->timed_out,
		    "attached", p->att != NULL);
		if (e == NULL)
			continue;
		if (p->argv_truncated)
			json_object_set_new(e, "argv_truncated", json_true());
		if (p->reaped && !WIFSIGNALED(p->wst)) {
			json_object_set_new(e, "exit_code", json_integer(WEXITSTATUS(p->wst)));
			json_object_set_new(e, "signal", json_null());
		} else if (p->reaped) {
			json_object_set_new(e, "exit_code", json_null());
			json_object_set_new(e, "signal", json_integer(WTERMSIG(p->wst)));
		} else {
			json_object_set_new(e, "exit_code", json_null());
			json_object_set_new(e, "signal", json_null());
		}
		json_array_append_new(list, e);
	}
	q_result(c, json_pack("{s:o}", "processes", list));
	c->closing = true;
}

static bool
only(json_t *args, const char *const *keys, struct conn *c)
{
	const char *bad;

	if (args_only(args, keys, &bad) < 0) {
		q_error(c, 400, "bad_request", "unknown field in args");
		return false;
	}
	return true;
}

static void
op_signal(struct conn *c, json_t *args)
{
	static const char *const keys[] = { "pid", "signal", NULL };
	json_t *v = json_object_get(args, "signal");
	struct proc *p;

	if (!only(args, keys, c) || (p = proc_find(args, c)) == NULL)
		return;
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > SPACE_SIGNO_MAX) {
		q_error(c, 400, "bad_request", "signal must be an integer 1..64");
		return;
	}
	if (proc_signal(p, (int)json_integer_value(v), c) == 0)
		q_result(c, json_object());
	c->closing = true;
}

static void
op_stdin(struct conn *c, json_t *args)
{
	static const char *const keys[] = { "pid", "data_b64", "eof", NULL };
	json_t *d = json_object_get(args, "data_b64"), *eof = json_object_get(args, "eof");
	uint8_t *buf = NULL;
	size_t n = 0, l;
	struct proc *p;

	if (!only(args, keys, c) || (p = proc_find(args, c)) == NULL)
		return;
	if ((d != NULL && (!json_is_string(d) ||
	    (l = json_string_length(d)) > (SPACE_PROC_STDIN_MAX + 2) / 3 * 4)) ||
	    (eof != NULL && !json_is_boolean(eof))) {
		q_error(c, 400, "bad_request", "data_b64 must be base64 of at most 64 KiB, eof a boolean");
		return;
	}
	if (d != NULL) {
		l = json_string_length(d);
		if ((buf = malloc(l + 1)) == NULL ||
		    sodium_base642bin(buf, l + 1, json_string_value(d), l, NULL, &n, NULL,
		    sodium_base64_VARIANT_ORIGINAL) != 0 || n > SPACE_PROC_STDIN_MAX) {
			free(buf);
			q_error(c, 400, "bad_request", "data_b64 is not standard base64 of at most 64 KiB");
			return;
		}
	}
	if (p->finished) {
		q_error(c, 409, "not_running", "the process has exited");
	} else if ((n == 0 || stdin_queue(p, buf, n, c) == 0) &&
	    (!json_is_true(eof) || stdin_eof(p, c) == 0)) {
		q_result(c, json_pack("{s:i}", "written", (json_int_t)n));
	}
	free(buf);
	c->closing = true;
}

static void
op_resize(struct conn *c, json_t *args)
{
	static const char *const keys[] = { "pid", "rows", "cols", NULL };
	json_t *rows = json_object_get(args, "rows"), *cols = json_object_get(args, "cols");
	struct proc *p;

	if (!only(args, keys, c) || (p = proc_find(args, c)) == NULL)
		return;
	if (!dim_ok(rows) || !dim_ok(cols)) {
		q_error(c, 400, "bad_request", "rows and cols must be integers 1..4096");
		return;
	}
	if (proc_resize(p, (unsigned)json_integer_value(rows), (unsigned)json_integer_value(cols), c) == 0)
		q_result(c, json_object());
	c->closing = true;
}

static void
op_attach(struct conn *c, json_t *args)
{
	static const char *const keys[] = { "pid", NULL };
	struct proc *p;

	if (!only(args, keys, c) || (p = proc_find(args, c)) == NULL)
		return;
	q_result(c, json_pack("{s:i}", "pid", (json_int_t)p->pid));
	proc_attach(p, c);
}

/* ---- a frame from an attached client ---- */

static void
client_frame(struct conn *c, struct frame *f)
{
	struct msg_stream m;
	const char *why;
	struct proc *p = c->p;

	if (f->type == MSG_END) {
		/* detach; the process runs on */
		conn_detach(c);
		frame_wr_add(&c->q, MSG_END, NULL, 0);
		c->closing = true;
		return;
	}
	if (f->type != MSG_STREAM) {
		conn_detach(c);
		q_error(c, 400, "bad_request", "expected STREAM or END");
		return;
	}
	if (msg_stream_decode(f->payload, f->len, STREAM_IN, &m, &why) != 0) {
		conn_detach(c);
		q_error(c, 400, "bad_request", why);
		return;
	}
	switch (m.kind) {
	case STREAM_STDIN:
		if (stdin_queue(p, m.data, m.len, c) < 0)
			conn_detach(c);
		break;
	case STREAM_STDIN_EOF:
		if (stdin_eof(p, c) < 0)
			conn_detach(c);
		break;
	case STREAM_RESIZE:
		if (proc_resize(p, m.rows, m.cols, c) < 0)
			conn_detach(c);
		break;
	case STREAM_SIGNAL:
		if (proc_signal(p, m.signo, c) < 0)
			conn_detach(c);
		break;
	default:
		conn_detach(c);
		q_error(c, 400, "bad_request", "not an input kind");
		break;
	}
}

/* ---- a new operation from an operation child ---- */

static void
new_op(int ctl)
{
	static uint8_t buf[PROCMAN_MSG_MAX + 1];
	union {
		char buf[CMSG_SPACE(sizeof(int) * 4)];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
	struct msg_request req = { 0 };
	struct cmsghdr *cm;
	struct conn *c = NULL;
	const char *why;
	int fd = -1, nfds = 0;
	ssize_t n;

	if ((n = recvmsg(ctl, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT)) <= 0) {
		if (n == 0)
			fatalx("the operation socket closed");
		return;
	}
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t i = 0; i < k; i++) {
				int x;
				memcpy(&x, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
				if (nfds++ == 0)
					fd = x;
				else
					close(x);
			}
		}
	if (fd < 0)
		return;
	if (nfds != 1 || (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		close(fd);
		return;
	}
	for (int i = 0; i < PM_CONNS_MAX; i++)
		if (!conns[i].used) {
			c = &conns[i];
			break;
		}
	if (c == NULL) {
		send_error(fd, 503, "unavailable", "too many process streams");
		close(fd);
		return;
	}
	memset(c, 0, sizeof(*c));
	c->used = true;
	c->fd = fd;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	/* the operation child decoded it already; we are another process and
	 * read it again with the same codec */
	if (msg_request_decode(buf, (size_t)n, MSG_FORM_GUEST, &req, &why) != 0) {
		q_error(c, 400, "bad_request", why);
		return;
	}
	switch (req.op) {
	case OP_PROC_START: op_start(c, req.args); break;
	case OP_PROC_ATTACH: op_attach(c, req.args); break;
	case OP_PROC_LIST: op_list(c, req.args); break;
	case OP_PROC_SIGNAL: op_signal(c, req.args); break;
	case OP_PROC_STDIN: op_stdin(c, req.args); break;
	case OP_PROC_RESIZE: op_resize(c, req.args); break;
	default: q_error(c, 400, "bad_request", "op not served here"); break;
	}
	msg_request_free(&req);
}

/* ---- the loop ---- */

/* read one chunk of a process's output; false at EOF or error */
static bool
proc_read(struct proc *p, int *fd, uint8_t kind)
{
	static uint8_t buf[SPACE_STREAM_DATA_MAX];
	ssize_t n = read(*fd, buf, sizeof(buf));

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return true;
	if (n <= 0) {
		/* EOF, or EIO from a terminal whose last writer closed it */
		close_fd(fd);
		if (p->pty)
			close_fd(&p->in_fd);
		return false;
	}
	ring_add(p, kind, buf, (size_t)n);
	if (p->att != NULL)
		q_data(p->att, kind, buf, (size_t)n);
	if (p->reaped)
		p->linger_ms = mono_ms() + PROC_LINGER_MS;
	return true;
}

static void
proc_write_stdin(struct proc *p)
{
	ssize_t n = write(p->in_fd, p->inq, p->inq_len);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n < 0) {
		/* the process closed its stdin: what it did not read is dropped */
		p->inq_len = 0;
		close_fd(&p->in_fd);
		return;
	}
	memmove(p->inq, p->inq + n, p->inq_len - (size_t)n);
	p->inq_len -= (size_t)n;
	if (p->inq_len == 0 && p->in_eof && !p->pty)
		close_fd(&p->in_fd);
}

static void
proc_reap(struct proc *p)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG) < 0 || si.si_pid != p->pid)
		return;
	p->reaped = true;
	p->wst = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
	close_fd(&p->pidfd);
	/* a background child of the process may hold its output open: read
	 * what comes, and give up after a quiet moment */
	p->linger_ms = mono_ms() + PROC_LINGER_MS;
}

/* can the process's output be read now? only when it has a place to go */
static bool
out_wanted(const struct proc *p)
{
	const struct conn *c = p->att;

	return c == NULL || (c->replay == NULL && frame_wr_pending(&c->q) == 0);
}

noreturn void
procman_main(int ctl)
{
	struct pollfd pf[1 + SPACE_PROCS_MAX * 4 + PM_CONNS_MAX];
	struct { int kind, idx; } who[sizeof(pf) / sizeof(pf[0])];
	enum { W_CTL, W_OUT, W_ERR, W_IN, W_PID, W_CONN };
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGCHLD, SIG_DFL);
	for (int i = 0; i < SPACE_PROCS_MAX; i++)
		proc_free(&procs[i]);
	for (int i = 0; i < PM_CONNS_MAX; i++)
		conns[i].fd = -1;
	for (;;) {
		int np = 0, wait_ms = -1;
		int64_t now = mono_ms();

		/* timers and state changes first */
		for (int i = 0; i < SPACE_PROCS_MAX; i++) {
			struct proc *p = &procs[i];

			if (!p->used || p->finished)
				continue;
			if (p->deadline_ms > 0 && !p->reaped && now >= p->deadline_ms) {
				p->timed_out = true;
				p->deadline_ms = 0;
				kill(-p->pid, SIGKILL);
				kill(p->pid, SIGKILL);
			}
			if (p->reaped && ((p->out_fd < 0 && p->err_fd < 0) ||
			    (p->linger_ms >= 0 && now >= p->linger_ms && out_wanted(p))))
				proc_finish(p);
		}
		/* attached clients: replay, then the exit once replay is out */
		for (int i = 0; i < PM_CONNS_MAX; i++) {
			struct conn *c = &conns[i];

			if (!c->used)
				continue;
			while (c->replay != NULL && frame_wr_pending(&c->q) < SPACE_STREAM_PAYLOAD_MAX)
				replay_step(c);
			if (c->p != NULL && c->p->finished && c->replay == NULL && !c->closing)
				q_exit(c, c->p);
		}
		pf[np] = (struct pollfd){ ctl, POLLIN, 0 };
		who[np++].kind = W_CTL;
		for (int i = 0; i < SPACE_PROCS_MAX; i++) {
			struct proc *p = &procs[i];

			if (!p->used || p->finished)
				continue;
			if (out_wanted(p)) {
				if (p->out_fd >= 0) {
					pf[np] = (struct pollfd){ p->out_fd, POLLIN, 0 };
					who[np].kind = W_OUT; who[np++].idx = i;
				}
				if (p->err_fd >= 0) {
					pf[np] = (struct pollfd){ p->err_fd, POLLIN, 0 };
					who[np].kind = W_ERR; who[np++].idx = i;
				}
			}
			if (p->in_fd >= 0 && p->inq_len > 0) {
				pf[np] = (struct pollfd){ p->in_fd, POLLOUT, 0 };
				who[np].kind = W_IN; who[np++].idx = i;
			}
			if (!p->reaped && p->pidfd >= 0) {
				pf[np] = (struct pollfd){ p->pidfd, POLLIN, 0 };
				who[np].kind = W_PID; who[np++].idx = i;
			}
			if (!p->reaped && p->pidfd < 0)
				wait_ms = 100;  /* no pidfd: look again soon */
			if (p->deadline_ms > 0 && !p->reaped) {
				int64_t d = p->deadline_ms - now;
				if (wait_ms < 0 || d < wait_ms)
					wait_ms = d < 0 ? 0 : (int)d;
			}
			if (p->reaped && p->linger_ms >= 0) {
				int64_t d = p->linger_ms - now;
				if (wait_ms < 0 || d < wait_ms)
					wait_ms = d < 0 ? 0 : (int)d;
			}
		}
		for (int i = 0; i < PM_CONNS_MAX; i++) {
			struct conn *c = &conns[i];
			short ev = 0;

			if (!c->used)
				continue;
			if (frame_wr_pending(&c->q) > 0)
				ev |= POLLOUT;
			/* input is read only while it has somewhere to go */
			if (!c->closing && c->p != NULL && !c->p->finished &&
			    c->p->inq_len + SPACE_STREAM_PAYLOAD_MAX <= PROC_INQ_MAX)
				ev |= POLLIN;
			if (c->closing && frame_wr_pending(&c->q) == 0) {
				conn_close(c);
				continue;
			}
			pf[np] = (struct pollfd){ c->fd, ev, 0 };
			who[np].kind = W_CONN; who[np++].idx = i;
		}
		if (poll(pf, (nfds_t)np, wait_ms) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		for (int k = 0; k < np; k++) {
			short re = pf[k].revents;
			struct proc *p;
			struct conn *c;

			if (re == 0)
				continue;
			switch (who[k].kind) {
			case W_CTL:
				if (re & (POLLHUP | POLLERR))
					_exit(0);       /* PID 1 is gone */
				new_op(ctl);
				break;
			case W_OUT:
				p = &procs[who[k].idx];
				if (p->used && p->out_fd >= 0)
					proc_read(p, &p->out_fd, p->pty ? STREAM_PTY : STREAM_STDOUT);
				break;
			case W_ERR:
				p = &procs[who[k].idx];
				if (p->used && p->err_fd >= 0)
					proc_read(p, &p->err_fd, STREAM_STDERR);
				break;
			case W_IN:
				p = &procs[who[k].idx];
				if (p->used && p->in_fd >= 0 && p->inq_len > 0)
					proc_write_stdin(p);
				break;
			case W_PID:
				p = &procs[who[k].idx];
				if (p->used && !p->reaped)
					proc_reap(p);
				break;
			case W_CONN:
				c = &conns[who[k].idx];
				if (!c->used)
					break;
				if ((re & POLLOUT) && frame_wr_flush(&c->q, c->fd) < 0) {
					conn_close(c);
					break;
				}
				if (re & (POLLIN | POLLHUP | POLLERR)) {
					struct frame f = { 0 };
					int r;

					if (c->closing || c->p == NULL) {
						/* not reading: a hang-up ends it */
						if ((re & (POLLHUP | POLLERR)) && !(re & POLLIN))
							conn_close(c);
						break;
					}
					r = frame_rd_step(&c->rd, c->fd, &f);
					if (r == 1) {
						client_frame(c, &f);
						frame_free(&f);
					} else if (r == -EPROTO || r == -EMSGSIZE) {
						conn_detach(c);
						q_error(c, 400, "bad_request", r == -EMSGSIZE ?
						    "frame too large" : "bad frame");
					} else if (r < 0) {
						/* the client left: detach, the process runs on */
						conn_close(c);
					}
				}
				break;
			}
		}
		/* reap what has no pidfd */
		for (int i = 0; i < SPACE_PROCS_MAX; i++)
			if (procs[i].used && !procs[i].reaped && procs[i].pidfd < 0)
				proc_reap(&procs[i]);
	}
}
