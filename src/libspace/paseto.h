/* PASETO v4.public (Ed25519 over PAE) and PASERK k4.public / k4.pid.
 * Errors: -EINVAL malformed token, -EPROTO wrong header (not "v4.public."),
 * -EBADMSG bad signature, -E2BIG over the size limit, -ENOMEM. */
#ifndef SPACE_PASETO_H
#define SPACE_PASETO_H
#include <stddef.h>
#include <stdint.h>
#include "limits.h"

#define PASETO_V4_PUBLIC_HDR   "v4.public."
#define PASERK_K4_PUBLIC_LEN   53   /* "k4.public." + 43 */
#define PASERK_K4_PID_LEN      51   /* "k4.pid." + 44 */
#define CAPABILITY_IMPLICIT    "space-capability-v1"
#define BUNDLE_IMPLICIT        "space-key-bundle-v1"

/* PAE(pieces) as in the PASETO spec; *out malloc'd */
int paseto_pae(const void *const *pieces, const size_t *lens, size_t n,
    uint8_t **out, size_t *out_len);

/* sign msg with sk (libsodium 64-byte secret key); footer and implicit may
 * be NULL (= empty). *token_out malloc'd, NUL-terminated. */
int paseto_v4_sign(const uint8_t sk[64], const void *msg, size_t mlen,
    const char *footer, const char *implicit, char **token_out);

/* verify token (len bytes, at most maxlen) under pk with the implicit
 * assertion (NULL = empty). On success *msg_out (malloc'd, NUL-terminated)
 * holds the payload and, when footer_out is not NULL, *footer_out the footer
 * (malloc'd, NUL-terminated, "" if none). */
int paseto_v4_verify(const uint8_t pk[32], const char *token, size_t len,
    size_t maxlen, const char *implicit, uint8_t **msg_out, size_t *mlen_out,
    char **footer_out);

/* footer of a v4.public token without verifying it (to pick a key by kid).
 * *footer_out malloc'd. */
int paseto_v4_peek_footer(const char *token, size_t len, char **footer_out);

/* the whole v4.public grammar without the signature (size at most maxlen,
 * header, parts, strict base64url, a body at least a signature long, the
 * footer's size): the footer text into footer (NUL-terminated, "" if none).
 * The decoded body is wiped: with the footer it is the whole token. */
int paseto_v4_peek(const char *token, size_t len, size_t maxlen,
    char footer[SPACE_FOOTER_MAX + 1], size_t *footer_len);

const char *paseto_strerror(int err);

/* PASERK */
int paserk_k4_public_encode(const uint8_t pk[32], char out[PASERK_K4_PUBLIC_LEN + 1]);
int paserk_k4_public_decode(const char *s, uint8_t pk[32]);
int paserk_k4_pid(const uint8_t pk[32], char out[PASERK_K4_PID_LEN + 1]);
/* a public key given as 64 hex characters or as a k4.public PASERK */
int public_key_parse(const char *s, uint8_t pk[32]);
#endif
