/* space show: one sandbox and its current execution */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "space.h"

#define USAGE "SBX [--json]\n" \
	"  Show a sandbox: state, the generation, worker, substrate,\n" \
	"  activation and resident of its current execution, its timeouts and\n" \
	"  latest snapshot, the requests the workers refused for it (per\n" \
	"  reason), and its history: every generation, oldest first,\n" \
	"  with its worker, state, when it was created and ended, and why it\n" \
	"  failed when it did (--json:\n" \
	"  the sandbox object, with \"execution\" and \"history\")."

static void
print_sandbox(const json_t *s, const char *arg)
{
	static const char *const fields[] = {
		"generation", "worker", "substrate", "activation", "resident", "state", "endpoint"
	};
	char v[256];
	json_t *e, *h, *t;
	size_t i;

	printf("%-12s %s\n", "id", cli_jstr(s, "id", "?"));
	printf("%-12s %s\n", "state", cli_jstr(s, "state", "?"));
	printf("%-12s %s\n", "template", cli_jstr(s, "template", "-"));
	printf("%-12s %s\n", "created", cli_jstr(s, "created_at", "-"));
	e = json_object_get(s, "execution");
	if (!json_is_object(e))
		printf("%-12s %s\n", "execution", "none");
	else
		for (i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
			cli_jscalar(v, sizeof(v), json_object_get(e, fields[i]));
			printf("%-12s %s\n", i == 5 ? "exec-state" : fields[i], v);
		}
	if (json_is_object(e) && json_is_string(json_object_get(e, "error")))
		printf("%-12s %s\n", "exec-error", cli_jstr(e, "error", "-"));
	t = json_object_get(s, "timeouts");
	if (json_is_object(t)) {
		char idle[32], abs[32];
		cli_jscalar(idle, sizeof(idle), json_object_get(t, "idle"));
		cli_jscalar(abs, sizeof(abs), json_object_get(t, "absolute"));
		printf("%-12s idle %s s, absolute %s s, then %s (0: none)\n", "timeouts", idle,
		    abs, cli_jstr(t, "action", "pause"));
	}
	cli_jscalar(v, sizeof(v), json_object_get(s, "snapshot"));
	printf("%-12s %s\n", "snapshot", v);
	/* the requests the workers refused for it (docs/console.md) */
	t = json_object_get(s, "refusals");
	if (json_is_object(t)) {
		char rr[32], dn[32], ex[32];
		cli_jscalar(rr, sizeof(rr), json_object_get(t, "refresh_route"));
		cli_jscalar(dn, sizeof(dn), json_object_get(t, "deny"));
		cli_jscalar(ex, sizeof(ex), json_object_get(t, "expired"));
		printf("%-12s refresh_route %s, deny %s, expired %s\n", "refused", rr, dn, ex);
	}
	h = json_object_get(s, "history");
	if (json_is_array(h) && json_array_size(h) > 0) {
		printf("history:\n  %-4s %-14s %-9s %-20s %s\n", "GEN", "WORKER", "STATE",
		    "CREATED", "ENDED");
		json_array_foreach(h, i, e) {
			char g[32];
			cli_jscalar(g, sizeof(g), json_object_get(e, "generation"));
			printf("  %-4s %-14s %-9s %-20s %s\n", g, cli_jstr(e, "worker", "-"),
			    cli_jstr(e, "state", "-"), cli_jstr(e, "created_at", "-"),
			    cli_jstr(e, "ended_at", "-"));
			if (json_is_string(json_object_get(e, "error")))
				printf("       error: %s\n", cli_jstr(e, "error", "-"));
		}
	}
}

int
cmd_show(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	const char *sbx;
	json_t *s = NULL;
	int ch, json = 0, ret = 1;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		default: return cli_usage("show", USAGE, ch == 'h');
		}
	}
	if ((sbx = cli_sbx_operand("show", USAGE, argc - optind, argv + optind)) == NULL)
		return 2;
	if ((c = cli_client("show", &api)) == NULL)
		return 1;
	if (cli_sandbox_get("show", c, sbx, &s) == 0)
		ret = cli_print(json, s, print_sandbox, NULL);
	json_decref(s);
	space_client_free(c);
	return ret;
}
