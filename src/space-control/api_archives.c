/* POST /v1/workers/{id}/archives: the snapshot store's collection. A
 * worker offers archives it found in the store, each with its age in
 * seconds (by the worker's clock, from the file's mtime); the answer names
 * those nothing references (store_sqlite_archives.c says what references
 * an archive), which the worker then deletes. Every report carrying a
 * digest is also a pending reference for --archive-grace seconds
 * (api_archive_seen), so an archive just reported is never among them.
 *
 *   {"archives":[{"digest":"<64 hex>","age":S}, ...]}  ->  {"collect":["<64 hex>", ...]} */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "snapshot.h"
#include "util.h"

#define ARCHIVE_AGE_MAX (1ll << 40)     /* seconds; any real age is below */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long offered, collectable;

void
api_archive_seen(struct ctl *c, const char *digest)
{
	int rc;

	if (digest == NULL || c->st->ops->archive_seen == NULL)
		return;
	if ((rc = c->st->ops->archive_seen(c->st, digest, now_unix() + c->cfg.archive_grace)) < 0)
		log_warnx("archive %s: cannot record its pending reference (%d)", digest, rc);
}

void
api_worker_archives(struct req *r)
{
	static const char *const keys[] = { "archives", NULL };
	static const char *const akeys[] = { "digest", "age", NULL };
	json_t *in, *arr, *a, *out = NULL;
	size_t i;
	int rc;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	arr = json_object_get(in, "archives");
	if (arr == NULL || !json_is_array(arr) || json_array_size(arr) > SPACE_ARCHIVE_BATCH_MAX) {
		reply_error(r, 400, "bad_request", "\"archives\" must be an array of at most %d",
		    SPACE_ARCHIVE_BATCH_MAX);
		goto out;
	}
	json_array_foreach(arr, i, a) {
		json_t *d = json_object_get(a, "digest"), *g = json_object_get(a, "age");

		if (!json_is_object(a) || !json_keys_only(r, a, akeys))
			goto bad;
		if (d == NULL || !json_is_string(d) || !api_digest_valid(json_string_value(d)) ||
		    g == NULL || !json_is_integer(g) || json_integer_value(g) < 0 ||
		    json_integer_value(g) > ARCHIVE_AGE_MAX)
			goto bad;
	}
	/* a backend without the collection (PostgreSQL, for now) collects
	 * nothing: every archive is kept */
	if (r->ctl->st->ops->archives_collectable == NULL)
		rc = (out = json_array()) ? 0 : -ENOMEM;
	else
		/* what a worker found in its own cache: made there, or
		 * downloaded (for which no operation waits) */
		rc = r->ctl->st->ops->archives_collectable(r->ctl->st, arr, now_unix(),
		    r->params[0], &out);
	if (rc < 0) {
		reply_store_error(r, rc, "archive");
		goto out;
	}
	pthread_mutex_lock(&mu);
	offered += json_array_size(arr);
	collectable += json_array_size(out);
	pthread_mutex_unlock(&mu);
	if (json_array_size(out) > 0)
		log_info("worker %s: %zu of %zu archive(s) offered are referenced by nothing",
		    r->params[0], json_array_size(out), json_array_size(arr));
	reply_json(r, 200, json_pack("{s:o}", "collect", out));
	goto out;
bad:
	if (r->status == 0)
		reply_error(r, 400, "bad_request", "each archive must be {\"digest\": %d lowercase hex"
		    " digits, \"age\": seconds}", SNAPSHOT_DIGEST_HEX);
out:
	json_decref(in);
}

void
api_archives_metrics(FILE *f)
{
	pthread_mutex_lock(&mu);
	fprintf(f, "# HELP space_control_archives_offered_total Snapshot store archives workers offered for collection.\n"
	    "# TYPE space_control_archives_offered_total counter\n"
	    "space_control_archives_offered_total %llu\n"
	    "# HELP space_control_archives_collectable_total Offered archives that nothing referenced (the worker deletes them).\n"
	    "# TYPE space_control_archives_collectable_total counter\n"
	    "space_control_archives_collectable_total %llu\n", offered, collectable);
	pthread_mutex_unlock(&mu);
}
