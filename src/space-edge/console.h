/* The web console of space-edge (docs/console.md): static files built into
 * the binary (scripts/embed_web.sh generates the table), the control
 * plane's user API forwarded with the caller's own Authorization, and the
 * worker's node-api reached through a route the edge obtains with that
 * same API key. */
#ifndef SPACE_EDGE_CONSOLE_H
#define SPACE_EDGE_CONSOLE_H
#include <stddef.h>

struct console_file {
	const char *path;               /* URL path, "/" included */
	const char *ctype;
	const unsigned char *data;
	size_t len;
};
extern const struct console_file console_files[];
extern const size_t console_files_n;

struct edge;
struct reqhead;
/* A request on the edge's own host. Returns an upstream fd (the request
 * head already sent, rewritten; the body and, after an Upgrade answered
 * 101, the WebSocket follow through the caller's pump) or -1 when the
 * request was answered here (or the client is gone), -2 when it is none
 * of the console's (the caller serves it). */
int edge_console(struct edge *e, int cfd, const char *peer, const char *buf, size_t hlen,
    const struct reqhead *h);
#endif
