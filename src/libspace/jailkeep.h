/* The jail's rendezvous (docs/jail.md, "The jail outlives its bridge").
 *
 * The first bridge of an execution binds RUNDIR/jail.sock (a
 * SOCK_SEQPACKET socket, 0600 in the 0700 root directory) and hands the
 * bound socket to the guest, which listens on it. A later bridge of the
 * same execution (the next activation) connects there and sends one
 * ATTACH message: the identity of the new activation, its secret, and
 * (SCM_RIGHTS) the guest's end of a new control channel. The guest takes
 * it only for its own sandbox and generation and a larger activation,
 * then answers the new bridge's challenge with the new secret.
 *
 * Wire: exactly JAILKEEP_WIRE_LEN bytes, one encoding per message:
 *   u32 magic "JKA1" | u64 generation | u32 activation | u8 sandbox length
 *   | 64 bytes sandbox, zero padded | 32 bytes secret       (little endian)
 * and exactly one descriptor. */
#ifndef SPACE_JAILKEEP_H
#define SPACE_JAILKEEP_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guestmac.h"
#include "limits.h"

#define JAILKEEP_MAGIC    0x31414b4au     /* "JKA1" */
#define JAILKEEP_WIRE_LEN (4 + 8 + 4 + 1 + SPACE_ID_MAX + GUEST_SECRET_LEN)
#define JAILKEEP_SOCK     "jail.sock"     /* in the execution's RUNDIR */

struct jailkeep_attach {
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	uint32_t activation;
	uint8_t secret[GUEST_SECRET_LEN];
};

void jailkeep_encode(const struct jailkeep_attach *a, uint8_t out[JAILKEEP_WIRE_LEN]);
/* 0, or -EPROTO with *why */
int jailkeep_decode(const uint8_t *buf, size_t n, struct jailkeep_attach *a, const char **why);
/* one message with one descriptor; 0 or -errno */
int jailkeep_send(int sock, const struct jailkeep_attach *a, int fd);
/* one message; *fd gets the descriptor (O_CLOEXEC); 0, or -errno
 * (-EPROTO with *why for anything but exactly one well-formed message
 * with exactly one descriptor); the buffer is wiped */
int jailkeep_recv(int sock, struct jailkeep_attach *a, int *fd, const char **why);
/* Reach the kept guest listening at path: connect, take the listener's pid
 * from SO_PEERCRED (the guest listens itself, so it is PID 1 of the jail),
 * open a pidfd for it, and check the connection is not hung up after the
 * pidfd was opened (so the pid was the live guest's, not a reused one).
 * 0 with *conn, *pidfd and *pid set; -ENOENT when no live guest is there
 * (nothing to close then). */
int jailkeep_reach(const char *path, int *conn, int *pidfd, pid_t *pid);
#endif
