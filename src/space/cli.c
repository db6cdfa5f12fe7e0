/* Helpers shared by the verbs: the client from the environment, option
 * parsing conventions, error reporting. */
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

int
cli_usage(const char *verb, const char *usage, int help)
{
	fprintf(help ? stdout : stderr, "usage: space %s %s\n", verb, usage);
	return help ? 0 : 2;
}

int
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
cli_print_json(const json_t *j)
{
	if (json_dumpf(j, stdout, JSON_INDENT(2) | JSON_ENCODE_ANY) < 0)
		return -EIO;
	fputc('\n', stdout);
	return fflush(stdout) == 0 ? 0 : -EIO;
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

int
cli_sandbox_get(const char *verb, struct space_client *c, const char *sbx, json_t **out)
{
	struct space_answer a;
	char path[SPACE_ID_MAX + 32];

	*out = NULL;
	space_answer_init(&a);
	snprintf(path, sizeof(path), "/v1/sandboxes/%s", sbx);
	if (space_control(c, "GET", path, NULL, &a) < 0 || !space_answer_ok(&a)) {
		cli_answer_fail(verb, &a);
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
cli_wait_state(const char *verb, struct space_client *c, const char *sbx,
    const char *want, const char *worker, int timeout, json_t **out)
{
	time_t end = time(NULL) + timeout;
	const char *st = "?";
	json_t *s = NULL, *e;

	*out = NULL;
	for (;;) {
		json_decref(s);
		if (cli_sandbox_get(verb, c, sbx, &s) != 0)
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
		usleep(200 * 1000);
	}
	json_decref(s);
	return 1;
}
