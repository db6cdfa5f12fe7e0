/* The sandbox's seccomp filters (filter.c), built with libseccomp by the
 * build tool gen/filter_gen.c and loaded as BPF by filter_load.c. */
#ifndef SPACED_GUEST_FILTER_H
#define SPACED_GUEST_FILTER_H

#include <seccomp.h>

/* The allow list, and the second filter refusing TIOCSTI / TIOCLINUX: a
 * new libseccomp context each, NULL with *err (-errno) set */
scmp_filter_ctx filter_allow_list(int *err);
scmp_filter_ctx filter_ioctl_refusals(int *err);
#endif
