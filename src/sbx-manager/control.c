/* The control-plane client: register, heartbeat, key bundles, assignment
 * long-poll and status reports (docs/protocol.md section 3). The worker
 * credential is the only secret here; it is sent as a bearer and never
 * logged. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "keys.h"
#include "log.h"
#include "msg.h"
#include "sbx-manager.h"
#include "util.h"
#include "verifier.h"

#define RESP_MAX (4u << 20)

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
};

struct mgr_control {
	pthread_mutex_t pending_lock;
	char pending[PENDING_MAX][SPACE_ID_MAX + 1];
	size_t npending;
	pthread_mutex_t out_lock;
	pthread_cond_t out_cond;
	struct outgoing *out_head, *out_tail;
	size_t nout;
};

static void pending_flush(struct mgr *m);

struct buf {
	char *p;
	size_t n;
	bool over;
};

static size_t
on_body(char *data, size_t sz, size_t nm, void *arg)
{
	struct buf *b = arg;
	size_t n = sz * nm;
	char *np;

	if (b->n + n > RESP_MAX) {
		b->over = true;
		return 0;
	}
	if ((np = realloc(b->p, b->n + n + 1)) == NULL)
		return 0;
	b->p = np;
	memcpy(b->p + b->n, data, n);
	b->n += n;
	b->p[b->n] = '\0';
	return n;
}

/* one request; *status the HTTP status, *body_out malloc'd (may be NULL) */
static int
http_call(struct mgr *m, const char *method, const char *path, const char *body, long timeout_s,
    bool auth, long *status, char **body_out)
{
	char url[2048], authz[600];
	struct curl_slist *h = NULL;
	struct buf b = { 0 };
	CURL *c;
	CURLcode rc;
	int ret = -EIO;

	*status = 0;
	if (body_out)
		*body_out = NULL;
	if ((c = curl_easy_init()) == NULL)
		return -ENOMEM;
	snprintf(url, sizeof(url), "%s%s", m->cfg.control_url, path);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (auth) {
		snprintf(authz, sizeof(authz), "Authorization: Bearer %s", m->cfg.credential);
		h = curl_slist_append(h, authz);
		explicit_bzero(authz, sizeof(authz));
	}
	if (body) {
		h = curl_slist_append(h, "Content-Type: application/json");
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	rc = curl_easy_perform(c);
	if (rc != CURLE_OK) {
		log_debug("control: %s %s: %s", method, path, curl_easy_strerror(rc));
		goto out;
	}
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
	if (body_out) {
		*body_out = b.p;
		b.p = NULL;
	}
	ret = 0;
out:
	free(b.p);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return ret;
}

int
control_init(struct mgr *m)
{
	struct mgr_control *c;

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return -EIO;
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
	if (req == NULL || (body = json_dumps(req, JSON_COMPACT)) == NULL) {
		json_decref(req);
		return -ENOMEM;
	}
	json_decref(req);
	snprintf(path, sizeof(path), "/v1/workers/%s/register", m->cfg.worker_id);
	ret = http_call(m, "POST", path, body, 10, true, &st, NULL);
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

void *
control_heartbeat_thread(void *arg)
{
	char path[256], body[640];
	struct mgr *m = arg;
	long st;
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
		heartbeat_body(m, body, sizeof(body));
		if (http_call(m, "POST", path, body, 5, true, &st, NULL) != 0 || st != 200) {
			if (was_ok)
				log_warnx("control: heartbeat failed (status %ld)", st);
			was_ok = false;
			/* the control plane may have lost us (it restarted from an
			 * older state): register again, it is idempotent */
			if (st == 404 || st == 409)
				control_register(m);
		} else {
			was_ok = true;
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
	char *body = NULL;
	const char *bundle;
	struct key_bundle kb;
	json_error_t je;
	json_t *j = NULL;
	long st;
	int ret;

	if ((ret = http_call(m, "GET", "/v1/keys", NULL, 10, false, &st, &body)) != 0)
		return ret;
	ret = -EINVAL;
	if (st != 200 || body == NULL)
		goto out;
	j = json_loads(body, JSON_REJECT_DUPLICATES, &je);
	if (j == NULL || json_unpack(j, "{s:s}", "bundle", &bundle) != 0)
		goto out;
	if (strlen(bundle) > SPACE_BUNDLE_TOKEN_MAX)
		goto out;
	if ((ret = bundle_verify(bundle, strlen(bundle), m->cfg.root_pk, &kb)) != 0) {
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
		if (write_file_atomic(path, bundle, strlen(bundle), 0644) != 0)
			log_warnx("control: cannot keep the key bundle in %s", path);
	}
out:
	json_decref(j);
	free(body);
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
	char path[256], *body = NULL;
	const char *why;
	long st;
	int ret;

	memset(out, 0, sizeof(*out));
	snprintf(path, sizeof(path), "/v1/workers/%s/assignments?after=%llu&wait=%d",
	    m->cfg.worker_id, (unsigned long long)after, wait_s);
	ret = http_call(m, "GET", path, NULL, wait_s + 10, true, &st, &body);
	if (ret == 0 && st != 200) {
		log_warnx("control: assignments answered %ld", st);
		ret = st == 401 || st == 403 ? -EPERM : -EIO;
	}
	if (ret == 0 && (body == NULL ||
	    msg_assignments_decode(body, strlen(body), out, &why) != 0)) {
		log_warnx("assignments: malformed answer (%s)", body ? why : "empty");
		ret = -EIO;
	}
	free(body);
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
 * a restart reports again from the records. Only the reporter thread
 * calls this. */
static int
post_retried(struct mgr *m, const char *path, const char *body, const char *what)
{
	long st;
	int ret = -EIO, tries, max = atomic_load(&m->registered) ? 5 : 1;

	for (tries = 0; tries < max && !atomic_load(&m->stopping); tries++) {
		ret = http_call(m, "POST", path, body, 10, true, &st, NULL);
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
    const char *resend_sandbox)
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

/* sends the queued reports, one at a time, in order */
void *
control_reporter_thread(void *arg)
{
	struct mgr *m = arg;
	struct mgr_control *c = m->control;
	struct outgoing *o;

	while (!atomic_load(&m->stopping)) {
		pthread_mutex_lock(&c->out_lock);
		while (c->out_head == NULL)
			pthread_cond_wait(&c->out_cond, &c->out_lock);
		o = c->out_head;
		if ((c->out_head = o->next) == NULL)
			c->out_tail = NULL;
		c->nout--;
		pthread_mutex_unlock(&c->out_lock);
		/* not delivered (the control plane is away): the record is
		 * committed, so it is reported again from the record later */
		if (post_retried(m, o->path, o->body, o->what) == -EIO && o->sandbox[0])
			pending_add(m, o->sandbox);
		free(o->body);
		free(o);
	}
	return NULL;
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
	    !has_snap || strcmp(state, "failed") == 0 ? id->sandbox : NULL);
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
	return outbox_put(m, path, req, "snapshot report", NULL);
}

int
control_archives(struct mgr *m, const char *body, char **answer)
{
	char path[256];
	long st;
	int rc;

	snprintf(path, sizeof(path), "/v1/workers/%s/archives", m->cfg.worker_id);
	if ((rc = http_call(m, "POST", path, body, 10, true, &st, answer)) < 0)
		return rc;
	if (st != 200) {
		log_warnx("control: archive collection answered %ld", st);
		free(*answer);
		*answer = NULL;
		return -EIO;
	}
	return *answer ? 0 : -EIO;
}
