/* Helpers shared by the verbs: option parsing conventions, the client
 * from the environment, requests to space-control with their error
 * reporting, output as JSON or text, and the listing verbs. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

int
cli_usage(const char *verb, const char *usage, int help)
{
	fprintf(help ? stdout : stderr, "usage: space %s %s\n", verb, usage);
	return help ? 0 : 2;
}

/* 1 when c was one of the API options, 0 otherwise */
static int
cli_api_opt(struct cli_api *api, int c, const char *arg)
{
	if (c == CLI_OPT_API_URL)
		api->url = arg;
	else if (c == CLI_OPT_API_KEY)
		api->key = arg;
	else if (c == CLI_OPT_ROUTE_CACHE)
		setenv("SPACE_ROUTE_CACHE", arg, 1);
	else if (c == 'v')
		setenv("SPACE_DEBUG", "1", 1);
	else
		return 0;
	return 1;
}

int
cli_getopt(int argc, char **argv, const char *shortopts, const struct option *lo,
    struct cli_api *api)
{
	int ch;

	while ((ch = getopt_long(argc, argv, shortopts, lo, NULL)) != -1)
		if (!cli_api_opt(api, ch, optarg))
			break;
	return ch;
}

int
cli_sbx_ok(const char *verb, const char *sbx)
{
	if (!id_valid(sbx)) {
		fprintf(stderr, "space: %s: bad sandbox id '%s'\n", verb, sbx);
		return 0;
	}
	return 1;
}

const char *
cli_sbx_operand(const char *verb, const char *usage, int argc, char **argv)
{
	if (argc != 1) {
		cli_usage(verb, usage, 0);
		return NULL;
	}
	return cli_sbx_ok(verb, argv[0]) ? argv[0] : NULL;
}

struct space_client *
cli_client(const char *verb, const struct cli_api *api)
{
	const char *url = api->url ? api->url : getenv("SPACE_API_URL");
	const char *key = api->key ? api->key : getenv("SPACE_API_KEY");
	struct space_client *c;

	if (url == NULL || url[0] == '\0') {
		cli_fail(verb, "SPACE_API_URL is not set (use --api-url, or `export $(cat .space/env)` "
		    "after `space up`)");
		return NULL;
	}
	if (key == NULL || key[0] == '\0') {
		cli_fail(verb, "SPACE_API_KEY is not set (use --api-key, or `export $(cat .space/env)` "
		    "after `space up`)");
		return NULL;
	}
	if ((c = space_client_new(url, key)) == NULL) {
		if (errno == EINVAL)
			cli_fail(verb, "bad API URL '%s' (want http://HOST:PORT)", url);
		else
			cli_fail(verb, "%s", strerror(errno));
	}
	return c;
}

int
cli_answer_fail(const char *verb, const struct space_answer *a)
{
	char buf[1024];

	return cli_fail(verb, "%s", space_answer_strerror(a, buf, sizeof(buf)));
}

int
cli_request(const char *verb, struct space_client *c, const char *method,
    const char *path, json_t *body, struct space_answer *a)
{
	if (space_control(c, method, path, body, a) < 0 || !space_answer_ok(a))
		return cli_answer_fail(verb, a);
	return 0;
}

int
cli_signal_name(const char *s)
{
	char *end;
	long n;
	int i;

	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	n = strtol(s, &end, 10);
	if (end != s && *end == '\0')
		return n >= 1 && n <= 64 ? (int)n : 0;
	for (i = 1; i < 65; i++)
		if (sigabbrev_np(i) != NULL && strcasecmp(sigabbrev_np(i), s) == 0)
			return i;
	return 0;
}

int
cli_signal_number(const json_t *v)
{
	const char *s;

	if (json_is_integer(v))
		return (int)json_integer_value(v);
	if ((s = json_string_value(v)) == NULL)
		return 0;
	return cli_signal_name(s);
}

int
cli_print_json(const json_t *j)
{
	if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) < 0)
		return -EIO;
	fputc('\n', stdout);
	return fflush(stdout) == 0 ? 0 : -EIO;
}

int
cli_print(int json, const json_t *j, void (*text)(const json_t *j, const char *arg),
    const char *arg)
{
	if (json)
		return cli_print_json(j) != 0;
	text(j, arg);
	return fflush(stdout) != 0;
}

int
cli_list_verb(const struct cli_listing *l, int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *list;
	int ch, json = 0, ret = 1;

	space_answer_init(&a);
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		default: return cli_usage(l->verb, l->usage, ch == 'h');
		}
	}
	if (optind != argc)
		return cli_usage(l->verb, l->usage, 0);
	if ((c = cli_client(l->verb, &api)) == NULL ||
	    cli_request(l->verb, c, "GET", l->path, NULL, &a) != 0)
		goto out;
	list = json_object_get(a.body, l->key);
	if (!json_is_array(list))
		ret = cli_fail(l->verb, "malformed answer: no \"%s\" list", l->key);
	else
		ret = cli_print(json, json && l->whole ? a.body : list, l->text, NULL);
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}

const char *
cli_jstr(const json_t *o, const char *key, const char *dflt)
{
	const json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : dflt;
}

/* integers print as numbers, strings as themselves, null/absent as "-" */
void
cli_jscalar(char *buf, size_t cap, const json_t *v)
{
	if (json_is_integer(v))
		snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
	else if (json_is_string(v))
		snprintf(buf, cap, "%s", json_string_value(v));
	else if (json_is_true(v) || json_is_false(v))
		snprintf(buf, cap, "%s", json_is_true(v) ? "true" : "false");
	else
		snprintf(buf, cap, "-");
}

/* GET the sandbox; with until (running, paused, killed), the control
 * plane answers once it is there (or failed, killed) or after wait_s */
static int
sandbox_get_until(const char *verb, struct space_client *c, const char *sbx,
    const char *until, int wait_s, json_t **out)
{
	struct space_answer a;
	char path[SPACE_ID_MAX + 64];

	*out = NULL;
	space_answer_init(&a);
	if (until != NULL)
		snprintf(path, sizeof(path), "/v1/sandboxes/%s?until=%s&wait=%d", sbx, until,
		    wait_s);
	else
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", sbx);
	if (cli_request(verb, c, "GET", path, NULL, &a) != 0) {
		space_answer_clear(&a);
		return 1;
	}
	if (!json_is_object(a.body)) {
		space_answer_clear(&a);
		return cli_fail(verb, "malformed answer");
	}
	*out = json_incref(a.body);
	space_answer_clear(&a);
	return 0;
}

int
cli_sandbox_get(const char *verb, struct space_client *c, const char *sbx, json_t **out)
{
	return sandbox_get_until(verb, c, sbx, NULL, 0, out);
}

/* waiting for the control plane: often a few tens of milliseconds (a
 * create, a move), sometimes seconds (a restore): look again after 5 ms,
 * then twice as long each time, never longer than 200 ms */
void
cli_poll_sleep(unsigned *ms)
{
	if (*ms == 0)
		*ms = 5;
	usleep(*ms * 1000);
	if ((*ms *= 2) > 200)
		*ms = 200;
}

int
cli_wait_state(const char *verb, struct space_client *c, const char *sbx,
    const char *want, const char *worker, int timeout, json_t **out)
{
	time_t end = time(NULL) + timeout, now;
	const char *st = "?";
	json_t *s = NULL, *e;
	unsigned pause_ms = 0;
	/* the control plane holds the GET until the state is reached (a
	 * long-poll: no latency from polling); a worker condition, or a
	 * state the wait does not know, is looked at again here */
	bool lp = strcmp(want, "running") == 0 || strcmp(want, "paused") == 0 ||
	    strcmp(want, "killed") == 0;

	*out = NULL;
	for (;;) {
		json_decref(s);
		now = time(NULL);
		if (sandbox_get_until(verb, c, sbx, lp ? want : NULL,
		    end - now > 25 ? 25 : end > now ? (int)(end - now) : 0, &s) != 0)
			return 1;
		st = cli_jstr(s, "state", "?");
		e = json_object_get(s, "execution");
		/* "running" counts once the current execution serves */
		if (strcmp(st, want) == 0 && (strcmp(want, "running") != 0 ||
		    (json_is_object(e) && strcmp(cli_jstr(e, "state", ""), "serving") == 0)) &&
		    (worker == NULL || (json_is_object(e) &&
		    strcmp(cli_jstr(e, "worker", ""), worker) == 0))) {
			*out = s;
			return 0;
		}
		/* states a lifecycle operation never leaves by itself */
		if (strcmp(st, "failed") == 0 || strcmp(st, "killed") == 0 ||
		    strcmp(st, "stopping") == 0) {
			cli_fail(verb, "sandbox %s is %s", sbx, st);
			break;
		}
		if (time(NULL) >= end) {
			cli_fail(verb, "sandbox %s is still %s after %d s (want %s); "
			    "see `space show %s`", sbx, st, timeout, want, sbx);
			break;
		}
		/* a long-poll that answered early: the worker is not yet the
		 * one asked for, or the sandbox passed its state */
		cli_poll_sleep(&pause_ms);
	}
	json_decref(s);
	return 1;
}
