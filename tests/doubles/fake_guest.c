/* A stand-in for spaced-guest, built for the tests only (never installed):
 * spaced-host starts it with --guest PATH exactly as it starts the real
 * guest (PID 1 of the jail, control channel on fd 3, secret on fd 4).
 * FAKE_MODE, fixed at build time, says how it misbehaves:
 *
 *   other-sandbox  answers the challenge with a valid MAC, but for another
 *                  sandbox ("someoneelse") than the one it was started for
 *   bad-secret     answers for the right identity with a secret that has
 *                  one bit flipped
 *   hostile        passes the challenge, then answers every operation with
 *                  a hostile frame chosen by the exec's argv[0]:
 *                    not-a-frame   bytes that are no frame header
 *                    huge-length   a header announcing 4 GiB
 *                    bad-json      RESPONSE whose payload is not JSON
 *                    wrong-shape   RESPONSE that is JSON of the wrong shape
 *                    bad-error     ERROR whose payload is not an object
 *                    wrong-type    a CHALLENGE frame on an operation socket
 *                    bad-control   garbage on the control channel (ends it)
 *                  anything else: a well-formed RESPONSE;
 *                  and an fs.read by its path, a body that breaks its
 *                  own RESPONSE's "size" (bytes 'A' + i % 26):
 *                    /overlong/N/M  announces N bytes, sends M > N, END
 *                    /short/N/M     announces N bytes, sends M < N, END
 *                  in DATA frames of 256 KiB;
 *                  and one by /fd/WHAT, a RESPONSE that passes a
 *                  descriptor (fs.read's "descriptor" answer) of:
 *                    /fd/pipe       a pipe's read end
 *                    /fd/proc       /proc/self/status (procfs)
 *                    /fd/rdwr       a memfd open for reading and writing
 *                    /fd/dir        the root directory
 *                    /fd/unsaid     a good file, the answer not saying so
 *                    /fd/missing    nothing, the answer saying there is one
 *                    /fd/good       a memfd of 200,000 bytes ('A' + i % 26)
 *                                   reopened read-only, announced as 5
 */
#include <fcntl.h>
#include <sys/mman.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "guestmac.h"
#include "proto.h"
#include "util.h"

#ifndef FAKE_MODE
#error "build with -DFAKE_MODE=\"other-sandbox\" (or bad-secret, hostile)"
#endif

static int
mode(const char *m)
{
	return strcmp(FAKE_MODE, m) == 0;
}

static int
challenge(int control, const uint8_t secret[GUEST_SECRET_LEN], const char *sandbox,
    uint64_t gen, uint32_t act)
{
	struct frame f = { 0 };
	uint8_t nonce[GUEST_NONCE_LEN], mac[GUEST_MAC_LEN];
	char macb[64], out[512];
	json_t *o;

	if (frame_read(control, &f) < 0 || f.type != MSG_CHALLENGE)
		return -1;
	o = json_loadb((const char *)f.payload, f.len, 0, NULL);
	if (o == NULL || b64url_decode(json_string_value(json_object_get(o, "nonce")),
	    strlen(json_string_value(json_object_get(o, "nonce"))), nonce, sizeof(nonce)) !=
	    GUEST_NONCE_LEN)
		return -1;
	json_decref(o);
	frame_free(&f);
	guest_mac(secret, nonce, sandbox, gen, act, mac);
	b64url_encode(mac, sizeof(mac), macb, sizeof(macb));
	snprintf(out, sizeof(out), "{\"sandbox\":\"%s\",\"generation\":%llu,\"activation\":%u,"
	    "\"mac\":\"%s\"}", sandbox, (unsigned long long)gen, act, macb);
	return frame_write_json(control, MSG_CHALLENGE_REPLY, out);
}

/* fs.read of /overlong/N/M or /short/N/M: announce N, send M; 0 if the
 * path is neither */
static int
lying_read(int op, const char *path)
{
	unsigned long long n, m, off = 0;
	size_t k, i;
	char res[96], tail[8];
	uint8_t *buf;

	if ((sscanf(path, "/overlong/%llu/%llu%1s", &n, &m, tail) != 2 &&
	     sscanf(path, "/short/%llu/%llu%1s", &n, &m, tail) != 2) || m > (1ull << 30))
		return 0;
	snprintf(res, sizeof(res), "{\"status\":200,\"result\":{\"size\":%llu}}", n);
	if (frame_write_json(op, MSG_RESPONSE, res) != 0 || (buf = malloc(256u << 10)) == NULL)
		return 1;
	while (off < m) {
		k = m - off < (256u << 10) ? (size_t)(m - off) : (256u << 10);
		for (i = 0; i < k; i++)
			buf[i] = (uint8_t)('A' + (off + i) % 26);
		if (frame_write(op, MSG_DATA, buf, k) != 0)
			break;
		off += k;
	}
	free(buf);
	frame_write(op, MSG_END, NULL, 0);
	return 1;
}

/* a memfd of n pattern bytes; read-only: reopened through /proc */
static int
pattern_fd(size_t n, bool readonly)
{
	char p[64];
	uint8_t b[4096];
	size_t i, k;
	int fd = memfd_create("fake", MFD_CLOEXEC), ro;

	if (fd < 0)
		return -1;
	for (i = 0; i < n; i += k) {
		k = n - i < sizeof(b) ? n - i : sizeof(b);
		for (size_t j = 0; j < k; j++)
			b[j] = (uint8_t)('A' + (i + j) % 26);
		if (fd_write_all(fd, b, k) < 0)
			return -1;
	}
	if (!readonly)
		return fd;
	snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
	ro = open(p, O_RDONLY | O_CLOEXEC);
	close(fd);
	return ro;
}

/* fs.read of /fd/WHAT: a descriptor of WHAT passed with the answer; 0 if
 * the path is not one of them */
static int
descriptor_read(int op, const char *path)
{
	const char *said = "{\"status\":200,\"result\":{\"size\":5,\"descriptor\":true}}";
	int fd = -1, pp[2];

	if (strncmp(path, "/fd/", 4) != 0)
		return 0;
	path += 4;
	if (strcmp(path, "pipe") == 0 && pipe2(pp, O_CLOEXEC) == 0) {
		fd = pp[0];
		close(pp[1]);
	} else if (strcmp(path, "proc") == 0)
		fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	else if (strcmp(path, "rdwr") == 0)
		fd = pattern_fd(200000, false);
	else if (strcmp(path, "dir") == 0)
		fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	else if (strcmp(path, "unsaid") == 0) {
		fd = pattern_fd(200000, true);
		said = "{\"status\":200,\"result\":{\"size\":200000}}";
	} else if (strcmp(path, "good") == 0)
		fd = pattern_fd(200000, true);
	if (strcmp(path, "missing") == 0)
		frame_write_json(op, MSG_RESPONSE, said);
	else if (fd >= 0)
		frame_write_fd(op, MSG_RESPONSE, said, strlen(said), fd);
	else    /* what could not be made says so: the test sees a 500 of ours */
		frame_write_json(op, MSG_ERROR, "{\"status\":500,\"error\":\"internal\","
		    "\"message\":\"fake guest: cannot make the descriptor\"}");
	if (fd >= 0)
		close(fd);
	return 1;
}

/* one operation of the hostile guest */
static void
hostile_op(int control, int op)
{
	struct frame f = { 0 };
	const char *what = "";
	json_t *req = NULL, *argv0, *path;
	uint8_t hdr[FRAME_HDR_LEN];

	if (frame_read(op, &f) == 0 && f.type == MSG_REQUEST &&
	    (req = json_loadb((const char *)f.payload, f.len, 0, NULL)) != NULL) {
		if ((argv0 = json_array_get(json_object_get(json_object_get(req, "args"), "argv"), 0)))
			what = json_string_value(argv0);
		if ((path = json_object_get(json_object_get(req, "args"), "path")) &&
		    json_is_string(path) && (lying_read(op, json_string_value(path)) ||
		    descriptor_read(op, json_string_value(path))))
			goto out;
	}
	if (strcmp(what, "not-a-frame") == 0) {
		if (write(op, "GET / HTTP/1.1\r\n\r\n", 18) < 0)
			_exit(1);
	} else if (strcmp(what, "huge-length") == 0) {
		frame_hdr_encode(hdr, MSG_RESPONSE, 16);
		hdr[8] = hdr[9] = hdr[10] = hdr[11] = 0xff;
		if (write(op, hdr, sizeof(hdr)) < 0)
			_exit(1);
	} else if (strcmp(what, "bad-json") == 0) {
		frame_write(op, MSG_RESPONSE, "{\"status\":200,\"result\":", 23);
	} else if (strcmp(what, "wrong-shape") == 0) {
		frame_write_json(op, MSG_RESPONSE, "{\"status\":\"200\",\"result\":[1,2,3],\"x\":{}}");
	} else if (strcmp(what, "bad-error") == 0) {
		frame_write(op, MSG_ERROR, "[\"status\",500]", 14);
	} else if (strcmp(what, "wrong-type") == 0) {
		frame_write_json(op, MSG_CHALLENGE, "{\"nonce\":\"AAAA\"}");
	} else if (strcmp(what, "bad-control") == 0) {
		if (write(control, "\xff\xff\xff\xff garbage", 13) < 0)
			_exit(1);
		frame_write_json(op, MSG_RESPONSE, "{\"status\":200,\"result\":{\"exit_code\":0}}");
	} else {
		frame_write_json(op, MSG_RESPONSE,
		    "{\"status\":200,\"result\":{\"exit_code\":0,\"stdout\":\"hostile guest\"}}");
	}
out:
	json_decref(req);
	frame_free(&f);
}

int
main(int argc, char **argv)
{
	const char *sandbox = NULL;
	uint64_t gen = 0;
	uint32_t act = 0;
	uint8_t secret[GUEST_SECRET_LEN];
	size_t got = 0;
	int i, control = 3, secret_fd = 4;
	ssize_t n;

	for (i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--sandbox") == 0)
			sandbox = argv[i + 1];
		else if (strcmp(argv[i], "--generation") == 0)
			gen = strtoull(argv[i + 1], NULL, 10);
		else if (strcmp(argv[i], "--activation") == 0)
			act = (uint32_t)strtoul(argv[i + 1], NULL, 10);
	}
	if (sandbox == NULL || sodium_init() < 0)
		return 1;
	while (got < sizeof(secret) && (n = read(secret_fd, secret + got, sizeof(secret) - got)) > 0)
		got += (size_t)n;
	close(secret_fd);
	if (got != sizeof(secret))
		return 1;
	if (mode("bad-secret"))
		secret[0] ^= 1;
	if (mode("other-sandbox"))
		sandbox = "someoneelse";
	if (challenge(control, secret, sandbox, gen, act) < 0)
		return 1;
	for (;;) {
		struct frame f = { 0 };
		int op = -1;

		if (frame_read_fd(control, &f, &op) < 0)
			return 0;       /* the bridge is gone */
		if (f.type == MSG_OPEN && op >= 0) {
			if (mode("hostile"))
				hostile_op(control, op);
			close(op);
		}
		frame_free(&f);
	}
}
