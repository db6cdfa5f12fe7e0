/* space fs: files of a sandbox through its node-api. Sub-verbs are rows of
 * the table at the end, one function each. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"
#include "wsc.h"

#define FS_USAGE "read|write|ls|stat|mkdir|rm|mv ... (space fs SUBVERB --help)\n" \
	"  read SBX PATH            write the file to stdout\n" \
	"  write SBX PATH [--mode M] stream stdin into the file\n" \
	"  ls SBX PATH [--json]     list a directory\n" \
	"  stat SBX PATH [--json]   show a file's type, size, mode, mtime\n" \
	"  mkdir [-p] SBX PATH      make a directory (-p: with parents)\n" \
	"  rm [-r] SBX PATH         remove (-r: recursively)\n" \
	"  mv SBX FROM TO           rename\n" \
	"  watch SBX PATH [-R|--recursive] [--json]  print changes as they happen"

struct fs_args {
	const char *verb;       /* "fs read", ... for messages */
	struct cli_api api;
	int json, flag;         /* --json; -p / -r */
	long mode;              /* write --mode, -1 when absent */
	const char *sbx;
	const char *p1, *p2;
};

struct fs_sub {
	const char *name;
	const char *usage;
	int npaths;             /* PATH arguments after SBX */
	char flag;              /* the single-letter flag it takes, or 0 */
	int json;               /* accepts --json */
	int (*run)(struct space_client *c, struct fs_args *fa);
};

static int
path_ok(const char *verb, const char *p)
{
	if (p[0] == '\0' || strlen(p) > SPACE_PATH_MAX) {
		fprintf(stderr, "space: %s: bad path\n", verb);
		return 0;
	}
	return 1;
}

/* "files?path=P" style query, escaped */
static char *
path_query(const char *prefix, const char *path, long mode)
{
	char *esc = space_url_escape(path), *q = NULL;
	size_t n;

	if (esc == NULL)
		return NULL;
	n = strlen(prefix) + strlen(esc) + 32;
	if ((q = malloc(n)) != NULL) {
		if (mode >= 0)
			snprintf(q, n, "%s?path=%s&mode=0%lo", prefix, esc, (unsigned long)mode);
		else
			snprintf(q, n, "%s?path=%s", prefix, esc);
	}
	free(esc);
	return q;
}

static void
op_init(struct space_data_op *op, const char *access, const char *method, const char *path)
{
	memset(op, 0, sizeof(*op));
	op->access = access;
	op->method = method;
	op->path = path;
	op->in_fd = op->out_fd = -1;
	/* JSON operations are quick; streams (read, write) set 0 */
	op->timeout = 60;
}

/* run one op and report a failure as "space: fs VERB: ..." */
static int
run_op(struct space_client *c, struct fs_args *fa, struct space_data_op *op,
    struct space_answer *a)
{
	if (space_sbx_op(c, fa->sbx, op, a) < 0 || !space_answer_ok(a))
		return cli_answer_fail(fa->verb, a);
	return 0;
}

/* run op on PREFIX?path=P1 (&mode=M when mode >= 0) */
static int
run_path_op(struct space_client *c, struct fs_args *fa, struct space_data_op *op,
    const char *prefix, long mode, struct space_answer *a)
{
	char *q = path_query(prefix, fa->p1, mode);
	int ret;

	if (q == NULL)
		return cli_fail(fa->verb, "out of memory");
	op->path = q;
	ret = run_op(c, fa, op, a);
	op->path = NULL;
	free(q);
	return ret;
}

/* read and write: the file streams through in_fd or out_fd, never held
 * whole, so no timeout bounds it */
static int
fs_stream(struct space_client *c, struct fs_args *fa, const char *access,
    const char *method, long mode, int in_fd, int out_fd)
{
	struct space_data_op op;
	struct space_answer a;
	int ret;

	space_answer_init(&a);
	op_init(&op, access, method, NULL);
	op.in_fd = in_fd;
	op.out_fd = out_fd;
	op.timeout = 0;
	ret = run_path_op(c, fa, &op, "files", mode, &a);
	space_answer_clear(&a);
	return ret;
}

static int
fs_read(struct space_client *c, struct fs_args *fa)
{
	return fs_stream(c, fa, "fs:r", "GET", -1, -1, STDOUT_FILENO);
}

static int
fs_write(struct space_client *c, struct fs_args *fa)
{
	return fs_stream(c, fa, "fs:w", "PUT", fa->mode, STDIN_FILENO, -1);
}

static void
mode_str(char *buf, size_t cap, const json_t *m)
{
	if (json_is_integer(m))
		snprintf(buf, cap, "0%03llo", (unsigned long long)json_integer_value(m) & 07777);
	else
		cli_jscalar(buf, cap, m);
}

/* ls and stat: a JSON answer */
static int
fs_get(struct space_client *c, struct fs_args *fa, const char *prefix, struct space_answer *a)
{
	struct space_data_op op;

	op_init(&op, "fs:r", "GET", NULL);
	return run_path_op(c, fa, &op, prefix, -1, a);
}

static void
print_entries(const json_t *body, const char *arg)
{
	char size[32], mode[16];
	json_t *e;
	size_t i;

	json_array_foreach(json_object_get(body, "entries"), i, e) {
		cli_jscalar(size, sizeof(size), json_object_get(e, "size"));
		mode_str(mode, sizeof(mode), json_object_get(e, "mode"));
		printf("%-7s %s %12s %-20s %s\n", cli_jstr(e, "type", "?"), mode, size,
		    cli_jstr(e, "mtime", "-"), cli_jstr(e, "name", "?"));
	}
}

static int
fs_ls(struct space_client *c, struct fs_args *fa)
{
	struct space_answer a;
	int ret;

	space_answer_init(&a);
	if ((ret = fs_get(c, fa, "fs/list", &a)) != 0)
		goto out;
	if (!json_is_array(json_object_get(a.body, "entries")))
		ret = cli_fail(fa->verb, "malformed answer: no \"entries\"");
	else
		ret = cli_print(fa->json, a.body, print_entries, NULL);
out:
	space_answer_clear(&a);
	return ret;
}

static void
print_stat(const json_t *st, const char *arg)
{
	char v[64];

	printf("%-6s %s\n", "name", cli_jstr(st, "name", "?"));
	printf("%-6s %s\n", "type", cli_jstr(st, "type", "?"));
	cli_jscalar(v, sizeof(v), json_object_get(st, "size"));
	printf("%-6s %s\n", "size", v);
	mode_str(v, sizeof(v), json_object_get(st, "mode"));
	printf("%-6s %s\n", "mode", v);
	printf("%-6s %s\n", "mtime", cli_jstr(st, "mtime", "-"));
}

static int
fs_stat(struct space_client *c, struct fs_args *fa)
{
	struct space_answer a;
	int ret;

	space_answer_init(&a);
	if ((ret = fs_get(c, fa, "fs/stat", &a)) != 0)
		goto out;
	if (!json_is_object(a.body))
		ret = cli_fail(fa->verb, "malformed answer");
	else
		ret = cli_print(fa->json, a.body, print_stat, NULL);
out:
	space_answer_clear(&a);
	return ret;
}

static int
fs_post(struct space_client *c, struct fs_args *fa, const char *path, json_t *body)
{
	struct space_data_op op;
	struct space_answer a;
	int ret;

	if (body == NULL)
		return cli_fail(fa->verb, "out of memory");
	space_answer_init(&a);
	op_init(&op, "fs:w", "POST", path);
	op.body = body;
	ret = run_op(c, fa, &op, &a);
	space_answer_clear(&a);
	json_decref(body);
	return ret;
}

static int
fs_mkdir(struct space_client *c, struct fs_args *fa)
{
	return fs_post(c, fa, "fs/mkdir", json_pack("{s:s,s:b}", "path", fa->p1,
	    "parents", fa->flag));
}

static int
fs_rm(struct space_client *c, struct fs_args *fa)
{
	return fs_post(c, fa, "fs/remove", json_pack("{s:s,s:b}", "path", fa->p1,
	    "recursive", fa->flag));
}

static int
fs_mv(struct space_client *c, struct fs_args *fa)
{
	return fs_post(c, fa, "fs/rename", json_pack("{s:s,s:s}", "from", fa->p1,
	    "to", fa->p2));
}

/* a WebSocket stream of events (wsc.c) until the watch ends or ^C */
static int
fs_watch(struct space_client *c, struct fs_args *fa)
{
	struct wsc_io io = { .events_json = fa->json != 0 };
	char *q = path_query("watch", fa->p1, -1), *path = NULL;
	int ret;

	if (q == NULL || asprintf(&path, "%s%s", q, fa->flag ? "&recursive=true" : "") < 0) {
		free(q);
		return cli_fail(fa->verb, "out of memory");
	}
	free(q);
	ret = wsc_stream(c, fa->verb, fa->sbx, "watch", false, path, &io);
	free(path);
	return ret;
}

static const struct fs_sub subs[] = {
	{ "read",  "SBX PATH\n  Write the file to stdout (streamed).", 1, 0, 0, fs_read },
	{ "write", "SBX PATH [--mode OCTAL]\n  Stream stdin into the file; it replaces the"
		   " file only once all of it arrived.", 1, 0, 0, fs_write },
	{ "ls",    "SBX PATH [--json]\n  List a directory: type, mode, size, mtime, name.",
		   1, 0, 1, fs_ls },
	{ "stat",  "SBX PATH [--json]\n  Show a file's name, type, size, mode and mtime.",
		   1, 0, 1, fs_stat },
	{ "mkdir", "[-p] SBX PATH\n  Make a directory (-p: with its parents, no error if"
		   " it exists).", 1, 'p', 0, fs_mkdir },
	{ "rm",    "[-r] SBX PATH\n  Remove a file or an empty directory (-r: recursively).",
		   1, 'r', 0, fs_rm },
	{ "mv",    "SBX FROM TO\n  Rename FROM to TO.", 2, 0, 0, fs_mv },
	{ "watch", "SBX PATH [-R|--recursive] [--json]\n  Print changes below the directory PATH"
		   " as they happen\n  (create, write, remove, rename, chmod; overflow when"
		   " events were lost).\n  Exits 75 when the sandbox's execution was replaced.",
		   1, 'R', 1, fs_watch },
};

int
cmd_fs(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "mode", required_argument, NULL, 'm' },
		{ "recursive", no_argument, NULL, 'R' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	const struct fs_sub *s = NULL;
	struct space_client *c;
	struct fs_args fa;
	char verb[32], opts[8], *end;
	size_t i;
	int ch, ret;

	if (argc < 2)
		return cli_usage("fs", FS_USAGE, 0);
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)
		return cli_usage("fs", FS_USAGE, 1);
	for (i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
		if (strcmp(argv[1], subs[i].name) == 0)
			s = &subs[i];
	if (s == NULL) {
		fprintf(stderr, "space: fs: unknown sub-verb '%s'\n", argv[1]);
		return cli_usage("fs", FS_USAGE, 0);
	}
	snprintf(verb, sizeof(verb), "fs %s", s->name);
	memset(&fa, 0, sizeof(fa));
	fa.verb = verb;
	fa.mode = -1;
	snprintf(opts, sizeof(opts), "hv%c", s->flag ? s->flag : 'h');
	argc--, argv++;
	optind = 0;
	while ((ch = cli_getopt(argc, argv, opts, lo, &fa.api)) != -1) {
		if (ch == 'j' && s->json)
			fa.json = 1;
		else if (ch == 'm' && s->run == fs_write) {
			errno = 0;
			fa.mode = strtol(optarg, &end, 8);
			if (errno || *end || end == optarg || fa.mode < 0 || fa.mode > 07777) {
				fprintf(stderr, "space: %s: bad --mode '%s' (octal)\n", verb, optarg);
				return 2;
			}
		} else if (s->flag && ch == s->flag)
			fa.flag = 1;
		else
			return cli_usage(verb, s->usage, ch == 'h');
	}
	if (argc - optind != 1 + s->npaths)
		return cli_usage(verb, s->usage, 0);
	fa.sbx = argv[optind];
	fa.p1 = argv[optind + 1];
	fa.p2 = s->npaths > 1 ? argv[optind + 2] : NULL;
	if (!cli_sbx_ok(verb, fa.sbx) || !path_ok(verb, fa.p1) ||
	    (fa.p2 && !path_ok(verb, fa.p2)))
		return 2;
	if ((c = cli_client(verb, &fa.api)) == NULL)
		return 1;
	ret = s->run(c, &fa);
	space_client_free(c);
	return ret;
}
