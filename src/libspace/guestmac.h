/* The guest challenge MAC (docs/protocol.md section 1, DESIGN section 6).
 * spaced-host computes it to check a CHALLENGE_REPLY, spaced-guest to
 * answer one; both link this one definition so they cannot drift. */
#ifndef SPACE_GUESTMAC_H
#define SPACE_GUESTMAC_H
#include <stddef.h>
#include <stdint.h>

#define GUEST_SECRET_LEN 32     /* per-activation secret, bytes */
#define GUEST_NONCE_LEN  32     /* challenge nonce, bytes */
#define GUEST_MAC_LEN    32     /* BLAKE2b-256 */

/* mac = BLAKE2b-256 keyed with secret over
 *   "space-guest-v1\0" || nonce || sandbox || "\0" || generation (decimal)
 *   || "\0" || activation (decimal)
 * Returns 0, or -EINVAL (sandbox NULL). */
int guest_mac(const uint8_t secret[GUEST_SECRET_LEN],
    const uint8_t nonce[GUEST_NONCE_LEN], const char *sandbox,
    uint64_t generation, uint32_t activation, uint8_t mac[GUEST_MAC_LEN]);
#endif
