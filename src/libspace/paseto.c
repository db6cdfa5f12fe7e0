/* PASETO v4.public and PASERK k4.public / k4.pid.
 *
 * A v4.public token is "v4.public." b64url(m || sig) ["." b64url(f)], where
 * sig is Ed25519 over PAE("v4.public.", m, f, i) and i is the implicit
 * assertion, never transmitted. We use it for domain separation: a key
 * bundle can never be accepted as a capability, or the reverse. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "limits.h"
#include "paseto.h"
#include "util.h"

#define HDR_LEN     (sizeof(PASETO_V4_PUBLIC_HDR) - 1)
#define SIG_LEN     crypto_sign_BYTES
#define K4_PUB_HDR  "k4.public."
#define K4_PID_HDR  "k4.pid."
#define K4_PID_HASH 33      /* BLAKE2b-264 */

int
paseto_pae(const void *const *pieces, const size_t *lens, size_t n,
    uint8_t **out, size_t *out_len)
{
	uint8_t *buf, *p;
	size_t total = 8, i;
	int k;

	*out = NULL;
	*out_len = 0;
	for (i = 0; i < n; i++) {
		if (lens[i] > SIZE_MAX - total - 8)
			return -E2BIG;
		total += 8 + lens[i];
	}
	buf = malloc(total);
	if (buf == NULL)
		return -ENOMEM;
	p = buf;
	/* LE64 of the count and of every length; the spec clears the top bit so
	 * that languages without unsigned 64-bit integers agree */
	for (k = 0; k < 8; k++)
		*p++ = (uint8_t)(((uint64_t)n >> (8 * k)) & (k == 7 ? 0x7f : 0xff));
	for (i = 0; i < n; i++) {
		for (k = 0; k < 8; k++)
			*p++ = (uint8_t)(((uint64_t)lens[i] >> (8 * k)) & (k == 7 ? 0x7f : 0xff));
		if (lens[i])
			memcpy(p, pieces[i], lens[i]);
		p += lens[i];
	}
	*out = buf;
	*out_len = total;
	return 0;
}

/* PAE("v4.public.", m, f, i) */
static int
pae4(const void *m, size_t mlen, const void *f, size_t flen, const char *implicit,
    uint8_t **out, size_t *out_len)
{
	const void *pieces[4] = { PASETO_V4_PUBLIC_HDR, m, f, implicit ? implicit : "" };
	size_t lens[4] = { HDR_LEN, mlen, flen, implicit ? strlen(implicit) : 0 };

	return paseto_pae(pieces, lens, 4, out, out_len);
}

int
paseto_v4_sign(const uint8_t sk[64], const void *msg, size_t mlen,
    const char *footer, const char *implicit, char **token_out)
{
	uint8_t *body = NULL, *pae = NULL;
	size_t flen = footer ? strlen(footer) : 0, pae_len, blen, tlen, off;
	char *tok = NULL;
	ssize_t n;
	int err;

	*token_out = NULL;
	if (sodium_init() < 0)
		return -EIO;
	if (mlen > SIZE_MAX / 2 - SIG_LEN || flen > SIZE_MAX / 2)
		return -E2BIG;
	body = malloc(mlen + SIG_LEN);
	if (body == NULL)
		return -ENOMEM;
	if (mlen)
		memcpy(body, msg, mlen);
	err = pae4(msg, mlen, footer, flen, implicit, &pae, &pae_len);
	if (err)
		goto out;
	/* the caller's secret key is used in place, never copied */
	if (crypto_sign_detached(body + mlen, NULL, pae, pae_len, sk) != 0) {
		err = -EINVAL;
		goto out;
	}
	blen = b64url_encoded_len(mlen + SIG_LEN);
	tlen = HDR_LEN + blen + (flen ? 1 + b64url_encoded_len(flen) : 0);
	tok = malloc(tlen + 1);
	if (tok == NULL) {
		err = -ENOMEM;
		goto out;
	}
	memcpy(tok, PASETO_V4_PUBLIC_HDR, HDR_LEN);
	off = HDR_LEN;
	n = b64url_encode(body, mlen + SIG_LEN, tok + off, tlen + 1 - off);
	if (n < 0) {
		err = (int)n;
		goto out;
	}
	off += (size_t)n;
	/* an empty footer is omitted, never written as a trailing "." */
	if (flen) {
		tok[off++] = '.';
		n = b64url_encode(footer, flen, tok + off, tlen + 1 - off);
		if (n < 0) {
			err = (int)n;
			goto out;
		}
	}
	*token_out = tok;
	tok = NULL;
out:
	free(tok);
	free(body);
	free(pae);
	return err;
}

/* Where the parts of a v4.public token lie: checked, not yet decoded. */
struct shape {
	const char *body;       /* base64url of m || sig */
	size_t      btxt;
	const char *foot;       /* base64url of the footer, NULL if none */
	size_t      ftxt;
};

/* Structural checks shared by verify and peek: size, header, part count,
 * no empty footer. Decoding (strict base64url, minimum length) follows. */
static int
token_shape(const char *token, size_t len, size_t maxlen, struct shape *sh)
{
	const char *b, *dot, *q, *end = token + len;
	size_t dots = 0;

	memset(sh, 0, sizeof(*sh));
	if (token == NULL || len == 0)
		return -EINVAL;
	/* bound before anything else: the size limit protects every step */
	if (len > maxlen)
		return -E2BIG;
	/* memchr, not a byte loop: this runs over every cold token */
	for (q = memchr(token, '.', len); q != NULL && dots <= 3;
	    q = memchr(q + 1, '.', (size_t)(end - q - 1)))
		dots++;
	/* "v4" "public" payload [footer]: a fifth part is not a PASETO token */
	if (dots < 2 || dots > 3)
		return -EINVAL;
	if (len < HDR_LEN || memcmp(token, PASETO_V4_PUBLIC_HDR, HDR_LEN) != 0)
		return -EPROTO;         /* v4.local, v3.*, ...: never accepted here */
	b = token + HDR_LEN;
	dot = memchr(b, '.', (size_t)(end - b));
	if (dot == NULL)
		dot = end;
	if (dot != end && dot + 1 == end)
		return -EINVAL;         /* empty footer must be omitted, not ".": one spelling */
	sh->body = b;
	sh->btxt = (size_t)(dot - b);
	if (dot != end) {
		sh->foot = dot + 1;
		sh->ftxt = (size_t)(end - sh->foot);
	}
	return 0;
}

/* body m || sig into out (room for b64url_decoded_max(btxt)); its length */
static int
decode_body(const struct shape *sh, uint8_t *out, size_t *blen)
{
	ssize_t n;

	n = b64url_decode(sh->body, sh->btxt, out, b64url_decoded_max(sh->btxt));
	if (n < 0)
		return n == -ENOMEM ? -ENOMEM : -EINVAL;
	/* shorter than a signature: there is nothing to verify */
	if ((size_t)n < SIG_LEN)
		return -EINVAL;
	*blen = (size_t)n;
	return 0;
}

/* footer into out (room for SPACE_FOOTER_MAX); its length */
static int
decode_footer(const struct shape *sh, char *out, size_t *flen)
{
	ssize_t n;

	*flen = 0;
	if (sh->foot == NULL)
		return 0;
	if (b64url_decoded_max(sh->ftxt) > SPACE_FOOTER_MAX)
		return -E2BIG;
	n = b64url_decode(sh->foot, sh->ftxt, out, SPACE_FOOTER_MAX);
	if (n < 0)
		return -EINVAL;
	/* the footer is handed out as a C string: an embedded NUL would let
	 * two different footers look alike to the caller */
	if (memchr(out, '\0', (size_t)n) != NULL)
		return -EINVAL;
	*flen = (size_t)n;
	return 0;
}

static uint8_t *
put_le64(uint8_t *p, size_t v)
{
	int k;

	/* as in paseto_pae(): the top bit cleared */
	for (k = 0; k < 8; k++)
		*p++ = (uint8_t)(((uint64_t)v >> (8 * k)) & (k == 7 ? 0x7f : 0xff));
	return p;
}

/*
 * The PAE is built in one buffer sized once, and the body is decoded
 * straight into its place in it:
 *
 *   LE64(4) LE64(10) "v4.public." LE64(mlen) m LE64(flen) f LE64(ilen) i
 *
 * The signature, decoded right after m, is moved out before the footer's
 * length overwrites it. On success the same buffer, m moved to its start,
 * becomes *msg_out.
 */
int
paseto_v4_verify(const uint8_t pk[32], const char *token, size_t len,
    size_t maxlen, const char *implicit, uint8_t **msg_out, size_t *mlen_out,
    char **footer_out)
{
	struct shape sh;
	uint8_t sig[SIG_LEN], *buf = NULL, *p, *m;
	char foot[SPACE_FOOTER_MAX + 1], *fout = NULL;
	size_t ilen = implicit ? strlen(implicit) : 0, bmax, blen, mlen, flen = 0, total;
	int err;

	*msg_out = NULL;
	if (mlen_out)
		*mlen_out = 0;
	if (footer_out)
		*footer_out = NULL;
	if (sodium_init() < 0)
		return -EIO;
	err = token_shape(token, len, maxlen, &sh);
	if (err)
		return err;
	bmax = b64url_decoded_max(sh.btxt);
	/* every length below is bounded by len and ilen, both sizes of objects
	 * in memory; checked anyway since maxlen is the caller's */
	if (bmax > SIZE_MAX / 2 || ilen > SIZE_MAX / 4)
		return -E2BIG;
	/* room for the footer is taken even before its text is checked: at
	 * most SPACE_FOOTER_MAX, and the body is decoded (and refused) first */
	total = 8 + (8 + HDR_LEN) + 8 + bmax + 8 + SPACE_FOOTER_MAX + 8 + ilen;
	buf = malloc(total);
	if (buf == NULL)
		return -ENOMEM;
	p = put_le64(buf, 4);
	p = put_le64(p, HDR_LEN);
	memcpy(p, PASETO_V4_PUBLIC_HDR, HDR_LEN);
	p += HDR_LEN;
	m = p + 8;
	err = decode_body(&sh, m, &blen);
	if (err)
		goto out;
	mlen = blen - SIG_LEN;
	memcpy(sig, m + mlen, SIG_LEN);
	err = decode_footer(&sh, foot, &flen);
	if (err)
		goto out;
	foot[flen] = '\0';
	p = put_le64(p, mlen);
	p += mlen;
	p = put_le64(p, flen);
	if (flen)
		memcpy(p, foot, flen);
	p += flen;
	p = put_le64(p, ilen);
	if (ilen)
		memcpy(p, implicit, ilen);
	p += ilen;
	/* the footer and the implicit assertion are inside the signed PAE, so a
	 * changed footer or a token made for another purpose fails here */
	if (crypto_sign_verify_detached(sig, buf, (size_t)(p - buf), pk) != 0) {
		err = -EBADMSG;
		goto out;
	}
	if (footer_out) {
		fout = malloc(flen + 1);
		if (fout == NULL) {
			err = -ENOMEM;
			goto out;
		}
		memcpy(fout, foot, flen + 1);
	}
	/* m is at offset 34 of a buffer at least 34 + mlen + 24 long */
	memmove(buf, m, mlen);
	buf[mlen] = '\0';
	*msg_out = buf;
	buf = NULL;
	if (mlen_out)
		*mlen_out = mlen;
	if (footer_out) {
		*footer_out = fout;
		fout = NULL;
	}
out:
	free(fout);
	free(buf);
	return err;
}

int
paseto_v4_peek(const char *token, size_t len, size_t maxlen,
    char footer[SPACE_FOOTER_MAX + 1], size_t *footer_len)
{
	struct shape sh;
	uint8_t *body = NULL;
	size_t bmax, blen, flen = 0;
	int err;

	footer[0] = '\0';
	if (footer_len)
		*footer_len = 0;
	err = token_shape(token, len, maxlen, &sh);
	if (err)
		return err;
	/* the body is decoded too, to apply the same grammar as verify */
	bmax = b64url_decoded_max(sh.btxt);
	body = malloc(bmax + 1);
	if (body == NULL)
		return -ENOMEM;
	err = decode_body(&sh, body, &blen);
	if (err == 0)
		err = decode_footer(&sh, footer, &flen);
	sodium_memzero(body, bmax + 1);
	free(body);
	if (err) {
		sodium_memzero(footer, SPACE_FOOTER_MAX + 1);
		footer[0] = '\0';
		return err;
	}
	footer[flen] = '\0';
	if (footer_len)
		*footer_len = flen;
	return 0;
}

int
paseto_v4_peek_footer(const char *token, size_t len, char **footer_out)
{
	char foot[SPACE_FOOTER_MAX + 1];
	int err;

	*footer_out = NULL;
	if ((err = paseto_v4_peek(token, len, SPACE_BUNDLE_TOKEN_MAX, foot, NULL)) != 0)
		return err;
	if ((*footer_out = strdup(foot)) == NULL)
		return -ENOMEM;
	return 0;
}

const char *
paseto_strerror(int err)
{
	switch (err) {
	case 0:         return "ok";
	case -EINVAL:   return "malformed token";
	case -EPROTO:   return "not a v4.public token";
	case -EBADMSG:  return "bad signature";
	case -E2BIG:    return "token too large";
	case -ENOMEM:   return "out of memory";
	case -EIO:      return "crypto library unavailable";
	default:        return "token refused";
	}
}

/* ---- PASERK ---- */

int
paserk_k4_public_encode(const uint8_t pk[32], char out[PASERK_K4_PUBLIC_LEN + 1])
{
	ssize_t n;

	memcpy(out, K4_PUB_HDR, sizeof(K4_PUB_HDR) - 1);
	n = b64url_encode(pk, 32, out + sizeof(K4_PUB_HDR) - 1,
	    PASERK_K4_PUBLIC_LEN + 1 - (sizeof(K4_PUB_HDR) - 1));
	return n < 0 ? (int)n : 0;
}

int
paserk_k4_public_decode(const char *s, uint8_t pk[32])
{
	uint8_t buf[33];
	ssize_t n;

	/* exact length and prefix: a k3 key, a k4.secret or a truncated key is
	 * refused before decoding */
	if (s == NULL || strlen(s) != PASERK_K4_PUBLIC_LEN ||
	    strncmp(s, K4_PUB_HDR, sizeof(K4_PUB_HDR) - 1) != 0)
		return -EINVAL;
	n = b64url_decode(s + sizeof(K4_PUB_HDR) - 1, PASERK_K4_PUBLIC_LEN - (sizeof(K4_PUB_HDR) - 1),
	    buf, sizeof(buf));
	if (n != 32)
		return -EINVAL;
	memcpy(pk, buf, 32);
	return 0;
}

int
paserk_k4_pid(const uint8_t pk[32], char out[PASERK_K4_PID_LEN + 1])
{
	char pub[PASERK_K4_PUBLIC_LEN + 1];
	uint8_t h[K4_PID_HASH];
	crypto_generichash_state st;
	ssize_t n;
	int err;

	if (sodium_init() < 0)
		return -EIO;
	err = paserk_k4_public_encode(pk, pub);
	if (err)
		return err;
	/* id = "k4.pid." || b64url(BLAKE2b-264("k4.pid." || "k4.public." || b64url(pk))) */
	if (crypto_generichash_init(&st, NULL, 0, sizeof(h)) != 0 ||
	    crypto_generichash_update(&st, (const uint8_t *)K4_PID_HDR, sizeof(K4_PID_HDR) - 1) != 0 ||
	    crypto_generichash_update(&st, (const uint8_t *)pub, PASERK_K4_PUBLIC_LEN) != 0 ||
	    crypto_generichash_final(&st, h, sizeof(h)) != 0)
		return -EIO;
	memcpy(out, K4_PID_HDR, sizeof(K4_PID_HDR) - 1);
	n = b64url_encode(h, sizeof(h), out + sizeof(K4_PID_HDR) - 1,
	    PASERK_K4_PID_LEN + 1 - (sizeof(K4_PID_HDR) - 1));
	return n < 0 ? (int)n : 0;
}

int
public_key_parse(const char *s, uint8_t pk[32])
{
	uint8_t buf[32];

	if (s == NULL)
		return -EINVAL;
	if (strlen(s) == 64) {
		if (hex_decode(s, 64, buf, sizeof(buf)) != 32)
			return -EINVAL;
		memcpy(pk, buf, 32);
		return 0;
	}
	return paserk_k4_public_decode(s, pk);
}
