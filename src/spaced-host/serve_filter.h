/* The serving process's seccomp filter (serve_filter.c), compiled to BPF
 * at build time ($(B)/gen/spaced-host/filter_bpf.c, by gen/filter_gen.c):
 * a serving process loads it without building it at its start. */
#ifndef SPACED_HOST_SERVE_FILTER_H
#define SPACED_HOST_SERVE_FILTER_H

#include <linux/filter.h>
#include <seccomp.h>
#include <stdint.h>

/* The one value of the filter that is known only at its load: the serving
 * process's own pid, the only one tgkill may name. The build compares with
 * this stand-in (above any pid: pid_max is at most 2^22), and the loader
 * puts the pid in its one place (serve.c, confine). */
#define SERVE_FILTER_SELF 0x5ace1d00u

/* the filter as a libseccomp context, tgkill's pid SERVE_FILTER_SELF;
 * NULL with *err set (-errno) */
scmp_filter_ctx serve_filter(int *err);

extern const struct sock_filter serve_filter_bpf[];
extern const unsigned short serve_filter_bpf_len;
#endif
