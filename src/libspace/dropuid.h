/* Leaving root for good, as a daemon's unprivileged child does before it
 * reads anything untrusted. */
#ifndef SPACE_DROPUID_H
#define SPACE_DROPUID_H

#include <sys/types.h>

/* Become uid and gid with nothing else: the capability bounding set and the
 * ambient set emptied, no supplementary groups, every capability cleared,
 * and checked (the ids stuck, a way back to root fails). The death of
 * parent (even SIGKILL) then ends this process, no_new_privs is set and it
 * is not dumpable. NULL, or the step that failed (the caller dies of it:
 * a half-dropped process must not go on). */
const char *drop_to_uid(uid_t uid, gid_t gid, pid_t parent);
#endif
