/* The channel between sbx-manager (root) and its control-plane client, an
 * unprivileged child that alone speaks HTTP to space-control and parses
 * its JSON (docs/worker.md, "The control-plane client").
 *
 * One message per packet on a SOCK_SEQPACKET socket pair:
 *
 *   u16 magic 0x4354 ("CT") | u8 version | u8 type | u32 id | u32 len
 *   then exactly len payload bytes (big-endian integers; a string is a
 *   u32 length and its bytes, no NUL among them)
 *
 * requests, parent -> child (id chosen by the parent, echoed in answers):
 *   POST          path (str, "/..." printable, <= CTL_PATH_MAX),
 *                 body (str, <= CTL_BODY_MAX), timeout_s u32 (1..600)
 *                 -> DONE
 *   KEYS_GET      nothing                                -> KEYS
 *   ASSIGN_GET    after u64, wait_s u32 (0..120)         -> ASSIGNMENTS
 *   ARCHIVES_POST body (str, <= CTL_BODY_MAX)            -> COLLECT
 *   TEMPLATE_GET  digest (64 lowercase hex), with one descriptor
 *                 (SCM_RIGHTS): the write end of a pipe the image's bytes
 *                 are written to                         -> DONE
 *   SNAPSHOT_GET  digest (64 lowercase hex), with one descriptor: the
 *                 write end of a pipe the archive's bytes are written to
 *                                                        -> DONE
 *   SNAPSHOT_PUT  digest (64 lowercase hex), with one descriptor: the
 *                 archive, open read-only, uploaded from offset 0 to its
 *                 size                                   -> DONE
 *   SNAPSHOT_STREAM nothing, with one descriptor: the read end of a pipe
 *                 an archive is written into while it is made, uploaded
 *                 until the pipe's end; the control plane takes the digest
 *                 from the archive's own trailer          -> DONE
 * answers, child -> parent; each starts with result u8 (enum ctl_result)
 * and status u16 (the HTTP status, 0 when there was none, <= 999):
 *   DONE          result, status
 *   KEYS          result, status, bundle (str: printable ASCII,
 *                 <= SPACE_BUNDLE_TOKEN_MAX; empty unless result OK)
 *   ASSIGNMENTS   result, status, revision u64, count u32
 *                 (<= SPACE_ASSIGNMENTS_MAX; 0 unless OK); then count
 *                 ASSIGNMENT packets with the same id, index 0..count-1
 *   ASSIGNMENT    index u32, one assignment in its fixed binary form
 *                 (msg_assignment_pack, MSG_ASSIGNMENT_WIRE_LEN bytes)
 *   COLLECT       result, status, count u32 (<= SPACE_ARCHIVE_BATCH_MAX;
 *                 0 unless OK), count x 64 lowercase hex digests
 *
 * Decoding refuses a bad magic or version, an unknown type, a length that
 * is not the payload's, an out-of-range integer or enum, a string over its
 * limit or with a byte its field may not hold, a descriptor on any message
 * but TEMPLATE_GET, SNAPSHOT_GET, SNAPSHOT_PUT and SNAPSHOT_STREAM (and
 * none on those), and
 * anything left over. The parent reads the child as
 * hostile: nothing the child says goes further than a field can express,
 * and the key bundle is verified by the parent under the pinned root key. */
#ifndef SPACE_CTLMSG_H
#define SPACE_CTLMSG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"
#include "msg.h"

#define CTL_MAGIC       0x4354
#define CTL_VERSION     1
#define CTL_HDR_LEN     12
#define CTL_PATH_MAX    255
#define CTL_BODY_MAX    65536
#define CTL_DIGEST_HEX  64
/* the largest packet: a POST of the largest body or a KEYS answer of the
 * largest bundle, with room */
#define CTL_MSG_MAX     (CTL_HDR_LEN + 1024 + (CTL_BODY_MAX > SPACE_BUNDLE_TOKEN_MAX ? \
                         CTL_BODY_MAX : SPACE_BUNDLE_TOKEN_MAX))

enum ctl_type {
	CTL_POST = 1,
	CTL_KEYS_GET,
	CTL_ASSIGN_GET,
	CTL_ARCHIVES_POST,
	CTL_TEMPLATE_GET,
	CTL_DONE,
	CTL_KEYS,
	CTL_ASSIGNMENTS,
	CTL_ASSIGNMENT,
	CTL_COLLECT,
	CTL_SNAPSHOT_GET,       /* requests added later: after the answers */
	CTL_SNAPSHOT_PUT,
	CTL_SNAPSHOT_STREAM,
	CTL__MAX
};

enum ctl_result {
	CTL_OK = 0,             /* answered 2xx, and the answer was well-formed */
	CTL_NO_ANSWER,          /* no HTTP answer (connection, timeout) */
	CTL_REFUSED,            /* answered with another status */
	CTL_MALFORMED,          /* answered 2xx with a body that does not decode */
	CTL_BUSY,               /* the child has too many requests in flight */
	CTL__RESULT_MAX
};

struct ctlmsg {
	uint8_t type;           /* enum ctl_type */
	uint32_t id;
	/* POST, ARCHIVES_POST: body; KEYS: bundle. malloc'd by the decoder
	 * (ctlmsg_clear frees it), NUL-terminated, text_len bytes */
	char *text;
	size_t text_len;
	char path[CTL_PATH_MAX + 1];            /* POST */
	uint32_t timeout_s;                     /* POST */
	uint64_t after;                         /* ASSIGN_GET */
	uint32_t wait_s;                        /* ASSIGN_GET */
	char digest[CTL_DIGEST_HEX + 1];        /* TEMPLATE_GET, SNAPSHOT_GET, SNAPSHOT_PUT */
	uint8_t result;                         /* answers: enum ctl_result */
	uint16_t status;                        /* answers */
	uint64_t revision;                      /* ASSIGNMENTS */
	uint32_t count;                         /* ASSIGNMENTS, COLLECT */
	uint32_t index;                         /* ASSIGNMENT */
	struct msg_assignment a;                /* ASSIGNMENT */
	char (*digests)[CTL_DIGEST_HEX + 1];    /* COLLECT: count, malloc'd */
};

bool ctlmsg_is_request(uint8_t type);
/* the requests that carry one descriptor (and only they) */
bool ctlmsg_takes_fd(uint8_t type);
/* encode m into buf (cap >= CTL_MSG_MAX): the length, or -EINVAL when a
 * field would not decode (a sender cannot emit what the receiver refuses) */
int ctlmsg_encode(const struct ctlmsg *m, uint8_t *buf, size_t cap);
/* 0 with *m filled (ctlmsg_clear), or -EPROTO with *why */
int ctlmsg_decode(const uint8_t *buf, size_t n, struct ctlmsg *m, const char **why);
void ctlmsg_clear(struct ctlmsg *m);

/* one message per packet; fd >= 0 is passed along (ctlmsg_takes_fd) */
int ctlmsg_send(int sock, const struct ctlmsg *m, int fd);
/* 0, -ECONNRESET at the end of the stream, -EPROTO when the packet does
 * not decode (truncated, or a descriptor where none may be), -errno.
 * *fd is the descriptor a request that takes one carried (-1 otherwise); fd may be
 * NULL when the receiver takes none. */
int ctlmsg_recv(int sock, struct ctlmsg *m, int *fd, const char **why);
#endif
