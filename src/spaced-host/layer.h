/* The writable layer of a jail execution, see layer.c. */
#ifndef SPACED_HOST_LAYER_H
#define SPACED_HOST_LAYER_H
#include <stdbool.h>
#include <stdint.h>

#include "hostmon.h"
#include "substrate.h"

/* ids mapped into the user ns: 0..65534 of the sandbox's 65536; the last
 * one (uid_base + SPACE_BRIDGE_UID_OFFSET) is the bridge's serving
 * process, which nothing inside the sandbox may ever be */
#define JAIL_IDS        SPACE_BRIDGE_UID_OFFSET
#define JAIL_USER_UID   1000            /* the sandbox user inside */

struct layer {
	char rw[1024];                  /* RUNDIR/rw: where the image is mounted */
	bool mounted;
	int lock_fd;                    /* flock on the image while we use it; -1 */
	uint64_t mkfs_ns;               /* time spent making the image; 0: it was there */
};

/* make the image on first use (sparse, disk_mb), lock it, detach mounts a
 * killed bridge left, mount it at RUNDIR/rw, move a restored layer into our
 * uid range, ensure home/ and tmp/; 0 or -errno (then call layer_close) */
int layer_open(struct layer *l, const struct substrate_config *cfg);
/* unmount and unlock; idempotent */
int layer_adopt(struct layer *l, const struct substrate_config *cfg);
void layer_close(struct layer *l);
#endif
