/* node-api: the unprivileged HTTP edge of a worker. One file per role:
 *   main.c     options, listening socket, privilege drop, MHD daemon
 *   http.c     routes, cheap rejection (the bearer's shape by the verifier's
 *              grammar; the signature is sbx-manager's), request/response mapping
 *   manager.c  one framed connection to sbx-manager per operation (a few made ahead)
 *   ws.c       WebSocket streams after the upgrade (wslay framing)
 *   metrics.c  counters and GET /metrics */
#ifndef NODE_API_H
#define NODE_API_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"

struct napi_config {
	unsigned head_timeout, heads_per_ip, conns_per_ip;     /* limits.h defaults */
	unsigned tcp_keepalive;         /* seconds; 0: the kernel's defaults (util.h) */
	char manager_socket[108];
	char worker_id[SPACE_ID_MAX + 1];
	const char *metrics_file;       /* sbx-manager's counters, appended to /metrics */
};
extern struct napi_config ncfg;

/* http.c */
struct MHD_Daemon;
struct MHD_Daemon *http_start(int listen_fd);

/* manager.c: connect, HELLO, REQUEST {op, sandbox, token, args};
 * returns the fd or -errno */
struct json_t;
int manager_open(const char *op, const char *sandbox, const char *token,
    struct json_t *args);
/* the thread that keeps connections made ahead (HELLO done) */
void manager_spares_start(void);

/* ws.c: a stream whose backend answered; owns mfd from ws_new on */
struct ws_stream;
struct MHD_UpgradeResponseHandle;
struct ws_stream *ws_new(int mfd, const struct json_t *result, bool json_out);
void ws_free(struct ws_stream *ws);
/* takes the upgraded socket over (a thread of its own); ws is freed by
 * it, or here on failure (-1) */
int ws_start(struct ws_stream *ws, int sock, struct MHD_UpgradeResponseHandle *urh,
    const char *extra, size_t extra_len);

/* metrics.c */
void metrics_stream_open(int delta);
void metrics_stream_close(unsigned code);
void metrics_request(const char *route, unsigned status);
/* a download answered: its body from a descriptor or from DATA frames;
 * cut: one from a descriptor that a CANCEL ended early */
void metrics_body(bool descriptor, bool cut);
void metrics_admission(const char *error, const char *reason);
/* Prometheus text, malloc'd */
char *metrics_render(size_t *len);
#endif
