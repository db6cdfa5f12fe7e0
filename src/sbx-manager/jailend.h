#ifndef SBXMGR_JAILEND_H
#define SBXMGR_JAILEND_H
/* end the kept jail of the execution in run_dir, if one waits there
 * without a bridge (jailend.c); nothing otherwise */
void jail_end_dir(const char *run_dir);
#endif
