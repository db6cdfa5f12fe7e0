/* space exec: run a command in a sandbox through its node-api, exit with
 * the command's status */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"
#include "wsc.h"

#define EXEC_TIMEOUT_DEFAULT    30
#define USAGE "SBX [--timeout S] [--cwd D] [--env K=V]... [--no-stdin] [--json|--background] -- CMD [ARG...]\n" \
	"  Run CMD in the sandbox; its stdout and stderr are written here as it\n" \
	"  produces them and space exits with its status (128+N if killed by\n" \
	"  signal N, 124 on timeout, 75 if the sandbox's execution was replaced\n" \
	"  while it ran). When stdin is not a terminal it is streamed to the\n" \
	"  command.\n" \
	"  --background     start CMD and print its process id (space ps,\n" \
	"                   space attach); it runs on without this client\n" \
	"  --timeout S      seconds before the command is killed (default 30)\n" \
	"  --cwd D          working directory inside the sandbox\n" \
	"  --env K=V        environment variable (repeatable)\n" \
	"  --no-stdin       do not send stdin\n" \
	"  --json           wait, then print the whole result (exit_code, signal,\n" \
	"                   timed_out, oom_killed, stdout, stderr, truncation\n" \
	"                   flags) as JSON; stdin at most 1 MiB; the exit status\n" \
	"                   is still the command's"

/* whether the JSON text of v is at most max bytes */
static int
json_text_fits(const json_t *v, size_t max)
{
	char *t = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
	int ok = t != NULL && strlen(t) <= max;

	free(t);
	return ok;
}

/* stdin, bounded: an exec request carries it whole */
static int
read_stdin(json_t *args)
{
	size_t len = 0, cap = SPACE_EXEC_STDIN_MAX + 1;
	char *buf = malloc(cap), *b64 = NULL;
	json_t *s;
	ssize_t r;
	int ret = 1;

	if (buf == NULL)
		return cli_fail("exec", "out of memory");
	while (len < cap) {
		r = read(STDIN_FILENO, buf + len, cap - len);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			cli_fail("exec", "reading stdin: %s", strerror(errno));
			goto out;
		}
		if (r == 0)
			break;
		len += (size_t)r;
	}
	if (len > SPACE_EXEC_STDIN_MAX) {
		cli_fail("exec", "stdin is larger than %u bytes; use `space fs write` for data",
		    SPACE_EXEC_STDIN_MAX);
		goto out;
	}
	if (len == 0) {
		ret = 0;
		goto out;
	}
	/* text travels as a JSON string; bytes that are not UTF-8, a NUL, or
	 * text whose escapes would make it longer than base64 go base64, so
	 * that any stdin up to SPACE_EXEC_STDIN_MAX fits the request body
	 * (SPACE_EXEC_BODY_MAX) */
	s = memchr(buf, '\0', len) == NULL ? json_stringn(buf, len) : NULL;
	if (s != NULL && json_text_fits(s, sodium_base64_encoded_len(len,
	    sodium_base64_VARIANT_ORIGINAL))) {
		json_object_set_new(args, "stdin", s);
	} else {
		json_decref(s);
		size_t n = sodium_base64_encoded_len(len, sodium_base64_VARIANT_ORIGINAL);
		if ((b64 = malloc(n)) == NULL) {
			cli_fail("exec", "out of memory");
			goto out;
		}
		sodium_bin2base64(b64, n, (unsigned char *)buf, len,
		    sodium_base64_VARIANT_ORIGINAL);
		json_object_set_new(args, "stdin_b64", json_string(b64));
	}
	ret = 0;
out:
	free(buf);
	free(b64);
	return ret;
}

/* "stdout" (text) or "stdout_b64" (standard base64) of the result */
static int
emit(const json_t *res, const char *name, int fd)
{
	char key[32];
	const json_t *v = json_object_get(res, name);
	const char *b64;
	unsigned char *bin;
	size_t n, blen;
	int ret;

	if (json_is_string(v))
		return fd_write_all(fd, json_string_value(v), json_string_length(v));
	snprintf(key, sizeof(key), "%s_b64", name);
	if ((b64 = json_string_value(json_object_get(res, key))) == NULL)
		return 0;
	n = strlen(b64);
	if ((bin = malloc(n / 4 * 3 + 3)) == NULL)
		return -1;
	if (sodium_base642bin(bin, n / 4 * 3 + 3, b64, n, NULL, &blen, NULL,
	    sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(bin);
		fprintf(stderr, "space: exec: bad base64 in %s\n", key);
		return -1;
	}
	ret = fd_write_all(fd, bin, blen);
	free(bin);
	return ret;
}

/* the streamed form: proc.start on a WebSocket (wsc.c), or with
 * --background a plain start that prints the pid */
static int
exec_stream(struct space_client *c, const char *sbx, json_t *args, bool background,
    bool send_stdin)
{
	struct wsc_io io = { .forward_stdin = send_stdin, .fallback_ok = true };
	struct space_data_op op;
	struct space_answer a;
	char *js, *esc = NULL, *path = NULL;
	int ret;

	json_object_set_new(args, "stdin", json_boolean(send_stdin && !background));
	if (background) {
		space_answer_init(&a);
		memset(&op, 0, sizeof(op));
		op.access = "exec";
		op.method = "POST";
		op.path = "processes";
		op.body = args;
		op.in_fd = op.out_fd = -1;
		op.timeout = 30;
		if (space_sbx_op(c, sbx, &op, &a) < 0 || !space_answer_ok(&a))
			ret = cli_answer_fail("exec", &a);
		else if (!json_is_integer(json_object_get(a.body, "pid")))
			ret = cli_fail("exec", "malformed answer: no pid");
		else {
			printf("%lld\n", (long long)json_integer_value(json_object_get(a.body, "pid")));
			ret = 0;
		}
		space_answer_clear(&a);
		return ret;
	}
	js = json_dumps(args, JSON_COMPACT);
	if (js == NULL || (esc = space_url_escape(js)) == NULL ||
	    asprintf(&path, "processes/stream?args=%s", esc) < 0) {
		free(js);
		free(esc);
		return cli_fail("exec", "out of memory");
	}
	free(js);
	free(esc);
	ret = wsc_stream(c, "exec", sbx, "exec", true, path, &io);
	free(path);
	return ret;
}

int
cmd_exec(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "timeout", required_argument, NULL, 't' },
		{ "cwd", required_argument, NULL, 'C' },
		{ "env", required_argument, NULL, 'e' },
		{ "no-stdin", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "background", no_argument, NULL, 'b' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	struct space_data_op op;
	json_t *args = NULL, *env = NULL, *av = NULL, *res;
	const char *sbx, *cwd = NULL;
	long timeout = EXEC_TIMEOUT_DEFAULT;
	char *end, *eq;
	int ch, nostdin = 0, as_json = 0, background = 0, ret = 1, i, sig;

	space_answer_init(&a);
	if ((env = json_object()) == NULL || (av = json_array()) == NULL)
		goto out;
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 't':
			errno = 0;
			timeout = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || timeout < 1 ||
			    timeout > SPACE_EXEC_TIMEOUT_MAX) {
				fprintf(stderr, "space: exec: --timeout is 1..%d seconds\n",
				    SPACE_EXEC_TIMEOUT_MAX);
				ret = 2;
				goto out;
			}
			break;
		case 'C': cwd = optarg; break;
		case 'e':
			eq = strchr(optarg, '=');
			if (eq == NULL || eq == optarg || json_object_size(env) >= SPACE_ENV_MAX) {
				fprintf(stderr, "space: exec: bad --env '%s' (want K=V)\n", optarg);
				ret = 2;
				goto out;
			}
			*eq = '\0';
			json_object_set_new(env, optarg, json_string(eq + 1));
			*eq = '=';
			break;
		case 'n': nostdin = 1; break;
		case 'j': as_json = 1; break;
		case 'b': background = 1; break;
		default: ret = cli_usage("exec", USAGE, ch == 'h'); goto out;
		}
	}
	/* SBX, then "--" (getopt consumed it if it came first), then CMD */
	if (optind >= argc) {
		ret = cli_usage("exec", USAGE, 0);
		goto out;
	}
	sbx = argv[optind++];
	if (optind < argc && strcmp(argv[optind], "--") == 0)
		optind++;
	if (optind >= argc || argc - optind > SPACE_ARGV_MAX) {
		ret = cli_usage("exec", USAGE, 0);
		goto out;
	}
	if (!cli_sbx_ok("exec", sbx)) {
		ret = 2;
		goto out;
	}
	for (i = optind; i < argc; i++)
		if (json_array_append_new(av, json_string(argv[i])) != 0) {
			fprintf(stderr, "space: exec: argument %d is not UTF-8\n", i - optind);
			ret = 2;
			goto out;
		}
	args = json_pack("{s:O,s:I}", "argv", av, "timeout", (json_int_t)timeout);
	if (args == NULL)
		goto out;
	if (json_object_size(env) > 0)
		json_object_set(args, "env", env);
	if (cwd)
		json_object_set_new(args, "cwd", json_string(cwd));
	if ((c = cli_client("exec", &api)) == NULL)
		goto out;
	if (as_json && background) {
		ret = cli_usage("exec", USAGE, 0);
		goto out;
	}
	if (!as_json) {
		ret = exec_stream(c, sbx, args, background, !nostdin && !isatty(STDIN_FILENO));
		/* a worker without streams: the buffered exec below */
		if (ret != WSC_NOT_SERVED || background)
			goto out;
		json_object_del(args, "stdin");
		ret = 1;
	}
	if (!nostdin && !isatty(STDIN_FILENO) && read_stdin(args) != 0)
		goto out;

	memset(&op, 0, sizeof(op));
	op.access = "exec";
	op.method = "POST";
	op.path = "exec";
	op.body = args;
	op.in_fd = op.out_fd = -1;
	op.timeout = timeout + 15;      /* the sandbox enforces the timeout; this
	                                   bounds a backend that never answers */
	if (space_sbx_op(c, sbx, &op, &a) < 0 || !space_answer_ok(&a)) {
		ret = cli_answer_fail("exec", &a);
		goto out;
	}
	res = a.body;
	if (!json_is_object(res)) {
		ret = cli_fail("exec", "malformed exec result");
		goto out;
	}
	if (as_json) {
		if (json_dumpf(res, stdout, JSON_INDENT(2) | JSON_SORT_KEYS) != 0 ||
		    fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
			ret = cli_fail("exec", "writing output: %s", strerror(errno));
			goto out;
		}
	} else if (emit(res, "stdout", STDOUT_FILENO) < 0 || emit(res, "stderr", STDERR_FILENO) < 0) {
		ret = cli_fail("exec", "writing output: %s", strerror(errno));
		goto out;
	}
	if (!as_json && json_is_true(json_object_get(res, "stdout_truncated")))
		fprintf(stderr, "space: exec: stdout was truncated at %u bytes\n",
		    SPACE_EXEC_OUTPUT_MAX);
	if (!as_json && json_is_true(json_object_get(res, "stderr_truncated")))
		fprintf(stderr, "space: exec: stderr was truncated at %u bytes\n",
		    SPACE_EXEC_OUTPUT_MAX);
	if (json_is_true(json_object_get(res, "timed_out")))
		ret = 124;
	else if ((sig = cli_signal_number(json_object_get(res, "signal"))) > 0)
		ret = 128 + (sig & 0x7f);
	else if (json_is_integer(json_object_get(res, "exit_code")))
		ret = (int)(json_integer_value(json_object_get(res, "exit_code")) & 0xff);
	else
		ret = cli_fail("exec", "exec result without exit_code");
out:
	json_decref(args);
	json_decref(env);
	json_decref(av);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}
