/* Per-sandbox access tokens (docs/control-plane.md, docs/e2b.md):
 *   POST /v1/sandboxes/{id}/access-token   owner's API key: a new access
 *        token of the sandbox, shown once, stored hashed (BLAKE2b-256, as
 *        API keys are); the sandbox keeps its ACCESS_TOKENS_KEPT newest
 * An access token ("at_...") is the bearer of one request only: POST
 * /v1/sandboxes/{its sandbox}/routes with "access" (a control capability).
 * It cannot list, create, kill, or ask for another sandbox or a service
 * port (http.c's AUTH_SANDBOX, api_routes.c), and it is refused once its
 * sandbox is stopping or killed. space-edge hands one to the E2B SDK as
 * its envdAccessToken. */
#include <errno.h>
#include <string.h>
#include <sodium.h>

#include "api_common.h"
#include "control.h"
#include "store_tx.h"

void
api_access_token(struct req *r)
{
	static const char *const keys[] = { NULL };
	char secret[64], id[STORE_CREDID_LEN + 1];
	uint8_t hash[STORE_HASH_LEN];
	json_t *in;
	int rc;

	if (R(r->ctl->st)->access_token_add == NULL) {
		reply_error(r, 501, "not_implemented", "this store does not hold access tokens");
		return;
	}
	if ((in = req_json(r, true)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (auth_secret_new("at_", secret, sizeof(secret), id, hash) < 0) {
		reply_error(r, 500, "internal", "cannot make a token");
		goto out;
	}
	rc = R(r->ctl->st)->access_token_add(r->ctl->st, r->principal, r->params[0], id, hash);
	if (rc <= 0) {
		reply_store_error(r, rc == 0 ? -ENOENT : rc, "sandbox");
		goto out;
	}
	(void)r->ctl->st->ops->audit(r->ctl->st, r->principal, "sandbox.access_token",
	    r->params[0], id);
	reply_json(r, 200, json_pack("{s:s,s:s}", "sandbox", r->params[0], "access_token", secret));
out:
	sodium_memzero(secret, sizeof(secret));
	sodium_memzero(hash, sizeof(hash));
	json_decref(in);
}
