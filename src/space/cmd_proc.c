/* space ps / attach / signal / shell: processes of a sandbox
 * (docs/protocol.md section 2, "Streams"). ps and signal are plain
 * requests; attach and shell are WebSocket streams (wsc.c). */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"
#include "wsc.h"

static int
pid_arg(const char *verb, const char *s, unsigned long *pid)
{
	char *end;

	errno = 0;
	*pid = strtoul(s, &end, 10);
	if (errno || *end || end == s || *pid == 0 || *pid > 0x7fffffffUL) {
		fprintf(stderr, "space: %s: bad process id '%s'\n", verb, s);
		return 0;
	}
	return 1;
}

/* the operands after the options: exactly n, the first a sandbox id */
static int
operands(const char *verb, const char *usage, int argc, char **argv, int n)
{
	if (argc - optind != n) {
		cli_usage(verb, usage, 0);
		return 0;
	}
	if (!cli_sbx_ok(verb, argv[optind]))
		return 0;
	return 1;
}

static int
plain_op(const char *verb, struct cli_api *api, const char *sbx, const char *method,
    const char *path, json_t *body, struct space_answer *a, struct space_client **cp)
{
	struct space_data_op op;

	if ((*cp = cli_client(verb, api)) == NULL)
		return 1;
	memset(&op, 0, sizeof(op));
	op.access = "exec";
	op.method = method;
	op.path = path;
	op.body = body;
	op.in_fd = op.out_fd = -1;
	op.timeout = 30;
	if (space_sbx_op(*cp, sbx, &op, a) < 0 || !space_answer_ok(a))
		return cli_answer_fail(verb, a);
	return 0;
}

#define PS_USAGE "SBX [--json]\n  List the processes of the sandbox: pid, state, exit status, command."

int
cmd_ps(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' }, CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	json_t *ps, *p, *v;
	size_t i, j;
	int ch, as_json = 0, ret;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		if (ch == 'j')
			as_json = 1;
		else
			return cli_usage("ps", PS_USAGE, ch == 'h');
	}
	if (!operands("ps", PS_USAGE, argc, argv, 1))
		return 2;
	space_answer_init(&a);
	if ((ret = plain_op("ps", &api, argv[optind], "GET", "processes", NULL, &a, &c)) != 0)
		goto out;
	ps = json_object_get(a.body, "processes");
	if (as_json || !json_is_array(ps)) {
		ret = cli_print_json(a.body) != 0;
		goto out;
	}
	printf("%-8s %-8s %-6s %s\n", "PID", "STATE", "STATUS", "COMMAND");
	json_array_foreach(ps, i, p) {
		char st[16] = "-";

		if (json_is_integer(v = json_object_get(p, "signal")))
			snprintf(st, sizeof(st), "sig %d", (int)json_integer_value(v));
		else if (json_is_string(v))
			snprintf(st, sizeof(st), "%s", json_string_value(v));
		else if (json_is_integer(v = json_object_get(p, "exit_code")))
			snprintf(st, sizeof(st), "%d", (int)json_integer_value(v));
		printf("%-8lld %-8s %-6s", (long long)json_integer_value(json_object_get(p, "pid")),
		    json_string_value(json_object_get(p, "state")) ?
		    json_string_value(json_object_get(p, "state")) : "?", st);
		json_array_foreach(json_object_get(p, "argv"), j, v)
			printf(" %s", json_string_value(v) ? json_string_value(v) : "?");
		putchar('\n');
	}
	ret = 0;
out:
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}

#define SIGNAL_USAGE "SBX PID SIG\n  Send signal SIG (TERM, KILL, INT, HUP, ... or a number) to the process group."

int
cmd_signal(int argc, char **argv)
{
	static const struct option lo[] = { CLI_API_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct cli_api api = { NULL, NULL };
	struct space_client *c = NULL;
	struct space_answer a;
	unsigned long pid;
	char path[64];
	json_t *body;
	long n;
	int ch, ret;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1)
		return cli_usage("signal", SIGNAL_USAGE, ch == 'h');
	if (!operands("signal", SIGNAL_USAGE, argc, argv, 3) ||
	    !pid_arg("signal", argv[optind + 1], &pid))
		return 2;
	n = cli_signal_name(argv[optind + 2]);
	if (n < 1 || n > SPACE_SIGNO_MAX) {
		fprintf(stderr, "space: signal: unknown signal '%s'\n", argv[optind + 2]);
		return 2;
	}
	body = json_pack("{s:I}", "signal", (json_int_t)n);
	snprintf(path, sizeof(path), "processes/%lu/signal", pid);
	space_answer_init(&a);
	ret = plain_op("signal", &api, argv[optind], "POST", path, body, &a, &c);
	json_decref(body);
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}

#define ATTACH_USAGE "SBX PID\n  Attach to a running process: its recent output, then live output;\n" \
	"  stdin goes to it. Exits with its status when it ends; detach with ^C\n" \
	"  (the process runs on). 75 when the sandbox's execution was replaced."

int
cmd_attach(int argc, char **argv)
{
	static const struct option lo[] = { CLI_API_LONGOPTS, { NULL, 0, NULL, 0 } };
	struct cli_api api = { NULL, NULL };
	struct space_client *c;
	struct wsc_io io = { .forward_stdin = true };
	unsigned long pid;
	char path[64];
	int ch, ret;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1)
		return cli_usage("attach", ATTACH_USAGE, ch == 'h');
	if (!operands("attach", ATTACH_USAGE, argc, argv, 2) ||
	    !pid_arg("attach", argv[optind + 1], &pid))
		return 2;
	if ((c = cli_client("attach", &api)) == NULL)
		return 1;
	/* a terminal's stdin is not sent: its lines would be typed into
	 * a process that may not expect them; pipe into attach to send */
	io.forward_stdin = !isatty(STDIN_FILENO);
	snprintf(path, sizeof(path), "processes/%lu/stream", pid);
	ret = wsc_stream(c, "attach", argv[optind], "exec", false, path, &io);
	space_client_free(c);
	return ret;
}

#define SHELL_USAGE "SBX [--shell PATH]\n  An interactive shell in the sandbox on a terminal (raw mode; the\n" \
	"  window size follows yours). Exits with the shell's status; 75 when the\n" \
	"  sandbox's execution was replaced."

static struct termios saved_tio;
static int tio_saved;

static void
tty_restore(void)
{
	if (tio_saved)
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_tio);
	tio_saved = 0;
}

int
cmd_shell(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "shell", required_argument, NULL, 's' }, CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct space_client *c;
	struct wsc_io io = { .forward_stdin = true };
	struct termios raw;
	const char *sh = "/bin/sh", *term = getenv("TERM");
	char *esc = NULL, *path = NULL, *js;
	json_t *args;
	int ch, ret, tty = isatty(STDIN_FILENO);

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		if (ch == 's')
			sh = optarg;
		else
			return cli_usage("shell", SHELL_USAGE, ch == 'h');
	}
	if (!operands("shell", SHELL_USAGE, argc, argv, 1))
		return 2;
	if ((c = cli_client("shell", &api)) == NULL)
		return 1;
	{
		struct winsize ws = { .ws_row = 24, .ws_col = 80 };

		if (tty)
			ioctl(STDIN_FILENO, TIOCGWINSZ, &ws);
		if (ws.ws_row == 0 || ws.ws_col == 0)
			ws = (struct winsize){ .ws_row = 24, .ws_col = 80 };
		args = json_pack("{s:[s,s],s:{s:i,s:i,s:s}}", "argv", sh, "-i", "pty",
		    "rows", (int)ws.ws_row, "cols", (int)ws.ws_col,
		    "term", term && term[0] && strlen(term) < 64 ? term : "xterm");
	}
	js = args ? json_dumps(args, JSON_COMPACT) : NULL;
	json_decref(args);
	if (js == NULL || (esc = space_url_escape(js)) == NULL ||
	    asprintf(&path, "processes/stream?args=%s", esc) < 0) {
		free(js);
		free(esc);
		space_client_free(c);
		return cli_fail("shell", "out of memory");
	}
	free(js);
	free(esc);
	if (tty && tcgetattr(STDIN_FILENO, &saved_tio) == 0) {
		tio_saved = 1;
		atexit(tty_restore);
		raw = saved_tio;
		cfmakeraw(&raw);
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw);
	}
	io.tty = tty;
	ret = wsc_stream(c, "shell", argv[optind], "exec,pty", true, path, &io);
	tty_restore();
	free(path);
	space_client_free(c);
	return ret;
}
