/* Capability verification with a cache of verified, parsed claims
 * (DESIGN section 5). Keys come from a verified key bundle. The cache is
 * keyed by BLAKE2b-256 of the token, bounded (LRU), an entry lives until
 * exp + skew, and the whole cache is flushed when the bundle changes.
 * A cache hit only skips step 1; admit() still runs steps 2-8. */
#ifndef SPACE_VERIFIER_H
#define SPACE_VERIFIER_H
#include <stddef.h>
#include <stdint.h>
#include "admit.h"
#include "keys.h"
#include "limits.h"
#include "paseto.h"

struct verifier;
/* cache_entries 0 means SPACE_VCACHE_ENTRIES; at most 2^20 (NULL, EINVAL) */
struct verifier *verifier_new(size_t cache_entries);
void verifier_free(struct verifier *v);
/* install a bundle (already verified, see bundle_verify); flushes the cache.
 * -ESTALE for a version lower than the installed one (rollback); the same
 * version may be installed again. Thread-safe: receivers call
 * verifier_check from several threads. */
int verifier_set_bundle(struct verifier *v, const struct key_bundle *b);
uint64_t verifier_bundle_version(struct verifier *v);
/* step 1 of the comparator for receiver kind `kind`: size, header, kid in
 * the bundle and valid at `now`, signature with the capability implicit
 * assertion, claims decode, audience and purpose for the receiver, port
 * profile. Returns ADMIT_ALLOW with *cap filled, or ADMIT_DENY + reason. */
struct admit_result verifier_check(struct verifier *v, const char *token, size_t len,
    enum receiver_kind kind, int64_t now, struct capability *cap);

/* Steps 1-8 of the comparator on a token: verifier_check() (through the
 * cache) then admit(). On ALLOW, *cap_out (if not NULL) holds the verified
 * claims. (It also holds them after a refusal in steps 2-8, for audit logs;
 * it is zeroed when step 1 refused the token.) */
struct admit_result admit_token(struct verifier *v, const char *token, size_t len,
    const struct runtime_record *rec, const struct admit_request *req,
    struct capability *cap_out);

/* The one grammar of a capability token, signature aside: PASETO
 * v4.public (paseto_v4_peek) of at most SPACE_TOKEN_MAX bytes whose footer
 * is exactly {"kid":"k4.pid.<44>"}. verifier_check starts with it, and
 * node-api checks it before it forwards anything, so both refuse the same
 * tokens. kid and the footer text are filled; 0, -EINVAL, -EPROTO or
 * -E2BIG (paseto.h). */
int capability_token_kid(const char *token, size_t len, char kid[PASERK_K4_PID_LEN + 1],
    char footer[SPACE_FOOTER_MAX + 1]);

struct vcache_stats { uint64_t hits, misses, evictions, entries; };
void verifier_stats(struct verifier *v, struct vcache_stats *st);
#endif
