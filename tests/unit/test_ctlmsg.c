/* ctlmsg.h: sbx-manager <-> its control client. Every message round-trips;
 * the decoder refuses what the header describes wrongly, every limit,
 * bytes left over, and a descriptor where none belongs. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "tap.h"

#define IDENT "{\"sandbox\":\"sbx_1\",\"generation\":7,\"worker\":\"w1\",\"substrate\":\"jail\"," \
	"\"activation\":2,\"resident\":\"inc_1\"}"
#define D64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static uint8_t buf[CTL_MSG_MAX + 64];

static int
roundtrip(const struct ctlmsg *m, struct ctlmsg *out)
{
	const char *why;
	int n = ctlmsg_encode(m, buf, CTL_MSG_MAX);

	if (n < 0)
		return n;
	return ctlmsg_decode(buf, (size_t)n, out, &why);
}

static void
set_len(uint8_t *b, uint32_t len)
{
	b[8] = (uint8_t)(len >> 24);
	b[9] = (uint8_t)(len >> 16);
	b[10] = (uint8_t)(len >> 8);
	b[11] = (uint8_t)len;
}

int
main(void)
{
	struct ctlmsg m, d;
	struct msg_assignments as;
	const char *why;
	char (*dg)[CTL_DIGEST_HEX + 1];
	char *big;
	int n, sv[2], fd, p[2];

	/* ---- round trips ---- */
	memset(&m, 0, sizeof(m));
	m.type = CTL_POST;
	m.id = 7;
	strcpy(m.path, "/v1/workers/w1/status");
	m.text = (char *)"{\"state\":\"serving\"}";
	m.text_len = strlen(m.text);
	m.timeout_s = 10;
	is_int(roundtrip(&m, &d), 0, "POST round trip");
	ok(d.id == 7 && strcmp(d.path, m.path) == 0 && d.text_len == m.text_len &&
	    strcmp(d.text, m.text) == 0 && d.timeout_s == 10, "... the same fields");
	ctlmsg_clear(&d);

	memset(&m, 0, sizeof(m));
	m.type = CTL_ASSIGN_GET;
	m.after = 1ull << 40;
	m.wait_s = 25;
	is_int(roundtrip(&m, &d), 0, "ASSIGN_GET round trip");
	ok(d.after == 1ull << 40 && d.wait_s == 25, "... the same fields");
	ctlmsg_clear(&d);

	memset(&m, 0, sizeof(m));
	m.type = CTL_TEMPLATE_GET;
	strcpy(m.digest, D64);
	is_int(roundtrip(&m, &d), 0, "TEMPLATE_GET round trip");
	ok(strcmp(d.digest, D64) == 0, "... the same digest");
	ctlmsg_clear(&d);

	memset(&m, 0, sizeof(m));
	m.type = CTL_KEYS;
	m.status = 200;
	m.text = (char *)"v4.public.eyJhIjoxfQ.AAAA";
	m.text_len = strlen(m.text);
	is_int(roundtrip(&m, &d), 0, "KEYS round trip");
	ok(d.result == CTL_OK && d.status == 200 && strcmp(d.text, m.text) == 0, "... the same bundle");
	ctlmsg_clear(&d);

	memset(&m, 0, sizeof(m));
	m.type = CTL_COLLECT;
	m.status = 200;
	m.count = 2;
	dg = calloc(2, sizeof(*dg));
	strcpy(dg[0], D64);
	strcpy(dg[1], D64);
	dg[1][0] = 'f';
	m.digests = dg;
	is_int(roundtrip(&m, &d), 0, "COLLECT round trip");
	ok(d.count == 2 && strcmp(d.digests[1], dg[1]) == 0, "... the same digests");
	ctlmsg_clear(&d);

	is_int(msg_assignments_decode("{\"revision\":5,\"assignments\":[{\"revision\":5,\"action\":"
	    "\"retire\",\"identity\":" IDENT ",\"spec\":{\"snapshot\":true}}]}",
	    strlen("{\"revision\":5,\"assignments\":[{\"revision\":5,\"action\":"
	    "\"retire\",\"identity\":" IDENT ",\"spec\":{\"snapshot\":true}}]}"), &as, &why), 0,
	    "an assignments answer (JSON, as the child reads it)");
	memset(&m, 0, sizeof(m));
	m.type = CTL_ASSIGNMENT;
	m.id = 9;
	m.a = as.a[0];
	is_int(roundtrip(&m, &d), 0, "ASSIGNMENT round trip");
	ok(d.a.action == ASSIGN_RETIRE && d.a.want_snapshot && d.a.revision == 5 &&
	    strcmp(d.a.id.sandbox, "sbx_1") == 0 && d.a.id.generation == 7, "... the same assignment");
	ctlmsg_clear(&d);

	/* ---- refusals ---- */
	memset(&m, 0, sizeof(m));
	m.type = CTL_DONE;
	m.status = 200;
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	is_int(n, CTL_HDR_LEN + 3, "DONE is the header and 3 bytes");
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), 0, "... decodes");
	is_int(ctlmsg_decode(buf, (size_t)n - 1, &d, &why), -EPROTO, "a short packet is refused");
	buf[n] = 0;
	is_int(ctlmsg_decode(buf, (size_t)n + 1, &d, &why), -EPROTO, "a longer packet is refused");
	set_len(buf, 4);
	buf[n] = 0;
	is_int(ctlmsg_decode(buf, (size_t)n + 1, &d, &why), -EPROTO,
	    "a byte left over (the length saying so) is refused");
	set_len(buf, 3);
	buf[0] ^= 1;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "a bad magic is refused");
	buf[0] ^= 1;
	buf[2] = 2;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "another version is refused");
	buf[2] = CTL_VERSION;
	buf[3] = CTL__MAX;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "an unknown type is refused");
	buf[3] = CTL_DONE;
	buf[12] = CTL__RESULT_MAX;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "an unknown result is refused");
	buf[12] = CTL_OK;
	buf[13] = 0x03;
	buf[14] = 0xe8;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "a status over 999 is refused");

	memset(&m, 0, sizeof(m));
	m.type = CTL_KEYS;
	m.status = 200;
	m.text = (char *)"v4.public.a b";
	m.text_len = strlen(m.text);
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "a bundle with a space is not encoded");
	m.text = (char *)"abc";
	m.text_len = 3;
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	buf[n - 2] = 0;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "a bundle with a NUL is refused");
	big = malloc(SPACE_BUNDLE_TOKEN_MAX + 2);
	memset(big, 'A', SPACE_BUNDLE_TOKEN_MAX + 1);
	big[SPACE_BUNDLE_TOKEN_MAX + 1] = '\0';
	m.text = big;
	m.text_len = SPACE_BUNDLE_TOKEN_MAX + 1;
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "a bundle over its limit is not encoded");
	m.text_len = SPACE_BUNDLE_TOKEN_MAX;
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	ok(n > 0, "a bundle of the limit is encoded");
	/* the string length field says one more, and the byte is there */
	buf[15] = 0;
	buf[16] = 1;
	buf[17] = 0;
	buf[18] = 1;
	buf[n] = 'A';
	set_len(buf, (uint32_t)(n + 1 - CTL_HDR_LEN));
	is_int(ctlmsg_decode(buf, (size_t)n + 1, &d, &why), -EPROTO, "... one byte over is refused");
	free(big);
	m.result = CTL_NO_ANSWER;
	m.text = (char *)"abc";
	m.text_len = 3;
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "a failed KEYS carries no bundle");

	memset(&m, 0, sizeof(m));
	m.type = CTL_ASSIGNMENTS;
	m.count = SPACE_ASSIGNMENTS_MAX + 1;
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "more assignments than the limit: not encoded");
	m.count = 1;
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	buf[n - 2] = 0xff;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "... nor decoded");

	memset(&m, 0, sizeof(m));
	m.type = CTL_COLLECT;
	m.count = 1;
	m.digests = dg;
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	buf[n - 1] = 'G';
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "a digest that is not lowercase hex is refused");
	free(dg);

	memset(&m, 0, sizeof(m));
	m.type = CTL_POST;
	strcpy(m.path, "v1/no-slash");
	m.text = (char *)"{}";
	m.text_len = 2;
	m.timeout_s = 5;
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "a path without its slash is not encoded");
	strcpy(m.path, "/v1/x");
	m.timeout_s = 0;
	is_int(ctlmsg_encode(&m, buf, CTL_MSG_MAX), -EINVAL, "a zero timeout is not encoded");

	memset(&m, 0, sizeof(m));
	m.type = CTL_ASSIGNMENT;
	m.a = as.a[0];
	n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
	buf[CTL_HDR_LEN + 4] = MSG_ASSIGNMENT_WIRE_VERSION + 1;
	is_int(ctlmsg_decode(buf, (size_t)n, &d, &why), -EPROTO, "an assignment record of another version is refused");
	msg_assignments_free(&as);

	/* ---- on a socket pair ---- */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || pipe2(p, O_CLOEXEC) < 0)
		return 1;
	memset(&m, 0, sizeof(m));
	m.type = CTL_TEMPLATE_GET;
	strcpy(m.digest, D64);
	is_int(ctlmsg_send(sv[0], &m, p[1]), 0, "TEMPLATE_GET sent with a descriptor");
	is_int(ctlmsg_recv(sv[1], &d, &fd, &why), 0, "... received with it");
	ok(fd >= 0 && fd != p[1] && write(fd, "x", 1) == 1, "... a working descriptor");
	close(fd);
	is_int(ctlmsg_send(sv[0], &m, -1), -EINVAL, "TEMPLATE_GET without a descriptor is not sent");
	m.type = CTL_SNAPSHOT_PUT;
	is_int(ctlmsg_send(sv[0], &m, p[1]), 0, "SNAPSHOT_PUT sent with a descriptor");
	is_int(ctlmsg_recv(sv[1], &d, &fd, &why), 0, "... received with it");
	ok(d.type == CTL_SNAPSHOT_PUT && strcmp(d.digest, D64) == 0 && fd >= 0,
	    "... its type, digest and descriptor");
	close(fd);
	m.type = CTL_SNAPSHOT_GET;
	is_int(ctlmsg_send(sv[0], &m, p[1]), 0, "SNAPSHOT_GET sent with a descriptor");
	is_int(ctlmsg_recv(sv[1], &d, &fd, &why), 0, "... received with it");
	ok(d.type == CTL_SNAPSHOT_GET && ctlmsg_is_request(d.type) && fd >= 0, "... a request");
	close(fd);
	is_int(ctlmsg_send(sv[0], &m, -1), -EINVAL, "SNAPSHOT_GET without a descriptor is not sent");
	m.type = CTL_SNAPSHOT_STREAM;
	is_int(ctlmsg_send(sv[0], &m, p[1]), 0, "SNAPSHOT_STREAM sent with a descriptor");
	is_int(ctlmsg_recv(sv[1], &d, &fd, &why), 0, "... received with it");
	ok(d.type == CTL_SNAPSHOT_STREAM && ctlmsg_is_request(d.type) && fd >= 0,
	    "... a request, with its descriptor");
	close(fd);
	is_int(ctlmsg_send(sv[0], &m, -1), -EINVAL, "SNAPSHOT_STREAM without a descriptor is not sent");
	m.type = CTL_SNAPSHOT_GET;
	strcpy(m.digest, "../../etc/passwd");
	is_int(ctlmsg_send(sv[0], &m, p[1]), -EINVAL, "a digest that is a path is not sent");
	m.type = CTL_TEMPLATE_GET;
	strcpy(m.digest, D64);
	m.type = CTL_KEYS_GET;
	is_int(ctlmsg_send(sv[0], &m, p[1]), -EINVAL, "a descriptor on KEYS_GET is not sent");
	/* the hostile sender: raw bytes of a KEYS_GET with a descriptor */
	{
		union { struct cmsghdr h; char b[CMSG_SPACE(sizeof(int))]; } cm;
		struct msghdr mh = { 0 };
		struct iovec iov;

		n = ctlmsg_encode(&m, buf, CTL_MSG_MAX);
		iov.iov_base = buf;
		iov.iov_len = (size_t)n;
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &p[1], sizeof(int));
		ok(sendmsg(sv[0], &mh, 0) == n, "a KEYS_GET with a descriptor, sent raw");
		is_int(ctlmsg_recv(sv[1], &d, &fd, &why), -EPROTO, "... refused");
		is_int(fd, -1, "... and the descriptor not kept");
		/* a packet over the limit is seen truncated */
		big = calloc(1, CTL_MSG_MAX + 16);
		memcpy(big, buf, CTL_HDR_LEN);
		set_len((uint8_t *)big, CTL_MSG_MAX + 16 - CTL_HDR_LEN);
		ok(send(sv[0], big, CTL_MSG_MAX + 16, 0) == CTL_MSG_MAX + 16, "a packet over the limit, sent raw");
		is_int(ctlmsg_recv(sv[1], &d, NULL, &why), -EPROTO, "... refused as truncated");
		free(big);
	}
	close(sv[0]);
	is_int(ctlmsg_recv(sv[1], &d, NULL, &why), -ECONNRESET, "the end of the stream");
	close(sv[1]);
	close(p[0]);
	close(p[1]);
	return done_testing();
}
