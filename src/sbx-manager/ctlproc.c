/* The parent's side of the control-plane client (docs/worker.md, "The
 * control-plane client"): starts the unprivileged child (ctlchild.c) as a
 * new image of this executable, hands it requests over a SOCK_SEQPACKET
 * socket pair and gives each caller its answer, decoded by ctlmsg.h's
 * strict codec. The child is read as hostile: a packet that does not
 * decode, an answer of the wrong type or out of order ends it; so does its
 * death; either way every waiting caller gets -EIO at once, and the child
 * is started again after a back-off, while sbx-manager goes on serving. */
#include <errno.h>
#include <fcntl.h>
#include <linux/close_range.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "log.h"
#include "msg.h"
#include "sbx-manager.h"
#include "util.h"

#define CHILD_SOCK_FD   3
#define CHILD_CRED_FD   4
#define EXIT_BAD_CRED   78
#define BACKOFF_MAX_S   30
#define STABLE_S        60      /* a child that lived this long resets the back-off */
#define UP_WAIT_S       5       /* a caller waits this long for a child to be up */

struct ctl_call {
	struct ctl_call *next;
	uint32_t id;
	uint8_t want;                   /* the answer's type */
	bool head;                      /* the answer (ASSIGNMENTS: its header) came */
	bool done;
	int err;
	struct ctlmsg ans;
	struct msg_assignments *as;     /* ASSIGN_GET: filled record by record */
};

struct mgr_ctlproc {
	pthread_mutex_t lock;
	pthread_cond_t cond;            /* a call ended, or the child came up */
	int sock;                       /* -1 while there is no child */
	pid_t pid;
	uint32_t next_id;
	struct ctl_call *calls;
	int exe_fd;                     /* this executable, for the child's image */
	int cred_fd;                    /* the credential file, read only by the child */
	int verbose;
	unsigned starts;
};

static void
deadline_in(struct timespec *ts, int seconds)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += seconds;
}

int
ctlproc_init(struct mgr *m, int cred_fd, int verbose)
{
	struct mgr_ctlproc *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&c->lock, NULL);
	cond_init_mono(&c->cond);
	c->sock = -1;
	c->pid = -1;
	c->cred_fd = cred_fd;
	c->verbose = verbose;
	/* the image the child runs is the one this process runs, even if the
	 * file is replaced meanwhile (the two speak one protocol version) */
	if ((c->exe_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC)) < 0) {
		free(c);
		return -errno;
	}
	m->ctlproc = c;
	return 0;
}

static int
spawn(struct mgr *m, struct mgr_ctlproc *c)
{
	char ppid[24], *argv[7];
	extern char **environ;
	int sv[2], r, i = 0;
	pid_t pid;

	snprintf(ppid, sizeof(ppid), "%d", (int)getpid());
	argv[i++] = (char *)"sbx-manager";
	argv[i++] = (char *)"control-client";
	argv[i++] = m->cfg.control_url;
	argv[i++] = m->cfg.worker_id;
	argv[i++] = ppid;
	if (c->verbose)
		argv[i++] = (char *)"-v";
	argv[i] = NULL;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
		return -errno;
	/* a new image, not a fork of ours: nothing of this process (records,
	 * verified keys, requests in flight) is in the child, and only
	 * async-signal-safe calls run between fork and exec here */
	if ((pid = fork()) < 0) {
		r = -errno;
		close(sv[0]);
		close(sv[1]);
		return r;
	}
	if (pid == 0) {
		sigset_t none;
		int a, b;

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		if ((a = fcntl(sv[1], F_DUPFD, 10)) < 0 || (b = fcntl(c->cred_fd, F_DUPFD, 10)) < 0 ||
		    dup2(a, CHILD_SOCK_FD) < 0 || dup2(b, CHILD_CRED_FD) < 0)
			_exit(127);
		/* the rest ends at exec (the image itself is one of them) */
		(void)syscall(SYS_close_range, CHILD_CRED_FD + 1, ~0u, CLOSE_RANGE_CLOEXEC);
		syscall(SYS_execveat, c->exe_fd, "", argv, environ, AT_EMPTY_PATH);
		_exit(127);
	}
	close(sv[1]);
	pthread_mutex_lock(&c->lock);
	c->sock = sv[0];
	c->pid = pid;
	c->starts++;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
	log_info("control client started (pid %d)", (int)pid);
	return 0;
}

/* lock held */
static struct ctl_call *
find(struct mgr_ctlproc *c, uint32_t id)
{
	struct ctl_call *k;

	for (k = c->calls; k; k = k->next)
		if (k->id == id)
			return k;
	return NULL;
}

/* one packet from the child: 0, or -EPROTO when it broke the protocol.
 * An answer to a call that is not waiting any more (it timed out) is
 * dropped. lock held. */
static int
dispatch(struct mgr_ctlproc *c, struct ctlmsg *msg, const char **why)
{
	struct ctl_call *k = find(c, msg->id);

	if (ctlmsg_is_request(msg->type)) {
		*why = "a request from the child";
		return -EPROTO;
	}
	if (k == NULL) {
		ctlmsg_clear(msg);
		return 0;
	}
	if (msg->type == CTL_ASSIGNMENT) {
		if (k->want != CTL_ASSIGNMENTS || !k->head || k->done ||
		    msg->index != k->as->n) {
			*why = "an assignment record out of order";
			return -EPROTO;
		}
		k->as->a[k->as->n++] = msg->a;
		ctlmsg_clear(msg);
		k->done = k->as->n == k->ans.count;
		return 0;
	}
	if (msg->type != k->want || k->head) {
		*why = "an answer of another type";
		return -EPROTO;
	}
	k->ans = *msg;
	memset(msg, 0, sizeof(*msg));
	k->head = true;
	k->done = true;
	if (k->want == CTL_ASSIGNMENTS && k->ans.result == CTL_OK) {
		k->as->revision = k->ans.revision;
		if (k->ans.count > 0) {
			if ((k->as->a = calloc(k->ans.count, sizeof(*k->as->a))) == NULL) {
				*why = "out of memory";
				return -EPROTO;
			}
			k->done = false;
		}
	}
	return 0;
}

/* lock held: the child is gone; every caller learns it now */
static void
fail_all(struct mgr_ctlproc *c)
{
	struct ctl_call *k;

	for (k = c->calls; k; k = k->next)
		if (!k->done) {
			k->done = true;
			k->err = -EIO;
		}
	pthread_cond_broadcast(&c->cond);
}

void *
ctlproc_thread(void *arg)
{
	struct mgr *m = arg;
	struct mgr_ctlproc *c = m->ctlproc;
	unsigned backoff = 1;
	struct ctlmsg msg;
	const char *why;
	time_t t0;
	int r, st, sock;
	pid_t pid;

	for (;;) {
		if ((r = spawn(m, c)) < 0) {
			log_warnx("control client: cannot start: %s", strerror(-r));
			sleep(backoff);
			backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
			continue;
		}
		t0 = time(NULL);
		sock = c->sock;
		why = NULL;
		for (;;) {
			if ((r = ctlmsg_recv(sock, &msg, NULL, &why)) < 0)
				break;
			pthread_mutex_lock(&c->lock);
			r = dispatch(c, &msg, &why);
			pthread_cond_broadcast(&c->cond);
			pthread_mutex_unlock(&c->lock);
			ctlmsg_clear(&msg);
			if (r < 0)
				break;
		}
		pthread_mutex_lock(&c->lock);
		pid = c->pid;
		c->sock = -1;
		c->pid = -1;
		fail_all(c);
		pthread_mutex_unlock(&c->lock);
		close(sock);
		if (r == -EPROTO)
			log_warnx("control client (pid %d) broke the protocol (%s): ended",
			    (int)pid, why ? why : "?");
		/* a child that broke the protocol may still run; it never
		 * outlives its socket by more than this */
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		if (atomic_load(&m->stopping))
			return NULL;
		if (WIFEXITED(st) && WEXITSTATUS(st) == EXIT_BAD_CRED)
			fatalx("the credential file is not one token");
		if (r != -EPROTO)
			log_warnx("control client (pid %d) %s %d; started again in %u s", (int)pid,
			    WIFSIGNALED(st) ? "ended by signal" : "exited with",
			    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), backoff);
		if (time(NULL) - t0 >= STABLE_S)
			backoff = 1;
		sleep(backoff);
		backoff = backoff * 2 > BACKOFF_MAX_S ? BACKOFF_MAX_S : backoff * 2;
	}
}

int
ctlproc_start(struct mgr *m, struct ctlmsg *req, int fd, struct msg_assignments *as,
    struct ctl_call **out)
{
	struct mgr_ctlproc *c = m->ctlproc;
	struct ctl_call *k;
	struct timespec dl;
	int r;

	*out = NULL;
	if ((k = calloc(1, sizeof(*k))) == NULL)
		return -ENOMEM;
	switch (req->type) {
	case CTL_KEYS_GET: k->want = CTL_KEYS; break;
	case CTL_ASSIGN_GET: k->want = CTL_ASSIGNMENTS; break;
	case CTL_ARCHIVES_POST: k->want = CTL_COLLECT; break;
	default: k->want = CTL_DONE; break;
	}
	k->as = as;
	deadline_in(&dl, UP_WAIT_S);
	pthread_mutex_lock(&c->lock);
	/* while the child is being started again: wait a little, then tell
	 * the caller the control plane cannot be reached */
	while (c->sock < 0 && !atomic_load(&m->stopping))
		if (pthread_cond_timedwait(&c->cond, &c->lock, &dl) == ETIMEDOUT)
			break;
	if (c->sock < 0) {
		pthread_mutex_unlock(&c->lock);
		free(k);
		return -EIO;
	}
	k->id = req->id = ++c->next_id;
	if ((r = ctlmsg_send(c->sock, req, fd)) < 0) {
		pthread_mutex_unlock(&c->lock);
		free(k);
		return r == -EINVAL ? r : -EIO;
	}
	k->next = c->calls;
	c->calls = k;
	pthread_mutex_unlock(&c->lock);
	*out = k;
	return 0;
}

int
ctlproc_wait(struct mgr *m, struct ctl_call *k, int timeout_s, struct ctlmsg *ans)
{
	struct mgr_ctlproc *c = m->ctlproc;
	struct ctl_call **pp;
	struct timespec dl;
	int r;

	deadline_in(&dl, timeout_s);
	pthread_mutex_lock(&c->lock);
	while (!k->done)
		if (pthread_cond_timedwait(&c->cond, &c->lock, &dl) == ETIMEDOUT)
			break;
	for (pp = &c->calls; *pp; pp = &(*pp)->next)
		if (*pp == k) {
			*pp = k->next;
			break;
		}
	pthread_mutex_unlock(&c->lock);
	r = !k->done ? -ETIMEDOUT : k->err;
	if (r == 0)
		*ans = k->ans;
	else {
		ctlmsg_clear(&k->ans);
		if (k->as)
			msg_assignments_free(k->as);
	}
	free(k);
	return r;
}

int
ctlproc_call(struct mgr *m, struct ctlmsg *req, int timeout_s, struct ctlmsg *ans,
    struct msg_assignments *as)
{
	struct ctl_call *k;
	int r;

	memset(ans, 0, sizeof(*ans));
	if ((r = ctlproc_start(m, req, -1, as, &k)) < 0)
		return r;
	return ctlproc_wait(m, k, timeout_s, ans);
}

pid_t
ctlproc_pid(struct mgr *m)
{
	pid_t p;

	pthread_mutex_lock(&m->ctlproc->lock);
	p = m->ctlproc->pid;
	pthread_mutex_unlock(&m->ctlproc->lock);
	return p;
}
