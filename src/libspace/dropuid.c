#include "dropuid.h"

#include <grp.h>
#include <signal.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <unistd.h>

const char *
drop_to_uid(uid_t uid, gid_t gid, pid_t parent)
{
	cap_t none;
	int c;

	for (c = 0; prctl(PR_CAPBSET_READ, c, 0, 0, 0) >= 0; c++)
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			return "drop the capability bounding set";
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return "clear ambient capabilities";
	if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
		return "change to the unprivileged uid";
	/* the uid change cleared them; make it explicit and verified */
	if ((none = cap_init()) == NULL)
		return "clear capabilities";
	c = cap_set_proc(none);
	cap_free(none);
	if (c < 0)
		return "clear capabilities";
	if (getuid() != uid || geteuid() != uid || getgid() != gid || getegid() != gid ||
	    setresuid(0, 0, 0) == 0)
		return "the unprivileged uid did not stick";
	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != parent)
		return "parent death signal";
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return "no_new_privs";
	return NULL;
}
