/* space snapshot: take a named snapshot of a running sandbox and wait for
 * its digest; space snapshot list: the sandbox's snapshots; space
 * snapshot rm: delete a named one */
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
	"       space snapshot rm SBX SNAPSHOT\n" \
	"  Archive the files of a running sandbox into the snapshot store and\n" \
	"  wait until the archive is ready (at most --wait S seconds, default\n" \
	"  60); prints the snapshot's id, name, state and digest.\n" \
	"  --name N    a name for it ([A-Za-z0-9_-], at most 64)\n" \
	"  --no-wait   return once the control plane accepted it\n" \
	"  list        every snapshot of the sandbox: the named ones and those\n" \
	"              taken by pause and move\n" \
	"  rm          delete a named snapshot (a sandbox holds a bounded number)"

static int
list_get(struct space_client *c, const char *sbx, struct space_answer *a)
{
	char path[SPACE_ID_MAX + 64];

	snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", sbx);
	if (cli_request("snapshot", c, "GET", path, NULL, a) != 0)
		return 1;
	if (!json_is_array(json_object_get(a->body, "snapshots")))
		return cli_fail("snapshot", "malformed answer: no \"snapshots\"");
	return 0;
}

/* snapshot list: the answer {"snapshots": [...]} as a table */
static void
print_list(const json_t *body, const char *arg)
{
	char size[32], gen[32];
	json_t *s;
	size_t i;

	printf("%-24s %-16s %-8s %4s %12s %-20s %s\n", "ID", "NAME", "STATE", "GEN",
	    "SIZE", "CREATED", "DIGEST");
	json_array_foreach(json_object_get(body, "snapshots"), i, s) {
		cli_jscalar(size, sizeof(size), json_object_get(s, "size"));
		cli_jscalar(gen, sizeof(gen), json_object_get(s, "generation"));
		printf("%-24s %-16s %-8s %4s %12s %-20s %s\n", cli_jstr(s, "id", "?"),
		    cli_jstr(s, "name", "-"), cli_jstr(s, "state", "?"), gen, size,
		    cli_jstr(s, "created_at", "-"), cli_jstr(s, "digest", "-"));
	}
}

/* --no-wait: the snapshot the control plane accepted */
static void
print_pending(const json_t *s, const char *id)
{
	printf("%s pending (not waiting)\n", id);
}

/* the snapshot once it is ready (or failed) */
static void
print_done(const json_t *s, const char *id)
{
	printf("%s %s %s %s\n", id, cli_jstr(s, "name", "-"), cli_jstr(s, "state", "?"),
	    cli_jstr(s, "digest", "-"));
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
	char path[2 * SPACE_ID_MAX + 64], id[SPACE_ID_MAX + 1], *end;
	const char *sbx, *name = NULL;
	json_t *body = NULL, *arr, *s, *found = NULL;
	long wait = WAIT_DEFAULT;
	time_t until;
	unsigned pause_ms = 0;
	size_t i;
	int ch, nowait = 0, json = 0, list = 0, ret = 1;

	space_answer_init(&a);
	if (argc >= 2 && strcmp(argv[1], "list") == 0) {
		list = 1;
		argc--, argv++;
	} else if (argc >= 2 && strcmp(argv[1], "rm") == 0) {
		list = 2;
		argc--, argv++;
	}
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
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
		default: return cli_usage("snapshot", USAGE, ch == 'h');
		}
	}
	if (list == 2) {
		/* rm SBX SNAPSHOT */
		if (argc - optind != 2 || !cli_sbx_ok("snapshot", argv[optind])) {
			if (argc - optind != 2)
				cli_usage("snapshot", USAGE, 0);
			return 2;
		}
		if (!id_valid(argv[optind + 1])) {
			fprintf(stderr, "space: snapshot: bad snapshot id '%s'\n", argv[optind + 1]);
			return 2;
		}
		if ((c = cli_client("snapshot", &api)) == NULL)
			goto out;
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots/%s", argv[optind],
		    argv[optind + 1]);
		if (cli_request("snapshot", c, "DELETE", path, NULL, &a) == 0) {
			printf("%s deleted\n", argv[optind + 1]);
			ret = 0;
		}
		goto out;
	}
	if ((sbx = cli_sbx_operand("snapshot", USAGE, argc - optind, argv + optind)) == NULL)
		return 2;
	if ((c = cli_client("snapshot", &api)) == NULL)
		goto out;
	if (list) {
		if (list_get(c, sbx, &a) == 0)
			ret = cli_print(json, a.body, print_list, NULL);
		goto out;
	}
	body = name ? json_pack("{s:s}", "name", name) : json_object();
	if (body == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/snapshots", sbx);
	if (cli_request("snapshot", c, "POST", path, body, &a) != 0)
		goto out;
	s = json_object_get(a.body, "snapshot");
	if (!json_is_object(s) || !id_valid(cli_jstr(s, "id", ""))) {
		ret = cli_fail("snapshot", "malformed answer: no snapshot id");
		goto out;
	}
	snprintf(id, sizeof(id), "%s", cli_jstr(s, "id", ""));
	if (nowait) {
		ret = cli_print(json, s, print_pending, id);
		goto out;
	}
	for (until = time(NULL) + wait;; cli_poll_sleep(&pause_ms)) {
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
	ret = cli_print(json, found, print_done, id);
	if (ret == 0 && strcmp(cli_jstr(found, "state", ""), "failed") == 0)
		ret = cli_fail("snapshot", "snapshot %s failed", id);
out:
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
