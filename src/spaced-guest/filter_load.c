/* The sandbox's seccomp filters, loaded as the BPF the build made of them
 * (filter.c, gen/filter_gen.c): the allow list first, then the ioctl
 * refusals, as seccomp_load did with flags 0 (no TSYNC: the guest has one
 * thread here; no_new_privs is set by confine_guest before). */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "filter_bpf.h"
#include "guest.h"

static int
load(const struct sock_filter *f, unsigned short len)
{
	struct sock_fprog prog = { .len = len, .filter = (struct sock_filter *)f };

	return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -errno;
}

int
filter_install(void)
{
	int r;

	if ((r = load(guest_filter_allow, guest_filter_allow_len)) < 0)
		return r;
	return load(guest_filter_ioctl, guest_filter_ioctl_len);
}
