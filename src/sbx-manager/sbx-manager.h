/* sbx-manager: the privileged worker agent. One file per role:
 *   main.c     options, data directory, threads
 *   records.c  durable runtime records (SQLite) and their in-memory mirror
 *   bridge.c   spawning spaced-host and verifying it on every connection
 *   control.c  the control-plane client (register, heartbeat, keys, status)
 *   ctlproc.c  ... its HTTP half runs in an unprivileged child: starting it,
 *              handing it requests, reading its answers (ctlmsg.h)
 *   ctlchild.c the child itself (`sbx-manager control-client`)
 *   assign.c   install / retire / restart reconciliation
 *   api.c      the node-api socket: admission and relay
 *   lease.c    stream leases and their cancellation
 *   stream.c   the relay of a streaming operation after its RESPONSE
 *   metrics.c  counters, written to D/metrics.prom
 *   refusals.c refusals counted per sandbox, sent with the heartbeat
 *   uidrange.c host uid windows, one per worker on a machine
 *   layer.c    snapshots of the writable layer: archive and restore
 *   netns.c    the execution's network namespace, kept across activations */
#ifndef SBX_MANAGER_H
#define SBX_MANAGER_H
#include <linux/limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "admit.h"
#include "claims.h"
#include "limits.h"
#include "sockdiag.h"
#include "verifier.h"

#define MGR_UID_BASE0        200000u
#define MGR_UID_RANGE        65536u
#define MGR_SLOTS_MAX        256u       /* uid slots of one host uid window (uidrange.c) */
#define MGR_WINDOWS_MAX      255        /* host uid windows per host (uidrange.c) */
#define MGR_WINDOWS_PER_WORKER 4        /* the most one worker claims */
#define MGR_CAPACITY_MAX     (MGR_SLOTS_MAX * MGR_WINDOWS_PER_WORKER)  /* --capacity: 1024 */
#define MGR_READY_TIMEOUT_MS 20000
#define MGR_STOP_GRACE_MS    5000
#define MGR_CONN_DEFAULT     1024       /* concurrent node-api connections (--api-conns) */
#define MGR_CONN_LIMIT       65536      /* the most --api-conns takes */
#define MGR_IO_TIMEOUT_S     30         /* a frame stalled half-way */
#define MGR_HASH_HEX         64         /* BLAKE2b-256 in hex */
#define MGR_SNAPSHOT_GC_GRACE 3600      /* seconds before an archive is offered for collection */
#define MGR_CHECKPOINT_MB 512         /* --checkpoint-mb (checkpoint.c) */
#define MGR_CHECKPOINT_INTERVAL 300   /* --checkpoint-interval, seconds */
#define MGR_KEPT_LAYERS 8               /* retired images kept for a resume or an incremental archive here (kept.c) */
#define MGR_SNAPSHOT_TMP_GRACE 3600     /* seconds unwritten before a writer's .tmp file is deleted */

struct mgr_config {
	char data_dir[1024];
	char control_url[1024];
	char worker_id[SPACE_ID_MAX + 1];
	uint8_t root_pk[32];
	char endpoint[1024];
	unsigned capacity;
	unsigned api_conns;              /* concurrent node-api connections (streams included) */
	char api_group[64];
	gid_t api_gid;                  /* (gid_t)-1: root only */
	char spaced_host[PATH_MAX];
	char incarnation[SPACE_ID_MAX + 1];
	uint32_t uid_window;             /* the first of this worker's host uid windows */
	uint32_t uid_windows;            /* how many (slots: uid_windows * MGR_SLOTS_MAX) */
	uint32_t disk_mb;               /* default writable layer size */
	unsigned layer_pool;            /* fresh layer images kept ready (layerpool.c) */
	unsigned netns_pool;            /* network namespaces kept ready (netnspool.c) */
	unsigned jail_pool;             /* prepared jails kept ready (jailpool.c) */
	unsigned kept_layers;           /* retired images kept for a resume here (kept.c) */
	unsigned checkpoint_mb;         /* a serving layer grown by this much is checkpointed, 0 never (checkpoint.c) */
	unsigned checkpoint_interval;   /* seconds at least between two checkpoints of one execution */
	char snapshot_dir[1024];        /* this worker's archive cache (DATA/snapshots by default) */
	unsigned snapshot_gc_grace;     /* seconds: younger archives are never offered */
};

/* one runtime record; the durable copy is the row in records.db */
struct record {
	struct route_identity id;
	enum exec_state state;
	uint64_t epoch;
	uint32_t slot;
	uint32_t uid_base;
	char template_name[SPACE_ID_MAX + 1];
	uint32_t memory_mb, pids, cpu_percent, disk_mb;
	/* the bridge as it was when it said "ready PID": its root monitor
	 * (the process we spawned, stopped and watched through a pidfd) and
	 * its serving process (PID, the monitor's child that listens on
	 * bridge.sock and is what SO_PEERCRED and sock_diag must find) */
	pid_t bridge_pid;               /* the monitor */
	uint64_t bridge_start;          /* /proc/PID/stat field 22 */
	pid_t serve_pid;                /* the serving process */
	uint64_t serve_start;
	uid_t bridge_uid;               /* the serving process's uid */
	uint64_t exe_dev, exe_ino;      /* stat of /proc/PID/exe (both run it) */
	char exe_hash[MGR_HASH_HEX + 1];
	char run_dir[PATH_MAX];
	char layer_dir[PATH_MAX];
	char snapshot[MGR_HASH_HEX + 1];        /* the layer was restored from it; once retired, the archive made of it; or "" */
};

/* the state of each role, private to its file */
struct mgr_records;     /* records.c */
struct mgr_leases;      /* lease.c */
struct mgr_metrics;     /* metrics.c */
struct mgr_assign;      /* assign.c */
struct mgr_control;     /* control.c */
struct mgr_reclaim;     /* reclaim.c */
struct mgr_ctlproc;     /* ctlproc.c */
struct mgr_bpool;       /* bridgepool.c */

/* One sbx-manager: made by main, handed to every thread and function that
 * needs it; nothing of it is a process-wide global. cfg and verifier are
 * set before the first thread starts; cfg is read-only after that (the
 * verifier locks itself). The flags are atomics: threads read them without
 * a lock. */
struct mgr {
	struct mgr_config cfg;
	struct verifier *verifier;
	atomic_bool stopping;
	atomic_bool registered;         /* the control plane accepted us */
	int api_fd;                     /* the node-api listener */
	atomic_uint nconns;             /* node-api connections being served */
	struct mgr_records *records;
	struct mgr_leases *leases;
	struct mgr_metrics *metrics;
	struct mgr_assign *assign;
	struct mgr_control *control;
	struct mgr_reclaim *reclaim;
	struct mgr_ctlproc *ctlproc;
	struct mgr_bpool *bpool;
};

/* records.c */
int records_open(struct mgr *m, const char *path);
void records_close(struct mgr *m);
/* copy of the record of sandbox; -ENOENT when there is none */
int records_get(struct mgr *m, const char *sandbox, struct record *out);
/* commit r (insert or replace), then update the mirror; 0 or -EIO. On
 * disk when it returns; the records of concurrent callers share a commit */
int records_put(struct mgr *m, const struct record *r);
/* every record, malloc'd array */
int records_all(struct mgr *m, struct record **out, size_t *n);
/* the serving records in brief, for a pass over them all (the metrics'
 * over the bridges every 2 s, checkpoint.c's every 5 s): one malloc'd
 * array, the strings in it (a record is some 9 KiB: these passes copy
 * a few hundred bytes of each, not a thousand records) */
struct record_brief {
	struct route_identity id;
	bool restored;                  /* its layer came from an archive */
	const char *run_dir, *layer_dir;
};
int records_serving_brief(struct mgr *m, struct record_brief **out, size_t *n);
/* records_put of a new install's r with its uid slot chosen in the same
 * step: the sandbox's own when it has a record, else the lowest not held
 * by a live (not retired / failed) record of another sandbox, committed or
 * being committed; sets r->slot and r->uid_base. -ENOSPC when none is left */
int records_put_slotted(struct mgr *m, struct record *r, uint32_t uid_window);
/* a uid slot for a prepared jail (jailpool.c): the lowest no live record
 * holds and no other prepared jail; kept from every records_put_slotted
 * until released or claimed. -ENOSPC when none is left */
int records_slot_reserve(struct mgr *m, uint32_t *slot);
void records_slot_release(struct mgr *m, uint32_t slot);
/* records_put of a new install's r with the reserved slot of the prepared
 * jail it claims (which stops being reserved); -EEXIST when the sandbox
 * has a record (it keeps its own slot: the jail is not for it) */
int records_put_claimed(struct mgr *m, struct record *r, uint32_t uid_window, uint32_t slot);
/* the slot of an execution whose end is committed (retired, failed) while
 * its processes may still run: held from before that commit until its
 * jail is stopped, so that no other sandbox's install starts processes
 * on the host uids the old ones still run under. Nested holds of one
 * slot are counted; a drained slot is free again. */
void records_slot_draining(struct mgr *m, uint32_t slot);
void records_slot_drained(struct mgr *m, uint32_t slot);
int records_meta_get(struct mgr *m, const char *key, uint64_t *val);
/* a value for where a restart resumes (assign_rev): written without a
 * fsync of its own, durable with the next record's commit (records.c) */
int records_meta_set(struct mgr *m, const char *key, uint64_t val);

/* bridgepool.c: kept bridge connections, each tied to one execution */
int  bpool_init(struct mgr *m);
/* a kept connection to the bridge of exactly r (identity, epoch, serving
 * process), idle and not hung up, the bridge still passing
 * bridge_identity_check and its socket file the one connected to (its
 * ids in *sock_dev, *sock_ino); -1 when there is none */
int  bpool_take(struct mgr *m, const struct record *r, uint64_t *sock_dev, uint64_t *sock_ino);
/* keep fd (whose last operation ended cleanly) for r, connected through
 * the socket file sock_dev/sock_ino, or close it */
void bpool_give(struct mgr *m, const struct record *r, int fd, uint64_t sock_dev,
    uint64_t sock_ino);
/* close every kept connection of sandbox (replaced or retired) */
void bpool_drop(struct mgr *m, const char *sandbox);
/* at the execution's start (r committed serving): a connection to its
 * bridge opened, verified and greeted as for an operation, and kept, so
 * that the first operation finds one; on a short-lived thread of its own
 * (at most 16 at once), nothing when it cannot be */
void bpool_open_ahead(struct mgr *m, const struct record *r);

/* bridge.c */
/* spawn spaced-host for r and wait for "ready"; fills the bridge fields.
 * *pidfd_out is a pidfd of the bridge. 0 or -errno, *why set; -ECHILD
 * when the bridge died while starting (the one failure worth a relaunch),
 * -EPROTO when it said something else, -EACCES when the binary changed,
 * -ETIMEDOUT when it was not ready in time. */
int bridge_spawn(const struct mgr *m, struct record *r, int *pidfd_out, const char **why);
/* the same, binding the prepared jail claim_from (jailpool.c) when not NULL */
int bridge_spawn_claim(const struct mgr *m, struct record *r, const char *claim_from,
    int *pidfd_out, const char **why);
/* a prepared jail's kept bridge (bridge.c): started for j with argv
 * (argv[0] is set here), 0 once it said "pooled GUESTPID" (j->pid set);
 * ended without a claim (its jail left as it is, reaped); claimed for r:
 * 0 and *pidfd_out its pidfd once ready and checked as bridge_spawn's,
 * -ESRCH when nothing was claimed (it was gone, or cannot be given this
 * claim: the jail is as prepared, and the kept bridge ended), other
 * -errno when it failed (stopped). j's bridge is not j's any more after
 * a claim, whatever it returned. */
struct jailpool_jail;
int  bridge_pool_spawn(const struct mgr *m, char **argv, struct jailpool_jail *j);
void bridge_pool_end(struct jailpool_jail *j);
int  bridge_pool_claim(const struct mgr *m, struct record *r, struct jailpool_jail *j,
    int *pidfd_out, const char **why);

/* template.c: the cache of template images (docs/templates.md) */
int  template_path(const struct mgr *m, const char *digest, char *path, size_t cap);
/* path of the verified image of digest, fetched first when missing;
 * 0 or -errno with *why (-EBADMSG: the bytes had another digest) */
int  template_ensure(const struct mgr *m, const char *digest, char *path, size_t cap, const char **why);
void template_sweep(struct mgr *m);
/* fetchpipe.c: the bytes from the control client's pipe rfd into fd,
 * each piece given to update(h) first; they end when the child closes
 * its end. 0, -EFBIG (more than max), -ETIMEDOUT (nothing for a minute:
 * longer than the child's own stall limit) or -errno */
int  fetch_pipe(int rfd, int fd, uint64_t max, void (*update)(void *, const void *, size_t), void *h,
    bool durable);
/* snapblob.c: archives by digest to and from the control plane. put
 * uploads CACHE/DIGEST.snap; fetch makes CACHE/DIGEST.snap present,
 * downloading and verifying it when missing. 0 or -errno with *why
 * (fetch: -ENOENT unknown there, -EBADMSG the bytes had another digest) */
int  snapblob_put(struct mgr *m, const char *digest, const char **why);
/* an upload while the archive is made: begin gives the pipe to tee it
 * into, end closes it and waits for the control plane (0: stored) */
struct ctl_call;
int  snapblob_stream_begin(struct mgr *m, int *wfd, struct ctl_call **k);
int  snapblob_stream_end(struct mgr *m, struct ctl_call *k, int wfd, bool complete,
    const char *digest, uint64_t size);
int  snapblob_fetch(struct mgr *m, const char *digest, const char **why);
/* removes CACHE/DIGEST.snap (a copy that failed verification) */
void snapblob_drop(struct mgr *m, const char *digest);
/* A download a restore reads while it arrives (layer.c): 1 when the
 * cache has the archive (nothing started), 0 when it started (*dl, and
 * *rfd a descriptor of the file it is written into), or -errno (-EAGAIN:
 * no control client now). snapblob_more and snapblob_passed are a
 * snapshot_feed's more() and passed();
 * snapblob_follow_end waits for the download's end, frees dl and returns
 * its result: 0 when the transfer completed, -EBADMSG when its bytes were
 * not the digest, or the transfer's -errno (-EAGAIN: cut short, fetch it
 * again). The download does not hash what it writes: restore says what
 * the restore that read the file found. SNAPBLOB_RESTORED: it read every
 * byte and they were the digest, so the file enters the cache as it is;
 * SNAPBLOB_REFUSED: it failed, so the file is hashed once more to tell a
 * mismatch (-EBADMSG, logged) from an archive that is the digest (kept);
 * SNAPBLOB_UNREAD: no restore ran, the file is dropped. A download past
 * SPACE_FOLLOW_CACHE_MAX is released behind the restore as it reads: it
 * never enters the cache, and a refusal answers -ESTALE (the bytes are
 * gone: a download of their own must tell). */
struct snapblob_dl;
enum { SNAPBLOB_UNREAD, SNAPBLOB_RESTORED, SNAPBLOB_REFUSED };
int  snapblob_follow(struct mgr *m, const char *digest, struct snapblob_dl **dl, int *rfd,
    const char **why);
int64_t snapblob_more(void *ctx, uint64_t have, bool *end);
void snapblob_passed(void *ctx, uint64_t off);
int  snapblob_follow_end(struct snapblob_dl *dl, int restore, const char **why);
/* connect to r's bridge.sock and verify the peer (DESIGN section 6);
 * returns the connected fd or -errno with *why set. Nothing is written
 * to the socket before this returns a fd. */
int bridge_connect(const struct mgr *m, const struct record *r, const char **why);
/* api.c: bridge_connect, then HELLO; -EPERM not the recorded bridge,
 * -EPROTO it refused us, another -errno unreachable (*why set) */
int bridge_open(struct mgr *m, const struct record *rec, const char **why);
/* the socket file on the bridge's path (in its private run directory):
 * a kept connection is used only while it is still the one connected to */
int bridge_sock_id(const struct record *r, uint64_t *dev, uint64_t *ino);
/* the process identity checks alone (pid alive, start time, exe) */
int bridge_identity_check(const struct mgr *m, const struct record *r, const char **why);
/* BLAKE2b of /proc/PID/exe against the hash recorded at start */
int bridge_hash_check(const struct record *r, const char **why);
/* SIGTERM through a pidfd, SIGKILL after the grace period */
void bridge_stop(int pidfd);
int bridge_pidfd_open_checked(const struct record *r);
int proc_start_time(pid_t pid, uint64_t *out);

/* control.c */
int control_init(struct mgr *m);
int control_register(struct mgr *m);
void *control_heartbeat_thread(void *m);
void *control_keys_thread(void *m);
/* the status and snapshot reports below are queued, in order, and sent by
 * this thread: no caller waits for the control plane (and so none holds
 * a lock across a network call) */
void *control_reporter_thread(void *m);
int control_fetch_keys(struct mgr *m);
int control_load_keys(struct mgr *m);
/* long-poll for the assignments after revision `after`, decoded by the one
 * strict codec (msg.h): 0 with *out filled (msg_assignments_free), -EPERM
 * when the control plane refuses our credential, -EIO otherwise (no answer,
 * or one that is not an assignments answer) */
struct msg_assignments;
int control_assignments(struct mgr *m, uint64_t after, int wait_s, struct msg_assignments *out);
int control_report(struct mgr *m, const struct route_identity *id, const char *state, const char *error);
/* retired, with the archive of the layer ({"digest","size"}) or null + error */
int control_report_retired(struct mgr *m, const struct route_identity *id, const char *digest,
    uint64_t size, const char *error);
/* POST /v1/workers/{id}/snapshots: the result of a live snapshot */
/* "failed", with the archive of the stopped layer when there is one
 * (digest NULL: none), so the sandbox can be resumed from it */
int control_report_failed(struct mgr *m, const struct route_identity *id, const char *error,
    const char *digest, uint64_t size);
/* a checkpoint (digest, size) of execution id, answered at once: 0 once
 * the control plane recorded it, -ESTALE refused, -EIO not answered */
int control_checkpoint(struct mgr *m, const struct route_identity *id, const char *digest,
    uint64_t size, const char *layer_base);
int control_report_snapshot(struct mgr *m, const char *snapshot_id, const struct route_identity *id,
    const char *digest, uint64_t size, const char *error);

/* POST /v1/workers/{id}/archives with body; 0 with the digests the
 * answer names (*digests malloc'd, *n of them) when it answered 200 with
 * a well-formed answer */
int control_archives(struct mgr *m, const char *body, char (**digests)[65], size_t *n);

/* ctlproc.c: the unprivileged child that speaks HTTP for us. cred_fd is
 * the open credential file, handed to each child and never read here. */
struct ctlmsg;
struct ctl_call;
int ctlproc_init(struct mgr *m, int cred_fd, int verbose);
void *ctlproc_thread(void *m);          /* starts the child, reads it, restarts it */
/* send req (its id is set here), with fd passed along when >= 0; then
 * ctlproc_wait for the answer (ASSIGN_GET: *as filled). -EIO when there
 * is no child (after waiting a little for one), -ETIMEDOUT, or when the
 * child died or broke the protocol before answering. */
int ctlproc_start(struct mgr *m, struct ctlmsg *req, int fd, struct msg_assignments *as,
    struct ctl_call **out);
int ctlproc_wait(struct mgr *m, struct ctl_call *k, int timeout_s, struct ctlmsg *ans);
int ctlproc_call(struct mgr *m, struct ctlmsg *req, int timeout_s, struct ctlmsg *ans,
    struct msg_assignments *as);
pid_t ctlproc_pid(struct mgr *m);
/* ctlchild.c: main of `sbx-manager control-client` */
int ctlchild_main(int argc, char **argv);

/* archive_gc.c: one pass of the snapshot store's collection */
void archive_gc_pass(struct mgr *m);

/* assign.c */
int assign_init(struct mgr *m);
void *assign_thread(void *m);
int assign_reconcile(struct mgr *m);
void *assign_monitor_thread(void *m);
void assign_shutdown(struct mgr *m);

/* lease.c */
struct lease;
int lease_init(struct mgr *m);
struct lease *lease_add(struct mgr *m, const struct route_identity *id, uint64_t epoch, int cfd, int bfd);
void lease_remove(struct mgr *m, struct lease *l);
void lease_set_bridge(struct mgr *m, struct lease *l, int bfd);
bool lease_cancelled(struct mgr *m, struct lease *l);
/* cancel every lease of sandbox with an epoch below `epoch` */
unsigned lease_cancel_before(struct mgr *m, const char *sandbox, uint64_t epoch);
unsigned lease_count(struct mgr *m);

/* stream.c: relay MSG_STREAM frames both ways until either side ends or
 * the lease is cancelled (then CANCEL to the client) */
void stream_relay(struct mgr *m, int cfd, int bfd, struct lease *l, const char *sandbox);

/* api.c */
int api_listen(struct mgr *m, const char *path);
void *api_accept_thread(void *m);

/* metrics.c */
enum mgr_counter {
	MC_REQUESTS, MC_ALLOW, MC_BAD_REQUEST, MC_BRIDGE_REFUSED, MC_BRIDGE_UNREACHABLE,
	MC_SERVING_MISMATCH, MC_LEASES_CANCELLED, MC_INSTALLS, MC_INSTALL_FAILED,
	MC_RETIRES, MC_RELAUNCHES, MC_PEER_REFUSED, MC_CONN_LIMIT, MC_RECLAIMS,
	MC_ARCHIVES_COLLECTED, MC_BRIDGE_KEPT_USED, MC_BRIDGE_KEPT_DROPPED, MC_RECORD_COMMITS,
	MC_RECORDS_WRITTEN, MC_JAILPOOL_MADE, MC_JAILPOOL_CLAIMED, MC_BRIDGE_OPENED_AHEAD,
	MC_ARCHIVES_INCREMENTAL, MC_KEPT_AS_IS, MC_KEPT_ONTO, MC_RESTORE_AGAIN,
	MC_NETWORK_FOLDED, MC_CHECKPOINTS, MC_CHECKPOINT_FAILED,
	MC__COUNT
};
int metrics_init(struct mgr *m);
void metrics_inc(struct mgr *m, enum mgr_counter c);
void metrics_admission(struct mgr *m, enum admit_outcome o, enum admit_reason r);
void metrics_bridge_refusal(struct mgr *m, const char *why);
void *metrics_thread(void *m);
int metrics_write(struct mgr *m);
/* disk use, measured by the metrics thread every DISK_EVERY writes */
void metrics_disk_set(struct mgr *m, uint64_t exec, uint64_t run, uint64_t snapshots, uint64_t kept);
bool metrics_disk_get(struct mgr *m, uint64_t out[3]);         /* false until measured */

/* layerpool.c: fresh layer images made ahead of creates. start: wipe the
 * pool directory, start the thread that fills it (nothing when
 * cfg.layer_pool is 0); claim: move one into r's layer directory when r's
 * layer is new and of the pool's size, true if it did */
void layerpool_start(struct mgr *m);

/* jailbase.c: the jails' base mount namespace, bound on D/jail-mntns
 * (made at start, dropped at a clean stop) */
void jailbase_make(const struct mgr *m);
void jailbase_drop(const struct mgr *m);
bool layerpool_claim(struct mgr *m, const struct record *r);

/* jailpool.c: prepared jails (docs/worker.md, "Prepared jails"). start:
 * destroy every marked jail of an earlier life, start the thread that
 * keeps cfg.jail_pool ready. take: one out of the pool for r (host
 * template, pool's disk size and pids), never handed out again. bind:
 * its run and layer directories become r's (after r's record, with the
 * jail's slot, is committed). discard: destroy it (reserved: its slot is
 * still the pool's, not a record's) */
struct jailpool_jail {
	char name[SPACE_ID_MAX + 1];
	uint32_t slot;
	pid_t pid;                      /* its guest */
	int pidfd;                      /* its guest: readable once it died */
	/* its kept bridge (spaced-host --pool, waiting for its claim; 0 /
	 * -1 once gone or handed over): pid, pidfd, the pipe the claim is
	 * written to, the one "ready PID" comes on, the spaced-host file it
	 * was started from and that file's state then */
	pid_t mon;
	int mon_pidfd, claim_fd, ready_fd, exefd;
	struct stat xst;
};
/* destroy an earlier life's prepared jails (before any install can take
 * a slot); jailpool_fill starts making new ones, once assign_reconcile
 * stopped the bridges of retired and failed records (a prepared jail
 * reserves a slot and starts processes on its uids) */
void jailpool_start(struct mgr *m);
void jailpool_fill(struct mgr *m);
bool jailpool_take(struct mgr *m, const struct record *r, struct jailpool_jail *out);
int  jailpool_bind(struct mgr *m, const struct record *r, const struct jailpool_jail *j);
void jailpool_discard(struct mgr *m, struct jailpool_jail *j, bool reserved);
/* after r's bridge said ready: did it bind the prepared jail j (its guest
 * alive in r's cgroup) rather than start a new jail? Then j's guest
 * descriptor is closed (jailpool_release alone does only that) */
bool jailpool_claimed(struct mgr *m, const struct record *r, struct jailpool_jail *j);
void jailpool_release(struct jailpool_jail *j);
/* a clean stop: no more claims, the filler ends, every unclaimed prepared
 * jail is destroyed as at a start */
void jailpool_stop(struct mgr *m);

/* idle.c: idle moments for the pools' refills. The lanes count installs
 * (begin/end); idle_wait returns once none is in flight and none started
 * or ended in the last moment (false: stopping) */
void idle_install_begin(void);
void idle_install_end(void);
bool idle_wait(void);
/* installs running now (the caller's own included when it is one) */
unsigned idle_installs(void);
void idle_stop(void);

/* layer.c (digest buffers are SNAPSHOT_DIGEST_HEX + 1 = 65 bytes) */
/* layer_snapshot_*: *uploaded says the control plane already stored the
 * archive (it was uploaded while it was made); else snapblob_put sends it */
int layer_snapshot_live(struct mgr *m, const struct record *r, char digest[65], uint64_t *size,
    bool *uploaded);
/* after the bridge ended: detach a mount it left, wait (bounded) until no
 * file system of the image is left; 0 or -EBUSY */
int layer_release(const struct record *r);
/* a checkpoint of a serving layer (docs/worker.md, "Checkpoints"): the
 * layer synced, the index of what it holds built (*next), then archived
 * while it runs, as a delta of its base when its index allows (*depth),
 * and uploaded; the caller makes *next the layer's index
 * (layer_checkpoint_commit) once the control plane recorded digest */
struct snapshot_index;
int layer_checkpoint(struct mgr *m, const struct record *r, char digest[65], uint64_t *size,
    unsigned *depth, char layer_base[65], struct snapshot_index **next);
int layer_checkpoint_commit(const struct record *r, struct snapshot_index *next,
    const char *digest, unsigned depth);
/* a delta of the archive the layer was restored from when its index
 * allows (*depth: how many deltas deep the archive is, 0 whole) */
int layer_snapshot_stopped(struct mgr *m, const struct record *r, char digest[65],
    uint64_t *size, bool *uploaded, unsigned *depth);
int layer_restore(const struct mgr *m, const struct record *r, const char *digest, const char **why);

/* checkpoint.c: serving layers grown by --checkpoint-mb since their last
 * archive are checkpointed in their sandbox's lane (assign_checkpoint) */
void *checkpoint_thread(void *m);
/* the job ended: ok, and the layer's use in bytes when it began */
void checkpoint_done(const char *sandbox, uint64_t generation, bool ok, uint64_t used);
/* bytes in use in the serving layer of r (its file system), or -errno */
int64_t checkpoint_used(const struct record *r);
/* assign.c: a checkpoint of execution id queued in its sandbox's lane */
int assign_checkpoint(struct mgr *m, const struct route_identity *id);

/* kept.c: the image a retired execution was archived from, kept for
 * the same sandbox's next install here (docs/worker.md, "Kept layers") */
void kept_keep(const struct mgr *m, const struct record *r, const char *digest, unsigned depth);
int kept_peek(const struct mgr *m, const char *sandbox, char digest[65], unsigned *depth);
int kept_take(const struct mgr *m, const char *sandbox, const char *img, uint64_t size);
void kept_drop(const struct mgr *m, const char *sandbox);
void kept_forget_digest(const struct mgr *m, const char *digest);
size_t kept_tags(const struct mgr *m, char (*digests)[65], int64_t *ages, size_t max);

/* reclaim.c: deleting a retired execution's layer and run directory,
 * crash-safe (a journal entry first, finished by reclaim_resume) */
int reclaim_init(struct mgr *m);
int reclaim_execution(struct mgr *m, const struct record *r);
void reclaim_resume(struct mgr *m);
uint64_t reclaim_du(const char *dir);   /* bytes allocated beneath dir */

/* uidrange.c */
/* the window of data_dir on this host, claimed once and kept */
int uid_window_claim(const char *data_dir, unsigned want, uint32_t *window, uint32_t *count);
unsigned uid_windows_for(unsigned capacity);
uint32_t uid_base_for(uint32_t window, uint32_t slot);

/* refusals.c: refusals counted per sandbox and outcome, reported with
 * the heartbeat; known = this worker has a record of the sandbox */
#define REFUSAL_OUTCOMES 3      /* refresh_route, deny, expired */
struct refusal_sent { char sandbox[SPACE_ID_MAX + 1]; uint64_t n[REFUSAL_OUTCOMES]; };
void refusals_count(const char *sandbox, bool known, enum admit_outcome o);
size_t refusals_report(struct refusal_sent *sent, size_t max, char *body, size_t cap);
void refusals_sent(const struct refusal_sent *sent, size_t n);
void refusals_metrics(FILE *f);

/* audit: one log line with both identities */
void audit_refusal(const char *what, const char *op, const char *sandbox,
    const struct capability *cap, const struct record *rec, const char *outcome,
    const char *reason);
#endif
