/* spaced-guest: PID 1 of an execution. main.c is the init process and the
 * control channel; every operation runs in a forked child that has become
 * the sandbox user (op.c dispatches to op_exec.c, op_fs.c). */
#ifndef SPACED_GUEST_H
#define SPACED_GUEST_H
#include <stdbool.h>
#include <stdint.h>
#include <stdnoreturn.h>
#include <sys/types.h>
#include <jansson.h>
#include "tplimage.h"

#define GUEST_USER_UID  1000
#define GUEST_USER_GID  1000
#define GUEST_HOME      "/home/user"

/* template.c: the template's defaults (TPL_META_PATH); absent for host */
extern struct tpl_meta guest_tpl;
int  guest_template_load(void);         /* 0 (also when absent) or -errno */

struct guest_limits {
	unsigned nproc, nofile, fsize_mb;
};

/* confine.c: rlimits, capabilities, no_new_privs, seccomp for PID 1 and
 * everything it starts; 0 or -errno */
int confine_guest(const struct guest_limits *l);
/* filter.c: the seccomp allow list; 0 or -errno */
int filter_install(void);
/* in an operation child, before anything of the request is looked at */
int become_user(void);

/* op.c: serve operations on fd (REQUEST then the op's frames), more than
 * one when they are file operations the bridge sends on a kept channel */
void op_serve(int fd);
/* set by an operation that left its socket mid-frame (the next REQUEST
 * could not be told apart): the child then ends after it */
extern bool guest_op_broken;

/* helpers shared by the operations */
int send_error(int fd, int status, const char *code, const char *message);
int send_errno(int fd, int err, const char *what);      /* err > 0 */
int send_result(int fd, json_t *result);                /* steals result */
/* the same with a descriptor passed along (pass_fd >= 0) */
int send_result_fd(int fd, json_t *result, int pass_fd);
/* a path argument: string, no NUL, shorter than SPACE_PATH_MAX; NULL if not */
const char *arg_path(json_t *args, const char *key);
/* args must hold only keys from allowed (NULL-terminated) */
int args_only(json_t *args, const char *const *allowed, const char **bad);

/* op_exec.c: the environment of a command (defaults, TERM if given, then
 * the request's env); *out NULL-terminated, free with env_free */
int env_build(json_t *env, const char *term, char ***out, const char **why);
void env_free(char **envp);

/* procman.c: the process manager, a long-lived child of PID 1 running as
 * the sandbox user. It owns every process started by proc.start (their
 * parent), so they outlive the connection that started them. It receives
 * operations on the SOCK_SEQPACKET socket fd: one message each, the
 * REQUEST payload with the client's socket as SCM_RIGHTS. Never returns. */
noreturn void procman_main(int fd);
/* the largest REQUEST an operation child forwards to the manager */
#define PROCMAN_MSG_MAX (192u << 10)
/* op.c: PID 1's end of the manager's socket, inherited by operation children */
extern int guest_procman_fd;

void op_exec(int fd, json_t *args);
void op_fs_watch(int fd, json_t *args);
void op_fs_read(int fd, json_t *args);
void op_fs_write(int fd, json_t *args);
void op_fs_list(int fd, json_t *args);
void op_fs_stat(int fd, json_t *args);
void op_fs_mkdir(int fd, json_t *args);
void op_fs_remove(int fd, json_t *args);
void op_fs_rename(int fd, json_t *args);
#endif
