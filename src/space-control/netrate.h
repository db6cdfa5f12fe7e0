#ifndef SPACE_CONTROL_NETRATE_H
#define SPACE_CONTROL_NETRATE_H
#include <stdbool.h>

struct ctl;
/* one network change of sandbox by principal (netrate.c): true when its
 * allowance has one; false, and the seconds until it has, when not */
bool netrate_take(const struct ctl *c, const char *principal, const char *sandbox,
    int *retry_after);
#endif
