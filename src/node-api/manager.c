/* One connection to sbx-manager per operation (docs/protocol.md section 1):
 * HELLO, then REQUEST {"op","sandbox","token","args"}. node-api runs as an
 * unprivileged user; the socket's group (see docs/worker.md) is what lets
 * it connect, and sbx-manager checks SO_PEERCRED again. */
#include <errno.h>
#include <jansson.h>
#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "node-api.h"
#include "proto.h"

int
manager_open(const char *op, const char *sandbox, const char *token, json_t *args)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 120 };
	enum proto_role peer;
	json_t *req;
	char *s = NULL;
	int fd, ret;

	memcpy(sa.sun_path, ncfg.manager_socket, sizeof(ncfg.manager_socket));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		goto fail;
	}
	if (proto_hello_client(fd, ROLE_NODE_API, &peer) < 0 || peer != ROLE_SBX_MANAGER) {
		ret = -EPROTO;
		goto fail;
	}
	req = json_pack("{s:s, s:s, s:s, s:O}", "op", op, "sandbox", sandbox,
	    "token", token, "args", args);
	if (req == NULL) {
		ret = -ENOMEM;
		goto fail;
	}
	s = json_dumps(req, JSON_COMPACT);
	json_decref(req);
	if (s == NULL) {
		ret = -ENOMEM;
		goto fail;
	}
	if (strlen(s) > frame_max_len(MSG_REQUEST)) {
		ret = -EMSGSIZE;
		goto fail;
	}
	if ((ret = frame_write_json(fd, MSG_REQUEST, s)) != 0)
		goto fail;
	/* s holds the capability; jansson's own copy inside req is wiped
	 * by the free function main.c installs (space_json_wipe_frees) */
	sodium_memzero(s, strlen(s));
	free(s);
	return fd;
fail:
	if (s)
		sodium_memzero(s, strlen(s));
	free(s);
	close(fd);
	return ret;
}
