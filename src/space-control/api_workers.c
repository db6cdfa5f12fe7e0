/* Worker API: register, heartbeat, the assignment stream (long-poll) and
 * execution status reports. The path's {id} was already checked against
 * the credential (auth.c), so a worker can only speak for itself. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "ports.h"
#include "store_tx.h"
#include "log.h"
#include "snapshot.h"
#include "util.h"
#include "worker_disk.h"

#define ENDPOINT_MAX 255
#define STATUS_ERROR_MAX 1024
#define WORKER_RES_MAX   (1ll << 32)    /* MiB or percent a worker may report */
/* how often a long-poll looks at the store for what another daemon committed */
#define ASSIGN_RECHECK_NS (250ull * 1000000ull)

static const char *
str_field(struct req *r, json_t *o, const char *k, bool id)
{
	json_t *v = json_object_get(o, k);

	if (v == NULL || !json_is_string(v) || (id && !id_valid(json_string_value(v)))) {
		reply_error(r, 400, "bad_request", "\"%s\" must be %s", k,
		    id ? "an id ([A-Za-z0-9_-]{1,64})" : "a string");
		return NULL;
	}
	return json_string_value(v);
}

static bool
endpoint_valid(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > ENDPOINT_MAX)
		return false;
	if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
		return false;
	for (i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || s[i] == 0x7f || s[i] == '"' || s[i] == '\\')
			return false;
	return true;
}

/* GET /v1/workers (user endpoint): the operator's view of the fleet.
 * Credentials and incarnations are not shown. */
void
api_workers_list(struct req *r)
{
	json_t *arr = NULL;
	int rc = r->ctl->st->ops->workers_list(r->ctl->st, &arr);

	if (rc < 0) {
		reply_store_error(r, rc, "worker");
		return;
	}
	worker_disk_annotate(arr);
	reply_json(r, 200, json_pack("{s:o}", "workers", arr));
}

/* what the worker has, for placement: optional (an older worker reports
 * nothing and is placed by its sandbox count only); each field bounded */
static bool
worker_resources(struct req *r, json_t *in, struct res *t)
{
	static const char *const keys[] = { "memory_mb", "cpu_percent", "disk_mb", NULL };
	static const char *const names[] = { "memory_mb", "cpu_percent", "disk_mb" };
	int64_t *f[] = { &t->memory_mb, &t->cpu_percent, &t->disk_mb };
	json_t *v;
	size_t i;

	memset(t, 0, sizeof(*t));
	if (in == NULL)
		return true;
	if (!json_is_object(in)) {
		reply_error(r, 400, "bad_request", "\"resources\" must be an object");
		return false;
	}
	if (!json_keys_only(r, in, keys))
		return false;
	for (i = 0; i < 3; i++) {
		if ((v = json_object_get(in, names[i])) == NULL)
			continue;
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > WORKER_RES_MAX) {
			reply_error(r, 400, "bad_request", "\"resources.%s\" must be an integer in 0..%lld",
			    names[i], (long long)WORKER_RES_MAX);
			return false;
		}
		*f[i] = (int64_t)json_integer_value(v);
	}
	return true;
}

struct gateway_set { const char *worker, *gateway; };

static int
gateway_tx(struct store *s, void *arg)
{
	struct gateway_set *g = arg;

	return s->rows->worker_gateway_set(s, g->worker, g->gateway);
}

void
api_worker_register(struct req *r)
{
	static const char *const keys[] = { "incarnation", "endpoint", "capacity", "resources",
	    "gateway", NULL };
	struct ctl *c = r->ctl;
	struct res total;
	json_t *in, *cap, *out = NULL;
	const char *inc, *ep;
	json_t *gw;
	int64_t rev = 0;
	int reassigned = 0, rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if ((inc = str_field(r, in, "incarnation", true)) == NULL ||
	    (ep = str_field(r, in, "endpoint", false)) == NULL)
		goto out;
	if (!endpoint_valid(ep)) {
		reply_error(r, 400, "bad_request", "\"endpoint\" must be an http(s) URL of at most %d bytes",
		    ENDPOINT_MAX);
		goto out;
	}
	cap = json_object_get(in, "capacity");
	if (cap == NULL || !json_is_integer(cap) || json_integer_value(cap) < 0 ||
	    json_integer_value(cap) > CONTROL_CAPACITY_MAX) {
		reply_error(r, 400, "bad_request", "\"capacity\" must be an integer in 0..%d",
		    CONTROL_CAPACITY_MAX);
		goto out;
	}
	if (!worker_resources(r, json_object_get(in, "resources"), &total))
		goto out;
	/* the worker's netgtw listener, the endpoint of its service routes */
	if ((gw = json_object_get(in, "gateway")) != NULL && !json_is_null(gw) &&
	    (!json_is_string(gw) || !ports_gateway_valid(json_string_value(gw)))) {
		reply_error(r, 400, "bad_request", "\"gateway\" must be tcp://HOST:PORT");
		goto out;
	}
	rc = c->st->ops->worker_register(c->st, r->params[0], inc, ep,
	    (int64_t)json_integer_value(cap), &total, &out, &rev, &reassigned);
	if (rc < 0) {
		reply_store_error(r, rc, "worker");
		goto out;
	}
	if (c->st->rows->worker_gateway_set != NULL &&
	    (rc = c->st->rows->tx(c->st, gateway_tx, &(struct gateway_set){ r->params[0],
	    gw && json_is_string(gw) ? json_string_value(gw) : NULL })) < 0)
		log_warnx("worker %s: cannot store its gateway (%d)", r->params[0], rc);
	if (reassigned > 0)
		assign_notify(c, NULL);
	log_info("worker %s registered (%d execution(s) re-assigned)", r->params[0], reassigned);
	reply_json(r, 200, json_pack("{s:o,s:I}", "worker", out, "revision", (json_int_t)rev));
out:
	json_decref(in);
}

void
api_worker_heartbeat(struct req *r)
{
	static const char *const keys[] = { "incarnation", "disk", "capacity", "resources",
		"refusals", NULL };
	json_t *in, *disk, *cap, *res, *refusals;
	json_int_t du[3];
	struct res total;
	int64_t capacity = -1;
	const char *inc;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys) || (inc = str_field(r, in, "incarnation", true)) == NULL)
		goto out;
	if ((disk = json_object_get(in, "disk")) != NULL && worker_disk_parse(r, disk, du) < 0)
		goto out;
	/* optional, as at registration: what the worker has now */
	if ((cap = json_object_get(in, "capacity")) != NULL) {
		if (!json_is_integer(cap) || json_integer_value(cap) < 0 ||
		    json_integer_value(cap) > CONTROL_CAPACITY_MAX) {
			reply_error(r, 400, "bad_request", "\"capacity\" must be an integer in 0..%d",
			    CONTROL_CAPACITY_MAX);
			goto out;
		}
		capacity = (int64_t)json_integer_value(cap);
	}
	res = json_object_get(in, "resources");
	if (!worker_resources(r, res, &total))
		goto out;
	/* refusals counted per sandbox since the last accepted heartbeat */
	if ((refusals = json_object_get(in, "refusals")) != NULL &&
	    !api_refusals_valid(r, refusals))
		goto out;
	rc = r->ctl->st->ops->worker_heartbeat(r->ctl->st, r->params[0], inc, capacity,
	    res ? &total : NULL);
	if (rc >= 0 && disk != NULL)
		worker_disk_set(r->params[0], du);
	/* a failure to add them answers it: the worker sends them again */
	if (rc >= 0 && refusals != NULL && json_array_size(refusals) > 0) {
		int arc = api_refusals_add(r->ctl->st, r->params[0], refusals);
		if (arc < 0 && arc != -ENOTSUP)
			rc = arc;
	}
	if (rc == -ESTALE)
		reply_error(r, 409, "conflict", "incarnation is not the registered one; register again");
	else if (rc < 0)
		reply_store_error(r, rc, "worker");
	else
		reply_json(r, 200, json_pack("{s:b}", "ok", 1));
out:
	json_decref(in);
}


void
api_worker_assignments(struct req *r)
{
	struct ctl *c = r->ctl;
	uint64_t after = 0, wait = 0;
	int64_t rev = 0;
	uint64_t deadline, seq, now;
	json_t *arr = NULL;
	int rc;

	if (r->body_len > 0) {
		reply_error(r, 400, "bad_request", "no body expected");
		return;
	}
	if (req_query_u(r, "after", INT64_MAX / 2, &after) < 0 ||
	    req_query_u(r, "wait", SPACE_LONGPOLL_MAX, &wait) < 0) {
		reply_error(r, 400, "bad_request", "after must be a revision, wait 0..%d seconds",
		    SPACE_LONGPOLL_MAX);
		return;
	}
	deadline = now_mono_ns() + (uint64_t)wait * 1000000000ull;
	for (;;) {
		/* read the sequence first: a commit after it wakes the wait */
		seq = assign_seq(c);
		rc = c->st->ops->assignments_after(c->st, r->params[0], after, &arr, &rev);
		if (rc < 0) {
			reply_store_error(r, rc, "worker");
			return;
		}
		if (json_array_size(arr) > 0 || now_mono_ns() >= deadline || c->stopping)
			break;
		json_decref(arr);
		arr = NULL;
		/* a commit by this daemon wakes the wait at once; one by another
		 * daemon on the same store too while the store pushes them
		 * (PostgreSQL's LISTEN); otherwise (SQLite, or a listener that
		 * lost its connection) it is seen at the next look, so the wait
		 * is cut into short slices */
		now = now_mono_ns();
		assign_wait(c, seq, assign_pushed(c) || deadline - now <= ASSIGN_RECHECK_NS ?
		    deadline : now + ASSIGN_RECHECK_NS);
	}
	reply_json(r, 200, json_pack("{s:I,s:o}", "revision", (json_int_t)rev, "assignments", arr));
}

/* d and z, an archive's "digest" and "size" as a worker reports them,
 * into snap (with a new snapshot id and what the stored archive is a
 * delta of): 1, 0 when they are not a digest and a size (the caller
 * answers 400), -1 when answered 500 */
static int
snap_fill(struct req *r, json_t *d, json_t *z, struct snap_report *snap,
    char id[SPACE_ID_MAX + 1], char base[65])
{
	memset(snap, 0, sizeof(*snap));
	if (d == NULL || !json_is_string(d) || !api_digest_valid(json_string_value(d)) ||
	    z == NULL || !json_is_integer(z) || json_integer_value(z) < 0)
		return 0;
	if (id_random("snp_", id, SPACE_ID_MAX + 1) < 0) {
		reply_error(r, 500, "internal", "cannot make an id");
		return -1;
	}
	snap->id = id;
	snap->digest = json_string_value(d);
	snap->size = json_integer_value(z);
	snap->base = archive_blob_base(r->ctl, snap->digest, base);
	return 1;
}

void
api_worker_status(struct req *r)
{
	static const char *const keys[] = { "identity", "state", "error", "snapshot", NULL };
	static const char *const snap_keys[] = { "digest", "size", NULL };
	struct route_identity id;
	struct snap_report snap;
	char snap_id[SPACE_ID_MAX + 1], snap_base[65];
	json_t *in, *e, *sn;
	const char *state, *err = NULL, *why = NULL;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (json_object_get(in, "identity") == NULL ||
	    route_identity_unpack(json_object_get(in, "identity"), &id) < 0) {
		reply_error(r, 400, "bad_request", "\"identity\" must be a route identity");
		goto out;
	}
	if ((state = str_field(r, in, "state", false)) == NULL)
		goto out;
	if (strcmp(state, "serving") != 0 && strcmp(state, "failed") != 0 &&
	    strcmp(state, "retired") != 0) {
		reply_error(r, 400, "bad_request", "\"state\" must be serving, failed or retired");
		goto out;
	}
	if ((e = json_object_get(in, "error")) != NULL && !json_is_null(e)) {
		if (!json_is_string(e) || strlen(json_string_value(e)) > STATUS_ERROR_MAX) {
			reply_error(r, 400, "bad_request", "\"error\" must be a string of at most %d bytes",
			    STATUS_ERROR_MAX);
			goto out;
		}
		err = json_string_value(e);
	}
	/* the archive of a retired (or failed, stopped) layer:
	 * {"digest","size"} or null */
	memset(&snap, 0, sizeof(snap));
	if ((sn = json_object_get(in, "snapshot")) != NULL && !json_is_null(sn)) {
		json_t *d = json_object_get(sn, "digest"), *z = json_object_get(sn, "size");
		if (strcmp(state, "serving") == 0) {
			reply_error(r, 400, "bad_request",
			    "\"snapshot\" comes only with \"retired\" or \"failed\"");
			goto out;
		}
		if (!json_is_object(sn) || !json_keys_only(r, sn, snap_keys))
			goto bad_snap;
		if ((rc = snap_fill(r, d, z, &snap, snap_id, snap_base)) < 0)
			goto out;
		if (rc == 0)
			goto bad_snap;
	}
	/* before the report: its archive is referenced from now on, even
	 * when the report is refused (the operation ended meanwhile) */
	api_archive_seen(r->ctl, snap.digest);
	rc = r->ctl->st->ops->execution_status(r->ctl->st, r->params[0], &id, state, err, &snap,
	    &why);
	if (rc < 0)
		reply_report_error(r, rc, why, "execution");
	else {
		log_info("execution %s g%llu a%u on %s: %s", id.sandbox,
		    (unsigned long long)id.generation, id.activation, r->params[0], state);
		/* a report may be what a lifecycle operation waits for, and
		 * what a client's GET ?until= waits for */
		ops_kick(r->ctl, id.sandbox);
		state_notify(r->ctl, id.sandbox);
		reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	}
	goto out;
bad_snap:
	if (r->status == 0)
		reply_error(r, 400, "bad_request", "\"snapshot\" must be {\"digest\": %d lowercase hex"
		    " digits, \"size\": a non-negative integer} or null", SNAPSHOT_DIGEST_HEX);
out:
	json_decref(in);
}

/* POST /v1/workers/{id}/checkpoints: {"identity", "digest", "size",
 * "base"}, an
 * archive of a serving execution's layer the worker made and uploaded
 * while the sandbox ran (docs/worker.md, "Checkpoints"). Its archive is
 * referenced from now on (a pending reference first, as for any report),
 * and the worker makes the layer's next archive a delta of it only after
 * this answered 200. */
void
api_worker_checkpoint(struct req *r)
{
	static const char *const keys[] = { "identity", "digest", "size", "base", NULL };
	struct route_identity id;
	struct snap_report snap;
	char snap_id[SPACE_ID_MAX + 1], snap_base[65];
	json_t *in, *b;
	const char *why = NULL, *layer_base = NULL;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (json_object_get(in, "identity") == NULL ||
	    route_identity_unpack(json_object_get(in, "identity"), &id) < 0) {
		reply_error(r, 400, "bad_request", "\"identity\" must be a route identity");
		goto out;
	}
	/* the base the serving layer has until it takes this one: a digest,
	 * null for none; left out, nothing of the sandbox is collected now */
	if ((b = json_object_get(in, "base")) != NULL) {
		if (json_is_null(b))
			layer_base = "";
		else if (json_is_string(b) && api_digest_valid(json_string_value(b)))
			layer_base = json_string_value(b);
		else {
			reply_error(r, 400, "bad_request", "\"base\" must be %d lowercase hex digits"
			    " or null", SNAPSHOT_DIGEST_HEX);
			goto out;
		}
	}
	if ((rc = snap_fill(r, json_object_get(in, "digest"), json_object_get(in, "size"), &snap,
	    snap_id, snap_base)) < 0)
		goto out;
	if (rc == 0) {
		reply_error(r, 400, "bad_request", "\"digest\" must be %d lowercase hex digits and"
		    " \"size\" a non-negative integer", SNAPSHOT_DIGEST_HEX);
		goto out;
	}
	api_archive_seen(r->ctl, snap.digest);
	rc = r->ctl->st->ops->checkpoint_report(r->ctl->st, r->params[0], &id, &snap, layer_base,
	    &why);
	if (rc < 0)
		reply_report_error(r, rc, why, "execution");
	else {
		log_info("checkpoint of %s g%llu on %s: %.12s (%lld bytes)", id.sandbox,
		    (unsigned long long)id.generation, r->params[0], snap.digest,
		    (long long)snap.size);
		reply_json(r, 200, json_pack("{s:b}", "ok", 1));
	}
out:
	json_decref(in);
}
