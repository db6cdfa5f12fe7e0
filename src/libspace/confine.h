/* The start of every daemon's own seccomp filter: what is not allowed is
 * refused with EPERM. Each caller then adds the rules only it needs (its
 * socket families, its ioctls, its file modes) and loads the filter. */
#ifndef SPACE_CONFINE_H
#define SPACE_CONFINE_H

#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>

/* Add each name of the NULL-terminated list with action, unconditionally.
 * A name this architecture does not have is skipped. 0 or -errno. */
int confine_add_names(scmp_filter_ctx ctx, const char *const *names,
    uint32_t action);

/* A new filter refusing with EPERM, allowing names, clone only for a
 * thread (CLONE_THREAD set), and clone3 answered ENOSYS: its flags are out
 * of the filter's reach, and the C library then falls back to clone.
 * NULL with *err set (-errno) on failure. */
scmp_filter_ctx confine_threads_only(const char *const *names, int *err);

/* For the build tools that compile a filter ahead (gen/filter_gen.c of
 * spaced-guest and spaced-host): ctx exported as BPF into out as C, the
 * array NAME and its length NAME_len. 0 or -errno. */
int confine_export_c(FILE *out, const char *name, scmp_filter_ctx ctx);
#endif
