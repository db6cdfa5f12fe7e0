/* Refusals counted per sandbox (docs/console.md "Refused routes"): the
 * workers count what they refused (REFRESH_ROUTE, DENY, EXPIRED) for each
 * sandbox they hold a record of and send the counts since their last
 * heartbeat with the next one ("refusals"); the store adds them up for
 * sandboxes the reporting worker ran; GET /v1/sandboxes/{id} shows the
 * sums to the owner as "refusals". */
#include <errno.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "store_tx.h"
#include "util.h"

/* at most this many sandboxes in one heartbeat, each count at most this */
#define REFUSALS_PER_HEARTBEAT 64
#define REFUSAL_COUNT_MAX ((json_int_t)1 << 40)

static const char *const counts[3] = { "refresh_route", "deny", "expired" };

bool
api_refusals_valid(struct req *r, json_t *list)
{
	static const char *const keys[] = { "sandbox", "refresh_route", "deny", "expired", NULL };
	json_t *e, *v;
	size_t i;
	int k;

	if (!json_is_array(list) || json_array_size(list) > REFUSALS_PER_HEARTBEAT) {
		reply_error(r, 400, "bad_request", "\"refusals\" must be an array of at most %d",
		    REFUSALS_PER_HEARTBEAT);
		return false;
	}
	json_array_foreach(list, i, e) {
		if (!json_is_object(e)) {
			reply_error(r, 400, "bad_request", "\"refusals\"[%zu] must be an object", i);
			return false;
		}
		if (!json_keys_only(r, e, keys))
			return false;
		v = json_object_get(e, "sandbox");
		if (!json_is_string(v) || !id_valid(json_string_value(v))) {
			reply_error(r, 400, "bad_request", "\"refusals\"[%zu].sandbox must be an id", i);
			return false;
		}
		for (k = 0; k < 3; k++) {
			v = json_object_get(e, counts[k]);
			if (v != NULL && (!json_is_integer(v) || json_integer_value(v) < 0 ||
			    json_integer_value(v) > REFUSAL_COUNT_MAX)) {
				reply_error(r, 400, "bad_request", "\"refusals\"[%zu].%s must be a count",
				    i, counts[k]);
				return false;
			}
		}
	}
	return true;
}

struct add { const char *worker; json_t *list; int added; };

static int
add_tx(struct store *s, void *arg)
{
	struct add *a = arg;
	json_t *e, *v;
	int64_t n[3];
	size_t i;
	int k, rc;

	a->added = 0;           /* a retried transaction starts again */
	json_array_foreach(a->list, i, e) {
		for (k = 0; k < 3; k++)
			n[k] = (v = json_object_get(e, counts[k])) ? json_integer_value(v) : 0;
		if (n[0] == 0 && n[1] == 0 && n[2] == 0)
			continue;
		rc = s->rows->sandbox_refusals_add(s, a->worker,
		    json_string_value(json_object_get(e, "sandbox")), n);
		if (rc < 0)
			return rc;
		a->added += rc;
	}
	return 0;
}

int
api_refusals_add(struct store *s, const char *worker, json_t *list)
{
	struct add a = { worker, list, 0 };
	int rc;

	if (s->rows == NULL || s->rows->sandbox_refusals_add == NULL)
		return -ENOTSUP;
	if ((rc = s->rows->tx(s, add_tx, &a)) < 0)
		return rc;
	if ((size_t)a.added < json_array_size(list))
		log_info("worker %s: refusals of %zu sandbox(es) not its own left out", worker,
		    json_array_size(list) - (size_t)a.added);
	return a.added;
}

struct get { const char *owner, *id; int64_t n[3]; int found; };

static int
get_tx(struct store *s, void *arg)
{
	struct get *g = arg;

	g->found = s->rows->sandbox_refusals_get(s, g->owner, g->id, g->n);
	return g->found < 0 ? g->found : 0;
}

/* o (the owner's sandbox object) gains "refusals"; a store that cannot
 * tell leaves it out */
void
api_refusals_attach(struct store *s, const char *owner, const char *id, json_t *o)
{
	struct get g = { owner, id, { 0, 0, 0 }, 0 };

	if (s->rows == NULL || s->rows->sandbox_refusals_get == NULL)
		return;
	if (s->rows->tx(s, get_tx, &g) < 0 || g.found != 1)
		return;
	json_object_set_new(o, "refusals", json_pack("{s:I, s:I, s:I}", "refresh_route",
	    (json_int_t)g.n[0], "deny", (json_int_t)g.n[1], "expired", (json_int_t)g.n[2]));
}
