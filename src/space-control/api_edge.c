/* The public entry's side of the control plane (docs/network.md,
 * "space-edge"):
 *   POST /v1/sandboxes/{id}/traffic-token   owner's API key: a new traffic
 *        token for the sandbox, shown once, stored hashed; asking again
 *        replaces it (the old one is refused from then on)
 *   POST /v1/edge/routes                    edge credential only:
 *        {"sandbox","port","proto","traffic_token"?,"rejected"?} -> a
 *        service capability for a port the owner made public, or for a
 *        private port with the sandbox's traffic token
 * The edge credential can ask for nothing else (http.c's AUTH_EDGE), and
 * an API key cannot call /v1/edge/routes. Both backends hold their rows
 * (store_sqlite_edge.c, store_pg_edge.c); a backend without them answers
 * 501. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "ports.h"
#include "store_tx.h"
#include "util.h"

static bool
edge_stored(struct req *r)
{
	const struct store_rows *w = R(r->ctl->st);

	if (w->traffic_token_set && w->traffic_token_get && w->sandbox_owner && w->edgecred_lookup)
		return true;
	reply_error(r, 501, "not_implemented", "this store does not hold the public entry");
	return false;
}

void
api_traffic_token(struct req *r)
{
	char secret[64], id[STORE_CREDID_LEN + 1];
	uint8_t hash[STORE_HASH_LEN];
	json_t *in;
	int rc;

	static const char *const keys[] = { NULL };

	if (!edge_stored(r) || (in = req_json(r, true)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (auth_secret_new("tt_", secret, sizeof(secret), id, hash) < 0) {
		reply_error(r, 500, "internal", "cannot make a token");
		goto out;
	}
	rc = R(r->ctl->st)->traffic_token_set(r->ctl->st, r->principal, r->params[0], hash);
	if (rc <= 0) {
		reply_store_error(r, rc == 0 ? -ENOENT : rc, "sandbox");
		goto out;
	}
	(void)r->ctl->st->ops->audit(r->ctl->st, r->principal, "sandbox.traffic_token",
	    r->params[0], "");
	reply_json(r, 200, json_pack("{s:s,s:s}", "sandbox", r->params[0], "traffic_token", secret));
out:
	sodium_memzero(secret, sizeof(secret));
	json_decref(in);
}

/* the port as the sandbox's owner declared it (ports.h): 1 public,
 * 0 private, -ENOENT not declared */
static int
port_public(struct req *r, const char *owner, const char *sandbox, long port)
{
	bool pub;
	int rc;

	if ((rc = ports_declared(r->ctl->st, owner, sandbox, (uint16_t)port, &pub)) < 0)
		return rc == -ENOENT ? -EIO : rc;
	if (rc == 0)
		return -ENOENT;
	return pub ? 1 : 0;
}

void
api_edge_routes(struct req *r)
{
	static const char *const keys[] = { "sandbox", "port", "proto", "traffic_token", "rejected",
	    NULL };
	char owner[SPACE_ID_MAX + 1], edge[SPACE_ID_MAX + 1];
	const char *sbx, *tok = NULL;
	json_t *in, *v, *fwd = NULL;
	char *body = NULL;
	long port;
	int rc;

	if (!edge_stored(r) || (in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	v = json_object_get(in, "sandbox");
	if (!json_is_string(v) || !id_valid(json_string_value(v))) {
		reply_error(r, 400, "bad_request", "\"sandbox\" must be a sandbox id");
		goto out;
	}
	sbx = json_string_value(v);
	v = json_object_get(in, "port");
	if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535) {
		reply_error(r, 400, "bad_request", "\"port\" must be an integer in 1..65535");
		goto out;
	}
	port = (long)json_integer_value(v);
	if ((v = json_object_get(in, "traffic_token")) != NULL && !json_is_null(v)) {
		if (!json_is_string(v) || json_string_length(v) > 64) {
			reply_error(r, 400, "bad_request", "\"traffic_token\" must be a string");
			goto out;
		}
		tok = json_string_value(v);
	}
	snprintf(edge, sizeof(edge), "%s", r->principal);
	rc = R(r->ctl->st)->sandbox_owner(r->ctl->st, sbx, owner);
	if (rc <= 0) {
		reply_store_error(r, rc == 0 ? -ENOENT : rc, "sandbox");
		goto out;
	}
	if ((rc = port_public(r, owner, sbx, port)) == -ENOENT) {
		reply_error(r, 404, "not_found", "port %ld is not declared", port);
		goto out;
	}
	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		goto out;
	}
	if (rc == 0) {
		/* a private port: the sandbox's traffic token, or nothing */
		if (tok == NULL) {
			reply_error(r, 401, "unauthenticated", "port %ld is private: a traffic token"
			    " or the owner's API key is required", port);
			goto out;
		}
		if ((rc = auth_traffic_token(r->ctl, sbx, tok)) == -EIO) {
			reply_store_error(r, rc, "sandbox");
			goto out;
		}
		if (rc < 0) {
			metrics_auth_failure("bad_traffic_token");
			reply_error(r, 403, "forbidden", "the traffic token is not this sandbox's");
			goto out;
		}
	}
	/* the rest is the owner's own route request (api_routes.c): the
	 * same convergence wait, the same capability, bound to the owner */
	fwd = json_pack("{s:I,s:O}", "port", (json_int_t)port, "proto", json_object_get(in, "proto") ?
	    json_object_get(in, "proto") : json_null());
	if (fwd && (v = json_object_get(in, "rejected")) != NULL)
		json_object_set(fwd, "rejected", v);
	if (fwd == NULL || (body = json_dumps(fwd, JSON_COMPACT)) == NULL) {
		reply_error(r, 500, "internal", "out of memory");
		goto out;
	}
	free(r->body);
	r->body = body;
	r->body_len = strlen(body);
	snprintf(r->principal, sizeof(r->principal), "%s", owner);
	snprintf(r->params[0], sizeof(r->params[0]), "%s", sbx);
	log_info("edge %s: route to %s port %ld (%s)", edge, sbx, port, tok ? "traffic token" :
	    "public");
	api_routes(r);
out:
	json_decref(fwd);
	json_decref(in);
}
