/* The per-worker listener: `netgtw listen --fd N --dir DIR`.
 *
 * sbx-manager binds the TCP socket (--gateway-listen) and starts us under
 * --gateway-uid with it as fd N. For each connection: read the hello
 * (gwhello.h) within SPACE_GWHELLO_TIMEOUT seconds and at most one frame
 * plus a few early bytes, take the sandbox the capability names (a routing
 * hint only: the signature is not checked here, the gateway admits), and
 * hand the connection with every byte read so far to DIR/SANDBOX.sock,
 * the gateway of that sandbox's current execution, over SCM_RIGHTS. We
 * never write to a connection we handed over. At most NETGTW_PENDING_MAX
 * connections may be sending their hello; a new one closes the oldest
 * (a slowloris costs its sender, not the others). The hand-off never
 * blocks: a gateway whose backlog is full gets no more ("busy"). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "claims.h"
#include "gwhello.h"
#include "log.h"
#include "netgtw.h"
#include "util.h"

struct pending {
	int fd;                         /* -1: free */
	uint64_t deadline_ns, born_ns;
	size_t n;
	uint8_t buf[NETGTW_HANDOFF_MAX];
};

static struct pending pend[NETGTW_PENDING_MAX];
static char dir[512];

/* the sandbox a token names, without verifying it (routing only) */
static int
token_sandbox(const char *tok, char out[SPACE_ID_MAX + 1])
{
	const char *body, *dot;
	uint8_t *raw;
	ssize_t n;
	struct capability cap;
	const char *why;
	int rc = -EINVAL;

	if (strncmp(tok, "v4.public.", 10) != 0)
		return -EINVAL;
	body = tok + 10;
	dot = strchr(body, '.');
	n = (ssize_t)(dot ? (size_t)(dot - body) : strlen(body));
	if ((raw = malloc(b64url_decoded_max((size_t)n) + 1)) == NULL)
		return -ENOMEM;
	n = b64url_decode(body, (size_t)n, raw, b64url_decoded_max((size_t)n) + 1);
	/* the claims, then a 64-byte signature */
	if (n > 64 && claims_decode(raw, (size_t)n - 64, &cap, &why) == 0) {
		memcpy(out, cap.route.sandbox, sizeof(cap.route.sandbox));
		rc = 0;
	}
	free(raw);
	return rc;
}

static void
drop(struct pending *p)
{
	close(p->fd);
	p->fd = -1;
}

static void
handoff(struct pending *p, const struct gw_hello *h)
{
	char sbx[SPACE_ID_MAX + 1];
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct iovec iov = { p->buf, p->n };
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } cm;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
	    .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	int s;

	if (token_sandbox(h->capability, sbx) != 0 || !id_valid(sbx)) {
		gw_refuse(p->fd, "deny", "malformed_token");
		p->fd = -1;
		return;
	}
	if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s.sock", dir, sbx) >=
	    sizeof(sa.sun_path) ||
	    (s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0) {
		gw_refuse(p->fd, "unavailable", "gateway unreachable");
		p->fd = -1;
		return;
	}
	/* no gateway: the sandbox does not serve here (any more): the
	 * client's route is stale */
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		/* never wait for one gateway: its backlog full (EAGAIN) is
		 * "busy", and the other sandboxes' connections go on */
		int e = errno;

		close(s);
		if (e == EAGAIN)
			gw_refuse(p->fd, "busy", "the sandbox's gateway is busy");
		else
			gw_refuse(p->fd, "refresh_route", "no_record");
		p->fd = -1;
		return;
	}
	memset(cm.b, 0, sizeof(cm.b));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &p->fd, sizeof(int));
	if (sendmsg(s, &mh, MSG_NOSIGNAL) != (ssize_t)p->n) {
		close(s);
		gw_refuse(p->fd, "unavailable", "gateway busy");
		p->fd = -1;
		return;
	}
	close(s);
	drop(p);
}

static void
readable(struct pending *p)
{
	const uint8_t *body;
	size_t blen;
	struct gw_hello h;
	const char *why = NULL;
	ssize_t r;
	int rc;

	r = read(p->fd, p->buf + p->n, sizeof(p->buf) - p->n);
	if (r <= 0) {
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		drop(p);
		return;
	}
	p->n += (size_t)r;
	rc = gwframe_parse(p->buf, p->n, &body, &blen);
	if (rc < 0) {
		gw_refuse(p->fd, "bad_request", "not a gateway hello (SGW1, length 1..4096)");
		p->fd = -1;
		return;
	}
	if (rc == 0)
		return;
	if (gwhello_decode(body, blen, &h, &why) != 0) {
		gw_refuse(p->fd, "bad_request", why);
		p->fd = -1;
		return;
	}
	handoff(p, &h);
	explicit_bzero(&h, sizeof(h));
}

static struct pending *
slot(void)
{
	struct pending *oldest = NULL;
	size_t i;

	for (i = 0; i < NETGTW_PENDING_MAX; i++) {
		if (pend[i].fd < 0)
			return &pend[i];
		if (oldest == NULL || pend[i].born_ns < oldest->born_ns)
			oldest = &pend[i];
	}
	gw_refuse(oldest->fd, "busy", "too many connections sending their hello");
	oldest->fd = -1;
	return oldest;
}

int
listen_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "fd", required_argument, NULL, 'f' },
		{ "dir", required_argument, NULL, 'd' },
		{ NULL, 0, NULL, 0 },
	};
	struct pollfd pf[NETGTW_PENDING_MAX + 1];
	struct pending *map[NETGTW_PENDING_MAX + 1];
	int lfd = -1, c, n, i, timeout;
	uint64_t now;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 'f')
			lfd = atoi(optarg);
		else if (c == 'd')
			snprintf(dir, sizeof(dir), "%s", optarg);
		else
			return 2;
	}
	if (lfd < 3 || dir[0] == '\0')
		fatalx("usage: netgtw listen --fd N --dir DIR");
	gw_harden();
	signal(SIGPIPE, SIG_IGN);
	for (i = 0; i < NETGTW_PENDING_MAX; i++)
		pend[i].fd = -1;
	log_info("listening (fd %d), gateways in %s", lfd, dir);
	for (;;) {
		n = 0;
		pf[n] = (struct pollfd){ .fd = lfd, .events = POLLIN };
		map[n++] = NULL;
		now = now_mono_ns();
		timeout = -1;
		for (i = 0; i < NETGTW_PENDING_MAX; i++) {
			if (pend[i].fd < 0)
				continue;
			if (pend[i].deadline_ns <= now) {
				/* slowloris: the hello did not arrive in time */
				gw_refuse(pend[i].fd, "timeout", "no complete hello in time");
				pend[i].fd = -1;
				continue;
			}
			c = (int)((pend[i].deadline_ns - now) / 1000000) + 1;
			if (timeout < 0 || c < timeout)
				timeout = c;
			pf[n] = (struct pollfd){ .fd = pend[i].fd, .events = POLLIN };
			map[n++] = &pend[i];
		}
		if (poll(pf, (nfds_t)n, timeout) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		for (i = 1; i < n; i++)
			if (pf[i].revents && map[i]->fd >= 0)
				readable(map[i]);
		if (pf[0].revents & POLLIN) {
			int cfd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
			struct pending *p;

			if (cfd < 0)
				continue;
			p = slot();
			p->fd = cfd;
			p->n = 0;
			p->born_ns = now_mono_ns();
			p->deadline_ns = p->born_ns + (uint64_t)SPACE_GWHELLO_TIMEOUT * 1000000000ull;
		}
	}
}
