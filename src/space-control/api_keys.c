/* GET /v1/keys: the latest key bundle (signed by the root key) and the
 * root public key. Unauthenticated: it holds public keys only, and a
 * verifier trusts the bundle through the root it pinned, not through this
 * answer's root field. */
#include <stdlib.h>

#include "api_common.h"
#include "control.h"

void
api_keys(struct req *r)
{
	char *bundle = NULL, root[PASERK_K4_PUBLIC_LEN + 1];
	int rc = keyring_bundle(&r->ctl->kr, r->ctl->st, &bundle, root);

	if (rc < 0) {
		r->retry_after = 1;
		reply_error(r, 503, "unavailable", "no key bundle published yet");
		return;
	}
	reply_json(r, 200, json_pack("{s:s,s:s}", "bundle", bundle, "root", root));
	free(bundle);
}
