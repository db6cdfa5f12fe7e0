/* Authentication of callers. Three kinds of bearer secret, never accepted
 * on each other's endpoints: API keys ("sk_...", users), worker credentials
 * ("wk_...", one per worker) and edge credentials ("ek_...", space-edge:
 * POST /v1/edge/routes and nothing else). A sandbox's traffic token
 * ("tt_...") is no bearer of any endpoint: space-edge passes it in a body.
 * A sandbox's access token ("at_...", api_access.c) is the bearer of one
 * endpoint, that sandbox's POST /v1/sandboxes/{id}/routes. A secret is 32 random bytes; the store keeps
 * its first characters as a public lookup id and the BLAKE2b-256 of the
 * whole secret, so a copy of the database does not hold usable keys. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "control.h"
#include "store_tx.h"
#include "util.h"

#define PREFIX_LEN 3    /* "sk_", "wk_", "ek_", "tt_", "at_" */

int
auth_secret_new(const char *prefix, char *out, size_t cap, char id[STORE_CREDID_LEN + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	uint8_t raw[32];
	char body[SECRET_BODY_LEN + 1];
	int rc = 0;

	if (cap < PREFIX_LEN + SECRET_BODY_LEN + 1)
		return -ENOSPC;
	/* an id is an argument of the commands (apikey revoke ID): one that
	 * began with '-' would read as an option, so such a secret is drawn
	 * again (1 in 64; the secret keeps 255.97 of its 256 bits) */
	do {
		randombytes_buf(raw, sizeof(raw));
		if (b64url_encode(raw, sizeof(raw), body, sizeof(body)) != SECRET_BODY_LEN) {
			rc = -EIO;
			goto out;
		}
	} while (body[0] == '-');
	snprintf(out, cap, "%s%s", prefix, body);
	memcpy(id, body, STORE_CREDID_LEN);
	id[STORE_CREDID_LEN] = '\0';
	crypto_generichash(hash, STORE_HASH_LEN, (const uint8_t *)out, strlen(out), NULL, 0);
out:
	sodium_memzero(raw, sizeof(raw));
	sodium_memzero(body, sizeof(body));
	return rc;
}

/* shape check before any lookup: prefix, exact length, base64url alphabet */
static bool
secret_shape(const char *s, const char *prefix)
{
	size_t i;

	if (strncmp(s, prefix, PREFIX_LEN) != 0 || strlen(s) != PREFIX_LEN + SECRET_BODY_LEN)
		return false;
	for (i = PREFIX_LEN; s[i]; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return false;
	}
	return true;
}

/* look the secret up by its id and compare the full hash in constant
 * time: the id only narrows the search, the hash decides */
static int
check_secret(const char *secret, int (*lookup)(struct store *, const char *, char *, uint8_t *),
    struct store *st, char name[SPACE_ID_MAX + 1])
{
	char id[STORE_CREDID_LEN + 1];
	uint8_t want[STORE_HASH_LEN], got[STORE_HASH_LEN];
	int rc;

	memcpy(id, secret + PREFIX_LEN, STORE_CREDID_LEN);
	id[STORE_CREDID_LEN] = '\0';
	crypto_generichash(got, sizeof(got), (const uint8_t *)secret, strlen(secret), NULL, 0);
	rc = lookup(st, id, name, want);
	if (rc == -ENOENT) {
		/* same work whether or not the id exists */
		memset(want, 0, sizeof(want));
		(void)ct_equal(want, got, sizeof(got));
		return -EACCES;
	}
	if (rc < 0)
		return -EIO;
	if (!ct_equal(want, got, sizeof(got)))
		return -EACCES;
	return 0;
}

int
auth_user(struct ctl *c, const char *bearer, char principal[SPACE_ID_MAX + 1],
    char key_id[STORE_CREDID_LEN + 1], const char **kind)
{
	int rc;

	if (bearer == NULL) {
		*kind = "missing";
		return -EACCES;
	}
	if (strncmp(bearer, "wk_", PREFIX_LEN) == 0) {
		*kind = "worker_credential_on_user_endpoint";
		return -EACCES;
	}
	if (strncmp(bearer, "ek_", PREFIX_LEN) == 0) {
		*kind = "edge_credential_on_user_endpoint";
		return -EACCES;
	}
	if (strncmp(bearer, "at_", PREFIX_LEN) == 0) {
		*kind = "access_token_on_user_endpoint";
		return -EACCES;
	}
	if (!secret_shape(bearer, "sk_")) {
		*kind = "malformed";
		return -EACCES;
	}
	rc = check_secret(bearer, c->st->ops->apikey_lookup, c->st, principal);
	if (rc == -EACCES)
		*kind = "bad_api_key";
	/* the key's public id: its quota applies to what it asks */
	if (rc == 0)
		snprintf(key_id, STORE_CREDID_LEN + 1, "%.*s", STORE_CREDID_LEN, bearer + PREFIX_LEN);
	return rc;
}

int
auth_worker(struct ctl *c, const char *bearer, const char *path_worker, const char **kind)
{
	char worker[SPACE_ID_MAX + 1];
	int rc;

	if (bearer == NULL) {
		*kind = "missing";
		return -EACCES;
	}
	if (strncmp(bearer, "sk_", PREFIX_LEN) == 0) {
		*kind = "api_key_on_worker_endpoint";
		return -EACCES;
	}
	if (!secret_shape(bearer, "wk_")) {
		*kind = "malformed";
		return -EACCES;
	}
	rc = check_secret(bearer, c->st->ops->worker_cred_lookup, c->st, worker);
	if (rc == -EACCES)
		*kind = "bad_worker_credential";
	if (rc < 0)
		return rc;
	/* a worker speaks only for itself: its credential names one worker */
	if (strcmp(worker, path_worker) != 0) {
		*kind = "wrong_worker";
		return -EPERM;
	}
	return 0;
}

int
auth_edge(struct ctl *c, const char *bearer, char name[SPACE_ID_MAX + 1], const char **kind)
{
	int rc;

	if (bearer == NULL) {
		*kind = "missing";
		return -EACCES;
	}
	if (strncmp(bearer, "sk_", PREFIX_LEN) == 0) {
		*kind = "api_key_on_edge_endpoint";
		return -EACCES;
	}
	if (!secret_shape(bearer, "ek_")) {
		*kind = "malformed";
		return -EACCES;
	}
	if (R(c->st)->edgecred_lookup == NULL)
		return -ENOSYS;
	rc = check_secret(bearer, R(c->st)->edgecred_lookup, c->st, name);
	if (rc == -EACCES)
		*kind = "bad_edge_credential";
	return rc;
}

int
auth_traffic_token(struct ctl *c, const char *sandbox, const char *token)
{
	uint8_t want[STORE_HASH_LEN], got[STORE_HASH_LEN];
	int rc;

	if (!secret_shape(token, "tt_"))
		return -EACCES;
	crypto_generichash(got, sizeof(got), (const uint8_t *)token, strlen(token), NULL, 0);
	rc = R(c->st)->traffic_token_get(c->st, sandbox, want);
	if (rc < 0)
		return -EIO;
	if (rc == 0)
		memset(want, 0, sizeof(want));  /* same work when none is set */
	if (!ct_equal(want, got, sizeof(got)) || rc == 0)
		return -EACCES;
	return 0;
}

int
auth_access_token(struct ctl *c, const char *bearer, const char *path_sandbox,
    char owner[SPACE_ID_MAX + 1], const char **kind)
{
	char sandbox[SPACE_ID_MAX + 1];
	int rc;

	if (!secret_shape(bearer, "at_")) {
		*kind = "malformed";
		return -EACCES;
	}
	if (R(c->st)->access_token_lookup == NULL || R(c->st)->sandbox_owner == NULL)
		return -ENOSYS;
	rc = check_secret(bearer, R(c->st)->access_token_lookup, c->st, sandbox);
	if (rc == -EACCES)
		*kind = "bad_access_token";
	if (rc < 0)
		return rc;
	if (strcmp(sandbox, path_sandbox) != 0) {
		*kind = "access_token_of_another_sandbox";
		return -EPERM;
	}
	/* the capability is issued in the owner's name, as for the owner's key */
	rc = R(c->st)->sandbox_owner(c->st, sandbox, owner);
	if (rc < 0)
		return -EIO;
	if (rc == 0) {
		*kind = "bad_access_token";
		return -EACCES;
	}
	return 0;
}
