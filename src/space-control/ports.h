/* Declared service ports of a sandbox (docs/network.md "Service ports"):
 * the stored form, what a worker receives, and the netgtw endpoint of a
 * worker. Used by api_ports.c, create, the install assignment and the
 * service routes (api_routes.c, and space-edge's routes). */
#ifndef SPACE_CONTROL_PORTS_H
#define SPACE_CONTROL_PORTS_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include "store.h"

/* The stored and API form: [{"port":N,"public":b}, ...], ascending by
 * port, at most SPACE_PORTS_MAX. ports_from_api: the create form (an
 * array of {"port":N,"public"?:b}), validated and sorted; NULL with why. */
char *ports_from_api(json_t *list, char *why, size_t why_cap);
/* spec (an install spec) with "ports":[N...] of the sandbox's declared
 * ports; *out NULL when the sandbox has none declared or the store keeps
 * none. Runs inside the caller's transaction; ports_declared and
 * ports_gateway run a transaction of their own (never call them in one) */
int ports_spec_with(struct store *s, const char *sandbox, const char *spec, char **out);
/* the port's declaration: 1 declared (*pub set), 0 not declared, <0 store
 * error (-ENOENT: no such sandbox); owner NULL: any */
int ports_declared(struct store *s, const char *owner, const char *sandbox, uint16_t port,
    bool *pub);
/* the worker's netgtw listener ("tcp://HOST:PORT") into out: 1, 0 when it
 * runs none, <0 store error */
int ports_gateway(struct store *s, const char *worker, char *out, size_t cap);
/* "tcp://HOST:PORT" as a worker may register it */
bool ports_gateway_valid(const char *s);
#endif
