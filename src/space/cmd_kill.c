/* space kill: DELETE /v1/sandboxes/{id} */
#include <getopt.h>
#include <stdio.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"

#define USAGE "SBX\n" \
	"  Kill a sandbox: its execution is retired and it cannot be resumed;\n" \
	"  prints the sandbox's new state."

int
cmd_kill(int argc, char **argv)
{
	static const struct option lo[] = { CLI_API_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	char path[SPACE_ID_MAX + 32];
	const char *sbx;
	int ch, ret = 1;

	space_answer_init(&a);
	optind = 0;
	if ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1)
		return cli_usage("kill", USAGE, ch == 'h');
	if ((sbx = cli_sbx_operand("kill", USAGE, argc - optind, argv + optind)) == NULL)
		return 2;
	if ((c = cli_client("kill", &api)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", sbx);
	if (cli_request("kill", c, "DELETE", path, NULL, &a) != 0)
		goto out;
	printf("%s %s\n", sbx, cli_jstr(a.body, "state", "killed"));
	ret = fflush(stdout) != 0;
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
