/* space port: declared service ports of a sandbox (docs/network.md
 * "Service ports"): expose, ls, rm on /v1/sandboxes/{id}/ports, and url,
 * the address of a port at space-edge. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"

#define USAGE "expose SBX PORT [--public] | ls SBX | rm SBX PORT | url SBX PORT [--json]\n" \
	"  expose  declare PORT (1..65535) a service port of the sandbox: netgtw\n" \
	"          admits connections to it with a service capability\n" \
	"          (space route SBX --port PORT); --public: space-edge serves\n" \
	"          it without a credential. Again: changes --public.\n" \
	"  ls      the declared ports\n" \
	"  rm      undeclare PORT: netgtw refuses new connections to it\n" \
	"  url     PORT's address at space-edge: http://PORT-SBX.DOMAIN\n" \
	"          (SPACE_EDGE_DOMAIN, which space up writes)\n" \
	"  --json  print the answer object"

static int
port_arg(const char *s)
{
	char *end;
	long v = strtol(s, &end, 10);

	if (*s < '1' || *s > '9' || *end != '\0' || v < 1 || v > 65535) {
		fprintf(stderr, "space port: PORT must be an integer in 1..65535\n");
		return -1;
	}
	return (int)v;
}

static void
print_ports(json_t *body)
{
	size_t i;
	json_t *e, *l = json_object_get(body, "ports");

	if (json_array_size(l) == 0)
		printf("no declared ports\n");
	json_array_foreach(l, i, e)
		printf("%lld%s\n", (long long)json_integer_value(json_object_get(e, "port")),
		    json_is_true(json_object_get(e, "public")) ? " public" : "");
}

int
cmd_port(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "public", no_argument, NULL, 'p' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *body = NULL;
	const char *verb, *sbx, *domain;
	char path[SPACE_ID_MAX + 64];
	int ch, json = 0, pub = 0, port = 0, ret = 1, n;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		if (ch == 'p')
			pub = 1;
		else if (ch == 'j')
			json = 1;
		else
			return cli_usage("port", USAGE, ch == 'h');
	}
	n = argc - optind;
	if (n < 2)
		return cli_usage("port", USAGE, 0);
	verb = argv[optind];
	sbx = argv[optind + 1];
	if (strlen(sbx) > SPACE_ID_MAX) {
		fprintf(stderr, "space port: bad sandbox id\n");
		return 2;
	}
	if (strcmp(verb, "ls") == 0 ? n != 2 :
	    (strcmp(verb, "expose") == 0 || strcmp(verb, "rm") == 0 || strcmp(verb, "url") == 0) ?
	    n != 3 : 1)
		return cli_usage("port", USAGE, 0);
	if (n == 3 && (port = port_arg(argv[optind + 2])) < 0)
		return 2;
	if (strcmp(verb, "url") == 0) {
		/* no request: the edge routes by Host name */
		if ((domain = getenv("SPACE_EDGE_DOMAIN")) == NULL || domain[0] == '\0') {
			fprintf(stderr, "space port url: SPACE_EDGE_DOMAIN is not set (space up "
			    "writes it into its env file)\n");
			return 1;
		}
		printf("http://%d-%s.%s\n", port, sbx, domain);
		return fflush(stdout) != 0;
	}
	if ((c = cli_client("port", &api)) == NULL)
		goto out;
	if (strcmp(verb, "expose") == 0) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports", sbx);
		body = json_pack("{s:i,s:b}", "port", port, "public", pub);
		if (cli_request("port", c, "POST", path, body, &a) != 0)
			goto out;
	} else if (strcmp(verb, "rm") == 0) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports/%d", sbx, port);
		if (cli_request("port", c, "DELETE", path, NULL, &a) != 0)
			goto out;
	} else {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s/ports", sbx);
		if (cli_request("port", c, "GET", path, NULL, &a) != 0)
			goto out;
	}
	if (json)
		ret = cli_print_json(a.body) == 0 ? 0 : 1;
	else {
		print_ports(a.body);
		ret = fflush(stdout) != 0;
	}
out:
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
