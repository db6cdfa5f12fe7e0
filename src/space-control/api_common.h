/* small helpers shared by the api_*.c handlers */
#ifndef SPACE_CONTROL_API_COMMON_H
#define SPACE_CONTROL_API_COMMON_H
#include <errno.h>
#include "http.h"

/* answer a store failure that is not the caller's fault or a plain miss */
static inline void
reply_store_error(struct req *r, int rc, const char *what)
{
	if (rc == -ENOENT)
		reply_error(r, 404, "not_found", "no such %s", what);
	else if (rc == -EIO || rc == -EBUSY) {
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "store unavailable, retry");
	} else
		reply_error(r, 500, "internal", "store error (%d)", rc);
}

/* answer a refused worker report (execution status, snapshot result): the
 * store says why, -EPERM for a report from a worker that does not hold the
 * sandbox, -ESTALE for one the record has already moved past */
static inline void
reply_report_error(struct req *r, int rc, const char *why, const char *what)
{
	if (rc == -EPERM)
		reply_error(r, 403, "forbidden", "%s", why);
	else if (rc == -ESTALE)
		reply_error(r, 409, "conflict", "%s", why);
	else if (rc == -ENOENT && why != NULL)
		reply_error(r, 404, "not_found", "%s", why);
	else
		reply_store_error(r, rc, what);
}

/* api_sandboxes.c: the "timeouts" object over its defaults, validated;
 * malloc'd JSON text, or NULL after answering 400 */
char *api_timeouts_json(struct req *r, json_t *in);
/* api_lifecycle.c: an optional id field of a request body: NULL when
 * absent (or null, if null_ok); anything but an id answers 400 and sets
 * *ok false */
const char *api_id_field(struct req *r, json_t *in, const char *k, bool null_ok, bool *ok);
/* api_lifecycle.c: a snapshot digest as the snapshot store names files */
bool api_digest_valid(const char *s);
/* api_refusals.c: a heartbeat's "refusals" checked (or 400 answered);
 * added to the sandboxes worker ran (count, or <0); the owner's sandbox
 * object gains "refusals" */
bool api_refusals_valid(struct req *r, json_t *list);
int api_refusals_add(struct store *s, const char *worker, json_t *list);
void api_refusals_attach(struct store *s, const char *owner, const char *id, json_t *o);
#endif
