/* The BPF programs of filter.c, generated at build time
 * ($(B)/gen/spaced-guest/filter_bpf.c, by gen/filter_gen.c). */
#ifndef SPACED_GUEST_FILTER_BPF_H
#define SPACED_GUEST_FILTER_BPF_H

#include <linux/filter.h>

extern const struct sock_filter guest_filter_allow[];
extern const unsigned short guest_filter_allow_len;
extern const struct sock_filter guest_filter_ioctl[];
extern const unsigned short guest_filter_ioctl_len;
#endif
