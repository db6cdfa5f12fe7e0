/* The codec of sbx-manager's control-client channel (ctlmsg.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctlmsg.h"

struct wr {
	uint8_t *p;
	size_t n, cap;
	bool over;
};

static void
put(struct wr *w, const void *s, size_t n)
{
	if (w->over || n > w->cap - w->n) {
		w->over = true;
		return;
	}
	memcpy(w->p + w->n, s, n);
	w->n += n;
}

static void
put_be(struct wr *w, uint64_t v, int bytes)
{
	uint8_t b[8];

	for (int i = 0; i < bytes; i++)
		b[i] = (uint8_t)(v >> (8 * (bytes - 1 - i)));
	put(w, b, (size_t)bytes);
}

static void
put_str(struct wr *w, const char *s, size_t n)
{
	put_be(w, n, 4);
	put(w, s, n);
}

struct rd {
	const uint8_t *p;
	size_t n, off;
	bool bad;
};

static uint64_t
get_be(struct rd *r, int bytes)
{
	uint64_t v = 0;

	if (r->bad || (size_t)bytes > r->n - r->off) {
		r->bad = true;
		return 0;
	}
	for (int i = 0; i < bytes; i++)
		v = v << 8 | r->p[r->off++];
	return v;
}

/* a string of at most max bytes; NULL when absent or over */
static const uint8_t *
get_str(struct rd *r, size_t max, size_t *len)
{
	uint64_t l = get_be(r, 4);
	const uint8_t *s;

	if (r->bad || l > max || l > r->n - r->off) {
		r->bad = true;
		return NULL;
	}
	s = r->p + r->off;
	r->off += (size_t)l;
	*len = (size_t)l;
	return s;
}

static bool
hex_digest(const char *s, size_t n)
{
	size_t i;

	if (n != CTL_DIGEST_HEX)
		return false;
	for (i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* a request path: "/" then printable ASCII without space */
static bool
path_ok(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > CTL_PATH_MAX || s[0] != '/')
		return false;
	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f)
			return false;
	return true;
}

/* a body: any byte but NUL (the parent builds it as JSON text) */
static bool
body_ok(const char *s, size_t n)
{
	return n <= CTL_BODY_MAX && memchr(s, '\0', n) == NULL;
}

/* a signed bundle as the control plane spells it: printable ASCII */
static bool
bundle_ok(const char *s, size_t n)
{
	size_t i;

	if (n > SPACE_BUNDLE_TOKEN_MAX)
		return false;
	for (i = 0; i < n; i++)
		if (s[i] <= 0x20 || s[i] >= 0x7f)
			return false;
	return true;
}

bool
ctlmsg_is_request(uint8_t type)
{
	return (type >= CTL_POST && type <= CTL_TEMPLATE_GET) || type == CTL_SNAPSHOT_GET ||
	    type == CTL_SNAPSHOT_PUT || type == CTL_SNAPSHOT_STREAM;
}

bool
ctlmsg_takes_fd(uint8_t type)
{
	return type == CTL_TEMPLATE_GET || type == CTL_SNAPSHOT_GET || type == CTL_SNAPSHOT_PUT ||
	    type == CTL_SNAPSHOT_STREAM;
}

static bool
answer_head_ok(const struct ctlmsg *m)
{
	return m->result < CTL__RESULT_MAX && m->status <= 999;
}

int
ctlmsg_encode(const struct ctlmsg *m, uint8_t *buf, size_t cap)
{
	struct wr w = { .p = buf, .cap = cap };
	uint8_t rec[MSG_ASSIGNMENT_WIRE_LEN];
	size_t tl = m->text ? m->text_len : 0;
	const char *t = m->text ? m->text : "";
	uint32_t i;

	if (cap < CTL_HDR_LEN || m->type < CTL_POST || m->type >= CTL__MAX)
		return -EINVAL;
	put_be(&w, CTL_MAGIC, 2);
	put_be(&w, CTL_VERSION, 1);
	put_be(&w, m->type, 1);
	put_be(&w, m->id, 4);
	put_be(&w, 0, 4);               /* the length, set below */
	if (!ctlmsg_is_request(m->type) && m->type != CTL_ASSIGNMENT) {
		if (!answer_head_ok(m))
			return -EINVAL;
		put_be(&w, m->result, 1);
		put_be(&w, m->status, 2);
	}
	switch (m->type) {
	case CTL_POST:
		if (!path_ok(m->path, strlen(m->path)) || !body_ok(t, tl) || m->timeout_s < 1 ||
		    m->timeout_s > 600)
			return -EINVAL;
		put_str(&w, m->path, strlen(m->path));
		put_str(&w, t, tl);
		put_be(&w, m->timeout_s, 4);
		break;
	case CTL_KEYS_GET:
	case CTL_SNAPSHOT_STREAM:
		break;
	case CTL_ASSIGN_GET:
		if (m->wait_s > 120)
			return -EINVAL;
		put_be(&w, m->after, 8);
		put_be(&w, m->wait_s, 4);
		break;
	case CTL_ARCHIVES_POST:
		if (!body_ok(t, tl))
			return -EINVAL;
		put_str(&w, t, tl);
		break;
	case CTL_TEMPLATE_GET:
	case CTL_SNAPSHOT_GET:
	case CTL_SNAPSHOT_PUT:
		if (!hex_digest(m->digest, strlen(m->digest)))
			return -EINVAL;
		put(&w, m->digest, CTL_DIGEST_HEX);
		break;
	case CTL_DONE:
		break;
	case CTL_KEYS:
		if (!bundle_ok(t, tl) || (m->result != CTL_OK && tl != 0))
			return -EINVAL;
		put_str(&w, t, tl);
		break;
	case CTL_ASSIGNMENTS:
		if (m->count > SPACE_ASSIGNMENTS_MAX || (m->result != CTL_OK && m->count != 0))
			return -EINVAL;
		put_be(&w, m->revision, 8);
		put_be(&w, m->count, 4);
		break;
	case CTL_ASSIGNMENT:
		if (m->index >= SPACE_ASSIGNMENTS_MAX || msg_assignment_pack(&m->a, rec) != 0)
			return -EINVAL;
		put_be(&w, m->index, 4);
		put(&w, rec, sizeof(rec));
		break;
	case CTL_COLLECT:
		if (m->count > SPACE_ARCHIVE_BATCH_MAX || (m->result != CTL_OK && m->count != 0) ||
		    (m->count && m->digests == NULL))
			return -EINVAL;
		put_be(&w, m->count, 4);
		for (i = 0; i < m->count; i++) {
			if (!hex_digest(m->digests[i], strlen(m->digests[i])))
				return -EINVAL;
			put(&w, m->digests[i], CTL_DIGEST_HEX);
		}
		break;
	default:
		return -EINVAL;
	}
	if (w.over || w.n > CTL_MSG_MAX)
		return -EINVAL;
	for (i = 0; i < 4; i++)
		buf[8 + i] = (uint8_t)((w.n - CTL_HDR_LEN) >> (24 - 8 * i));
	return (int)w.n;
}

void
ctlmsg_clear(struct ctlmsg *m)
{
	free(m->text);
	free(m->digests);
	memset(m, 0, sizeof(*m));
}

static char *
copy_text(const uint8_t *s, size_t n)
{
	char *t = malloc(n + 1);

	if (t) {
		memcpy(t, s, n);
		t[n] = '\0';
	}
	return t;
}

int
ctlmsg_decode(const uint8_t *buf, size_t n, struct ctlmsg *m, const char **why)
{
	struct rd r = { .p = buf, .n = n };
	const uint8_t *s;
	size_t l;
	uint32_t i;
	uint64_t v;

	memset(m, 0, sizeof(*m));
	*why = "short header";
	if (n < CTL_HDR_LEN || n > CTL_MSG_MAX)
		goto bad;
	*why = "bad magic or version";
	if (get_be(&r, 2) != CTL_MAGIC || get_be(&r, 1) != CTL_VERSION)
		goto bad;
	m->type = (uint8_t)get_be(&r, 1);
	m->id = (uint32_t)get_be(&r, 4);
	*why = "length is not the packet's";
	if (get_be(&r, 4) != n - CTL_HDR_LEN)
		goto bad;
	*why = "unknown type";
	if (m->type < CTL_POST || m->type >= CTL__MAX)
		goto bad;
	if (!ctlmsg_is_request(m->type) && m->type != CTL_ASSIGNMENT) {
		m->result = (uint8_t)get_be(&r, 1);
		m->status = (uint16_t)(v = get_be(&r, 2));
		*why = "result or status out of range";
		if (r.bad || v > 999 || !answer_head_ok(m))
			goto bad;
	}
	*why = "malformed payload";
	switch (m->type) {
	case CTL_POST:
		if ((s = get_str(&r, CTL_PATH_MAX, &l)) == NULL || !path_ok((const char *)s, l))
			goto bad;
		memcpy(m->path, s, l);
		m->path[l] = '\0';
		if ((s = get_str(&r, CTL_BODY_MAX, &l)) == NULL || !body_ok((const char *)s, l))
			goto bad;
		if ((m->text = copy_text(s, l)) == NULL)
			goto nomem;
		m->text_len = l;
		m->timeout_s = (uint32_t)get_be(&r, 4);
		if (m->timeout_s < 1 || m->timeout_s > 600)
			goto bad;
		break;
	case CTL_KEYS_GET:
	case CTL_SNAPSHOT_STREAM:
	case CTL_DONE:
		break;
	case CTL_ASSIGN_GET:
		m->after = get_be(&r, 8);
		m->wait_s = (uint32_t)get_be(&r, 4);
		if (m->wait_s > 120)
			goto bad;
		break;
	case CTL_ARCHIVES_POST:
	case CTL_KEYS:
		if ((s = get_str(&r, m->type == CTL_KEYS ? SPACE_BUNDLE_TOKEN_MAX : CTL_BODY_MAX,
		    &l)) == NULL)
			goto bad;
		if (m->type == CTL_KEYS ? !bundle_ok((const char *)s, l) ||
		    (m->result != CTL_OK && l != 0) : !body_ok((const char *)s, l))
			goto bad;
		if ((m->text = copy_text(s, l)) == NULL)
			goto nomem;
		m->text_len = l;
		break;
	case CTL_TEMPLATE_GET:
	case CTL_SNAPSHOT_GET:
	case CTL_SNAPSHOT_PUT:
		if (n - r.off < CTL_DIGEST_HEX || !hex_digest((const char *)buf + r.off, CTL_DIGEST_HEX))
			goto bad;
		memcpy(m->digest, buf + r.off, CTL_DIGEST_HEX);
		r.off += CTL_DIGEST_HEX;
		break;
	case CTL_ASSIGNMENTS:
		m->revision = get_be(&r, 8);
		m->count = (uint32_t)get_be(&r, 4);
		if (m->count > SPACE_ASSIGNMENTS_MAX || (m->result != CTL_OK && m->count != 0))
			goto bad;
		break;
	case CTL_ASSIGNMENT:
		m->index = (uint32_t)get_be(&r, 4);
		if (r.bad || m->index >= SPACE_ASSIGNMENTS_MAX || n - r.off != MSG_ASSIGNMENT_WIRE_LEN ||
		    msg_assignment_unpack(buf + r.off, MSG_ASSIGNMENT_WIRE_LEN, &m->a, why) != 0)
			goto bad;
		r.off += MSG_ASSIGNMENT_WIRE_LEN;
		break;
	case CTL_COLLECT:
		m->count = (uint32_t)get_be(&r, 4);
		if (r.bad || m->count > SPACE_ARCHIVE_BATCH_MAX || (m->result != CTL_OK && m->count != 0) ||
		    (uint64_t)m->count * CTL_DIGEST_HEX != n - r.off)
			goto bad;
		if (m->count && (m->digests = calloc(m->count, sizeof(*m->digests))) == NULL)
			goto nomem;
		for (i = 0; i < m->count; i++) {
			if (!hex_digest((const char *)buf + r.off, CTL_DIGEST_HEX))
				goto bad;
			memcpy(m->digests[i], buf + r.off, CTL_DIGEST_HEX);
			r.off += CTL_DIGEST_HEX;
		}
		break;
	default:
		goto bad;
	}
	*why = "bytes left over";
	if (r.bad || r.off != n)
		goto bad;
	*why = NULL;
	return 0;
nomem:
	*why = "out of memory";
bad:
	ctlmsg_clear(m);
	return -EPROTO;
}

int
ctlmsg_send(int sock, const struct ctlmsg *m, int fd)
{
	uint8_t *buf;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct iovec iov;
	struct msghdr mh = { 0 };
	ssize_t w;
	int n;

	if ((fd >= 0) != ctlmsg_takes_fd(m->type))
		return -EINVAL;
	if ((buf = malloc(CTL_MSG_MAX)) == NULL)
		return -ENOMEM;
	if ((n = ctlmsg_encode(m, buf, CTL_MSG_MAX)) < 0) {
		free(buf);
		return n;
	}
	iov.iov_base = buf;
	iov.iov_len = (size_t)n;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		cm.h.cmsg_level = SOL_SOCKET;
		cm.h.cmsg_type = SCM_RIGHTS;
		cm.h.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.h), &fd, sizeof(int));
	}
	while ((w = sendmsg(sock, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
		;
	free(buf);
	if (w < 0)
		return -errno;
	return w == n ? 0 : -EIO;
}

int
ctlmsg_recv(int sock, struct ctlmsg *m, int *fd, const char **why)
{
	uint8_t *buf;
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * 4)];
	} cm;
	struct iovec iov;
	struct msghdr mh = { 0 };
	struct cmsghdr *c;
	int got = -1, r;
	ssize_t n;

	memset(m, 0, sizeof(*m));
	if (fd)
		*fd = -1;
	*why = NULL;
	/* one byte more than the largest message: a longer one is truncated,
	 * and MSG_TRUNC says so */
	if ((buf = malloc(CTL_MSG_MAX + 1)) == NULL)
		return -ENOMEM;
	iov.iov_base = buf;
	iov.iov_len = CTL_MSG_MAX + 1;
	mh.msg_iov = &iov;
	mh.msg_iovlen = 1;
	mh.msg_control = cm.b;
	mh.msg_controllen = sizeof(cm.b);
	while ((n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
		;
	if (n < 0) {
		r = -errno;
		free(buf);
		return r;
	}
	if (n == 0) {
		free(buf);
		return -ECONNRESET;
	}
	/* every descriptor that came is ours to close unless it is the one a
	 * TEMPLATE_GET, SNAPSHOT_GET or SNAPSHOT_PUT may carry */
	r = 0;
	for (c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		size_t k, nfd;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) {
			r = -EPROTO;
			continue;
		}
		nfd = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (k = 0; k < nfd; k++) {
			int x;

			memcpy(&x, CMSG_DATA(c) + k * sizeof(int), sizeof(int));
			if (got < 0 && r == 0)
				got = x;
			else {
				close(x);
				r = -EPROTO;
			}
		}
	}
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		*why = "truncated packet";
		r = -EPROTO;
	} else if (r != 0) {
		*why = "more than one descriptor";
	} else if ((r = ctlmsg_decode(buf, (size_t)n, m, why)) == 0 &&
	    (got >= 0) != ctlmsg_takes_fd(m->type)) {
		*why = got >= 0 ? "a descriptor on a message that takes none" :
		    "a request without its descriptor";
		ctlmsg_clear(m);
		r = -EPROTO;
	} else if (r == 0 && got >= 0 && fd == NULL) {
		*why = "a descriptor where none is taken";
		ctlmsg_clear(m);
		r = -EPROTO;
	}
	free(buf);
	if (r != 0) {
		if (got >= 0)
			close(got);
		return r;
	}
	if (fd)
		*fd = got;
	return 0;
}
