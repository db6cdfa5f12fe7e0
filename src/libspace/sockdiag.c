/* Kernel socket evidence for the bridge connection (DESIGN section 6).
 *
 * SO_PEERCRED says which process called listen(); it does not say that
 * the socket we reached through a path is that process's socket. A bridge
 * socket path can acquire a new listener (the file was unlinked and bound
 * again by someone else). So we ask the kernel, through sock_diag, which
 * socket our connection actually landed on and check that the bridge
 * process holds it in its own fd table:
 *   - still queued: a listener whose pending-connection list ("icons")
 *     names our socket inode must be one of the bridge's fds;
 *   - already accepted: the peer inode of our socket must be one of the
 *     bridge's fds.
 * Anything else is refused. A kernel without UNIX_DIAG fails closed. */
#include <dirent.h>
#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sockdiag.h"

#define MAX_FD_INODES 4096
#define SOCKDIAG_TRIES 10

/* socket inodes in /proc/PID/fd */
static int
fd_socket_inodes(pid_t pid, uint32_t *inos, size_t cap, size_t *n)
{
	char path[64], lnk[64], target[64];
	struct dirent *de;
	DIR *d;
	ssize_t l;
	unsigned long ino;

	*n = 0;
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
	if ((d = opendir(path)) == NULL)
		return -errno;
	while ((de = readdir(d)) != NULL && *n < cap) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(lnk, sizeof(lnk), "/proc/%d/fd/%.16s", (int)pid, de->d_name);
		l = readlink(lnk, target, sizeof(target) - 1);
		if (l <= 0)
			continue;
		target[l] = '\0';
		if (sscanf(target, "socket:[%lu]", &ino) == 1)
			inos[(*n)++] = (uint32_t)ino;
	}
	closedir(d);
	return 0;
}

static bool
in_set(uint32_t ino, const uint32_t *set, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (set[i] == ino)
			return true;
	return false;
}

/* one exact UNIX_DIAG query; fills peer and icons when asked for.
 * Returns 0, -ENOENT when the kernel does not know the inode. */
static int
diag_query(int nl, uint32_t ino, uint32_t show, uint32_t *peer,
    uint32_t *icons, size_t icap, size_t *nicons)
{
	struct {
		struct nlmsghdr nh;
		struct unix_diag_req req;
	} q;
	union {
		char buf[8192];
		struct nlmsghdr align;
	} u;
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct nlmsghdr *h;
	struct unix_diag_msg *m;
	struct rtattr *a;
	ssize_t got;
	int alen;
	size_t i, cnt;

	memset(&q, 0, sizeof(q));
	q.nh.nlmsg_len = sizeof(q);
	q.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	q.nh.nlmsg_flags = NLM_F_REQUEST;
	q.nh.nlmsg_seq = ino;
	q.req.sdiag_family = AF_UNIX;
	q.req.udiag_states = ~0u;
	q.req.udiag_ino = ino;
	q.req.udiag_show = show;
	q.req.udiag_cookie[0] = ~0u;    /* no cookie: look up by inode */
	q.req.udiag_cookie[1] = ~0u;
	if (sendto(nl, &q, sizeof(q), 0, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	got = recv(nl, u.buf, sizeof(u.buf), 0);
	if (got < 0)
		return -errno;
	if (peer)
		*peer = 0;
	if (nicons)
		*nicons = 0;
	for (h = &u.align; NLMSG_OK(h, (size_t)got); h = NLMSG_NEXT(h, got)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			struct nlmsgerr *e = NLMSG_DATA(h);
			return e->error ? e->error : -ENOENT;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY ||
		    h->nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
			return -EPROTO;
		m = NLMSG_DATA(h);
		if (m->udiag_ino != ino)
			return -EPROTO;
		alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
		for (a = (struct rtattr *)(m + 1); RTA_OK(a, alen); a = RTA_NEXT(a, alen)) {
			if (a->rta_type == UNIX_DIAG_PEER && peer &&
			    RTA_PAYLOAD(a) >= (int)sizeof(uint32_t))
				memcpy(peer, RTA_DATA(a), sizeof(uint32_t));
			if (a->rta_type == UNIX_DIAG_ICONS && icons) {
				cnt = RTA_PAYLOAD(a) / sizeof(uint32_t);
				for (i = 0; i < cnt && i < icap; i++)
					memcpy(&icons[i], (char *)RTA_DATA(a) + i * 4, 4);
				*nicons = i;
			}
		}
		return 0;
	}
	return -EPROTO;
}

/* our socket's peer, then the bridge's fd table: 0 when the peer (the
 * socket accept() returned) is one of the bridge's fds, 1 when not (yet),
 * a negative errno (with why) when a look failed. *n is the table's size. */
static int
peer_held(int nl, uint32_t me, pid_t pid, uint32_t *inos, size_t *n, const char **why)
{
	uint32_t peer = 0;
	int r;

	if ((r = diag_query(nl, me, UDIAG_SHOW_PEER, &peer, NULL, 0, NULL)) != 0) {
		*why = r == -ENOENT ? "sock_diag does not know our socket" :
		    "sock_diag query failed";
		return r == -ENOENT ? -EPERM : r;
	}
	if ((r = fd_socket_inodes(pid, inos, MAX_FD_INODES, n)) != 0) {
		*why = "cannot read the bridge's fd table";
		return r;
	}
	return peer != 0 && in_set(peer, inos, *n) ? 0 : 1;
}

int
sockdiag_peer_owned_by(int fd, pid_t pid, const char **why)
{
	uint32_t inos[MAX_FD_INODES], icons[256], me;
	size_t n = 0, ni, i, j;
	struct stat st;
	int nl = -1, ret = -EPERM, r, tries;

	*why = "socket not held by the bridge";
	if (fstat(fd, &st) != 0)
		return -errno;
	me = (uint32_t)st.st_ino;
	nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (nl < 0) {
		*why = "sock_diag unavailable";
		ret = -errno;
		goto out;
	}
	/* accept() takes the connection off the listener's queue a moment
	 * before the new fd appears in the bridge's table; a connection seen
	 * in neither place is looked at again a few times before refusal.
	 * Each look is exact, so retrying weakens nothing.
	 *
	 * The kernel finds a socket by inode by walking every unix socket of
	 * the network namespace (some 8 per sandbox), so the order of the
	 * looks matters at a thousand sandboxes: the accepted case, the
	 * common one, costs one query (our socket's peer); only a connection
	 * still queued costs one query per socket the bridge holds. */
	for (tries = 0; tries < SOCKDIAG_TRIES; tries++) {
		if (tries)
			usleep(2000);
		/* accepted already: our peer is a socket the bridge holds */
		if ((r = peer_held(nl, me, pid, inos, &n, why)) <= 0) {
			ret = r;
			goto out;
		}
		/* queued on a listener the bridge holds? (the fd table was
		 * read by peer_held, after our peer was looked up) */
		for (i = 0; i < n; i++) {
			if (diag_query(nl, inos[i], UDIAG_SHOW_ICONS, NULL, icons, 256, &ni) != 0)
				continue;
			for (j = 0; j < ni; j++)
				if (icons[j] == me) {
					ret = 0;
					goto out;
				}
		}
		/* accepted while the listeners were looked at */
		if ((r = peer_held(nl, me, pid, inos, &n, why)) <= 0) {
			ret = r;
			goto out;
		}
	}
out:
	if (nl >= 0)
		close(nl);
	return ret;
}
