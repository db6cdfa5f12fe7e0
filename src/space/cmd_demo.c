/* space demo: the routing scenario of a move, run step by step on the
 * platform SPACE_API_URL names. A sandbox serving as generation N on one
 * worker moves to another as N+1; capabilities of N are then refused at
 * both workers, N+1's is refused at the old one, and a client whose route
 * cache still holds N repairs its route with exactly one rebuilt attempt
 * and reads back what it wrote before the move. Each step checks what it
 * shows; the first one that behaves otherwise ends the demo with exit 1. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "client.h"
#include "limits.h"
#include "space.h"
#include "util.h"

#define USAGE "[--data-dir DIR] [--keep]\n" \
	"  Walk through a move and a route repair on a running platform with\n" \
	"  at least two workers (SPACE_API_URL / SPACE_API_KEY, or the env file\n" \
	"  of `space up --data-dir DIR`). Creates a sandbox on one worker,\n" \
	"  writes a file, keeps a capability, moves the sandbox, replays old\n" \
	"  and new capabilities at both workers (each refusal is shown), then\n" \
	"  lets a client whose route cache holds the old route repair it and\n" \
	"  read the file back. Exits 1 naming the first step that behaved\n" \
	"  otherwise. The sandbox is killed at the end unless --keep."

#define DEMO_PATH       "/home/user/demo.txt"

struct demo {
	struct space_client *c;
	char sbx[SPACE_ID_MAX + 1];
	char w1[SPACE_ID_MAX + 1], w2[SPACE_ID_MAX + 1];
	char ep1[SPACE_HTTP_URL_MAX], ep2[SPACE_HTTP_URL_MAX];
	int step;
};

static void
say(struct demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void
say(struct demo *d, const char *fmt, ...)
{
	va_list ap;

	printf("%2d. ", ++d->step);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static void
detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
detail(const char *fmt, ...)
{
	va_list ap;

	fputs("      ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static int
unexpected(struct demo *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int
unexpected(struct demo *d, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "space: demo: step %d did not behave as expected: ", d->step);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 1;
}

/* KEY=VALUE lines of DIR/env, for the variables not already set */
static int
load_env(const char *dir)
{
	char path[4096], line[1024];
	FILE *f;

	snprintf(path, sizeof(path), "%s/env", dir);
	if ((f = fopen(path, "re")) == NULL)
		return cli_fail("demo", "cannot read %s: %s", path, strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		char *eq = strchr(line, '='), *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		if (eq == NULL)
			continue;
		*eq = '\0';
		if ((strcmp(line, "SPACE_API_URL") == 0 || strcmp(line, "SPACE_API_KEY") == 0) &&
		    getenv(line) == NULL)
			setenv(line, eq + 1, 1);
	}
	sodium_memzero(line, sizeof(line));
	fclose(f);
	return 0;
}

/* the two workers the demo uses: the first two live ones, by id */
static int
pick_workers(struct demo *d)
{
	struct space_answer a;
	json_t *list, *w;
	size_t i;
	int n = 0;

	space_answer_init(&a);
	if (cli_request("demo", d->c, "GET", "/v1/workers", NULL, &a) != 0) {
		space_answer_clear(&a);
		return -1;
	}
	list = json_object_get(a.body, "workers");
	json_array_foreach(list, i, w) {
		const char *id = cli_jstr(w, "id", ""), *ep = cli_jstr(w, "endpoint", "");
		if (strcmp(cli_jstr(w, "state", ""), "live") != 0 || !id_valid(id) ||
		    strlen(ep) >= sizeof(d->ep1))
			continue;
		if (n == 0 || strcmp(id, d->w1) < 0) {
			if (n > 0) {
				snprintf(d->w2, sizeof(d->w2), "%s", d->w1);
				snprintf(d->ep2, sizeof(d->ep2), "%s", d->ep1);
			}
			snprintf(d->w1, sizeof(d->w1), "%s", id);
			snprintf(d->ep1, sizeof(d->ep1), "%s", ep);
		} else if (n == 1 || strcmp(id, d->w2) < 0) {
			snprintf(d->w2, sizeof(d->w2), "%s", id);
			snprintf(d->ep2, sizeof(d->ep2), "%s", ep);
		}
		n++;
	}
	space_answer_clear(&a);
	if (n < 2) {
		cli_fail("demo", "needs at least two live workers (found %d); try `space up --workers 2`",
		    n);
		return -1;
	}
	return 0;
}

/* a raw read of the demo file at endpoint with capability cap: what a
 * delayed request or a stale client would send */
static void
replay(struct demo *d, const char *endpoint, const char *cap, struct space_answer *a)
{
	char url[SPACE_HTTP_URL_MAX * 2];
	char *esc = space_url_escape(DEMO_PATH);

	snprintf(url, sizeof(url), "%s/v1/sandboxes/%s/files?path=%s", endpoint, d->sbx,
	    esc ? esc : "");
	free(esc);
	space_http(url, cap, "GET", NULL, -1, -1, d->c->connect_timeout, 20, a);
}

static void
show_refusal(const struct space_answer *a)
{
	detail("-> HTTP %ld %s (reason: %s)%s%s%s%s", a->status, a->error[0] ? a->error : "-",
	    a->reason[0] ? a->reason : "-", a->generation[0] ? ", answered by gen " : "",
	    a->generation, a->worker[0] ? " on " : "", a->worker);
}

static int
get_route(struct demo *d, struct space_route *r, struct route_identity *id)
{
	struct space_answer a;
	json_t *req = json_pack("{s:[s,s]}", "access", "fs:r", "fs:w");
	int ret;

	space_answer_init(&a);
	if (req == NULL)
		return -ENOMEM;
	ret = space_route_get(d->c, d->sbx, req, r, &a);
	json_decref(req);
	if (ret < 0) {
		cli_answer_fail("demo", &a);
	} else if (route_identity_unpack(r->identity, id) < 0) {
		cli_fail("demo", "malformed route identity");
		space_route_free(r);
		ret = -EPROTO;
	}
	space_answer_clear(&a);
	return ret;
}

static int
run(struct demo *d, int keep)
{
	struct space_answer a;
	struct space_route old, fresh;
	struct route_identity oldid, newid;
	struct space_data_op op;
	json_t *body = NULL, *s = NULL;
	char content[128], back[256], path[SPACE_ID_MAX + 32], tmpl[] = "/tmp/space-demo.XXXXXX";
	int fd = -1, outfd = -1, ret = 1;
	ssize_t n;

	space_answer_init(&a);
	memset(&old, 0, sizeof(old));
	memset(&fresh, 0, sizeof(fresh));
	if (pick_workers(d) < 0)
		return 1;

	say(d, "Create a sandbox on %s.", d->w1);
	if ((body = json_pack("{s:s}", "worker", d->w1)) == NULL)
		goto out;
	if (space_control(d->c, "POST", "/v1/sandboxes", body, &a) < 0 || !space_answer_ok(&a)) {
		ret = unexpected(d, "create: %s", space_answer_strerror(&a, back, sizeof(back)));
		goto out;
	}
	if (!id_valid(cli_jstr(a.body, "id", ""))) {
		ret = unexpected(d, "create answered without a sandbox id");
		goto out;
	}
	snprintf(d->sbx, sizeof(d->sbx), "%s", cli_jstr(a.body, "id", ""));
	if (cli_wait_state("demo", d->c, d->sbx, "running", d->w1, 60, &s) != 0) {
		ret = unexpected(d, "the sandbox did not start on %s", d->w1);
		goto out;
	}
	detail("%s serves as generation %" JSON_INTEGER_FORMAT " on %s", d->sbx,
	    json_integer_value(json_object_get(json_object_get(s, "execution"), "generation")),
	    d->w1);

	say(d, "Write %s through the client (its route cache now holds the route).", DEMO_PATH);
	snprintf(content, sizeof(content), "written before the move, %ld\n", (long)time(NULL));
	if ((fd = mkstemp(tmpl)) < 0) {
		ret = cli_fail("demo", "mkstemp: %s", strerror(errno));
		goto out;
	}
	unlink(tmpl);
	if (write(fd, content, strlen(content)) != (ssize_t)strlen(content) ||
	    lseek(fd, 0, SEEK_SET) != 0) {
		ret = cli_fail("demo", "temporary file: %s", strerror(errno));
		goto out;
	}
	memset(&op, 0, sizeof(op));
	op.access = "fs:w";
	op.method = "PUT";
	op.path = "files?path=%2Fhome%2Fuser%2Fdemo.txt";
	op.in_fd = fd;
	op.out_fd = -1;
	op.timeout = 60;
	if (space_sbx_op(d->c, d->sbx, &op, &a) < 0 || !space_answer_ok(&a)) {
		ret = unexpected(d, "write: %s", space_answer_strerror(&a, back, sizeof(back)));
		goto out;
	}
	detail("wrote %zu bytes; served by gen %s on %s", strlen(content), a.generation, a.worker);
	/* a read too, so that the cached capability grants fs:r and the
	 * read after the move starts from it instead of renewing it */
	memset(&op, 0, sizeof(op));
	op.access = "fs:r";
	op.method = "GET";
	op.path = "fs/stat?path=%2Fhome%2Fuser%2Fdemo.txt";
	op.in_fd = op.out_fd = -1;
	op.timeout = 60;
	if (space_sbx_op(d->c, d->sbx, &op, &a) < 0 || !space_answer_ok(&a) ||
	    json_integer_value(json_object_get(a.body, "size")) != (json_int_t)strlen(content)) {
		ret = unexpected(d, "stat after the write: %s",
		    space_answer_strerror(&a, back, sizeof(back)));
		goto out;
	}
	detail("stat: %zu bytes; the cached route (gen %s on %s) grants fs:r and fs:w",
	    strlen(content), a.generation, a.worker);

	say(d, "Take a capability and keep it: the old route, capability and endpoint.");
	if (get_route(d, &old, &oldid) < 0)
		goto out;
	detail("old route: gen %" PRIu64 " on %s (activation %u), endpoint %s, expires %s",
	    oldid.generation, oldid.worker, oldid.activation, old.endpoint, old.expires_at);
	if (strcmp(oldid.worker, d->w1) != 0) {
		ret = unexpected(d, "the route names %s, not %s", oldid.worker, d->w1);
		goto out;
	}

	say(d, "Move the sandbox to %s.", d->w2);
	json_decref(body);
	if ((body = json_pack("{s:s}", "to", d->w2)) == NULL)
		goto out;
	snprintf(path, sizeof(path), "/v1/sandboxes/%s/move", d->sbx);
	if (space_control(d->c, "POST", path, body, &a) < 0 || !space_answer_ok(&a)) {
		ret = unexpected(d, "move: %s", space_answer_strerror(&a, back, sizeof(back)));
		goto out;
	}
	json_decref(s);
	s = NULL;
	if (cli_wait_state("demo", d->c, d->sbx, "running", d->w2, 60, &s) != 0) {
		ret = unexpected(d, "the sandbox did not come to serve on %s", d->w2);
		goto out;
	}
	detail("now generation %" JSON_INTEGER_FORMAT " on %s; %s has retired generation %" PRIu64,
	    json_integer_value(json_object_get(json_object_get(s, "execution"), "generation")),
	    d->w2, d->w1, oldid.generation);

	say(d, "Replay the OLD capability (gen %" PRIu64 ", unexpired) at %s's node-api.",
	    oldid.generation, d->w1);
	replay(d, d->ep1, old.capability, &a);
	show_refusal(&a);
	if (a.status != 409 || strcmp(a.error, "refresh_route") != 0) {
		ret = unexpected(d, "want 409 refresh_route, got HTTP %ld %s", a.status, a.error);
		goto out;
	}

	say(d, "Replay the OLD capability at %s's node-api.", d->w2);
	replay(d, d->ep2, old.capability, &a);
	show_refusal(&a);
	if (a.status != 409 || strcmp(a.error, "refresh_route") != 0) {
		ret = unexpected(d, "want 409 refresh_route, got HTTP %ld %s", a.status, a.error);
		goto out;
	}

	say(d, "Take a NEW capability and send it to the wrong destination, %s.", d->w1);
	if (get_route(d, &fresh, &newid) < 0)
		goto out;
	detail("new route: gen %" PRIu64 " on %s", newid.generation, newid.worker);
	if (newid.generation <= oldid.generation || strcmp(newid.worker, d->w2) != 0) {
		ret = unexpected(d, "the new route is gen %" PRIu64 " on %s", newid.generation,
		    newid.worker);
		goto out;
	}
	replay(d, d->ep1, fresh.capability, &a);
	show_refusal(&a);
	if (a.status != 409) {
		ret = unexpected(d, "want 409 (refused before forwarding), got HTTP %ld %s",
		    a.status, a.error);
		goto out;
	}

	say(d, "The client, whose route cache still holds gen %" PRIu64 " on %s, reads %s.",
	    oldid.generation, d->w1, DEMO_PATH);
	strcpy(tmpl, "/tmp/space-demo.XXXXXX");
	if ((outfd = mkstemp(tmpl)) < 0) {
		ret = cli_fail("demo", "mkstemp: %s", strerror(errno));
		goto out;
	}
	unlink(tmpl);
	memset(&op, 0, sizeof(op));
	op.access = "fs:r";
	op.method = "GET";
	op.path = "files?path=%2Fhome%2Fuser%2Fdemo.txt";
	op.in_fd = -1;
	op.out_fd = outfd;
	op.timeout = 60;
	if (space_sbx_op(d->c, d->sbx, &op, &a) < 0 || !space_answer_ok(&a)) {
		ret = unexpected(d, "read: %s", space_answer_strerror(&a, back, sizeof(back)));
		goto out;
	}
	detail("first attempt, from the cache: %s", d->c->refusal[0] ? d->c->refusal : "not refused");
	detail("repaired to gen %" PRIu64 " on %s; %d attempts, %d rebuilt attempt%s; served by "
	    "gen %s on %s", d->c->last.route.generation, d->c->last.route.worker,
	    d->c->last.attempts, d->c->rebuilt, d->c->rebuilt == 1 ? "" : "s", a.generation,
	    a.worker);
	if (!d->c->last.from_cache || !d->c->last.repaired || d->c->rebuilt != 1 ||
	    d->c->last.attempts != 2 || strstr(d->c->refusal, "refresh_route") == NULL) {
		ret = unexpected(d, "want a cached first attempt and exactly one rebuilt attempt "
		    "(got %d attempts, %d rebuilt, from cache %s)", d->c->last.attempts, d->c->rebuilt,
		    d->c->last.from_cache ? "yes" : "no");
		goto out;
	}
	if (lseek(outfd, 0, SEEK_SET) != 0 || (n = read(outfd, back, sizeof(back) - 1)) < 0) {
		ret = cli_fail("demo", "reading back: %s", strerror(errno));
		goto out;
	}
	back[n] = '\0';
	if (strcmp(back, content) != 0) {
		ret = unexpected(d, "read back '%s', wrote '%s'", back, content);
		goto out;
	}
	detail("content equal: %s", content[0] ? strtok(content, "\n") : "");
	printf("\nAll steps behaved as expected: the old capability was refused at both workers,\n"
	    "the new one at the old worker, and the client repaired its route with one\n"
	    "rebuilt attempt.\n");
	ret = 0;
out:
	if (d->sbx[0] && !keep) {
		snprintf(path, sizeof(path), "/v1/sandboxes/%s", d->sbx);
		space_control(d->c, "DELETE", path, NULL, &a);
	} else if (d->sbx[0])
		printf("(kept sandbox %s)\n", d->sbx);
	if (fd >= 0)
		close(fd);
	if (outfd >= 0)
		close(outfd);
	space_route_free(&old);
	space_route_free(&fresh);
	json_decref(body);
	json_decref(s);
	space_answer_clear(&a);
	fflush(stdout);
	return ret;
}

int
cmd_demo(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "data-dir", required_argument, NULL, 'd' },
		{ "keep", no_argument, NULL, 'k' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	struct cli_api api = { NULL, NULL };
	struct demo d;
	char dir[] = "/tmp/space-demo-routes.XXXXXX", cache[64];
	const char *data = NULL;
	int ch, keep = 0, ret = 1;

	memset(&d, 0, sizeof(d));
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, &api)) != -1) {
		switch (ch) {
		case 'd': data = optarg; break;
		case 'k': keep = 1; break;
		default: return cli_usage("demo", USAGE, ch == 'h');
		}
	}
	if (optind != argc)
		return cli_usage("demo", USAGE, 0);
	if (data && load_env(data) != 0)
		return 1;
	if ((d.c = cli_client("demo", &api)) == NULL)
		return 1;
	/* a route cache of its own, so the demo neither reads nor changes
	 * the user's routes */
	if (mkdtemp(dir) == NULL) {
		space_client_free(d.c);
		return cli_fail("demo", "mkdtemp: %s", strerror(errno));
	}
	snprintf(cache, sizeof(cache), "%s/routes.json", dir);
	d.c->route_cache_path = strdup(cache);
	if (d.c->route_cache_path != NULL)
		ret = run(&d, keep);
	space_client_free(d.c);         /* saves the cache: removed below */
	unlink(cache);
	snprintf(cache, sizeof(cache), "%s/routes.json.lock", dir);
	unlink(cache);
	rmdir(dir);
	return ret;
}
