/* Codec of the HTTP process <-> signer messages (sigmsg.h). The signer
 * assumes the HTTP process may be compromised: every request is decoded
 * strictly, and a capability's claims must be exactly what the issuer
 * would have written. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "paseto.h"
#include "sigmsg.h"

static void
put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void
put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)(v >> 16));
	put16(p + 2, (uint16_t)v);
}

static void
put64(uint8_t *p, uint64_t v)
{
	put32(p, (uint32_t)(v >> 32));
	put32(p + 4, (uint32_t)v);
}

static uint16_t
get16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static uint32_t
get32(const uint8_t *p)
{
	return (uint32_t)get16(p) << 16 | get16(p + 2);
}

static uint64_t
get64(const uint8_t *p)
{
	return (uint64_t)get32(p) << 32 | get32(p + 4);
}

/* the largest payload of each type */
static size_t
type_max(uint16_t type)
{
	switch (type) {
	case SIG_HELLO:
	case SIG_KEY:         return 32;
	case SIG_SIGN_CAP:    return 2 + SPACE_KID_MAX + 2 + SPACE_CLAIMS_MAX;
	case SIG_SIGN_BUNDLE: return 8 + 2 + SPACE_BUNDLE_KEYS_MAX * SIGMSG_BUNDLE_REC;
	case SIG_NEW_KEY:     return 0;
	case SIG_TOKEN:       return SPACE_BUNDLE_TOKEN_MAX;
	case SIG_ERROR:       return 4 + SIGMSG_REASON_MAX;
	}
	return 0;
}

int
sigmsg_encode(uint16_t type, const void *payload, size_t plen, uint8_t **out, size_t *len)
{
	uint8_t *b;

	*out = NULL;
	if (type == 0 || type >= SIG__MAX)
		return -EPROTO;
	if (plen > type_max(type))
		return -EMSGSIZE;
	if ((b = malloc(SIGMSG_HDR_LEN + plen + 1)) == NULL)
		return -ENOMEM;
	put16(b, SIGMSG_MAGIC);
	b[2] = SIGMSG_VERSION;
	b[3] = 0;
	put16(b + 4, type);
	put16(b + 6, 0);
	put32(b + 8, (uint32_t)plen);
	if (plen)
		memcpy(b + SIGMSG_HDR_LEN, payload, plen);
	*out = b;
	*len = SIGMSG_HDR_LEN + plen;
	return 0;
}

int
sigmsg_encode_sign_cap(const char *kid, const char *claims, uint8_t **out, size_t *len)
{
	size_t kl = strlen(kid), cl = strlen(claims);
	uint8_t p[2 + SPACE_KID_MAX + 2 + SPACE_CLAIMS_MAX];

	if (kl > SPACE_KID_MAX || cl > SPACE_CLAIMS_MAX)
		return -EMSGSIZE;
	put16(p, (uint16_t)kl);
	memcpy(p + 2, kid, kl);
	put16(p + 2 + kl, (uint16_t)cl);
	memcpy(p + 4 + kl, claims, cl);
	return sigmsg_encode(SIG_SIGN_CAP, p, 4 + kl + cl, out, len);
}

int
sigmsg_encode_sign_bundle(const struct key_bundle *b, uint8_t **out, size_t *len)
{
	uint8_t p[8 + 2 + SPACE_BUNDLE_KEYS_MAX * SIGMSG_BUNDLE_REC], *q;
	size_t i;

	if (b->n > SPACE_BUNDLE_KEYS_MAX)
		return -EMSGSIZE;
	put64(p, b->version);
	put16(p + 8, (uint16_t)b->n);
	for (i = 0, q = p + 10; i < b->n; i++, q += SIGMSG_BUNDLE_REC) {
		memcpy(q, b->keys[i].pk, 32);
		put64(q + 32, (uint64_t)b->keys[i].not_before);
		put64(q + 40, (uint64_t)b->keys[i].not_after);
	}
	return sigmsg_encode(SIG_SIGN_BUNDLE, p, (size_t)(q - p), out, len);
}

int
sigmsg_encode_error(int err, const char *reason, uint8_t **out, size_t *len)
{
	uint8_t p[4 + SIGMSG_REASON_MAX];
	size_t rl = reason ? strlen(reason) : 0;

	if (rl > SIGMSG_REASON_MAX)
		rl = SIGMSG_REASON_MAX;
	put32(p, (uint32_t)(err < 0 ? -err : err));
	if (rl)
		memcpy(p + 4, reason, rl);
	return sigmsg_encode(SIG_ERROR, p, 4 + rl, out, len);
}

/* header: type and payload, checked against the datagram's length */
static int
decode_hdr(const uint8_t *buf, size_t n, uint16_t *type, const uint8_t **pl, size_t *plen)
{
	uint32_t len;

	if (n < SIGMSG_HDR_LEN)
		return -EPROTO;
	if (get16(buf) != SIGMSG_MAGIC || buf[2] != SIGMSG_VERSION || buf[3] != 0 ||
	    get16(buf + 6) != 0)
		return -EPROTO;
	*type = get16(buf + 4);
	if (*type == 0 || *type >= SIG__MAX)
		return -EPROTO;
	len = get32(buf + 8);
	if (len > type_max(*type))
		return -EMSGSIZE;
	if ((size_t)len != n - SIGMSG_HDR_LEN)
		return -EMSGSIZE;       /* leftover or missing bytes */
	*pl = buf + SIGMSG_HDR_LEN;
	*plen = len;
	return 0;
}

static bool
printable(const uint8_t *p, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (p[i] < 0x20 || p[i] > 0x7e)
			return false;
	return true;
}

static int
decode_sign_cap(const uint8_t *p, size_t n, struct sig_request *out, const char **why)
{
	size_t kl, cl;

	*why = "malformed SIGN_CAP";
	if (n < 2)
		return -EINVAL;
	kl = get16(p);
	if (kl != PASERK_K4_PID_LEN || n < 2 + kl + 2)
		return -EINVAL;
	if (!printable(p + 2, kl))
		return -EINVAL;
	memcpy(out->kid, p + 2, kl);
	out->kid[kl] = '\0';
	if (strncmp(out->kid, "k4.pid.", 7) != 0) {
		*why = "kid is not a k4.pid";
		return -EINVAL;
	}
	cl = get16(p + 2 + kl);
	if (cl == 0 || cl > SPACE_CLAIMS_MAX || 2 + kl + 2 + cl != n)
		return -EINVAL;
	/* the claims are decoded as any receiver will decode them; the JSON
	 * decoder refuses NUL and control bytes itself */
	if (claims_decode(p + 4 + kl, cl, &out->cap, why) < 0)
		return -EINVAL;
	/* the issuer's rules (capability.c) that receivers do not check:
	 * the audience of the purpose and the fixed lifetime */
	if ((out->cap.pur == PUR_CONTROL) != (out->cap.aud == AUD_NODE_API)) {
		*why = "audience does not match the purpose";
		return -EINVAL;
	}
	if (out->cap.exp != out->cap.iat + SPACE_CAP_LIFETIME) {
		*why = "exp is not iat + the capability lifetime";
		return -EINVAL;
	}
	if (strlen(out->cap.jti) != 22) {
		*why = "jti is not 128 bits";
		return -EINVAL;
	}
	*why = NULL;
	return 0;
}

static int
decode_sign_bundle(const uint8_t *p, size_t n, struct sig_request *out, const char **why)
{
	struct key_bundle *b = &out->bundle;
	size_t i, j;

	*why = "malformed SIGN_BUNDLE";
	if (n < 10)
		return -EINVAL;
	b->version = get64(p);
	b->n = get16(p + 8);
	if (b->version == 0 || b->version > INT64_MAX) {
		*why = "bundle version out of range";
		return -EINVAL;
	}
	if (b->n == 0 || b->n > SPACE_BUNDLE_KEYS_MAX) {
		*why = "bundle key count out of range";
		return -EINVAL;
	}
	if (n != 10 + b->n * SIGMSG_BUNDLE_REC)
		return -EINVAL;
	for (i = 0; i < b->n; i++) {
		const uint8_t *q = p + 10 + i * SIGMSG_BUNDLE_REC;
		struct bundle_key *k = &b->keys[i];

		memcpy(k->pk, q, 32);
		k->not_before = (int64_t)get64(q + 32);
		k->not_after = (int64_t)get64(q + 40);
		if (k->not_before <= 0 || k->not_after < 0 ||
		    (k->not_after != 0 && k->not_after <= k->not_before)) {
			*why = "bundle key validity out of range";
			return -EINVAL;
		}
		if (paserk_k4_pid(k->pk, k->kid) < 0)
			return -EINVAL;
		for (j = 0; j < i; j++)
			if (memcmp(b->keys[j].pk, k->pk, 32) == 0) {
				*why = "duplicate key in bundle";
				return -EINVAL;
			}
	}
	*why = NULL;
	return 0;
}

int
sigmsg_decode_request(const uint8_t *buf, size_t n, struct sig_request *out, const char **why)
{
	const uint8_t *p;
	size_t plen;
	int rc;

	memset(out, 0, sizeof(*out));
	*why = "malformed frame";
	if ((rc = decode_hdr(buf, n, &out->type, &p, &plen)) < 0)
		return rc;
	switch (out->type) {
	case SIG_SIGN_CAP:
		return decode_sign_cap(p, plen, out, why);
	case SIG_SIGN_BUNDLE:
		return decode_sign_bundle(p, plen, out, why);
	case SIG_NEW_KEY:
		*why = NULL;
		return 0;       /* the header already held its length to 0 */
	}
	*why = "not a request type";
	return -EPROTO;
}

int
sigmsg_decode_reply(const uint8_t *buf, size_t n, uint16_t want, struct sig_reply *out,
    const char **why)
{
	const uint8_t *p;
	size_t plen;
	int rc;

	memset(out, 0, sizeof(*out));
	*why = "malformed frame";
	if ((rc = decode_hdr(buf, n, &out->type, &p, &plen)) < 0)
		return rc;
	if (out->type != want && out->type != SIG_ERROR) {
		*why = "unexpected reply type";
		return -EPROTO;
	}
	*why = "malformed reply";
	switch (out->type) {
	case SIG_HELLO:
	case SIG_KEY:
		if (plen != 32)
			return -EINVAL;
		memcpy(out->pk, p, 32);
		break;
	case SIG_TOKEN:
		if (plen == 0 || !printable(p, plen))
			return -EINVAL;
		if ((out->token = malloc(plen + 1)) == NULL)
			return -ENOMEM;
		memcpy(out->token, p, plen);
		out->token[plen] = '\0';
		break;
	case SIG_ERROR:
		if (plen < 4 || !printable(p + 4, plen - 4))
			return -EINVAL;
		out->err = (int)get32(p);
		if (out->err <= 0 || out->err > 4095)
			return -EINVAL;
		memcpy(out->reason, p + 4, plen - 4);
		out->reason[plen - 4] = '\0';
		break;
	default:
		return -EPROTO;
	}
	*why = NULL;
	return 0;
}

void
sig_reply_clear(struct sig_reply *r)
{
	free(r->token);
	r->token = NULL;
}
