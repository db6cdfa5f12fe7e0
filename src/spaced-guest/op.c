/* One operation, in its own child: become the sandbox user, read the
 * REQUEST, dispatch through the table, answer. Everything here treats the
 * request as hostile: the bridge admitted the caller, not the content. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"
#include "limits.h"
#include "log.h"
#include "msg.h"
#include "proto.h"

static const struct {
	enum op_kind op;
	void (*fn)(int, json_t *);
} op_table[] = {
	{ OP_EXEC, op_exec },
	{ OP_FS_READ, op_fs_read },
	{ OP_FS_WRITE, op_fs_write },
	{ OP_FS_LIST, op_fs_list },
	{ OP_FS_STAT, op_fs_stat },
	{ OP_FS_MKDIR, op_fs_mkdir },
	{ OP_FS_REMOVE, op_fs_remove },
	{ OP_FS_RENAME, op_fs_rename },
	{ OP_FS_WATCH, op_fs_watch },
};

int guest_procman_fd = -1;

/* proc.*: the process table lives in the manager (procman.c); hand it the
 * request and the client's socket in one message, so it never sees one
 * without the other */
static void
forward_to_manager(int fd, const struct frame *f)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = { f->payload, f->len };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = cbuf.buf, .msg_controllen = sizeof(cbuf.buf) };
	struct cmsghdr *c;
	ssize_t n;

	if (f->len > PROCMAN_MSG_MAX) {
		send_error(fd, 413, "too_large", "request too large for a process operation");
		return;
	}
	memset(&cbuf, 0, sizeof(cbuf));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	do
		n = sendmsg(guest_procman_fd, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)f->len)
		send_error(fd, 503, "unavailable", "the process manager is not running");
}

int
send_result(int fd, json_t *result)
{
	return send_result_fd(fd, result, -1);
}

int
send_result_fd(int fd, json_t *result, int pass_fd)
{
	struct msg_response m = { .result = result };
	char *s;
	size_t n;
	int r;

	if (result == NULL)
		return send_error(fd, 500, "internal", "out of memory");
	r = msg_response_encode(&m, MSG_FORM_GUEST, &s, &n);
	json_decref(result);
	if (r != 0)
		return send_error(fd, 500, "internal", r == -EMSGSIZE ? "result too large" :
		    "out of memory");
	r = pass_fd >= 0 ? frame_write_fd(fd, MSG_RESPONSE, s, n, pass_fd) :
	    frame_write(fd, MSG_RESPONSE, s, n);
	free(s);
	return r;
}

/* the guest's ERROR frames always carry a message: the code stands in
 * when the caller has nothing more to say */
int
send_error(int fd, int status, const char *code, const char *message)
{
	return frame_write_error(fd, status, code, NULL, message ? message : code);
}

/* docs/protocol.md, "Error statuses" */
int
send_errno(int fd, int err, const char *what)
{
	char msg[256];
	int status = 500;
	const char *code = "internal";

	switch (err) {
	case ENOENT: status = 404; code = "not_found"; break;
	case EACCES: case EPERM: status = 403; code = "permission_denied"; break;
	/* the template is read-only: writing there is not allowed to the user */
	case EROFS: status = 403; code = "permission_denied"; break;
	case EISDIR: status = 409; code = "is_a_directory"; break;
	case ENOTDIR: status = 409; code = "not_a_directory"; break;
	case EEXIST: status = 409; code = "exists"; break;
	case ENOTEMPTY: status = 409; code = "not_empty"; break;
	case ENOSPC: case EDQUOT: status = 507; code = "no_space"; break;
	case EFBIG: status = 413; code = "too_large"; break;
	case ENAMETOOLONG: case EINVAL: status = 400; code = "bad_request"; break;
	}
	snprintf(msg, sizeof(msg), "%s: %s", what, strerror(err));
	return send_error(fd, status, code, msg);
}

const char *
arg_path(json_t *args, const char *key)
{
	json_t *v = json_object_get(args, key);
	size_t n;

	if (!json_is_string(v))
		return NULL;
	n = json_string_length(v);
	/* an embedded NUL would make the kernel see another path than the one
	 * we checked */
	if (n == 0 || n >= SPACE_PATH_MAX || strlen(json_string_value(v)) != n)
		return NULL;
	return json_string_value(v);
}

int
args_only(json_t *args, const char *const *allowed, const char **bad)
{
	const char *k;
	json_t *v;
	size_t i;

	json_object_foreach(args, k, v) {
		for (i = 0; allowed[i]; i++)
			if (strcmp(k, allowed[i]) == 0)
				break;
		if (allowed[i] == NULL) {
			*bad = k;
			return -EINVAL;
		}
	}
	return 0;
}

bool guest_op_broken;

/* one operation; true when the socket may carry another */
static bool
serve_one(int fd)
{
	const char *wd = guest_tpl.workdir ? guest_tpl.workdir : GUEST_HOME;
	struct msg_request req = { 0 };
	struct frame f = { 0 };
	const char *why;
	bool again = false;
	size_t i;

	/* the same start for every operation of this child */
	umask(022);
	if (chdir(wd) < 0) {
		send_errno(fd, errno, wd);
		return false;
	}
	if (frame_read(fd, &f) < 0)
		goto out;       /* the bridge closed the channel */
	if (f.type != MSG_REQUEST) {
		send_error(fd, 400, "bad_request", "expected REQUEST");
		goto out;
	}
	if (msg_request_decode(f.payload, f.len, MSG_FORM_GUEST, &req, &why) != 0) {
		send_error(fd, 400, "bad_request", why);
		goto out;
	}
	switch (req.op) {
	case OP_PROC_START: case OP_PROC_ATTACH: case OP_PROC_LIST:
	case OP_PROC_SIGNAL: case OP_PROC_STDIN: case OP_PROC_RESIZE:
		forward_to_manager(fd, &f);
		goto out;
	default:
		break;
	}
	for (i = 0; i < sizeof(op_table) / sizeof(op_table[0]); i++)
		if (op_table[i].op == req.op) {
			guest_op_broken = false;
			op_table[i].fn(fd, req.args);
			again = op_reusable(req.op) && !guest_op_broken;
			goto out;
		}
	send_error(fd, 400, "bad_request", "op not served here");
out:
	msg_request_free(&req);
	frame_free(&f);
	return again;
}

void
op_serve(int fd)
{
	int r;

	if ((r = become_user()) < 0) {
		log_warnx("cannot become the sandbox user: %s", strerror(-r));
		send_error(fd, 500, "internal", "cannot become the sandbox user");
		goto out;
	}
	/* this child may live on for further file operations: no other
	 * process of the user may read its memory or take its descriptors
	 * (the kernel also clears the flag on the uid change; make sure) */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	while (serve_one(fd))
		;
out:
	close(fd);
}
