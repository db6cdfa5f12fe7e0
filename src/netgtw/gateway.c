/* The per-execution gateway: `netgtw gateway --ctl-fd N --accept-fd N
 * --sandbox ID --generation N --activation N --worker ID --substrate S
 * --resident ID --root-key KEY`.
 *
 * sbx-manager starts one for every serving execution, inside the
 * sandbox's network namespace, under --gateway-uid, and hands it two
 * descriptors: the listening unix socket DIR/SANDBOX.sock the worker's
 * listener passes connections to, and a SEQPACKET socket to itself (its
 * first message is the signed key bundle; it may send a newer one
 * before any answer).
 *
 * Each connection is admitted twice, both must allow:
 *   1. sbx-manager's check: the comparator against its committed record
 *      (the authoritative one) and the sandbox's declared ports;
 *   2. our own: the comparator (verifier + admit, receiver kind netgtw:
 *      aud netgtw, pur service, this execution's identity, port, proto).
 * Then 127.0.0.1:PORT inside the sandbox, and the pump. The connections
 * are leased streams: when sbx-manager ends this execution (a generation
 * change, a failure, a stop) it stops us, and each connection is closed
 * with a reset, or a WebSocket close 4409 when it was upgraded. A
 * relaunch of the bridge (a new activation of this execution, the
 * namespace kept) does not: sbx-manager sends {"activation":N}, the
 * connections stay, and our own check wants activation N from then on. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "admit.h"
#include "gwhello.h"
#include "keys.h"
#include "log.h"
#include "netgtw.h"
#include "paseto.h"
#include "util.h"
#include "verifier.h"

static struct {
	int ctl, acc, sig;
	struct runtime_record rec;
	uint8_t root_pk[32];
	struct verifier *v;
	struct pump *pumps[NETGTW_CONNS_MAX];
	int npumps;
	uint64_t checks;                /* the number of the last check asked */
} g;

/* a datagram from sbx-manager that is not an answer: {"bundle":TOKEN}
 * installs a key bundle; {"activation":N} says that the bridge of our
 * execution was relaunched as activation N (the namespace and our
 * connections are kept; new opens need N from now on). 1 when it was one
 * of these, 0 when it is for the caller (an answer). */
static int
maybe_bundle(const char *buf, size_t n)
{
	json_t *o = json_loadb(buf, n, JSON_REJECT_DUPLICATES, NULL), *b;
	struct key_bundle kb;
	json_int_t a;
	int rc = 0;

	if (o != NULL && json_object_size(o) == 1 && (b = json_object_get(o, "bundle")) != NULL &&
	    json_is_string(b)) {
		rc = 1;
		if (bundle_verify(json_string_value(b), json_string_length(b), g.root_pk, &kb) != 0 ||
		    verifier_set_bundle(g.v, &kb) != 0)
			log_warnx("a key bundle from sbx-manager does not verify; kept the one we had");
	} else if (o != NULL && json_object_size(o) == 1 &&
	    (b = json_object_get(o, "activation")) != NULL && json_is_integer(b)) {
		rc = 1;
		a = json_integer_value(b);
		/* an activation only ever grows within an execution */
		if (a <= (json_int_t)g.rec.id.activation || a > (json_int_t)UINT32_MAX) {
			log_warnx("activation %lld from sbx-manager is not after %u: ignored",
			    (long long)a, g.rec.id.activation);
		} else {
			log_info("gateway of %s g%llu: activation %u -> %u, %d connection(s) kept",
			    g.rec.id.sandbox, (unsigned long long)g.rec.id.generation,
			    g.rec.id.activation, (unsigned)a, g.npumps);
			g.rec.id.activation = (uint32_t)a;
		}
	}
	json_decref(o);
	return rc;
}

/* one datagram from sbx-manager within ms: its length, 0 on EOF, <0 */
static ssize_t
ctl_recv(char *buf, size_t cap, int ms)
{
	struct pollfd pf = { .fd = g.ctl, .events = POLLIN };
	int r = poll(&pf, 1, ms);

	if (r <= 0)
		return r == 0 ? -ETIMEDOUT : -errno;
	r = (int)recv(g.ctl, buf, cap, 0);
	return r < 0 ? -errno : r;
}

/* sbx-manager's answer to a hello body; 0 and *rep, or <0 (unreachable).
 * Each check has its own number: an answer to an earlier check, one this
 * gateway stopped waiting for, is dropped here (docs/network.md). */
static int
manager_check(const uint8_t *body, size_t blen, struct gw_reply *rep)
{
	static char buf[SPACE_BUNDLE_TOKEN_MAX + 64];
	uint8_t hdr[GWCHECK_HDR_LEN];
	struct iovec iov[2] = { { hdr, sizeof(hdr) }, { (void *)body, blen } };
	struct msghdr mh = { .msg_iov = iov, .msg_iovlen = 2 };
	const uint8_t *ab;
	size_t alen;
	const char *why;
	uint64_t end = now_mono_ns() + NETGTW_CHECK_TIMEOUT_MS * 1000000ull, now, id, want;
	ssize_t n;

	want = ++g.checks;
	gwcheck_header(hdr, GWCHECK_ASK, want);
	if (sendmsg(g.ctl, &mh, MSG_NOSIGNAL) != (ssize_t)(sizeof(hdr) + blen))
		return -EIO;
	for (;;) {
		now = now_mono_ns();
		if (now >= end)
			return -ETIMEDOUT;
		if ((n = ctl_recv(buf, sizeof(buf), (int)((end - now) / 1000000) + 1)) <= 0)
			return n == 0 ? -EPIPE : (int)n;
		if (gwcheck_parse(GWCHECK_ANSWER, (const uint8_t *)buf, (size_t)n, &id, &ab, &alen) != 0) {
			if (maybe_bundle(buf, (size_t)n))
				continue;
			return -EPROTO;
		}
		if (id != want) {
			log_info("the answer to check %llu came after it was given up: dropped",
			    (unsigned long long)id);
			continue;
		}
		return gwreply_decode(ab, alen, rep, &why) == 0 ? 0 : -EPROTO;
	}
}

static void
admit_conn(int cfd, const uint8_t *bytes, size_t n)
{
	const uint8_t *body;
	size_t blen;
	struct gw_hello h;
	struct gw_reply rep;
	struct admit_request req;
	struct admit_result res;
	struct admit_error ae;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct pump *p;
	uint8_t *ok;
	size_t oklen;
	const char *why = NULL;
	char msg[96];
	int rc, ufd, frame;

	if ((frame = gwframe_parse(bytes, n, &body, &blen)) <= 0 ||
	    gwhello_decode(body, blen, &h, &why) != 0) {
		gw_refuse(cfd, "bad_request", why ? why : "not a gateway hello");
		return;
	}
	if (g.npumps >= NETGTW_CONNS_MAX) {
		gw_refuse(cfd, "busy", "too many connections to this sandbox");
		goto out;
	}
	/* 1: sbx-manager (record, declared ports); it may also hand us a
	 * newer key bundle first, which step 2 then uses */
	if ((rc = manager_check(body, blen, &rep)) != 0) {
		gw_refuse(cfd, "unavailable", "the worker did not answer the admission check");
		goto out;
	}
	if (!rep.ok) {
		gw_refuse(cfd, rep.error, rep.message);
		goto out;
	}
	/* 2: our own comparator, on our own execution's identity */
	req = (struct admit_request){ .kind = RECV_NETGTW, .target_sandbox = g.rec.id.sandbox,
	    .receiver_sandbox = g.rec.id.sandbox, .port = h.port, .proto = h.proto,
	    .now = now_unix() };
	res = admit_token(g.v, h.capability, strlen(h.capability), &g.rec, &req, NULL);
	if (res.outcome != ADMIT_ALLOW) {
		ae = admit_error_code(res);
		gw_refuse(cfd, ae.code, ae.reason ? ae.reason : "");
		goto out;
	}
	sa.sin_port = htons(h.port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(ufd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		if (ufd >= 0)
			close(ufd);
		snprintf(msg, sizeof(msg), "nothing listens on port %u in the sandbox", h.port);
		gw_refuse(cfd, "unavailable", msg);
		goto out;
	}
	(void)fcntl(ufd, F_SETFL, fcntl(ufd, F_GETFL) | O_NONBLOCK);
	if (gwreply_encode(&(struct gw_reply){ .ok = true }, &ok, &oklen) != 0 ||
	    send(cfd, ok, oklen, MSG_NOSIGNAL) != (ssize_t)oklen) {
		free(ok);
		close(ufd);
		close(cfd);
		goto out;
	}
	free(ok);
	if ((p = pump_new(cfd, ufd, h.proto == PROTO_HTTP, bytes + frame, n - (size_t)frame)) == NULL) {
		close(cfd);
		close(ufd);
		goto out;
	}
	g.pumps[g.npumps++] = p;
out:
	explicit_bzero(&h, sizeof(h));
}

static void
accept_handoff(void)
{
	static uint8_t buf[NETGTW_HANDOFF_MAX];
	union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } cm;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
	    .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	ssize_t n;
	int s, cfd = -1;

	if ((s = accept4(g.acc, NULL, NULL, SOCK_CLOEXEC)) < 0)
		return;
	n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
	close(s);
	if (n <= 0)
		return;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
		    c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(&cfd, CMSG_DATA(c), sizeof(int));
	if (cfd < 0 || (mh.msg_flags & (MSG_CTRUNC | MSG_TRUNC))) {
		if (cfd >= 0)
			close(cfd);
		return;
	}
	admit_conn(cfd, buf, (size_t)n);
}

static void
end_all(void)
{
	int i;

	for (i = 0; i < g.npumps; i++) {
		pump_lease_end(g.pumps[i]);
		pump_free(g.pumps[i]);
	}
	g.npumps = 0;
}

int
gateway_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "ctl-fd", required_argument, NULL, 'c' },
		{ "accept-fd", required_argument, NULL, 'a' },
		{ "sandbox", required_argument, NULL, 's' },
		{ "generation", required_argument, NULL, 'g' },
		{ "activation", required_argument, NULL, 'A' },
		{ "worker", required_argument, NULL, 'w' },
		{ "substrate", required_argument, NULL, 'S' },
		{ "resident", required_argument, NULL, 'r' },
		{ "root-key", required_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 },
	};
	static char buf[SPACE_BUNDLE_TOKEN_MAX + 64];
	struct pollfd pf[2 + 2 * NETGTW_CONNS_MAX + 1];
	struct route_identity *id = &g.rec.id;
	const char *root = NULL;
	sigset_t set;
	ssize_t n;
	int c, i, k, np;

	g.ctl = g.acc = -1;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'c': g.ctl = atoi(optarg); break;
		case 'a': g.acc = atoi(optarg); break;
		case 's': snprintf(id->sandbox, sizeof(id->sandbox), "%s", optarg); break;
		case 'g': id->generation = strtoull(optarg, NULL, 10); break;
		case 'A': id->activation = (uint32_t)strtoul(optarg, NULL, 10); break;
		case 'w': snprintf(id->worker, sizeof(id->worker), "%s", optarg); break;
		case 'S': snprintf(id->substrate, sizeof(id->substrate), "%s", optarg); break;
		case 'r': snprintf(id->resident, sizeof(id->resident), "%s", optarg); break;
		case 'k': root = optarg; break;
		default: return 2;
		}
	}
	if (g.ctl < 3 || g.acc < 3 || !id_valid(id->sandbox) || id->generation == 0 ||
	    id->activation == 0 || !id_valid(id->worker) || !id_valid(id->resident) ||
	    id->substrate[0] == '\0' || root == NULL || public_key_parse(root, g.root_pk) != 0)
		fatalx("usage: netgtw gateway --ctl-fd N --accept-fd N --sandbox ID ... --root-key KEY");
	gw_harden();
	g.rec.state = EXEC_SERVING;
	if ((g.v = verifier_new(256)) == NULL)
		fatalx("verifier_new");
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	if ((g.sig = signalfd(-1, &set, SFD_CLOEXEC)) < 0)
		fatal("signalfd");
	/* the key bundle comes first */
	if ((n = ctl_recv(buf, sizeof(buf), 10000)) <= 0 || !maybe_bundle(buf, (size_t)n))
		fatalx("no key bundle from sbx-manager");
	log_info("gateway of %s g%llu a%u ready", id->sandbox, (unsigned long long)id->generation,
	    id->activation);
	for (;;) {
		np = 0;
		pf[np++] = (struct pollfd){ .fd = g.sig, .events = POLLIN };
		pf[np++] = (struct pollfd){ .fd = g.ctl, .events = POLLIN };
		pf[np++] = (struct pollfd){ .fd = g.acc, .events = POLLIN };
		for (i = 0; i < g.npumps; i++)
			np += pump_pollfds(g.pumps[i], &pf[np]);
		if (poll(pf, (nfds_t)np, -1) < 0) {
			if (errno == EINTR)
				continue;
			fatal("poll");
		}
		if (pf[0].revents) {
			/* the lease ends: sbx-manager stopped this execution */
			end_all();
			log_info("gateway of %s g%llu stopped", id->sandbox,
			    (unsigned long long)id->generation);
			return 0;
		}
		if (pf[1].revents) {
			/* outside a check only bundles come, and answers to
			 * checks given up on (dropped); EOF: sbx-manager is
			 * gone, nobody would answer our checks */
			n = recv(g.ctl, buf, sizeof(buf), MSG_DONTWAIT);
			if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
				end_all();
				return 0;
			}
			if (n > 0)
				(void)maybe_bundle(buf, (size_t)n);
		}
		/* pumps first, in the order their pollfds were filled; then
		 * the finished ones are dropped */
		for (i = 0, k = 3; i < g.npumps; i++, k += 2)
			if (!pump_step(g.pumps[i], &pf[k], 2)) {
				pump_free(g.pumps[i]);
				g.pumps[i] = NULL;
			}
		for (i = 0, k = 0; i < g.npumps; i++)
			if (g.pumps[i] != NULL)
				g.pumps[k++] = g.pumps[i];
		g.npumps = k;
		if (pf[2].revents & POLLIN)
			accept_handoff();
	}
}
