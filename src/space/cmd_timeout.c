/* space timeout: a sandbox's idle and absolute timeouts and what happens
 * when one passes. The control plane's PUT replaces all three; fields not
 * given here keep their current values. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"

#define TIMEOUT_MAX     (366L * 24 * 3600)
#define USAGE "SBX [--idle S] [--absolute S] [--action pause|kill] [--json]\n" \
	"  Set the sandbox's timeouts (0: none). --idle counts from the last\n" \
	"  route issued for the sandbox, --absolute from the start of its\n" \
	"  current execution; when one passes the sandbox is paused (default)\n" \
	"  or killed. Options left out keep their current values; without any,\n" \
	"  prints the current ones."

static int
secs(const char *s, long *out)
{
	char *end;

	errno = 0;
	*out = strtol(s, &end, 10);
	if (errno || *end || end == s || *out < 0 || *out > TIMEOUT_MAX) {
		fprintf(stderr, "space: timeout: bad number of seconds '%s' (0..%ld)\n", s,
		    TIMEOUT_MAX);
		return -1;
	}
	return 0;
}

static void
print_timeouts(const json_t *t, const char *sbx)
{
	char idle[32], abs[32];

	cli_jscalar(idle, sizeof(idle), json_object_get(t, "idle"));
	cli_jscalar(abs, sizeof(abs), json_object_get(t, "absolute"));
	printf("%s timeouts: idle %s s, absolute %s s, action %s (0: none)\n", sbx, idle, abs,
	    cli_jstr(t, "action", "pause"));
}

int
cmd_timeout(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "idle", required_argument, NULL, 'i' },
		{ "absolute", required_argument, NULL, 'a' },
		{ "action", required_argument, NULL, 'A' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	char path[SPACE_ID_MAX + 64];
	const char *sbx, *action = NULL;
	long idle = -1, absolute = -1;
	json_t *s = NULL, *t, *body = NULL, *res;
	int ch, json = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'i': if (secs(optarg, &idle) < 0) return 2; break;
		case 'a': if (secs(optarg, &absolute) < 0) return 2; break;
		case 'A':
			if (strcmp(optarg, "pause") && strcmp(optarg, "kill")) {
				fprintf(stderr, "space: timeout: --action is pause or kill\n");
				return 2;
			}
			action = optarg;
			break;
		case 'j': json = 1; break;
		default: return cli_usage("timeout", USAGE, ch == 'h');
		}
	}
	if ((sbx = cli_sbx_operand("timeout", USAGE, argc - optind, argv + optind)) == NULL)
		return 2;
	if ((c = cli_client("timeout", &api)) == NULL)
		goto out;
	if (cli_sandbox_get("timeout", c, sbx, &s) != 0)
		goto out;
	t = json_object_get(s, "timeouts");
	res = s;
	if (idle >= 0 || absolute >= 0 || action) {
		body = json_pack("{s:I,s:I,s:s}",
		    "idle", (json_int_t)(idle >= 0 ? idle :
		    json_integer_value(json_object_get(t, "idle"))),
		    "absolute", (json_int_t)(absolute >= 0 ? absolute :
		    json_integer_value(json_object_get(t, "absolute"))),
		    "action", action ? action : cli_jstr(t, "action", "pause"));
		if (body == NULL)
			goto out;
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/timeouts", sbx);
		if (cli_request("timeout", c, "PUT", path, body, &a) != 0)
			goto out;
		res = a.body;
	}
	ret = cli_print(json, json_object_get(res, "timeouts"), print_timeouts, sbx);
out:
	json_decref(s);
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
