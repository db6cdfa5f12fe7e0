/* WebSocket handshake keys (wskey.h). */
#include <nettle/sha1.h>
#include <sodium.h>
#include <string.h>

#include "wskey.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

bool
ws_key_valid(const char *key)
{
	unsigned char bin[18];
	size_t n;

	if (key == NULL || strlen(key) != WS_KEY_LEN)
		return false;
	if (sodium_base642bin(bin, sizeof(bin), key, WS_KEY_LEN, NULL, &n, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0)
		return false;
	return n == 16;
}

void
ws_accept_of(const char *key, char *out)
{
	struct sha1_ctx h;
	uint8_t d[SHA1_DIGEST_SIZE];

	sha1_init(&h);
	sha1_update(&h, strlen(key), (const uint8_t *)key);
	sha1_update(&h, sizeof(ws_guid) - 1, (const uint8_t *)ws_guid);
	sha1_digest(&h, sizeof(d), d);
	sodium_bin2base64(out, WS_ACCEPT_LEN + 1, d, sizeof(d), sodium_base64_VARIANT_ORIGINAL);
}

void
ws_key_new(char *out)
{
	unsigned char r[16];

	randombytes_buf(r, sizeof(r));
	sodium_bin2base64(out, WS_KEY_LEN + 1, r, sizeof(r), sodium_base64_VARIANT_ORIGINAL);
}
