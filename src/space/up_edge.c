/* space up: the public entry. space-edge listens on 127.0.0.1:BASE+80
 * with the domain localhost:BASE+80, so a port of a sandbox is
 * http://{port}-{sandbox}.localhost:BASE+80/ (curl and browsers resolve
 * *.localhost to the loopback). Its edge credential is made once
 * (space-control edgekey create edge) and kept in DIR/edge/credential
 * (0600); the env file gains SPACE_EDGE_URL and SPACE_EDGE_DOMAIN. Its
 * E2B-compatible API (docs/e2b.md) listens on 127.0.0.1:BASE+81; the env
 * file gains what the unmodified E2B SDK reads: E2B_API_URL and
 * E2B_SANDBOX_URL (that listener), E2B_API_KEY (the API key as it is) and
 * E2B_DOMAIN (the edge's domain, for getHost()). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "space.h"
#include "up.h"
#include "util.h"

#define ENV_MAX 8192

/* KEY=value in the env file, replacing any line of KEY */
int
up_env_set(const char *path, const char *key, const char *value)
{
	char *buf = NULL, *out, *line, *save = NULL;
	size_t len = 0, kl = strlen(key), n = 0;
	int rc;

	if ((rc = read_file(path, ENV_MAX, &buf, &len)) < 0)
		return rc;
	if ((out = malloc(len + kl + strlen(value) + 3)) == NULL) {
		free(buf);
		return -ENOMEM;
	}
	for (line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
		if (!(strncmp(line, key, kl) == 0 && line[kl] == '='))
			n += (size_t)sprintf(out + n, "%s\n", line);
	n += (size_t)sprintf(out + n, "%s=%s\n", key, value);
	rc = write_file_atomic(path, out, n, 0600);
	sodium_memzero(buf, len);
	sodium_memzero(out, n);
	free(buf);
	free(out);
	return rc;
}

int
up_edge_start(struct up *up, const char *control_url, char *edge_url, size_t cap)
{
	char dir[UP_PATH_MAX + 16], cred[UP_PATH_MAX + 32], bin[UP_PATH_MAX + 32];
	char ddir[UP_PATH_MAX + 32], log[UP_PATH_MAX + 64], env[UP_PATH_MAX + 16];
	char secret[256], listen[64], domain[64], e2b_listen[64], e2b_url[80], key[256];
	int rc, port = up->port + UP_EDGE_OFFSET;

	snprintf(dir, sizeof(dir), "%s/edge", up->dir);
	snprintf(cred, sizeof(cred), "%s/credential", dir);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return cli_fail("up", "cannot make %s: %s", dir, strerror(errno)), -errno;
	if (access(cred, F_OK) != 0) {
		char *argv[] = { bin, "edgekey", "create", "edge", "--data-dir", ddir, NULL };

		snprintf(bin, sizeof(bin), "%s/space-control", up->bindir);
		snprintf(ddir, sizeof(ddir), "%s/control", up->dir);
		snprintf(log, sizeof(log), "%s/logs/space-control-admin.log", up->dir);
		rc = up_capture(argv, log, secret, sizeof(secret));
		if (rc == 0 && (!up_token_ok(secret) || strncmp(secret, "ek_", 3) != 0))
			rc = -EPROTO;
		if (rc == 0)
			rc = write_file_atomic(cred, secret, strlen(secret), 0600);
		sodium_memzero(secret, sizeof(secret));
		if (rc < 0)
			return cli_fail("up", "cannot make the edge credential (%s); see %s",
			    strerror(-rc), log), rc;
	}
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
	snprintf(domain, sizeof(domain), "localhost:%d", port);
	snprintf(e2b_listen, sizeof(e2b_listen), "127.0.0.1:%d", up->port + UP_E2B_OFFSET);
	snprintf(e2b_url, sizeof(e2b_url), "http://%s", e2b_listen);
	snprintf(bin, sizeof(bin), "%s/space-edge", up->bindir);
	{
		char *argv[] = { bin, "--listen", listen, "--control", (char *)control_url,
		    "--domain", domain, "--edge-credential-file", cred, "--user", "nobody",
		    "--e2b-listen", e2b_listen, NULL };
		if ((rc = up_child_start(up, "space-edge", argv)) < 0)
			return cli_fail("up", "cannot start space-edge: %s", uv_strerror(rc)), rc;
	}
	snprintf(edge_url, cap, "http://%s", domain);
	snprintf(env, sizeof(env), "%s/env", up->dir);
	if ((rc = up_env_set(env, "SPACE_EDGE_URL", edge_url)) < 0 ||
	    (rc = up_env_set(env, "SPACE_EDGE_DOMAIN", domain)) < 0)
		return cli_fail("up", "cannot write %s: %s", env, strerror(-rc)), rc;
	if ((rc = up_env_get(env, "SPACE_API_KEY", key, sizeof(key))) < 0 ||
	    (rc = up_env_set(env, "E2B_API_URL", e2b_url)) < 0 ||
	    (rc = up_env_set(env, "E2B_SANDBOX_URL", e2b_url)) < 0 ||
	    (rc = up_env_set(env, "E2B_API_KEY", key)) < 0 ||
	    (rc = up_env_set(env, "E2B_DOMAIN", domain)) < 0) {
		sodium_memzero(key, sizeof(key));
		return cli_fail("up", "cannot write the E2B variables to %s: %s", env,
		    strerror(-rc)), rc;
	}
	sodium_memzero(key, sizeof(key));
	return 0;
}
