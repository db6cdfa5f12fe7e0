/* The seccomp filter of a sandbox: an allow list. Every system call not
 * named here is refused with EPERM, so a call added to a future kernel is
 * closed until someone decides otherwise. docs/jail.md has the table of the
 * allowed calls that still reach sensitive kernel code, why each is allowed
 * and what bounds it; the refused ones that programs commonly try are listed
 * there too.
 *
 * The set is a subset of what the common container runtimes allow a
 * container without capabilities by default, minus what nothing in a
 * sandbox needs: ptrace and the calls that read another process (kcmp,
 * pidfd_getfd, process_vm_*), memfd_secret, modify_ldt, the NUMA policy
 * calls, io_uring, legacy AIO, name_to_handle_at, adjtimex, fanotify.
 *
 * The two filters are compiled to BPF at build time, not at every guest's
 * start: filter_gen.c (a build tool) exports them with libseccomp into a
 * generated source, and filter_load.c hands those programs to the kernel.
 * The guest was always linked statically, so its libseccomp and syscall
 * table were already the build's; compiling them at each start cost each
 * create a few milliseconds of CPU (docs/benchmarks.md, "Bursts: CPU per
 * create"). */
#include <errno.h>
#include <stddef.h>
#include <linux/netlink.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <seccomp.h>

#include "confine.h"
#include "filter.h"

/* allowed whatever the arguments. Names libseccomp does not know on this
 * architecture are skipped (they stay refused). */
static const char *const allow[] = {
	/* files and directories */
	"read", "write", "readv", "writev", "pread64", "pwrite64", "preadv",
	"pwritev", "preadv2", "pwritev2", "open", "openat", "openat2", "creat",
	"close", "close_range", "lseek", "stat", "fstat", "lstat", "newfstatat",
	"statx", "statfs", "fstatfs", "access", "faccessat", "faccessat2",
	"getdents", "getdents64", "getcwd", "chdir", "fchdir", "rename",
	"renameat", "renameat2", "mkdir", "mkdirat", "rmdir", "link", "linkat",
	"unlink", "unlinkat", "symlink", "symlinkat", "readlink", "readlinkat",
	"chmod", "fchmod", "fchmodat", "chown", "fchown", "lchown", "fchownat",
	"umask", "truncate", "ftruncate", "fallocate", "fsync", "fdatasync",
	"sync", "syncfs", "sync_file_range", "flock", "fcntl", "dup", "dup2",
	"dup3", "utime", "utimes", "utimensat", "futimesat", "mknod", "mknodat",
	"readahead", "fadvise64", "sendfile", "splice", "tee", "vmsplice",
	"copy_file_range", "setxattr", "lsetxattr", "fsetxattr", "getxattr",
	"lgetxattr", "fgetxattr", "listxattr", "llistxattr", "flistxattr",
	"removexattr", "lremovexattr", "fremovexattr", "inotify_init",
	"inotify_init1", "inotify_add_watch", "inotify_rm_watch",
	/* waiting and events */
	"poll", "ppoll", "select", "pselect6", "epoll_create", "epoll_create1",
	"epoll_ctl", "epoll_wait", "epoll_pwait", "epoll_pwait2", "eventfd",
	"eventfd2", "signalfd", "signalfd4", "timerfd_create", "timerfd_settime",
	"timerfd_gettime", "pipe", "pipe2", "futex", "futex_waitv",
	"set_robust_list", "get_robust_list", "membarrier", "rseq",
	/* memory of the calling process */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "mincore",
	"msync", "mlock", "mlock2", "munlock", "mlockall", "munlockall",
	"memfd_create", "pkey_alloc", "pkey_free", "pkey_mprotect",
	/* processes, threads, signals */
	"fork", "vfork", "execve", "execveat", "exit", "exit_group", "wait4",
	"waitid", "kill", "tkill", "tgkill", "pidfd_open", "pidfd_send_signal",
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigpending",
	"rt_sigtimedwait", "rt_sigqueueinfo", "rt_tgsigqueueinfo",
	"rt_sigsuspend", "sigaltstack", "pause", "restart_syscall",
	"set_tid_address", "arch_prctl", "prctl", "seccomp",
	"landlock_create_ruleset", "landlock_add_rule", "landlock_restrict_self",
	"getpid", "getppid", "gettid", "getpgid", "setpgid", "getpgrp",
	"getsid", "setsid", "getuid", "geteuid", "getgid", "getegid",
	"getresuid", "getresgid", "getgroups", "setuid", "setgid", "setreuid",
	"setregid", "setresuid", "setresgid", "setfsuid", "setfsgid",
	"setgroups", "capget", "capset", "getrlimit", "setrlimit", "prlimit64",
	"getrusage", "getpriority", "setpriority", "ioprio_get", "ioprio_set",
	"sched_yield", "sched_getaffinity", "sched_setaffinity",
	"sched_getparam", "sched_setparam", "sched_getscheduler",
	"sched_setscheduler", "sched_getattr", "sched_setattr",
	"sched_get_priority_max", "sched_get_priority_min",
	"sched_rr_get_interval", "getcpu",
	/* time */
	"nanosleep", "clock_nanosleep", "clock_gettime", "clock_getres",
	"gettimeofday", "time", "times", "alarm", "getitimer", "setitimer",
	"timer_create", "timer_settime", "timer_gettime", "timer_getoverrun",
	"timer_delete",
	/* sockets: socket() and socketpair() have their own rules below */
	"bind", "connect", "listen", "accept", "accept4", "shutdown",
	"getsockname", "getpeername", "getsockopt", "setsockopt", "sendto",
	"recvfrom", "sendmsg", "recvmsg", "sendmmsg", "recvmmsg",
	/* System V and POSIX IPC: the sandbox's own IPC namespace */
	"shmget", "shmat", "shmdt", "shmctl", "semget", "semop", "semtimedop",
	"semctl", "msgget", "msgsnd", "msgrcv", "msgctl", "mq_open", "mq_unlink",
	"mq_timedsend", "mq_timedreceive", "mq_notify", "mq_getsetattr",
	/* the machine, read only */
	"uname", "sysinfo", "getrandom",
	/* ioctl: every command but two, which a second filter refuses */
	"ioctl",
	NULL
};

/* refused with ENOSYS instead of EPERM: callers treat it as "this kernel
 * has no such call" and fall back to something on the allow list */
static const char *const absent[] = {
	"clone3",       /* its flags are in memory a filter cannot read; libc falls back to clone */
	"io_setup", "io_submit", "io_getevents", "io_pgetevents", "io_cancel",
	"io_destroy",   /* legacy AIO: a host-wide pool (fs.aio-max-nr); libraries fall back to threads */
	NULL
};

/* clone() creating any namespace: a new user namespace would give the
 * sandbox a full capability set to attack the kernel with */
#define CLONE_NS_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | \
	CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWCGROUP)

/* personality(): Linux and its 32-bit flavour, the 2.6 uname emulation,
 * and the query; every flag that weakens ASLR or NX stays refused. The
 * kernel reads an unsigned int: only the low 32 bits are compared. */
static const unsigned long persona_ok[] = { 0x0, 0x8, 0x20000, 0x20008, 0xffffffff };

/* address families a sandbox may open; all others are EAFNOSUPPORT. The
 * kernel knows fewer than 64 families; larger values are refused too. */
#define FAMILY_LIMIT 64

static int
rules_socket(scmp_filter_ctx ctx)
{
	/* IP: TCP streams and UDP datagrams (protocol 0 or named), and the
	 * unprivileged ICMP echo datagrams of ping; raw and packet types stay
	 * refused (the type may carry SOCK_CLOEXEC / SOCK_NONBLOCK above
	 * 0xf), and so do the other protocols of those types (SCTP, MPTCP,
	 * UDP-Lite: modules the kernel would load for the asking) */
	static const struct { int family, type, proto; } inet[] = {
		{ AF_INET, SOCK_STREAM, 0 }, { AF_INET, SOCK_STREAM, IPPROTO_TCP },
		{ AF_INET, SOCK_DGRAM, 0 }, { AF_INET, SOCK_DGRAM, IPPROTO_UDP },
		{ AF_INET, SOCK_DGRAM, IPPROTO_ICMP },
		{ AF_INET6, SOCK_STREAM, 0 }, { AF_INET6, SOCK_STREAM, IPPROTO_TCP },
		{ AF_INET6, SOCK_DGRAM, 0 }, { AF_INET6, SOCK_DGRAM, IPPROTO_UDP },
		{ AF_INET6, SOCK_DGRAM, IPPROTO_ICMPV6 },
	};
	int r;

	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_EQ, AF_UNIX))) < 0)
		return r;
	for (size_t i = 0; i < sizeof(inet) / sizeof(inet[0]); i++)
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 3,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)inet[i].family),
		    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, (scmp_datum_t)inet[i].type),
		    SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)inet[i].proto))) < 0)
			return r;
	/* netlink: only the routing protocol (ip addr, getaddrinfo's
	 * AI_ADDRCONFIG, getifaddrs), which sees this sandbox's network
	 * namespace only; uevents, sock_diag, audit, netfilter... stay shut */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2,
	    SCMP_A0(SCMP_CMP_EQ, AF_NETLINK), SCMP_A2(SCMP_CMP_EQ, NETLINK_ROUTE))) < 0)
		return r;
	/* every other family answers "not supported", as a kernel built
	 * without it would; AF_VSOCK among them */
	for (int f = 0; f < FAMILY_LIMIT; f++) {
		if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
			continue;
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f))) < 0)
			return r;
	}
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
	    SCMP_A0(SCMP_CMP_GE, FAMILY_LIMIT))) < 0)
		return r;
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
	    SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
}

/* the allow list as a libseccomp context; NULL with *err set */
scmp_filter_ctx
filter_allow_list(int *err)
{
	scmp_filter_ctx ctx;
	int r;

	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	/* ~300 rules: a binary search instead of a linear chain. Only a
	 * hint: a libseccomp older than 2.5 builds the chain, still correct */
	(void)seccomp_attr_set(ctx, SCMP_FLTATR_CTL_OPTIMIZE, 2);
	if ((r = confine_add_names(ctx, allow, SCMP_ACT_ALLOW)) < 0 ||
	    (r = confine_add_names(ctx, absent, SCMP_ACT_ERRNO(ENOSYS))) < 0 ||
	    (r = rules_socket(ctx)) < 0)
		goto out;
	/* the mask only looks at the low 32 bits, as the kernel does */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_NS_FLAGS, 0))) < 0)
		goto out;
	for (size_t i = 0; i < sizeof(persona_ok) / sizeof(persona_ok[0]); i++)
		if ((r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(personality), 1,
		    SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffu, persona_ok[i]))) < 0)
			goto out;
	return ctx;
out:
	seccomp_release(ctx);
	*err = r;
	return NULL;
}

/* libseccomp cannot say "ioctl, except these commands" in one filter (an
 * unconditional allow swallows a conditional refusal, and one argument
 * cannot be compared twice in a rule). This second filter allows
 * everything and refuses only those; the kernel runs both filters and the
 * stricter answer wins. */
scmp_filter_ctx
filter_ioctl_refusals(int *err)
{
	scmp_filter_ctx ctx;
	int r;

	if ((ctx = seccomp_init(SCMP_ACT_ALLOW)) == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	/* TIOCSTI / TIOCLINUX push input into a terminal another process
	 * reads; the kernel compares the command's low 32 bits */
	if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCSTI))) < 0 ||
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
	    SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, TIOCLINUX))) < 0)
		goto out;
	return ctx;
out:
	seccomp_release(ctx);
	*err = r;
	return NULL;
}
