/* The guest challenge MAC, see guestmac.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "guestmac.h"

int
guest_mac(const uint8_t secret[GUEST_SECRET_LEN],
    const uint8_t nonce[GUEST_NONCE_LEN], const char *sandbox,
    uint64_t generation, uint32_t activation, uint8_t mac[GUEST_MAC_LEN])
{
	static const char domain[] = "space-guest-v1";  /* + its NUL */
	crypto_generichash_state st;
	char num[24];
	int n;

	if (sandbox == NULL)
		return -EINVAL;
	crypto_generichash_init(&st, secret, GUEST_SECRET_LEN, GUEST_MAC_LEN);
	crypto_generichash_update(&st, (const unsigned char *)domain, sizeof(domain));
	crypto_generichash_update(&st, nonce, GUEST_NONCE_LEN);
	/* the NUL separators make the encoding injective: a sandbox id cannot
	 * contain NUL, and the numbers are decimal without leading zeros */
	crypto_generichash_update(&st, (const unsigned char *)sandbox, strlen(sandbox) + 1);
	n = snprintf(num, sizeof(num), "%" PRIu64, generation);
	crypto_generichash_update(&st, (const unsigned char *)num, (size_t)n + 1);
	n = snprintf(num, sizeof(num), "%" PRIu32, activation);
	crypto_generichash_update(&st, (const unsigned char *)num, (size_t)n);
	crypto_generichash_final(&st, mac, GUEST_MAC_LEN);
	sodium_memzero(&st, sizeof(st));
	return 0;
}
