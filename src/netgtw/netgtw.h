/* netgtw: service ports into sandboxes (docs/network.md "netgtw").
 * One executable, two roles, one file each:
 *   listen.c   the per-worker listener: accepts TCP, reads the bounded
 *              hello (deadline, size), hands the connection and its
 *              bytes to the gateway of the sandbox the capability names
 *              (SCM_RIGHTS over DIR/SANDBOX.sock)
 *   gateway.c  the per-execution gateway, started by sbx-manager inside
 *              the sandbox's network namespace: admits the capability
 *              (its own check with the comparator, and sbx-manager's
 *              authoritative one with the declared ports), connects
 *              127.0.0.1:PORT and pumps bytes both ways
 *   pump.c     the byte pump of one admitted connection
 * Both roles run unprivileged (no capabilities, no_new_privs, not
 * dumpable) and hold no signing key. */
#ifndef NETGTW_H
#define NETGTW_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <poll.h>

#include "limits.h"

#define NETGTW_PENDING_MAX   256        /* connections still sending their hello (listener) */
#define NETGTW_CONNS_MAX     256        /* admitted connections per gateway */
#define NETGTW_BUF           (64u << 10) /* pump buffer per direction */
#define NETGTW_HANDOFF_MAX   (8 + SPACE_GWHELLO_MAX + 16384) /* hello + early bytes handed over */
#define NETGTW_CHECK_TIMEOUT_MS 5000    /* sbx-manager's answer to a check */

int listen_main(int argc, char **argv);
int gateway_main(int argc, char **argv);

/* write one error answer frame to fd (best effort) and close it */
void gw_refuse(int fd, const char *code, const char *message);
/* drop privileges we do not need; called first by both roles */
void gw_harden(void);

/* pump.c */
struct pump;
struct pump *pump_new(int client, int upstream, bool http, const uint8_t *early, size_t n);
/* poll set: fill up to 2 pollfds, returns count */
int pump_pollfds(struct pump *p, struct pollfd *pf);
/* after poll: false when the pump is finished (then pump_free) */
bool pump_step(struct pump *p, const struct pollfd *pf, int n);
/* the lease ended (generation change, the gateway stopping): a WebSocket
 * close 4409 to an upgraded client, then a reset; a reset for the rest */
void pump_lease_end(struct pump *p);
void pump_free(struct pump *p);
#endif
