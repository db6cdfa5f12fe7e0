/* Capability issuance (DESIGN 5): a PASETO v4.public token over the claims
 * of claims.h, bound to one route identity, valid 120 s, footer naming the
 * signing key, implicit assertion "space-capability-v1" so a token of
 * another kind (a key bundle) can never pass as a capability. The claims
 * are written here; the signature is the signer process's (signer.c). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "paseto.h"
#include "sigmsg.h"
#include "util.h"

int
capability_issue(struct ctl *c, const char *principal, const struct route_identity *route,
    enum cap_purpose pur, uint32_t acc, uint16_t port, enum cap_proto proto, char **token,
    int64_t *exp, char audit[SPACE_CAP_AUDIT_LEN])
{
	struct capability cap;
	struct sig_reply rep;
	uint8_t jti[16], pk[32], *m = NULL, *msg = NULL;
	char *claims = NULL, kid[PASERK_K4_PID_LEN + 1];
	size_t len, mlen;
	int64_t now = now_unix();
	int rc;

	*token = NULL;
	memset(&cap, 0, sizeof(cap));
	memset(&rep, 0, sizeof(rep));
	snprintf(cap.sub, sizeof(cap.sub), "%s", principal);
	randombytes_buf(jti, sizeof(jti));
	if ((rc = (int)b64url_encode(jti, sizeof(jti), cap.jti, sizeof(cap.jti))) < 0)
		goto out;
	cap.pur = pur;
	cap.aud = pur == PUR_CONTROL ? AUD_NODE_API : AUD_NETGTW;
	cap.iat = now;
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
	if ((rc = keyring_current(&c->kr, c->st, now, kid, pk)) < 0) {
		log_warnx("capability: no signing key usable now");
		goto out;
	}
	if ((rc = sigmsg_encode_sign_cap(kid, claims, &m, &len)) < 0)
		goto out;
	if ((rc = signer_call(&c->kr.sg, m, len, SIG_TOKEN, &rep)) < 0)
		goto out;
	/* the token must be the one asked for: this key, these claims */
	rc = paseto_v4_verify(pk, rep.token, strlen(rep.token), SPACE_TOKEN_MAX,
	    CAPABILITY_IMPLICIT, &msg, &mlen, NULL);
	if (rc < 0 || mlen != strlen(claims) || memcmp(msg, claims, mlen) != 0) {
		log_warnx("capability: the signer's token does not match the request");
		rc = -EPROTO;
		goto out;
	}
	*token = rep.token;
	rep.token = NULL;
	*exp = cap.exp;
	metrics_capability(pur);
	snprintf(audit, SPACE_CAP_AUDIT_LEN, "jti=%s gen=%llu pur=%s", cap.jti,
	    (unsigned long long)route->generation, pur == PUR_CONTROL ? "control" : "service");
out:
	sig_reply_clear(&rep);
	free(msg);
	free(claims);
	return rc;
}
