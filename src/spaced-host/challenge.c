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

#include <sodium.h>

#include "host.h"
#include "log.h"
#include "msg.h"
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

/* the CHALLENGE with a fresh nonce (kept in nonce for challenge_check);
 * only written: nothing the guest sends is read here */
int
challenge_send(int control, uint8_t nonce[GUEST_NONCE_LEN], const char **why)
{
	struct msg_challenge ch;
	char *req = NULL;
	size_t n;
	int r;

	randombytes_buf(ch.nonce, sizeof(ch.nonce));
	memcpy(nonce, ch.nonce, sizeof(ch.nonce));
	if ((r = msg_challenge_encode(&ch, &req, &n)) < 0 ||
	    (r = frame_write(control, MSG_CHALLENGE, req, n)) < 0) {
		free(req);
		*why = "cannot send the challenge";
		return r;
	}
	free(req);
	return 0;
}

int
challenge_check(int control, const uint8_t secret[GUEST_SECRET_LEN],
    const uint8_t nonce[GUEST_NONCE_LEN], const struct route_identity *id, int timeout_ms,
    const char **why)
{
	struct msg_challenge_reply rep;
	uint8_t want[GUEST_MAC_LEN];
	struct frame f = { 0 };
	const char *bad;
	int r;

	if ((r = read_with_timeout(control, &f, timeout_ms)) < 0) {
		*why = r == -ETIMEDOUT ? "no challenge reply in time" : "no challenge reply";
		return r;
	}
	r = -EPERM;
	*why = "malformed challenge reply";
	if (f.type != MSG_CHALLENGE_REPLY ||
	    msg_challenge_reply_decode(f.payload, f.len, &rep, &bad) != 0)
		goto out;
	/* the guest must serve exactly our execution: an old activation or
	 * another sandbox's guest on this channel is refused */
	*why = "guest reports another identity";
	if (strcmp(rep.sandbox, id->sandbox) != 0 || rep.generation != id->generation ||
	    rep.activation != id->activation)
		goto out;
	guest_mac(secret, nonce, id->sandbox, id->generation, id->activation, want);
	*why = "challenge MAC does not verify";
	if (crypto_verify_32(want, rep.mac) != 0)       /* constant time */
		goto out;
	*why = NULL;
	r = 0;
out:
	sodium_memzero(want, sizeof(want));
	sodium_memzero(&rep, sizeof(rep));
	frame_free(&f);
	return r;
}
