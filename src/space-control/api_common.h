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
/* api_routes.c: "access" (a non-empty array of access names) as bits; 0
 * after answering 400 */
int route_access_parse(struct req *r, json_t *a, uint32_t *bits);
/* api_routes.c: why no capability can name ev's execution now (not
 * serving yet, its worker not live), NULL when one can */
const char *route_unservable(const struct exec_view *ev);
/* api_routes.c: a capability for the serving execution ev names, as POST
 * routes answers it (*out: {"endpoint","capability","route","expires_at"});
 * its audit row and the sandbox's activity are written once r is
 * answered. 0, -EAGAIN (none can be signed now), -ENOMEM */
int route_issue(struct req *r, const struct exec_view *ev, enum cap_purpose pur,
    uint32_t acc, uint16_t port, enum cap_proto proto, json_t **out);
/* the same in two steps: a capability signed for a route (route_sign:
 * 0 or -EAGAIN), handed out by route_answer only for an execution whose
 * route is that one (-ESTALE, *rs kept; else as route_issue, *rs
 * consumed); route_signed_clear wipes and frees what is left */
struct route_signed {
	struct route_identity route;
	char    *token;
	int64_t  exp;
	char     audit[SPACE_CAP_AUDIT_LEN];
};
int route_sign(struct req *r, const struct route_identity *route, enum cap_purpose pur,
    uint32_t acc, uint16_t port, enum cap_proto proto, struct route_signed *rs);
int route_answer(struct req *r, const struct exec_view *ev, struct route_signed *rs,
    json_t **out);
void route_signed_clear(struct route_signed *rs);
#endif
