/* The disk use each worker reports with its heartbeat ({"disk":{"layers",
 * "run","snapshots"}}, bytes), kept in memory for GET /v1/workers and
 * `space workers`: a figure five seconds old at most, that a restart of
 * space-control forgets until the next heartbeat, so it is not stored. */
#include <pthread.h>
#include <string.h>

#include "api_common.h"
#include "limits.h"
#include "worker_disk.h"

#define WORKER_DISK_MAX 1024    /* workers remembered; more are not shown */
#define DISK_BYTES_MAX  (1ll << 53)

static pthread_mutex_t dlock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char id[SPACE_ID_MAX + 1];
	json_int_t v[3];
} disks[WORKER_DISK_MAX];
static size_t ndisks;
static const char *const areas[] = { "layers", "run", "snapshots", NULL };

int
worker_disk_parse(struct req *r, json_t *d, json_int_t out[3])
{
	int i;

	if (!json_is_object(d) || !json_keys_only(r, d, areas))
		goto bad;
	for (i = 0; i < 3; i++) {
		json_t *v = json_object_get(d, areas[i]);
		if (!json_is_integer(v) || json_integer_value(v) < 0 ||
		    json_integer_value(v) > DISK_BYTES_MAX)
			goto bad;
		out[i] = json_integer_value(v);
	}
	return 0;
bad:
	reply_error(r, 400, "bad_request",
	    "\"disk\" must be {\"layers\",\"run\",\"snapshots\"}: byte counts");
	return -EINVAL;
}

void
worker_disk_set(const char *worker, const json_int_t v[3])
{
	size_t i;

	pthread_mutex_lock(&dlock);
	for (i = 0; i < ndisks && strcmp(disks[i].id, worker) != 0; i++)
		;
	if (i == ndisks && ndisks < WORKER_DISK_MAX) {
		snprintf(disks[i].id, sizeof(disks[i].id), "%s", worker);
		ndisks++;
	}
	if (i < ndisks)
		memcpy(disks[i].v, v, sizeof(disks[i].v));
	pthread_mutex_unlock(&dlock);
}

void
worker_disk_annotate(json_t *workers)
{
	size_t i, k;
	json_t *w;

	pthread_mutex_lock(&dlock);
	json_array_foreach(workers, k, w) {
		const char *id = json_string_value(json_object_get(w, "id"));
		for (i = 0; id && i < ndisks; i++)
			if (strcmp(disks[i].id, id) == 0) {
				json_object_set_new(w, "disk", json_pack("{s:I,s:I,s:I}",
				    "layers", disks[i].v[0], "run", disks[i].v[1],
				    "snapshots", disks[i].v[2]));
				break;
			}
	}
	pthread_mutex_unlock(&dlock);
}
