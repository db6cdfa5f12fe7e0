/* POST /v1/sandboxes/{id}/routes: resolve the current execution of a
 * sandbox and issue a capability bound to exactly that route. This is the
 * route-repair entry point of clients (DESIGN 8): a client that got
 * REFRESH_ROUTE sends the route that was rejected; if it is still the
 * current one the platform is converging, and issuing the same route again
 * would only make the client loop: the answer waits (bounded) for the next
 * one, then is 503 + Retry-After. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sodium.h>

#include "api_common.h"
#include "control.h"
#include "ports.h"
#include "util.h"

int
route_access_parse(struct req *r, json_t *a, uint32_t *bits)
{
	size_t i;
	json_t *v;
	uint32_t b;

	*bits = 0;
	if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > 8) {
		reply_error(r, 400, "bad_request", "\"access\" must be a non-empty array");
		return 0;
	}
	json_array_foreach(a, i, v) {
		if (!json_is_string(v) || acc_parse(json_string_value(v), &b) < 0) {
			reply_error(r, 400, "bad_request",
			    "\"access\" entries are \"exec\", \"fs:r\", \"fs:w\", \"pty\", \"watch\"");
			return 0;
		}
		if (*bits & b) {
			reply_error(r, 400, "bad_request", "duplicate access \"%s\"",
			    json_string_value(v));
			return 0;
		}
		*bits |= b;
	}
	return 1;
}

/* Written once the answer is sent, off the client's wait: the activity
 * for the idle timeout (the control plane's view: the last capability
 * issued; node-api traffic is not seen here), and the issue's audit row.
 * A reaper that reads the activity a moment late sees the sandbox idle
 * for that moment longer, and it is at most one write per second anyway
 * (docs/control-plane.md, "Timeouts"); an audit row was never a
 * condition of the capability (its write's failure never refused one). */
static void
issued_after_reply(struct req *r)
{
	struct store *st = r->ctl->st;

	(void)st->ops->audit(st, r->principal, "capability.issue", r->after_id, r->after_detail);
	(void)st->ops->sandbox_touch(st, r->after_id, now_unix());
}

const char *
route_unservable(const struct exec_view *ev)
{
	/* a capability names one execution; there is none to name until
	 * the worker reports it serving */
	if (ev->route.generation == 0 || strcmp(ev->state, "serving") != 0)
		return "execution is not serving yet";
	if (strcmp(ev->worker_state, "live") != 0)
		return "the execution's worker is not live";
	return NULL;
}

int
route_sign(struct req *r, const struct route_identity *route, enum cap_purpose pur, uint32_t acc,
    uint16_t port, enum cap_proto proto, struct route_signed *out)
{
	memset(out, 0, sizeof(*out));
	out->route = *route;
	return capability_issue(r->ctl, r->principal, route, pur, acc, port, proto, &out->token,
	    &out->exp, out->audit) < 0 ? -EAGAIN : 0;
}

void
route_signed_clear(struct route_signed *rs)
{
	if (rs->token != NULL) {
		sodium_memzero(rs->token, strlen(rs->token));
		free(rs->token);
	}
	memset(rs, 0, sizeof(*rs));
}

int
route_answer(struct req *r, const struct exec_view *ev, struct route_signed *rs, json_t **out)
{
	json_t *route;
	char exps[RFC3339_LEN + 1];

	*out = NULL;
	if (!route_identity_equal(&rs->route, &ev->route))
		return -ESTALE;
	snprintf(r->after_id, sizeof(r->after_id), "%s", ev->route.sandbox);
	snprintf(r->after_detail, sizeof(r->after_detail), "%s", rs->audit);
	r->after_reply = issued_after_reply;
	rfc3339_format(rs->exp, exps);
	if ((route = route_identity_pack(&ev->route)) != NULL)
		*out = json_pack("{s:s,s:s,s:o,s:s}", "endpoint", ev->endpoint, "capability",
		    rs->token, "route", route, "expires_at", exps);
	route_signed_clear(rs);
	return *out != NULL ? 0 : -ENOMEM;
}

int
route_issue(struct req *r, const struct exec_view *ev, enum cap_purpose pur, uint32_t acc,
    uint16_t port, enum cap_proto proto, json_t **out)
{
	struct route_signed rs;
	int rc;

	*out = NULL;
	if ((rc = route_sign(r, &ev->route, pur, acc, port, proto, &rs)) < 0)
		return rc;
	return route_answer(r, ev, &rs, out);
}

void
api_routes(struct req *r)
{
	static const char *const keys[] = { "access", "port", "proto", "rejected", NULL };
	struct ctl *c = r->ctl;
	struct exec_view ev;
	struct route_identity rejected;
	json_t *in, *v, *route;
	enum cap_purpose pur;
	enum cap_proto proto = PROTO_NONE;
	uint32_t acc = 0;
	uint16_t port = 0;
	bool have_rejected = false;
	int64_t deadline;
	int rc, wait;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (json_object_get(in, "access") != NULL) {
		if (json_object_get(in, "port") || json_object_get(in, "proto")) {
			reply_error(r, 400, "bad_request", "give either \"access\" or \"port\"/\"proto\"");
			goto out;
		}
		if (!route_access_parse(r, json_object_get(in, "access"), &acc))
			goto out;
		pur = PUR_CONTROL;
	} else if ((v = json_object_get(in, "port")) != NULL) {
		json_t *p = json_object_get(in, "proto");
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
			reply_error(r, 400, "bad_request", "\"port\" must be an integer in 1..65535");
			goto out;
		}
		port = (uint16_t)json_integer_value(v);
		if (p == NULL || !json_is_string(p)) {
			reply_error(r, 400, "bad_request", "\"proto\" must be \"http\" or \"tcp\"");
			goto out;
		}
		if (strcmp(json_string_value(p), "http") == 0)
			proto = PROTO_HTTP;
		else if (strcmp(json_string_value(p), "tcp") == 0)
			proto = PROTO_TCP;
		else {
			reply_error(r, 400, "bad_request", "\"proto\" must be \"http\" or \"tcp\"");
			goto out;
		}
		pur = PUR_SERVICE;
	} else {
		reply_error(r, 400, "bad_request", "\"access\" or \"port\" is required");
		goto out;
	}
	/* an access token obtains control capabilities of its sandbox only */
	if (r->sandbox_token && pur != PUR_CONTROL) {
		metrics_auth_failure("access_token_for_service");
		reply_error(r, 403, "forbidden", "an access token obtains control capabilities only");
		goto out;
	}
	if ((v = json_object_get(in, "rejected")) != NULL && !json_is_null(v)) {
		if (!json_is_object(v) || route_identity_unpack(v, &rejected) < 0) {
			reply_error(r, 400, "bad_request", "\"rejected\" must be a route identity");
			goto out;
		}
		have_rejected = true;
	}

	/* while a lifecycle operation converges (a resume or a move whose
	 * new execution is not serving yet, a worker coming back) the answer
	 * waits, bounded, for the execution that will serve: answering 503 at
	 * once would leave the client polling and missing the short moments
	 * between two operations of a busy sandbox */
	deadline = (int64_t)(now_mono_ns() / 1000000) + c->cfg.route_wait_ms;
	for (wait = 5;; wait = wait * 2 > 100 ? 100 : wait * 2) {
		const char *busy;

		rc = c->st->ops->sandbox_current(c->st, r->principal, r->params[0], &ev);
		if (rc < 0) {
			reply_store_error(r, rc, "sandbox");
			goto out;
		}
		/* states that will not serve again without a new request: a
		 * 503 here would keep a client retrying for nothing */
		if (strcmp(ev.sandbox_state, "killed") == 0 || strcmp(ev.sandbox_state, "stopping") == 0 ||
		    strcmp(ev.sandbox_state, "failed") == 0) {
			reply_error(r, 409, "conflict", "sandbox is %s", ev.sandbox_state);
			goto out;
		}
		/* pausing ends in paused, and a paused sandbox serves again
		 * only after a resume: waiting would not help */
		if (strcmp(ev.sandbox_state, "pausing") == 0 || strcmp(ev.sandbox_state, "paused") == 0) {
			reply_error(r, 409, "conflict", "sandbox is %s; resume it first", ev.sandbox_state);
			goto out;
		}
		busy = route_unservable(&ev);
		if (busy == NULL && !have_rejected)
			break;
		if (busy == NULL && route_identity_equal(&rejected, &ev.route))
			busy = "route is converging";
		/* a pause or move waits for the holds already handed out: a
		 * new one would only be cut when it gives up waiting; this
		 * repair waits for the execution that will serve after it */
		if (busy == NULL && api_retire_waiting(ev.route.sandbox))
			busy = "route is converging";
		/* a repair gets one rebuilt attempt: the route it is handed is
		 * held (a pause or move waits --route-hold-ms before
		 * retiring it), so that the attempt does not meet a route
		 * retired in the meantime */
		if (busy == NULL) {
			if ((rc = c->st->ops->route_hold(c->st, ev.route.sandbox, ev.route.generation,
			    now_unix_ms() + c->cfg.route_hold_ms)) < 0) {
				reply_store_error(r, rc, "sandbox");
				goto out;
			}
			if (rc == 1)
				break;
			busy = "route is converging";
		}
		if ((int64_t)(now_mono_ns() / 1000000) + wait > deadline) {
			r->retry_after = 1;
			reply_error(r, 503, "unavailable", "%s", busy);
			goto out;
		}
		usleep((useconds_t)wait * 1000);
	}
	/* a service capability is presented at the worker's netgtw listener,
	 * and only for a declared port (netgtw checks again on its own) */
	if (pur == PUR_SERVICE) {
		bool pub;

		if ((rc = ports_declared(c->st, r->principal, ev.route.sandbox, port, &pub)) < 0) {
			reply_store_error(r, rc, "sandbox");
			goto out;
		}
		if (rc == 0) {
			reply_error(r, 404, "not_found", "port %u is not declared", port);
			goto out;
		}
		if ((rc = ports_gateway(c->st, ev.route.worker, ev.endpoint, sizeof(ev.endpoint))) <= 0) {
			r->retry_after = 1;
			reply_error(r, 503, "unavailable", "the sandbox's worker runs no gateway");
			goto out;
		}
	}
	if ((rc = route_issue(r, &ev, pur, acc, port, proto, &route)) == 0)
		reply_json(r, 200, route);
	else if (rc == -ENOMEM)
		reply_error(r, 500, "internal", "out of memory");
	else {
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "cannot issue a capability now");
	}
out:
	json_decref(in);
}
