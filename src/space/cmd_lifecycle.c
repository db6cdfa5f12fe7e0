/* space pause, space resume, space move: the lifecycle operations of
 * docs/protocol.md section 5. Each starts the operation (202), then by
 * default waits until the sandbox reaches the state the operation ends in,
 * so that a script can use the sandbox on the next line. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

#define WAIT_DEFAULT    60      /* seconds */
#define WAIT_MAX        3600

struct lc_verb {
	const char *name;
	const char *usage;
	const char *endpoint;   /* after /v1/sandboxes/{id}/ */
	const char *done;       /* the sandbox state the operation ends in */
	int worker_opt;         /* 0 none, 1 --worker (optional), 2 --to (required) */
};

static const struct lc_verb lc_pause = {
	"pause", "SBX [--no-wait] [--wait S] [--json]\n"
	"  Pause a running sandbox: its execution is retired and its files are\n"
	"  archived into a snapshot (processes are not kept). Waits until the\n"
	"  sandbox is paused (at most --wait S seconds, default 60).\n"
	"  --no-wait   return once the control plane accepted the operation\n"
	"  --json      print the sandbox object at the end",
	"pause", "paused", 0,
};
static const struct lc_verb lc_resume = {
	"resume", "SBX [--worker W] [--no-wait] [--wait S] [--json]\n"
	"  Resume a paused sandbox (or a failed one whose files its worker\n"
	"  archived) as a new generation, restoring its files;\n"
	"  --worker W chooses the worker (default: the previous one if it can).\n"
	"  Waits until the new execution serves (at most --wait S seconds,\n"
	"  default 60).\n"
	"  --no-wait   return once the control plane accepted the operation\n"
	"  --json      print the sandbox object at the end",
	"resume", "running", 1,
};
static const struct lc_verb lc_move = {
	"move", "SBX --to W [--no-wait] [--wait S] [--json]\n"
	"  Move a running sandbox to worker W: pause on its worker and resume on\n"
	"  W as the next generation, files kept. Capabilities of the old\n"
	"  generation are refused from then on; clients repair their routes.\n"
	"  Waits until the new execution serves on W (at most --wait S seconds,\n"
	"  default 60).\n"
	"  --no-wait   return once the control plane accepted the operation\n"
	"  --json      print the sandbox object at the end",
	"move", "running", 2,
};

/* --no-wait: what the control plane accepted */
static void
print_accepted(const json_t *op, const char *sbx)
{
	printf("%s %s (not waiting)\n", sbx, cli_jstr(op, "state", "accepted"));
}

static void
print_result(const json_t *s, const char *sbx)
{
	const json_t *e = json_object_get(s, "execution");
	char g[32];

	if (json_is_object(e)) {
		cli_jscalar(g, sizeof(g), json_object_get(e, "generation"));
		printf("%s %s: generation %s on %s (%s)\n", sbx, cli_jstr(s, "state", "?"), g,
		    cli_jstr(e, "worker", "-"), cli_jstr(e, "state", "-"));
	} else
		printf("%s %s\n", sbx, cli_jstr(s, "state", "?"));
}

static int
lifecycle(const struct lc_verb *v, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "worker", required_argument, NULL, 'w' },
		{ "to", required_argument, NULL, 't' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "wait", required_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	char path[SPACE_ID_MAX + 64], *end;
	const char *sbx, *worker = NULL;
	json_t *body = NULL, *s = NULL;
	long wait = WAIT_DEFAULT;
	int ch, nowait = 0, json = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'w':
		case 't':
			if ((ch == 'w' && v->worker_opt != 1) || (ch == 't' && v->worker_opt != 2))
				return cli_usage(v->name, v->usage, 0);
			if (!id_valid(optarg)) {
				fprintf(stderr, "space: %s: bad worker id '%s'\n", v->name, optarg);
				return 2;
			}
			worker = optarg;
			break;
		case 'n': nowait = 1; break;
		case 'W':
			errno = 0;
			wait = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || wait < 1 || wait > WAIT_MAX) {
				fprintf(stderr, "space: %s: --wait is 1..%d seconds\n", v->name, WAIT_MAX);
				return 2;
			}
			break;
		case 'j': json = 1; break;
		default: return cli_usage(v->name, v->usage, ch == 'h');
		}
	}
	if (v->worker_opt == 2 && worker == NULL)
		return cli_usage(v->name, v->usage, 0);
	if ((sbx = cli_sbx_operand(v->name, v->usage, argc - optind, argv + optind)) == NULL)
		return 2;
	if (worker)
		body = json_pack("{s:s}", v->worker_opt == 2 ? "to" : "worker", worker);
	else
		body = json_object();
	if (body == NULL || (c = cli_client(v->name, &api)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/%s", sbx, v->endpoint);
	/* 409 conflict names what is in the way: another operation holds
	 * the sandbox, or the operation does not apply */
	if (cli_request(v->name, c, "POST", path, body, &a) != 0)
		goto out;
	if (nowait) {
		ret = cli_print(json, a.body, print_accepted, sbx);
		goto out;
	}
	/* running means the new execution serves: for move on the
	 * destination, for resume on whichever worker was chosen */
	if (cli_wait_state(v->name, c, sbx, v->done,
	    v->worker_opt == 2 ? worker : NULL, (int)wait, &s) != 0)
		goto out;
	ret = cli_print(json, s, print_result, sbx);
out:
	json_decref(s);
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}

int
cmd_pause(int argc, char **argv)
{
	return lifecycle(&lc_pause, argc, argv);
}

int
cmd_resume(int argc, char **argv)
{
	return lifecycle(&lc_resume, argc, argv);
}

int
cmd_move(int argc, char **argv)
{
	return lifecycle(&lc_move, argc, argv);
}
