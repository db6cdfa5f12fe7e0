/* space create: POST /v1/sandboxes, then wait until the sandbox runs */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

#define CREATE_WAIT_S   60
#define CREATE_POST_WAIT_S 20     /* each wait in the control plane */
#define USAGE "[--worker W] [--template T] [--memory-mb N] [--no-wait] [--json]\n" \
	"       [--no-internet] [--allow-out CIDR|HOST]... [--deny-out CIDR|HOST]...\n" \
	"  Create a sandbox and wait (up to 60 s) until it runs; prints its id\n" \
	"  (or the sandbox object with --json).\n" \
	"  --worker W       place it on worker W\n" \
	"  --template T     template (default: the control plane's, \"host\")\n" \
	"  --memory-mb N    memory limit in MiB\n" \
	"  --no-wait        return as soon as the control plane accepted it\n" \
	"  --no-internet, --allow-out, --deny-out  its egress policy (space network -h)\n" \
	"  --json           print the sandbox object\n" \
	"  --api-url URL, --api-key KEY  override SPACE_API_URL, SPACE_API_KEY"

/* the create waited (up to CREATE_POST_WAIT_S) in the control plane;
 * a sandbox still creating then is waited for with GET ?until=running
 * (answered as soon as it runs), up to CREATE_WAIT_S in all */
static int
wait_running(struct space_client *c, const char *id, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 64];
	struct timespec t0, now;
	const char *state;

	snprintf(path, sizeof(path), "/v1/sandboxes/%s?until=running&wait=%d", id,
	    CREATE_POST_WAIT_S);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		state = cli_jstr(a->body, "state", "");
		if (strcmp(state, "running") == 0)
			return 0;
		if (strcmp(state, "creating") != 0 && strcmp(state, "resuming") != 0)
			return cli_fail("create", "sandbox %s is %s, not running", id, state);
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - t0.tv_sec >= CREATE_WAIT_S - CREATE_POST_WAIT_S)
			return cli_fail("create", "sandbox %s still %s after %d s", id, state,
			    CREATE_WAIT_S);
		if (cli_request("create", c, "GET", path, NULL, a) != 0)
			return 1;
	}
}

int
cmd_create(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "worker", required_argument, NULL, 'w' },
		{ "template", required_argument, NULL, 't' },
		{ "memory-mb", required_argument, NULL, 'm' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		CLI_NET_LONGOPTS,
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	const char *worker = NULL, *tmpl = NULL, *id;
	long mem = -1;
	int ch, nowait = 0, json = 0, ret = 1;
	char *end;
	json_t *req = NULL, *net = NULL;
	char idbuf[SPACE_ID_MAX + 1];

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'w': worker = optarg; break;
		case 't': tmpl = optarg; break;
		case 'm':
			errno = 0;
			mem = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || mem <= 0 || mem > (1L << 22)) {
				fprintf(stderr, "space: create: bad --memory-mb '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n': nowait = 1; break;
		case 'j': json = 1; break;
		default:
			if (cli_net_opt(ch, optarg, &net) == 1)
				break;
			json_decref(net);
			return cli_usage("create", USAGE, ch == 'h');
		}
	}
	if (optind != argc)
		return cli_usage("create", USAGE, 0);
	if (worker && !id_valid(worker)) {
		fprintf(stderr, "space: create: bad worker id '%s'\n", worker);
		return 2;
	}
	if ((c = cli_client("create", &api)) == NULL)
		goto out;
	if ((req = json_object()) == NULL)
		goto out;
	if (worker)
		json_object_set_new(req, "worker", json_string(worker));
	if (tmpl)
		json_object_set_new(req, "template", json_string(tmpl));
	if (net) {
		json_object_set_new(req, "network", net);
		net = NULL;
	}
	if (mem > 0)
		json_object_set_new(req, "resources", json_pack("{s:I}", "memory_mb",
		    (json_int_t)mem));
	if (!nowait)
		json_object_set_new(req, "wait", json_integer(CREATE_POST_WAIT_S));
	if (cli_request("create", c, "POST", "/v1/sandboxes", req, &a) != 0)
		goto out;
	id = cli_jstr(a.body, "id", NULL);
	if (id == NULL || !id_valid(id)) {
		ret = cli_fail("create", "the control plane answered without a valid sandbox id");
		goto out;
	}
	snprintf(idbuf, sizeof(idbuf), "%s", id);
	if (!nowait && wait_running(c, idbuf, &a) != 0) {
		fprintf(stderr, "space: create: the sandbox is %s (space show %s; space kill %s)\n",
		    idbuf, idbuf, idbuf);
		goto out;
	}
	if (json)
		ret = cli_print_json(a.body) == 0 ? 0 : 1;
	else
		ret = printf("%s\n", idbuf) < 0 || fflush(stdout) != 0;
out:
	json_decref(net);
	json_decref(req);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
