/* space list: the caller's sandboxes */
#include <stdio.h>

#include <jansson.h>

#include "space.h"

#define USAGE "[--json]\n" \
	"  List your sandboxes: id, state, worker and generation of the current\n" \
	"  execution (--json: the control plane's answer)."

static void
print_sandboxes(const json_t *list, const char *arg)
{
	json_t *s;
	size_t i;
	char gen[32];

	printf("%-32s %-10s %-12s %s\n", "ID", "STATE", "WORKER", "GEN");
	json_array_foreach(list, i, s) {
		json_t *e = json_object_get(s, "execution");
		cli_jscalar(gen, sizeof(gen), json_object_get(e, "generation"));
		printf("%-32s %-10s %-12s %s\n", cli_jstr(s, "id", "?"),
		    cli_jstr(s, "state", "?"), cli_jstr(e, "worker", "-"), gen);
	}
}

static const struct cli_listing sandboxes = {
	"list", USAGE, "/v1/sandboxes", "sandboxes", 1, print_sandboxes,
};

int
cmd_list(int argc, char **argv)
{
	return cli_list_verb(&sandboxes, argc, argv);
}
