/* space-control apikey add | list | revoke: the API keys and their quotas.
 *
 *   apikey add NAME [--max-sandboxes N] [--max-memory-mb N]
 *                   [--creates-per-minute N] --data-dir D
 *   apikey list --data-dir D
 *   apikey revoke ID|NAME --data-dir D
 *   apikey revoke -- ID --data-dir D     (an id that begins with '-', as
 *                                        ids made before they were kept
 *                                        from doing so could)
 *
 * A quota is the key's own (0 or absent = no limit); the daemon applies it
 * in the create's transaction (lifecycle.c). A revoked key is refused from
 * the next request on: the daemon looks every key up in the store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control.h"
#include "log.h"
#include "util.h"

#define QUOTA_MAX (1 << 24)

static int
quota_value(const char *flag, const char *v, int64_t *out)
{
	char *end;
	long long n;

	errno = 0;
	n = v ? strtoll(v, &end, 10) : -1;
	if (v == NULL || errno || end == v || *end || n < 0 || n > QUOTA_MAX) {
		fprintf(stderr, "space-control: apikey add: %s must be an integer in 0..%d\n", flag,
		    QUOTA_MAX);
		return -EINVAL;
	}
	*out = n;
	return 0;
}

/* the quota flags are taken out of argv (they are not daemon settings:
 * --max-memory-mb of `serve` is a per-sandbox maximum); the rest is left
 * to control_parse. argv is compacted in place, *argc updated. */
static int
take_quota(int *argc, char **argv, struct key_quota *q)
{
	static const char *const flags[] = { "--max-sandboxes", "--max-memory-mb",
	    "--creates-per-minute" };
	int64_t *dst[] = { &q->max_sandboxes, &q->max_memory_mb, &q->creates_per_minute };
	int i, j, k, n = 0;

	memset(q, 0, sizeof(*q));
	for (i = 0; i < *argc; i++) {
		for (k = 0; k < 3; k++) {
			size_t l = strlen(flags[k]);
			if (strncmp(argv[i], flags[k], l) != 0)
				continue;
			if (argv[i][l] == '=') {
				if (quota_value(flags[k], argv[i] + l + 1, dst[k]) < 0)
					return -EINVAL;
				break;
			}
			if (argv[i][l] == '\0') {
				if (quota_value(flags[k], i + 1 < *argc ? argv[i + 1] : NULL, dst[k]) < 0)
					return -EINVAL;
				i++;
				break;
			}
		}
		if (k == 3)
			argv[n++] = argv[i];
	}
	for (j = n; j < *argc; j++)
		argv[j] = NULL;
	*argc = n;
	return 0;
}

static int
apikey_list(int argc, char **argv)
{
	struct config cfg;
	struct store *st;
	json_t *arr = NULL, *k, *q;
	size_t i;
	int rc;

	if ((rc = control_parse(argc, argv, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG, cfg.verbose);
	if ((st = control_store_open(&cfg)) == NULL)
		return 1;
	rc = st->ops->apikey_list(st, &arr);
	st->ops->close(st);
	if (rc < 0) {
		fprintf(stderr, "space-control: apikey list: %s\n", strerror(-rc));
		return 1;
	}
	/* ids are the public lookup prefix of each key, never the key */
	printf("%-14s %-20s %-21s %-21s %-9s %-10s %s\n", "ID", "NAME", "CREATED", "REVOKED",
	    "SANDBOXES", "MEMORY_MB", "CREATES/MIN");
	json_array_foreach(arr, i, k) {
		q = json_object_get(k, "quota");
		printf("%-14s %-20s %-21s %-21s %-9lld %-10lld %lld\n",
		    json_string_value(json_object_get(k, "id")),
		    json_string_value(json_object_get(k, "principal")),
		    json_string_value(json_object_get(k, "created_at")),
		    json_is_string(json_object_get(k, "revoked_at")) ?
		    json_string_value(json_object_get(k, "revoked_at")) : "-",
		    (long long)json_integer_value(json_object_get(q, "max_sandboxes")),
		    (long long)json_integer_value(json_object_get(q, "max_memory_mb")),
		    (long long)json_integer_value(json_object_get(q, "creates_per_minute")));
	}
	json_decref(arr);
	return fflush(stdout) == 0 ? 0 : 1;
}

static int
apikey_revoke(int argc, char **argv)
{
	struct config cfg;
	struct store *st;
	const char *who;
	int rc;

	if (argc >= 3 && strcmp(argv[1], "--") == 0) {
		/* the id after "--" is taken as it is; the rest parsed as usual */
		argv[1] = argv[0];
		argc--;
		argv++;
	} else if (argc < 2 || argv[1][0] == '-') {
		fprintf(stderr, "space-control: apikey revoke ID|NAME --data-dir D\n"
		    "  (an id that begins with '-': apikey revoke -- ID --data-dir D)\n");
		return 2;
	}
	who = argv[1];
	if (!id_valid(who)) {
		fprintf(stderr, "space-control: apikey revoke: not a key id or a name\n");
		return 2;
	}
	if ((rc = control_parse(argc - 1, argv + 1, &cfg)) != 0)
		return rc;
	log_init(CONTROL_PROG, cfg.verbose);
	if ((st = control_store_open(&cfg)) == NULL)
		return 1;
	rc = st->ops->apikey_revoke(st, who);
	st->ops->close(st);
	if (rc < 0) {
		fprintf(stderr, "space-control: apikey revoke: %s\n", strerror(-rc));
		return 1;
	}
	if (rc == 0) {
		fprintf(stderr, "space-control: apikey revoke: no key %s to revoke\n", who);
		return 1;
	}
	printf("revoked %d key(s)\n", rc);
	return 0;
}

int
cmd_apikey(int argc, char **argv)
{
	struct key_quota q;

	if (argc >= 2 && strcmp(argv[1], "list") == 0)
		return apikey_list(argc - 1, argv + 1);
	if (argc >= 2 && strcmp(argv[1], "revoke") == 0)
		return apikey_revoke(argc - 1, argv + 1);
	if (take_quota(&argc, argv, &q) < 0)
		return 2;
	return control_cred_add(argc, argv, "apikey", &q);
}
