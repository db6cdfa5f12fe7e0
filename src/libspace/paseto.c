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

/* The parsed, not yet verified, shape of a v4.public token. */
struct parsed {
	uint8_t *body;          /* m || sig */
	size_t   blen;
	char    *footer;        /* NUL-terminated, "" if none */
	size_t   flen;
};

static void
parsed_free(struct parsed *p)
{
	free(p->body);
	free(p->footer);
	p->body = NULL;
	p->footer = NULL;
}

/* Structural checks shared by verify and peek: size, header, part count,
 * strict base64url, minimum length. */
static int
parse_token(const char *token, size_t len, size_t maxlen, struct parsed *p)
{
	const char *b, *dot, *end = token + len;
	size_t dots = 0, i;
	ssize_t n;
	int err = 0;

	memset(p, 0, sizeof(*p));
	if (token == NULL || len == 0)
		return -EINVAL;
	/* bound before anything else: the size limit protects every step */
	if (len > maxlen)
		return -E2BIG;
	for (i = 0; i < len; i++)
		if (token[i] == '.')
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
	p->body = malloc(b64url_decoded_max((size_t)(dot - b)) + 1);
	if (p->body == NULL)
		return -ENOMEM;
	n = b64url_decode(b, (size_t)(dot - b), p->body, b64url_decoded_max((size_t)(dot - b)) + 1);
	if (n < 0) {
		err = n == -ENOMEM ? -ENOMEM : -EINVAL;
		goto out;
	}
	/* shorter than a signature: there is nothing to verify */
	if ((size_t)n < SIG_LEN) {
		err = -EINVAL;
		goto out;
	}
	p->blen = (size_t)n;
	if (dot != end) {
		const char *f = dot + 1;
		size_t flen_txt = (size_t)(end - f);

		if (b64url_decoded_max(flen_txt) > SPACE_FOOTER_MAX) {
			err = -E2BIG;
			goto out;
		}
		p->footer = malloc(b64url_decoded_max(flen_txt) + 1);
		if (p->footer == NULL) {
			err = -ENOMEM;
			goto out;
		}
		n = b64url_decode(f, flen_txt, p->footer, b64url_decoded_max(flen_txt) + 1);
		if (n < 0) {
			err = -EINVAL;
			goto out;
		}
		/* the footer is handed out as a C string: an embedded NUL would let
		 * two different footers look alike to the caller */
		if (memchr(p->footer, '\0', (size_t)n) != NULL) {
			err = -EINVAL;
			goto out;
		}
		p->footer[n] = '\0';
		p->flen = (size_t)n;
	} else {
		p->footer = strdup("");
		if (p->footer == NULL) {
			err = -ENOMEM;
			goto out;
		}
	}
out:
	if (err)
		parsed_free(p);
	return err;
}

int
paseto_v4_verify(const uint8_t pk[32], const char *token, size_t len,
    size_t maxlen, const char *implicit, uint8_t **msg_out, size_t *mlen_out,
    char **footer_out)
{
	struct parsed p;
	uint8_t *pae = NULL, *msg = NULL;
	size_t pae_len, mlen;
	int err;

	*msg_out = NULL;
	if (mlen_out)
		*mlen_out = 0;
	if (footer_out)
		*footer_out = NULL;
	if (sodium_init() < 0)
		return -EIO;
	err = parse_token(token, len, maxlen, &p);
	if (err)
		return err;
	mlen = p.blen - SIG_LEN;
	err = pae4(p.body, mlen, p.footer, p.flen, implicit, &pae, &pae_len);
	if (err)
		goto out;
	/* the footer and the implicit assertion are inside the signed PAE, so a
	 * changed footer or a token made for another purpose fails here */
	if (crypto_sign_verify_detached(p.body + mlen, pae, pae_len, pk) != 0) {
		err = -EBADMSG;
		goto out;
	}
	msg = malloc(mlen + 1);
	if (msg == NULL) {
		err = -ENOMEM;
		goto out;
	}
	if (mlen)
		memcpy(msg, p.body, mlen);
	msg[mlen] = '\0';
	*msg_out = msg;
	if (mlen_out)
		*mlen_out = mlen;
	if (footer_out) {
		*footer_out = p.footer;
		p.footer = NULL;
	}
out:
	free(pae);
	parsed_free(&p);
	return err;
}

int
paseto_v4_peek_footer(const char *token, size_t len, char **footer_out)
{
	struct parsed p;
	int err;

	*footer_out = NULL;
	err = parse_token(token, len, SPACE_BUNDLE_TOKEN_MAX, &p);
	if (err)
		return err;
	*footer_out = p.footer;
	p.footer = NULL;
	parsed_free(&p);
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
