/* The channel between spaced-host's two processes (docs/worker.md,
 * "spaced-host: monitor and serving process").
 *
 * The monitor (root) keeps what needs root: the substrate (namespaces, id
 * maps, cgroups, the layer mount) and the OOM count. The serving process
 * (an unprivileged uid of the sandbox's range, no capabilities,
 * no_new_privs, its own seccomp filter) holds the bridge socket and the
 * guest's control channel and parses every frame of both peers. They talk
 * over a SOCK_SEQPACKET socket pair, one message per packet:
 *
 *   u16 magic 0x484d ("HM") | u16 type | u32 len   (big-endian)
 *   then exactly the payload size of that type:
 *     READY       serve -> monitor   0   challenge passed, listening
 *     OOM_QUERY   serve -> monitor   0   answered by OOM_COUNT
 *     OOM_COUNT   monitor -> serve   9   u8 known (0|1), u64 OOM kills
 *     REFUSED     serve -> monitor   op u8, outcome u8, reason u8,
 *                                    generation u64, activation u32, then
 *                                    u8-length-prefixed strings: target,
 *                                    sandbox, worker, substrate, resident, jti
 *     CLAIM       monitor -> serve   generation u64, activation u32, the
 *                                    guest's secret (32 bytes), then
 *                                    u8-length-prefixed ids: sandbox,
 *                                    worker, substrate, resident; with
 *                                    exactly two descriptors (SCM_RIGHTS):
 *                                    the guest's control channel and the
 *                                    bound bridge socket. A prepared jail's
 *                                    serving process, made before any
 *                                    claim, is told by it whom it serves
 *                                    (docs/jail.md, "Prepared jails").
 *
 * Decoding refuses a bad magic, an unknown type, a length that is not the
 * type's, an enum out of range, a string over its limit or with bytes an
 * id may not hold, and anything left over. The monitor trusts nothing the
 * serving process says beyond what a message can express. */
#ifndef SPACE_HOSTMON_H
#define SPACE_HOSTMON_H
#include <stddef.h>
#include <stdint.h>

#include "claims.h"
#include "guestmac.h"
#include "limits.h"

#define HM_MAGIC        0x484d
#define HM_HDR_LEN      8
#define HM_MSG_MAX      512     /* the largest encoded message, with room */

/* The serving process runs as uid_base + SPACE_BRIDGE_UID_OFFSET (gid the
 * same): the last id of the sandbox's own range, which its user namespace
 * does not map (the jail maps ids 0..65534). No process of this or any
 * other sandbox can hold it, and no two bridges share it. */
#define SPACE_BRIDGE_UID_OFFSET 65535u

enum hm_type {
	HM_READY = 1,
	HM_OOM_QUERY,
	HM_OOM_COUNT,
	HM_REFUSED,
	HM_CLAIM,
	HM__MAX
};

struct hm_refusal {
	uint8_t op;                     /* enum op_kind */
	uint8_t outcome;                /* enum admit_outcome, not ALLOW */
	uint8_t reason;                 /* enum admit_reason */
	char target[SPACE_ID_MAX + 1];  /* the sandbox the request named, or "" */
	struct route_identity cap;      /* the capability's route; "" / 0 when unreadable */
	char jti[SPACE_JTI_MAX + 1];
};

struct hm_msg {
	uint16_t type;
	union {
		struct { uint8_t known; uint64_t n; } oom;
		struct hm_refusal ref;
		struct { struct route_identity id; uint8_t secret[GUEST_SECRET_LEN]; } claim;
	} u;
};

/* encode m into buf (cap >= HM_MSG_MAX); the length, or -EINVAL when a
 * field would not decode (so a sender cannot emit what we refuse) */
int hm_encode(const struct hm_msg *m, uint8_t *buf, size_t cap);
/* 0, or -EPROTO: see above */
int hm_decode(const uint8_t *buf, size_t n, struct hm_msg *m);

/* one message per packet on a SOCK_SEQPACKET socket; hm_recv: 0,
 * -ECONNRESET at end of stream, -EPROTO on a message that does not decode
 * (a truncated packet included), -errno */
int hm_send(int fd, const struct hm_msg *m);
int hm_recv(int fd, struct hm_msg *m);
/* CLAIM and its two descriptors; hm_recv_claim: 0 with fds[0..1] ours
 * (O_CLOEXEC), or as hm_recv (-EPROTO also for another type, or another
 * number of descriptors: whatever came is closed). The encoded secret is
 * wiped on both sides. */
int hm_send_claim(int fd, const struct hm_msg *m, int control, int sock);
int hm_recv_claim(int fd, struct hm_msg *m, int fds[2]);
#endif
