/* The rows of the public entry (schema 8, docs/network.md) on the
 * PostgreSQL backend: edge credentials and the sandboxes' traffic tokens,
 * the statements of store_sqlite_edge.c in PostgreSQL's dialect. Only
 * hashes are stored. Each entry is its own transaction (pg_tx). */
#include <errno.h>
#include <string.h>
#include <libpq-fe.h>

#include "store_pg.h"
#include "util.h"

struct edge_x {
	const char *a, *b;
	const uint8_t *hash;
	uint8_t *hash_out;
	char *name_out;
	int result;
};

static int
edgecred_add_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;

	return pg_run(PGS(s), "INSERT INTO edge_creds (id, name, hash, created_at)"
	    " VALUES ($1, $2, $3, $4)", "ssbi", x->b, x->a, x->hash, STORE_HASH_LEN, now_unix());
}

int
pg_edgecred_add(struct store *s, const char *name, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .a = name, .b = id, .hash = hash };

	return pg_tx(s, edgecred_add_tx, &x);
}

/* 1 and the row's text column 0 / bytea column 1, 0 no row */
static int
row_name_hash(PGresult *res, int err, char *name, uint8_t *hash)
{
	size_t n = 0;
	unsigned char *h;
	int rc = 0;

	if (res == NULL)
		return err;
	if (PQntuples(res) == 1) {
		h = PQunescapeBytea((const unsigned char *)PQgetvalue(res, 0, 1), &n);
		if (h == NULL || n != STORE_HASH_LEN) {
			rc = -EIO;
		} else {
			if (name)
				pg_copy(res, 0, 0, name, SPACE_ID_MAX + 1);
			memcpy(hash, h, STORE_HASH_LEN);
			rc = 1;
		}
		PQfreemem(h);
	}
	PQclear(res);
	return rc;
}

static int
edgecred_lookup_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	PGresult *res;
	int err;

	res = pg_q(PGS(s), &err, "SELECT name, hash FROM edge_creds WHERE id = $1"
	    " AND revoked_at IS NULL", "s", x->b);
	x->result = row_name_hash(res, err, x->name_out, x->hash_out);
	return x->result < 0 ? x->result : 0;
}

int
pg_edgecred_lookup(struct store *s, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .b = id, .name_out = name, .hash_out = hash };
	int rc;

	if ((rc = pg_tx(s, edgecred_lookup_tx, &x)) < 0)
		return rc;
	return x.result == 1 ? 0 : -ENOENT;
}

static int
edgecred_revoke_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	int rc;

	rc = pg_run(PGS(s), "UPDATE edge_creds SET revoked_at = $1"
	    " WHERE name = $2 AND revoked_at IS NULL", "is", now_unix(), x->a);
	x->result = rc == 0 ? (int)PGS(s)->changes : 0;
	return rc;
}

int
pg_edgecred_revoke(struct store *s, const char *name)
{
	struct edge_x x = { .a = name };
	int rc;

	if ((rc = pg_tx(s, edgecred_revoke_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
token_set_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	PGresult *res;
	int rc;

	/* the owner's own, running or not, never a killed one */
	res = pg_q(PGS(s), &rc, "SELECT 1 FROM sandboxes WHERE owner = $1 AND id = $2"
	    " AND state <> 'killed'", "ss", x->a, x->b);
	if (res == NULL)
		return rc;
	x->result = PQntuples(res) == 1;
	PQclear(res);
	if (!x->result)
		return 0;
	return pg_run(PGS(s), "INSERT INTO traffic_tokens (sandbox, hash, created_at)"
	    " VALUES ($1, $2, $3) ON CONFLICT (sandbox) DO UPDATE SET hash = excluded.hash,"
	    " created_at = excluded.created_at", "sbi", x->b, x->hash, STORE_HASH_LEN, now_unix());
}

int
pg_traffic_token_set(struct store *s, const char *owner, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .a = owner, .b = id, .hash = hash };
	int rc;

	if ((rc = pg_tx(s, token_set_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
token_get_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	PGresult *res;
	int err;

	/* none for a tenant whose every key was revoked */
	res = pg_q(PGS(s), &err, "SELECT t.sandbox, t.hash FROM traffic_tokens t"
	    " JOIN sandboxes s ON s.id = t.sandbox WHERE t.sandbox = $1"
	    " AND EXISTS (SELECT 1 FROM api_keys k WHERE k.principal = s.owner AND k.revoked_at IS NULL)", "s", x->b);
	x->result = row_name_hash(res, err, NULL, x->hash_out);
	return x->result < 0 ? x->result : 0;
}

int
pg_traffic_token_get(struct store *s, const char *id, uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .b = id, .hash_out = hash };
	int rc;

	if ((rc = pg_tx(s, token_get_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
owner_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	PGresult *res;
	int rc;

	res = pg_q(PGS(s), &rc, "SELECT owner FROM sandboxes WHERE id = $1 AND state <> 'killed'",
	    "s", x->b);
	if (res == NULL)
		return rc;
	x->result = PQntuples(res) == 1;
	if (x->result)
		pg_copy(res, 0, 0, x->name_out, SPACE_ID_MAX + 1);
	PQclear(res);
	return 0;
}

int
pg_sandbox_owner(struct store *s, const char *id, char owner[SPACE_ID_MAX + 1])
{
	struct edge_x x = { .b = id, .name_out = owner };
	int rc;

	if ((rc = pg_tx(s, owner_tx, &x)) < 0)
		return rc;
	return x.result;
}
