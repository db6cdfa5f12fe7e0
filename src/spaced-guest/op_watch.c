/* fs.watch: inotify on a directory (and, with "recursive", every directory
 * below it), each event one STREAM EVENT message (docs/protocol.md
 * "Streams"). Runs in its operation child, as the sandbox user, until the
 * client sends END or leaves.
 *
 * Memory is bounded: at most SPACE_WATCH_QUEUE events wait for a slow
 * client; past that they are dropped and one OVERFLOW event says so (as
 * the kernel's own queue overflow does). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "framepump.h"
#include "guest.h"
#include "limits.h"
#include "msg.h"
#include "msg_stream.h"
#include "proto.h"

#define WATCH_MASK (IN_CREATE | IN_MODIFY | IN_CLOSE_WRITE | IN_DELETE | IN_MOVED_FROM | \
	IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)
#define WATCH_DEPTH_MAX 64
#define PAIR_WAIT_MS    20      /* a move's second half is normally already queued */

struct qev {
	size_t n;
	uint8_t b[];
};

struct watch {
	int ifd, root_wd;
	bool recursive, overflow, root_gone;
	char **dirs;                    /* indexed by wd */
	int ndirs_cap, ndirs;
	struct qev *q[SPACE_WATCH_QUEUE];
	size_t qhead, qlen;
	/* the last event queued, to fold a write's MODIFY and CLOSE_WRITE */
	uint8_t last[1 + 4 + 2 * (2 + SPACE_PATH_MAX)];
	size_t last_n;
	bool last_closed;
	/* the first half of a move, waiting for its second */
	uint32_t cookie;
	bool pending;
	bool pending_dir;
	int pending_wd;
	char pending_path[SPACE_PATH_MAX + 1];
};

static void
enqueue(struct watch *w, const struct msg_stream *m)
{
	uint8_t buf[sizeof(w->last)];
	size_t n;
	struct qev *e;

	if (msg_stream_encode(m, buf, sizeof(buf), &n) != 0)
		return;
	if (w->qlen == SPACE_WATCH_QUEUE) {
		w->overflow = true;
		return;
	}
	if ((e = malloc(sizeof(*e) + n)) == NULL) {
		w->overflow = true;
		return;
	}
	e->n = n;
	memcpy(e->b, buf, n);
	w->q[(w->qhead + w->qlen) % SPACE_WATCH_QUEUE] = e;
	w->qlen++;
	memcpy(w->last, buf, n);
	w->last_n = n;
}

static void
event(struct watch *w, enum stream_event type, bool is_dir, const char *path, const char *to)
{
	struct msg_stream m = { .kind = STREAM_EVENT };

	m.event.type = type;
	m.event.is_dir = is_dir;
	if (strlen(path) > SPACE_PATH_MAX || (to && strlen(to) > SPACE_PATH_MAX))
		return;
	strcpy(m.event.path, path);
	if (to)
		strcpy(m.event.to, to);
	enqueue(w, &m);
}

/* MODIFY and CLOSE_WRITE of one write are one event: a MODIFY repeats
 * nothing until the file is closed, a CLOSE_WRITE after MODIFYs adds
 * nothing */
static void
write_event(struct watch *w, const char *path, bool closed)
{
	struct msg_stream m = { .kind = STREAM_EVENT };
	uint8_t buf[sizeof(w->last)];
	size_t n;

	m.event.type = STREAM_EV_WRITE;
	if (strlen(path) > SPACE_PATH_MAX)
		return;
	strcpy(m.event.path, path);
	if (msg_stream_encode(&m, buf, sizeof(buf), &n) == 0 && n == w->last_n &&
	    memcmp(buf, w->last, n) == 0 && !w->last_closed) {
		w->last_closed = closed;
		return;
	}
	enqueue(w, &m);
	w->last_closed = closed;
}

static int
dir_set(struct watch *w, int wd, const char *path)
{
	if (wd >= w->ndirs_cap) {
		int cap = wd + 64;
		char **nd = realloc(w->dirs, (size_t)cap * sizeof(char *));

		if (nd == NULL)
			return -ENOMEM;
		memset(nd + w->ndirs_cap, 0, (size_t)(cap - w->ndirs_cap) * sizeof(char *));
		w->dirs = nd;
		w->ndirs_cap = cap;
	}
	if (w->dirs[wd] == NULL)
		w->ndirs++;
	free(w->dirs[wd]);
	if ((w->dirs[wd] = strdup(path)) == NULL)
		return -ENOMEM;
	return 0;
}

static void
dir_drop(struct watch *w, int wd)
{
	if (wd >= 0 && wd < w->ndirs_cap && w->dirs[wd] != NULL) {
		free(w->dirs[wd]);
		w->dirs[wd] = NULL;
		w->ndirs--;
	}
}

/* watch path and, recursively, the directories below it; -errno for the
 * top one only (below, what cannot be watched is skipped) */
static int
add_tree(struct watch *w, const char *path, int depth)
{
	DIR *d;
	struct dirent *de;
	int wd;

	if (w->ndirs >= SPACE_WATCH_DIRS_MAX) {
		w->overflow = true;
		return -ENOSPC;
	}
	if ((wd = inotify_add_watch(w->ifd, path, WATCH_MASK)) < 0)
		return -errno;
	if (dir_set(w, wd, path) < 0)
		return -ENOMEM;
	if (!w->recursive || depth >= WATCH_DEPTH_MAX || (d = opendir(path)) == NULL)
		return wd;
	while ((de = readdir(d)) != NULL) {
		char sub[SPACE_PATH_MAX + 1];
		struct stat st;

		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (snprintf(sub, sizeof(sub), "%s/%s", strcmp(path, "/") ? path : "",
		    de->d_name) >= (int)sizeof(sub))
			continue;
		/* never through a symlink: it could lead out of the tree */
		if (de->d_type == DT_DIR || (de->d_type == DT_UNKNOWN &&
		    lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)))
			add_tree(w, sub, depth + 1);
	}
	closedir(d);
	return wd;
}

/* a directory moved within the tree: its watches (and those below it)
 * now have another path */
static void
dirs_renamed(struct watch *w, const char *from, const char *to)
{
	size_t fl = strlen(from);

	for (int i = 0; i < w->ndirs_cap; i++) {
		char np[SPACE_PATH_MAX + 1];
		char *p = w->dirs[i];

		if (p == NULL || strncmp(p, from, fl) != 0 || (p[fl] != '\0' && p[fl] != '/'))
			continue;
		if (snprintf(np, sizeof(np), "%s%s", to, p + fl) >= (int)sizeof(np))
			continue;
		dir_set(w, i, np);
	}
}

/* a directory left the tree: stop watching what is below it */
static void
dirs_gone(struct watch *w, const char *path)
{
	size_t fl = strlen(path);

	for (int i = 0; i < w->ndirs_cap; i++) {
		char *p = w->dirs[i];

		if (p != NULL && strncmp(p, path, fl) == 0 && (p[fl] == '\0' || p[fl] == '/')) {
			inotify_rm_watch(w->ifd, i);
			dir_drop(w, i);
		}
	}
}

static void
flush_pending(struct watch *w)
{
	if (!w->pending)
		return;
	w->pending = false;
	event(w, STREAM_EV_REMOVE, w->pending_dir, w->pending_path, NULL);
	if (w->pending_dir && w->recursive)
		dirs_gone(w, w->pending_path);
}

static void
one_event(struct watch *w, const struct inotify_event *ev)
{
	char path[SPACE_PATH_MAX + 1];
	bool dir = (ev->mask & IN_ISDIR) != 0;
	const char *base;

	if (ev->mask & IN_Q_OVERFLOW) {
		flush_pending(w);
		w->overflow = true;
		return;
	}
	if (ev->wd < 0 || ev->wd >= w->ndirs_cap || (base = w->dirs[ev->wd]) == NULL)
		return;
	if (ev->mask & IN_IGNORED) {
		if (ev->wd == w->root_wd)
			w->root_gone = true;
		dir_drop(w, ev->wd);
		return;
	}
	if (ev->len > 0) {
		if (snprintf(path, sizeof(path), "%s/%s", strcmp(base, "/") ? base : "",
		    ev->name) >= (int)sizeof(path))
			return;
	} else
		snprintf(path, sizeof(path), "%s", base);
	/* a move's halves come one after the other */
	if (w->pending && !((ev->mask & IN_MOVED_TO) && ev->cookie == w->cookie))
		flush_pending(w);
	if (ev->mask & IN_MOVED_FROM) {
		w->pending = true;
		w->cookie = ev->cookie;
		w->pending_dir = dir;
		snprintf(w->pending_path, sizeof(w->pending_path), "%s", path);
		return;
	}
	if (ev->mask & IN_MOVED_TO) {
		if (w->pending) {
			w->pending = false;
			event(w, STREAM_EV_RENAME, dir, w->pending_path, path);
			if (dir && w->recursive)
				dirs_renamed(w, w->pending_path, path);
		} else {
			event(w, STREAM_EV_CREATE, dir, path, NULL);
			if (dir && w->recursive)
				add_tree(w, path, 1);
		}
		return;
	}
	if (ev->mask & IN_CREATE) {
		event(w, STREAM_EV_CREATE, dir, path, NULL);
		if (dir && w->recursive)
			add_tree(w, path, 1);
	}
	if (ev->mask & IN_MODIFY)
		write_event(w, path, false);
	if (ev->mask & IN_CLOSE_WRITE)
		write_event(w, path, true);
	if (ev->mask & IN_ATTRIB)
		event(w, STREAM_EV_CHMOD, dir, path, NULL);
	if (ev->mask & IN_DELETE)
		event(w, STREAM_EV_REMOVE, dir, path, NULL);
	if ((ev->mask & IN_DELETE_SELF) && ev->wd == w->root_wd)
		event(w, STREAM_EV_REMOVE, true, path, NULL);
}

static void
read_events(struct watch *w)
{
	uint8_t buf[64 * 1024] __attribute__((aligned(__alignof__(struct inotify_event))));
	ssize_t n;

	while ((n = read(w->ifd, buf, sizeof(buf))) > 0) {
		for (size_t off = 0; off + sizeof(struct inotify_event) <= (size_t)n;) {
			const struct inotify_event *ev = (const void *)(buf + off);

			one_event(w, ev);
			off += sizeof(*ev) + ev->len;
		}
	}
}

static void
watch_free(struct watch *w)
{
	for (int i = 0; i < w->ndirs_cap; i++)
		free(w->dirs[i]);
	free(w->dirs);
	while (w->qlen > 0) {
		free(w->q[w->qhead]);
		w->qhead = (w->qhead + 1) % SPACE_WATCH_QUEUE;
		w->qlen--;
	}
	if (w->ifd >= 0)
		close(w->ifd);
}

void
op_fs_watch(int fd, json_t *args)
{
	static const char *const keys[] = { "path", "recursive", NULL };
	static struct watch w;
	struct frame_wr q = { 0 };
	struct frame_rd rd = { 0 };
	json_t *rec = json_object_get(args, "recursive");
	char root[PATH_MAX];
	const char *path, *bad;
	struct stat st;
	bool ending = false;
	int r;

	memset(&w, 0, sizeof(w));
	w.ifd = -1;
	if (args_only(args, keys, &bad) < 0 || (path = arg_path(args, "path")) == NULL ||
	    (rec != NULL && !json_is_boolean(rec))) {
		send_error(fd, 400, "bad_request", "fs.watch takes {\"path\",\"recursive\"?:bool}");
		return;
	}
	w.recursive = json_is_true(rec);
	/* events name absolute paths: resolve the one asked for (relative
	 * to the home directory, our cwd) */
	if (realpath(path, root) == NULL) {
		send_errno(fd, errno, path);
		return;
	}
	if (stat(root, &st) < 0 || !S_ISDIR(st.st_mode)) {
		send_errno(fd, ENOTDIR, path);
		return;
	}
	if ((w.ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) < 0) {
		send_errno(fd, errno, "inotify");
		goto out;
	}
	if ((r = add_tree(&w, root, 0)) < 0) {
		send_errno(fd, -r, path);
		goto out;
	}
	w.root_wd = r;
	if (send_result(fd, json_pack("{s:s,s:i}", "path", root, "watching",
	    (json_int_t)w.ndirs)) < 0)
		goto out;
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (;;) {
		struct pollfd p[2];
		int np = 1, wait_ms = -1;

		/* one event at a time to the socket: the queue above is the
		 * only place events wait */
		if (frame_wr_pending(&q) == 0 && !ending) {
			if (w.qlen > 0) {
				struct qev *e = w.q[w.qhead];

				w.qhead = (w.qhead + 1) % SPACE_WATCH_QUEUE;
				w.qlen--;
				frame_wr_add(&q, MSG_STREAM, e->b, e->n);
				free(e);
			} else if (w.overflow) {
				struct msg_stream m = { .kind = STREAM_EVENT };
				uint8_t b[16];
				size_t n;

				m.event.type = STREAM_EV_OVERFLOW;
				w.overflow = false;
				w.last_n = 0;
				if (msg_stream_encode(&m, b, sizeof(b), &n) == 0)
					frame_wr_add(&q, MSG_STREAM, b, n);
			} else if (w.root_gone && !w.pending) {
				/* the watched directory is gone: nothing more
				 * will come */
				frame_wr_add(&q, MSG_END, NULL, 0);
				ending = true;
			}
		}
		if (ending && frame_wr_pending(&q) == 0)
			break;
		p[0] = (struct pollfd){ fd, (short)(POLLIN | (frame_wr_pending(&q) ? POLLOUT : 0)), 0 };
		if (!w.root_gone)
			p[np++] = (struct pollfd){ w.ifd, POLLIN, 0 };
		if (w.pending)
			wait_ms = PAIR_WAIT_MS;
		if ((r = poll(p, (nfds_t)np, wait_ms)) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (r == 0)
			flush_pending(&w);
		if ((p[0].revents & POLLOUT) && frame_wr_flush(&q, fd) < 0)
			break;
		if (np > 1 && (p[1].revents & POLLIN))
			read_events(&w);
		if (p[0].revents & (POLLIN | POLLHUP | POLLERR)) {
			struct frame f = { 0 };

			if (ending)
				break;
			r = frame_rd_step(&rd, fd, &f);
			if (r == 0)
				continue;
			if (r < 0)
				break;          /* the client left */
			if (f.type == MSG_END) {
				frame_free(&f);
				frame_wr_add(&q, MSG_END, NULL, 0);
			} else {
				struct msg_error m = { .status = 400, .has_message = true };
				char *s;
				size_t n;

				frame_free(&f);
				strcpy(m.error, "bad_request");
				snprintf(m.message, sizeof(m.message), "a watch takes no input but END");
				if (msg_error_encode(&m, &s, &n) == 0) {
					frame_wr_add(&q, MSG_ERROR, s, n);
					free(s);
				}
			}
			ending = true;
		}
	}
out:
	frame_wr_free(&q);
	frame_rd_free(&rd);
	watch_free(&w);
}
