/* The internal framed protocol: header codec, blocking frame I/O, the
 * version handshake, SCM_RIGHTS passing and the operation table.
 * Everything read here comes from another process that we treat as hostile:
 * every length is checked against the type's limit before anything is
 * allocated, and an invalid frame ends the connection. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <jansson.h>

#include "claims.h"
#include "limits.h"
#include "proto.h"

/* at most this many fds are accepted into the control buffer of one
 * recvmsg: enough to notice (and close) a sender that passes several */
#define FD_SLOTS 8

static const char *const msg_names[MSG__MAX] = {
	[MSG_HELLO] = "HELLO",
	[MSG_REQUEST] = "REQUEST",
	[MSG_RESPONSE] = "RESPONSE",
	[MSG_DATA] = "DATA",
	[MSG_END] = "END",
	[MSG_ERROR] = "ERROR",
	[MSG_CHALLENGE] = "CHALLENGE",
	[MSG_CHALLENGE_REPLY] = "CHALLENGE_REPLY",
	[MSG_CANCEL] = "CANCEL",
	[MSG_OPEN] = "OPEN",
	[MSG_STREAM] = "STREAM",
};

const char *
msg_type_str(uint16_t type)
{
	if (type == 0 || type >= MSG__MAX)
		return "UNKNOWN";
	return msg_names[type];
}

size_t
frame_max_len(uint16_t type)
{
	switch (type) {
	case MSG_DATA:
		return SPACE_FRAME_MAX;
	case MSG_END:
		/* END is a marker; a payload on it would be data nobody reads */
		return 0;
	case MSG_REQUEST: case MSG_RESPONSE:
		/* an exec carries its stdin in the REQUEST and up to
		 * SPACE_EXEC_OUTPUT_MAX of each output, JSON-escaped, in the
		 * RESPONSE */
		return SPACE_FRAME_OP_MAX;
	case MSG_HELLO: case MSG_ERROR:
	case MSG_CHALLENGE: case MSG_CHALLENGE_REPLY: case MSG_CANCEL:
	case MSG_OPEN:
		return SPACE_FRAME_JSON_MAX;
	case MSG_STREAM:
		return SPACE_STREAM_PAYLOAD_MAX;
	default:
		return 0;
	}
}

static bool
type_valid(uint16_t type)
{
	return type > 0 && type < MSG__MAX;
}

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) |
	    ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

void
frame_hdr_encode(uint8_t out[FRAME_HDR_LEN], uint16_t type, uint32_t len)
{
	put16(out, PROTO_MAGIC);
	out[2] = PROTO_VERSION;
	out[3] = 0;
	put16(out + 4, type);
	put16(out + 6, 0);
	put32(out + 8, len);
}

int
frame_hdr_decode(const uint8_t in[FRAME_HDR_LEN], uint16_t *type, uint32_t *len)
{
	uint16_t t;
	uint32_t l;

	if (get16(in) != PROTO_MAGIC)
		return -EPROTO;
	if (in[2] < PROTO_VERSION_MIN || in[2] > PROTO_VERSION)
		return -EPROTO;
	/* reserved fields must be zero so that a later version can give them a
	 * meaning without an old peer silently ignoring it */
	if (in[3] != 0 || get16(in + 6) != 0)
		return -EPROTO;
	t = get16(in + 4);
	if (!type_valid(t))
		return -EPROTO;
	l = get32(in + 8);
	/* checked before any allocation: the peer chooses this number */
	if (l > frame_max_len(t))
		return -EMSGSIZE;
	*type = t;
	*len = l;
	return 0;
}

int
frame_decode(const uint8_t *buf, size_t n, struct frame *f, size_t *used)
{
	uint16_t type;
	uint32_t len;
	uint8_t *p;
	int r;

	if (n < FRAME_HDR_LEN)
		return -EAGAIN;
	if ((r = frame_hdr_decode(buf, &type, &len)) < 0)
		return r;
	if (n - FRAME_HDR_LEN < len)
		return -EAGAIN;
	if ((p = malloc((size_t)len + 1)) == NULL)
		return -ENOMEM;
	memcpy(p, buf + FRAME_HDR_LEN, len);
	p[len] = '\0';
	f->type = type;
	f->version = buf[2];
	f->len = len;
	f->payload = p;
	*used = FRAME_HDR_LEN + (size_t)len;
	return 0;
}

void
frame_free(struct frame *f)
{
	if (f == NULL)
		return;
	free(f->payload);
	f->payload = NULL;
	f->len = 0;
}

/* ---- blocking I/O ---- */

static void
close_fds(const int *fds, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (fds[i] >= 0)
			close(fds[i]);
}

/* Read exactly n bytes. With fds != NULL every read is a recvmsg that
 * collects passed descriptors into fds[*nfds] (closing what does not fit,
 * and flagging *extra when the sender passed more than one in total).
 * Returns 0, -ECONNRESET on EOF before the first byte, -EPROTO on EOF in the
 * middle, -errno otherwise. */
static int
read_full(int fd, void *buf, size_t n, int *fds, size_t *nfds, bool *extra)
{
	uint8_t *p = buf;
	size_t got = 0;

	while (got < n) {
		ssize_t k;

		if (fds == NULL) {
			k = read(fd, p + got, n - got);
		} else {
			union {
				char buf[CMSG_SPACE(sizeof(int) * FD_SLOTS)];
				struct cmsghdr align;
			} cbuf;
			struct iovec iov = { p + got, n - got };
			struct msghdr mh = { 0 };
			struct cmsghdr *c;

			mh.msg_iov = &iov;
			mh.msg_iovlen = 1;
			mh.msg_control = cbuf.buf;
			mh.msg_controllen = sizeof(cbuf.buf);
			/* CLOEXEC atomically: a descriptor from a peer must
			 * never leak into a child we spawn */
			k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
			if (k >= 0) {
				for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
					size_t cnt;
					int tmp[FD_SLOTS];

					if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
						continue;
					cnt = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
					if (cnt > FD_SLOTS)
						cnt = FD_SLOTS;
					memcpy(tmp, CMSG_DATA(c), cnt * sizeof(int));
					for (size_t i = 0; i < cnt; i++) {
						if (*nfds == 0) {
							fds[0] = tmp[i];
							*nfds = 1;
						} else {
							close(tmp[i]);
							*extra = true;
						}
					}
				}
				/* the kernel dropped descriptors that did not fit */
				if (mh.msg_flags & MSG_CTRUNC)
					*extra = true;
			}
		}
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (k == 0)
			return got == 0 ? -ECONNRESET : -EPROTO;
		got += (size_t)k;
	}
	return 0;
}

static int
frame_read_common(int fd, struct frame *f, int *fds, size_t *nfds, bool *extra)
{
	uint8_t hdr[FRAME_HDR_LEN];
	uint16_t type;
	uint32_t len;
	uint8_t *p = NULL;
	int r;

	memset(f, 0, sizeof(*f));
	if ((r = read_full(fd, hdr, sizeof(hdr), fds, nfds, extra)) < 0)
		return r;
	if ((r = frame_hdr_decode(hdr, &type, &len)) < 0)
		return r;
	if ((p = malloc((size_t)len + 1)) == NULL)
		return -ENOMEM;
	if (len > 0 && (r = read_full(fd, p, len, fds, nfds, extra)) < 0) {
		free(p);
		/* EOF inside a frame is a truncated frame, not a clean close */
		return r == -ECONNRESET ? -EPROTO : r;
	}
	p[len] = '\0';
	f->type = type;
	f->version = hdr[2];
	f->len = len;
	f->payload = p;
	return 0;
}

int
frame_read(int fd, struct frame *f)
{
	return frame_read_common(fd, f, NULL, NULL, NULL);
}

int
frame_read_fd(int fd, struct frame *f, int *got_fd)
{
	int fds[1] = { -1 };
	size_t nfds = 0;
	bool extra = false;
	int r;

	*got_fd = -1;
	r = frame_read_common(fd, f, fds, &nfds, &extra);
	if (r == 0 && extra) {
		/* one frame carries at most one descriptor: a peer passing more
		 * is broken or hostile, and we must not keep what it pushed */
		frame_free(f);
		r = -EPROTO;
	}
	if (r < 0) {
		close_fds(fds, nfds);
		return r;
	}
	*got_fd = nfds ? fds[0] : -1;
	return 0;
}

/* write the iovecs completely; the first sendmsg carries the control
 * message (if any), continuations after a short write carry none */
static int
write_full(int fd, struct iovec *iov, int iovcnt, void *control, size_t controllen)
{
	bool sock = true;

	while (iovcnt > 0) {
		ssize_t k;

		if (iov->iov_len == 0) {
			iov++;
			iovcnt--;
			continue;
		}
		if (sock) {
			struct msghdr mh = { 0 };

			mh.msg_iov = iov;
			mh.msg_iovlen = (size_t)iovcnt;
			mh.msg_control = control;
			mh.msg_controllen = controllen;
			/* MSG_NOSIGNAL: a peer that went away must give us
			 * EPIPE, not kill the daemon with SIGPIPE */
			k = sendmsg(fd, &mh, MSG_NOSIGNAL);
			if (k < 0 && errno == ENOTSOCK && control == NULL) {
				sock = false;
				continue;
			}
		} else
			k = writev(fd, iov, iovcnt);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		control = NULL;
		controllen = 0;
		while (k > 0 && iovcnt > 0) {
			if ((size_t)k >= iov->iov_len) {
				k -= (ssize_t)iov->iov_len;
				iov++;
				iovcnt--;
			} else {
				iov->iov_base = (uint8_t *)iov->iov_base + k;
				iov->iov_len -= (size_t)k;
				k = 0;
			}
		}
	}
	return 0;
}

static int
frame_write_common(int fd, uint16_t type, const void *payload, size_t len, int pass_fd)
{
	uint8_t hdr[FRAME_HDR_LEN];
	struct iovec iov[2];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	void *control = NULL;
	size_t controllen = 0;

	/* we never send what our own reader would refuse */
	if (!type_valid(type))
		return -EINVAL;
	if (len > frame_max_len(type))
		return -EMSGSIZE;
	if (len > 0 && payload == NULL)
		return -EINVAL;
	frame_hdr_encode(hdr, type, (uint32_t)len);
	iov[0].iov_base = hdr;
	iov[0].iov_len = sizeof(hdr);
	iov[1].iov_base = (void *)(uintptr_t)payload;
	iov[1].iov_len = len;
	if (pass_fd >= 0) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		c = &cbuf.align;
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
		control = cbuf.buf;
		controllen = sizeof(cbuf.buf);
	}
	return write_full(fd, iov, 2, control, controllen);
}

int
frame_write(int fd, uint16_t type, const void *payload, size_t len)
{
	return frame_write_common(fd, type, payload, len, -1);
}

int
frame_write_json(int fd, uint16_t type, const char *json)
{
	if (json == NULL || type == MSG_DATA || type == MSG_END)
		return -EINVAL;
	return frame_write_common(fd, type, json, strlen(json), -1);
}

int
frame_write_fd(int fd, uint16_t type, const void *payload, size_t len, int pass_fd)
{
	if (pass_fd < 0)
		return -EBADF;
	return frame_write_common(fd, type, payload, len, pass_fd);
}

/* ---- roles and the version handshake ---- */

static const char *const role_names[] = {
	[ROLE_NODE_API] = "node-api",
	[ROLE_SBX_MANAGER] = "sbx-manager",
	[ROLE_SPACED_HOST] = "spaced-host",
	[ROLE_SPACED_GUEST] = "spaced-guest",
};
#define ROLE_COUNT (sizeof(role_names) / sizeof(role_names[0]))

const char *
proto_role_str(enum proto_role r)
{
	if ((unsigned)r == 0 || (unsigned)r >= ROLE_COUNT)
		return NULL;
	return role_names[r];
}

static int
role_parse(const char *s, enum proto_role *out)
{
	for (unsigned i = 1; i < ROLE_COUNT; i++)
		if (strcmp(s, role_names[i]) == 0) {
			*out = (enum proto_role)i;
			return 0;
		}
	return -EINVAL;
}

/* decode a JSON object with exactly the integer/string members named in
 * keys (NULL-terminated); returns the object or NULL */
static json_t *
json_strict(const struct frame *f, const char *const *keys)
{
	json_t *o;
	size_t n = 0;

	o = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, NULL);
	if (o == NULL)
		return NULL;
	if (!json_is_object(o))
		goto bad;
	for (; keys[n]; n++)
		if (json_object_get(o, keys[n]) == NULL)
			goto bad;
	/* all named keys present and no other: unknown fields are refused */
	if (json_object_size(o) != n)
		goto bad;
	return o;
bad:
	json_decref(o);
	return NULL;
}

static int
json_small_int(json_t *o, const char *key, int *out)
{
	json_t *v = json_object_get(o, key);
	json_int_t i;

	if (!json_is_integer(v))
		return -EINVAL;
	i = json_integer_value(v);
	if (i < 0 || i > 255)
		return -EINVAL;
	*out = (int)i;
	return 0;
}

/* the ERROR of a refused handshake; message is one of our own constant
 * strings, so the payload is written out whole (the ERROR codec is msg.c,
 * which builds on this file, not the other way round) */
static void
hello_refuse(int fd, const char *message)
{
	char s[160];
	int n = snprintf(s, sizeof(s), "{\"status\":400,\"error\":\"bad_request\","
	    "\"message\":\"%s\"}", message);

	if (n > 0 && (size_t)n < sizeof(s))
		(void)frame_write(fd, MSG_ERROR, s, (size_t)n);
}

static int
send_json(int fd, uint16_t type, json_t *o)
{
	char *s;
	int r;

	if (o == NULL)
		return -ENOMEM;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s == NULL)
		return -ENOMEM;
	r = frame_write_json(fd, type, s);
	free(s);
	return r;
}

int
proto_hello_client(int fd, enum proto_role me, enum proto_role *peer)
{
	static const char *const keys[] = { "role", "version", NULL };
	struct frame f = { 0 };
	json_t *o = NULL;
	int r, v;

	if (proto_role_str(me) == NULL)
		return -EINVAL;
	r = send_json(fd, MSG_HELLO, json_pack("{s:s,s:i,s:i}", "role", proto_role_str(me),
	    "min", PROTO_VERSION_MIN, "max", PROTO_VERSION));
	if (r < 0)
		return r;
	if ((r = frame_read(fd, &f)) < 0)
		return r;
	r = -EPROTO;
	/* an ERROR here is the server refusing every version we offered */
	if (f.type != MSG_HELLO)
		goto out;
	if ((o = json_strict(&f, keys)) == NULL)
		goto out;
	if (!json_is_string(json_object_get(o, "role")) ||
	    role_parse(json_string_value(json_object_get(o, "role")), peer) < 0)
		goto out;
	/* the server must pick a version inside the range we offered */
	if (json_small_int(o, "version", &v) < 0 ||
	    v < PROTO_VERSION_MIN || v > PROTO_VERSION)
		goto out;
	r = v;
out:
	json_decref(o);
	frame_free(&f);
	return r;
}

int
proto_hello_server(int fd, enum proto_role me, enum proto_role *peer)
{
	static const char *const keys[] = { "role", "min", "max", NULL };
	struct frame f = { 0 };
	json_t *o = NULL;
	int r, lo, hi, v;

	if (proto_role_str(me) == NULL)
		return -EINVAL;
	if ((r = frame_read(fd, &f)) < 0)
		return r;
	r = -EPROTO;
	if (f.type != MSG_HELLO) {
		hello_refuse(fd, "expected HELLO");
		goto out;
	}
	if ((o = json_strict(&f, keys)) == NULL ||
	    !json_is_string(json_object_get(o, "role")) ||
	    role_parse(json_string_value(json_object_get(o, "role")), peer) < 0 ||
	    json_small_int(o, "min", &lo) < 0 || json_small_int(o, "max", &hi) < 0 ||
	    lo > hi) {
		hello_refuse(fd, "malformed HELLO");
		goto out;
	}
	/* highest version both sides speak */
	v = hi < PROTO_VERSION ? hi : PROTO_VERSION;
	if (v < lo || v < PROTO_VERSION_MIN) {
		hello_refuse(fd, "no common protocol version");
		goto out;
	}
	r = send_json(fd, MSG_HELLO, json_pack("{s:s,s:i}", "role", proto_role_str(me),
	    "version", v));
	if (r == 0)
		r = v;
out:
	json_decref(o);
	frame_free(&f);
	return r;
}

/* ---- operations ---- */

static const struct {
	const char *name;
	uint32_t access;
} ops[OP__MAX] = {
	[OP_EXEC] = { "exec", ACC_EXEC },
	[OP_FS_READ] = { "fs.read", ACC_FS_R },
	[OP_FS_WRITE] = { "fs.write", ACC_FS_W },
	[OP_FS_LIST] = { "fs.list", ACC_FS_R },
	[OP_FS_STAT] = { "fs.stat", ACC_FS_R },
	[OP_FS_MKDIR] = { "fs.mkdir", ACC_FS_W },
	[OP_FS_REMOVE] = { "fs.remove", ACC_FS_W },
	[OP_FS_RENAME] = { "fs.rename", ACC_FS_W },
	[OP_PROC_START] = { "proc.start", ACC_EXEC },
	[OP_PROC_ATTACH] = { "proc.attach", ACC_EXEC },
	[OP_PROC_LIST] = { "proc.list", ACC_EXEC },
	[OP_PROC_SIGNAL] = { "proc.signal", ACC_EXEC },
	[OP_PROC_STDIN] = { "proc.stdin", ACC_EXEC },
	[OP_PROC_RESIZE] = { "proc.resize", ACC_EXEC },
	[OP_FS_WATCH] = { "fs.watch", ACC_WATCH },
};

int
op_parse(const char *name, enum op_kind *op)
{
	if (name == NULL)
		return -EINVAL;
	for (int i = 1; i < OP__MAX; i++)
		if (strcmp(name, ops[i].name) == 0) {
			*op = (enum op_kind)i;
			return 0;
		}
	return -EINVAL;
}

const char *
op_name(enum op_kind op)
{
	if ((int)op <= 0 || op >= OP__MAX)
		return NULL;
	return ops[op].name;
}

uint32_t
op_access(enum op_kind op)
{
	/* an unknown operation needs an access bit no capability carries,
	 * so it can never be admitted by accident */
	if ((int)op <= 0 || op >= OP__MAX)
		return ~ACC_ALL;
	return ops[op].access;
}

bool
op_reusable(enum op_kind op)
{
	switch (op) {
	case OP_FS_READ: case OP_FS_STAT: case OP_FS_LIST: case OP_FS_MKDIR:
	case OP_FS_REMOVE: case OP_FS_RENAME: case OP_EXEC:
		return true;
	default:
		return false;
	}
}
