/* Egress of the sandboxes of this worker (egress.c, docs/network.md). */
#ifndef SBX_MANAGER_EGRESS_H
#define SBX_MANAGER_EGRESS_H
#include <stdbool.h>

struct record;
struct netpolicy;

/* --egress, --egress-dns IP, --egress-deny CIDR: 0, -EINVAL bad value,
 * -ENOENT not ours */
int egress_option(const char *name, const char *arg);
bool egress_enabled(void);
/* once at start, before executions are adopted: the table (replacing an
 * earlier run's), forwarding, leftover interfaces removed */
struct mgr;
int egress_init(struct mgr *m);
/* the worker's copy of a sandbox's policy (D/net/<sandbox>.json), read
 * by every attach; forget: when the sandbox leaves this worker */
int egress_policy_save(const char *sandbox, const struct netpolicy *p);
void egress_policy_forget(const char *sandbox);
/* uplink, rules and resolv.conf for r's serving bridge; detach removes
 * them (only if they are still r's) */
int egress_attach(const struct record *r);
/* the jail's nameserver (its gateway, where DNS is forwarded), or "" */
void egress_nameserver(const struct record *r, char out[16]);
void egress_detach(const struct record *r);
/* the process of r's jail whose network namespace is the sandbox's
 * (the gateway enters it too), or -1 */
#include <sys/types.h>
pid_t egress_guest_pid(pid_t monitor);
/* a new policy on r's live uplink, atomically */
int egress_apply(const struct record *r, const struct netpolicy *p);
/* a 'network' assignment (apply() in assign.c) */
struct msg_assignment;
void egress_assignment(const struct msg_assignment *a);
#endif
