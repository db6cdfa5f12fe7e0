/* Capability issuance (DESIGN 5): a PASETO v4.public token over the claims
 * of claims.h, bound to one route identity, valid 120 s, footer naming the
 * signing key, implicit assertion "space-capability-v1" so a token of
 * another kind (a key bundle) can never pass as a capability. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "paseto.h"
#include "util.h"

int
capability_issue(struct ctl *c, const char *principal, const struct route_identity *route,
    enum cap_purpose pur, uint32_t acc, uint16_t port, enum cap_proto proto, char **token,
    int64_t *exp)
{
	struct capability cap;
	struct signing_key k;
	uint8_t jti[16];
	char *claims = NULL, footer[16 + PASERK_K4_PID_LEN];
	int64_t now = now_unix();
	int rc;

	*token = NULL;
	memset(&cap, 0, sizeof(cap));
	memset(&k, 0, sizeof(k));
	snprintf(cap.sub, sizeof(cap.sub), "%s", principal);
	randombytes_buf(jti, sizeof(jti));
	if ((rc = (int)b64url_encode(jti, sizeof(jti), cap.jti, sizeof(cap.jti))) < 0)
		goto out;
	cap.pur = pur;
	cap.aud = pur == PUR_CONTROL ? AUD_NODE_API : AUD_NETGTW;
	/* test-only backdating lets a test hold an expired token at once */
	cap.iat = now - c->cfg.test_cap_backdate;
	cap.exp = cap.iat + SPACE_CAP_LIFETIME;
	cap.route = *route;
	if (pur == PUR_CONTROL) {
		cap.acc = acc;
	} else {
		cap.port = port;
		cap.proto = proto;
	}
	if ((rc = claims_encode(&cap, &claims)) < 0)
		goto out;
	if ((rc = keyring_current(&c->kr, c->st, now, &k)) < 0) {
		log_warnx("capability: no signing key usable now");
		goto out;
	}
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", k.kid);
	if ((rc = paseto_v4_sign(k.sk, claims, strlen(claims), footer, CAPABILITY_IMPLICIT,
	    token)) < 0)
		goto out;
	*exp = cap.exp;
	metrics_capability(pur);
	{
		char detail[128];
		snprintf(detail, sizeof(detail), "jti=%s gen=%llu pur=%s", cap.jti,
		    (unsigned long long)route->generation, pur == PUR_CONTROL ? "control" : "service");
		(void)c->st->ops->audit(c->st, principal, "capability.issue", route->sandbox, detail);
	}
out:
	signing_key_wipe(&k);
	free(claims);
	return rc;
}
