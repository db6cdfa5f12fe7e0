/* The start of every daemon's own seccomp filter: what is not allowed is
 * refused with EPERM. Each caller then adds the rules only it needs (its
 * socket families, its ioctls, its file modes) and loads the filter. */
#ifndef SPACE_CONFINE_H
#define SPACE_CONFINE_H

#include <seccomp.h>
#include <stdint.h>
#include <stddef.h>

/* Add each name of the NULL-terminated list with action, unconditionally.
 * A name this architecture does not have is skipped. 0 or -errno. */
int confine_add_names(scmp_filter_ctx ctx, const char *const *names,
    uint32_t action);

/* A new filter refusing with EPERM, allowing names, clone only for a
 * thread (CLONE_THREAD set), and clone3 answered ENOSYS: its flags are out
 * of the filter's reach, and the C library then falls back to clone.
 * NULL with *err set (-errno) on failure. */
scmp_filter_ctx confine_threads_only(const char *const *names, int *err);

/* For the build tools that compile filters ahead (gen/filter_gen.c of
 * spaced-guest and spaced-host): writes path, only once every filter was
 * exported (through path.tmp, renamed), as C: the comment and includes of
 * head, then for each i the BPF of ctx[i] as the array name[i] and its
 * length name[i]_len. The contexts are released. 0, or 1 with the reason
 * on stderr (the build fails). */
int confine_gen_file(const char *path, const char *head, size_t n,
    const char *const name[], scmp_filter_ctx ctx[]);
#endif
