/* space up: the process table. Each child is spawned with libuv, its
 * output appended to DIR/logs/<name>.log; an exit that was not asked for
 * is followed by a restart after a backoff that doubles up to 30 s. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <uv.h>

#include "up.h"

void
up_say(const char *fmt, ...)
{
	char ts[16];
	time_t t = time(NULL);
	struct tm tm;
	va_list ap;

	localtime_r(&t, &tm);
	strftime(ts, sizeof(ts), "%H:%M:%S", &tm);
	printf("[%s] ", ts);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void
log_line(struct up_child *k, const char *what)
{
	int fd = open(k->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);

	if (fd >= 0) {
		dprintf(fd, "space up: %s %s\n", k->name, what);
		close(fd);
	}
}

static size_t
live(struct up *up)
{
	size_t i, n = 0;

	for (i = 0; i < up->nkids; i++)
		n += up->kids[i]->running || up->kids[i]->closing;
	return n;
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig);
static void on_close(uv_handle_t *h);

static int
spawn(struct up_child *k)
{
	uv_process_options_t o;
	uv_stdio_container_t io[3];
	int fd, rc;

	fd = open(k->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	memset(&o, 0, sizeof(o));
	memset(io, 0, sizeof(io));
	io[0].flags = UV_IGNORE;
	io[1].flags = UV_INHERIT_FD;
	io[1].data.fd = fd;
	io[2].flags = UV_INHERIT_FD;
	io[2].data.fd = fd;
	o.file = k->argv[0];
	o.args = k->argv;
	o.exit_cb = on_exit_cb;
	o.stdio = io;
	o.stdio_count = 3;
	/* a session of its own: a terminal's ^C reaches the supervisor only,
	 * which then stops the children in order instead of racing them */
	o.flags = UV_PROCESS_DETACHED;
	k->proc.data = k;
	rc = uv_spawn(&k->up->loop, &k->proc, &o);
	close(fd);
	if (rc < 0) {
		/* libuv wants the handle closed even when spawning failed */
		k->closing = 1;
		return rc;
	}
	k->running = 1;
	k->started_ms = uv_now(&k->up->loop);
	return 0;
}

static void
on_restart(uv_timer_t *t)
{
	struct up_child *k = t->data;
	char what[128];
	int rc;

	if (k->up->stopping || k->running || k->closing)
		return;
	k->restarts++;
	k->started_ms = uv_now(&k->up->loop);
	if ((rc = spawn(k)) < 0) {
		snprintf(what, sizeof(what), "could not be restarted: %s", uv_strerror(rc));
		up_say("%s %s", k->name, what);
		log_line(k, what);
		/* closing the failed handle schedules the next attempt, with
		 * a longer backoff: the binary may come back */
		uv_close((uv_handle_t *)&k->proc, on_close);
		return;
	}
	snprintf(what, sizeof(what), "restarted (restart %u, pid %d)", k->restarts, k->proc.pid);
	up_say("%s %s", k->name, what);
	log_line(k, what);
}

static void
finish_if_done(struct up *up)
{
	size_t i;

	if (!up->stopping || live(up) > 0)
		return;
	/* every child is gone: close what keeps the loop alive */
	uv_timer_stop(&up->kill_timer);
	if (!uv_is_closing((uv_handle_t *)&up->kill_timer))
		uv_close((uv_handle_t *)&up->kill_timer, NULL);
	if (!uv_is_closing((uv_handle_t *)&up->sigint))
		uv_close((uv_handle_t *)&up->sigint, NULL);
	if (!uv_is_closing((uv_handle_t *)&up->sigterm))
		uv_close((uv_handle_t *)&up->sigterm, NULL);
	for (i = 0; i < up->nkids; i++)
		if (!uv_is_closing((uv_handle_t *)&up->kids[i]->restart))
			uv_close((uv_handle_t *)&up->kids[i]->restart, NULL);
}

static void
on_close(uv_handle_t *h)
{
	struct up_child *k = h->data;
	struct up *up = k->up;
	uint64_t ran;

	k->closing = 0;
	if (up->stopping) {
		finish_if_done(up);
		return;
	}
	ran = uv_now(&up->loop) - k->started_ms;
	if (ran >= UP_STABLE_MS || k->backoff_ms == 0)
		k->backoff_ms = UP_BACKOFF_MIN_MS;
	else if ((k->backoff_ms *= 2) > UP_BACKOFF_MAX_MS)
		k->backoff_ms = UP_BACKOFF_MAX_MS;
	uv_timer_start(&k->restart, on_restart, k->backoff_ms, 0);
}

static void
on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
	struct up_child *k = p->data;
	struct up *up = k->up;
	char what[160];

	k->running = 0;
	k->closing = 1;
	if (sig)
		snprintf(what, sizeof(what), "(pid %d) killed by signal %d", p->pid, sig);
	else
		snprintf(what, sizeof(what), "(pid %d) exited with status %lld", p->pid,
		    (long long)status);
	log_line(k, what);
	if (!up->stopping)
		up_say("%s %s; restarting (see %s)", k->name, what, k->log);
	uv_close((uv_handle_t *)p, on_close);
}

static void
on_kill_timer(uv_timer_t *t)
{
	struct up *up = t->data;
	size_t i;

	for (i = 0; i < up->nkids; i++)
		if (up->kids[i]->running) {
			up_say("%s did not stop within %d s: SIGKILL", up->kids[i]->name,
			    UP_KILL_AFTER_MS / 1000);
			uv_process_kill(&up->kids[i]->proc, SIGKILL);
		}
}

void
up_stop(struct up *up)
{
	size_t i;

	if (up->stopping)
		return;
	up->stopping = 1;
	for (i = 0; i < up->nkids; i++) {
		uv_timer_stop(&up->kids[i]->restart);
		if (up->kids[i]->running)
			uv_process_kill(&up->kids[i]->proc, SIGTERM);
	}
	uv_timer_start(&up->kill_timer, on_kill_timer, UP_KILL_AFTER_MS, 0);
	finish_if_done(up);
}

static void
on_signal(uv_signal_t *s, int signum)
{
	struct up *up = s->data;

	if (!up->stopping)
		up_say("%s: stopping every process", signum == SIGINT ? "SIGINT" : "SIGTERM");
	up_stop(up);
}

int
up_init(struct up *up)
{
	int rc;

	if ((rc = uv_loop_init(&up->loop)) < 0)
		return rc;
	uv_signal_init(&up->loop, &up->sigint);
	uv_signal_init(&up->loop, &up->sigterm);
	uv_timer_init(&up->loop, &up->kill_timer);
	up->sigint.data = up->sigterm.data = up->kill_timer.data = up;
	uv_signal_start(&up->sigint, on_signal, SIGINT);
	uv_signal_start(&up->sigterm, on_signal, SIGTERM);
	/* a supervisor that dies of a closed terminal would orphan everything */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGHUP, SIG_IGN);
	return 0;
}

int
up_child_start(struct up *up, const char *name, char *const argv[])
{
	struct up_child *k;
	size_t i;
	int rc;

	if (up->nkids >= UP_CHILDREN_MAX || up->stopping)
		return -ENOSPC;
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return -ENOMEM;
	k->up = up;
	snprintf(k->name, sizeof(k->name), "%s", name);
	snprintf(k->log, sizeof(k->log), "%s/logs/%s.log", up->dir, name);
	for (i = 0; argv[i] && i < UP_ARGS_MAX; i++)
		if ((k->argv[i] = strdup(argv[i])) == NULL) {
			rc = -ENOMEM;
			goto fail;
		}
	/* an argument list cut short would start the child with its last
	 * option's value missing */
	if (argv[i] != NULL) {
		rc = -E2BIG;
		goto fail;
	}
	uv_timer_init(&up->loop, &k->restart);
	k->restart.data = k;
	k->proc.data = k;
	up->kids[up->nkids++] = k;
	if ((rc = spawn(k)) < 0) {
		uv_close((uv_handle_t *)&k->proc, on_close);
		return rc;
	}
	log_line(k, "started");
	return 0;
fail:
	for (i = 0; k->argv[i]; i++)
		free(k->argv[i]);
	free(k);
	return rc;
}

void
up_pump(struct up *up, unsigned ms)
{
	uint64_t end = uv_hrtime() + (uint64_t)ms * 1000000u;

	do {
		uv_run(&up->loop, UV_RUN_NOWAIT);
		if (up->stopping)
			return;
		usleep(20 * 1000);
	} while (uv_hrtime() < end);
}

void
up_run(struct up *up)
{
	uv_run(&up->loop, UV_RUN_DEFAULT);
}

void
up_fini(struct up *up)
{
	size_t i, j;

	up_stop(up);
	uv_run(&up->loop, UV_RUN_DEFAULT);
	uv_loop_close(&up->loop);
	if (up->nkids > 0)
		up_bridges_stop(up);
	for (i = 0; i < up->nkids; i++) {
		for (j = 0; up->kids[i]->argv[j]; j++)
			free(up->kids[i]->argv[j]);
		free(up->kids[i]);
	}
	up->nkids = 0;
}
