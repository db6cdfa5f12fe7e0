/* Per-sandbox access tokens (schema 11, api_access.c) on the PostgreSQL
 * backend: the statements of store_sqlite_access.c in PostgreSQL's
 * dialect. Only hashes are stored; a token of a sandbox that is stopping
 * or killed is not found. Each entry is its own transaction (pg_tx). */
#include <errno.h>
#include <string.h>
#include <libpq-fe.h>

#include "store_pg.h"
#include "util.h"

struct access_x {
	const char *owner, *sandbox, *id;
	const uint8_t *hash;
	uint8_t *hash_out;
	char *sandbox_out;
	int result;
};

static int
add_tx(struct store *s, void *arg)
{
	struct access_x *x = arg;
	PGresult *res;
	int rc;

	res = pg_q(PGS(s), &rc, "SELECT 1 FROM sandboxes WHERE owner = $1 AND id = $2"
	    " AND state NOT IN ('killed', 'stopping')", "ss", x->owner, x->sandbox);
	if (res == NULL)
		return rc;
	x->result = PQntuples(res) == 1;
	PQclear(res);
	if (!x->result)
		return 0;
	/* the newest ones kept, the new one among them */
	if ((rc = pg_run(PGS(s), "DELETE FROM access_tokens WHERE sandbox = $1 AND id NOT IN"
	    " (SELECT id FROM access_tokens WHERE sandbox = $1 ORDER BY created_at DESC, id DESC"
	    " LIMIT $2)", "si", x->sandbox, (int64_t)(ACCESS_TOKENS_KEPT - 1))) < 0)
		return rc;
	return pg_run(PGS(s), "INSERT INTO access_tokens (id, sandbox, hash, created_at)"
	    " VALUES ($1, $2, $3, $4)", "ssbi", x->id, x->sandbox, x->hash, STORE_HASH_LEN,
	    now_unix_ms());
}

int
pg_access_token_add(struct store *s, const char *owner, const char *sandbox, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct access_x x = { .owner = owner, .sandbox = sandbox, .id = id, .hash = hash };
	int rc;

	if ((rc = pg_tx(s, add_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
lookup_tx(struct store *s, void *arg)
{
	struct access_x *x = arg;
	unsigned char *h;
	PGresult *res;
	size_t n = 0;
	int err;

	/* a tenant whose every key was revoked is refused through its
	 * sandboxes' tokens too, from the next request on */
	res = pg_q(PGS(s), &err, "SELECT a.sandbox, a.hash FROM access_tokens a JOIN sandboxes s"
	    " ON s.id = a.sandbox WHERE a.id = $1 AND s.state NOT IN ('killed', 'stopping')"
	    " AND EXISTS (SELECT 1 FROM api_keys k WHERE k.principal = s.owner AND k.revoked_at IS NULL)", "s",
	    x->id);
	if (res == NULL)
		return err;
	x->result = 0;
	if (PQntuples(res) == 1) {
		h = PQunescapeBytea((const unsigned char *)PQgetvalue(res, 0, 1), &n);
		if (h == NULL || n != STORE_HASH_LEN)
			x->result = -EIO;
		else {
			pg_copy(res, 0, 0, x->sandbox_out, SPACE_ID_MAX + 1);
			memcpy(x->hash_out, h, STORE_HASH_LEN);
			x->result = 1;
		}
		PQfreemem(h);
	}
	PQclear(res);
	return x->result < 0 ? x->result : 0;
}

int
pg_access_token_lookup(struct store *s, const char *id, char sandbox[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	struct access_x x = { .id = id, .sandbox_out = sandbox, .hash_out = hash };
	int rc;

	if ((rc = pg_tx(s, lookup_tx, &x)) < 0)
		return rc;
	return x.result == 1 ? 0 : -ENOENT;
}
