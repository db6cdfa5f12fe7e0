/* The request-head watchdog of the HTTP daemons. libmicrohttpd's own
 * timeout is an idle timeout: a head trickled one byte at a time never
 * trips it, and connections still sending their head hold a thread and a
 * slot each. The watchdog bounds both, per connection and per address:
 *   - a request head (the first, or the next one on a kept-alive
 *     connection) must be complete within timeout_s of the connection's
 *     start or of the previous request's end, or the socket is shut down;
 *   - at most per_addr connections of one peer address may be waiting for
 *     their head: a new one closes the oldest, so a client that sends its
 *     request at once is served however many idle sockets its address (or
 *     an attacker behind the same address) holds; only a head pending for
 *     a second or more is closed so (a burst of clients whose heads the
 *     daemon has not read yet does not close its own connections), unless
 *     the address has four times per_addr pending.
 * Connections are named by an opaque pointer (the library's connection);
 * the watchdog only ever calls shutdown(2) on a registered descriptor, and
 * the daemon unregisters it before the library closes it. */
#ifndef SPACE_HEADWATCH_H
#define SPACE_HEADWATCH_H
#include <sys/socket.h>

struct headwatch;
/* 0 or -errno; starts the watchdog thread */
int  headwatch_start(unsigned timeout_s, unsigned per_addr, unsigned max_conns,
    struct headwatch **out);
void headwatch_stop(struct headwatch *hw);
void headwatch_open(struct headwatch *hw, const void *conn, int fd, const struct sockaddr *sa);
void headwatch_head_done(struct headwatch *hw, const void *conn);
void headwatch_rearm(struct headwatch *hw, const void *conn);
void headwatch_close(struct headwatch *hw, const void *conn);
#endif
