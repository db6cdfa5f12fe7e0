/* The failover: the sandboxes of a worker that stays lost are placed
 * elsewhere. Like lifecycle.c, no SQL: every backend shares this file.
 *
 * A worker silent for --heartbeat-timeout is lost (no placements, no
 * capabilities); lost for --lost-grace more, its executions are given up.
 * Per sandbox, one transaction:
 *   - checks again that the worker is still lost past the grace and that
 *     the execution is still the sandbox's current, active one (a
 *     heartbeat, a kill or another daemon's failover committed before this
 *     transaction wins);
 *   - takes the sandbox's lifecycle lease (compare-and-swap): a sandbox
 *     whose lease another daemon holds (an operation, or its failover) is
 *     left alone, so with several replicas only one acts;
 *   - retires the lost execution in the record: state `failed`, error
 *     "worker lost", and a retire assignment (no archive) to its worker,
 *     which that worker's long-poll delivers if it ever comes back: it
 *     stops the execution and cannot serve it (no capability names it any
 *     more, and a report of `serving` is refused);
 *   - places the next generation from the sandbox's latest snapshot (its
 *     pin kept), the sandbox `creating` until it serves; with no snapshot
 *     of a sandbox that has served, or no worker with room, the sandbox is
 *     `failed`, and a resume accepts it from its latest snapshot
 *     (lifecycle_ops.c);
 *   - releases the lease, audits `sandbox.failover`.
 * The retirement and the new generation are one commit: the new execution
 * cannot serve before the old one is retired in the record, and two
 * executions of a sandbox never serve by the record. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "store_tx.h"
#include "lifecycle.h"
#include "util.h"

#define FAILOVER_ERROR "worker lost"

struct failover_ctx {
	const char *owner, *sandbox, *worker, *me;
	int64_t gen, ttl, lost_before;
	/* out */
	const char *result;             /* "placed", "failed", NULL: nothing done */
	int64_t new_gen;
	char new_worker[SPACE_ID_MAX + 1];
	const char *why;
};

static int
failover_tx(struct store *s, void *arg)
{
	struct failover_ctx *x = arg;
	struct sbx_cur c;
	json_t *still = NULL;
	char detail[256], *spec = NULL;
	const char *pin;
	int64_t now = now_unix();
	int rc;

	x->result = NULL;
	x->why = NULL;
	/* everything the listing said, true at this transaction */
	if ((rc = R(s)->lost_execs(s, x->lost_before, x->sandbox, &still)) < 0)
		return rc;
	rc = json_array_size(still) == 1 &&
	    json_integer_value(json_object_get(json_array_get(still, 0), "generation")) == x->gen &&
	    streq(json_string_value(json_object_get(json_array_get(still, 0), "worker")), x->worker);
	json_decref(still);
	if (!rc)
		return 0;
	if ((rc = R(s)->sandbox_cur(s, x->owner, x->sandbox, &c)) < 0)
		return rc == -ENOENT ? 0 : rc;
	if ((rc = R(s)->lease_take(s, x->sandbox, x->me, now + x->ttl, now)) <= 0)
		goto out;       /* an operation or another daemon holds it */

	if ((rc = R(s)->exec_set_failed(s, x->sandbox, x->gen, FAILOVER_ERROR, now)) < 0)
		goto out;
	if ((rc = R(s)->assignment_add(s, x->worker, x->sandbox, x->gen, "retire",
	    "{\"snapshot\":false}", now)) < 0)
		goto out;

	if (c.snapshot[0] == '\0' && !streq(c.state, "creating")) {
		/* it served, and nothing of it was archived: a new execution
		 * from the template would silently serve without its files */
		x->why = "no snapshot to resume from";
		rc = -ENOENT;
	} else if ((spec = lc_spec_json(c.template_, c.resources,
	    c.snapshot[0] ? c.snapshot : NULL)) == NULL) {
		rc = -ENOMEM;
		goto out;
	} else {
		pin = c.pinned[0] ? c.pinned : NULL;
		rc = lc_place_execution(s, x->sandbox, pin, NULL, spec, &x->why, &x->new_gen,
		    x->new_worker);
	}
	if (rc == 0) {
		x->result = "placed";
		rc = R(s)->sandbox_set_state(s, x->sandbox, "creating");
	} else if (rc == -EAGAIN || rc == -EHOSTDOWN || rc == -ENOENT) {
		x->result = "failed";
		rc = R(s)->sandbox_set_state(s, x->sandbox, "failed");
	}
	if (rc < 0)
		goto out;
	if ((rc = R(s)->lease_release(s, x->sandbox, x->me)) < 0)
		goto out;
	if (streq(x->result, "placed"))
		snprintf(detail, sizeof(detail), "worker=%s from=%lld to=%lld on=%s snapshot=%s",
		    x->worker, (long long)x->gen, (long long)x->new_gen, x->new_worker,
		    c.snapshot[0] ? c.snapshot : "-");
	else
		snprintf(detail, sizeof(detail), "worker=%s from=%lld failed: %s", x->worker,
		    (long long)x->gen, x->why ? x->why : "-");
	rc = R(s)->audit(s, x->owner, "sandbox.failover", x->sandbox, detail);
out:
	free(spec);
	lc_cur_free(&c);
	if (rc < 0)
		x->result = NULL;
	return rc < 0 ? rc : 0;
}

struct list_ctx {
	int64_t lost_before;
	json_t **out;
};

static int
list_tx(struct store *s, void *arg)
{
	struct list_ctx *x = arg;

	json_decref(*x->out);           /* an earlier run's answer (a retry) */
	*x->out = NULL;
	return R(s)->lost_execs(s, x->lost_before, NULL, x->out);
}

int
lc_workers_failover(struct store *s, const char *me, int64_t ttl, int64_t lost_before,
    int *failed)
{
	json_t *lost = NULL, *e;
	struct list_ctx l = { lost_before, &lost };
	size_t i;
	int rc, placed = 0;

	*failed = 0;
	if ((rc = R(s)->tx(s, list_tx, &l)) < 0) {
		json_decref(lost);
		return rc;
	}
	json_array_foreach(lost, i, e) {
		struct failover_ctx x = {
			.owner = json_string_value(json_object_get(e, "owner")),
			.sandbox = json_string_value(json_object_get(e, "sandbox")),
			.worker = json_string_value(json_object_get(e, "worker")),
			.gen = json_integer_value(json_object_get(e, "generation")),
			.me = me, .ttl = ttl, .lost_before = lost_before,
		};
		if (x.owner == NULL || x.sandbox == NULL || x.worker == NULL)
			continue;
		if ((rc = R(s)->tx(s, failover_tx, &x)) < 0) {
			log_warnx("failover of %s (worker %s lost): %d, tried again next tick",
			    x.sandbox, x.worker, rc);
			continue;
		}
		if (x.result == NULL)
			continue;
		if (streq(x.result, "placed")) {
			placed++;
			log_info("sandbox %s: worker %s lost, generation %lld placed on %s", x.sandbox,
			    x.worker, (long long)x.new_gen, x.new_worker);
		} else {
			(*failed)++;
			log_warnx("sandbox %s: worker %s lost, failed (%s)", x.sandbox, x.worker,
			    x.why ? x.why : "-");
		}
	}
	json_decref(lost);
	return placed;
}

/* a failed sandbox may be resumed from its latest snapshot when its
 * execution was lost with its worker (the failover could not place it):
 * 1 yes, 0 no */
int
lc_lost_resumable(struct store *s, const char *sandbox, int64_t gen, const char *snapshot)
{
	char err[64];
	int rc;

	if (snapshot == NULL || snapshot[0] == '\0')
		return 0;
	if ((rc = R(s)->exec_error(s, sandbox, gen, err, sizeof(err))) <= 0)
		return rc;
	return streq(err, FAILOVER_ERROR);
}
