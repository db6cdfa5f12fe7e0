#ifndef SPACE_CONTROL_NETRATE_H
#define SPACE_CONTROL_NETRATE_H
#include <stdbool.h>

/* one network change of sandbox by the request's principal (netrate.c):
 * false when its allowance has one; when it has none left, the request
 * is answered 429 rate_limited with Retry-After, and true */
struct req;
bool netrate_refused(struct req *r, const char *sandbox);
#endif
