/* What the serving process needs and nothing else; any other call fails
 * with EPERM. No open, no socket, no connect, no exec, no fork (clone only
 * with CLONE_THREAD), no kill (tgkill only of ourselves, for abort).
 *
 * Compiled to BPF at build time, not at every serving process's start:
 * gen/filter_gen.c exports it with libseccomp into a generated source and
 * serve.c (confine) hands that program to the kernel with the process's
 * own pid in place of SERVE_FILTER_SELF. Built at each start it was about
 * 1 ms of every create's path (docs/benchmarks.md, "The first exec's
 * set-up"). */
#include <sys/socket.h>

#include "confine.h"
#include "serve_filter.h"

scmp_filter_ctx
serve_filter(int *err)
{
	static const char *const allow[] = {
		"read", "write", "readv", "writev", "close", "poll", "ppoll",
		/* listen: only a socket it was given can listen (the one
		 * socket it makes is a socketpair's, which cannot); a
		 * prepared jail's serving process listens once claimed */
		"listen", "accept4", "recvfrom", "recvmsg", "sendto", "sendmsg", "shutdown",
		"getsockopt", "setsockopt", "fcntl", "fstat", "newfstatat", "lseek",
		/* a file body's descriptor passed up is checked (fd_file_passable) */
		"fstatfs",
		/* file bodies pass socket -> pipe -> socket (fsplice.h) */
		"pipe2", "splice",
		"mmap", "munmap", "mprotect", "mremap", "madvise", "brk",
		"futex", "set_robust_list", "rseq", "sched_yield", "getrandom",
		"rt_sigprocmask", "rt_sigreturn", "sigaltstack", "restart_syscall",
		"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
		"getpid", "gettid", "exit", "exit_group",
		/* read-only: pthread_getattr_np (ASan's threads) asks for it */
		"sched_getaffinity", NULL
	};
	scmp_filter_ctx ctx;
	int r = 0;

	if ((ctx = confine_threads_only(allow, &r)) == NULL) {
		*err = r;
		return NULL;
	}
	/* a socket of our own per operation, passed to the guest */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socketpair), 1,
		    SCMP_A0(SCMP_CMP_EQ, AF_UNIX));
	/* reading our own limits (new_limit NULL), never setting one */
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2,
		    SCMP_A0(SCMP_CMP_EQ, 0), SCMP_A2(SCMP_CMP_EQ, 0));
	if (r == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
		    SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)SERVE_FILTER_SELF));
	if (r < 0) {
		seccomp_release(ctx);
		*err = r;
		return NULL;
	}
	return ctx;
}
