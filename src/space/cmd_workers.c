/* space workers: GET /v1/workers (user endpoint, API key) */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "space.h"

#define USAGE "[--json]\n" \
	"  List the workers: id, endpoint, state, capacity and sandboxes placed."

int
cmd_workers(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *list, *w;
	size_t i;
	int ch, json = 0, ret = 1;
	char cap[32], n[32];

	space_answer_init(&a);
	optind = 0;
	while ((ch = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		if (cli_api_opt(&api, ch, optarg))
			continue;
		switch (ch) {
		case 'j': json = 1; break;
		case 'h': return cli_usage("workers", USAGE, 1);
		default: return cli_usage("workers", USAGE, 0);
		}
	}
	if (optind != argc)
		return cli_usage("workers", USAGE, 0);
	if ((c = cli_client("workers", &api)) == NULL)
		goto out;
	if (space_control(c, "GET", "/v1/workers", NULL, &a) < 0 || !space_answer_ok(&a)) {
		ret = cli_answer_fail("workers", &a);
		goto out;
	}
	list = json_object_get(a.body, "workers");
	if (!json_is_array(list)) {
		ret = cli_fail("workers", "malformed answer: no \"workers\" list");
		goto out;
	}
	if (json) {
		ret = cli_print_json(list) == 0 ? 0 : 1;
		goto out;
	}
	printf("%-12s %-28s %-10s %-8s %s\n", "ID", "ENDPOINT", "STATE", "CAPACITY", "SANDBOXES");
	json_array_foreach(list, i, w) {
		cli_jscalar(cap, sizeof(cap), json_object_get(w, "capacity"));
		cli_jscalar(n, sizeof(n), json_object_get(w, "sandboxes"));
		printf("%-12s %-28s %-10s %-8s %s\n", cli_jstr(w, "id", "?"),
		    cli_jstr(w, "endpoint", "-"), cli_jstr(w, "state", "?"), cap, n);
	}
	ret = fflush(stdout) != 0;
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
