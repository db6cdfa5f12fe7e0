/* The signer's request decoder (sigmsg.c) on arbitrary datagrams: the
 * signer reads them from the HTTP process, which it does not trust.
 * Invariants on every accepted request: a known request type; SIGN_CAP
 * claims that re-encode and decode to the same capability, with
 * exp = iat + lifetime and the audience of the purpose; SIGN_BUNDLE with
 * 1..SPACE_BUNDLE_KEYS_MAX distinct keys, each kid the PASERK id of its
 * key, and an encoding that decodes to the same bundle. The reply decoder
 * runs on the same bytes for each reply type. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "claims.h"
#include "paseto.h"
#include "sigmsg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sig_request q, q2;
	struct sig_reply r;
	const char *why;
	uint8_t *m = NULL;
	size_t len, i;
	uint16_t t;

	if (sigmsg_decode_request(data, size, &q, &why) == 0) {
		if (q.type == SIG_SIGN_CAP) {
			struct capability c2;
			char *json = NULL;

			if (q.cap.exp != q.cap.iat + SPACE_CAP_LIFETIME ||
			    (q.cap.pur == PUR_CONTROL) != (q.cap.aud == AUD_NODE_API))
				abort();
			if (claims_encode(&q.cap, &json) != 0)
				abort();
			if (claims_decode(json, strlen(json), &c2, &why) != 0 ||
			    memcmp(&c2, &q.cap, sizeof(c2)) != 0)
				abort();
			if (sigmsg_encode_sign_cap(q.kid, json, &m, &len) != 0 ||
			    sigmsg_decode_request(m, len, &q2, &why) != 0 ||
			    strcmp(q2.kid, q.kid) != 0)
				abort();
			free(json);
		} else if (q.type == SIG_SIGN_BUNDLE) {
			if (q.bundle.n == 0 || q.bundle.n > SPACE_BUNDLE_KEYS_MAX || q.bundle.version == 0)
				abort();
			for (i = 0; i < q.bundle.n; i++) {
				char kid[PASERK_K4_PID_LEN + 1];
				if (paserk_k4_pid(q.bundle.keys[i].pk, kid) != 0 ||
				    strcmp(kid, q.bundle.keys[i].kid) != 0)
					abort();
			}
			if (sigmsg_encode_sign_bundle(&q.bundle, &m, &len) != 0 ||
			    sigmsg_decode_request(m, len, &q2, &why) != 0 ||
			    memcmp(&q2.bundle, &q.bundle, sizeof(q.bundle)) != 0)
				abort();
		} else if (q.type != SIG_NEW_KEY) {
			abort();
		}
		free(m);
	}
	for (t = SIG_HELLO; t < SIG__MAX; t++) {
		if (sigmsg_decode_reply(data, size, t, &r, &why) == 0 && r.type != t &&
		    r.type != SIG_ERROR)
			abort();
		sig_reply_clear(&r);
	}
	return 0;
}
