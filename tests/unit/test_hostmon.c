/* The monitor <-> serving process codec of spaced-host (hostmon.h):
 * round trips, and every way a message from a compromised serving process
 * can be wrong is refused. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
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
	int n, sv[2];

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
	return done_testing();
}
