/* The guest challenge (DESIGN section 6, docs/protocol.md section 1).
 *
 * The control channel is a socket pair made at launch, so its peer can only
 * be the process we started; the challenge adds that this process is the
 * activation we launched (it holds the secret given only to it) and that it
 * believes it serves our identity. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "host.h"
#include "log.h"
#include "proto.h"
#include "util.h"

static int
read_with_timeout(int fd, struct frame *f, int timeout_ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	int r;

	do
		r = poll(&p, 1, timeout_ms);
	while (r < 0 && errno == EINTR);
	if (r == 0)
		return -ETIMEDOUT;
	if (r < 0)
		return -errno;
	return frame_read(fd, f);
}

int
challenge_guest(int control, const uint8_t secret[GUEST_SECRET_LEN],
    const struct route_identity *id, int timeout_ms, const char **why)
{
	static const char *const keys[] = { "sandbox", "generation", "activation", "mac" };
	uint8_t nonce[GUEST_NONCE_LEN], want[GUEST_MAC_LEN], got[GUEST_MAC_LEN];
	char nb[64], req[96];
	struct frame f = { 0 };
	json_t *o = NULL, *sbx, *gen, *act, *mac;
	json_error_t jerr;
	size_t i;
	int r;

	randombytes_buf(nonce, sizeof(nonce));
	b64url_encode(nonce, sizeof(nonce), nb, sizeof(nb));
	snprintf(req, sizeof(req), "{\"nonce\":\"%s\"}", nb);
	if ((r = frame_write_json(control, MSG_CHALLENGE, req)) < 0) {
		*why = "cannot send the challenge";
		return r;
	}
	if ((r = read_with_timeout(control, &f, timeout_ms)) < 0) {
		*why = r == -ETIMEDOUT ? "no challenge reply in time" : "no challenge reply";
		return r;
	}
	r = -EPERM;
	*why = "malformed challenge reply";
	if (f.type != MSG_CHALLENGE_REPLY)
		goto out;
	o = json_loadb((const char *)f.payload, f.len, JSON_REJECT_DUPLICATES, &jerr);
	if (o == NULL || !json_is_object(o) || json_object_size(o) != 4)
		goto out;
	for (i = 0; i < 4; i++)
		if (json_object_get(o, keys[i]) == NULL)
			goto out;
	sbx = json_object_get(o, "sandbox");
	gen = json_object_get(o, "generation");
	act = json_object_get(o, "activation");
	mac = json_object_get(o, "mac");
	if (!json_is_string(sbx) || !json_is_integer(gen) || !json_is_integer(act) ||
	    !json_is_string(mac) || json_integer_value(gen) < 1 || json_integer_value(act) < 1 ||
	    json_integer_value(act) > (json_int_t)UINT32_MAX ||
	    b64url_decode(json_string_value(mac), json_string_length(mac), got,
	    sizeof(got)) != GUEST_MAC_LEN)
		goto out;
	/* the guest must serve exactly our execution: an old activation or
	 * another sandbox's guest on this channel is refused */
	*why = "guest reports another identity";
	if (strlen(json_string_value(sbx)) != json_string_length(sbx) ||
	    strcmp(json_string_value(sbx), id->sandbox) != 0 ||
	    (uint64_t)json_integer_value(gen) != id->generation ||
	    (uint32_t)json_integer_value(act) != id->activation)
		goto out;
	guest_mac(secret, nonce, id->sandbox, id->generation, id->activation, want);
	*why = "challenge MAC does not verify";
	if (crypto_verify_32(want, got) != 0)       /* constant time */
		goto out;
	*why = NULL;
	r = 0;
out:
	sodium_memzero(want, sizeof(want));
	json_decref(o);
	frame_free(&f);
	return r;
}
