/* The internal frame codec, handshake and fd passing, probed with the
 * bytes a hostile peer would send. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "claims.h"
#include "limits.h"
#include "msg.h"
#include "proto.h"
#include "tap.h"

static void
put_hdr(uint8_t *h, uint16_t magic, uint8_t ver, uint8_t res1, uint16_t type,
    uint16_t res2, uint32_t len)
{
	h[0] = (uint8_t)(magic >> 8); h[1] = (uint8_t)magic;
	h[2] = ver; h[3] = res1;
	h[4] = (uint8_t)(type >> 8); h[5] = (uint8_t)type;
	h[6] = (uint8_t)(res2 >> 8); h[7] = (uint8_t)res2;
	h[8] = (uint8_t)(len >> 24); h[9] = (uint8_t)(len >> 16);
	h[10] = (uint8_t)(len >> 8); h[11] = (uint8_t)len;
}

static void
test_header(void)
{
	uint8_t h[FRAME_HDR_LEN];
	uint16_t type = 0;
	uint32_t len = 0;

	frame_hdr_encode(h, MSG_REQUEST, 1234);
	is_int(frame_hdr_decode(h, &type, &len), 0, "header round trip decodes");
	is_int(type, MSG_REQUEST, "type survives");
	is_int(len, 1234, "length survives");
	ok(h[0] == 0x53 && h[1] == 0x50 && h[2] == PROTO_VERSION, "magic SP and version on the wire");

	put_hdr(h, 0x5351, 1, 0, MSG_REQUEST, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "bad magic refused");
	put_hdr(h, PROTO_MAGIC, PROTO_VERSION + 1, 0, MSG_REQUEST, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "version we do not speak refused");
	put_hdr(h, PROTO_MAGIC, 0, 0, MSG_REQUEST, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "version 0 refused");
	put_hdr(h, PROTO_MAGIC, 1, 1, MSG_REQUEST, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "non-zero reserved byte refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_REQUEST, 0x8000, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "non-zero reserved u16 refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, 0, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "type 0 refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG__MAX, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EPROTO, "unknown type refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_HELLO, 0, SPACE_FRAME_JSON_MAX + 1);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "JSON frame over its limit refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_HELLO, 0, SPACE_FRAME_JSON_MAX);
	is_int(frame_hdr_decode(h, &type, &len), 0, "JSON frame at its limit accepted");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_REQUEST, 0, SPACE_FRAME_OP_MAX + 1);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "REQUEST over its limit refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_RESPONSE, 0, SPACE_FRAME_OP_MAX);
	is_int(frame_hdr_decode(h, &type, &len), 0, "RESPONSE at its limit accepted");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_RESPONSE, 0, SPACE_FRAME_OP_MAX + 1);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "RESPONSE over its limit refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_DATA, 0, SPACE_FRAME_MAX);
	is_int(frame_hdr_decode(h, &type, &len), 0, "DATA at its limit accepted");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_DATA, 0, SPACE_FRAME_MAX + 1);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "DATA over its limit refused");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_DATA, 0, 0xffffffffu);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "4 GiB length refused before allocation");
	put_hdr(h, PROTO_MAGIC, 1, 0, MSG_END, 0, 1);
	is_int(frame_hdr_decode(h, &type, &len), -EMSGSIZE, "END with a payload refused");
	is_str(msg_type_str(MSG_CHALLENGE_REPLY), "CHALLENGE_REPLY", "type names");
	is_str(msg_type_str(999), "UNKNOWN", "unknown type name");
}

static void
test_decode(void)
{
	uint8_t buf[64];
	struct frame f;
	size_t used = 0;

	frame_hdr_encode(buf, MSG_REQUEST, 5);
	memcpy(buf + FRAME_HDR_LEN, "{\"a\":", 5);
	frame_hdr_encode(buf + FRAME_HDR_LEN + 5, MSG_END, 0);
	for (size_t n = 0; n < FRAME_HDR_LEN + 5; n++) {
		memset(&f, 0, sizeof(f));
		if (frame_decode(buf, n, &f, &used) != -EAGAIN) {
			ok(0, "partial frame of %zu bytes gives -EAGAIN", n);
			return;
		}
	}
	ok(1, "every partial prefix gives -EAGAIN");
	is_int(frame_decode(buf, sizeof(buf), &f, &used), 0, "whole frame decodes with leftover");
	is_int(used, FRAME_HDR_LEN + 5, "used counts only the first frame");
	is_int(f.type, MSG_REQUEST, "decoded type");
	ok(f.len == 5 && memcmp(f.payload, "{\"a\":", 5) == 0 && f.payload[5] == '\0',
	    "payload copied and NUL-terminated");
	frame_free(&f);
	is_int(frame_decode(buf + used, FRAME_HDR_LEN, &f, &used), 0, "leftover is the next frame");
	is_int(f.type, MSG_END, "the leftover frame is END");
	is_int(f.len, 0, "END is empty");
	frame_free(&f);

	buf[0] = 0;
	is_int(frame_decode(buf, sizeof(buf), &f, &used), -EPROTO, "bad magic in a buffer refused");
}

static void
test_io(void)
{
	int sv[2];
	struct frame f;
	uint8_t *big;
	uint8_t raw[FRAME_HDR_LEN + 3];

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		ok(0, "socketpair");
		return;
	}
	is_int(frame_write_json(sv[0], MSG_REQUEST, "{\"op\":\"exec\"}"), 0, "write JSON frame");
	is_int(frame_read(sv[1], &f), 0, "read JSON frame");
	is_str((char *)f.payload, "{\"op\":\"exec\"}", "payload intact");
	frame_free(&f);

	is_int(frame_write(sv[0], MSG_HELLO, "x", SPACE_FRAME_JSON_MAX + 1), -EMSGSIZE,
	    "writer refuses what the reader would refuse");
	is_int(frame_write(sv[0], 0, NULL, 0), -EINVAL, "writer refuses type 0");

	/* a DATA frame bigger than the socket buffer: short writes and reads
	 * completed, in a child so both sides make progress */
	big = malloc(SPACE_FRAME_MAX);
	for (size_t i = 0; i < SPACE_FRAME_MAX; i++)
		big[i] = (uint8_t)(i * 7);
	pid_t pid = fork();
	if (pid == 0) {
		int r = frame_write(sv[0], MSG_DATA, big, SPACE_FRAME_MAX);
		_exit(r == 0 ? 0 : 1);
	}
	is_int(frame_read(sv[1], &f), 0, "1 MiB DATA frame read");
	ok(f.len == SPACE_FRAME_MAX && memcmp(f.payload, big, SPACE_FRAME_MAX) == 0, "1 MiB intact");
	frame_free(&f);
	int st = 0;
	waitpid(pid, &st, 0);
	ok(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer completed its short writes");
	free(big);

	/* truncated frame then EOF */
	frame_hdr_encode(raw, MSG_REQUEST, 10);
	memcpy(raw + FRAME_HDR_LEN, "abc", 3);
	(void)!write(sv[0], raw, sizeof(raw));
	shutdown(sv[0], SHUT_WR);
	is_int(frame_read(sv[1], &f), -EPROTO, "EOF inside a frame is -EPROTO");
	close(sv[0]);
	close(sv[1]);

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	close(sv[0]);
	is_int(frame_read(sv[1], &f), -ECONNRESET, "EOF at a frame boundary is -ECONNRESET");
	is_int(frame_write(sv[1], MSG_END, NULL, 0), -EPIPE, "write to a closed peer is -EPIPE, no SIGPIPE");
	close(sv[1]);

	/* header claiming a huge payload: refused before reading or allocating */
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	put_hdr(raw, PROTO_MAGIC, 1, 0, MSG_DATA, 0, 0x7fffffff);
	(void)!write(sv[0], raw, FRAME_HDR_LEN);
	is_int(frame_read(sv[1], &f), -EMSGSIZE, "oversized length refused on read");
	close(sv[0]);
	close(sv[1]);
}

struct hello_arg {
	int fd;
	enum proto_role me, peer;
	int r;
	const char *raw;        /* when set: send this HELLO payload instead */
};

static void *
server_thread(void *p)
{
	struct hello_arg *a = p;
	a->r = proto_hello_server(a->fd, a->me, &a->peer);
	return NULL;
}

static void
test_hello(void)
{
	int sv[2];
	pthread_t t;
	struct hello_arg srv = { 0 };
	enum proto_role peer = 0;
	struct frame f;
	int r;

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	srv.fd = sv[1];
	srv.me = ROLE_SBX_MANAGER;
	pthread_create(&t, NULL, server_thread, &srv);
	r = proto_hello_client(sv[0], ROLE_NODE_API, &peer);
	pthread_join(t, NULL);
	is_int(r, 1, "client negotiates version 1");
	is_int(srv.r, 1, "server negotiates version 1");
	is_int(peer, ROLE_SBX_MANAGER, "client learns the server role");
	is_int(srv.peer, ROLE_NODE_API, "server learns the client role");
	close(sv[0]);
	close(sv[1]);

	/* a client that only speaks future versions */
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	srv.fd = sv[1];
	pthread_create(&t, NULL, server_thread, &srv);
	frame_write_json(sv[0], MSG_HELLO, "{\"role\":\"node-api\",\"min\":2,\"max\":5}");
	pthread_join(t, NULL);
	is_int(srv.r, -EPROTO, "no common version: server refuses");
	is_int(frame_read(sv[0], &f), 0, "refusal arrives as a frame");
	is_int(f.type, MSG_ERROR, "refusal is an ERROR frame");
	ok(f.payload && strstr((char *)f.payload, "\"status\":400") &&
	    strstr((char *)f.payload, "no common protocol version") &&
	    strstr((char *)f.payload, "bad_request"), "ERROR says 400 bad_request, no common version");
	frame_free(&f);
	close(sv[0]);
	close(sv[1]);

	/* a client sees the refusal as -EPROTO: fake server answering ERROR */
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	frame_write_json(sv[1], MSG_ERROR, "{\"status\":400,\"error\":\"bad_request\"}");
	is_int(proto_hello_client(sv[0], ROLE_NODE_API, &peer), -EPROTO, "client: ERROR answer is -EPROTO");
	close(sv[0]);
	close(sv[1]);

	/* a server that picks a version outside what we offered */
	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	frame_write_json(sv[1], MSG_HELLO, "{\"role\":\"sbx-manager\",\"version\":7}");
	is_int(proto_hello_client(sv[0], ROLE_NODE_API, &peer), -EPROTO,
	    "client: server choosing an unoffered version refused");
	close(sv[0]);
	close(sv[1]);

	static const char *bad[] = {
		"{\"role\":\"node-api\",\"min\":1,\"max\":1,\"x\":1}",
		"{\"role\":\"node-api\",\"min\":1,\"min\":1,\"max\":1}",
		"{\"role\":\"intruder\",\"min\":1,\"max\":1}",
		"{\"role\":\"node-api\",\"min\":\"1\",\"max\":1}",
		"{\"role\":\"node-api\",\"min\":2,\"max\":1}",
		"[1]",
		"not json",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
		srv.fd = sv[1];
		pthread_create(&t, NULL, server_thread, &srv);
		frame_write_json(sv[0], MSG_HELLO, bad[i]);
		pthread_join(t, NULL);
		is_int(srv.r, -EPROTO, "malformed HELLO refused: %s", bad[i]);
		f.type = 0;
		ok(frame_read(sv[0], &f) == 0 && f.type == MSG_ERROR, "  ... with an ERROR frame");
		frame_free(&f);
		close(sv[0]);
		close(sv[1]);
	}
	is_str(proto_role_str(ROLE_SPACED_GUEST), "spaced-guest", "role names");
	ok(proto_role_str(0) == NULL, "role 0 has no name");
}

static int
count_fds(void)
{
	int n = 0;
	for (int i = 0; i < 1024; i++)
		if (fcntl(i, F_GETFD) >= 0)
			n++;
	return n;
}

static void
test_fd_passing(void)
{
	int sv[2], p[2], got = -1;
	struct frame f;
	char c = 0;

	socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
	ok(pipe2(p, O_CLOEXEC) == 0, "pipe");
	is_int(frame_write_fd(sv[0], MSG_OPEN, "{\"op_id\":1}", 11, p[1]), 0, "send a fd with OPEN");
	is_int(frame_read_fd(sv[1], &f, &got), 0, "receive OPEN with its fd");
	ok(got >= 0 && got != p[1], "a new descriptor arrived");
	ok(got >= 0 && (fcntl(got, F_GETFD) & FD_CLOEXEC), "received descriptor is CLOEXEC");
	is_str((char *)f.payload, "{\"op_id\":1}", "payload with the fd intact");
	frame_free(&f);
	(void)!write(got, "z", 1);
	(void)!read(p[0], &c, 1);
	ok(c == 'z', "the received descriptor is the pipe we sent");
	close(got);

	/* no fd: got_fd is -1 */
	frame_write(sv[0], MSG_REQUEST, "{}", 2);
	is_int(frame_read_fd(sv[1], &f, &got), 0, "frame without fd");
	is_int(got, -1, "no fd reported as -1");
	frame_free(&f);

	/* a hostile sender passes three descriptors in one message */
	{
		uint8_t hdr[FRAME_HDR_LEN];
		int three[3] = { p[0], p[1], p[0] };
		union { char b[CMSG_SPACE(sizeof(three))]; struct cmsghdr a; } cb;
		struct iovec iov = { hdr, sizeof(hdr) };
		struct msghdr mh = { 0 };
		struct cmsghdr *cm;
		int before;

		frame_hdr_encode(hdr, MSG_OPEN, 0);
		memset(&cb, 0, sizeof(cb));
		mh.msg_iov = &iov;
		mh.msg_iovlen = 1;
		mh.msg_control = cb.b;
		mh.msg_controllen = sizeof(cb.b);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(three));
		memcpy(CMSG_DATA(cm), three, sizeof(three));
		before = count_fds();
		ok(sendmsg(sv[0], &mh, 0) == (ssize_t)sizeof(hdr), "hostile sendmsg with 3 fds");
		got = 12345;
		is_int(frame_read_fd(sv[1], &f, &got), -EPROTO, "more than one fd refused");
		is_int(got, -1, "no fd handed to the caller");
		is_int(count_fds(), before, "every received fd was closed");
	}
	is_int(frame_write_fd(sv[0], MSG_OPEN, "{}", 2, -1), -EBADF, "frame_write_fd needs a fd");
	close(p[0]);
	close(p[1]);
	close(sv[0]);
	close(sv[1]);
}

/* the ERROR frame every receiver answers with: optional fields are left
 * out, not sent as null, and the reader gets valid JSON back */
static void
test_error_frame(void)
{
	int sv[2];
	struct frame f;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		ok(0, "socketpair");
		return;
	}
	is_int(frame_write_error(sv[0], 403, "deny", "bad_signature", NULL), 0,
	    "write an ERROR frame with a reason");
	if (frame_read(sv[1], &f) == 0) {
		ok(f.type == MSG_ERROR, "it is an ERROR frame");
		is_str((char *)f.payload, "{\"status\":403,\"error\":\"deny\",\"reason\":\"bad_signature\"}",
		    "status, error and reason; no message");
		frame_free(&f);
	} else
		ok(0, "read the ERROR frame");
	is_int(frame_write_error(sv[0], 400, "bad_request", NULL, "say \"no\"\n"), 0,
	    "write an ERROR frame with a message to escape");
	if (frame_read(sv[1], &f) == 0) {
		is_str((char *)f.payload,
		    "{\"status\":400,\"error\":\"bad_request\",\"message\":\"say \\\"no\\\"\\n\"}",
		    "message escaped as JSON; no reason");
		frame_free(&f);
	} else
		ok(0, "read the second ERROR frame");
	close(sv[1]);
	ok(frame_write_error(sv[0], 500, "internal", NULL, NULL) < 0,
	    "a closed peer is an error, not a crash");
	close(sv[0]);
}

static void
test_ops(void)
{
	static const struct { const char *n; uint32_t acc; } t[] = {
		{ "exec", ACC_EXEC }, { "fs.read", ACC_FS_R }, { "fs.list", ACC_FS_R },
		{ "fs.stat", ACC_FS_R }, { "fs.write", ACC_FS_W }, { "fs.mkdir", ACC_FS_W },
		{ "fs.remove", ACC_FS_W }, { "fs.rename", ACC_FS_W },
	};
	enum op_kind op;

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		ok(op_parse(t[i].n, &op) == 0 && op_access(op) == t[i].acc &&
		    strcmp(op_name(op), t[i].n) == 0, "op %s needs the right access", t[i].n);
	}
	is_int(op_parse("fs.chmod", &op), -EINVAL, "unknown op refused");
	is_int(op_parse("EXEC", &op), -EINVAL, "op names are case-sensitive");
	ok((op_access((enum op_kind)0) & ~ACC_ALL) != 0, "unknown op needs an access no capability has");
}

int
main(void)
{
	test_header();
	test_decode();
	test_io();
	test_hello();
	test_fd_passing();
	test_error_frame();
	test_ops();
	return done_testing();
}
