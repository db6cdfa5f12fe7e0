/* space snapshot: take a named snapshot of a running sandbox and wait for
 * its digest; space snapshot list: the sandbox's snapshots */
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

#define WAIT_DEFAULT    60
#define WAIT_MAX        3600
#define USAGE "SBX [--name N] [--no-wait] [--wait S] [--json]\n" \
	"       space snapshot list SBX [--json]\n" \
	"  Archive the files of a running sandbox into the snapshot store and\n" \
	"  wait until the archive is ready (at most --wait S seconds, default\n" \
	"  60); prints the snapshot's id, name, state and digest.\n" \
	"  --name N    a name for it ([A-Za-z0-9_-], at most 64)\n" \
	"  --no-wait   return once the control plane accepted it\n" \
	"  list        every snapshot of the sandbox: the named ones and those\n" \
	"              taken by pause and move"

static int
list_get(struct space_client *c, const char *sbx, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 64];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", sbx);
	if (space_control(c, "GET", path, NULL, a) < 0 || !space_answer_ok(a))
		return cli_answer_fail("snapshot", a);
	if (!json_is_array(json_object_get(a->body, "snapshots")))
		return cli_fail("snapshot", "malformed answer: no \"snapshots\"");
	return 0;
}

static void
print_snap(const json_t *s)
{
	char size[32], gen[32];

	cli_jscalar(size, sizeof(size), json_object_get(s, "size"));
	cli_jscalar(gen, sizeof(gen), json_object_get(s, "generation"));
	printf("%-24s %-16s %-8s %4s %12s %-20s %s\n", cli_jstr(s, "id", "?"),
	    cli_jstr(s, "name", "-"), cli_jstr(s, "state", "?"), gen, size,
	    cli_jstr(s, "created_at", "-"), cli_jstr(s, "digest", "-"));
}

int
cmd_snapshot(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "name", required_argument, NULL, 'N' },
		{ "no-wait", no_argument, NULL, 'n' },
		{ "wait", required_argument, NULL, 'W' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	char path[SPACE_ID_MAX + 64], id[SPACE_ID_MAX + 1], *end;
	const char *sbx, *name = NULL;
	json_t *body = NULL, *arr, *s, *found = NULL;
	long wait = WAIT_DEFAULT;
	time_t until;
	size_t i;
	int ch, nowait = 0, json = 0, list = 0, ret = 1;

	space_answer_init(&a);
	if (argc >= 2 && strcmp(argv[1], "list") == 0) {
		list = 1;
		argc--, argv++;
	}
	optind = 0;
	while ((ch = getopt_long(argc, argv, "hv", lo, NULL)) != -1) {
		if (cli_api_opt(&api, ch, optarg))
			continue;
		switch (ch) {
		case 'N':
			if (list || !id_valid(optarg)) {
				fprintf(stderr, "space: snapshot: bad --name '%s' ([A-Za-z0-9_-], "
				    "at most %d)\n", optarg, SPACE_ID_MAX);
				return 2;
			}
			name = optarg;
			break;
		case 'n': nowait = 1; break;
		case 'W':
			errno = 0;
			wait = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || wait < 1 || wait > WAIT_MAX) {
				fprintf(stderr, "space: snapshot: --wait is 1..%d seconds\n", WAIT_MAX);
				return 2;
			}
			break;
		case 'j': json = 1; break;
		case 'h': return cli_usage("snapshot", USAGE, 1);
		default: return cli_usage("snapshot", USAGE, 0);
		}
	}
	if (optind != argc - 1)
		return cli_usage("snapshot", USAGE, 0);
	sbx = argv[optind];
	if (!id_valid(sbx)) {
		fprintf(stderr, "space: snapshot: bad sandbox id '%s'\n", sbx);
		return 2;
	}
	if ((c = cli_client("snapshot", &api)) == NULL)
		goto out;
	if (list) {
		if (list_get(c, sbx, &a) != 0)
			goto out;
		if (json)
			ret = cli_print_json(a.body) != 0;
		else {
			printf("%-24s %-16s %-8s %4s %12s %-20s %s\n", "ID", "NAME", "STATE", "GEN",
			    "SIZE", "CREATED", "DIGEST");
			json_array_foreach(json_object_get(a.body, "snapshots"), i, s)
				print_snap(s);
			ret = fflush(stdout) != 0;
		}
		goto out;
	}
	body = name ? json_pack("{s:s}", "name", name) : json_object();
	if (body == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", sbx);
	if (space_control(c, "POST", path, body, &a) < 0 || !space_answer_ok(&a)) {
		ret = cli_answer_fail("snapshot", &a);
		goto out;
	}
	s = json_object_get(a.body, "snapshot");
	if (!json_is_object(s) || !id_valid(cli_jstr(s, "id", ""))) {
		ret = cli_fail("snapshot", "malformed answer: no snapshot id");
		goto out;
	}
	snprintf(id, sizeof(id), "%s", cli_jstr(s, "id", ""));
	if (nowait) {
		if (json)
			ret = cli_print_json(s) != 0;
		else {
			printf("%s pending (not waiting)\n", id);
			ret = fflush(stdout) != 0;
		}
		goto out;
	}
	for (until = time(NULL) + wait;; usleep(200 * 1000)) {
		if (list_get(c, sbx, &a) != 0)
			goto out;
		arr = json_object_get(a.body, "snapshots");
		found = NULL;
		json_array_foreach(arr, i, s)
			if (strcmp(cli_jstr(s, "id", ""), id) == 0)
				found = s;
		if (found && strcmp(cli_jstr(found, "state", "pending"), "pending") != 0)
			break;
		if (time(NULL) >= until) {
			ret = cli_fail("snapshot", "snapshot %s is still pending after %ld s", id, wait);
			goto out;
		}
	}
	if (json)
		ret = cli_print_json(found) != 0;
	else {
		printf("%s %s %s %s\n", id, cli_jstr(found, "name", "-"),
		    cli_jstr(found, "state", "?"), cli_jstr(found, "digest", "-"));
		ret = fflush(stdout) != 0;
	}
	if (ret == 0 && strcmp(cli_jstr(found, "state", ""), "failed") == 0)
		ret = cli_fail("snapshot", "snapshot %s failed", id);
out:
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
