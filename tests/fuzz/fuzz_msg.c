/* libFuzzer: every frame payload codec of msg.h on arbitrary bytes. The
 * first byte picks the message (and form), the rest is the payload:
 *   0 REQUEST token form   1 REQUEST claims form   2 REQUEST guest form
 *   3 RESPONSE served      4 RESPONSE guest        5 ERROR (serving allowed)
 *   6 ERROR (no serving)   7 CHALLENGE             8 CHALLENGE_REPLY
 * Invariants: a refusal says why; what a decoder accepts, its encoder
 * writes within the frame bound, and that decodes to the same message. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
request(const uint8_t *p, size_t n, enum msg_form form)
{
	struct msg_request a, b;
	const char *why = NULL;
	char *s = NULL;
	size_t len = 0;

	if (msg_request_decode(p, n, form, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	/* only an oversized encoding may be refused (a REQUEST that grew
	 * past the bound by escaping) */
	switch (msg_request_encode(&a, form, &s, &len)) {
	case 0:
		break;
	case -EMSGSIZE:
		msg_request_free(&a);
		return;
	default:
		abort();
	}
	if (len > SPACE_FRAME_OP_MAX || msg_request_decode(s, len, form, &b, &why) != 0)
		abort();
	if (a.op != b.op || strcmp(a.sandbox, b.sandbox) != 0 || a.token_len != b.token_len ||
	    (a.token && memcmp(a.token, b.token, a.token_len) != 0) ||
	    memcmp(&a.claims, &b.claims, sizeof(a.claims)) != 0 || !json_equal(a.args, b.args))
		abort();
	free(s);
	msg_request_free(&a);
	msg_request_free(&b);
}

static void
response(const uint8_t *p, size_t n, enum msg_form form)
{
	struct msg_response a, b;
	const char *why = NULL;
	char *s = NULL;
	size_t len = 0;
	int r;

	if (msg_response_decode(p, n, form, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	r = msg_response_encode(&a, form, &s, &len);
	if (r == -EMSGSIZE) {
		msg_response_free(&a);
		return;
	}
	if (r != 0 || len > SPACE_FRAME_OP_MAX || msg_response_decode(s, len, form, &b, &why) != 0)
		abort();
	if (!route_identity_equal(&a.serving, &b.serving) || !json_equal(a.result, b.result))
		abort();
	free(s);
	msg_response_free(&a);
	msg_response_free(&b);
}

static void
error(const uint8_t *p, size_t n, bool serving)
{
	struct msg_error a, b;
	const char *why = NULL;
	char *s = NULL;
	size_t len = 0;

	if (msg_error_decode(p, n, serving, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	/* every field is bounded: the encoding always fits a frame */
	if (msg_error_encode(&a, &s, &len) != 0 || len > SPACE_FRAME_JSON_MAX ||
	    msg_error_decode(s, len, serving, &b, &why) != 0)
		abort();
	if (a.status != b.status || strcmp(a.error, b.error) != 0 || strcmp(a.reason, b.reason) != 0 ||
	    a.has_message != b.has_message || strcmp(a.message, b.message) != 0 ||
	    a.has_serving != b.has_serving || !route_identity_equal(&a.serving, &b.serving))
		abort();
	free(s);
}

static void
challenge(const uint8_t *p, size_t n)
{
	struct msg_challenge a, b;
	const char *why = NULL;
	char *s = NULL;
	size_t len = 0;

	if (msg_challenge_decode(p, n, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (msg_challenge_encode(&a, &s, &len) != 0 || msg_challenge_decode(s, len, &b, &why) != 0 ||
	    memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	free(s);
}

static void
challenge_reply(const uint8_t *p, size_t n)
{
	struct msg_challenge_reply a, b;
	const char *why = NULL;
	char *s = NULL;
	size_t len = 0;

	if (msg_challenge_reply_decode(p, n, &a, &why) != 0) {
		if (why == NULL)
			abort();
		return;
	}
	if (msg_challenge_reply_encode(&a, &s, &len) != 0 ||
	    msg_challenge_reply_decode(s, len, &b, &why) != 0 || memcmp(&a, &b, sizeof(a)) != 0)
		abort();
	free(s);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data + 1;
	size_t n = size - 1;

	if (size == 0)
		return 0;
	switch (data[0] % 9) {
	case 0: request(p, n, MSG_FORM_TOKEN); break;
	case 1: request(p, n, MSG_FORM_CLAIMS); break;
	case 2: request(p, n, MSG_FORM_GUEST); break;
	case 3: response(p, n, MSG_FORM_CLAIMS); break;
	case 4: response(p, n, MSG_FORM_GUEST); break;
	case 5: error(p, n, true); break;
	case 6: error(p, n, false); break;
	case 7: challenge(p, n); break;
	case 8: challenge_reply(p, n); break;
	}
	return 0;
}
