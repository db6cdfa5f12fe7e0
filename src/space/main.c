/* space: the command-line client, and `space up`, the single-machine
 * supervisor. Verbs are rows of the table below, one file each. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "space.h"

static const struct verb verbs[] = {
	{ "version", cmd_version, "print the version" },
	{ "token",   cmd_token,   "verify or inspect a PASETO v4.public token" },
	{ "create",  cmd_create,  "create a sandbox and wait until it runs" },
	{ "template", cmd_template, "build, import, list, show or remove templates" },
	{ "list",    cmd_list,    "list your sandboxes" },
	{ "show",    cmd_show,    "show a sandbox and its current execution" },
	{ "kill",    cmd_kill,    "kill a sandbox" },
	{ "workers", cmd_workers, "list the workers" },
	{ "route",   cmd_route,   "get a route (endpoint + capability) to a sandbox" },
	{ "exec",    cmd_exec,    "run a command in a sandbox" },
	{ "fs",      cmd_fs,      "read, write, list, change and watch files of a sandbox" },
	{ "ps",      cmd_ps,      "list the processes of a sandbox" },
	{ "attach",  cmd_attach,  "attach to a process of a sandbox (its output, live)" },
	{ "signal",  cmd_signal,  "send a signal to a process of a sandbox" },
	{ "shell",   cmd_shell,   "an interactive shell in a sandbox (a terminal)" },
	{ "pause",   cmd_pause,   "pause a sandbox (its files are kept in a snapshot)" },
	{ "resume",  cmd_resume,  "resume a paused (or failed) sandbox, optionally on another worker" },
	{ "move",    cmd_move,    "move a running sandbox to another worker" },
	{ "snapshot", cmd_snapshot, "take a named snapshot of a sandbox, or list them" },
	{ "network", cmd_network, "show or change a sandbox's egress policy" },
	{ "port",    cmd_port,    "declare, list or remove a sandbox's service ports; print a port's URL" },
	{ "timeout", cmd_timeout, "set a sandbox's idle and absolute timeouts" },
	{ "mcp",     cmd_mcp,     "serve sandboxes as tools to an agent (Model Context Protocol, stdio)" },
	{ "demo",    cmd_demo,    "walk through a move and a route repair, step by step" },
	{ "up",      cmd_up,      "start and supervise a single-machine platform" },
};

int
cli_fail(const char *verb, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "space: %s: ", verb);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: space [-v] [--route-cache FILE] VERB [ARGS...]   "
	    "(space VERB --help for details)\n\nverbs:\n");
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-10s %s\n", verbs[i].name, verbs[i].summary);
	fprintf(f, "\noptions (before the verb, or after it):\n"
	    "  -v, --verbose        print each data-plane attempt and route repair on stderr\n"
	    "                       (also SPACE_DEBUG=1)\n"
	    "  --route-cache FILE   where routes are cached (also SPACE_ROUTE_CACHE; default\n"
	    "                       $XDG_STATE_HOME/space/routes.json or\n"
	    "                       ~/.local/state/space/routes.json)\n"
	    "  --api-url URL, --api-key KEY   override SPACE_API_URL, SPACE_API_KEY\n");
}

int
main(int argc, char **argv)
{
	size_t i;

	/* options that apply to every verb, given before it */
	while (argc >= 2) {
		if (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--verbose") == 0) {
			setenv("SPACE_DEBUG", "1", 1);
			argc--, argv++;
		} else if (strcmp(argv[1], "--route-cache") == 0 && argc >= 3) {
			setenv("SPACE_ROUTE_CACHE", argv[2], 1);
			argc -= 2, argv += 2;
		} else if (strncmp(argv[1], "--route-cache=", 14) == 0) {
			setenv("SPACE_ROUTE_CACHE", argv[1] + 14, 1);
			argc--, argv++;
		} else
			break;
	}
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
	    strcmp(argv[1], "help") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	for (i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		if (strcmp(argv[1], verbs[i].name) == 0)
			return verbs[i].run(argc - 1, argv + 1);
	fprintf(stderr, "space: unknown verb '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
