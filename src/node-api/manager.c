/* One connection to sbx-manager per operation (docs/protocol.md section 1):
 * HELLO, then REQUEST {"op","sandbox","token","args"} (msg.h, token form). node-api runs as an
 * unprivileged user; the socket's group (see docs/worker.md) is what lets
 * it connect, and sbx-manager checks SO_PEERCRED again. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "node-api.h"
#include "msg.h"
#include "proto.h"

int
manager_open(const char *op, const char *sandbox, const char *token, json_t *args)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 120 };
	enum proto_role peer;
	struct msg_request req;
	char *s = NULL;
	size_t len;
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
	memset(&req, 0, sizeof(req));
	if (op_parse(op, &req.op) != 0 || strlen(sandbox) >= sizeof(req.sandbox)) {
		ret = -EINVAL;
		goto fail;
	}
	strcpy(req.sandbox, sandbox);
	/* borrowed, not copied: the encoder only reads them */
	req.token = (char *)(uintptr_t)token;
	req.token_len = strlen(token);
	req.args = args;
	/* the encoding holds the capability: msg_wipe_free; jansson's own
	 * copy is wiped by the free function main.c installs
	 * (space_json_wipe_frees) */
	if ((ret = msg_request_encode(&req, MSG_FORM_TOKEN, &s, &len)) != 0)
		goto fail;
	ret = frame_write_json(fd, MSG_REQUEST, s);
	msg_wipe_free(s);
	s = NULL;
	if (ret != 0)
		goto fail;
	return fd;
fail:
	msg_wipe_free(s);
	close(fd);
	return ret;
}
