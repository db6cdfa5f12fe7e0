/* A helper of bench/platform.py, not a benchmark of its own: reads one file
 * straight from a bridge socket, as sbx-manager would (HELLO, REQUEST
 * fs.read with the claims JSON, DATA* then END), drops the bytes and prints
 * how many arrived. It is the C baseline for the large-file throughput, so
 * that the bridge's figure is not the speed of a Python loop.
 *   bench_framecat SOCK SANDBOX CLAIMS_JSON PATH */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <jansson.h>

#include "proto.h"

int
main(int argc, char **argv)
{
	struct sockaddr_un sa;
	struct frame f = { 0 };
	enum proto_role peer;
	json_t *req = NULL, *claims;
	char *txt = NULL;
	uint64_t total = 0;
	int fd = -1, r, ret = 1;

	if (argc != 5) {
		fprintf(stderr, "usage: bench_framecat SOCK SANDBOX CLAIMS_JSON PATH\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sun_family = AF_UNIX;
	if (strlen(argv[1]) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "bench_framecat: socket path too long\n");
		return 2;
	}
	memcpy(sa.sun_path, argv[1], strlen(argv[1]) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		fprintf(stderr, "bench_framecat: connect %s: %s\n", argv[1], strerror(errno));
		goto out;
	}
	if (proto_hello_client(fd, ROLE_SBX_MANAGER, &peer) < 0) {
		fprintf(stderr, "bench_framecat: HELLO refused\n");
		goto out;
	}
	/* the claims travel as the object itself, not as its text */
	if ((claims = json_loads(argv[3], 0, NULL)) == NULL) {
		fprintf(stderr, "bench_framecat: the claims are not JSON\n");
		goto out;
	}
	req = json_pack("{s:s,s:s,s:o,s:{s:s}}", "op", "fs.read", "sandbox", argv[2],
	    "claims", claims, "args", "path", argv[4]);
	txt = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (!txt || frame_write_json(fd, MSG_REQUEST, txt) != 0) {
		fprintf(stderr, "bench_framecat: cannot send the request\n");
		goto out;
	}
	if (frame_read(fd, &f) != 0 || f.type != MSG_RESPONSE) {
		fprintf(stderr, "bench_framecat: no RESPONSE: %s\n", f.payload ? (char *)f.payload : "");
		goto out;
	}
	for (;;) {
		frame_free(&f);
		if ((r = frame_read(fd, &f)) != 0) {
			fprintf(stderr, "bench_framecat: stream cut (%d)\n", r);
			goto out;
		}
		if (f.type == MSG_END)
			break;
		if (f.type != MSG_DATA) {
			fprintf(stderr, "bench_framecat: %s in the stream\n", msg_type_str(f.type));
			goto out;
		}
		total += f.len;
	}
	printf("%" PRIu64 "\n", total);
	ret = 0;
out:
	frame_free(&f);
	free(txt);
	json_decref(req);
	if (fd >= 0)
		close(fd);
	return ret;
}
