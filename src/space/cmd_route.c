/* space route: ask the control plane for a route (endpoint + capability) */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "space.h"

#define USAGE "SBX [--access LIST | --port P --proto http|tcp] [--json]\n" \
	"  Get a route to a sandbox's current execution; prints the capability\n" \
	"  (--json: endpoint, capability, expires_at and the route identity).\n" \
	"  --access LIST    comma-separated from exec,fs:r,fs:w,pty,watch\n" \
	"                   (default exec,fs:r,fs:w)\n" \
	"  --port P --proto http|tcp   a service route to port P instead"

static json_t *
access_list(const char *list)
{
	json_t *a = json_array();
	char *dup = strdup(list), *save = NULL, *tok;

	if (a == NULL || dup == NULL)
		goto fail;
	for (tok = strtok_r(dup, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (strcmp(tok, "exec") && strcmp(tok, "fs:r") && strcmp(tok, "fs:w") &&
		    strcmp(tok, "pty") && strcmp(tok, "watch")) {
			fprintf(stderr, "space: route: unknown access '%s'\n", tok);
			goto fail;
		}
		json_array_append_new(a, json_string(tok));
	}
	if (json_array_size(a) == 0)
		goto fail;
	free(dup);
	return a;
fail:
	free(dup);
	json_decref(a);
	return NULL;
}

int
cmd_route(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "access", required_argument, NULL, 'a' },
		{ "port", required_argument, NULL, 'p' },
		{ "proto", required_argument, NULL, 'P' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	struct space_route r;
	const char *sbx, *access = NULL, *proto = NULL;
	long port = -1;
	char *end;
	json_t *req = NULL, *acc;
	int ch, json = 0, ret = 1;

	memset(&r, 0, sizeof(r));
	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'a': access = optarg; break;
		case 'p':
			errno = 0;
			port = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || port < 1 || port > 65535) {
				fprintf(stderr, "space: route: bad --port '%s'\n", optarg);
				return 2;
			}
			break;
		case 'P':
			if (strcmp(optarg, "http") && strcmp(optarg, "tcp")) {
				fprintf(stderr, "space: route: --proto is http or tcp\n");
				return 2;
			}
			proto = optarg;
			break;
		case 'j': json = 1; break;
		default: return cli_usage("route", USAGE, ch == 'h');
		}
	}
	/* --access for an exec/fs route, or --port and --proto for a service */
	if ((access && (port > 0 || proto)) || ((port > 0) != (proto != NULL)))
		return cli_usage("route", USAGE, 0);
	if ((sbx = cli_sbx_operand("route", USAGE, argc - optind, argv + optind)) == NULL)
		return 2;
	if (port > 0)
		req = json_pack("{s:I,s:s}", "port", (json_int_t)port, "proto", proto);
	else {
		if ((acc = access_list(access ? access : "exec,fs:r,fs:w")) == NULL)
			return 2;
		req = json_pack("{s:o}", "access", acc);
	}
	if (req == NULL)
		goto out;
	if ((c = cli_client("route", &api)) == NULL)
		goto out;
	if (space_route_get(c, sbx, req, &r, &a) < 0) {
		ret = cli_answer_fail("route", &a);
		goto out;
	}
	if (json)
		ret = cli_print_json(r.answer) == 0 ? 0 : 1;
	else
		ret = printf("%s\n", r.capability) < 0 || fflush(stdout) != 0;
out:
	space_route_free(&r);
	json_decref(req);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
