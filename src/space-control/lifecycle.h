/* Shared by the two halves of the lifecycle (lifecycle.c: executions,
 * lifecycle_ops.c: operations). Nothing else includes this. */
#ifndef SPACE_CONTROL_LIFECYCLE_H
#define SPACE_CONTROL_LIFECYCLE_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include "store.h"
#include "store_tx.h"

static inline bool
streq(const char *a, const char *b)
{
	return strcmp(a, b) == 0;
}

/* label values for metrics come from a table, never from a row */
const char *lc_kind_static(const char *kind);
/* pending, starting or serving */
bool lc_exec_active(const char *state);
void lc_cur_free(struct sbx_cur *c);
/* install spec {"template","resources","snapshot"} (snapshot NULL = none) */
char *lc_spec_json(const char *template_, const char *resources, const char *snapshot);
/* what an install spec or a resources text asks of a worker */
int lc_spec_want(const char *json, struct res *want);
/* the next generation of sandbox on a worker with its install assignment,
 * inside the caller's transaction; pinned: that worker or nothing; prefer:
 * that worker when it is live with room, else the scheduler's choice */
int lc_place_execution(struct store *s, const char *sandbox, const char *pinned,
    const char *prefer, const char *spec, const char **why, int64_t *gen_out,
    char worker_out[SPACE_ID_MAX + 1]);
/* the running and memory quota of the sandbox's key, for a resume (of
 * the asking key when the sandbox's was revoked: it then holds the
 * sandbox): 0, or -EDQUOT with *why and *retry_after (may be NULL) */
int lc_resume_quota(struct store *s, const char *sandbox, const char *resources,
    const char *asking, int *retry_after, const char **why);
#endif
