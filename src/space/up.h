/* space up: the single-machine supervisor. cmd_up.c drives the setup
 * sequence; up_proc.c is the process table (spawn, restart with backoff,
 * stop); up_setup.c runs the one-shot admin commands and keeps the files of
 * the data directory (lock, env, credentials). */
#ifndef SPACE_UP_H
#define SPACE_UP_H
#include <stdint.h>
#include <sys/types.h>

#include <uv.h>

#define UP_CHILDREN_MAX    (2 + 2 * UP_WORKERS_MAX)
#define UP_WORKERS_MAX     16
#define UP_ARGS_MAX        32
#define UP_PATH_MAX        4096
#define UP_BACKOFF_MIN_MS  500
#define UP_BACKOFF_MAX_MS  30000
#define UP_STABLE_MS       30000   /* a child that ran this long restarts fast again */
#define UP_KILL_AFTER_MS   10000   /* SIGTERM, then SIGKILL after this */
#define UP_EDGE_OFFSET     80      /* space-edge listens on BASE+80 */
#define UP_E2B_OFFSET      81      /* and serves the E2B-compatible API on BASE+81 */
#define UP_GW_OFFSET       40      /* worker i's netgtw listener on BASE+40+i */

struct up;

struct up_child {
	char             name[48];      /* "space-control", "w1-sbx-manager", ... */
	char            *argv[UP_ARGS_MAX + 1];  /* owned, NULL-terminated */
	char             log[UP_PATH_MAX + 64];
	struct up       *up;
	uv_process_t     proc;
	uv_timer_t       restart;
	int              running;       /* the process handle is live */
	int              closing;       /* the process handle is being closed */
	unsigned         restarts;
	uint64_t         backoff_ms;
	uint64_t         started_ms;
};

struct up {
	uv_loop_t        loop;
	uv_signal_t      sigint, sigterm;
	uv_timer_t       kill_timer;
	struct up_child *kids[UP_CHILDREN_MAX];
	size_t           nkids;
	int              stopping;
	int              failed;        /* setup failed: exit 1 once stopped */
	char             dir[UP_PATH_MAX];      /* absolute data directory */
	char             bindir[UP_PATH_MAX];   /* where our binaries are */
	int              port;
	int              workers;
	int              capacity;      /* sandboxes per worker */
	int              jail_pool;     /* prepared jails per worker (sbx-manager --jail-pool) */
	int              checkpoint_mb; /* sbx-manager --checkpoint-mb */
	int              disk_mb;       /* sbx-manager --disk-mb */
};

/* up_proc.c */
int up_init(struct up *up);
/* adds and starts a child; argv is copied. 0 or -errno */
int up_child_start(struct up *up, const char *name, char *const argv[]);
/* run the loop for up to ms without blocking longer */
void up_pump(struct up *up, unsigned ms);
/* SIGTERM every child, SIGKILL after UP_KILL_AFTER_MS; the loop ends when
 * all of them are gone */
void up_stop(struct up *up);
/* run the loop until everything is stopped and closed, then free */
void up_run(struct up *up);
void up_fini(struct up *up);
void up_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* up_bridges.c: after the children, stop the spaced-host bridges of our
 * data directory (they outlive sbx-manager by design) */
void up_bridges_stop(struct up *up);

/* up_setup.c */
/* flock DIR/up.lock; -EWOULDBLOCK when another space up holds it */
int up_lock(const char *dir, int *fd);
/* run a one-shot command, capture its first stdout line (trimmed) in out;
 * stderr goes to log. 0, -EIO when it failed (exit status), -errno */
int up_capture(char *const argv[], const char *log, char *out, size_t cap);
/* value of KEY= in an env file, or -ENOENT */
int up_env_get(const char *path, const char *key, char *out, size_t cap);
int up_env_write(const char *path, const char *url, const char *key);
/* KEY=value in the env file, replacing any line of KEY */
int up_env_set(const char *path, const char *key, const char *value);
/* a key or credential as a command printed it: one printable token */
int up_token_ok(const char *s);

/* up_edge.c: the edge credential, space-edge on BASE+UP_EDGE_OFFSET, and
 * SPACE_EDGE_URL / SPACE_EDGE_DOMAIN in the env file; its URL in edge_url */
int up_edge_start(struct up *up, const char *control_url, char *edge_url, size_t cap);
#endif
