/* The space CLI: one file per verb (cmd_<verb>.c), listed in main.c. */
#ifndef SPACE_CLI_H
#define SPACE_CLI_H
#include <stddef.h>
#include <jansson.h>

struct option;
struct space_client;
struct space_answer;

struct verb {
	const char *name;
	int (*run)(int argc, char **argv);     /* argv[0] is the verb */
	const char *summary;
};

int cmd_version(int argc, char **argv);
int cmd_token(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_show(int argc, char **argv);
int cmd_kill(int argc, char **argv);
int cmd_workers(int argc, char **argv);
int cmd_route(int argc, char **argv);
int cmd_exec(int argc, char **argv);
int cmd_fs(int argc, char **argv);
int cmd_up(int argc, char **argv);
int cmd_pause(int argc, char **argv);
int cmd_resume(int argc, char **argv);
int cmd_move(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);
int cmd_timeout(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_mcp(int argc, char **argv);
int cmd_ps(int argc, char **argv);
int cmd_attach(int argc, char **argv);
int cmd_signal(int argc, char **argv);
int cmd_shell(int argc, char **argv);
int cmd_network(int argc, char **argv);
int cmd_port(int argc, char **argv);

/* egress policy options of space create and space network (cmd_network.c) */
#define CLI_OPT_NET_OFF         0x110
#define CLI_OPT_NET_ON          0x111
#define CLI_OPT_NET_ALLOW       0x112
#define CLI_OPT_NET_DENY        0x113
#define CLI_OPT_NET_CLEAR_ALLOW 0x114
#define CLI_OPT_NET_CLEAR_DENY  0x115
#define CLI_NET_LONGOPTS \
	{ "no-internet", no_argument, NULL, CLI_OPT_NET_OFF }, \
	{ "internet", no_argument, NULL, CLI_OPT_NET_ON }, \
	{ "allow-out", required_argument, NULL, CLI_OPT_NET_ALLOW }, \
	{ "deny-out", required_argument, NULL, CLI_OPT_NET_DENY }, \
	{ "clear-allow", no_argument, NULL, CLI_OPT_NET_CLEAR_ALLOW }, \
	{ "clear-deny", no_argument, NULL, CLI_OPT_NET_CLEAR_DENY }
/* one of those options into *net (made on first use): 1 it was one, 0
 * not, -1 a bad value (printed) */
int cli_net_opt(int ch, const char *arg, json_t **net);
int cmd_template(int argc, char **argv);

/* prints "space: <verb>: <message>" on stderr; returns 1 */
int cli_fail(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sleep before looking at the control plane again: 5 ms, doubling, at most
 * 200 ms; *ms starts at 0 */
void cli_poll_sleep(unsigned *ms);

/* --api-url / --api-key, accepted by every verb that talks to space-control;
 * they override SPACE_API_URL / SPACE_API_KEY */
#define CLI_OPT_API_URL 0x100
#define CLI_OPT_API_KEY 0x101
#define CLI_OPT_ROUTE_CACHE 0x102
/* --route-cache FILE and -v/--verbose (SPACE_ROUTE_CACHE, SPACE_DEBUG=1)
 * are accepted before the verb and by every verb */
#define CLI_API_LONGOPTS \
	{ "api-url", required_argument, NULL, CLI_OPT_API_URL }, \
	{ "api-key", required_argument, NULL, CLI_OPT_API_KEY }, \
	{ "route-cache", required_argument, NULL, CLI_OPT_ROUTE_CACHE }, \
	{ "verbose", no_argument, NULL, 'v' }, \
	{ "help", no_argument, NULL, 'h' }
struct cli_api {
	const char *url;
	const char *key;
};
/* getopt_long(argc, argv, shortopts, lo) that takes the API options itself
 * (recorded in api; --route-cache and -v go to the environment, where the
 * client reads them): the next option the verb handles ('h' for help, '?'
 * for a bad one), or -1 after the last */
int cli_getopt(int argc, char **argv, const char *shortopts, const struct option *lo,
    struct cli_api *api);
/* the operands left after the options must be exactly one SBX, a valid id:
 * it, or NULL after printing the usage or why the id is bad (exit code 2) */
const char *cli_sbx_operand(const char *verb, const char *usage, int argc, char **argv);
/* 1 when sbx is a valid sandbox id; 0 after printing
 * "space: VERB: bad sandbox id 'SBX'" */
int cli_sbx_ok(const char *verb, const char *sbx);
/* the client; NULL after printing why (no URL, no key, bad URL) */
struct space_client *cli_client(const char *verb, const struct cli_api *api);
/* prints "usage: space VERB USAGE" on stdout (help) or stderr; returns 0 or 2 */
int cli_usage(const char *verb, const char *usage, int help);
/* prints the answer's error as "space: VERB: code: message"; returns 1 */
int cli_answer_fail(const char *verb, const struct space_answer *a);
/* one request to space-control: 0 with a 2xx answer in *a, or 1 after
 * printing the error (transport or answer) */
int cli_request(const char *verb, struct space_client *c, const char *method,
    const char *path, json_t *body, struct space_answer *a);
int cli_print_json(const json_t *j);
/* A signal's number from "TERM", "SIGTERM", "sigterm" or "15"; 0 when it
 * is none. cli_signal_number takes a JSON number or such a string (what a
 * process's end reports). */
int cli_signal_name(const char *s);
int cli_signal_number(const json_t *v);
/* the result of a verb on stdout: j as JSON with --json, else text(j, arg)
 * prints it in words; 0, or 1 when stdout failed */
int cli_print(int json, const json_t *j, void (*text)(const json_t *j, const char *arg),
    const char *arg);
/* GET /v1/sandboxes/{sbx}: 0 with *out (caller decrefs), or 1 after
 * printing why */
int cli_sandbox_get(const char *verb, struct space_client *c, const char *sbx, json_t **out);
/* Polls the sandbox until it is in state want ("running": and its current
 * execution serves; on worker when it is not NULL), at most timeout
 * seconds. 0 with *out (caller decrefs); 1 after printing why (the
 * sandbox failed, or the time ran out). */
int cli_wait_state(const char *verb, struct space_client *c, const char *sbx,
    const char *want, const char *worker, int timeout, json_t **out);
/* A verb that lists a collection, `space VERB [--json]`: one row each.
 * cli_list_verb runs it (argv[0] is the verb) and returns the exit code. */
struct cli_listing {
	const char *verb;
	const char *usage;
	const char *path;       /* GET path */
	const char *key;        /* the answer's array */
	int whole;              /* --json prints the whole answer, not the array */
	void (*text)(const json_t *list, const char *arg);     /* arg: NULL */
};
int cli_list_verb(const struct cli_listing *l, int argc, char **argv);
const char *cli_jstr(const json_t *o, const char *key, const char *dflt);
void cli_jscalar(char *buf, size_t cap, const json_t *v);
#endif
