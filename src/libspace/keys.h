/* Ed25519 keys and verification-key bundles (DESIGN section 5). */
#ifndef SPACE_KEYS_H
#define SPACE_KEYS_H
#include <stdint.h>
#include <stddef.h>
#include "limits.h"
#include "paseto.h"

struct signing_key {
	uint8_t sk[64];                 /* libsodium secret key (seed || pk) */
	uint8_t pk[32];
	char    kid[PASERK_K4_PID_LEN + 1];
	int64_t created;
};
int signing_key_generate(struct signing_key *k);
/* file: JSON {"secret":"<hex seed>","created":"RFC3339"}, mode 0600,
 * written atomically; load refuses a file readable by group/other. */
int signing_key_save(const char *path, const struct signing_key *k);
int signing_key_load(const char *path, struct signing_key *k);
void signing_key_wipe(struct signing_key *k);   /* sodium_memzero */

struct bundle_key {
	char    kid[PASERK_K4_PID_LEN + 1];
	uint8_t pk[32];
	int64_t not_before, not_after;  /* unix seconds; not_after 0 = open */
};
struct key_bundle {
	uint64_t version;               /* strictly increasing */
	size_t   n;
	struct bundle_key keys[SPACE_BUNDLE_KEYS_MAX];
};
/* payload: {"version":N,"keys":[{"kid","public":"k4.public...","not_before","not_after"}]}
 * signed as v4.public with implicit assertion BUNDLE_IMPLICIT and footer
 * {"kid":"<root kid>"}. */
int bundle_sign(const struct key_bundle *b, const struct signing_key *root, char **token_out);
/* verifies the signature under the pinned root key, decodes strictly,
 * checks each kid equals the PASERK id of its key. */
int bundle_verify(const char *token, size_t len, const uint8_t root_pk[32], struct key_bundle *out);
/* the key for kid valid at now, or NULL */
const struct bundle_key *bundle_find(const struct key_bundle *b, const char *kid, int64_t now);
#endif
