/* The execution substrate behind spaced-host: one small table of
 * operations per implementation (substrate_<impl>.c), so the bridge does
 * not know whether its guest is a jail or a microVM.
 *
 * launch() starts the guest (spaced-guest as the first process of the
 * execution) and hands back the host end of the control channel: a stream
 * socket whose peer is that guest and nothing else. It gives the guest the
 * per-activation secret by a channel no other process can read (jail: an
 * inherited pipe). The bridge then challenges the guest over the channel.
 *
 * Firecracker (designed, not built here: no microVM boots on these
 * machines): launch() would start firecracker under its jailer with the
 * template's kernel and a rootfs drive plus the writable layer as a second
 * drive, check that the vsock UDS listener belongs to that firecracker
 * process (DESIGN section 6), connect the vsock port of spaced-guest and
 * return that connection as the control channel; the secret would travel
 * in the VM's MMDS or a one-shot vsock port read before the guest opens the
 * control port. Operation sockets cannot be passed over vsock, so that
 * implementation would set `passes_fds = false` and the bridge would open
 * one vsock connection per operation instead of MSG_OPEN. See docs/jail.md. */
#ifndef SPACE_SUBSTRATE_H
#define SPACE_SUBSTRATE_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "guestmac.h"

struct substrate_config {
	const char *sandbox;
	uint64_t generation;
	uint32_t activation;
	const char *template_name;      /* "host", or a template image's digest */
	const char *template_image;     /* that image (sbx-manager's cache); NULL for host */
	const char *run_dir;            /* 0700, made by sbx-manager */
	const char *layer_dir;          /* persistent writable layer */
	const char *guest_path;         /* the spaced-guest binary on the host */
	uid_t uid_base;                 /* host uids uid_base .. +65535 */
	unsigned memory_mb, pids, cpu_percent, disk_mb;
	char nameserver[16];            /* resolv.conf's, "" = none (docs/network.md) */
	const char *netns;              /* the execution's network namespace to join
	                                 * (kept across activations), or NULL: a new one */
	unsigned orphan_wait_s;         /* how long a jail whose bridge is gone waits
	                                 * for the next one (docs/jail.md) */
	bool pool;                      /* prepare a jail for the worker's pool: its
	                                 * guest waits unbound (docs/worker.md) */
	const char *claim_from;         /* bind the prepared jail of this pool
	                                 * identity (generation 1), or NULL */
};

struct substrate;

struct substrate_ops {
	const char *name;
	bool passes_fds;                /* control channel can carry SCM_RIGHTS */
	/* start the guest, or attach to the one a previous bridge of this
	 * execution left running (docs/jail.md); *control gets the host end
	 * of the control channel (O_CLOEXEC). 0 or -errno; on failure
	 * everything made is undone. */
	int (*launch)(const struct substrate_config *cfg,
	    const uint8_t secret[GUEST_SECRET_LEN], struct substrate **out, int *control);
	/* the host pid whose exit means the guest is gone */
	pid_t (*guest_pid)(const struct substrate *s);
	/* note that the guest pid was reaped by the caller (SIGCHLD) */
	void (*guest_reaped)(struct substrate *s, int wstatus);
	/* an fd readable once a guest that is not our child (a kept jail,
	 * attached to by this bridge) is gone; -1 when SIGCHLD tells */
	int (*guest_fd)(const struct substrate *s);
	/* number of OOM kills in the execution so far (-errno if unknown) */
	int (*oom_kills)(const struct substrate *s, uint64_t *n);
	/* a read-only descriptor the count can be read from again and again
	 * (cgroup_oom_fd), for the serving process; -errno, or NULL */
	int (*oom_fd)(const struct substrate *s);
	/* the bridge is about to say ready: the execution's CPU quota goes
	 * on now. Until then the jail ran only the platform's own start-up
	 * (no command of the sandbox's), which a small quota would otherwise
	 * stretch (1 % of a CPU: a second). 0 or -errno; NULL: nothing */
	int (*serving)(struct substrate *s);
	/* stop the guest (kill, wait), release cgroups, mounts, devices;
	 * idempotent */
	int (*stop)(struct substrate *s);
	void (*free)(struct substrate *s);
};

extern const struct substrate_ops substrate_jail;
/* "jail" -> &substrate_jail; NULL for a substrate this build cannot run */
const struct substrate_ops *substrate_find(const char *name);
#endif
