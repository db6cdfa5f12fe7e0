/* Opening a WebSocket (RFC 6455) to a node-api endpoint with a capability
 * (docs/protocol.md section 2, "Streams"): the handshake over a plain TCP
 * socket, for space_data_op.open_ws. Framing after it is wslay's, done by
 * the caller (the CLI's src/space/wsc.c, space-edge's e2b layer). */
#ifndef SPACE_WSCLIENT_H
#define SPACE_WSCLIENT_H
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

struct space_answer;

struct wsc {
	int fd;                 /* -1 until opened */
	uint8_t *pre;           /* bytes read after the handshake's head */
	size_t pre_len, pre_off;
	json_t *result;         /* {"result"} of the first message, once read */
};

/* For space_data_op.open_ws: opens url (http:// only) with the bearer,
 * through the local socket sock when not NULL (the same node-api: the URL
 * still names the Host); fills a (status 101 and the serving headers when
 * it opened; the status and the decoded error body otherwise). ctx is a
 * struct wsc. */
int wsc_open(void *ctx, const char *url, const char *sock, const char *bearer,
    struct space_answer *a);
void wsc_close(struct wsc *w);
#endif
