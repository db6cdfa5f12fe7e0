/* What spaced-guest does to itself right after exec, before it reads a byte
 * from the bridge: everything it starts inherits these limits.
 *
 * The guest is root of the sandbox's user namespace (an unprivileged uid on
 * the host). It keeps exactly three capabilities, only in its own permitted
 * and effective sets: SETUID/SETGID to become the sandbox user in each
 * operation child, KILL to forward SIGTERM to processes of that user. The
 * bounding, inheritable and ambient sets are emptied, so nothing exec'd can
 * ever gain a capability, and no_new_privs blocks set-id binaries. The
 * seccomp filter (filter.c) goes on last. */
#include <errno.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include "guest.h"
#include "log.h"

static int
caps_reduce(void)
{
	static const cap_value_t keep[] = { CAP_SETUID, CAP_SETGID, CAP_KILL };
	cap_t c = NULL;
	int r = 0;

	/* bounding set first: dropping needs CAP_SETPCAP, which goes below */
	for (cap_value_t v = 0; v <= CAP_LAST_CAP; v++)
		if (prctl(PR_CAPBSET_DROP, v, 0, 0, 0) < 0 && errno != EINVAL)
			return -errno;
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -errno;
	if ((c = cap_init()) == NULL)
		return -errno;
	if (cap_set_flag(c, CAP_PERMITTED, 3, keep, CAP_SET) < 0 ||
	    cap_set_flag(c, CAP_EFFECTIVE, 3, keep, CAP_SET) < 0 ||
	    cap_set_proc(c) < 0)
		r = -errno;
	cap_free(c);
	return r;
}

static int
limit(int res, rlim_t v)
{
	struct rlimit rl = { v, v };

	return setrlimit(res, &rl) < 0 ? -errno : 0;
}

int
confine_guest(const struct guest_limits *l)
{
	int r;

	if ((r = limit(RLIMIT_CORE, 0)) < 0 ||
	    (r = limit(RLIMIT_NOFILE, l->nofile)) < 0 ||
	    (r = limit(RLIMIT_NPROC, l->nproc)) < 0 ||
	    (r = limit(RLIMIT_FSIZE, (rlim_t)l->fsize_mb << 20)) < 0)
		return r;
	if ((r = caps_reduce()) < 0)
		return r;
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return -errno;
	return filter_install();
}

int
become_user(void)
{
	cap_t c;
	int r = 0;

	/* supplementary groups cannot be set (setgroups is denied in this
	 * user namespace) and the launcher cleared them on the host */
	if (setresgid(guest_tpl.gid, guest_tpl.gid, guest_tpl.gid) < 0 ||
	    setresuid(guest_tpl.uid, guest_tpl.uid, guest_tpl.uid) < 0)
		return -errno;
	/* a template whose user is root (most OCI images) keeps uid 0, which
	 * keeps capabilities: drop them all explicitly */
	if (guest_tpl.uid == 0) {
		cap_t none = cap_init();
		if (none == NULL || cap_set_proc(none) < 0) {
			cap_free(none);
			return -EPERM;
		}
		cap_free(none);
	}
	/* leaving uid 0 clears the capability sets; make sure of it, since
	 * everything after this point handles the sandbox's data */
	if ((c = cap_get_proc()) == NULL)
		return -errno;
	{
		cap_t none = cap_init();
		if (none == NULL || cap_compare(c, none) != 0)
			r = -EPERM;
		cap_free(none);
	}
	cap_free(c);
	return r;
}
