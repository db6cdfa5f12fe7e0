/* The monitor <-> serving process codec of spaced-host (hostmon.h):
 * round trips, and every way a message from a compromised serving process
 * can be wrong is refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "admit.h"
#include "hostmon.h"
#include "proto.h"
#include "tap.h"

static struct hm_msg
refusal(void)
{
	struct hm_msg m = { .type = HM_REFUSED };

	m.u.ref.op = OP_EXEC;
	m.u.ref.outcome = ADMIT_REFRESH_ROUTE;
	m.u.ref.reason = R_GENERATION;
	strcpy(m.u.ref.target, "sbx_a");
	strcpy(m.u.ref.cap.sandbox, "sbx_a");
	m.u.ref.cap.generation = 4;
	strcpy(m.u.ref.cap.worker, "w1");
	strcpy(m.u.ref.cap.substrate, "jail");
	m.u.ref.cap.activation = 2;
	strcpy(m.u.ref.cap.resident, "r1");
	strcpy(m.u.ref.jti, "abc-DEF_123");
	return m;
}

static struct hm_msg
claim_msg(void)
{
	struct hm_msg m = { .type = HM_CLAIM };

	strcpy(m.u.claim.id.sandbox, "sbx_a");
	m.u.claim.id.generation = 3;
	strcpy(m.u.claim.id.worker, "w1");
	strcpy(m.u.claim.id.substrate, "jail");
	m.u.claim.id.activation = 1;
	strcpy(m.u.claim.id.resident, "r1");
	for (int i = 0; i < GUEST_SECRET_LEN; i++)
		m.u.claim.secret[i] = (uint8_t)(i * 7 + 1);
	return m;
}

/* bytes and up to three descriptors (-1: none) in one packet */
static int
send_fds(int fd, const void *b, size_t n, int f1, int f2, int f3)
{
	int fds[3] = { f1, f2, f3 }, k = f3 >= 0 ? 3 : f2 >= 0 ? 2 : 1;
	union { char b[CMSG_SPACE(3 * sizeof(int))]; struct cmsghdr a; } cm;
	struct iovec iov = { (void *)b, n };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
	    .msg_controllen = CMSG_SPACE(k * sizeof(int)) };
	struct cmsghdr *c;

	memset(cm.b, 0, sizeof(cm.b));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(k * sizeof(int));
	memcpy(CMSG_DATA(c), fds, k * sizeof(int));
	return sendmsg(fd, &mh, 0) == (ssize_t)n ? 0 : -1;
}

static int
open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		if (fcntl(fd, F_GETFD) >= 0)
			n++;
	return n;
}

/* decode buf after one byte at off is set to v */
static int
decode_patched(const uint8_t *buf, size_t n, size_t off, uint8_t v)
{
	uint8_t b[HM_MSG_MAX];
	struct hm_msg m;

	memcpy(b, buf, n);
	b[off] = v;
	return hm_decode(b, n, &m);
}

int
main(void)
{
	uint8_t buf[HM_MSG_MAX], big[HM_MSG_MAX + 16];
	struct hm_msg m = refusal(), d;
	int n, sv[2], open_before;

	n = hm_encode(&m, buf, sizeof(buf));
	ok(n > HM_HDR_LEN, "REFUSED encodes (%d bytes)", n);
	is_int(hm_decode(buf, (size_t)n, &d), 0, "... and decodes");
	ok(memcmp(&d.u.ref, &m.u.ref, sizeof(m.u.ref)) == 0, "... to the same refusal");
	is_int(hm_decode(buf, (size_t)n - 1, &d), -EPROTO, "truncated: refused");
	memcpy(big, buf, (size_t)n);
	big[n] = 0;
	big[7]++;               /* len says one more, and there is one more byte */
	is_int(hm_decode(big, (size_t)n + 1, &d), -EPROTO, "a byte left over after the strings: refused");
	is_int(decode_patched(buf, (size_t)n, 0, 0x48 ^ 1), -EPROTO, "bad magic: refused");
	is_int(decode_patched(buf, (size_t)n, 3, HM__MAX), -EPROTO, "unknown type: refused");
	is_int(decode_patched(buf, (size_t)n, 3, HM_READY), -EPROTO, "READY with a payload: refused");
	is_int(decode_patched(buf, (size_t)n, 8, 0), -EPROTO, "op 0: refused");
	is_int(decode_patched(buf, (size_t)n, 8, OP__MAX), -EPROTO, "op out of range: refused");
	is_int(decode_patched(buf, (size_t)n, 9, ADMIT_ALLOW), -EPROTO, "outcome ALLOW is no refusal: refused");
	is_int(decode_patched(buf, (size_t)n, 10, R__COUNT), -EPROTO, "reason out of range: refused");
	/* the target string starts at 8 + 15: its length, then "sbx_a" */
	is_int(decode_patched(buf, (size_t)n, 24, '/'), -EPROTO, "a '/' in an id: refused");
	is_int(decode_patched(buf, (size_t)n, 24, 0), -EPROTO, "a NUL inside a string: refused");
	is_int(decode_patched(buf, (size_t)n, 23, 200), -EPROTO, "a string length past the end: refused");

	m = refusal();
	memset(m.u.ref.jti, 'a', SPACE_JTI_MAX);
	m.u.ref.jti[SPACE_JTI_MAX] = '\0';
	n = hm_encode(&m, buf, sizeof(buf));
	ok(n > 0 && hm_decode(buf, (size_t)n, &d) == 0, "a jti of the maximum length passes");
	m = refusal();
	strcpy(m.u.ref.cap.sandbox, "../x");
	is_int(hm_encode(&m, buf, sizeof(buf)), -EINVAL, "the encoder refuses what the decoder would");
	m = refusal();
	memset(&m.u.ref.cap, 0, sizeof(m.u.ref.cap));
	m.u.ref.jti[0] = '\0';
	n = hm_encode(&m, buf, sizeof(buf));
	ok(n > 0 && hm_decode(buf, (size_t)n, &d) == 0 && d.u.ref.cap.sandbox[0] == '\0',
	    "unreadable claims: empty route passes");

	m = (struct hm_msg){ .type = HM_OOM_COUNT, .u.oom = { 1, 0x0102030405060708ull } };
	n = hm_encode(&m, buf, sizeof(buf));
	ok(n == HM_HDR_LEN + 9 && hm_decode(buf, (size_t)n, &d) == 0 && d.u.oom.known == 1 &&
	    d.u.oom.n == 0x0102030405060708ull, "OOM_COUNT round trip");
	is_int(decode_patched(buf, (size_t)n, 8, 2), -EPROTO, "OOM_COUNT known=2: refused");

	/* over a SEQPACKET pair as the processes use it */
	ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0, "seqpacket pair");
	m = refusal();
	ok(hm_send(sv[0], &m) == 0 && hm_recv(sv[1], &d) == 0 && d.type == HM_REFUSED &&
	    strcmp(d.u.ref.jti, "abc-DEF_123") == 0, "send / recv");
	memset(big, 'x', sizeof(big));
	ok(send(sv[0], big, sizeof(big), 0) == (ssize_t)sizeof(big) &&
	    hm_recv(sv[1], &d) == -EPROTO, "a packet longer than any message: refused");
	close(sv[0]);
	is_int(hm_recv(sv[1], &d), -ECONNRESET, "peer gone: ECONNRESET");
	close(sv[1]);

	/* CLAIM: the monitor tells a prepared jail's serving process whom it
	 * serves, with the guest's channel and the socket */
	{
		struct hm_msg c = claim_msg();
		int fds[2], p1[2], p2[2];
		struct stat a, b;

		n = hm_encode(&c, buf, sizeof(buf));
		ok(n == HM_HDR_LEN + 12 + GUEST_SECRET_LEN + 1 + 5 + 1 + 2 + 1 + 4 + 1 + 2,
		    "CLAIM encodes (%d bytes)", n);
		ok(hm_decode(buf, (size_t)n, &d) == 0 && d.type == HM_CLAIM &&
		    route_identity_equal(&d.u.claim.id, &c.u.claim.id) &&
		    memcmp(d.u.claim.secret, c.u.claim.secret, GUEST_SECRET_LEN) == 0,
		    "... and decodes to the same identity and secret");
		is_int(decode_patched(buf, (size_t)n, 8 + 7, 0), -EPROTO, "CLAIM generation 0: refused");
		is_int(decode_patched(buf, (size_t)n, 8 + 8 + 3, 0), -EPROTO, "CLAIM activation 0: refused");
		is_int(decode_patched(buf, (size_t)n, 8 + 12 + GUEST_SECRET_LEN + 1, '/'), -EPROTO,
		    "CLAIM a '/' in its sandbox: refused");
		is_int(decode_patched(buf, (size_t)n, 8 + 12 + GUEST_SECRET_LEN, 0), -EPROTO,
		    "CLAIM an empty sandbox: refused");
		is_int(hm_decode(buf, (size_t)n - 1, &d), -EPROTO, "CLAIM truncated: refused");
		c.u.claim.id.worker[0] = '\0';
		is_int(hm_encode(&c, buf, sizeof(buf)), -EINVAL, "the encoder refuses a claim without a worker");

		c = claim_msg();
		ok(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) == 0 && pipe(p1) == 0 && pipe(p2) == 0,
		    "seqpacket pair, two pipes");
		ok(hm_send_claim(sv[0], &c, p1[0], p2[0]) == 0 && hm_recv_claim(sv[1], &d, fds) == 0,
		    "CLAIM with two descriptors: sent and received");
		ok(fstat(fds[0], &a) == 0 && fstat(p1[0], &b) == 0 && a.st_ino == b.st_ino &&
		    fstat(fds[1], &a) == 0 && fstat(p2[0], &b) == 0 && a.st_ino == b.st_ino,
		    "... the channel first, the socket second");
		ok((fcntl(fds[0], F_GETFD) & FD_CLOEXEC) && (fcntl(fds[1], F_GETFD) & FD_CLOEXEC),
		    "... both close-on-exec");
		close(fds[0]);
		close(fds[1]);
		/* a CLAIM where a plain message is read: its descriptors make
		 * it a packet hm_recv refuses */
		ok(hm_send_claim(sv[0], &c, p1[0], p2[0]) == 0 && hm_recv(sv[1], &d) == -EPROTO,
		    "CLAIM read as another message: refused");
		/* a plain message where a CLAIM is awaited */
		m = refusal();
		ok(hm_send(sv[0], &m) == 0 && hm_recv_claim(sv[1], &d, fds) == -EPROTO &&
		    fds[0] == -1 && fds[1] == -1, "REFUSED where a CLAIM is awaited: refused");
		/* a CLAIM's bytes with one descriptor, or three: refused, and
		 * none of them is left open */
		n = hm_encode(&c, buf, sizeof(buf));
		open_before = open_fds();
		ok(send_fds(sv[0], buf, (size_t)n, p1[0], -1, -1) == 0 &&
		    hm_recv_claim(sv[1], &d, fds) == -EPROTO, "CLAIM with one descriptor: refused");
		ok(send_fds(sv[0], buf, (size_t)n, p1[0], p2[0], p1[1]) == 0 &&
		    hm_recv_claim(sv[1], &d, fds) == -EPROTO, "CLAIM with three descriptors: refused");
		is_int(open_fds(), open_before, "... every descriptor received was closed");
		close(p1[0]);
		close(p1[1]);
		close(p2[0]);
		close(p2[1]);
		close(sv[0]);
		close(sv[1]);
	}
	return done_testing();
}
