/* One connection to sbx-manager per operation (docs/protocol.md section 1):
 * HELLO, then REQUEST {"op","sandbox","token","args"} (msg.h, token form). node-api runs as an
 * unprivileged user; the socket's group (see docs/worker.md) is what lets
 * it connect, and sbx-manager checks SO_PEERCRED again.
 *
 * Connections made ahead: a thread keeps up to SPACE_MGR_SPARE connections
 * connected and through HELLO, so an operation starts with its REQUEST
 * (no connect, no accept and thread start in sbx-manager, no HELLO round
 * trip on its path). Still one operation per connection: a spare carries
 * nothing but the HELLO, and sbx-manager admits its REQUEST as any other.
 * sbx-manager ends a connection that sends nothing for MGR_IO_TIMEOUT_S
 * (30 s): a spare is used only while younger than SPACE_MGR_SPARE_AGE_S
 * and while its peer has not closed it; otherwise a fresh connection is
 * made as before. */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "node-api.h"
#include "msg.h"
#include "proto.h"
#include "util.h"

/* connect and HELLO: the fd or -errno */
static int
connect_hello(void)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 120 };
	enum proto_role peer;
	int fd, ret;

	memcpy(sa.sun_path, ncfg.manager_socket, sizeof(ncfg.manager_socket));
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (proto_hello_client(fd, ROLE_NODE_API, &peer) < 0 || peer != ROLE_SBX_MANAGER) {
		close(fd);
		return -EPROTO;
	}
	return fd;
}

static pthread_mutex_t sp_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t sp_cv = PTHREAD_COND_INITIALIZER;
static int spare_fd[SPACE_MGR_SPARE];
static uint64_t spare_at[SPACE_MGR_SPARE];      /* when made (monotonic ns) */
static unsigned nspare;

static bool
spare_young(uint64_t at, uint64_t now)
{
	return now - at < (uint64_t)SPACE_MGR_SPARE_AGE_S * 1000000000u;
}

/* the spares past their age, closed; under sp_mu. When the oldest left
 * is due (now_mono_ns() time), or 0 with none */
static uint64_t
spares_expire(uint64_t now)
{
	unsigned i, k = 0;

	for (i = 0; i < nspare; i++) {
		if (!spare_young(spare_at[i], now)) {
			close(spare_fd[i]);
			continue;
		}
		spare_fd[k] = spare_fd[i];
		spare_at[k++] = spare_at[i];
	}
	nspare = k;
	return k > 0 ? spare_at[0] + (uint64_t)SPACE_MGR_SPARE_AGE_S * 1000000000u : 0;
}

static void *
spare_thread(void *arg)
{
	unsigned failures = 0;

	(void)arg;
	for (;;) {
		struct timespec ts;
		uint64_t due;
		int fd;

		pthread_mutex_lock(&sp_mu);
		for (;;) {
			due = spares_expire(now_mono_ns());
			if (nspare < SPACE_MGR_SPARE)
				break;
			ts = mono_timespec(due);
			(void)pthread_cond_timedwait(&sp_cv, &sp_mu, &ts);
		}
		pthread_mutex_unlock(&sp_mu);
		if ((fd = connect_hello()) < 0) {
			/* sbx-manager away or at its connection limit: operations
			 * connect on their own meanwhile; again a little later */
			if (failures++ == 0)
				log_warnx("no connection made ahead to sbx-manager: %s", strerror(-fd));
			usleep(failures < 10 ? 100000 : 1000000);
			continue;
		}
		failures = 0;
		pthread_mutex_lock(&sp_mu);
		spare_fd[nspare] = fd;
		spare_at[nspare++] = now_mono_ns();
		pthread_mutex_unlock(&sp_mu);
	}
	return NULL;
}

void
manager_spares_start(void)
{
	pthread_attr_t at;
	pthread_t t;

	pthread_cond_destroy(&sp_cv);
	cond_init_mono(&sp_cv);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&at, 128 << 10);
	if (pthread_create(&t, &at, spare_thread, NULL) != 0)
		log_warnx("no connections made ahead to sbx-manager: cannot start a thread");
	pthread_attr_destroy(&at);
}

/* a spare connection still open at the other end, or -1. sbx-manager
 * writes nothing after its HELLO until it has a REQUEST: anything
 * readable (its close) means the connection is gone */
static int
spare_take(void)
{
	struct pollfd p;
	int fd = -1;

	pthread_mutex_lock(&sp_mu);
	while (fd < 0 && nspare > 0) {
		fd = spare_fd[--nspare];
		if (!spare_young(spare_at[nspare], now_mono_ns())) {
			close(fd);
			fd = -1;
			continue;
		}
		p = (struct pollfd){ .fd = fd, .events = POLLIN | POLLRDHUP };
		if (poll(&p, 1, 0) != 0) {
			close(fd);
			fd = -1;
		}
	}
	pthread_cond_signal(&sp_cv);
	pthread_mutex_unlock(&sp_mu);
	return fd;
}

int
manager_open(const char *op, const char *sandbox, const char *token, json_t *args)
{
	struct msg_request req;
	char *s = NULL;
	size_t len;
	int fd, ret;

	memset(&req, 0, sizeof(req));
	if (op_parse(op, &req.op) != 0 || strlen(sandbox) >= sizeof(req.sandbox))
		return -EINVAL;
	if ((fd = spare_take()) < 0 && (fd = connect_hello()) < 0)
		return fd;
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
