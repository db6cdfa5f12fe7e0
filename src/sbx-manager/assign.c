/* Desired state from the control plane: install and retire executions,
 * reconcile after a restart, notice bridges that die.
 *
 * Order is the whole point here: a change is committed to records.db
 * BEFORE it is reported, and a retirement is committed BEFORE the bridge is
 * signalled, so from the commit on every request for the old execution is
 * answered REFRESH_ROUTE, whatever happens to the process afterwards.
 *
 * The work of one sandbox (its assignments, and the relaunch when its
 * bridge exits) runs in order, one job at a time, in the sandbox's lane;
 * the lanes of different sandboxes run at once on a pool of threads. So a
 * spawn that takes 20 s, a stop, a restore from a slow snapshot store or an
 * archive holds up that sandbox only. `lock` guards only tables (the live
 * bridges, the relaunch windows, the lanes); no long operation runs under
 * it. A lane moves IDLE -> QUEUED -> RUNNING -> QUEUED | IDLE (lane_move,
 * the table below); a lane that is RUNNING takes new jobs and stays so. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "egress.h"
#include "gateway.h"
#include "log.h"
#include "msg.h"
#include "jailend.h"
#include "netns.h"
#include "sbx-manager.h"
#include "snapshot.h"
#include "util.h"

/* bridges watched at once: a full worker's, and those of executions
 * retiring or relaunched beside them */
#define LIVE_MAX ((int)MGR_CAPACITY_MAX + 256)
/* a bridge that dies while serving: relaunches per generation and window */
#define RELAUNCH_MAX 3
#define RELAUNCH_WINDOW_S 60

/* threads that run lanes; jobs waiting in all lanes before the assignment
 * thread waits for them to drain */
#define LANE_WORKERS 8
#define JOBS_MAX 4096

enum lane_state { LANE_IDLE = 0, LANE_QUEUED, LANE_RUNNING, LANE__COUNT };
/* the transitions a lane may make; anything else is a broken invariant */
static const bool lane_next[LANE__COUNT][LANE__COUNT] = {
	[LANE_IDLE]    = { [LANE_QUEUED] = true },                      /* a job came */
	[LANE_QUEUED]  = { [LANE_RUNNING] = true },                     /* a worker took it */
	[LANE_RUNNING] = { [LANE_QUEUED] = true, [LANE_IDLE] = true },  /* its job ended */
};
static const char *const lane_names[LANE__COUNT] = { "idle", "queued", "running" };

enum job_kind { JOB_ASSIGNMENT, JOB_EXITED, JOB_CHECKPOINT };
struct job {
	struct job *next;
	enum job_kind kind;
	uint64_t rev;                   /* ASSIGNMENT: its revision */
	pid_t pid;                      /* EXITED: the bridge that exited */
	struct msg_assignment a;
};

struct lane {
	char sandbox[SPACE_ID_MAX + 1]; /* "" when the lane is free */
	enum lane_state state;
	uint64_t running_rev;           /* the running job's revision, 0 none */
	struct job *head, *tail;
};

struct mgr_assign {
	pthread_mutex_t lock;
	pthread_cond_t work;            /* a job ended (the dispatcher's waits) */
	pthread_cond_t queued;          /* a lane became QUEUED: one idle lane worker
	                                 * is woken per job, not all of them */
	struct lane lanes[LIVE_MAX];
	size_t njobs;                   /* queued, not running */
	uint64_t dispatched;            /* the revision the long-poll is at */
	uint64_t persisted;             /* assign_rev in records.db */
	bool pool_started;
	/* pidfds of the bridges this process launched or adopted */
	struct {
		char sandbox[SPACE_ID_MAX + 1];
		pid_t pid;
		int pidfd;
	} live[LIVE_MAX];
	/* the exit monitor's: every live pidfd is registered here when it
	 * enters live[] (one shot, keyed by its slot and pid) and removed
	 * when it leaves, so a bridge that dies right after its launch is
	 * seen at once and the monitor's wait costs nothing per bridge
	 * (it once dup'ed and polled every pidfd at each wake-up: at a
	 * thousand bridges, milliseconds of each create) */
	int ep;
	/* live relaunches per execution in the current window, kept in
	 * memory: a restart of sbx-manager starts the count again, which is
	 * bounded by how often sbx-manager itself can be restarted */
	struct {
		char sandbox[SPACE_ID_MAX + 1];
		uint64_t generation;
		uint64_t since;         /* now_mono_ns() of the first in the window */
		unsigned n;
	} burst[LIVE_MAX];
};

int
assign_init(struct mgr *m)
{
	struct mgr_assign *as = calloc(1, sizeof(*as));

	if (as == NULL)
		return -ENOMEM;
	pthread_mutex_init(&as->lock, NULL);
	pthread_cond_init(&as->work, NULL);
	pthread_cond_init(&as->queued, NULL);
	if ((as->ep = epoll_create1(EPOLL_CLOEXEC)) < 0) {
		free(as);
		return -errno;
	}
	m->assign = as;
	return 0;
}

/* m->assign->lock held: live[i]'s pidfd into / out of the monitor's set */
static void
live_watch(struct mgr_assign *as, int i)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT,
	    .data.u64 = (uint64_t)(unsigned)i << 32 | (uint32_t)as->live[i].pid };

	if (epoll_ctl(as->ep, EPOLL_CTL_ADD, as->live[i].pidfd, &ev) != 0)
		log_warn("exit monitor: cannot watch the bridge of %s", as->live[i].sandbox);
}

static void
live_drop(struct mgr_assign *as, int i)
{
	(void)epoll_ctl(as->ep, EPOLL_CTL_DEL, as->live[i].pidfd, NULL);
	as->live[i].pidfd = 0;
}

/* m->assign->lock held for all of these */
static int
live_find(struct mgr *m, const char *sandbox)
{
	struct mgr_assign *as = m->assign;
	int i;

	for (i = 0; i < LIVE_MAX; i++)
		if (as->live[i].pidfd > 0 && strcmp(as->live[i].sandbox, sandbox) == 0)
			return i;
	return -1;
}

static void
live_set(struct mgr *m, const char *sandbox, pid_t pid, int pidfd)
{
	struct mgr_assign *as = m->assign;
	int i = live_find(m, sandbox);

	if (i >= 0) {
		int old = as->live[i].pidfd;

		live_drop(as, i);
		close(old);
	} else
		for (i = 0; i < LIVE_MAX && as->live[i].pidfd > 0; i++)
			;
	if (i == LIVE_MAX) {
		/* only the exit monitor loses sight of it; stop falls back
		 * to a checked pidfd_open */
		close(pidfd);
		return;
	}
	snprintf(as->live[i].sandbox, sizeof(as->live[i].sandbox), "%s", sandbox);
	as->live[i].pid = pid;
	as->live[i].pidfd = pidfd;
	live_watch(as, i);
}

/* stop the bridge of rec, if it is still the recorded process */
static void
stop_bridge(struct mgr *m, const struct record *rec)
{
	struct mgr_assign *as = m->assign;
	int i, pfd = -1;

	egress_detach(rec);
	/* its own lock; it waits (bounded) for the gateway to end */
	gateway_detach(rec);
	pthread_mutex_lock(&as->lock);
	i = live_find(m, rec->id.sandbox);
	if (i >= 0 && as->live[i].pid == rec->bridge_pid) {
		pfd = as->live[i].pidfd;
		live_drop(as, i);
	} else if (i >= 0) {
		int old = as->live[i].pidfd;

		live_drop(as, i);
		close(old);
	}
	pthread_mutex_unlock(&as->lock);
	/* never signal a bare pid: it may belong to someone else now */
	if (pfd < 0 && (pfd = bridge_pidfd_open_checked(rec)) < 0) {
		/* no bridge: a jail it left waiting for the next one ends */
		if (rec->run_dir[0])
			jail_end_dir(rec->run_dir);
		return;
	}
	/* up to the grace period: outside the lock */
	bridge_stop(pfd);
	waitid(P_PIDFD, (id_t)pfd, NULL, WEXITED | WNOHANG);
	close(pfd);
	/* the execution ends here: its network namespace goes with it */
	netns_release(rec);
}

/* the execution of r ends without a bridge to stop (it failed): its
 * gateway (kept across activations), uplink and namespace go */
static void
end_network(struct mgr *m, const struct record *r)
{
	egress_detach(r);
	gateway_detach(r);
	netns_release(r);
}

static void
paths_for(struct mgr *m, struct record *r)
{
	snprintf(r->run_dir, sizeof(r->run_dir), "%s/run/%s.g%llu", m->cfg.data_dir,
	    r->id.sandbox, (unsigned long long)r->id.generation);
	snprintf(r->layer_dir, sizeof(r->layer_dir), "%s/exec/%s.g%llu/layer", m->cfg.data_dir,
	    r->id.sandbox, (unsigned long long)r->id.generation);
}

/* a fresh 0700 run directory: whatever was there (a stale socket from an
 * earlier activation) is not trusted */
static int
make_run_dir(const char *dir)
{
	char sock[PATH_MAX + 16];
	struct stat st;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	if (lstat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != 0)
		return -EPERM;
	if (chmod(dir, 0700) != 0)
		return -errno;
	snprintf(sock, sizeof(sock), "%s/bridge.sock", dir);
	unlink(sock);
	return 0;
}

static bool
layer_present(const struct record *r)
{
	char img[PATH_MAX + 16];

	snprintf(img, sizeof(img), "%s/disk.img", r->layer_dir);
	return access(img, F_OK) == 0;
}

/* the bridge has exited, but its lock on the image (held while it
 * serves) tells when it let go of the layer; then no file system of the
 * image may be left (layer_release) before it is mounted again */
static void
wait_layer_free(const struct record *r)
{
	char img[PATH_MAX + 16];
	int fd, i;

	/* a jail kept for the next activation holds the layer on purpose:
	 * the next bridge attaches to it (docs/jail.md); a stale socket of
	 * one that ended is handled by that bridge's own layer recovery */
	if (jail_kept(r->run_dir))
		return;
	snprintf(img, sizeof(img), "%s/disk.img", r->layer_dir);
	if ((fd = open(img, O_RDONLY | O_CLOEXEC)) < 0)
		return;
	/* up to 30 s: the jail's last processes end first, on a loaded
	 * machine not at once (layer.c, LAYER_RELEASE_WAIT_MS) */
	for (i = 0; i < 300 && flock(fd, LOCK_EX | LOCK_NB) != 0; i++)
		usleep(100000);
	close(fd);      /* releases our lock too */
	if (i < 300)
		layer_release(r);
}

/* may the execution of r be relaunched once more? Counts it if so. A
 * guest that crashes again right after each start must end failed, not
 * keep the worker busy relaunching it. lock held. */
static bool
relaunch_allowed_locked(struct mgr *m, const struct record *r)
{
	struct mgr_assign *as = m->assign;
	uint64_t now = now_mono_ns(), window = (uint64_t)RELAUNCH_WINDOW_S * 1000000000ULL;
	int i, free_i = -1, oldest = 0;

	for (i = 0; i < LIVE_MAX; i++) {
		if (as->burst[i].sandbox[0] == '\0' || now - as->burst[i].since >= window) {
			if (free_i < 0)
				free_i = i;
			continue;
		}
		if (strcmp(as->burst[i].sandbox, r->id.sandbox) == 0)
			break;
		if (as->burst[i].since < as->burst[oldest].since)
			oldest = i;
	}
	if (i < LIVE_MAX && as->burst[i].generation == r->id.generation) {
		if (as->burst[i].n >= RELAUNCH_MAX)
			return false;
		as->burst[i].n++;
		return true;
	}
	if (i == LIVE_MAX)
		i = free_i >= 0 ? free_i : oldest;
	snprintf(as->burst[i].sandbox, sizeof(as->burst[i].sandbox), "%s", r->id.sandbox);
	as->burst[i].generation = r->id.generation;
	as->burst[i].since = now;
	as->burst[i].n = 1;
	return true;
}

static bool
relaunch_allowed(struct mgr *m, const struct record *r)
{
	bool ok;

	pthread_mutex_lock(&m->assign->lock);
	ok = relaunch_allowed_locked(m, r);
	pthread_mutex_unlock(&m->assign->lock);
	return ok;
}

/* start (or restart) the bridge for r, whose identity is already set;
 * commits starting (unless committed: r is, as it stands, the committed
 * record of a new install, already starting with no bridge), then serving
 * or failed; reports the result. t_begin: when the install began, 0 for a
 * relaunch (the log) */
static void fail_salvaged(struct mgr *m, struct record *r, const char *why);

static int
launch(struct mgr *m, struct record *r, uint64_t t_begin, bool committed,
    struct jailpool_jail *claim)
{
	const char *why = NULL;
	int pidfd = -1, ret;
	/* the prepared jail's name when one was handed to spaced-host, and
	 * whether spaced-host bound it (or started a new jail) */
	char pool_name[SPACE_ID_MAX + 1] = "";
	bool pool_bound = false;
	/* where an install's time goes, for the log (docs/benchmarks.md) */
	uint64_t t0 = now_mono_ns(), t_commit, t_ready, t_serving, t_claim = 0;

	/* what this commit would write is what the install committed last:
	 * one fsync less per create */
	committed = committed && r->state == EXEC_STARTING && r->bridge_pid == 0 &&
	    r->serve_pid == 0 && r->bridge_start == 0 && r->serve_start == 0 &&
	    r->exe_dev == 0 && r->exe_ino == 0 && r->exe_hash[0] == '\0';
	r->state = EXEC_STARTING;
	r->bridge_pid = r->serve_pid = 0;
	r->bridge_start = r->serve_start = 0;
	r->exe_dev = r->exe_ino = 0;
	r->exe_hash[0] = '\0';
	if (!committed && (ret = records_put(m, r)) != 0)
		return ret;
	t_commit = now_mono_ns();
	lease_cancel_before(m, r->id.sandbox, r->epoch);
	/* a relaunch: the gateway (kept with the namespace) wants the new
	 * activation from now on, as our record does */
	gateway_activation(r);
	/* a prepared jail (jailpool.c): its directories become this
	 * execution's, after the record holding its slot is committed */
	if (claim != NULL) {
		uint64_t tc = now_mono_ns();

		if ((ret = jailpool_bind(m, r, claim)) != 0) {
			log_warnx("install %s g%llu: prepared jail %s not bound (%s): destroyed",
			    r->id.sandbox, (unsigned long long)r->id.generation, claim->name,
			    strerror(-ret));
			jailpool_discard(m, claim, false);
			claim = NULL;
		} else
			t_claim = now_mono_ns() - tc;
	}
	if ((ret = make_run_dir(r->run_dir)) != 0 || (ret = mkdir_p(r->layer_dir, 0711)) != 0) {
		why = "cannot create the execution directories";
		goto failed;
	}
	/* the record (identity, uid range, epoch) is committed: a new layer
	 * may now be one made ahead of time */
	if (layerpool_claim(m, r))
		log_debug("install %s g%llu: layer image from the pool", r->id.sandbox,
		    (unsigned long long)r->id.generation);
	if (claim != NULL)
		snprintf(pool_name, sizeof(pool_name), "%s", claim->name);
	/* a prepared jail's kept bridge is given the claim; one that cannot
	 * take it (gone) has let the jail go, and a bridge is started to
	 * claim it instead */
	ret = claim != NULL ? bridge_pool_claim(m, r, claim, &pidfd, &why) : -ESRCH;
	if (ret == -ESRCH)
		ret = bridge_spawn_claim(m, r, claim != NULL ? claim->name : NULL, &pidfd, &why);
	while (ret != 0) {
		/* a claim is tried once: spaced-host destroyed a jail it could not bind */
		if (claim != NULL)
			jailpool_release(claim);
		claim = NULL;
		/* a bridge that died while starting (killed, or its guest did)
		 * gets the bounded relaunch a serving one gets, as a new
		 * activation; one refused for what it is does not */
		if (ret != -ECHILD || !relaunch_allowed(m, r))
			goto failed;
		log_warnx("bridge of %s g%llu a%u %s: relaunching", r->id.sandbox,
		    (unsigned long long)r->id.generation, r->id.activation, why);
		metrics_inc(m, MC_RELAUNCHES);
		r->id.activation++;
		r->epoch++;
		if ((ret = records_put(m, r)) != 0) {
			why = "cannot commit the record";
			goto failed;
		}
		lease_cancel_before(m, r->id.sandbox, r->epoch);
		gateway_activation(r);
		wait_layer_free(r);
		ret = bridge_spawn_claim(m, r, NULL, &pidfd, &why);
	}
	t_ready = now_mono_ns();
	/* spaced-host falls back to a new jail when it cannot bind the
	 * prepared one: what is logged is what it did */
	if (claim != NULL) {
		pool_bound = jailpool_claimed(m, r, claim);
		claim = NULL;
	}
	r->state = EXEC_SERVING;
	if ((ret = records_put(m, r)) != 0) {
		why = "cannot commit the record";
		bridge_stop(pidfd);
		close(pidfd);
		goto failed;
	}
	t_serving = now_mono_ns();
	pthread_mutex_lock(&m->assign->lock);
	live_set(m, r->id.sandbox, r->bridge_pid, pidfd);
	pthread_mutex_unlock(&m->assign->lock);
	/* no uplink is no network: the sandbox serves, its egress fails closed */
	(void)egress_attach(r);
	(void)gateway_attach(r);
	{
		uint64_t t_end = now_mono_ns();
		log_info("serving %s g%llu a%u (bridge pid %d) after %.1f ms: assignment to its "
		    "record %.1f, record starting %.1f, bridge spawned to ready and checked %.1f, "
		    "record serving %.1f, network attach %.1f%s", r->id.sandbox,
		    (unsigned long long)r->id.generation, r->id.activation, (int)r->bridge_pid,
		    (double)(t_end - (t_begin ? t_begin : t0)) / 1e6,
		    t_begin ? (double)(t0 - t_begin) / 1e6 : 0.0, (double)(t_commit - t0) / 1e6,
		    (double)(t_ready - t_commit) / 1e6, (double)(t_serving - t_ready) / 1e6,
		    (double)(t_end - t_serving) / 1e6,
		    pool_bound ? ", claimed a prepared jail" :
		    pool_name[0] ? ", a new jail (the prepared one was not bound)" : "");
		if (pool_bound)
			log_info("install %s g%llu: claimed a prepared jail %s (slot %u) %.1f ms",
			    r->id.sandbox, (unsigned long long)r->id.generation, pool_name,
			    r->slot, (double)t_claim / 1e6);
		else if (pool_name[0])
			log_warnx("install %s g%llu: prepared jail %s not bound by the bridge: "
			    "a new jail serves", r->id.sandbox,
			    (unsigned long long)r->id.generation, pool_name);
	}
	control_report(m, &r->id, "serving", NULL);
	/* while the report travels: the first operation's bridge connection.
	 * Speculative work, done only when no other install runs beside this
	 * one: in a burst of creates the CPU it takes (a thread here, a
	 * connection the bridge serves, a child the guest forks and keeps a
	 * second) is the other creates': about a third of a burst's CPU per
	 * create (docs/benchmarks.md, "Eighth round") */
	if (idle_installs() <= 1)
		bpool_open_ahead(m, r);
	return 0;
failed:
	if (claim != NULL)
		jailpool_release(claim);
	metrics_inc(m, MC_INSTALL_FAILED);
	log_warnx("install %s g%llu failed: %s", r->id.sandbox,
	    (unsigned long long)r->id.generation, why ? why : "error");
	r->state = EXEC_FAILED;
	r->epoch++;
	end_network(m, r);
	if (records_put(m, r) == 0) {
		if (r->id.activation > 1) {
			/* a relaunch: the layer holds what the sandbox wrote,
			 * archived with the report as for a bridge that kept
			 * dying (a pause or move under way goes on from it) */
			fail_salvaged(m, r, why ? why : "relaunch failed");
		} else {
			control_report(m, &r->id, "failed", why ? why : "install failed");
			/* never served: the layer is empty or a restored archive */
			wait_layer_free(r);
			reclaim_execution(m, r);
		}
	}
	lease_cancel_before(m, r->id.sandbox, r->epoch);
	return ret ? ret : -EIO;
}

/* a resource of the spec (0: not given, the default applies) within
 * this worker's bounds */
static int
spec_u32(uint32_t given, uint32_t def, uint32_t max, uint32_t *out)
{
	if (given == 0) {
		*out = def;
		return 0;
	}
	if (given > max)
		return -EINVAL;
	*out = given;
	return 0;
}

static void
do_install(struct mgr *m, const struct msg_assignment *a)
{
	const struct route_identity *id = &a->id;
	struct record old, r;
	struct jailpool_jail pj;
	bool have_old, claimed = false;
	const char *tmpl = a->template_name[0] ? a->template_name : "host";
	const char *snap = a->snapshot[0] ? a->snapshot : NULL;
	const char *why = NULL;
	uint64_t t_begin = now_mono_ns();
	int ret;

	metrics_inc(m, MC_INSTALLS);
	/* an assignment for another worker or another incarnation of this
	 * one must not become a record that could admit its capabilities */
	if (strcmp(id->worker, m->cfg.worker_id) != 0 || strcmp(id->resident, m->cfg.incarnation) != 0) {
		control_report(m, id, "failed", "identity names another worker or incarnation");
		return;
	}
	if (strcmp(id->substrate, "jail") != 0) {
		control_report(m, id, "failed", "substrate not supported on this worker");
		return;
	}
	memset(&r, 0, sizeof(r));
	r.id = *id;
	if (strlen(tmpl) >= sizeof(r.template_name) ||
	    spec_u32(a->memory_mb, 512, 1u << 20, &r.memory_mb) != 0 ||
	    spec_u32(a->pids, 256, 1u << 22, &r.pids) != 0 ||
	    spec_u32(a->cpu_percent, 100, 100000, &r.cpu_percent) != 0 ||
	    spec_u32(a->disk_mb, m->cfg.disk_mb, 1u << 24, &r.disk_mb) != 0) {
		control_report(m, id, "failed", "invalid spec");
		return;
	}
	snprintf(r.template_name, sizeof(r.template_name), "%s", tmpl);
	have_old = records_get(m, id->sandbox, &old) == 0;
	if (have_old) {
		if (old.id.generation > id->generation) {
			log_info("install %s g%llu: stale (holding g%llu)", id->sandbox,
			    (unsigned long long)id->generation,
			    (unsigned long long)old.id.generation);
			return;
		}
		if (old.id.generation == id->generation) {
			if (old.state == EXEC_SERVING) {
				/* already done (a replayed assignment) */
				control_report(m, &old.id, "serving", NULL);
				return;
			}
			if (old.state == EXEC_RETIRED) {
				control_report(m, id, "failed", "generation already retired");
				return;
			}
		}
	}
	r.epoch = have_old ? old.epoch + 1 : 1;
	paths_for(m, &r);
	/* the new record goes in (state starting, new epoch) before the old
	 * bridge is stopped: from here on the old generation gets
	 * REFRESH_ROUTE and its streams are cancelled. The slot is chosen
	 * and committed in one step (another sandbox's install runs at the
	 * same time in its own lane), the commit shared with theirs. */
	r.state = EXEC_STARTING;
	/* a new sandbox here may take a prepared jail: its record holds the
	 * jail's uid slot (the id maps were written at the jail's clone) */
	if (!have_old && snap == NULL && jailpool_take(m, &r, &pj)) {
		if (records_put_claimed(m, &r, m->cfg.uid_window, pj.slot) == 0)
			claimed = true;
		else
			jailpool_discard(m, &pj, true);
	}
	if (!claimed && (ret = records_put_slotted(m, &r, m->cfg.uid_window)) != 0) {
		if (ret == -ENOSPC)
			control_report(m, id, "failed", "no uid range left");
		else
			log_warnx("install %s: cannot commit", id->sandbox);
		return;
	}
	/* the policy every attach of this execution reads */
	if (a->has_network ? egress_policy_save(id->sandbox, &a->network) != 0 :
	    (egress_policy_forget(id->sandbox), false))
		log_warnx("install %s: cannot save its egress policy", id->sandbox);
	gateway_ports_install(a);
	if (have_old) {
		metrics_inc(m, MC_LEASES_CANCELLED);
		lease_cancel_before(m, id->sandbox, r.epoch);
		if (old.state != EXEC_RETIRED && old.state != EXEC_FAILED) {
			stop_bridge(m, &old);
			if (old.id.generation != id->generation)
				control_report(m, &old.id, "retired", NULL);
		}
	}
	if (snap != NULL) {
		/* the new layer is built from the verified archive before the
		 * bridge ever sees it; the digest is in the record so that a
		 * restore cut short by a crash is done again on restart */
		snprintf(r.snapshot, sizeof(r.snapshot), "%s", snap);
		if (records_put(m, &r) != 0 || make_run_dir(r.run_dir) != 0 ||
		    mkdir_p(r.layer_dir, 0711) != 0 ||
		    layer_restore(m, &r, snap, &why) != 0) {
			log_warnx("install %s g%llu: restore failed: %s", id->sandbox,
			    (unsigned long long)id->generation, why ? why : "error");
			metrics_inc(m, MC_INSTALL_FAILED);
			r.state = EXEC_FAILED;
			r.epoch++;
			if (records_put(m, &r) == 0) {
				control_report(m, &r.id, "failed", why ? why : "snapshot restore failed");
				/* a layer cut short: its archive is the whole of it */
				reclaim_execution(m, &r);
			}
			return;
		}
		log_info("install %s g%llu: layer restored from snapshot %s", id->sandbox,
		    (unsigned long long)id->generation, snap);
	}
	/* r is the record committed last (starting, no bridge), unchanged */
	launch(m, &r, t_begin, true, claimed ? &pj : NULL);
}

/* an archive is reported only once the control plane has it (snapblob.c):
 * another worker resumes from it by digest. -ECOMM when the upload failed */
static int
archive_upload(struct mgr *m, const char *digest)
{
	const char *why;

	if (snapblob_put(m, digest, &why) != 0) {
		log_warnx("archive %s: %s", digest, why);
		return -ECOMM;
	}
	return 0;
}

/* The cache's copy of an archive uploaded while it was made is not
 * fsync'd (layer.c): after a crash of the machine it may be damaged, and
 * its upload refused; a large one was never kept here at all
 * (SNAPSHOT_TEE_UNCACHED). Either way the control plane holds the archive
 * durably since before it was recorded here. A damaged copy is dropped
 * and the archive fetched back (verified): true when the control plane
 * has it. */
static bool
archive_held(struct mgr *m, const char *digest)
{
	const char *why;

	snapblob_drop(m, digest);
	if (snapblob_fetch(m, digest, &why) != 0)
		return false;
	log_info("archive %s: no intact copy in the cache, the control plane's fetched back", digest);
	return true;
}

/* what a failed archive is reported as */
static const char *
archive_why(int rc)
{
	return rc == -ENOTSUP ? "no snapshot store on this worker (--snapshot-dir)" :
	    rc == -EFBIG ? "the archive would be larger than the layer's quota" :
	    rc == -ECOMM ? "snapshot upload to the control plane failed" : "snapshot failed";
}

/* the layer of a stopped execution (retired, or failed) into the snapshot
 * store, once no file system of it is left; what says why, in the log.
 * 0 or -errno (-ENOTSUP: no snapshot store here) */
static int
archive_stopped(struct mgr *m, struct record *r, const char *what, char digest[SNAPSHOT_DIGEST_HEX + 1],
    uint64_t *size, unsigned *depth)
{
	bool uploaded = false;
	int rc;

	wait_layer_free(r);
	if ((rc = layer_snapshot_stopped(m, r, digest, size, &uploaded, depth)) != 0) {
		log_warnx("%s %s g%llu: archiving its layer failed: %s", what, r->id.sandbox,
		    (unsigned long long)r->id.generation, strerror(-rc));
		return rc;
	}
	if (*depth)
		metrics_inc(m, MC_ARCHIVES_INCREMENTAL);
	log_info("%s %s g%llu: layer archived as %s (%llu bytes%s%s)", what, r->id.sandbox,
	    (unsigned long long)r->id.generation, digest, (unsigned long long)*size,
	    *depth ? ", incremental" : "", uploaded ? ", uploaded while it was made" : "");
	return uploaded ? 0 : archive_upload(m, digest);
}

static void
do_retire(struct mgr *m, const struct route_identity *id, bool want_snapshot)
{
	char digest[SNAPSHOT_DIGEST_HEX + 1];
	uint64_t size = 0;
	unsigned depth = 0;
	struct record r;
	int rc;

	metrics_inc(m, MC_RETIRES);
	if (records_get(m, id->sandbox, &r) != 0 || r.id.generation != id->generation ||
	    (r.state == EXEC_RETIRED && !want_snapshot)) {
		/* nothing of that generation runs here (never installed, or
		 * replaced already): it is retired as far as we are concerned */
		control_report(m, id, "retired", NULL);
		/* a kill replayed after a crash before its reclamation began */
		if (r.state == EXEC_RETIRED && r.id.generation == id->generation)
			reclaim_execution(m, &r);
		return;
	}
	if (r.state == EXEC_RETIRED && !layer_present(&r) && r.snapshot[0]) {
		/* replayed after the layer was archived and reclaimed: the
		 * archive it left is the answer (content-addressed, durable) */
		char path[PATH_MAX + 80];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s.snap", m->cfg.snapshot_dir, r.snapshot);
		bool gone = stat(path, &st) != 0;

		rc = gone ? -ENOENT : archive_upload(m, r.snapshot);
		if (rc != 0 && (!archive_held(m, r.snapshot) || stat(path, &st) != 0))
			control_report_retired(m, &r.id, NULL, 0, gone ?
			    "snapshot failed (archive gone)" : archive_why(rc));
		else {
			control_report_retired(m, &r.id, r.snapshot, (uint64_t)st.st_size, NULL);
			/* a crash after the image was kept (kept.c) and
			 * before the reclamation: the rest goes now */
			reclaim_execution(m, &r);
		}
		return;
	}
	if (r.state == EXEC_RETIRED) {
		/* the same retirement again: we were killed after committing
		 * it, before its revision was persisted (perhaps while
		 * archiving). Its archive may never have been reported, and a
		 * retirement without one fails the pause or move, so archive
		 * again: the layer has not changed since the commit, and the
		 * store is content-addressed, so this gives the same digest. */
		log_info("retire %s g%llu again: archiving the stopped layer", r.id.sandbox,
		    (unsigned long long)r.id.generation);
		if (r.bridge_pid > 0)
			stop_bridge(m, &r);        /* checks the start time itself */
	} else {
		r.state = EXEC_RETIRED;
		r.epoch++;
		/* retired, the record no longer holds its uid slot, but the
		 * jail's processes run on its uids until stop_bridge ended
		 * them: no other sandbox's install may start on them before */
		records_slot_draining(m, r.slot);
		if (records_put(m, &r) != 0) {
			records_slot_drained(m, r.slot);
			log_warnx("retire %s: cannot commit", id->sandbox);
			return;
		}
		lease_cancel_before(m, r.id.sandbox, r.epoch);
		stop_bridge(m, &r);
		records_slot_drained(m, r.slot);
		log_info("retired %s g%llu", r.id.sandbox, (unsigned long long)r.id.generation);
	}
	if (!want_snapshot) {
		control_report(m, &r.id, "retired", NULL);
		/* a kill keeps nothing of the execution, nor an image
		 * kept of the sandbox earlier */
		wait_layer_free(&r);
		kept_drop(m, r.id.sandbox);
		reclaim_execution(m, &r);
		return;
	}
	/* archived only now: nothing can write to the layer any more */
	if ((rc = archive_stopped(m, &r, "retired", digest, &size, &depth)) != 0) {
		control_report_retired(m, &r.id, NULL, 0, archive_why(rc));
		return;
	}
	/* the archive is durable (the control plane's copy; the cache's is
	 * fsync'd too unless it was uploaded while it was made): recorded
	 * with the execution for a replay, then the layer goes */
	snprintf(r.snapshot, sizeof(r.snapshot), "%s", digest);
	if (records_put(m, &r) == 0) {
		/* the image is what digest holds: kept for the sandbox's
		 * next install here (kept.c), the rest reclaimed */
		kept_keep(m, &r, digest, depth);
		reclaim_execution(m, &r);
	}
	control_report_retired(m, &r.id, digest, size, NULL);
}

/* a live snapshot of a serving execution */
static void
do_snapshot(struct mgr *m, const struct route_identity *id, const char *sid)
{
	char digest[SNAPSHOT_DIGEST_HEX + 1];
	uint64_t size = 0;
	struct record r;
	int rc;

	if (records_get(m, id->sandbox, &r) != 0 || !route_identity_equal(&r.id, id) ||
	    r.state != EXEC_SERVING) {
		control_report_snapshot(m, sid, id, NULL, 0, "execution not serving on this worker");
		return;
	}
	bool uploaded = false;

	rc = layer_snapshot_live(m, &r, digest, &size, &uploaded);
	if (rc == 0 && !uploaded)
		rc = archive_upload(m, digest);
	if (rc != 0) {
		control_report_snapshot(m, sid, id, NULL, 0, archive_why(rc));
		return;
	}
	log_info("live snapshot of %s g%llu: %s", id->sandbox,
	    (unsigned long long)id->generation, digest);
	control_report_snapshot(m, sid, id, digest, size, NULL);
}

/* a checkpoint of a serving execution (checkpoint.c), in its lane: a
 * pause or move queued behind it waits for it; one that came first has
 * retired the execution, and nothing is done */
static void
do_checkpoint(struct mgr *m, const struct route_identity *id)
{
	char digest[SNAPSHOT_DIGEST_HEX + 1], layer_base[SNAPSHOT_DIGEST_HEX + 1];
	struct snapshot_index *next = NULL;
	uint64_t size = 0;
	unsigned depth = 0;
	struct record r;
	int64_t used;
	int rc;

	if (records_get(m, id->sandbox, &r) != 0 || !route_identity_equal(&r.id, id) ||
	    r.state != EXEC_SERVING) {
		checkpoint_done(id->sandbox, id->generation, false, 0);
		return;
	}
	used = checkpoint_used(&r);
	rc = layer_checkpoint(m, &r, digest, &size, &depth, layer_base, &next);
	if (rc == 0)
		rc = control_checkpoint(m, id, digest, size, layer_base);
	/* the layer's next archive is a delta of it only once the control
	 * plane holds it as a snapshot of the sandbox (the collection keeps
	 * it from then on); otherwise the index stays what it was */
	if (rc == 0 && (rc = layer_checkpoint_commit(&r, next, digest, depth)) != 0)
		log_warnx("checkpoint of %s: its index not written (%d); the next archive is a "
		    "delta of the one before", id->sandbox, rc);
	snapshot_index_free(next);
	if (rc == 0) {
		metrics_inc(m, MC_CHECKPOINTS);
		log_info("checkpoint of %s g%llu: layer archived as %s (%llu bytes, %s)", id->sandbox,
		    (unsigned long long)id->generation, digest, (unsigned long long)size,
		    depth ? "incremental" : "whole");
	} else {
		metrics_inc(m, MC_CHECKPOINT_FAILED);
		log_warnx("checkpoint of %s g%llu failed: %s", id->sandbox,
		    (unsigned long long)id->generation, archive_why(rc));
	}
	checkpoint_done(id->sandbox, id->generation, rc == 0, used < 0 ? 0 : (uint64_t)used);
}

/* one valid assignment, in its sandbox's lane */
static void
apply(struct mgr *m, const struct msg_assignment *a)
{
	switch (a->action) {
	case ASSIGN_INSTALL:
		/* the pools refill only while no install runs (idle.c) */
		idle_install_begin();
		do_install(m, a);
		idle_install_end();
		break;
	case ASSIGN_RETIRE:
		do_retire(m, &a->id, a->want_snapshot);
		break;
	case ASSIGN_SNAPSHOT:
		do_snapshot(m, &a->id, a->snapshot_id);
		break;
	case ASSIGN_NETWORK:
		/* a policy, declared ports, or both */
		if (a->has_network)
			egress_assignment(a);
		gateway_assignment(a);
		break;
	default:
		log_warnx("assignments: unknown action skipped");
		break;
	}
}

static void bridge_exited(struct mgr *m, const char *sandbox, pid_t pid);

/* lock held */
static void
lane_move(struct lane *l, enum lane_state to)
{
	if (!lane_next[l->state][to])
		fatalx("assign: lane of %s: %s -> %s is not a transition", l->sandbox,
		    lane_names[l->state], lane_names[to]);
	l->state = to;
}

/* the lane of sandbox, made when there is none; NULL when every lane is
 * busy (LIVE_MAX sandboxes with work at once). lock held. */
static struct lane *
lane_get(struct mgr_assign *as, const char *sandbox)
{
	struct lane *free_l = NULL;
	size_t i;

	for (i = 0; i < LIVE_MAX; i++) {
		if (as->lanes[i].sandbox[0] == '\0') {
			if (free_l == NULL)
				free_l = &as->lanes[i];
		} else if (strcmp(as->lanes[i].sandbox, sandbox) == 0)
			return &as->lanes[i];
	}
	if (free_l)
		snprintf(free_l->sandbox, sizeof(free_l->sandbox), "%s", sandbox);
	return free_l;
}

/* queue j (consumed) in the lane of sandbox; -EBUSY when no lane is free */
static int
lane_push(struct mgr *m, const char *sandbox, struct job *j)
{
	struct mgr_assign *as = m->assign;
	struct lane *l;

	pthread_mutex_lock(&as->lock);
	if ((l = lane_get(as, sandbox)) == NULL) {
		pthread_mutex_unlock(&as->lock);
		free(j);
		return -EBUSY;
	}
	/* a network change behind another still queued, with nothing
	 * between them: one job with the latest of each (the one queued
	 * keeps its place and revision, so nothing is applied out of order
	 * and a restart applies from before it) */
	if (j->kind == JOB_ASSIGNMENT && l->tail != NULL && l->tail->kind == JOB_ASSIGNMENT &&
	    msg_assignment_fold(&l->tail->a, &j->a)) {
		pthread_mutex_unlock(&as->lock);
		metrics_inc(m, MC_NETWORK_FOLDED);
		free(j);
		return 0;
	}
	if (l->tail)
		l->tail->next = j;
	else
		l->head = j;
	l->tail = j;
	as->njobs++;
	if (l->state == LANE_IDLE) {
		lane_move(l, LANE_QUEUED);
		/* workers look for a queued lane before they wait: one woken
		 * per lane that became queued is enough */
		pthread_cond_signal(&as->queued);
	}
	pthread_mutex_unlock(&as->lock);
	return 0;
}

/* the revision up to which every assignment has been applied: the one
 * before the lowest still queued or running, else the one dispatched.
 * lock held. */
static uint64_t
applied_upto(struct mgr_assign *as)
{
	uint64_t low = 0;
	struct job *j;
	size_t i;

	for (i = 0; i < LIVE_MAX; i++) {
		struct lane *l = &as->lanes[i];

		if (l->sandbox[0] == '\0')
			continue;
		if (l->running_rev && (low == 0 || l->running_rev < low))
			low = l->running_rev;
		for (j = l->head; j; j = j->next)
			if (j->kind == JOB_ASSIGNMENT && j->rev && (low == 0 || j->rev < low))
				low = j->rev;
	}
	return low == 0 || low - 1 > as->dispatched ? as->dispatched : low - 1;
}

/* persisted as far as applied: a crash re-applies from there, and every
 * step is idempotent */
static void
progress(struct mgr *m)
{
	struct mgr_assign *as = m->assign;
	uint64_t upto;

	pthread_mutex_lock(&as->lock);
	upto = applied_upto(as);
	if (upto == as->persisted) {
		pthread_mutex_unlock(&as->lock);
		return;
	}
	as->persisted = upto;
	/* under the lock, so two writers never store out of order */
	records_meta_set(m, "assign_rev", upto);
	pthread_mutex_unlock(&as->lock);
}

static void *
lane_worker(void *arg)
{
	struct mgr *m = arg;
	struct mgr_assign *as = m->assign;
	struct lane *l;
	struct job *j;
	size_t i, start = 0;

	pthread_mutex_lock(&as->lock);
	for (;;) {
		l = NULL;
		/* from where the last search ended: every queued lane gets its turn */
		for (i = 0; i < LIVE_MAX && l == NULL; i++)
			if (as->lanes[(start + i) % LIVE_MAX].state == LANE_QUEUED)
				l = &as->lanes[(start + i) % LIVE_MAX];
		if (l == NULL) {
			pthread_cond_wait(&as->queued, &as->lock);
			continue;
		}
		start = (size_t)(l - as->lanes) + 1;
		lane_move(l, LANE_RUNNING);
		j = l->head;
		if ((l->head = j->next) == NULL)
			l->tail = NULL;
		as->njobs--;
		l->running_rev = j->kind == JOB_ASSIGNMENT ? j->rev : 0;
		pthread_mutex_unlock(&as->lock);

		if (j->kind == JOB_ASSIGNMENT)
			apply(m, &j->a);
		else if (j->kind == JOB_CHECKPOINT)
			do_checkpoint(m, &j->a.id);
		else
			bridge_exited(m, l->sandbox, j->pid);
		free(j);

		pthread_mutex_lock(&as->lock);
		l->running_rev = 0;
		if (l->head)
			lane_move(l, LANE_QUEUED);
		else {
			lane_move(l, LANE_IDLE);
			l->sandbox[0] = '\0';
		}
		pthread_cond_broadcast(&as->work);
		pthread_mutex_unlock(&as->lock);
		progress(m);
		pthread_mutex_lock(&as->lock);
	}
	return NULL;
}

static void
pool_start(struct mgr *m)
{
	pthread_attr_t attr;
	pthread_t t;
	int i;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (i = 0; i < LANE_WORKERS; i++)
		if (pthread_create(&t, &attr, lane_worker, m) != 0)
			fatalx("assign: cannot start the lane workers");
	pthread_attr_destroy(&attr);
	m->assign->pool_started = true;
}

/* hand one assignment to its sandbox's lane; an invalid one is answered
 * here (it would come back the same) */
static void
dispatch(struct mgr *m, const struct msg_assignment *a)
{
	struct mgr_assign *as = m->assign;
	struct job *j;

	if (a->invalid != NULL) {
		/* an install we cannot do is the control plane's to know; the
		 * rest is skipped */
		if (a->action == ASSIGN_INSTALL && a->id.sandbox[0] != '\0') {
			metrics_inc(m, MC_INSTALLS);
			control_report(m, &a->id, "failed", a->invalid);
		} else
			log_warnx("assignments: malformed assignment skipped (%s)", a->invalid);
		return;
	}
	/* a bounded backlog: the long-poll waits while the lanes drain */
	pthread_mutex_lock(&as->lock);
	while (as->njobs >= JOBS_MAX && !atomic_load(&m->stopping))
		pthread_cond_wait(&as->work, &as->lock);
	pthread_mutex_unlock(&as->lock);
	if ((j = calloc(1, sizeof(*j))) == NULL) {
		log_warnx("assignments: out of memory; %s skipped", a->id.sandbox);
		return;
	}
	j->kind = JOB_ASSIGNMENT;
	j->rev = a->revision;
	j->a = *a;
	while (lane_push(m, a->id.sandbox, j) == -EBUSY) {
		/* every lane holds another sandbox's work: wait for one */
		pthread_mutex_lock(&as->lock);
		pthread_cond_wait(&as->work, &as->lock);
		pthread_mutex_unlock(&as->lock);
		if ((j = calloc(1, sizeof(*j))) == NULL)
			return;
		j->kind = JOB_ASSIGNMENT;
		j->rev = a->revision;
		j->a = *a;
	}
}

void *
assign_thread(void *arg)
{
	struct mgr *m = arg;
	struct mgr_assign *as = m->assign;
	struct msg_assignments ms;
	uint64_t rev = 0;
	size_t i;

	if (records_meta_get(m, "assign_rev", &rev) != 0)
		rev = 0;
	pthread_mutex_lock(&as->lock);
	as->dispatched = as->persisted = rev;
	if (!as->pool_started)
		pool_start(m);
	pthread_mutex_unlock(&as->lock);
	while (!atomic_load(&m->stopping)) {
		/* a malformed answer is refused whole and asked again */
		if (control_assignments(m, rev, 25, &ms) != 0) {
			sleep(2);
			continue;
		}
		for (i = 0; i < ms.n; i++) {
			dispatch(m, &ms.a[i]);
			if (ms.a[i].revision > rev)
				rev = ms.a[i].revision;
		}
		if (ms.revision != rev) {
			if (ms.revision < rev)
				log_warnx("assignments: revision went back from %llu to %llu",
				    (unsigned long long)rev, (unsigned long long)ms.revision);
			rev = ms.revision;
		}
		pthread_mutex_lock(&as->lock);
		as->dispatched = rev;
		pthread_mutex_unlock(&as->lock);
		progress(m);
		msg_assignments_free(&ms);
	}
	return NULL;
}

/* the one relaunch, after a restart and after a bridge (or its guest) died
 * while we run: a new activation of the same execution, not a new one.
 * The epoch moves too, so leases of the old activation are cancelled, and
 * the record's new activation makes the comparator answer capabilities for
 * the old one with activation_mismatch. In the sandbox's lane (or at
 * start, before the lanes run). */
static void
relaunch(struct mgr *m, struct record *r)
{
	metrics_inc(m, MC_RELAUNCHES);
	r->id.activation++;
	r->epoch++;
	if (r->snapshot[0] && !layer_present(r)) {
		const char *rwhy = NULL;
		/* the install was restoring when we died */
		if (make_run_dir(r->run_dir) != 0 || mkdir_p(r->layer_dir, 0711) != 0 ||
		    layer_restore(m, r, r->snapshot, &rwhy) != 0) {
			r->state = EXEC_FAILED;
			if (records_put(m, r) == 0)
				control_report(m, &r->id, "failed", rwhy ? rwhy :
				    "snapshot restore failed");
			lease_cancel_before(m, r->id.sandbox, r->epoch);
			return;
		}
	}
	/* the dead bridge's jail may still hold the layer for a moment; the
	 * new bridge would refuse it as in use (one user of a layer at a time) */
	if (layer_present(r))
		wait_layer_free(r);
	launch(m, r, 0, false, NULL);
}

/* an execution committed failed because its bridge kept dying: its layer
 * is still good (the files the user wrote), so it is archived like a
 * retired one, once no file system of it is left, and the archive goes
 * with the report; the control plane can resume the sandbox from it.
 * Nothing runs on the layer any more: the record is failed. */
static void
fail_salvaged(struct mgr *m, struct record *r, const char *why)
{
	char digest[SNAPSHOT_DIGEST_HEX + 1];
	uint64_t size = 0;
	unsigned depth = 0;

	if (!m->cfg.snapshot_dir[0] || !layer_present(r)) {
		control_report(m, &r->id, "failed", why);
		return;
	}
	if (archive_stopped(m, r, "failed", digest, &size, &depth) != 0) {
		control_report(m, &r->id, "failed", why);
		return;
	}
	control_report_failed(m, &r->id, why, digest, size);
	/* the archive is durable: the layer is not needed any more */
	reclaim_execution(m, r);
}

/* after a restart: adopt every serving bridge that is still the recorded
 * process; relaunch (activation + 1) the ones that are not. */
int
assign_reconcile(struct mgr *m)
{
	struct mgr_assign *as = m->assign;
	struct record *all = NULL, r;
	const char *why = "";
	size_t n, i;
	int pfd;

	if (records_all(m, &all, &n) != 0)
		return -ENOMEM;
	/* before any other thread: each step takes the tables' lock itself */
	for (i = 0; i < n; i++) {
		r = all[i];
		if (strcmp(r.id.resident, m->cfg.incarnation) != 0) {
			/* a record of an earlier resident (another pod on this
			 * data directory, --resident): the control plane failed
			 * its executions when this one registered, and nothing
			 * of it may serve here. Its bridge is stopped if it is
			 * still ours; a layer that was live is archived (the
			 * files the user wrote), then reclaimed. */
			if (r.bridge_pid > 0)
				stop_bridge(m, &r);     /* checks the start time itself */
			if (r.state == EXEC_SERVING || r.state == EXEC_STARTING) {
				log_warnx("execution %s g%llu a%u belongs to resident %s, not %s: stopped",
				    r.id.sandbox, (unsigned long long)r.id.generation,
				    r.id.activation, r.id.resident, m->cfg.incarnation);
				r.state = EXEC_FAILED;
				r.epoch++;
				if (records_put(m, &r) == 0) {
					lease_cancel_before(m, r.id.sandbox, r.epoch);
					fail_salvaged(m, &r, "worker re-created (new resident)");
				}
			}
			continue;
		}
		if (r.state == EXEC_SERVING && bridge_identity_check(m, &r, &why) == 0 &&
		    bridge_hash_check(&r, &why) == 0 &&
		    (pfd = bridge_pidfd_open_checked(&r)) >= 0) {
			pthread_mutex_lock(&as->lock);
			live_set(m, r.id.sandbox, r.bridge_pid, pfd);
			pthread_mutex_unlock(&as->lock);
			(void)egress_attach(&r);        /* egress_init removed the old one */
			(void)gateway_attach(&r);
			log_info("adopted bridge of %s g%llu a%u (pid %d)", r.id.sandbox,
			    (unsigned long long)r.id.generation, r.id.activation, (int)r.bridge_pid);
			control_report(m, &r.id, "serving", NULL);
			continue;
		}
		if (r.state == EXEC_SERVING || r.state == EXEC_STARTING) {
			/* our process (pid and start time match) running a binary
			 * we no longer trust: stop it before the relaunch. A pid
			 * that is someone else's now is never signalled. */
			if (r.state == EXEC_SERVING && bridge_identity_check(m, &r, &why) == -EACCES)
				stop_bridge(m, &r);
			/* the recorded bridge is gone or is not the same process
			 * any more (pid reused, binary changed): a new activation,
			 * so capabilities for the old one are refused */
			log_warnx("bridge of %s g%llu a%u not adoptable (%s): relaunching",
			    r.id.sandbox, (unsigned long long)r.id.generation, r.id.activation,
			    r.state == EXEC_STARTING ? "install interrupted" : why);
			relaunch(m, &r);
			continue;
		}
		if (r.state == EXEC_RETIRED || r.state == EXEC_FAILED || r.state == EXEC_RETIRING) {
			/* a crash between commit and SIGTERM: finish the stop, but
			 * only if the pid is still the recorded bridge */
			if (r.bridge_pid > 0)
				stop_bridge(m, &r);        /* checks the start time itself */
			/* a crash between the failed commit and its report would
			 * leave the control plane routing to it: reported again
			 * (the control plane keeps the error first reported) */
			if (r.state == EXEC_FAILED)
				control_report(m, &r.id, "failed", "failed before sbx-manager restarted");
		}
	}
	free(all);
	return 0;
}

/* the bridge pid of sandbox exited on its own: relaunched if the record
 * still names it serving (a retirement queued before this moved it on),
 * within the relaunch budget; else the execution failed. In the lane. */
static void
bridge_exited(struct mgr *m, const char *sandbox, pid_t pid)
{
	struct record r;

	if (records_get(m, sandbox, &r) != 0 || r.state != EXEC_SERVING || r.bridge_pid != pid)
		return;
	if (relaunch_allowed(m, &r)) {
		log_warnx("bridge of %s g%llu a%u exited: relaunching", r.id.sandbox,
		    (unsigned long long)r.id.generation, r.id.activation);
		relaunch(m, &r);
		return;
	}
	log_warnx("bridge of %s g%llu a%u exited, relaunched %d times in %d s: failed",
	    r.id.sandbox, (unsigned long long)r.id.generation, r.id.activation,
	    RELAUNCH_MAX, RELAUNCH_WINDOW_S);
	r.state = EXEC_FAILED;
	r.epoch++;
	/* its jail may wait for a next bridge: its uid slot stays held
	 * until end_network ended it (as in do_retire) */
	records_slot_draining(m, r.slot);
	if (records_put(m, &r) != 0) {
		records_slot_drained(m, r.slot);
		return;
	}
	lease_cancel_before(m, r.id.sandbox, r.epoch);
	end_network(m, &r);
	records_slot_drained(m, r.slot);
	fail_salvaged(m, &r, "bridge exited too often");
}

/* a bridge that exits on its own (or whose guest died, which ends the
 * bridge too): relaunched as activation + 1, like after a restart, at most
 * RELAUNCH_MAX times per generation within RELAUNCH_WINDOW_S; after that
 * the execution failed. Committed, then reported. */
void *
assign_monitor_thread(void *arg)
{
	struct epoll_event ev[64];
	struct mgr *m = arg;
	struct mgr_assign *as = m->assign;
	char sbx[SPACE_ID_MAX + 1];
	int i, n, k;
	pid_t pid;

	while (!atomic_load(&m->stopping)) {
		/* the timeout only to see the stop */
		if ((n = epoll_wait(as->ep, ev, (int)(sizeof(ev) / sizeof(ev[0])), 1000)) <= 0)
			continue;
		for (k = 0; k < n; k++) {
			struct job *j;

			i = (int)(ev[k].data.u64 >> 32);
			pid = (pid_t)(uint32_t)ev[k].data.u64;
			pthread_mutex_lock(&as->lock);
			if (i < 0 || i >= LIVE_MAX || as->live[i].pidfd <= 0 || as->live[i].pid != pid) {
				pthread_mutex_unlock(&as->lock);
				continue;       /* stopped on purpose */
			}
			waitid(P_PIDFD, (id_t)as->live[i].pidfd, NULL, WEXITED | WNOHANG);
			memcpy(sbx, as->live[i].sandbox, sizeof(sbx));
			{
				int old = as->live[i].pidfd;

				live_drop(as, i);
				close(old);
			}
			pthread_mutex_unlock(&as->lock);
			/* decided in the sandbox's lane, after whatever was
			 * queued there before (a retirement wins) */
			if ((j = calloc(1, sizeof(*j))) == NULL)
				continue;
			j->kind = JOB_EXITED;
			j->pid = pid;
			if (lane_push(m, sbx, j) != 0)
				log_warnx("bridge of %s exited; no lane free to relaunch it", sbx);
		}
	}
	return NULL;
}

void
assign_shutdown(struct mgr *m)
{
	struct mgr_assign *as = m->assign;
	int i;

	pthread_mutex_lock(&as->lock);
	for (i = 0; i < LIVE_MAX; i++)
		if (as->live[i].pidfd > 0) {
			int old = as->live[i].pidfd;

			live_drop(as, i);
			close(old);
		}
	pthread_mutex_unlock(&as->lock);
}

int
assign_checkpoint(struct mgr *m, const struct route_identity *id)
{
	struct job *j = calloc(1, sizeof(*j));

	if (j == NULL)
		return -ENOMEM;
	j->kind = JOB_CHECKPOINT;
	j->a.id = *id;
	return lane_push(m, id->sandbox, j);
}
