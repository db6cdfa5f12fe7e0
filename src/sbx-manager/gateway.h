/* netgtw on this worker (gateway.c, docs/network.md "netgtw"). */
#ifndef SBX_MANAGER_GATEWAY_H
#define SBX_MANAGER_GATEWAY_H
#include <stdbool.h>

struct mgr;
struct record;
struct msg_assignment;

/* --gateway-listen HOST:PORT, --gateway-uid UID: 0, -EINVAL, -ENOENT not ours */
int gateway_option(const char *name, const char *arg);
/* "tcp://HOST:PORT" to register, or NULL when no gateway runs */
const char *gateway_endpoint(void);
/* once at start: the listener process and the check thread */
int gateway_init(struct mgr *m);
/* the declared ports of an install or a 'network' assignment */
void gateway_ports_install(const struct msg_assignment *a);
void gateway_assignment(const struct msg_assignment *a);
/* the gateway of r's serving execution: start; stop (its connections
 * end: reset, or WebSocket close 4409) */
int gateway_attach(const struct record *r);
/* r is a new activation of the execution whose gateway runs (a relaunch,
 * committed starting): the gateway learns it, keeps its connections,
 * and refuses the old activation's capabilities from now on. gateway_
 * attach does the same when the gateway runs, else starts one. */
void gateway_activation(const struct record *r);
void gateway_detach(const struct record *r);
#endif
