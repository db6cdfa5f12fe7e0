/* Kernel socket evidence for a unix socket connection (DESIGN section 6):
 * which process holds the socket our connection landed on. */
#ifndef SPACE_SOCKDIAG_H
#define SPACE_SOCKDIAG_H

#include <sys/types.h>

/* 0 when the peer of our connected unix socket fd belongs to a socket
 * that process pid holds in its fd table (the listener with our
 * connection queued, or the socket accept() returned); -EPERM when not
 * (why says what was seen); other -errno on failure. */
int sockdiag_peer_owned_by(int fd, pid_t pid, const char **why);

#endif
