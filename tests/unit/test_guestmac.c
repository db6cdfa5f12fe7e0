/* The guest challenge MAC: a known answer computed independently
 * (BLAKE2b-256 keyed, over the encoding of docs/protocol.md), and every
 * input changes the MAC, so a guest of another identity or without the
 * secret cannot answer. */
#include <errno.h>
#include <string.h>
#include <sodium.h>

#include "guestmac.h"
#include "util.h"
#include "tap.h"

int
main(void)
{
	uint8_t key[GUEST_SECRET_LEN], nonce[GUEST_NONCE_LEN], mac[GUEST_MAC_LEN], m2[GUEST_MAC_LEN];
	char hex[2 * GUEST_MAC_LEN + 1];
	size_t i;

	if (sodium_init() < 0)
		return 1;
	for (i = 0; i < sizeof(key); i++)
		key[i] = (uint8_t)i;
	for (i = 0; i < sizeof(nonce); i++)
		nonce[i] = (uint8_t)(100 + i);
	is_int(guest_mac(key, nonce, "sbx_a", 7, 2, mac), 0, "guest_mac succeeds");
	hex_encode(mac, sizeof(mac), hex, sizeof(hex));
	is_str(hex, "ac74284bfab6b45fc0a731e64ba6ee35ddf11c6c7f0171a3e33b63fe5b43ae9d",
	    "known answer (BLAKE2b-256 keyed over the documented encoding)");

	guest_mac(key, nonce, "sbx_b", 7, 2, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "another sandbox gives another MAC");
	guest_mac(key, nonce, "sbx_a", 8, 2, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "another generation gives another MAC");
	guest_mac(key, nonce, "sbx_a", 7, 3, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "another activation gives another MAC");
	/* "sbx_a" gen 72 act 2 vs "sbx_a7" ... : the NUL separators keep
	 * field boundaries unambiguous */
	guest_mac(key, nonce, "sbx_a", 72, 2, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "field boundaries are part of the MAC");
	nonce[0] ^= 1;
	guest_mac(key, nonce, "sbx_a", 7, 2, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "another nonce gives another MAC (no replay)");
	nonce[0] ^= 1;
	key[31] ^= 0x80;
	guest_mac(key, nonce, "sbx_a", 7, 2, m2);
	ok(memcmp(mac, m2, sizeof(mac)) != 0, "another secret gives another MAC");
	is_int(guest_mac(key, nonce, NULL, 7, 2, m2), -EINVAL, "NULL sandbox is refused");
	return done_testing();
}
