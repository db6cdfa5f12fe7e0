/* Connect RPC with the JSON codec, as the E2B SDK speaks it to space-edge
 * (docs/e2b.md): the envelope of a streaming message (1 byte of flags,
 * a 4-byte big-endian length, the message) and the strict decoding of a
 * message's JSON object. One codec, fuzzed by tests/fuzz/fuzz_connect.c. */
#ifndef SPACE_CONNECTRPC_H
#define SPACE_CONNECTRPC_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#define CONNECT_ENV_HDR         5
#define CONNECT_FLAG_COMPRESSED 0x01
#define CONNECT_FLAG_END        0x02
#define CONNECT_MSG_MAX         (1u << 20)      /* one message, either way */

/* A request body that is exactly one uncompressed, non-final envelope
 * (a server-streaming call's request): 0 with *msg, *mlen pointing into
 * buf, or -EINVAL with *why (static text safe to show the sender). */
int connect_env_decode(const uint8_t *buf, size_t len, const uint8_t **msg, size_t *mlen,
    const char **why);
/* One envelope of flags around n bytes of JSON: malloc'd, *outlen set.
 * -EMSGSIZE over CONNECT_MSG_MAX, -ENOMEM. */
int connect_env_encode(uint8_t flags, const char *json, size_t n, uint8_t **out,
    size_t *outlen);
/* A message's JSON: exactly one object, no duplicate key, every key in the
 * NULL-terminated list keys, at most CONNECT_MSG_MAX bytes. A new
 * reference, or NULL with *why. */
json_t *connect_json_object(const void *buf, size_t len, const char *const *keys,
    const char **why);
#endif
