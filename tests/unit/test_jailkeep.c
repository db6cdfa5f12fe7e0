/* The ATTACH message of a later activation to a kept jail (jailkeep.h):
 * round trip over a socket with its descriptor, and every malformed
 * message refused (with any descriptor that came closed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "jailkeep.h"
#include "tap.h"

static struct jailkeep_attach
sample(void)
{
	struct jailkeep_attach a;

	memset(&a, 0, sizeof(a));
	strcpy(a.sandbox, "sbx_a-1");
	a.generation = 7;
	a.activation = 3;
	for (int i = 0; i < GUEST_SECRET_LEN; i++)
		a.secret[i] = (uint8_t)(i * 7 + 1);
	return a;
}

static int
decode_patched(size_t off, uint8_t v)
{
	struct jailkeep_attach a = sample(), b;
	uint8_t buf[JAILKEEP_WIRE_LEN];
	const char *why;

	jailkeep_encode(&a, buf);
	buf[off] = v;
	return jailkeep_decode(buf, sizeof(buf), &b, &why);
}

/* is fd open? */
static int
open_fd(int fd)
{
	return fcntl(fd, F_GETFD) >= 0;
}

int
main(void)
{
	struct jailkeep_attach a = sample(), b;
	uint8_t buf[JAILKEEP_WIRE_LEN + 8];
	const char *why;
	int sv[2], pp[2], fd;

	jailkeep_encode(&a, buf);
	is_int(jailkeep_decode(buf, JAILKEEP_WIRE_LEN, &b, &why), 0, "round trip decodes");
	ok(strcmp(b.sandbox, a.sandbox) == 0 && b.generation == 7 && b.activation == 3 &&
	    memcmp(b.secret, a.secret, GUEST_SECRET_LEN) == 0, "... with every field");
	is_int(jailkeep_decode(buf, JAILKEEP_WIRE_LEN - 1, &b, &why), -EPROTO, "one byte short refused");
	buf[JAILKEEP_WIRE_LEN] = 0;
	is_int(jailkeep_decode(buf, JAILKEEP_WIRE_LEN + 1, &b, &why), -EPROTO, "one byte long refused");
	is_int(decode_patched(0, 'X'), -EPROTO, "wrong magic refused");
	{
		/* generation 0, activation 0, high bit of the generation */
		struct jailkeep_attach c = sample();
		uint8_t m[JAILKEEP_WIRE_LEN];
		c.generation = 0;
		jailkeep_encode(&c, m);
		is_int(jailkeep_decode(m, sizeof(m), &b, &why), -EPROTO, "generation 0 refused");
		c = sample();
		c.activation = 0;
		jailkeep_encode(&c, m);
		is_int(jailkeep_decode(m, sizeof(m), &b, &why), -EPROTO, "activation 0 refused");
		c = sample();
		c.generation = (uint64_t)1 << 63;
		jailkeep_encode(&c, m);
		is_int(jailkeep_decode(m, sizeof(m), &b, &why), -EPROTO, "generation over INT64_MAX refused");
	}
	is_int(decode_patched(16, 0), -EPROTO, "sandbox length 0 refused");
	is_int(decode_patched(16, SPACE_ID_MAX + 1), -EPROTO, "sandbox length over the limit refused");
	is_int(decode_patched(17 + 10, 'x'), -EPROTO, "padding after the sandbox not zero: refused");
	is_int(decode_patched(17 + 2, '/'), -EPROTO, "a sandbox that is not an id refused");
	is_int(decode_patched(17 + 7 - 1, 0), -EPROTO, "a NUL inside the sandbox refused");

	/* over a socket, with exactly one descriptor */
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0 || pipe(pp) < 0)
		return 1;
	is_int(jailkeep_send(sv[0], &a, pp[0]), 0, "send with a descriptor");
	is_int(jailkeep_recv(sv[1], &b, &fd, &why), 0, "received");
	ok(fd >= 0 && fd != pp[0] && (fcntl(fd, F_GETFD) & FD_CLOEXEC), "... a new descriptor, close-on-exec");
	ok(b.activation == 3 && strcmp(b.sandbox, "sbx_a-1") == 0, "... and the message");
	if (fd >= 0)
		close(fd);

	/* no descriptor */
	jailkeep_encode(&a, buf);
	if (send(sv[0], buf, JAILKEEP_WIRE_LEN, 0) != JAILKEEP_WIRE_LEN)
		return 1;
	is_int(jailkeep_recv(sv[1], &b, &fd, &why), -EPROTO, "a message without a descriptor refused");
	is_str(why, "no descriptor", "... says why");
	is_int(fd, -1, "... and hands out none");

	/* a short message with a descriptor: refused, the descriptor closed */
	{
		union { struct cmsghdr h; char c[CMSG_SPACE(2 * sizeof(int))]; } u;
		struct iovec iov = { buf, 10 };
		struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.c,
		    .msg_controllen = CMSG_SPACE(sizeof(int)) };
		struct cmsghdr *cm;
		int two[2] = { pp[0], pp[1] }, before;

		memset(&u, 0, sizeof(u));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), two, sizeof(int));
		if (sendmsg(sv[0], &mh, 0) < 0)
			return 1;
		before = dup(0);   /* the lowest free descriptor: the one recv will get */
		close(before);
		is_int(jailkeep_recv(sv[1], &b, &fd, &why), -EPROTO, "a short message refused");
		ok(fd == -1 && !open_fd(before), "... and its descriptor closed");

		/* the full message with two descriptors */
		iov.iov_len = JAILKEEP_WIRE_LEN;
		jailkeep_encode(&a, buf);
		mh.msg_controllen = CMSG_SPACE(2 * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_len = CMSG_LEN(2 * sizeof(int));
		memcpy(CMSG_DATA(cm), two, sizeof(two));
		if (sendmsg(sv[0], &mh, 0) < 0)
			return 1;
		is_int(jailkeep_recv(sv[1], &b, &fd, &why), -EPROTO, "two descriptors refused");
		is_str(why, "more than one descriptor", "... says why");
		ok(fd == -1 && !open_fd(before) && !open_fd(before + 1), "... both closed");
	}
	return done_testing();
}
