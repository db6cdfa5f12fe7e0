/* What spaced-guest does to itself right after exec, before it reads a byte
 * from the bridge: everything it starts inherits these limits.
 *
 * The guest is root of the sandbox's user namespace (an unprivileged uid on
 * the host). It keeps exactly three capabilities, only in its own permitted
 * and effective sets: SETUID/SETGID to become the sandbox user in each
 * operation child, KILL to forward SIGTERM to processes of that user. The
 * bounding, inheritable and ambient sets are emptied, so nothing exec'd can
 * ever gain a capability, and no_new_privs blocks set-id binaries. */
#include <errno.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/ioctl.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <seccomp.h>

#include "guest.h"
#include "log.h"

/* kernel attack surface no sandboxed program needs (DESIGN section 10) */
static const char *const deny_always[] = {
	"kexec_load", "kexec_file_load", "init_module", "finit_module",
	"delete_module", "bpf", "perf_event_open", "keyctl", "add_key",
	"request_key", "userfaultfd", "mount", "umount2", "pivot_root",
	"swapon", "swapoff", "reboot", "ptrace", "process_vm_readv",
	"process_vm_writev", "open_by_handle_at", "name_to_handle_at",
	"unshare", "setns", "iopl", "ioperm", "acct", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "quotactl",
	"quotactl_fd", "lookup_dcookie", "mount_setattr", "move_mount",
	"open_tree", "fsopen", "fsmount", "fspick", "syslog", "vhangup",
	"io_uring_setup", "io_uring_enter", "io_uring_register",
	"fanotify_init", "kcmp", "nfsservctl", "uselib", "_sysctl",
	NULL
};

/* personality() flags that weaken exploitation defences */
static const unsigned long bad_persona[] = {
	ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC, MMAP_PAGE_ZERO, ADDR_COMPAT_LAYOUT,
	ADDR_LIMIT_3GB, ADDR_LIMIT_32BIT, SHORT_INODE, WHOLE_SECONDS, STICKY_TIMEOUTS,
};

static const unsigned long ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID,
	CLONE_NEWNET, CLONE_NEWCGROUP, CLONE_NEWTIME,
};

static int
seccomp_install(void)
{
	scmp_filter_ctx ctx;
	const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
	size_t i;
	int r, nr;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL)
		return -ENOMEM;
	for (i = 0; deny_always[i]; i++) {
		nr = seccomp_syscall_resolve_name(deny_always[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;       /* not on this architecture */
		if ((r = seccomp_rule_add(ctx, eperm, nr, 0)) < 0)
			goto out;
	}
	/* clone with any namespace flag: a new user namespace would give
	 * the sandbox a fresh set of capabilities to attack the kernel with */
	for (i = 0; i < sizeof(ns_flags) / sizeof(ns_flags[0]); i++)
		if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(clone), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
			goto out;
	/* clone3 passes its flags in memory a filter cannot read: ENOSYS
	 * makes libc fall back to clone, which is checked above */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
		goto out;
	for (i = 0; i < sizeof(bad_persona) / sizeof(bad_persona[0]); i++)
		if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(personality), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, bad_persona[i], bad_persona[i]))) < 0)
			goto out;
	/* packet sockets and raw IP: sniffing and forging below the
	 * socket layer; the type argument may carry SOCK_CLOEXEC etc. */
	if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_EQ, AF_PACKET))) < 0 ||
	    (r = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_RAW))) < 0 ||
	    (r = seccomp_rule_add(ctx, eperm, SCMP_SYS(socket), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_PACKET))) < 0)
		goto out;
	/* TIOCSTI / TIOCLINUX push input into a terminal another process reads */
	if ((r = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0 ||
	    (r = seccomp_rule_add(ctx, eperm, SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) < 0)
		goto out;
	r = seccomp_load(ctx);
out:
	seccomp_release(ctx);
	return r;
}

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
	return seccomp_install();
}

int
become_user(void)
{
	cap_t c;
	int r = 0;

	/* supplementary groups cannot be set (setgroups is denied in this
	 * user namespace) and the launcher cleared them on the host */
	if (setresgid(GUEST_USER_GID, GUEST_USER_GID, GUEST_USER_GID) < 0 ||
	    setresuid(GUEST_USER_UID, GUEST_USER_UID, GUEST_USER_UID) < 0)
		return -errno;
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
