/* The messages between space-control's HTTP process and its signer process
 * (docs/architecture.md): typed, framed, versioned and bounded, one message
 * per SOCK_SEQPACKET datagram, so a frame never straddles two reads.
 *
 * Frame = 12-byte header, big-endian, then len payload bytes:
 *   u16 magic 0x5347 ("SG") | u8 version | u8 zero | u16 type | u16 zero | u32 len
 * The datagram is exactly 12 + len bytes. Decoding refuses a bad magic or
 * version, a non-zero reserved byte, an unknown type, a length over the
 * type's limit or different from the datagram's, and any leftover byte.
 *
 * Payloads (integers big-endian):
 *   HELLO       signer -> http: root public key (32)
 *   SIGN_CAP    http -> signer: u16 kid_len | kid | u16 claims_len | claims JSON
 *   SIGN_BUNDLE http -> signer: u64 version | u16 n | n x (pk 32 | i64 not_before | i64 not_after)
 *   NEW_KEY     http -> signer: empty
 *   TOKEN       signer -> http: the signed token (ASCII, no NUL)
 *   KEY         signer -> http: the new key's public key (32)
 *   ERROR       signer -> http: u32 errno | reason (printable ASCII, may be empty)
 * The decoders are pure (no I/O) so that a fuzzer drives them. */
#ifndef SPACE_SIGMSG_H
#define SPACE_SIGMSG_H
#include <stddef.h>
#include <stdint.h>

#include "claims.h"
#include "keys.h"
#include "limits.h"

#define SIGMSG_MAGIC        0x5347
#define SIGMSG_VERSION      1
#define SIGMSG_HDR_LEN      12
#define SIGMSG_REASON_MAX   160
#define SIGMSG_BUNDLE_REC   48      /* pk 32 | not_before 8 | not_after 8 */
/* the largest datagram either side sends or accepts */
#define SIGMSG_MAX          (SIGMSG_HDR_LEN + SPACE_BUNDLE_TOKEN_MAX)

enum sigmsg_type {
	SIG_HELLO = 1,
	SIG_SIGN_CAP,
	SIG_SIGN_BUNDLE,
	SIG_NEW_KEY,
	SIG_TOKEN,
	SIG_KEY,
	SIG_ERROR,
	SIG__MAX
};

/* a request the signer accepts, decoded. For SIGN_CAP the claims have
 * passed claims_decode (exact claims of their purpose) and the issuer's
 * own rules (exp == iat + lifetime, audience of the purpose); the signer
 * still checks iat against its clock and kid against the keys it holds. */
struct sig_request {
	uint16_t type;
	char     kid[PASERK_K4_PID_LEN + 1];         /* SIGN_CAP */
	struct capability cap;                       /* SIGN_CAP */
	struct key_bundle bundle;                    /* SIGN_BUNDLE: kids derived from pks */
};

struct sig_reply {
	uint16_t type;
	uint8_t  pk[32];                             /* HELLO, KEY */
	char    *token;                              /* TOKEN: malloc'd, NUL-terminated */
	int      err;                                /* ERROR: positive errno */
	char     reason[SIGMSG_REASON_MAX + 1];      /* ERROR */
};

/* encoders: *out malloc'd, *len its size; 0 or -errno */
int sigmsg_encode(uint16_t type, const void *payload, size_t plen, uint8_t **out, size_t *len);
int sigmsg_encode_sign_cap(const char *kid, const char *claims, uint8_t **out, size_t *len);
int sigmsg_encode_sign_bundle(const struct key_bundle *b, uint8_t **out, size_t *len);
int sigmsg_encode_error(int err, const char *reason, uint8_t **out, size_t *len);

/* 0, or -EPROTO (framing, unknown or unexpected type), -EMSGSIZE (length),
 * -EINVAL (payload shape) with *why a static reason */
int sigmsg_decode_request(const uint8_t *buf, size_t n, struct sig_request *out,
    const char **why);
/* a reply of one of the types the request allows (TOKEN, KEY or HELLO) or
 * ERROR; out->token freed by sig_reply_clear */
int sigmsg_decode_reply(const uint8_t *buf, size_t n, uint16_t want, struct sig_reply *out,
    const char **why);
void sig_reply_clear(struct sig_reply *r);
#endif
