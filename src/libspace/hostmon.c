/* The monitor <-> serving process codec of spaced-host (hostmon.h). */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sodium.h>

#include "admit.h"
#include "hostmon.h"
#include "proto.h"
#include "util.h"

static size_t
payload_len(uint16_t type)
{
	switch (type) {
	case HM_READY: case HM_OOM_QUERY: return 0;
	case HM_OOM_COUNT: return 9;
	default: return (size_t)-1;     /* REFUSED, CLAIM: variable, checked by their decoders */
	}
}

/* "" or an id ([A-Za-z0-9_-]), at most max bytes */
static bool
field_ok(const char *s, size_t max)
{
	size_t l = strnlen(s, max + 1);

	return l <= max && (l == 0 || id_valid(s));
}

static bool
refusal_ok(const struct hm_refusal *r)
{
	return r->op >= 1 && r->op < OP__MAX &&
	    r->outcome >= ADMIT_DENY && r->outcome <= ADMIT_REFRESH_ROUTE &&
	    r->reason < R__COUNT &&
	    field_ok(r->target, SPACE_ID_MAX) && field_ok(r->cap.sandbox, SPACE_ID_MAX) &&
	    field_ok(r->cap.worker, SPACE_ID_MAX) &&
	    field_ok(r->cap.substrate, SPACE_SUBSTRATE_MAX) &&
	    field_ok(r->cap.resident, SPACE_ID_MAX) && field_ok(r->jti, SPACE_JTI_MAX);
}

/* a claim's identity: every id present and valid, counters from 1 */
static bool
claim_ok(const struct route_identity *id)
{
	return id->generation >= 1 && id->generation <= INT64_MAX && id->activation >= 1 &&
	    field_ok(id->sandbox, SPACE_ID_MAX) && id->sandbox[0] &&
	    field_ok(id->worker, SPACE_ID_MAX) && id->worker[0] &&
	    field_ok(id->substrate, SPACE_SUBSTRATE_MAX) && id->substrate[0] &&
	    field_ok(id->resident, SPACE_ID_MAX) && id->resident[0];
}


int
hm_encode(const struct hm_msg *m, uint8_t *buf, size_t cap)
{
	size_t n = HM_HDR_LEN;

	if (cap < HM_MSG_MAX || m->type < HM_READY || m->type >= HM__MAX)
		return -EINVAL;
	switch (m->type) {
	case HM_OOM_COUNT:
		if (m->u.oom.known > 1)
			return -EINVAL;
		buf[n++] = m->u.oom.known;
		be_store(buf + n, m->u.oom.n, 8);
		n += 8;
		break;
	case HM_REFUSED: {
		const struct hm_refusal *r = &m->u.ref;
		if (!refusal_ok(r))
			return -EINVAL;
		buf[n++] = r->op;
		buf[n++] = r->outcome;
		buf[n++] = r->reason;
		be_store(buf + n, r->cap.generation, 8);
		n += 8;
		be_store(buf + n, r->cap.activation, 4);
		n += 4;
		n += lstr_put(buf + n, r->target, 1);
		n += lstr_put(buf + n, r->cap.sandbox, 1);
		n += lstr_put(buf + n, r->cap.worker, 1);
		n += lstr_put(buf + n, r->cap.substrate, 1);
		n += lstr_put(buf + n, r->cap.resident, 1);
		n += lstr_put(buf + n, r->jti, 1);
		break;
	}
	case HM_CLAIM: {
		const struct route_identity *id = &m->u.claim.id;
		if (!claim_ok(id))
			return -EINVAL;
		be_store(buf + n, id->generation, 8);
		n += 8;
		be_store(buf + n, id->activation, 4);
		n += 4;
		memcpy(buf + n, m->u.claim.secret, GUEST_SECRET_LEN);
		n += GUEST_SECRET_LEN;
		n += lstr_put(buf + n, id->sandbox, 1);
		n += lstr_put(buf + n, id->worker, 1);
		n += lstr_put(buf + n, id->substrate, 1);
		n += lstr_put(buf + n, id->resident, 1);
		break;
	}
	default:
		break;
	}
	be_store(buf, HM_MAGIC, 2);
	be_store(buf + 2, m->type, 2);
	be_store(buf + 4, (uint32_t)(n - HM_HDR_LEN), 4);
	return (int)n;
}


int
hm_decode(const uint8_t *buf, size_t n, struct hm_msg *m)
{
	const uint8_t *p, *end;
	uint32_t len;
	size_t want;

	memset(m, 0, sizeof(*m));
	if (n < HM_HDR_LEN || be_load(buf, 2) != HM_MAGIC)
		return -EPROTO;
	m->type = (uint16_t)be_load(buf + 2, 2);
	len = (uint32_t)be_load(buf + 4, 4);
	if (m->type < HM_READY || m->type >= HM__MAX || len != n - HM_HDR_LEN)
		return -EPROTO;
	want = payload_len(m->type);
	if (want != (size_t)-1 && len != want)
		return -EPROTO;
	p = buf + HM_HDR_LEN;
	end = buf + n;
	switch (m->type) {
	case HM_OOM_COUNT:
		if (p[0] > 1)
			return -EPROTO;
		m->u.oom.known = p[0];
		m->u.oom.n = be_load(p + 1, 8);
		return 0;
	case HM_REFUSED: {
		struct hm_refusal *r = &m->u.ref;
		if (len < 3 + 8 + 4)
			return -EPROTO;
		r->op = p[0];
		r->outcome = p[1];
		r->reason = p[2];
		r->cap.generation = be_load(p + 3, 8);
		r->cap.activation = (uint32_t)be_load(p + 11, 4);
		p += 15;
		if (lstr_get(&p, end, 1, r->target, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, r->cap.sandbox, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, r->cap.worker, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, r->cap.substrate, SPACE_SUBSTRATE_MAX) < 0 ||
		    lstr_get(&p, end, 1, r->cap.resident, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, r->jti, SPACE_JTI_MAX) < 0 ||
		    p != end || !refusal_ok(r)) {
			memset(m, 0, sizeof(*m));
			return -EPROTO;
		}
		return 0;
	}
	case HM_CLAIM: {
		struct route_identity *id = &m->u.claim.id;
		if (len < 8 + 4 + GUEST_SECRET_LEN)
			return -EPROTO;
		id->generation = be_load(p, 8);
		id->activation = (uint32_t)be_load(p + 8, 4);
		memcpy(m->u.claim.secret, p + 12, GUEST_SECRET_LEN);
		p += 12 + GUEST_SECRET_LEN;
		if (lstr_get(&p, end, 1, id->sandbox, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, id->worker, SPACE_ID_MAX) < 0 ||
		    lstr_get(&p, end, 1, id->substrate, SPACE_SUBSTRATE_MAX) < 0 ||
		    lstr_get(&p, end, 1, id->resident, SPACE_ID_MAX) < 0 ||
		    p != end || !claim_ok(id)) {
			sodium_memzero(m, sizeof(*m));
			return -EPROTO;
		}
		return 0;
	}
	default:
		return 0;
	}
}

int
hm_send(int fd, const struct hm_msg *m)
{
	uint8_t buf[HM_MSG_MAX];
	int n = hm_encode(m, buf, sizeof(buf));
	ssize_t w;

	if (n < 0)
		return n;
	do
		w = send(fd, buf, (size_t)n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0)
		return -errno;
	return w == n ? 0 : -EIO;
}

int
hm_recv(int fd, struct hm_msg *m)
{
	uint8_t buf[HM_MSG_MAX];
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t r;

	do
		r = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (r < 0 && errno == EINTR);
	if (r < 0)
		return -errno;
	if (r == 0)
		return -ECONNRESET;
	/* a packet longer than any message, or one carrying descriptors */
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EPROTO;
	return hm_decode(buf, (size_t)r, m);
}

int
hm_send_claim(int fd, const struct hm_msg *m, int control, int sock)
{
	uint8_t buf[HM_MSG_MAX];
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
	    .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	int n, fds[2] = { control, sock };
	ssize_t w;

	if (m->type != HM_CLAIM || (n = hm_encode(m, buf, sizeof(buf))) < 0)
		return -EINVAL;
	iov = (struct iovec){ buf, (size_t)n };
	memset(cm.b, 0, sizeof(cm.b));
	c = CMSG_FIRSTHDR(&mh);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(fds));
	memcpy(CMSG_DATA(c), fds, sizeof(fds));
	do
		w = sendmsg(fd, &mh, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	sodium_memzero(buf, sizeof(buf));
	if (w < 0)
		return -errno;
	return w == n ? 0 : -EIO;
}

int
hm_recv_claim(int fd, struct hm_msg *m, int fds[2])
{
	uint8_t buf[HM_MSG_MAX];
	union {
		char b[CMSG_SPACE(2 * sizeof(int))];
		struct cmsghdr align;
	} cm;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
	    .msg_controllen = sizeof(cm.b) };
	struct cmsghdr *c;
	int got[2], ngot = 0, total = 0, r;
	ssize_t k;

	memset(m, 0, sizeof(*m));
	fds[0] = fds[1] = -1;
	do
		k = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
	while (k < 0 && errno == EINTR);
	if (k < 0)
		return -errno;
	if (k == 0)
		return -ECONNRESET;
	for (c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
		size_t nf;
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		nf = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (size_t i = 0; i < nf; i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			total++;
			if (ngot < 2)
				got[ngot++] = f;
			else
				close(f);
		}
	}
	r = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) || total != 2 ? -EPROTO :
	    hm_decode(buf, (size_t)k, m);
	sodium_memzero(buf, sizeof(buf));
	if (r == 0 && m->type != HM_CLAIM) {
		sodium_memzero(m, sizeof(*m));
		r = -EPROTO;
	}
	if (r != 0) {
		for (int i = 0; i < ngot; i++)
			close(got[i]);
		return r;
	}
	fds[0] = got[0];
	fds[1] = got[1];
	return 0;
}
