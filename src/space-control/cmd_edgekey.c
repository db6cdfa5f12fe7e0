/* space-control edgekey create | revoke: the credentials of space-edge.
 *
 *   edgekey create NAME --data-dir D     prints the secret ("ek_...") once
 *   edgekey revoke NAME --data-dir D
 *
 * An edge credential is a kind of its own (auth.c): it may call POST
 * /v1/edge/routes and nothing else, and the store keeps only its hash. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "store_tx.h"
#include "util.h"

int
cmd_edgekey(int argc, char **argv)
{
	struct config cfg;
	struct store *st;
	char secret[64], id[STORE_CREDID_LEN + 1];
	uint8_t hash[STORE_HASH_LEN];
	const char *verb, *name;
	int rc, ret = 1;

	if (argc < 3 || (strcmp(argv[1], "create") != 0 && strcmp(argv[1], "revoke") != 0)) {
		fprintf(stderr, "usage: space-control edgekey create|revoke NAME --data-dir D\n");
		return 2;
	}
	verb = argv[1];
	name = argv[2];
	if (!id_valid(name)) {
		fprintf(stderr, "space-control: edgekey: NAME must match [A-Za-z0-9_-]{1,%d}\n",
		    SPACE_ID_MAX);
		return 2;
	}
	if ((rc = control_parse(argc - 2, argv + 2, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG, cfg.verbose);
	if ((st = control_store_open(&cfg)) == NULL)
		return 1;
	if (R(st)->edgecred_add == NULL || R(st)->edgecred_revoke == NULL) {
		fprintf(stderr, "space-control: edgekey: edge credentials need the SQLite store for now\n");
		goto out;
	}
	if (strcmp(verb, "revoke") == 0) {
		rc = R(st)->edgecred_revoke(st, name);
		if (rc < 0)
			fprintf(stderr, "space-control: edgekey revoke: %s\n", strerror(-rc));
		else if (rc == 0)
			fprintf(stderr, "space-control: edgekey revoke: no credential %s to revoke\n", name);
		else {
			printf("revoked %s\n", name);
			ret = 0;
		}
		goto out;
	}
	if (auth_secret_new("ek_", secret, sizeof(secret), id, hash) < 0)
		goto out;
	rc = R(st)->edgecred_add(st, name, id, hash);
	if (rc == -EEXIST)
		fprintf(stderr, "space-control: edgekey create: %s already exists\n", name);
	else if (rc < 0)
		fprintf(stderr, "space-control: edgekey create: %s\n", strerror(-rc));
	else {
		printf("%s\n", secret);
		ret = fflush(stdout) == 0 ? 0 : 1;
	}
out:
	sodium_memzero(secret, sizeof(secret));
	st->ops->close(st);
	return ret;
}
