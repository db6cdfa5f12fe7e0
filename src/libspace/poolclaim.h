/* The claim of a prepared jail's kept bridge (docs/jail.md, "Prepared
 * jails"): what sbx-manager writes, once, on the stdin of a `spaced-host
 * --pool` that waits for its sandbox.
 *
 * A prepared jail's bridge starts before any sandbox is known: it makes
 * the jail, says "pooled GUESTPID", and waits with no identity and no
 * secret. The claim names the execution it becomes the bridge of, with
 * everything a `--claim-from POOLID` start would have had on its command
 * line; from there on it is that bridge (a new secret, the ATTACH that
 * binds the guest, the challenge, "ready PID").
 *
 * Wire, one message, at most POOLCLAIM_MAX bytes (a pipe's atomic write):
 *   u16 magic 0x5043 ("PC") | u16 version 1 | u32 payload length
 *   u64 generation | u32 activation | u32 uid_base | u32 memory_mb
 *   | u32 pids | u32 cpu_percent | u32 disk_mb
 *   then u8-length ids: sandbox, worker, resident, substrate, claim_from,
 *   nameserver ("" or a dotted IPv4 address)
 *   then u16-length paths: run_dir, layer_dir, netns      (big-endian)
 *
 * Decoding refuses a bad magic or version, a length that is not the
 * payload's, a number out of the range spaced-host takes on its command
 * line, an id that is not one, a path that is not absolute or holds a NUL
 * or a newline, an address that is not one in its one spelling, and
 * anything left over. */
#ifndef SPACE_POOLCLAIM_H
#define SPACE_POOLCLAIM_H
#include <stddef.h>
#include <stdint.h>

#include "claims.h"
#include "limits.h"

#define POOLCLAIM_MAGIC    0x5043
#define POOLCLAIM_VERSION  1
#define POOLCLAIM_HDR_LEN  8
#define POOLCLAIM_MAX      4096    /* PIPE_BUF: written in one piece */
#define POOLCLAIM_PATH_MAX 1000

struct pool_claim {
	struct route_identity id;
	char claim_from[SPACE_ID_MAX + 1];      /* the prepared jail's pool id */
	char nameserver[16];
	uint32_t uid_base, memory_mb, pids, cpu_percent, disk_mb;
	char run_dir[POOLCLAIM_PATH_MAX + 1];
	char layer_dir[POOLCLAIM_PATH_MAX + 1];
	char netns[POOLCLAIM_PATH_MAX + 1];
};

/* the length written into buf (cap >= POOLCLAIM_MAX), or -EINVAL when c
 * would not decode */
int poolclaim_encode(const struct pool_claim *c, uint8_t *buf, size_t cap);
/* 0, or -EPROTO with *why */
int poolclaim_decode(const uint8_t *buf, size_t n, struct pool_claim *c, const char **why);
#endif
