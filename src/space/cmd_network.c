/* space network: show or change a sandbox's egress policy
 * (GET / POST /v1/sandboxes/{id}/network, docs/network.md); also the
 * options that space create shares (cli_net_opt). */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"

#define USAGE "SBX [--internet | --no-internet] [--allow-out CIDR|HOST]... [--deny-out CIDR|HOST]...\n" \
	"       [--clear-allow] [--clear-deny] [--json]\n" \
	"  Show the sandbox's egress policy, or change it (live, and kept across\n" \
	"  pause, resume and move). A list given replaces that list; host names\n" \
	"  are resolved by the control plane now. Always refused whatever the\n" \
	"  policy: the worker, the control plane, other sandboxes, link-local and\n" \
	"  metadata addresses (docs/network.md).\n" \
	"  --internet, --no-internet  public addresses allowed or not\n" \
	"  --allow-out X    allowed even with --no-internet, or in a private range\n" \
	"  --deny-out X     refused (wins over --allow-out)\n" \
	"  --clear-allow, --clear-deny  empty that list\n" \
	"  --json           print the policy object"

/* one of the network options into *net (made on first use); 1 when ch
 * was one, 0 when not, -1 after a bad value */
int
cli_net_opt(int ch, const char *arg, json_t **net)
{
	const char *list;
	json_t *l;

	if (ch != CLI_OPT_NET_OFF && ch != CLI_OPT_NET_ON && ch != CLI_OPT_NET_ALLOW &&
	    ch != CLI_OPT_NET_DENY && ch != CLI_OPT_NET_CLEAR_ALLOW && ch != CLI_OPT_NET_CLEAR_DENY)
		return 0;
	if (*net == NULL && (*net = json_object()) == NULL)
		return -1;
	switch (ch) {
	case CLI_OPT_NET_OFF:
	case CLI_OPT_NET_ON:
		json_object_set_new(*net, "internet", json_boolean(ch == CLI_OPT_NET_ON));
		return 1;
	case CLI_OPT_NET_CLEAR_ALLOW:
	case CLI_OPT_NET_CLEAR_DENY:
		json_object_set_new(*net, ch == CLI_OPT_NET_CLEAR_ALLOW ? "allow" : "deny",
		    json_array());
		return 1;
	}
	list = ch == CLI_OPT_NET_ALLOW ? "allow" : "deny";
	if (arg == NULL || arg[0] == '\0' || strlen(arg) > SPACE_NET_NAME_MAX) {
		fprintf(stderr, "space: bad --%s-out value\n", list);
		return -1;
	}
	if ((l = json_object_get(*net, list)) == NULL) {
		l = json_array();
		json_object_set_new(*net, list, l);
	}
	json_array_append_new(l, json_string(arg));
	return 1;
}

static void
print_list(const char *name, json_t *l)
{
	size_t i;
	json_t *e;

	printf("%s:", name);
	if (json_array_size(l) == 0)
		printf(" -");
	json_array_foreach(l, i, e)
		printf("%s %s", i ? "," : "", json_string_value(e) ? json_string_value(e) : "?");
	printf("\n");
}

int
cmd_network(int argc, char **argv)
{
	static const struct option lo[] = {
		CLI_NET_LONGOPTS,
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *net = NULL, *res;
	const char *sbx;
	char path[SPACE_ID_MAX + 32];
	int ch, r, json = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		if ((r = cli_net_opt(ch, optarg, &net)) < 0) {
			json_decref(net);
			return 2;
		}
		if (r == 1)
			continue;
		if (ch == 'j') {
			json = 1;
			continue;
		}
		json_decref(net);
		return cli_usage("network", USAGE, ch == 'h');
	}
	if ((sbx = cli_sbx_operand("network", USAGE, argc - optind, argv + optind)) == NULL) {
		json_decref(net);
		return 2;
	}
	if ((c = cli_client("network", &api)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/network", sbx);
	if (cli_request("network", c, net ? "POST" : "GET", path, net, &a) != 0)
		goto out;
	if (json) {
		ret = cli_print_json(a.body) == 0 ? 0 : 1;
		goto out;
	}
	printf("internet: %s\n", json_is_true(json_object_get(a.body, "internet")) ? "on" : "off");
	print_list("allow", json_object_get(a.body, "allow"));
	print_list("deny", json_object_get(a.body, "deny"));
	res = json_object_get(a.body, "resolved");
	print_list("allow (addresses)", json_object_get(res, "allow"));
	print_list("deny (addresses)", json_object_get(res, "deny"));
	ret = fflush(stdout) != 0;
out:
	json_decref(net);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
