/* Resource limits of one execution: cgroup v1 (one hierarchy per
 * controller, the hybrid layout of our machines) or v2 (unified). */
#ifndef SPACED_HOST_CGROUP_H
#define SPACED_HOST_CGROUP_H
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum { CG_MEMORY, CG_PIDS, CG_CPU, CG__N };

struct cgroup {
	bool v2;
	char path[CG__N][1024];          /* v1: one per controller; v2: path[0] only */
	bool made[CG__N];
};

struct cgroup_limits {
	unsigned memory_mb, pids, cpu_percent;  /* cpu_percent 0: no quota */
};

/* create space/<name> under this process's own cgroup of each controller
 * and write the limits; 0 or -errno */
int cgroup_create(struct cgroup *cg, const char *name, const struct cgroup_limits *l);
int cgroup_adopt(struct cgroup *cg, const char *name);
int cgroup_add(const struct cgroup *cg, pid_t pid);
/* write the limits of a live group (a prepared jail's, at its claim) */
int cgroup_set_limits(const struct cgroup *cg, const struct cgroup_limits *l);
/* the CPU quota alone (percent of one CPU; 0: none); 0 or -errno */
int cgroup_set_cpu(const struct cgroup *cg, unsigned cpu_percent);
/* rename the group (same parent) to name; its processes stay in it */
int cgroup_rename(struct cgroup *cg, const char *name);
/* every process in the group back to nice 0 and the default I/O
 * priority (a prepared jail was made at a lower one) */
void cgroup_renice(const struct cgroup *cg);
int cgroup_oom_kills(const struct cgroup *cg, uint64_t *n);
/* the OOM kill count in the text of memory.events (v2) or
 * memory.oom_control (v1); 0 or -ENOTSUP */
int cgroup_oom_parse(const char *buf, uint64_t *n);
/* a read-only descriptor of that file (read again from offset 0 for a
 * fresh count), or -errno */
int cgroup_oom_fd(const struct cgroup *cg);
/* kill what is left inside, then remove the directories */
void cgroup_destroy(struct cgroup *cg);
#endif
