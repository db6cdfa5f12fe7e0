/* Per-sandbox access tokens (schema 11, api_access.c): hashed as API keys
 * are, several per sandbox, looked up by their public id. A token of a
 * sandbox that is stopping or killed is not found: it is revoked with its
 * sandbox. Each entry is its own transaction (sq_tx). */
#include <errno.h>
#include <string.h>

#include "store_sqlite.h"
#include "util.h"

#define DB(s) (SQ(s)->db)

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
	sqlite3_stmt *st;
	int rc;

	st = sq_prep(DB(s), "SELECT 1 FROM sandboxes WHERE owner = ? AND id = ?"
	    " AND state NOT IN ('killed', 'stopping')", "ss", x->owner, x->sandbox);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	sq_stmt_release(st);
	if (rc <= 0) {
		x->result = 0;
		return rc;
	}
	x->result = 1;
	/* the newest ones kept, the new one among them */
	rc = sq_run(DB(s), sq_prep(DB(s), "DELETE FROM access_tokens WHERE sandbox = ?1 AND id NOT IN"
	    " (SELECT id FROM access_tokens WHERE sandbox = ?1 ORDER BY created_at DESC, rowid DESC"
	    " LIMIT ?2)", "si", x->sandbox, (int64_t)(ACCESS_TOKENS_KEPT - 1)));
	if (rc < 0)
		return rc;
	return sq_run(DB(s), sq_prep(DB(s), "INSERT INTO access_tokens (id, sandbox, hash, created_at)"
	    " VALUES (?, ?, ?, ?)", "ssbi", x->id, x->sandbox, x->hash, STORE_HASH_LEN,
	    now_unix_ms()));
}

int
sq_access_token_add(struct store *s, const char *owner, const char *sandbox, const char *id,
    const uint8_t hash[STORE_HASH_LEN])
{
	struct access_x x = { .owner = owner, .sandbox = sandbox, .id = id, .hash = hash };
	int rc;

	if ((rc = sq_tx(s, add_tx, &x)) < 0)
		return rc;
	return x.result;
}

static int
lookup_tx(struct store *s, void *arg)
{
	struct access_x *x = arg;
	sqlite3_stmt *st;
	int rc;

	/* a tenant whose every key was revoked is refused through its
	 * sandboxes' tokens too, from the next request on */
	st = sq_prep(DB(s), "SELECT a.sandbox, a.hash FROM access_tokens a JOIN sandboxes s"
	    " ON s.id = a.sandbox WHERE a.id = ? AND s.state NOT IN ('killed', 'stopping')"
	    " AND EXISTS (SELECT 1 FROM api_keys k WHERE k.principal = s.owner AND k.revoked_at IS NULL)", "s",
	    x->id);
	if (st == NULL)
		return -EIO;
	rc = sq_step_row(DB(s), st);
	if (rc == 1 && sqlite3_column_bytes(st, 1) != STORE_HASH_LEN)
		rc = -EIO;
	else if (rc == 1) {
		sq_col_copy(st, 0, x->sandbox_out, SPACE_ID_MAX + 1);
		memcpy(x->hash_out, sqlite3_column_blob(st, 1), STORE_HASH_LEN);
	}
	sq_stmt_release(st);
	x->result = rc;
	return rc < 0 ? rc : 0;
}

int
sq_access_token_lookup(struct store *s, const char *id, char sandbox[SPACE_ID_MAX + 1],
    uint8_t hash[STORE_HASH_LEN])
{
	struct access_x x = { .id = id, .sandbox_out = sandbox, .hash_out = hash };
	int rc;

	if ((rc = sq_tx(s, lookup_tx, &x)) < 0)
		return rc;
	return x.result == 1 ? 0 : -ENOENT;
}
