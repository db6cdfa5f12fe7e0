/* space workers: GET /v1/workers (user endpoint, API key) */
#include <stdio.h>

#include <jansson.h>

#include "space.h"

#define USAGE "[--json]\n" \
	"  List the workers: id, endpoint, state, capacity and sandboxes placed."

static void
print_workers(const json_t *list, const char *arg)
{
	json_t *w;
	size_t i;
	char cap[32], n[32];

	printf("%-12s %-28s %-10s %-8s %s\n", "ID", "ENDPOINT", "STATE", "CAPACITY", "SANDBOXES");
	json_array_foreach(list, i, w) {
		cli_jscalar(cap, sizeof(cap), json_object_get(w, "capacity"));
		cli_jscalar(n, sizeof(n), json_object_get(w, "sandboxes"));
		printf("%-12s %-28s %-10s %-8s %s\n", cli_jstr(w, "id", "?"),
		    cli_jstr(w, "endpoint", "-"), cli_jstr(w, "state", "?"), cap, n);
	}
}

/* --json prints only the array */
static const struct cli_listing workers = {
	"workers", USAGE, "/v1/workers", "workers", 0, print_workers,
};

int
cmd_workers(int argc, char **argv)
{
	return cli_list_verb(&workers, argc, argv);
}
