/* The control-plane client: register, heartbeat, key bundles, assignment
 * long-poll and status reports (docs/protocol.md section 3). What goes out
 * is built here; every exchange with space-control runs in the
 * unprivileged control client (ctlproc.c, ctlchild.c), which alone holds
 * the worker credential and parses the control plane's JSON. What comes
 * back is decoded by ctlmsg.h, and the key bundle is verified here. */
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "ctlmsg.h"
#include "keys.h"
#include "log.h"
#include "msg.h"
#include "gateway.h"
#include "sbx-manager.h"
#include "util.h"
#include "verifier.h"

/* sandboxes whose last status report did not get through: re-sent (from
 * the committed record) once the control plane answers again */
#define PENDING_MAX 1024
/* reports waiting for the reporter thread; beyond this a status report is
 * left to the pending list (re-sent from the record), others are dropped */
#define OUTBOX_MAX 4096

/* one report to send: the threads that commit state (assignments, the
 * exit monitor, reconciliation) never wait for the control plane, which
 * may be slow or stopped; they queue the report and go on */
struct outgoing {
	struct outgoing *next;
	char path[256];
	const char *what;               /* static: for the log */
	char *body;
	char sandbox[SPACE_ID_MAX + 1]; /* re-sent from its record if lost; "" not */
	char key[SPACE_ID_MAX + 1];     /* the sandbox it is about: its order is kept */
};

/* reporter threads: reports about different sandboxes go out at once (a
 * hundred creates are not reported one round trip after another); those
 * about one sandbox go out one at a time, in commit order */
#define REPORTERS 4

struct mgr_control {
	pthread_mutex_t pending_lock;
	char pending[PENDING_MAX][SPACE_ID_MAX + 1];
	size_t npending;
	pthread_mutex_t out_lock;
	pthread_cond_t out_cond;
	struct outgoing *out_head, *out_tail;
	size_t nout;
	char inflight[REPORTERS][SPACE_ID_MAX + 1];     /* keys being sent */
	bool busy[REPORTERS];
};

static void pending_flush(struct mgr *m);

/* one POST through the control client; *status the HTTP status (0: no
 * answer). 0 when it answered at all, -EIO otherwise */
static int
http_post(struct mgr *m, const char *path, const char *body, long timeout_s, long *status)
{
	struct ctlmsg req = { .type = CTL_POST }, ans;
	int r;

	*status = 0;
	if (strlen(path) >= sizeof(req.path))
		return -EINVAL;
	memcpy(req.path, path, strlen(path) + 1);
	req.text = (char *)body;
	req.text_len = strlen(body);
	req.timeout_s = (uint32_t)timeout_s;
	if ((r = ctlproc_call(m, &req, (int)timeout_s + 10, &ans, NULL)) < 0)
		return r == -EINVAL ? r : -EIO;
	*status = ans.status;
	r = ans.result == CTL_OK || ans.result == CTL_REFUSED ? 0 : -EIO;
	ctlmsg_clear(&ans);
	return r;
}

int
control_init(struct mgr *m)
{
	struct mgr_control *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return -ENOMEM;
	pthread_mutex_init(&c->pending_lock, NULL);
	pthread_mutex_init(&c->out_lock, NULL);
	pthread_cond_init(&c->out_cond, NULL);
	m->control = c;
	return 0;
}

/* what this host has, for the control plane's placement (0 = unknown):
 * sent at registration and with every heartbeat */
static void
host_resources(const struct mgr *m, json_int_t *mem, json_int_t *cpu, json_int_t *disk)
{
	struct statvfs fs;
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);

	*disk = statvfs(m->cfg.data_dir, &fs) == 0 ?
	    (json_int_t)(((uint64_t)fs.f_blocks * fs.f_frsize) >> 20) : 0;
	*mem = pages > 0 && psz > 0 ? (json_int_t)(((uint64_t)pages * (uint64_t)psz) >> 20) : 0;
	*cpu = cpus > 0 ? (json_int_t)cpus * 100 : 0;
}

int
control_register(struct mgr *m)
{
	char path[256], *body = NULL;
	long st;
	json_t *req;
	json_int_t mem, cpu, disk;
	int ret;

	host_resources(m, &mem, &cpu, &disk);
	req = json_pack("{s:s, s:s, s:i, s:{s:I, s:I, s:I}}", "incarnation", m->cfg.incarnation,
	    "endpoint", m->cfg.endpoint, "capacity", (json_int_t)m->cfg.capacity, "resources",
	    "memory_mb", mem, "cpu_percent", cpu, "disk_mb", disk);
	/* the netgtw listener: the endpoint of this worker's service routes */
	if (req != NULL && gateway_endpoint() != NULL)
		json_object_set_new(req, "gateway", json_string(gateway_endpoint()));
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL) {
		json_decref(req);
		return -ENOMEM;
	}
	json_decref(req);
	snprintf(path, sizeof(path), "/v1/workers/%s/register", m->cfg.worker_id);
	ret = http_post(m, path, body, 10, &st);
	free(body);
	if (ret == 0 && st != 200 && st != 201) {
		log_warnx("control: register answered %ld", st);
		ret = -EPERM;
	}
	return ret;
}

/* the incarnation, capacity and resources (what this host has now), and
 * the disk use once the metrics thread measured it */
static void
heartbeat_body(struct mgr *m, char *body, size_t cap)
{
	json_int_t mem, cpu, disk;
	uint64_t du[3];
	int n;

	host_resources(m, &mem, &cpu, &disk);
	n = snprintf(body, cap, "{\"incarnation\":\"%s\",\"capacity\":%u,\"resources\":"
	    "{\"memory_mb\":%lld,\"cpu_percent\":%lld,\"disk_mb\":%lld}", m->cfg.incarnation,
	    m->cfg.capacity, (long long)mem, (long long)cpu, (long long)disk);
	if (n > 0 && (size_t)n < cap && metrics_disk_get(m, du))
		n += snprintf(body + n, cap - (size_t)n, ",\"disk\":{\"layers\":%llu,"
		    "\"run\":%llu,\"snapshots\":%llu}", (unsigned long long)du[0],
		    (unsigned long long)du[1], (unsigned long long)du[2]);
	if (n > 0 && (size_t)n + 2 <= cap)
		strcat(body, "}");
}

/* at most this many sandboxes' refusal counts ride on one heartbeat (the
 * rest on the next ones, every 5 s) */
#define HB_REFUSALS 48

/* the heartbeat body with the refusals counted since the last accepted
 * one (refusals.c); *nsent of them in sent[] */
static void
heartbeat_with_refusals(struct mgr *m, char *body, size_t cap, struct refusal_sent *sent,
    size_t *nsent)
{
	char ref[HB_REFUSALS * 160 + 32];
	size_t l;

	heartbeat_body(m, body, cap);
	*nsent = refusals_report(sent, HB_REFUSALS, ref, sizeof(ref));
	l = strlen(body);
	if (*nsent == 0 || l < 2 || body[l - 1] != '}' || l + strlen(ref) + 2 > cap) {
		*nsent = 0;
		return;
	}
	body[l - 1] = ',';
	strcpy(body + l, ref);
	strcat(body, "}");
}

void *
control_heartbeat_thread(void *arg)
{
	static struct refusal_sent sent[HB_REFUSALS];
	char path[256], body[640 + HB_REFUSALS * 160 + 32];
	struct mgr *m = arg;
	size_t nsent;
	bool refusals_refused = false;
	long st;
	int r;
	bool was_ok = true;

	snprintf(path, sizeof(path), "/v1/workers/%s/heartbeat", m->cfg.worker_id);
	/* the worker serves what it has while the control plane is away;
	 * registration happens when it answers */
	while (!atomic_load(&m->stopping) && !atomic_load(&m->registered)) {
		if (control_register(m) == 0) {
			atomic_store(&m->registered, true);
			log_info("control: registered");
			break;
		}
		sleep(2);
	}
	while (!atomic_load(&m->stopping)) {
		sleep(5);
		heartbeat_with_refusals(m, body, sizeof(body), sent, &nsent);
		r = http_post(m, path, body, 5, &st);
		/* a control plane that does not take "refusals" (an older one
		 * during an upgrade) answers 400: the heartbeat goes again
		 * without them, which keeps this worker live; the counts wait */
		if (r == 0 && st == 400 && nsent > 0) {
			if (!refusals_refused)
				log_warnx("control: heartbeat with refusals answered 400; sent without");
			refusals_refused = true;
			nsent = 0;
			heartbeat_body(m, body, sizeof(body));
			r = http_post(m, path, body, 5, &st);
		}
		if (r != 0 || st != 200) {
			if (was_ok)
				log_warnx("control: heartbeat failed (status %ld)", st);
			was_ok = false;
			/* the control plane may have lost us (it restarted from an
			 * older state): register again, it is idempotent */
			if (st == 404 || st == 409)
				control_register(m);
		} else {
			was_ok = true;
			refusals_sent(sent, nsent);
			pending_flush(m);
		}
	}
	return NULL;
}

/* fetch GET /v1/keys, verify the bundle under the PINNED root key (never
 * the "root" the answer carries) and install it; a lower version than the
 * one installed is refused (a replayed old bundle could resurrect a
 * withdrawn key). */
/* the last verified bundle, from D/keys.bundle */
int
control_load_keys(struct mgr *m)
{
	char path[PATH_MAX + 32], *tok = NULL;
	struct key_bundle kb;
	size_t len;
	int ret;

	snprintf(path, sizeof(path), "%s/keys.bundle", m->cfg.data_dir);
	if ((ret = read_file(path, SPACE_BUNDLE_TOKEN_MAX, &tok, &len)) != 0)
		return ret;
	ret = bundle_verify(tok, len, m->cfg.root_pk, &kb);
	if (ret == 0)
		ret = verifier_set_bundle(m->verifier, &kb);
	if (ret == 0)
		log_info("control: kept key bundle version %llu installed",
		    (unsigned long long)kb.version);
	else
		log_warnx("control: the kept key bundle does not verify; ignored");
	free(tok);
	return ret;
}

int
control_fetch_keys(struct mgr *m)
{
	struct ctlmsg req = { .type = CTL_KEYS_GET }, ans;
	const char *bundle;
	struct key_bundle kb;
	int ret;

	if ((ret = ctlproc_call(m, &req, 20, &ans, NULL)) != 0)
		return ret;
	ret = -EINVAL;
	if (ans.result != CTL_OK || ans.text == NULL)
		goto out;
	/* the child only found it in the answer: this is the check */
	bundle = ans.text;
	if ((ret = bundle_verify(bundle, ans.text_len, m->cfg.root_pk, &kb)) != 0) {
		log_warnx("control: key bundle does not verify under the pinned root key");
		goto out;
	}
	if (kb.version < verifier_bundle_version(m->verifier)) {
		log_warnx("control: refusing key bundle version %llu (have %llu)",
		    (unsigned long long)kb.version,
		    (unsigned long long)verifier_bundle_version(m->verifier));
		ret = -ESTALE;
		goto out;
	}
	if (kb.version == verifier_bundle_version(m->verifier)) {
		ret = 0;
		goto out;
	}
	ret = verifier_set_bundle(m->verifier, &kb);
	if (ret == 0) {
		char path[PATH_MAX + 32];

		log_info("control: key bundle version %llu installed (%zu keys)",
		    (unsigned long long)kb.version, kb.n);
		/* kept for a restart while the control plane is away; it is
		 * verified under the pinned root again when loaded */
		snprintf(path, sizeof(path), "%s/keys.bundle", m->cfg.data_dir);
		if (write_file_atomic(path, bundle, ans.text_len, 0644) != 0)
			log_warnx("control: cannot keep the key bundle in %s", path);
	}
out:
	ctlmsg_clear(&ans);
	return ret;
}

void *
control_keys_thread(void *arg)
{
	struct mgr *m = arg;

	while (!atomic_load(&m->stopping)) {
		sleep(10);
		control_fetch_keys(m);
	}
	return NULL;
}

int
control_assignments(struct mgr *m, uint64_t after, int wait_s, struct msg_assignments *out)
{
	struct ctlmsg req = { .type = CTL_ASSIGN_GET }, ans;
	int ret;

	memset(out, 0, sizeof(*out));
	req.after = after;
	req.wait_s = (uint32_t)wait_s;
	if ((ret = ctlproc_call(m, &req, wait_s + 20, &ans, out)) != 0)
		return -EIO;
	if (ans.result == CTL_REFUSED) {
		log_warnx("control: assignments answered %u", ans.status);
		ret = ans.status == 401 || ans.status == 403 ? -EPERM : -EIO;
	} else if (ans.result != CTL_OK)
		ret = -EIO;     /* no answer, or a malformed one (the child said which) */
	ctlmsg_clear(&ans);
	if (ret != 0)
		msg_assignments_free(out);
	return ret;
}

static void
pending_add(struct mgr *m, const char *sandbox)
{
	struct mgr_control *c = m->control;
	size_t i;

	pthread_mutex_lock(&c->pending_lock);
	for (i = 0; i < c->npending; i++)
		if (strcmp(c->pending[i], sandbox) == 0)
			break;
	if (i == c->npending && c->npending < PENDING_MAX)
		snprintf(c->pending[c->npending++], sizeof(c->pending[0]), "%s", sandbox);
	pthread_mutex_unlock(&c->pending_lock);
}

static int report(struct mgr *m, const struct route_identity *id, const char *state,
    const char *error, json_t *snap);

static void
pending_flush(struct mgr *m)
{
	struct mgr_control *c = m->control;
	char sbx[SPACE_ID_MAX + 1];
	struct record r;

	for (;;) {
		pthread_mutex_lock(&c->pending_lock);
		if (c->npending == 0) {
			pthread_mutex_unlock(&c->pending_lock);
			return;
		}
		memcpy(sbx, c->pending[--c->npending], sizeof(sbx));
		pthread_mutex_unlock(&c->pending_lock);
		if (records_get(m, sbx, &r) != 0)
			continue;
		if (r.state == EXEC_SERVING)
			report(m, &r.id, "serving", NULL, NULL);
		else if (r.state == EXEC_FAILED)
			report(m, &r.id, "failed", "reported late", NULL);
		else if (r.state == EXEC_RETIRED)
			report(m, &r.id, "retired", NULL, NULL);
	}
}

/* POST body to path, retried: the state is committed locally already, and
 * a restart reports again from the records. Only the reporter threads
 * call this. */
static int
post_retried(struct mgr *m, const char *path, const char *body, const char *what)
{
	long st;
	int ret = -EIO, tries, max = atomic_load(&m->registered) ? 5 : 1;

	for (tries = 0; tries < max && !atomic_load(&m->stopping); tries++) {
		ret = http_post(m, path, body, 10, &st);
		if (ret == 0 && st == 200)
			break;
		if (ret == 0 && st >= 400 && st < 500) {
			log_warnx("control: %s answered %ld", what, st);
			ret = -EINVAL;
			break;
		}
		ret = -EIO;
		sleep(1);
	}
	return ret;
}

/* queue req (consumed) for the reporter thread, in commit order */
static int
outbox_put(struct mgr *m, const char *path, json_t *req, const char *what,
    const char *resend_sandbox, const char *key)
{
	struct mgr_control *c = m->control;
	struct outgoing *o;
	char *body;

	if (req == NULL)
		return -ENOMEM;
	body = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (body == NULL || (o = calloc(1, sizeof(*o))) == NULL) {
		free(body);
		if (resend_sandbox)
			pending_add(m, resend_sandbox);
		return -ENOMEM;
	}
	snprintf(o->path, sizeof(o->path), "%s", path);
	o->what = what;
	o->body = body;
	if (resend_sandbox)
		snprintf(o->sandbox, sizeof(o->sandbox), "%s", resend_sandbox);
	snprintf(o->key, sizeof(o->key), "%s", key);
	pthread_mutex_lock(&c->out_lock);
	if (c->nout >= OUTBOX_MAX) {
		pthread_mutex_unlock(&c->out_lock);
		log_warnx("control: %zu reports waiting; %s not queued", (size_t)OUTBOX_MAX, what);
		if (resend_sandbox)
			pending_add(m, resend_sandbox);
		free(body);
		free(o);
		return -ENOBUFS;
	}
	if (c->out_tail)
		c->out_tail->next = o;
	else
		c->out_head = o;
	c->out_tail = o;
	c->nout++;
	pthread_cond_signal(&c->out_cond);
	pthread_mutex_unlock(&c->out_lock);
	return 0;
}

/* the first queued report whose sandbox no other reporter is sending (so
 * the reports of one sandbox stay in order), taken off the queue and
 * marked in flight in slot; NULL when there is none. out_lock held. */
static struct outgoing *
outbox_take(struct mgr_control *c, int slot)
{
	struct outgoing *o, *prev = NULL;
	int i;

	for (o = c->out_head; o != NULL; prev = o, o = o->next) {
		for (i = 0; i < REPORTERS; i++)
			if (c->busy[i] && strcmp(c->inflight[i], o->key) == 0)
				break;
		if (i < REPORTERS)
			continue;
		if (prev)
			prev->next = o->next;
		else
			c->out_head = o->next;
		if (c->out_tail == o)
			c->out_tail = prev;
		c->nout--;
		c->busy[slot] = true;
		memcpy(c->inflight[slot], o->key, sizeof(o->key));
		return o;
	}
	return NULL;
}

struct reporter {
	struct mgr *m;
	int slot;
};

static void *
reporter_main(void *arg)
{
	struct reporter *rp = arg;
	struct mgr *m = rp->m;
	struct mgr_control *c = m->control;
	struct outgoing *o;

	while (!atomic_load(&m->stopping)) {
		pthread_mutex_lock(&c->out_lock);
		while ((o = outbox_take(c, rp->slot)) == NULL)
			pthread_cond_wait(&c->out_cond, &c->out_lock);
		pthread_mutex_unlock(&c->out_lock);
		/* not delivered (the control plane is away): the record is
		 * committed, so it is reported again from the record later */
		if (post_retried(m, o->path, o->body, o->what) == -EIO && o->sandbox[0])
			pending_add(m, o->sandbox);
		free(o->body);
		free(o);
		pthread_mutex_lock(&c->out_lock);
		c->busy[rp->slot] = false;
		/* a report of the same sandbox may be waiting for this one */
		pthread_cond_broadcast(&c->out_cond);
		pthread_mutex_unlock(&c->out_lock);
	}
	return NULL;
}

/* sends the queued reports: REPORTERS threads, this one included */
void *
control_reporter_thread(void *arg)
{
	static struct reporter rp[REPORTERS];
	pthread_t t;
	int i;

	for (i = 0; i < REPORTERS; i++)
		rp[i] = (struct reporter){ arg, i };
	for (i = 1; i < REPORTERS; i++)
		if (pthread_create(&t, NULL, reporter_main, &rp[i]) == 0)
			pthread_detach(t);
	return reporter_main(&rp[0]);
}

static int
report(struct mgr *m, const struct route_identity *id, const char *state, const char *error,
    json_t *snap)
{
	char path[256];
	json_t *req;
	bool has_snap = snap != NULL && !json_is_null(snap);

	req = json_pack("{s:o, s:s}", "identity", route_identity_pack(id), "state", state);
	if (req == NULL) {
		json_decref(snap);
		return -ENOMEM;
	}
	if (error)
		json_object_set_new(req, "error", json_string(error));
	if (snap)
		json_object_set_new(req, "snapshot", snap);
	snprintf(path, sizeof(path), "/v1/workers/%s/status", m->cfg.worker_id);
	/* if it is not delivered (the control plane is away), the record is
	 * committed, so it is reported again from the record later. A
	 * retirement with an archive is not: its digest would be lost. A
	 * failure is, without its archive: the sandbox then cannot be
	 * resumed, which is safe (never from an older snapshot). */
	return outbox_put(m, path, req, "status",
	    !has_snap || strcmp(state, "failed") == 0 ? id->sandbox : NULL, id->sandbox);
}

int
control_report(struct mgr *m, const struct route_identity *id, const char *state, const char *error)
{
	return report(m, id, state, error, NULL);
}

int
control_report_retired(struct mgr *m, const struct route_identity *id, const char *digest, uint64_t size,
    const char *error)
{
	json_t *snap = digest ? json_pack("{s:s, s:I}", "digest", digest, "size",
	    (json_int_t)size) : json_null();

	return report(m, id, "retired", error, snap);
}

int
control_report_failed(struct mgr *m, const struct route_identity *id, const char *error, const char *digest,
    uint64_t size)
{
	json_t *snap = digest ? json_pack("{s:s, s:I}", "digest", digest, "size",
	    (json_int_t)size) : json_null();

	return report(m, id, "failed", error, snap);
}

int
control_checkpoint(struct mgr *m, const struct route_identity *id, const char *digest,
    uint64_t size, const char *layer_base)
{
	char path[256], *body;
	json_t *req;
	long st = 0;
	int r;

	/* base: what the layer's next archive is a delta of until it takes
	 * this one (null: whole), which the control plane keeps */
	req = json_pack("{s:o, s:s, s:I, s:s?}", "identity", route_identity_pack(id), "digest",
	    digest, "size", (json_int_t)size, "base", layer_base && layer_base[0] ? layer_base : NULL);
	body = req ? json_dumps(req, JSON_COMPACT) : NULL;
	json_decref(req);
	if (body == NULL)
		return -ENOMEM;
	snprintf(path, sizeof(path), "/v1/workers/%s/checkpoints", m->cfg.worker_id);
	r = http_post(m, path, body, 10, &st);
	free(body);
	if (r != 0)
		return -EIO;
	if (st != 200) {
		log_warnx("checkpoint of %s g%llu: the control plane answered %ld", id->sandbox,
		    (unsigned long long)id->generation, st);
		return -ESTALE;
	}
	return 0;
}

int
control_report_snapshot(struct mgr *m, const char *snapshot_id, const struct route_identity *id,
    const char *digest, uint64_t size, const char *error)
{
	char path[256];
	json_t *req;

	if (digest)
		req = json_pack("{s:s, s:s, s:I, s:s, s:I}", "snapshot_id", snapshot_id,
		    "sandbox", id->sandbox, "generation", (json_int_t)id->generation,
		    "digest", digest, "size", (json_int_t)size);
	else
		req = json_pack("{s:s, s:s, s:I, s:s}", "snapshot_id", snapshot_id,
		    "sandbox", id->sandbox, "generation", (json_int_t)id->generation,
		    "error", error ? error : "snapshot failed");
	snprintf(path, sizeof(path), "/v1/workers/%s/snapshots", m->cfg.worker_id);
	return outbox_put(m, path, req, "snapshot report", NULL, id->sandbox);
}

int
control_archives(struct mgr *m, const char *body, char (**digests)[65], size_t *n)
{
	struct ctlmsg req = { .type = CTL_ARCHIVES_POST }, ans;
	int rc;

	*digests = NULL;
	*n = 0;
	req.text = (char *)body;
	req.text_len = strlen(body);
	if ((rc = ctlproc_call(m, &req, 20, &ans, NULL)) < 0)
		return rc;
	if (ans.result != CTL_OK) {
		if (ans.result == CTL_MALFORMED)
			log_warnx("snapshot store: the control plane's answer is malformed; nothing deleted");
		else
			log_warnx("control: archive collection answered %u", ans.status);
		ctlmsg_clear(&ans);
		return -EIO;
	}
	*digests = ans.digests;
	*n = ans.count;
	ans.digests = NULL;
	ctlmsg_clear(&ans);
	return 0;
}
