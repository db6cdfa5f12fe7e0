/* space template: build, import, list, show, rm (docs/templates.md).
 *
 * Images are made here, on the CLI's machine, by Debian's tools, then
 * stored by the control plane by digest: space-control never runs a
 * package manager or parses an image archive, and an untrusted archive is
 * unpacked by an unprivileged process (template_build.c). */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "client.h"
#include "space.h"
#include "template.h"
#include "util.h"

#define USAGE "build|import|list|show|rm ...\n" \
	"  space template build NAME [--suite bookworm] [--packages P1,P2] [--run CMD]...\n" \
	"        [--env K=V]... [--user U] [--workdir D] [--mirror URL] [--cache DIR]\n" \
	"    Build a Debian image with mmdebstrap (as root), store it by digest.\n" \
	"    The mirror is this machine's apt source unless --mirror; --cache DIR\n" \
	"    keeps the image under the digest of these inputs and reuses it.\n" \
	"  space template import NAME FILE\n" \
	"    FILE: an OCI image layout (directory) or a docker save / OCI archive.\n" \
	"  space template list [--json]\n" \
	"  space template show NAME [--json]\n" \
	"  space template rm NAME\n" \
	"  Use one: space create --template NAME."

#define MAX_RUNS 64
#define MAX_ENVS 64

/* PUT the image at path to /v1/templates/blobs/DIGEST */
static int
upload(const char *verb, struct space_client *c, const char *path, const char *digest,
    uint64_t size)
{
	char url[4096], authz[600];
	struct curl_slist *h = NULL;
	long status = 0;
	CURLcode rc;
	CURL *cu;
	FILE *f;
	int ret = 1;

	if ((f = fopen(path, "rbe")) == NULL)
		return cli_fail(verb, "%s: %s", path, strerror(errno));
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK || (cu = curl_easy_init()) == NULL) {
		fclose(f);
		return cli_fail(verb, "libcurl is not available");
	}
	snprintf(url, sizeof(url), "%s/v1/templates/blobs/%s", c->api_url, digest);
	snprintf(authz, sizeof(authz), "Authorization: Bearer %s", c->api_key);
	h = curl_slist_append(h, authz);
	h = curl_slist_append(h, "Content-Type: application/octet-stream");
	explicit_bzero(authz, sizeof(authz));
	curl_easy_setopt(cu, CURLOPT_URL, url);
	curl_easy_setopt(cu, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(cu, CURLOPT_READDATA, f);
	curl_easy_setopt(cu, CURLOPT_INFILESIZE_LARGE, (curl_off_t)size);
	curl_easy_setopt(cu, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(cu, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(cu, CURLOPT_PROTOCOLS_STR, "http,https");
	/* the answer is a small JSON object: not printed */
	curl_easy_setopt(cu, CURLOPT_WRITEFUNCTION, NULL);
	curl_easy_setopt(cu, CURLOPT_WRITEDATA, fopen("/dev/null", "we"));
	rc = curl_easy_perform(cu);
	curl_easy_getinfo(cu, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK)
		cli_fail(verb, "upload: %s", curl_easy_strerror(rc));
	else if (status != 200 && status != 201)
		cli_fail(verb, "upload refused: HTTP %ld", status);
	else
		ret = 0;
	curl_slist_free_all(h);
	curl_easy_cleanup(cu);
	fclose(f);
	return ret;
}

/* store the image and name it: its digest is what sandboxes record */
static int
publish(const char *verb, struct space_client *c, const char *name, const char *img,
    json_t *meta, int json)
{
	char digest[TPL_DIGEST_HEX + 1];
	struct space_answer a;
	uint64_t size;
	json_t *req;
	int fd, r, ret = 1;

	if ((fd = open(img, O_RDONLY | O_CLOEXEC)) < 0)
		return cli_fail(verb, "%s: %s", img, strerror(errno));
	r = tpl_digest_fd(fd, digest, &size);
	close(fd);
	if (r < 0)
		return cli_fail(verb, "%s: %s", img, strerror(-r));
	if (upload(verb, c, img, digest, size) != 0)
		return 1;
	space_answer_init(&a);
	req = json_pack("{s:s,s:s,s:O}", "name", name, "digest", digest, "meta", meta);
	if (req != NULL && cli_request(verb, c, "POST", "/v1/templates", req, &a) == 0) {
		if (json)
			ret = cli_print_json(a.body) != 0;
		else
			ret = printf("%s %s (%llu bytes)\n", name, digest,
			    (unsigned long long)size) < 0 || fflush(stdout) != 0;
	}
	json_decref(req);
	space_answer_clear(&a);
	return ret;
}

static char *
workdir_make(const char *verb)
{
	const char *t = getenv("TMPDIR");
	char p[4096];

	snprintf(p, sizeof(p), "%s/space-template.XXXXXX", t && *t ? t : "/var/tmp");
	if (mkdtemp(p) == NULL) {
		cli_fail(verb, "mkdtemp %s: %s", p, strerror(errno));
		return NULL;
	}
	return strdup(p);
}

/* digest of the build's inputs, the --cache key */
static void
inputs_key(json_t *inputs, char key[TPL_DIGEST_HEX + 1])
{
	struct tpl_hash h;
	char *s = json_dumps(inputs, JSON_COMPACT | JSON_SORT_KEYS);

	tpl_hash_init(&h);
	if (s)
		tpl_hash_update(&h, s, strlen(s));
	tpl_hash_final(&h, key);
	free(s);
}

static int
copy_file(const char *from, const char *to)
{
	char buf[1 << 16], tmp[4200];
	ssize_t n;
	int in, out, r = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.part", to) >= sizeof(tmp))
		return -ENAMETOOLONG;
	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return -errno;
	if ((out = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0) {
		r = -errno;
		close(in);
		return r;
	}
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			r = -EIO;
			break;
		}
	if (n < 0)
		r = -errno;
	close(in);
	if (close(out) < 0 && r == 0)
		r = -errno;
	if (r == 0 && rename(tmp, to) < 0)
		r = -errno;
	if (r < 0)
		unlink(tmp);
	return r;
}

static int
t_build(int argc, char **argv, struct cli_api *api)
{
	static const struct option lo[] = {
		{ "suite", required_argument, NULL, 's' },
		{ "packages", required_argument, NULL, 'p' },
		{ "run", required_argument, NULL, 'r' },
		{ "env", required_argument, NULL, 'e' },
		{ "user", required_argument, NULL, 'u' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "mirror", required_argument, NULL, 'm' },
		{ "cache", required_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	const char *verb = "template build", *suite = "bookworm", *pkgs = NULL, *user = "user";
	const char *wd = NULL, *cache = NULL, *runs[MAX_RUNS], *envs[MAX_ENVS];
	char *mirror = NULL, *work = NULL, root[4200], img[4200], cimg[4200], cmeta[4200];
	char key[TPL_DIGEST_HEX + 1], *hooks[MAX_RUNS + 1], *mm[32 + 2 * MAX_RUNS];
	int ch, json = 0, nrun = 0, nenv = 0, ret = 1, i, n = 0;
	struct space_client *c = NULL;
	json_t *meta = NULL, *env = NULL, *inputs = NULL, *jr;
	long uid, gid;
	struct stat st;

	memset(hooks, 0, sizeof(hooks));
	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, api)) != -1) {
		switch (ch) {
		case 's': suite = optarg; break;
		case 'p': pkgs = optarg; break;
		case 'r':
			if (nrun == MAX_RUNS)
				return cli_fail(verb, "at most %d --run", MAX_RUNS);
			runs[nrun++] = optarg;
			break;
		case 'e':
			if (nenv == MAX_ENVS || strchr(optarg, '=') == NULL || optarg[0] == '=')
				return cli_fail(verb, "--env K=V, at most %d", MAX_ENVS);
			envs[nenv++] = optarg;
			break;
		case 'u': user = optarg; break;
		case 'w': wd = optarg; break;
		case 'm': mirror = strdup(optarg); break;
		case 'c': cache = optarg; break;
		case 'j': json = 1; break;
		default: return cli_usage("template", USAGE, ch == 'h');
		}
	}
	if (optind + 1 != argc || !id_valid(argv[optind]))
		return cli_usage("template", USAGE, 0);
	if (wd && wd[0] != '/')
		return cli_fail(verb, "--workdir must be absolute");
	if (strspn(suite, "abcdefghijklmnopqrstuvwxyz-") != strlen(suite))
		return cli_fail(verb, "bad --suite '%s'", suite);
	if (pkgs && strspn(pkgs, "abcdefghijklmnopqrstuvwxyz0123456789+-.,:") != strlen(pkgs))
		return cli_fail(verb, "bad --packages '%s' (names separated by commas)", pkgs);
	if (mirror == NULL && (mirror = tpl_apt_mirror()) == NULL)
		return cli_fail(verb, "no Debian mirror in /etc/apt/sources.list*; give --mirror URL");
	if ((c = cli_client(verb, api)) == NULL)
		goto out;
	env = json_pack("{s:s}", "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
	for (i = 0; i < nenv; i++) {
		char k[256];
		size_t kl = strcspn(envs[i], "=");
		if (kl >= sizeof(k)) {
			cli_fail(verb, "--env name too long");
			goto out;
		}
		memcpy(k, envs[i], kl);
		k[kl] = '\0';
		json_object_set_new(env, k, json_string(envs[i] + kl + 1));
	}
	jr = json_array();
	for (i = 0; i < nrun; i++)
		json_array_append_new(jr, json_string(runs[i]));
	inputs = json_pack("{s:i,s:s,s:s,s:s?,s:o,s:O,s:s,s:s?}", "v", 1, "suite", suite,
	    "mirror", mirror, "packages", pkgs, "run", jr, "env", env, "user", user,
	    "workdir", wd);
	inputs_key(inputs, key);
	if (cache) {
		snprintf(cimg, sizeof(cimg), "%s/%s.img", cache, key);
		snprintf(cmeta, sizeof(cmeta), "%s/%s.json", cache, key);
		json_error_t e;
		if (stat(cimg, &st) == 0 && (meta = json_load_file(cmeta, 0, &e)) != NULL) {
			fprintf(stderr, "space: %s: inputs %.12s are cached in %s\n", verb, key, cache);
			ret = publish(verb, c, argv[optind], cimg, meta, json);
			goto out;
		}
	}
	if (geteuid() != 0) {
		cli_fail(verb, "mmdebstrap builds the tree as root: run as root");
		goto out;
	}
	if ((work = workdir_make(verb)) == NULL)
		goto out;
	snprintf(root, sizeof(root), "%s/root", work);
	snprintf(img, sizeof(img), "%s/image.sqfs", work);
	mm[n++] = "mmdebstrap";
	mm[n++] = "--quiet";
	mm[n++] = "--variant=minbase";
	mm[n++] = "--mode=root";
	if (pkgs) {
		static char inc[4200];
		snprintf(inc, sizeof(inc), "--include=%s", pkgs);
		mm[n++] = inc;
	}
	/* the sandbox user every template has unless --user says otherwise */
	mm[n++] = "--customize-hook=chroot \"$1\" sh -c 'getent passwd 1000 >/dev/null || "
	    "useradd -u 1000 -U -s /bin/sh -d /home/user user'";
	for (i = 0; i < nrun; i++) {
		char *q;
		/* the command goes to the chroot's sh as one single-quoted word */
		size_t len = strlen(runs[i]) * 4 + 64;
		if ((hooks[i] = malloc(len)) == NULL)
			goto out;
		q = hooks[i] + sprintf(hooks[i], "--customize-hook=chroot \"$1\" sh -c '");
		for (const char *p = runs[i]; *p; p++)
			q += *p == '\'' ? sprintf(q, "'\\''") : sprintf(q, "%c", *p);
		strcpy(q, "'");
		mm[n++] = hooks[i];
	}
	mm[n++] = (char *)suite;
	mm[n++] = root;
	mm[n++] = mirror;
	mm[n] = NULL;
	fprintf(stderr, "space: %s: mmdebstrap %s from %s (a few minutes)\n", verb, suite, mirror);
	if (tpl_run(verb, mm, -1) != 0)
		goto out;
	if (tpl_resolve_user(verb, root, user, &uid, &gid) != 0)
		goto out;
	meta = json_pack("{s:i,s:I,s:I,s:O,s:s}", "version", 1, "uid", (json_int_t)uid,
	    "gid", (json_int_t)gid, "env", env, "source", "debian");
	if (wd)
		json_object_set_new(meta, "workdir", json_string(wd));
	if (tpl_write_meta(verb, root, meta) != 0 || tpl_squash(verb, root, img, false) != 0)
		goto out;
	if (cache) {
		mkdir(cache, 0755);
		if (copy_file(img, cimg) < 0 || json_dump_file(meta, cmeta, 0) < 0)
			fprintf(stderr, "space: %s: could not keep the image in %s\n", verb, cache);
	}
	ret = publish(verb, c, argv[optind], img, meta, json);
out:
	if (work) {
		tpl_rmtree(work);
		free(work);
	}
	for (i = 0; i < nrun; i++)
		free(hooks[i]);
	free(mirror);
	json_decref(meta);
	json_decref(env);
	json_decref(inputs);
	space_client_free(c);
	return ret;
}

static int
t_import(int argc, char **argv, struct cli_api *api)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	const char *verb = "template import";
	char *work = NULL, root[4200], img[4200];
	struct space_client *c = NULL;
	json_t *meta = NULL;
	int ch, json = 0, ret = 1;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, api)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		default: return cli_usage("template", USAGE, ch == 'h');
		}
	}
	if (optind + 2 != argc || !id_valid(argv[optind]))
		return cli_usage("template", USAGE, 0);
	if ((c = cli_client(verb, api)) == NULL || (work = workdir_make(verb)) == NULL)
		goto out;
	snprintf(root, sizeof(root), "%s/root", work);
	snprintf(img, sizeof(img), "%s/image.sqfs", work);
	meta = json_pack("{s:i,s:i,s:i,s:s}", "version", 1, "uid", 0, "gid", 0, "source", "oci");
	if (tpl_import_tree(verb, argv[optind + 1], work, root, meta) != 0 ||
	    tpl_write_meta(verb, root, meta) != 0 || tpl_squash(verb, root, img, true) != 0)
		goto out;
	ret = publish(verb, c, argv[optind], img, meta, json);
out:
	if (work) {
		tpl_rmtree(work);
		free(work);
	}
	json_decref(meta);
	space_client_free(c);
	return ret;
}

static void
print_templates(const json_t *list, const char *arg)
{
	json_t *t;
	size_t i;

	(void)arg;
	printf("%-24s %-14s %-12s %s\n", "NAME", "DIGEST", "SIZE", "CREATED");
	json_array_foreach(list, i, t) {
		char sz[32];
		cli_jscalar(sz, sizeof(sz), json_object_get(t, "size"));
		printf("%-24s %-14.12s %-12s %s\n", cli_jstr(t, "name", "?"),
		    json_is_true(json_object_get(t, "builtin")) ? "(built in)" :
		    cli_jstr(t, "digest", "?"), json_is_true(json_object_get(t, "builtin")) ? "-" : sz,
		    cli_jstr(t, "created_at", "-"));
	}
}

static void
print_template(const json_t *t, const char *arg)
{
	json_t *m = json_object_get(t, "meta"), *env = json_object_get(m, "env"), *v;
	const char *k;
	char b[64];

	(void)arg;
	printf("%-10s %s\n", "name", cli_jstr(t, "name", "?"));
	if (json_is_true(json_object_get(t, "builtin"))) {
		printf("%-10s the host's /usr, read-only (built in)\n", "image");
		return;
	}
	printf("%-10s %s\n", "digest", cli_jstr(t, "digest", "?"));
	cli_jscalar(b, sizeof(b), json_object_get(t, "size"));
	printf("%-10s %s bytes\n", "size", b);
	printf("%-10s %s\n", "source", cli_jstr(m, "source", "-"));
	printf("%-10s %s\n", "owner", cli_jstr(t, "owner", "-"));
	printf("%-10s %s\n", "created", cli_jstr(t, "created_at", "-"));
	cli_jscalar(b, sizeof(b), json_object_get(m, "uid"));
	printf("%-10s uid %s", "user", b);
	cli_jscalar(b, sizeof(b), json_object_get(m, "gid"));
	printf(" gid %s\n", b);
	printf("%-10s %s\n", "workdir", cli_jstr(m, "workdir", "/home/user"));
	json_object_foreach(env, k, v)
		printf("%-10s %s=%s\n", "env", k, json_string_value(v) ? json_string_value(v) : "");
}

static int
t_one(int argc, char **argv, struct cli_api *api, const char *method)
{
	static const struct option lo[] = {
		{ "json", no_argument, NULL, 'j' },
		CLI_API_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	const char *verb = method[0] == 'G' ? "template show" : "template rm";
	struct space_client *c = NULL;
	struct space_answer a;
	char path[128];
	int ch, json = 0, ret = 1;

	optind = 0;
	while ((ch = cli_getopt(argc, argv, "hv", lo, api)) != -1) {
		switch (ch) {
		case 'j': json = 1; break;
		default: return cli_usage("template", USAGE, ch == 'h');
		}
	}
	if (optind + 1 != argc || !id_valid(argv[optind]))
		return cli_usage("template", USAGE, 0);
	space_answer_init(&a);
	snprintf(path, sizeof(path), "/v1/templates/%s", argv[optind]);
	if ((c = cli_client(verb, api)) != NULL &&
	    cli_request(verb, c, method, path, NULL, &a) == 0) {
		if (method[0] == 'G')
			ret = cli_print(json, a.body, print_template, NULL);
		else if (json)
			ret = cli_print_json(a.body) != 0;
		else
			ret = printf("%s removed%s\n", argv[optind],
			    json_is_true(json_object_get(a.body, "image_removed")) ?
			    ", and its image" : "") < 0;
	}
	space_answer_clear(&a);
	space_client_free(c);
	return ret;
}

static const struct cli_listing templates = {
	"template list", USAGE, "/v1/templates", "templates", 1, print_templates,
};

int
cmd_template(int argc, char **argv)
{
	struct cli_api api = { NULL, NULL };

	if (argc < 2)
		return cli_usage("template", USAGE, 0);
	if (strcmp(argv[1], "build") == 0)
		return t_build(argc - 1, argv + 1, &api);
	if (strcmp(argv[1], "import") == 0)
		return t_import(argc - 1, argv + 1, &api);
	if (strcmp(argv[1], "list") == 0)
		return cli_list_verb(&templates, argc - 1, argv + 1);
	if (strcmp(argv[1], "show") == 0)
		return t_one(argc - 1, argv + 1, &api, "GET");
	if (strcmp(argv[1], "rm") == 0)
		return t_one(argc - 1, argv + 1, &api, "DELETE");
	return cli_usage("template", USAGE, strcmp(argv[1], "help") == 0 ||
	    strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
}
