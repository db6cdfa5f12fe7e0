/* space-control: the control plane daemon. Internal interfaces between its
 * roles (one file each): http, auth, the API handlers, scheduler, keyring,
 * capability issuance, metrics. */
#ifndef SPACE_CONTROL_CONTROL_H
#define SPACE_CONTROL_CONTROL_H
#include <linux/limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <jansson.h>

#include "claims.h"
#include "keys.h"
#include "limits.h"
#include "store.h"

#define CONTROL_PROG            "space-control"
#define CONTROL_LISTEN_DEFAULT  "127.0.0.1:7700"
#define CONTROL_HEARTBEAT_DEF   15      /* seconds without heartbeat -> lost */
#define CONTROL_PUBLISH_DELAY   30      /* seconds a new key is published before use */
#define CONTROL_CAPACITY_MAX    100000
#define CONTROL_LEASE_TTL       60      /* seconds an operation's lease lasts unrenewed */
#define CONTROL_ARCHIVE_GRACE   3600    /* seconds a reported archive is a pending reference */
#define CONTROL_MAX_NAMED_SNAPSHOTS 64 /* named snapshots one sandbox may hold (--max-named-snapshots) */
#define CONTROL_MAX_NAMED_SNAPSHOT_MB 65536 /* MiB of named snapshots one principal may hold (--max-named-snapshot-mb) */
#define CONTROL_AUDIT_KEEP_DAYS 90   /* audit rows kept (--audit-keep-days) */
#define CONTROL_NET_CHANGES_PER_MIN 120 /* network changes of one sandbox a minute (--network-changes-per-minute) */
/* seconds a lost worker keeps its executions before they are placed
 * elsewhere: a capability's lifetime and the clock skew, so that none
 * issued for the lost execution is still valid when its successor serves */
#define CONTROL_LOST_GRACE      135

/* what a tenant may ask of one sandbox, and what it gets when it asks
 * nothing: sized for a 24 GiB, few-core worker; the operator changes them
 * with the flags of the same names (docs/operations.md) */
#define CONTROL_RES_LIMITS_MAX  (1 << 24)        /* bound of every limit flag */
#define CONTROL_MAX_MEMORY_MB   8192
#define CONTROL_DEF_MEMORY_MB   512
#define CONTROL_MAX_PIDS        4096
#define CONTROL_DEF_PIDS        256
#define CONTROL_MAX_CPU_PERCENT 400              /* percent of one CPU */
#define CONTROL_DEF_CPU_PERCENT 100
#define CONTROL_MAX_DISK_MB     16384            /* writable layer */
#define CONTROL_DEF_DISK_MB     4096
/* placement: how far the sum asked of a worker may exceed what it
 * reported, in percent. cpu_percent is a cap (cgroup cpu.max), shared in
 * time, so it is overcommitted by default; memory is not; a layer is a
 * sparse file that fills only as it is written */
#define CONTROL_OVERCOMMIT_MEMORY 100
#define CONTROL_OVERCOMMIT_CPU    1000
#define CONTROL_OVERCOMMIT_DISK   200
/* the templates the workers' substrate provides (spaced-host: "host") */
#define CONTROL_TEMPLATES         "host"

struct config {
	char    data_dir[PATH_MAX];
	char    listen[128];
	char    tls_cert[PATH_MAX];
	char    tls_key[PATH_MAX];
	char    store[PATH_MAX + 8];
	int     heartbeat_timeout;
	int     rotate_publish_delay;
	int     lease_ttl;
	int     http_head_timeout;      /* limits.h defaults */
	int     http_heads_per_ip;
	int     http_conns_per_ip;
	int     route_wait_ms;          /* SPACE_ROUTE_WAIT_MS: a route waits for a converging execution */
	int     lost_grace;             /* seconds lost before its executions are re-placed */
	int     archive_grace;          /* seconds: a reported digest is kept at least this long */
	int64_t archive_max_mb;         /* MiB of one uploaded snapshot archive (SPACE_ARCHIVE_MAX) */
	int64_t store_min_free_mb;      /* MiB an upload leaves free on its disk (SPACE_STORE_MIN_FREE_MB) */
	int64_t audit_keep_days;        /* audit rows older are removed, 0 = kept forever */
	int64_t max_named_snapshot_mb;  /* MiB of named snapshots one principal may hold, 0 = any */
	int64_t max_named_snapshots;    /* named snapshots one sandbox may hold, 0 = any */
	int64_t net_changes_per_min;    /* network changes of one sandbox a minute, 0 = any (netrate.c) */
	int     route_hold_ms;          /* SPACE_ROUTE_HOLD_MS: a repair's route is held this long */
	struct res res_max, res_def;    /* per sandbox; see CONTROL_MAX_* */
	int64_t pids_max, pids_def;
	struct overcommit oc;
	char    templates[256];         /* comma-separated: what a create may name */
	int     verbose;
};

/* the HTTP process's handle on its signer process (signer_client.c) */
struct signer_conn {
	pthread_mutex_t mu;             /* one request at a time */
	int     fd;                     /* -1 while the signer is down */
	pid_t   pid;
	uint64_t last_spawn;            /* monotonic ns */
	bool    have_root;
	uint8_t root_pk[32];            /* pinned at the first start */
	char    data_dir[PATH_MAX];
	int     verbose;
};

/* what the HTTP process knows of the keys: public halves and their
 * schedule, from the store; refreshed at most every second. The private
 * keys are in the signer process only. */
struct keyring {
	pthread_mutex_t mu;
	struct signer_conn sg;
	char    root_paserk[PASERK_K4_PUBLIC_LEN + 1];
	size_t  n;
	struct key_row rows[SPACE_BUNDLE_KEYS_MAX];
	uint64_t bundle_version;
	char   *bundle;                 /* latest bundle token */
	char    keydir[PATH_MAX];
};

/* wake-up slots of the waits for a sandbox's state (struct ctl) */
#define STATE_SLOTS 64

struct ctl {
	struct config cfg;
	struct store *st;
	struct keyring kr;
	struct http *http;

	/* long-poll wakeups: bumped after an assignment row is committed */
	pthread_mutex_t assign_mu;
	pthread_cond_t  assign_cv;
	uint64_t        assign_seq;
	/* the same for a sandbox's state (GET /v1/sandboxes/ID?until=):
	 * bumped with assign_seq and after each execution report. One
	 * counter per slot, the sandbox's id hashed to its slot: a commit
	 * about one sandbox wakes the waits on the sandboxes of its slot,
	 * not every wait (a hundred clients waiting for a hundred creates
	 * would each read the store again at each of the others' commits) */
	struct {
		pthread_cond_t cv;
		uint64_t seq;
	} state_slot[STATE_SLOTS];
	volatile int    stopping;

	/* this daemon's name as a lease owner: new at every start, so that a
	 * restarted daemon takes over operations only once their lease expired */
	char            instance[SPACE_ID_MAX + 1];
};

/* main.c: the flags and config file of every subcommand, the store they
 * name, and "apikey add" / "worker add" (the secret printed once) */
int  control_parse(int argc, char **argv, struct config *cfg);
struct store *control_store_open(struct config *cfg);
int  control_cred_add(int argc, char **argv, const char *what, const struct key_quota *q);
/* cmd_apikey.c: apikey add | list | revoke */
int  cmd_apikey(int argc, char **argv);
/* cmd_edgekey.c: edgekey create | revoke */
int  cmd_edgekey(int argc, char **argv);

/* keyring.c: starts the signer; verbose is passed on to it */
int  keyring_init(struct keyring *kr, struct store *st, const char *data_dir, int verbose);
void keyring_free(struct keyring *kr);
int  keyring_refresh(struct keyring *kr, struct store *st);
int  keyring_rotate(struct store *st, const char *data_dir, int publish_delay, int verbose,
    char kid_out[PASERK_K4_PID_LEN + 1]);
/* the key to sign with at now: its id and public key */
int  keyring_current(struct keyring *kr, struct store *st, int64_t now,
    char kid[PASERK_K4_PID_LEN + 1], uint8_t pk[32]);
/* latest bundle token (malloc'd) and root PASERK */
int  keyring_bundle(struct keyring *kr, struct store *st, char **bundle,
    char root[PASERK_K4_PUBLIC_LEN + 1]);
/* flock on D/keys/lock: key creation by the daemon and the subcommands */
int  keydir_lock(const char *keydir);

/* signer.c: the signer process ("space-control signer", fd 3) */
int  signer_main(int fd, const char *data_dir);

/* signer_client.c */
struct sig_reply;
int  signer_start(struct signer_conn *sc, const char *data_dir, int verbose);
void signer_stop(struct signer_conn *sc);
/* notices a signer that exited and starts another (at most once a second) */
void signer_check(struct signer_conn *sc);
/* sends msg (consumed) and waits for a reply of type want or ERROR: 0,
 * -errno of the signer's refusal, or -EHOSTDOWN (signer down or broken) */
int  signer_call(struct signer_conn *sc, uint8_t *msg, size_t len, uint16_t want,
    struct sig_reply *rep);

/* capability.c: *token signed for route; audit gets the detail of its
 * "capability.issue" audit row, which the caller writes (after its
 * answer: api_routes.c) */
int  capability_issue(struct ctl *c, const char *principal,
    const struct route_identity *route, enum cap_purpose pur, uint32_t acc,
    uint16_t port, enum cap_proto proto, char **token, int64_t *exp,
    char audit[SPACE_CAP_AUDIT_LEN]);

/* auth.c: secrets are "<prefix>" + base64url(32 random bytes) */
#define SECRET_BODY_LEN 43
int  auth_secret_new(const char *prefix, char *out, size_t cap,
    char id[STORE_CREDID_LEN + 1], uint8_t hash[STORE_HASH_LEN]);
int  auth_user(struct ctl *c, const char *bearer, char principal[SPACE_ID_MAX + 1],
    char key_id[STORE_CREDID_LEN + 1], const char **kind);
int  auth_worker(struct ctl *c, const char *bearer, const char *path_worker,
    const char **kind);
/* an edge credential: 0 and its name; -EACCES (*kind), -EIO, -ENOSYS
 * (the store keeps none) */
int  auth_edge(struct ctl *c, const char *bearer, char name[SPACE_ID_MAX + 1],
    const char **kind);
/* the traffic token of sandbox: 0 it is the one set, -EACCES, -EIO */
int  auth_traffic_token(struct ctl *c, const char *sandbox, const char *token);
/* an access token ("at_") of path_sandbox: 0 and the sandbox's owner;
 * -EACCES (*kind), -EPERM another sandbox's token, -EIO */
int  auth_access_token(struct ctl *c, const char *bearer, const char *path_sandbox,
    char owner[SPACE_ID_MAX + 1], const char **kind);

/* scheduler.c */
int  scheduler_start(struct ctl *c);
void scheduler_stop(struct ctl *c);
/* advance the lifecycle operations of sandbox (NULL = all) after a worker
 * report; wakes long-polls when a step made assignments */
void ops_kick(struct ctl *c, const char *sandbox);
/* the store's wake-ups from other daemons (PostgreSQL's LISTEN), started
 * once; assign_pushed: true while they are certain to come */
int  assign_listen(struct ctl *c);
bool assign_pushed(struct ctl *c);
/* waits until an assignment newer than seq may exist or deadline passes */
uint64_t assign_seq(struct ctl *c);
void assign_wait(struct ctl *c, uint64_t seq, uint64_t deadline_ns);
/* assignments were committed: wakes the long-polls, and the waits for the
 * state of sandbox (NULL: of every sandbox) */
void assign_notify(struct ctl *c, const char *sandbox);
/* sandbox's state may have changed (a commit by this daemon); NULL: any
 * sandbox's */
void state_notify(struct ctl *c, const char *sandbox);
/* waits until sandbox's state may have changed (state_notify after
 * state_seq) or deadline passes */
uint64_t state_seq(struct ctl *c, const char *sandbox);
void state_wait(struct ctl *c, const char *sandbox, uint64_t seq, uint64_t deadline_ns);

/* metrics.c */
void metrics_request(const char *route, unsigned status);
void metrics_capability(enum cap_purpose pur);
void metrics_auth_failure(const char *kind);
void metrics_store_latency(double seconds);
/* n notifications of committed assignments received from the store */
void metrics_store_notifications(unsigned n);
/* sandboxes of lost workers: result "placed" or "failed" */
void metrics_failover(const char *result, int n);
/* audit rows removed past --audit-keep-days */
void metrics_audit_pruned(int n);
/* kind: pause, resume, move, snapshot, other; result: started, ok, failed,
 * abandoned, conflict, refused (static strings) */
void metrics_lifecycle(const char *kind, const char *result);
char *metrics_render(struct ctl *c);
/* api_archives.c: a digest a worker reported is a pending reference for
 * --archive-grace seconds (digest NULL: nothing); the collection's counters */
void api_archive_seen(struct ctl *c, const char *digest);
void api_archives_metrics(FILE *f);
/* archive_blobs.c: what the stored archive of digest is a delta of, ""
 * for a whole one (in base), NULL when not known */
const char *archive_blob_base(const struct ctl *c, const char *digest, char base[65]);
/* api_lifecycle.c: a pause or move of sandbox waits here for a held
 * route; a repair is then handed no new hold (api_routes.c) */
bool api_retire_waiting(const char *sandbox);
void metrics_free(void);
#endif
