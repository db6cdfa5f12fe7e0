/* Capability claims (DESIGN section 5) and the route identity (section 3). */
#ifndef SPACE_CLAIMS_H
#define SPACE_CLAIMS_H
#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include "limits.h"

struct route_identity {
	char     sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;                    /* >= 1 */
	char     worker[SPACE_ID_MAX + 1];
	char     substrate[SPACE_SUBSTRATE_MAX + 1];
	uint32_t activation;                    /* >= 1 */
	char     resident[SPACE_ID_MAX + 1];
};

enum cap_audience { AUD_NODE_API = 1, AUD_NETGTW = 2 };
enum cap_purpose  { PUR_CONTROL = 1, PUR_SERVICE = 2 };
enum cap_proto    { PROTO_NONE = 0, PROTO_HTTP = 1, PROTO_TCP = 2 };

/* access bits; "acc" is a JSON array of these names, no duplicates */
#define ACC_EXEC   0x01u   /* "exec"  */
#define ACC_FS_R   0x02u   /* "fs:r"  */
#define ACC_FS_W   0x04u   /* "fs:w"  */
#define ACC_PTY    0x08u   /* "pty"   */
#define ACC_WATCH  0x10u   /* "watch" */
#define ACC_ALL    0x1fu

struct capability {
	char     sub[SPACE_ID_MAX + 1];         /* principal id */
	char     jti[SPACE_JTI_MAX + 1];
	enum cap_audience aud;
	enum cap_purpose  pur;
	int64_t  iat, exp;                      /* unix seconds */
	struct route_identity route;
	uint32_t acc;                           /* control only, non-empty */
	uint16_t port;                          /* service only, 1..65535 */
	enum cap_proto proto;                   /* service only */
};

/* Strict decoder: a JSON object with exactly the claims of its purpose
 * ("iss" must be "space-control"), no duplicate keys, no unknown claims,
 * right types (gen an integer 1..2^64-1 written as a JSON number, no string,
 * no fraction, no sign; act 1..2^32-1), ids valid, exp == iat + 120 is NOT
 * required here (the issuer's rule; receivers check times in admit()).
 * Returns 0, or -EINVAL with *why set to a static reason string. */
int claims_decode(const void *json, size_t len, struct capability *out, const char **why);
/* encodes the claims of cap (keys in a fixed order); *json_out malloc'd */
int claims_encode(const struct capability *cap, char **json_out);

const char *acc_name(uint32_t bit);
int acc_parse(const char *name, uint32_t *bit);      /* -EINVAL unknown */
/* comma-separated list "exec,fs:r" -> bits */
int acc_parse_list(const char *list, uint32_t *bits);

bool route_identity_equal(const struct route_identity *a, const struct route_identity *b);
/* JSON object {"sandbox","generation","worker","substrate","activation","resident"};
 * unpack is strict (all six, right types, nothing else). */
struct json_t;
struct json_t *route_identity_pack(const struct route_identity *r);
int route_identity_unpack(const struct json_t *obj, struct route_identity *r);
#endif
