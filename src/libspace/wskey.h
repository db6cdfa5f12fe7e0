/* The WebSocket opening handshake's key check (RFC 6455 section 4):
 * Sec-WebSocket-Accept = base64(SHA-1(key || GUID)). Used by node-api (the
 * server) and the CLI (the client, which must check the server's answer).
 * SHA-1 is the protocol's choice, not a security one: the handshake only
 * proves the server speaks WebSocket. */
#ifndef SPACE_WSKEY_H
#define SPACE_WSKEY_H
#include <stdbool.h>
#include <stddef.h>

#define WS_KEY_LEN      24      /* base64 of 16 bytes */
#define WS_ACCEPT_LEN   28      /* base64 of 20 bytes */

/* a client key: exactly base64 (standard, padded) of 16 bytes */
bool ws_key_valid(const char *key);
/* out: WS_ACCEPT_LEN + 1 bytes */
void ws_accept_of(const char *key, char *out);
/* a new random client key; out: WS_KEY_LEN + 1 bytes */
void ws_key_new(char *out);
#endif
