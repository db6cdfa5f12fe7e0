/* Frames from a hostile peer: the header codec, whole-buffer decoding with
 * leftovers, and the handshake's strict JSON, on arbitrary bytes.
 * Invariants: a decoded header re-encodes to the same bytes; a decoded
 * frame consumed exactly header + len bytes, within the buffer and within
 * the type's limit; the handshake never accepts what it should refuse. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "proto.h"

static void
check_frames(const uint8_t *data, size_t size)
{
	size_t off = 0;

	if (size >= FRAME_HDR_LEN) {
		uint16_t type;
		uint32_t len;
		uint8_t h[FRAME_HDR_LEN];

		if (frame_hdr_decode(data, &type, &len) == 0) {
			if (len > frame_max_len(type) || type == 0 || type >= MSG__MAX)
				abort();
			frame_hdr_encode(h, type, len);
			/* every field is fixed by the decoder's checks, so the
			 * canonical encoding must be the input itself */
			if (data[2] == PROTO_VERSION && memcmp(h, data, FRAME_HDR_LEN) != 0)
				abort();
		}
	}
	while (off < size) {
		struct frame f = { 0 };
		size_t used = 0;
		uint16_t t2;
		uint32_t l2;
		int r = frame_decode(data + off, size - off, &f, &used);

		if (r == -EAGAIN || r == -EPROTO || r == -EMSGSIZE)
			break;
		if (r != 0)
			abort();
		if (used != FRAME_HDR_LEN + (size_t)f.len || used > size - off)
			abort();
		if (f.len > frame_max_len(f.type) || f.payload[f.len] != '\0')
			abort();
		if (memcmp(f.payload, data + off + FRAME_HDR_LEN, f.len) != 0)
			abort();
		if (frame_hdr_decode(data + off, &t2, &l2) != 0 || t2 != f.type || l2 != f.len)
			abort();
		frame_free(&f);
		off += used;
	}
}

/* the accepting side of the handshake reading these bytes */
static void
check_hello(const uint8_t *data, size_t size)
{
	int sv[2];
	enum proto_role peer = 0;
	int r;

	/* small enough to sit in the socket buffer without a reader */
	if (size > 4096)
		return;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return;
	if (size > 0 && write(sv[0], data, size) != (ssize_t)size)
		goto out;
	shutdown(sv[0], SHUT_WR);
	r = proto_hello_server(sv[1], ROLE_SBX_MANAGER, &peer);
	if (r > 0 && (r < PROTO_VERSION_MIN || r > PROTO_VERSION ||
	    proto_role_str(peer) == NULL))
		abort();
out:
	close(sv[0]);
	close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	check_frames(data, size);
	check_hello(data, size);
	return 0;
}
