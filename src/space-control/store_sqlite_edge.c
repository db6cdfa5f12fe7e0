/* The rows of the public entry (schema 8, docs/network.md): edge
 * credentials and the sandboxes' traffic tokens. Only hashes are stored.
 * Each entry is its own transaction (sq_tx). */
#include <errno.h>
#include <string.h>

#include "store_sqlite.h"
#include "util.h"

#define DB(s) (SQ(s)->db)

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

	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO edge_creds (id, name, hash, created_at)"
	    " VALUES (?, ?, ?, ?)", "ssbi", x->b, x->a, x->hash, STORE_HASH_LEN, now_unix()));
}

int
sq_edgecred_add(struct store *s, const char *name, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .a = name, .b = id, .hash = hash };

	return sq_tx(s, edgecred_add_tx, &x);
}

/* 1 and the row's text column 0 / blob column 1, 0 no row */
static int
row_name_hash(struct store *s, sqlite3_stmt *st, char *name, uint8_t *hash)
{
	int rc;

	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1) {
		if (sqlite3_column_bytes(st, 1) != STORE_HASH_LEN)
			rc = -EIO;
		else {
			if (name)
				sq_col_copy(st, 0, name, SPACE_ID_MAX + 1);
			memcpy(hash, sqlite3_column_blob(st, 1), STORE_HASH_LEN);
		}
	}
	sq_stmt_release(st);
	return rc;
}

static int
edgecred_lookup_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;

	x->result = row_name_hash(s, sq_prep(DB(s), "SELECT name, hash FROM edge_creds"
	    " WHERE id = ? AND revoked_at IS NULL", "s", x->b), x->name_out, x->hash_out);
	return x->result < 0 ? x->result : 0;
}

int
sq_edgecred_lookup(struct store *s, const char *id, char name[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .b = id, .name_out = name, .hash_out = hash };
	int rc;

	if ((rc = sq_tx(s, edgecred_lookup_tx, &x)) < 0)
		return rc;
	return x.result == 1 ? 0 : -ENOENT;
}

static int
edgecred_revoke_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	int rc;

	rc = sq_run(DB(s), sq_prep(DB(s), "UPDATE edge_creds SET revoked_at = ?"
	    " WHERE name = ? AND revoked_at IS NULL", "is", now_unix(), x->a));
	x->result = rc == 0 ? sqlite3_changes(DB(s)) : 0;
	return rc;
}

int
sq_edgecred_revoke(struct store *s, const char *name)
{
	struct edge_x x = { .a = name };
	int rc;

	if ((rc = sq_tx(s, edgecred_revoke_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
token_set_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	sqlite3_stmt *st;
	int rc;

	/* the owner's own, running or not, never a killed one */
	st = sq_prep(DB(s), "SELECT 1 FROM sandboxes WHERE owner = ? AND id = ?"
	    " AND state <> 'killed'", "ss", x->a, x->b);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	sq_stmt_release(st);
	if (rc <= 0) {
		x->result = 0;
		return rc;
	}
	x->result = 1;
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO traffic_tokens (sandbox, hash, created_at)"
	    " VALUES (?, ?, ?) ON CONFLICT (sandbox) DO UPDATE SET hash = excluded.hash,"
	    " created_at = excluded.created_at", "sbi", x->b, x->hash, STORE_HASH_LEN, now_unix()));
}

int
sq_traffic_token_set(struct store *s, const char *owner, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .a = owner, .b = id, .hash = hash };
	int rc;

	if ((rc = sq_tx(s, token_set_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
token_get_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;

	/* none for a tenant whose every key was revoked */
	x->result = row_name_hash(s, sq_prep(DB(s), "SELECT t.sandbox, t.hash FROM traffic_tokens t"
	    " JOIN sandboxes s ON s.id = t.sandbox WHERE t.sandbox = ?"
	    " AND EXISTS (SELECT 1 FROM api_keys k WHERE k.principal = s.owner AND k.revoked_at IS NULL)", "s", x->b), NULL, x->hash_out);
	return x->result < 0 ? x->result : 0;
}

int
sq_traffic_token_get(struct store *s, const char *id, uint8_t hash[STORE_HASH_LEN])
{
	struct edge_x x = { .b = id, .hash_out = hash };
	int rc;

	if ((rc = sq_tx(s, token_get_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
owner_tx(struct store *s, void *arg)
{
	struct edge_x *x = arg;
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT owner FROM sandboxes WHERE id = ? AND state <> 'killed'", "s",
	    x->b);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1)
		sq_col_copy(st, 0, x->name_out, SPACE_ID_MAX + 1);
	sq_stmt_release(st);
	x->result = rc;
	return rc < 0 ? rc : 0;
}

int
sq_sandbox_owner(struct store *s, const char *id, char owner[SPACE_ID_MAX + 1])
{
	struct edge_x x = { .b = id, .name_out = owner };
	int rc;

	if ((rc = sq_tx(s, owner_tx, &x)) < 0)
		return rc;
	return x.result;
}
