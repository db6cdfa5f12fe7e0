/* spaced-host: the per-execution bridge, two processes (docs/worker.md):
 *
 *   monitor (root)       main.c: args, the substrate (launch, cgroups, OOM
 *                        count, layer, stop), binds the socket path, counts
 *                        and audits refusals. Parses no frame of anyone.
 *   serving (uid_base + SPACE_BRIDGE_UID_OFFSET, no capabilities,
 *            no_new_privs, seccomp allow list)
 *                        serve.c: challenges the guest (challenge.c),
 *                        listens and serves sbx-manager's connections
 *                        (bridge.c), relaying to the guest.
 * They talk over hostmon.h messages only. */
#ifndef SPACED_HOST_H
#define SPACED_HOST_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdnoreturn.h>

#include "admit.h"
#include "guestmac.h"
#include "hostmon.h"
#include "limits.h"
#include "proto.h"
#include "substrate.h"

struct host {
	struct runtime_record rec;      /* our own identity, state serving */
	struct substrate_config cfg;
	const struct substrate_ops *ops;
	struct substrate *sub;          /* monitor only */
	/* serving process */
	int control;                    /* host end of the guest control channel */
	pthread_mutex_t control_mu;     /* one MSG_OPEN at a time on it */
	int mon;                        /* our end of the monitor channel */
	pthread_mutex_t mon_mu;         /* one query (send + answer) at a time */
	/* the sandbox's OOM kill count, read-only (cgroup_oom_fd), or -1:
	 * then the monitor is asked */
	int oomfd;
	pthread_mutex_t oom_mu;         /* one lseek + read at a time on it */
	atomic_bool guest_dead;         /* set once; never cleared (no reconnects) */
	atomic_uint_fast64_t op_seq;
	/* idle operation channels kept for the next file operation or exec
	 * (bridge.c, docs/jail.md "Operations in the guest"): a small
	 * operation costs a frame round trip, not a socketpair, an OPEN and a
	 * fork in the guest; each is closed after SPACE_OPCHAN_IDLE_MS idle */
	pthread_mutex_t chan_mu;
	int chan_idle[SPACE_OPCHAN_IDLE_MAX];
	uint64_t chan_since[SPACE_OPCHAN_IDLE_MAX];    /* monotonic ns, given back */
	unsigned chan_nidle;
	int chan_wake[2];               /* a byte when one goes idle while the
	                                   serving loop waits without an end */
	bool chan_armed;                /* the serving loop's wait has an end */
	pthread_mutex_t mu;             /* guards active */
	pthread_cond_t idle;
	unsigned active;                /* connections being served */
};

/* serve.c: the serving process, forked by the monitor as root with the
 * control channel, the bound (not listening) socket and its end of the
 * monitor channel; drops to the serving uid, confines itself, challenges
 * the guest (secret is wiped here), says READY, serves until the guest is
 * gone. Never returns. */
noreturn void serve_main(struct host *h, int lfd, uint8_t secret[GUEST_SECRET_LEN]);
/* a prepared jail's serving process (docs/jail.md, "Prepared jails"):
 * forked before any claim with only the monitor's channel (and the OOM
 * count); drops to the serving uid and confines itself at once, then
 * waits for the monitor's CLAIM (hostmon.h: the identity, the secret, the
 * guest's channel, the bound socket) and goes on as serve_main. Never
 * returns. */
noreturn void serve_kept(struct host *h);
/* OOM kills in the execution so far, asked of the monitor; -errno */
int host_oom_kills(struct host *h, uint64_t *n);
/* tell the monitor about a refusal (it counts and audits it) */
void host_refused(struct host *h, enum op_kind op, const char *target,
    const struct capability *cap, struct admit_result res);
/* bridge.c: close the idle operation channels kept longer than
 * SPACE_OPCHAN_IDLE_MS (their children in the guest end); the ms until
 * the next one is due, or -1 when none is idle */
int bridge_chan_expire(struct host *h);
/* bridge.c: at sbx-manager's first connection (serve.c), one operation
 * channel opened ahead and put idle, so that the first exec or small file
 * operation finds its guest child already forked and the user; it idles
 * out like any kept channel. 0, or -1 when none could be opened */
int bridge_chan_ahead(struct host *h);
/* true once the guest is gone (control channel hung up) */
bool host_guest_gone(struct host *h);

/* audit.c (monitor): count a refusal of the serving process, write its
 * audit line with both identities and RUNDIR/metrics.prom */
void refusal_record(const struct host *h, const struct hm_refusal *f);

/* challenge.c: one CHALLENGE/CHALLENGE_REPLY exchange, in two halves so
 * that the guest computes its reply while the serving process builds its
 * filter. challenge_send writes the CHALLENGE (a fresh nonce, returned);
 * challenge_check reads the reply: 0 when the guest proved the secret and
 * reported our identity, -EPERM when it did not, other -errno on I/O
 * errors. *why says what was wrong. */
int challenge_send(int control, uint8_t nonce[GUEST_NONCE_LEN], const char **why);
int challenge_check(int control, const uint8_t secret[GUEST_SECRET_LEN],
    const uint8_t nonce[GUEST_NONCE_LEN], const struct route_identity *id, int timeout_ms,
    const char **why);

/* relay.c: a streaming operation after its RESPONSE, both ways until one
 * side ends it; 0, or -errno when a side broke off */
int bridge_relay_stream(struct host *h, int client, int guest, enum op_kind op);

/* bridge.c: serve one accepted connection (takes ownership of fd) */
void bridge_serve(struct host *h, int fd);
/* answer ERROR and close, for connections refused before a thread */
void bridge_refuse(int fd, int status, const char *code, const char *message);
#endif
