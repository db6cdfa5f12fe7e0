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

/* api_sandboxes.c: the "timeouts" object over its defaults, validated;
 * malloc'd JSON text, or NULL after answering 400 */
char *api_timeouts_json(struct req *r, json_t *in);
/* api_lifecycle.c: a snapshot digest as the snapshot store names files */
bool api_digest_valid(const char *s);
#endif
