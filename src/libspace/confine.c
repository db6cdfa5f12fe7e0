#include "confine.h"

#include <errno.h>
#include <sched.h>

int
confine_add_names(scmp_filter_ctx ctx, const char *const *names, uint32_t action)
{
	int r, nr;

	for (size_t i = 0; names[i]; i++) {
		nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;       /* not on this architecture */
		if ((r = seccomp_rule_add(ctx, action, nr, 0)) < 0)
			return r;
	}
	return 0;
}

scmp_filter_ctx
confine_threads_only(const char *const *names, int *err)
{
	scmp_filter_ctx ctx;
	int r;

	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	if ((r = confine_add_names(ctx, names, SCMP_ACT_ALLOW)) == 0 &&
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD))) == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0) {
		seccomp_release(ctx);
		*err = r;
		return NULL;
	}
	return ctx;
}
