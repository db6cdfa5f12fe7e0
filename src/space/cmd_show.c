/* space show: one sandbox and its current execution */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

#define USAGE "SBX [--json]\n" \
	"  Show a sandbox: state, the generation, worker, substrate,\n" \
	"  activation and resident of its current execution, its timeouts and\n" \
	"  latest snapshot, and its history: every generation, oldest first,\n" \
	"  with its worker, state, and when it was created and ended (--json:\n" \
	"  the sandbox object, with \"execution\" and \"history\")."

int
cmd_show(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	static const char *const fields[] = {
		"generation", "worker", "substrate", "activation", "resident", "state", "endpoint"
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	char path[SPACE_ID_MAX + 32], v[256];
	const char *sbx;
	json_t *e, *h, *t;
	size_t i;
	int ch, json = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		if (cli_api_opt(&api, ch, optarg))
			continue;
		switch (ch) {
		case 'j': json = 1; break;
		case 'h': return cli_usage("show", USAGE, 1);
		default: return cli_usage("show", USAGE, 0);
		}
	}
	if (optind != argc - 1)
		return cli_usage("show", USAGE, 0);
	sbx = argv[optind];
	if (!id_valid(sbx)) {
		fprintf(stderr, "space: show: bad sandbox id '%s'\n", sbx);
		return 2;
	}
	if ((c = cli_client("show", &api)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", sbx);
	if (space_control(c, "GET", path, NULL, &a) < 0 || !space_answer_ok(&a)) {
		ret = cli_answer_fail("show", &a);
		goto out;
	}
	if (!json_is_object(a.body)) {
		ret = cli_fail("show", "malformed answer");
		goto out;
	}
	if (json) {
		ret = cli_print_json(a.body) == 0 ? 0 : 1;
		goto out;
	}
	printf("%-12s %s\n", "id", cli_jstr(a.body, "id", "?"));
	printf("%-12s %s\n", "state", cli_jstr(a.body, "state", "?"));
	printf("%-12s %s\n", "template", cli_jstr(a.body, "template", "-"));
	printf("%-12s %s\n", "created", cli_jstr(a.body, "created_at", "-"));
	e = json_object_get(a.body, "execution");
	if (!json_is_object(e))
		printf("%-12s %s\n", "execution", "none");
	else
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			cli_jscalar(v, sizeof(v), json_object_get(e, fields[i]));
			printf("%-12s %s\n", i == 5 ? "exec-state" : fields[i], v);
		}
	t = json_object_get(a.body, "timeouts");
	if (json_is_object(t)) {
		char idle[32], abs[32];
		cli_jscalar(idle, sizeof(idle), json_object_get(t, "idle"));
		cli_jscalar(abs, sizeof(abs), json_object_get(t, "absolute"));
		printf("%-12s idle %s s, absolute %s s, then %s (0: none)\n", "timeouts", idle,
		    abs, cli_jstr(t, "action", "pause"));
	}
	cli_jscalar(v, sizeof(v), json_object_get(a.body, "snapshot"));
	printf("%-12s %s\n", "snapshot", v);
	h = json_object_get(a.body, "history");
	if (json_is_array(h) && json_array_size(h) > 0) {
		printf("history:\n  %-4s %-14s %-9s %-20s %s\n", "GEN", "WORKER", "STATE",
		    "CREATED", "ENDED");
		json_array_foreach(h, i, e) {
			char g[32];
			cli_jscalar(g, sizeof(g), json_object_get(e, "generation"));
			printf("  %-4s %-14s %-9s %-20s %s\n", g, cli_jstr(e, "worker", "-"),
			    cli_jstr(e, "state", "-"), cli_jstr(e, "created_at", "-"),
			    cli_jstr(e, "ended_at", "-"));
		}
	}
	ret = fflush(stdout) != 0;
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
