/* The jail's rendezvous message (jailkeep.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "jailkeep.h"
#include "util.h"

void
jailkeep_encode(const struct jailkeep_attach *a, uint8_t out[JAILKEEP_WIRE_LEN])
{
	size_t l = strnlen(a->sandbox, SPACE_ID_MAX);

	memset(out, 0, JAILKEEP_WIRE_LEN);
	le_store(out, JAILKEEP_MAGIC, 4);
	le_store(out + 4, a->generation, 8);
	le_store(out + 12, a->activation, 4);
	out[16] = (uint8_t)l;
	memcpy(out + 17, a->sandbox, l);
	memcpy(out + 17 + SPACE_ID_MAX, a->secret, GUEST_SECRET_LEN);
}

int
jailkeep_decode(const uint8_t *b, size_t n, struct jailkeep_attach *a, const char **why)
{
	size_t l;

	memset(a, 0, sizeof(*a));
	*why = NULL;
	if (n != JAILKEEP_WIRE_LEN)
		*why = "wrong length";
	else if (le_load(b, 4) != JAILKEEP_MAGIC)
		*why = "wrong magic";
	else if ((l = b[16]) == 0 || l > SPACE_ID_MAX || memchr(b + 17, 0, l) != NULL)
		*why = "bad sandbox length";
	else {
		for (size_t i = 17 + l; i < 17 + SPACE_ID_MAX; i++)
			if (b[i] != 0) {
				*why = "padding not zero";
				break;
			}
		if (*why == NULL) {
			memcpy(a->sandbox, b + 17, l);
			a->sandbox[l] = '\0';
			a->generation = le_load(b + 4, 8);
			a->activation = (uint32_t)le_load(b + 12, 4);
			if (!id_valid(a->sandbox))
				*why = "bad sandbox id";
			else if (a->generation == 0 || a->generation > INT64_MAX ||
			    a->activation == 0)
				*why = "bad generation or activation";
			else
				memcpy(a->secret, b + 17 + SPACE_ID_MAX, GUEST_SECRET_LEN);
		}
	}
	if (*why != NULL) {
		sodium_memzero(a, sizeof(*a));
		return -EPROTO;
	}
	return 0;
}

int
jailkeep_send(int sock, const struct jailkeep_attach *a, int fd)
{
	uint8_t buf[JAILKEEP_WIRE_LEN];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} c;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = c.b, .msg_controllen = sizeof(c.b) };
	struct cmsghdr *cm;
	ssize_t n;

	memset(&c, 0, sizeof(c));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	jailkeep_encode(a, buf);
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	sodium_memzero(buf, sizeof(buf));
	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(buf) ? 0 : -EIO;
}

int
jailkeep_recv(int sock, struct jailkeep_attach *a, int *fd, const char **why)
{
	/* one byte more than a message: a longer one shows as MSG_TRUNC or n */
	uint8_t buf[JAILKEEP_WIRE_LEN + 1];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} c;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
	    .msg_control = c.b, .msg_controllen = sizeof(c.b) };
	struct cmsghdr *cm;
	int nfd = 0, r;
	ssize_t n;

	*fd = -1;
	*why = NULL;
	memset(a, 0, sizeof(*a));
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* take every descriptor that came, so none leaks on a refusal */
	for (cm = CMSG_FIRSTHDR(&mh); cm != NULL; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < k; i++) {
			int d;
			memcpy(&d, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
			if (nfd++ == 0)
				*fd = d;
			else
				close(d);
		}
	}
	r = jailkeep_decode(buf, (size_t)n, a, why);
	sodium_memzero(buf, sizeof(buf));
	if (r == 0 && (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		*why = "truncated";
		r = -EPROTO;
	} else if (r == 0 && nfd != 1) {
		*why = nfd == 0 ? "no descriptor" : "more than one descriptor";
		r = -EPROTO;
	}
	if (r < 0) {
		sodium_memzero(a, sizeof(*a));
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
	}
	return r;
}

int
jailkeep_reach(const char *path, int *conn, int *pidfd, pid_t *pid)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ucred cr;
	socklen_t crl = sizeof(cr);
	struct pollfd p;
	int fd, pfd = -1;

	if (strlen(path) >= sizeof(sa.sun_path))
		return -ENOENT;
	memcpy(sa.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0)) < 0)
		return -ENOENT;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crl) < 0 || cr.pid <= 0 ||
	    (pfd = pidfd_open(cr.pid, 0)) < 0)
		goto gone;
	p = (struct pollfd){ .fd = fd, .events = 0 };
	if (poll(&p, 1, 0) != 0)
		goto gone;      /* hung up: the pid may be another's */
	*conn = fd;
	*pidfd = pfd;
	*pid = cr.pid;
	return 0;
gone:
	if (pfd >= 0)
		close(pfd);
	close(fd);
	return -ENOENT;
}
