/* space list: the caller's sandboxes */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "space.h"

#define USAGE "[--json]\n" \
	"  List your sandboxes: id, state, worker and generation of the current\n" \
	"  execution (--json: the control plane's answer)."

int
cmd_list(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *list, *s;
	size_t i;
	int ch, json = 0, ret = 1;
	char gen[32];

	space_answer_init(&a);
	optind = 0;
	while ((ch = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		if (cli_api_opt(&api, ch, optarg))
			continue;
		switch (ch) {
		case 'j': json = 1; break;
		case 'h': return cli_usage("list", USAGE, 1);
		default: return cli_usage("list", USAGE, 0);
		}
	}
	if (optind != argc)
		return cli_usage("list", USAGE, 0);
	if ((c = cli_client("list", &api)) == NULL)
		goto out;
	if (space_control(c, "GET", "/v1/sandboxes", NULL, &a) < 0 || !space_answer_ok(&a)) {
		ret = cli_answer_fail("list", &a);
		goto out;
	}
	list = json_object_get(a.body, "sandboxes");
	if (!json_is_array(list)) {
		ret = cli_fail("list", "malformed answer: no \"sandboxes\" list");
		goto out;
	}
	if (json) {
		ret = cli_print_json(a.body) == 0 ? 0 : 1;
		goto out;
	}
	printf("%-32s %-10s %-12s %s\n", "ID", "STATE", "WORKER", "GEN");
	json_array_foreach(list, i, s) {
		json_t *e = json_object_get(s, "execution");
		cli_jscalar(gen, sizeof(gen), json_object_get(e, "generation"));
		printf("%-32s %-10s %-12s %s\n", cli_jstr(s, "id", "?"),
		    cli_jstr(s, "state", "?"), cli_jstr(e, "worker", "-"), gen);
	}
	ret = fflush(stdout) != 0;
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
