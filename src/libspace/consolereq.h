/* The two things space-edge's web console reads from a request beyond its
 * head (docs/console.md): the target of a node-api request,
 * "/node/v1/sandboxes/{id}/...", and the Sec-WebSocket-Protocol list of a
 * WebSocket handshake, from which the caller's API key offered as the
 * subprotocol "space-key.<key>" is taken out. Both strict; nothing is
 * half-read. */
#ifndef SPACE_CONSOLEREQ_H
#define SPACE_CONSOLEREQ_H
#include <stddef.h>

#include "limits.h"

#define CONSOLE_NODE_PREFIX     "/node"
#define CONSOLE_KEY_PROTO       "space-key."
#define CONSOLE_KEY_MAX         128     /* bytes of a key, NUL included */

/* t[0..n) is "/node/v1/sandboxes/{id}/REST" (REST may be empty, may hold
 * a query): 0 with sbx the id ([A-Za-z0-9_-]{1,SPACE_ID_MAX}); -EINVAL
 * anything else. The target toward node-api is t + 5. */
int console_node_target(const char *t, size_t n, char sbx[SPACE_ID_MAX + 1]);

/* v[0..n) is a Sec-WebSocket-Protocol value: tokens (RFC 9110 tchar)
 * separated by commas and optional blanks. An entry "space-key.<key>" is
 * taken out: its key copied into key (NUL-terminated) and counted in
 * *nkeys; the other entries are written to rest joined by ", "
 * (NUL-terminated; rest_cap must be at least 2 * n + 1). -EINVAL: an empty
 * entry, a byte outside tchar, a second key entry, an empty key or one of
 * CONSOLE_KEY_MAX bytes or more, rest_cap too small. */
int console_protocols(const char *v, size_t n, char key[CONSOLE_KEY_MAX], int *nkeys, char *rest,
    size_t rest_cap);
#endif
