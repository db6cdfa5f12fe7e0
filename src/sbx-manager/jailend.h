#ifndef SBXMGR_JAILEND_H
#define SBXMGR_JAILEND_H
#include <stdbool.h>

/* end the kept jail of the execution in run_dir, if one waits there
 * without a bridge (jailend.c); nothing otherwise */
void jail_end_dir(const char *run_dir);
/* does a jail of the execution in run_dir wait there for its next bridge
 * (RUNDIR/jail.sock left by a bridge that did not stop it)? */
bool jail_kept(const char *run_dir);
/* the pid of the guest listening on RUNDIR/jail.sock (a jail that is not
 * its bridge's child: a kept or a claimed prepared one), or -1 */
pid_t jail_guest(const char *run_dir);
#endif
