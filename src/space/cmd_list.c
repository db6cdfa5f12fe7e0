/* space list: the caller's sandboxes */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

#define USAGE "[--all] [--json]\n" \
	"  List your sandboxes that are not killed (--all: those too): id,\n" \
	"  state, worker and generation of the current execution (--json: the\n" \
	"  control plane's sandbox objects, {\"sandboxes\":[...]})."

/* pages the control plane is asked for at most: 1,000 sandboxes each */
#define LIST_PAGES_MAX 1000

static void
print_sandboxes(const json_t *list, const char *arg)
{
	json_t *s;
	size_t i;
	char gen[32];

	(void)arg;
	printf("%-32s %-10s %-12s %s\n", "ID", "STATE", "WORKER", "GEN");
	json_array_foreach(list, i, s) {
		json_t *e = json_object_get(s, "execution");
		cli_jscalar(gen, sizeof(gen), json_object_get(e, "generation"));
		printf("%-32s %-10s %-12s %s\n", cli_jstr(s, "id", "?"),
		    cli_jstr(s, "state", "?"), cli_jstr(e, "worker", "-"), gen);
	}
}

int
cmd_list(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "all", no_argument, NULL, 'a' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *all = NULL, *out;
	int ch, json = 0, every = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		case 'a': every = 1; break;
		default: return cli_usage("list", USAGE, ch == 'h');
		}
	}
	if (optind != argc)
		return cli_usage("list", USAGE, 0);
	if ((c = cli_client("list", &api)) == NULL)
		goto out;
	/* page after page: the control plane answers at most 1,000 at once */
	if (space_sandboxes(c, !every, LIST_PAGES_MAX, &all, &a) < 0) {
		ret = cli_answer_fail("list", &a);
		goto out;
	}
	if (json) {
		out = json_pack("{s:O}", "sandboxes", all);
		ret = cli_print(1, out, NULL, NULL);
		json_decref(out);
	} else
		ret = cli_print(0, all, print_sandboxes, NULL);
out:
	json_decref(all);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
