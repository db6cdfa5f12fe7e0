/* exec: run one command as the sandbox user, in its own process group,
 * with a deadline; capture stdout and stderr up to a bound. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sodium.h>

#include "guest.h"
#include "limits.h"
#include "log.h"
#include "proto.h"
#include "util.h"

#define EXEC_TIMEOUT_DEFAULT 60
/* room left in a RESPONSE frame for everything but the two outputs,
 * including the "serving" identity the bridge adds */
#define EXEC_RESPONSE_SLACK 2048

struct outbuf {
	char *buf;
	size_t len;
	bool truncated;
};

struct exec_req {
	char **argv, **envp;
	const char *cwd;
	unsigned char *in;
	size_t in_len;
	int timeout;
};

static void
exec_req_free(struct exec_req *e)
{
	if (e->argv)
		free(e->argv);
	env_free(e->envp);
	free(e->in);
}

void
env_free(char **envp)
{
	size_t i;

	if (envp == NULL)
		return;
	for (i = 0; envp[i]; i++)
		free(envp[i]);
	free(envp);
}

static bool
env_name_ok(const char *k)
{
	if (*k == '\0')
		return false;
	for (; *k; k++)
		if (*k == '=')
			return false;
	return true;
}

/* the template sets key (a name from base_env) */
static bool
tpl_env_has(const char *key)
{
	size_t i, kl = strlen(key);

	for (i = 0; i < guest_tpl.nenv; i++)
		if (strncmp(guest_tpl.env[i], key, kl) == 0 && guest_tpl.env[i][kl] == '=')
			return true;
	return false;
}

/* the environment of a command: the defaults, the template's, TERM when
 * given, then the request's "env" (which overrides either of the same name) */
int
env_build(json_t *env, const char *term, char ***out, const char **why)
{
	static const char *const base_env[] = {
		"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" GUEST_HOME, "USER=user",
		"LOGNAME=user", "SHELL=/bin/sh", "LANG=C.UTF-8", NULL
	};
	const char *k;
	json_t *v;
	char **envp;
	size_t i, nenv = 0;

	*out = NULL;
	if (env != NULL && (!json_is_object(env) || json_object_size(env) > SPACE_ENV_MAX))
		return *why = "env must be an object of at most SPACE_ENV_MAX strings", -EINVAL;
	if ((envp = calloc(json_object_size(env) + 9 + guest_tpl.nenv, sizeof(char *))) == NULL)
		return *why = "out of memory", -ENOMEM;
	*out = envp;
	for (i = 0; base_env[i]; i++) {
		size_t kl = strcspn(base_env[i], "=");
		char key[32];
		snprintf(key, sizeof(key), "%.*s", (int)kl, base_env[i]);
		if ((env && json_object_get(env, key)) || tpl_env_has(key))
			continue;
		if ((envp[nenv++] = strdup(base_env[i])) == NULL)
			return *why = "out of memory", -ENOMEM;
	}
	/* the template's, unless the request names the same variable */
	for (i = 0; i < guest_tpl.nenv; i++) {
		size_t kl = strcspn(guest_tpl.env[i], "=");
		char key[256];
		snprintf(key, sizeof(key), "%.*s", (int)kl, guest_tpl.env[i]);
		if ((env && json_object_get(env, key)) || (term && strcmp(key, "TERM") == 0))
			continue;
		if ((envp[nenv++] = strdup(guest_tpl.env[i])) == NULL)
			return *why = "out of memory", -ENOMEM;
	}
	if (term != NULL && !(env && json_object_get(env, "TERM")) &&
	    asprintf(&envp[nenv++], "TERM=%s", term) < 0) {
		envp[--nenv] = NULL;
		return *why = "out of memory", -ENOMEM;
	}
	json_object_foreach(env, k, v) {
		if (!json_is_string(v) || !env_name_ok(k) ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return *why = "env holds a bad name or value", -EINVAL;
		if (asprintf(&envp[nenv], "%s=%s", k, json_string_value(v)) < 0) {
			envp[nenv] = NULL;
			return *why = "out of memory", -ENOMEM;
		}
		nenv++;
	}
	return 0;
}

/* 0, or -EINVAL with *why */
static int
exec_parse(json_t *args, struct exec_req *e, const char **why)
{
	static const char *const keys[] = { "argv", "env", "cwd", "stdin", "stdin_b64", "timeout", NULL };
	json_t *argv = json_object_get(args, "argv"), *env = json_object_get(args, "env");
	json_t *to = json_object_get(args, "timeout"), *in = json_object_get(args, "stdin");
	json_t *in64 = json_object_get(args, "stdin_b64"), *v;
	const char *bad;
	size_t i, n;

	memset(e, 0, sizeof(*e));
	e->timeout = EXEC_TIMEOUT_DEFAULT;
	if (args_only(args, keys, &bad) < 0)
		return *why = "unknown field in exec args", -EINVAL;
	if (!json_is_array(argv) || (n = json_array_size(argv)) == 0 || n > SPACE_ARGV_MAX)
		return *why = "argv must be a non-empty array of at most SPACE_ARGV_MAX strings", -EINVAL;
	if ((e->argv = calloc(n + 1, sizeof(char *))) == NULL)
		return *why = "out of memory", -ENOMEM;
	json_array_foreach(argv, i, v) {
		if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
			return *why = "argv holds a non-string or a NUL", -EINVAL;
		e->argv[i] = (char *)json_string_value(v);
	}
	if (env_build(env, NULL, &e->envp, why) < 0)
		return -EINVAL;
	if (json_object_get(args, "cwd") != NULL &&
	    (e->cwd = arg_path(args, "cwd")) == NULL)
		return *why = "cwd must be a path", -EINVAL;
	if (to != NULL) {
		if (!json_is_integer(to) || json_integer_value(to) < 1 ||
		    json_integer_value(to) > SPACE_EXEC_TIMEOUT_MAX)
			return *why = "timeout must be an integer 1..SPACE_EXEC_TIMEOUT_MAX", -EINVAL;
		e->timeout = (int)json_integer_value(to);
	}
	if (in && in64)
		return *why = "stdin and stdin_b64 are exclusive", -EINVAL;
	if (in) {
		if (!json_is_string(in) || json_string_length(in) > SPACE_EXEC_STDIN_MAX)
			return *why = "stdin must be a string of at most SPACE_EXEC_STDIN_MAX bytes", -EINVAL;
		e->in_len = json_string_length(in);
		if ((e->in = malloc(e->in_len + 1)) == NULL)
			return *why = "out of memory", -ENOMEM;
		memcpy(e->in, json_string_value(in), e->in_len);
	} else if (in64) {
		size_t l;
		if (!json_is_string(in64) || (l = json_string_length(in64)) > SPACE_EXEC_STDIN_MAX / 3 * 4 + 4)
			return *why = "stdin_b64 must be base64 of at most SPACE_EXEC_STDIN_MAX bytes", -EINVAL;
		if ((e->in = malloc(l + 1)) == NULL)
			return *why = "out of memory", -ENOMEM;
		if (sodium_base642bin(e->in, l + 1, json_string_value(in64), l, NULL,
		    &e->in_len, NULL, sodium_base64_VARIANT_ORIGINAL) != 0)
			return *why = "stdin_b64 is not standard base64", -EINVAL;
	}
	return 0;
}

static void
out_take(struct outbuf *o, const char *p, size_t n)
{
	size_t room = SPACE_EXEC_OUTPUT_MAX - o->len;

	/* past the bound we keep reading (so the child never blocks on a
	 * full pipe) and throw the bytes away */
	if (n > room) {
		o->truncated = true;
		n = room;
	}
	if (n == 0)
		return;
	if (o->buf == NULL && (o->buf = malloc(SPACE_EXEC_OUTPUT_MAX)) == NULL) {
		o->truncated = true;
		return;
	}
	memcpy(o->buf + o->len, p, n);
	o->len += n;
}

static void
close_pair(int p[2])
{
	if (p[0] >= 0)
		close(p[0]);
	if (p[1] >= 0)
		close(p[1]);
}

static int64_t
mono_ms(void)
{
	return (int64_t)(now_mono_ns() / 1000000u);
}

/* put one output into result as text, or as base64 when it is not UTF-8 */
static int
put_output(json_t *res, const char *name, const struct outbuf *o, size_t keep)
{
	char key[32];
	json_t *s = json_stringn(o->buf ? o->buf : "", keep);

	if (s != NULL)
		return json_object_set_new(res, name, s);
	size_t cap = sodium_base64_ENCODED_LEN(keep, sodium_base64_VARIANT_ORIGINAL);
	char *b = malloc(cap);
	int r;
	if (b == NULL)
		return -1;
	sodium_bin2base64(b, cap, (const unsigned char *)o->buf, keep, sodium_base64_VARIANT_ORIGINAL);
	snprintf(key, sizeof(key), "%s_b64", name);
	r = json_object_set_new(res, key, json_string(b));
	free(b);
	return r;
}

static json_t *
build_result(int wst, bool timed_out, const struct outbuf *o1, const struct outbuf *o2)
{
	size_t keep1 = o1->len, keep2 = o2->len;
	bool t1 = o1->truncated, t2 = o2->truncated;

	/* the whole answer must fit one RESPONSE frame: shrink the larger
	 * output until it does, and say so */
	for (;;) {
		json_t *res = json_object();
		char *s;
		size_t n;

		if (res == NULL)
			return NULL;
		if (WIFSIGNALED(wst)) {
			json_object_set_new(res, "exit_code", json_null());
			json_object_set_new(res, "signal", json_integer(WTERMSIG(wst)));
		} else {
			json_object_set_new(res, "exit_code", json_integer(WEXITSTATUS(wst)));
			json_object_set_new(res, "signal", json_null());
		}
		json_object_set_new(res, "timed_out", json_boolean(timed_out));
		put_output(res, "stdout", o1, keep1);
		put_output(res, "stderr", o2, keep2);
		json_object_set_new(res, "stdout_truncated", json_boolean(t1));
		json_object_set_new(res, "stderr_truncated", json_boolean(t2));
		s = json_dumps(res, JSON_COMPACT);
		n = s ? strlen(s) : SIZE_MAX;
		free(s);
		if (n + 64 + EXEC_RESPONSE_SLACK <= frame_max_len(MSG_RESPONSE))
			return res;
		json_decref(res);
		if (keep1 == 0 && keep2 == 0)
			return NULL;
		if (keep1 >= keep2) {
			keep1 = keep1 > 1024 ? keep1 * 3 / 4 : 0;
			/* cut at a UTF-8 character boundary so text stays text */
			while (keep1 > 0 && ((unsigned char)o1->buf[keep1] & 0xc0) == 0x80)
				keep1--;
			t1 = true;
		} else {
			keep2 = keep2 > 1024 ? keep2 * 3 / 4 : 0;
			while (keep2 > 0 && ((unsigned char)o2->buf[keep2] & 0xc0) == 0x80)
				keep2--;
			t2 = true;
		}
	}
}

/* The command, started with vfork: no copy of this process's page tables
 * per exec, its parent waits only until the command has exec'd. Until
 * then the child shares our memory, so it makes system calls and nothing
 * else (execvpe searches PATH on the stack, as before), and leaves the
 * errno of a failed chdir or exec in *err. The pid or -errno. */
static pid_t __attribute__((noinline))
spawn_command(const struct exec_req *e, const int fds[3], volatile int *err)
{
	pid_t pid;

	*err = 0;
	if ((pid = vfork()) != 0)
		return pid < 0 ? -errno : pid;
	/* its own process group, so a timeout can kill the command and
	 * everything it started without touching the guest */
	setpgid(0, 0);
	if (dup2(fds[0], 0) < 0 || dup2(fds[1], 1) < 0 || dup2(fds[2], 2) < 0)
		_exit(127);
	if (e->cwd == NULL || chdir(e->cwd) == 0) {
		signal(SIGPIPE, SIG_DFL);
		execvpe(e->argv[0], e->argv, e->envp);
	}
	*err = errno ? errno : ENOEXEC;
	_exit(127);
}

void
op_exec(int fd, json_t *args)
{
	struct exec_req e;
	struct outbuf out = { 0 }, err = { 0 };
	int pin[2] = { -1, -1 }, pout[2] = { -1, -1 }, perr[2] = { -1, -1 };
	int pidfd = -1, wst = 0, child_errno = 0;
	const char *why = "bad exec args";
	size_t in_off = 0;
	bool timed_out = false, exited = false;
	int64_t deadline, linger = -1;
	char buf[65536];
	pid_t pid;
	ssize_t n;

	if (exec_parse(args, &e, &why) < 0) {
		send_error(fd, 400, "bad_request", why);
		goto out;
	}
	if (pipe2(pin, O_CLOEXEC) < 0 || pipe2(pout, O_CLOEXEC) < 0 ||
	    pipe2(perr, O_CLOEXEC) < 0) {
		send_errno(fd, errno, "pipe");
		goto out;
	}
	{
		const int fds[3] = { pin[0], pout[1], perr[1] };
		volatile int cerr = 0;

		if ((pid = spawn_command(&e, fds, &cerr)) < 0) {
			send_errno(fd, -pid, "fork");
			goto out;
		}
		child_errno = cerr;
	}
	/* the child set its process group before its exec, which is
	 * before vfork returned here */
	close(pin[0]); pin[0] = -1;
	close(pout[1]); pout[1] = -1;
	close(perr[1]); perr[1] = -1;
	/* exec failure (no such program, bad cwd) is an error of the
	 * request, not an exit status */
	if (child_errno != 0) {
		waitpid(pid, NULL, 0);
		send_errno(fd, child_errno, e.cwd && child_errno == ENOENT ? "cwd or program" : e.argv[0]);
		goto out;
	}
	pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	fcntl(pin[1], F_SETFL, O_NONBLOCK);
	if (e.in_len == 0) {
		close(pin[1]);
		pin[1] = -1;
	}
	deadline = mono_ms() + (int64_t)e.timeout * 1000;
	for (;;) {
		struct pollfd p[4];
		int np = 0, ip = -1, io = -1, ie = -1, ix = -1, wait_ms;
		int64_t now = mono_ms();

		if (!exited && !timed_out && now >= deadline) {
			timed_out = true;
			killpg(pid, SIGKILL);
			linger = now + 1000;
		}
		if (linger >= 0 && now >= linger)
			break;
		if (pout[0] < 0 && perr[0] < 0 && exited)
			break;
		if (pin[1] >= 0) { ip = np; p[np++] = (struct pollfd){ pin[1], POLLOUT, 0 }; }
		if (pout[0] >= 0) { io = np; p[np++] = (struct pollfd){ pout[0], POLLIN, 0 }; }
		if (perr[0] >= 0) { ie = np; p[np++] = (struct pollfd){ perr[0], POLLIN, 0 }; }
		if (!exited && pidfd >= 0) { ix = np; p[np++] = (struct pollfd){ pidfd, POLLIN, 0 }; }
		wait_ms = (int)((linger >= 0 ? linger : deadline) - now);
		if (pidfd < 0 && !exited && wait_ms > 100)
			wait_ms = 100;
		if (wait_ms < 0)
			wait_ms = 0;
		if (poll(p, (nfds_t)np, wait_ms) < 0 && errno != EINTR)
			break;
		if (ip >= 0 && (p[ip].revents & (POLLOUT | POLLERR | POLLHUP))) {
			n = write(pin[1], e.in + in_off, e.in_len - in_off);
			if (n > 0)
				in_off += (size_t)n;
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				in_off = e.in_len;      /* the reader left: drop the rest */
			if (in_off == e.in_len) {
				close(pin[1]);
				pin[1] = -1;
			}
		}
		if (io >= 0 && (p[io].revents & (POLLIN | POLLHUP | POLLERR))) {
			if ((n = read(pout[0], buf, sizeof(buf))) > 0)
				out_take(&out, buf, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				close(pout[0]);
				pout[0] = -1;
			}
		}
		if (ie >= 0 && (p[ie].revents & (POLLIN | POLLHUP | POLLERR))) {
			if ((n = read(perr[0], buf, sizeof(buf))) > 0)
				out_take(&err, buf, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				close(perr[0]);
				perr[0] = -1;
			}
		}
		if (!exited && (ix < 0 || (p[ix].revents & POLLIN))) {
			if (waitpid(pid, &wst, WNOHANG) == pid) {
				exited = true;
				/* a background process may hold the pipes open:
				 * collect what is already there, then answer */
				if (linger < 0)
					linger = mono_ms() + 200;
			}
		}
	}
	if (!exited) {
		killpg(pid, SIGKILL);
		waitpid(pid, &wst, 0);
	}
	{
		json_t *res = build_result(wst, timed_out, &out, &err);
		if (res == NULL)
			send_error(fd, 500, "internal", "cannot encode the result");
		else
			send_result(fd, res);
	}
out:
	close_pair(pin);
	close_pair(pout);
	close_pair(perr);
	if (pidfd >= 0)
		close(pidfd);
	free(out.buf);
	free(err.buf);
	exec_req_free(&e);
}
