/* The gateway hello (docs/network.md "The gateway hello"): the first bytes
 * a client sends to a worker's netgtw listener, and the gateway's answer.
 *
 * Both directions use one frame: 4 bytes "SGW1", a u32 big-endian length L
 * (1..SPACE_GWHELLO_MAX), L bytes of JSON. After an ok answer the
 * connection carries raw bytes both ways; after an error answer the
 * gateway closes it.
 *
 *   client -> gateway: {"capability":"v4.public...","port":N,"proto":"http"|"tcp"}
 *   gateway -> client: {"ok":true}  or  {"error":CODE,"message":TEXT}
 *
 * The decoders are strict: exactly these members, no duplicates, right
 * types, bounded sizes; anything else is refused with a static reason.
 * The hello is parsed by an unprivileged process that holds no key. */
#ifndef SPACE_GWHELLO_H
#define SPACE_GWHELLO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "claims.h"
#include "limits.h"

#define GWHELLO_MAGIC   "SGW1"
#define GWHELLO_HDR_LEN 8

struct gw_hello {
	char capability[SPACE_TOKEN_MAX + 1];
	uint16_t port;                  /* 1..65535 */
	enum cap_proto proto;           /* PROTO_HTTP or PROTO_TCP */
};

struct gw_reply {
	bool ok;
	char error[SPACE_ERROR_CODE_MAX + 1];           /* [a-z0-9_]{1,63} when !ok */
	char message[SPACE_ERROR_MESSAGE_MAX + 1];      /* printable text, may be empty */
};

/* The frame header: 0 and *len (1..SPACE_GWHELLO_MAX), or -EINVAL (wrong
 * magic, length 0 or above the bound). */
int gwframe_header(const uint8_t hdr[GWHELLO_HDR_LEN], uint32_t *len);

/* One frame at the start of buf[0..n): the total frame length (> 0) with
 * *body / *blen set, 0 when more bytes are needed, -EINVAL when the header
 * is bad. Bytes after the frame are the caller's (raw stream). */
int gwframe_parse(const uint8_t *buf, size_t n, const uint8_t **body, size_t *blen);

/* Bodies. decode: 0, or -EINVAL with *why a static reason. */
int gwhello_decode(const void *json, size_t len, struct gw_hello *out, const char **why);
int gwreply_decode(const void *json, size_t len, struct gw_reply *out, const char **why);

/* Whole frames (header + JSON); *out is malloc'd. 0, -EINVAL for a value
 * the decoder would refuse, -ENOMEM. */
int gwhello_encode(const struct gw_hello *h, uint8_t **out, size_t *outlen);
int gwreply_encode(const struct gw_reply *r, uint8_t **out, size_t *outlen);

/* an error reply in one call (code and message as gwreply_encode checks) */
int gwreply_error(const char *code, const char *message, uint8_t **out, size_t *outlen);

/* The check channel between a gateway and its sbx-manager (a SEQPACKET
 * pair: one datagram per message). A check is GWCHECK_ASK, a u64
 * big-endian check number, then the hello's body; its answer is
 * GWCHECK_ANSWER, the same number, then the answer's body. The gateway
 * numbers its checks and takes only the answer with the number of the one
 * it waits for: an answer that arrives after the gateway gave up waiting
 * is dropped, never taken for the next check's. Key bundles and
 * activations (JSON, first byte '{') travel outside this framing. */
#define GWCHECK_ASK     "SGC1"
#define GWCHECK_ANSWER  "SGA1"
#define GWCHECK_HDR_LEN 12

/* the header of a message of kind magic (GWCHECK_ASK or _ANSWER) */
void gwcheck_header(uint8_t hdr[GWCHECK_HDR_LEN], const char *magic, uint64_t id);

/* A whole datagram of kind magic: 0 with *id (never 0), *body and *blen
 * (1..SPACE_GWHELLO_MAX), or -EINVAL (another kind, short, number 0, an
 * empty or oversized body). */
int gwcheck_parse(const char *magic, const uint8_t *buf, size_t n, uint64_t *id,
    const uint8_t **body, size_t *blen);
#endif
