/* spaced-host: the per-execution bridge. main.c owns the process (args,
 * launch, challenge, accept loop, stop), challenge.c verifies the guest,
 * bridge.c serves one connection of sbx-manager. */
#ifndef SPACED_HOST_H
#define SPACED_HOST_H
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "admit.h"
#include "guestmac.h"
#include "substrate.h"

struct host {
	struct runtime_record rec;      /* our own identity, state serving */
	struct substrate_config cfg;
	const struct substrate_ops *ops;
	struct substrate *sub;
	int control;                    /* host end of the guest control channel */
	pthread_mutex_t control_mu;     /* one MSG_OPEN at a time on it */
	atomic_bool guest_dead;         /* set once; never cleared (no reconnects) */
	atomic_uint_fast64_t op_seq;
	pthread_mutex_t mu;             /* guards active */
	pthread_cond_t idle;
	unsigned active;                /* connections being served */
};

/* challenge.c: one CHALLENGE/CHALLENGE_REPLY exchange; 0 when the guest
 * proved the secret and reported our identity, -EPERM when it did not,
 * other -errno on I/O errors. *why says what was wrong. */
int challenge_guest(int control, const uint8_t secret[GUEST_SECRET_LEN],
    const struct route_identity *id, int timeout_ms, const char **why);

/* bridge.c: serve one accepted connection (takes ownership of fd) */
void bridge_serve(struct host *h, int fd);
/* answer ERROR and close, for connections refused before a thread */
void bridge_refuse(int fd, int status, const char *code, const char *message);
#endif
