/* The key schedule and the key bundle, as the HTTP process sees them.
 * space-control is the only holder of signing keys (DESIGN 5), and within
 * it the signer process only (signer.c): the root key (D/keys/root.key)
 * signs bundles only; signing keys (D/keys/<kid>.key) sign capabilities.
 * This file keeps the public halves and their schedule from the store and
 * asks the signer for new keys and signatures; it never reads a key file.
 *
 * Rotation keeps two promises: a key is in the published bundle before the
 * first token it signs (activate_at = added + publish delay), and a retired
 * key stays in the bundle until the last token it signed is past exp + skew
 * (not_after = switch + lifetime + skew). The `keys rotate` subcommand and
 * the daemon share the store; the daemon re-reads it at most every second. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>

#include "control.h"
#include "log.h"
#include "sigmsg.h"
#include "util.h"

/* serializes key creation between the daemon and the subcommands */
int
keydir_lock(const char *keydir)
{
	char p[PATH_MAX];
	int fd;

	if ((size_t)snprintf(p, sizeof(p), "%s/lock", keydir) >= sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

/* the signer makes and stores the key; the row names it */
static int
new_signing_key(struct keyring *kr, struct store *st, int64_t activate_at,
    int64_t old_not_after, char kid_out[PASERK_K4_PID_LEN + 1])
{
	struct sig_reply rep;
	struct key_row row;
	uint8_t *m = NULL;
	size_t len;
	int rc;

	memset(&row, 0, sizeof(row));
	(void)sigmsg_encode(SIG_NEW_KEY, NULL, 0, &m, &len);
	if ((rc = signer_call(&kr->sg, m, len, SIG_KEY, &rep)) < 0)
		return rc;
	memcpy(row.pk, rep.pk, sizeof(row.pk));
	if ((rc = paserk_k4_pid(row.pk, row.kid)) < 0)
		return rc;
	row.activate_at = activate_at;
	row.not_before = now_unix();
	row.not_after = 0;
	if ((rc = st->ops->key_add(st, &row, old_not_after)) < 0)
		return rc;
	if (kid_out)
		memcpy(kid_out, row.kid, PASERK_K4_PID_LEN + 1);
	return 0;
}

static bool
bundle_equal(const struct key_bundle *b, const struct key_row *rows, size_t n)
{
	size_t i;

	if (b->n != n)
		return false;
	for (i = 0; i < n; i++)
		if (strcmp(b->keys[i].kid, rows[i].kid) != 0 ||
		    b->keys[i].not_before != rows[i].not_before ||
		    b->keys[i].not_after != rows[i].not_after)
			return false;
	return true;
}

/* the signer signs; we check its answer under the pinned root before the
 * bundle goes into the store */
static int
sign_bundle(struct keyring *kr, const struct key_bundle *nb, char **tok)
{
	struct key_bundle chk;
	struct sig_reply rep;
	uint8_t *m = NULL;
	size_t len;
	int rc;

	*tok = NULL;
	if ((rc = sigmsg_encode_sign_bundle(nb, &m, &len)) < 0)
		return rc;
	if ((rc = signer_call(&kr->sg, m, len, SIG_TOKEN, &rep)) < 0)
		return rc;
	if (bundle_verify(rep.token, strlen(rep.token), kr->sg.root_pk, &chk) < 0 ||
	    chk.version != nb->version || chk.n != nb->n) {
		sig_reply_clear(&rep);
		return -EPROTO;
	}
	*tok = rep.token;
	return 0;
}

/* caller holds kr->mu */
static int
refresh_locked(struct keyring *kr, struct store *st)
{
	struct key_row rows[SPACE_BUNDLE_KEYS_MAX];
	struct key_bundle cur, nb;
	uint64_t ver = 0;
	char *tok = NULL;
	size_t n = 0, i;
	int rc;

	if ((rc = st->ops->keys_list(st, rows, SPACE_BUNDLE_KEYS_MAX, &n)) < 0)
		return rc;
	memcpy(kr->rows, rows, n * sizeof(rows[0]));
	kr->n = n;

	/* the published bundle must list exactly the keys that may be in use */
	rc = st->ops->bundle_latest(st, &ver, &tok);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	memset(&cur, 0, sizeof(cur));
	if (tok != NULL && bundle_verify(tok, strlen(tok), kr->sg.root_pk, &cur) < 0) {
		log_warnx("keyring: stored bundle %llu does not verify under the root key",
		    (unsigned long long)ver);
		memset(&cur, 0, sizeof(cur));
	}
	if (tok == NULL || !bundle_equal(&cur, rows, n)) {
		char *signed_tok = NULL;

		memset(&nb, 0, sizeof(nb));
		nb.version = ver + 1;
		nb.n = n;
		for (i = 0; i < n; i++) {
			memcpy(nb.keys[i].kid, rows[i].kid, sizeof(nb.keys[i].kid));
			memcpy(nb.keys[i].pk, rows[i].pk, sizeof(nb.keys[i].pk));
			nb.keys[i].not_before = rows[i].not_before;
			nb.keys[i].not_after = rows[i].not_after;
		}
		if (n > 0 && (rc = sign_bundle(kr, &nb, &signed_tok)) == 0) {
			rc = st->ops->bundle_add(st, nb.version, signed_tok);
			if (rc == 0) {
				log_info("keyring: published key bundle version %llu (%zu keys)",
				    (unsigned long long)nb.version, n);
				free(tok);
				tok = signed_tok;
				signed_tok = NULL;
				ver = nb.version;
			} else if (rc == -EEXIST) {
				rc = 0;     /* another process published first; next tick */
			}
		}
		free(signed_tok);
		if (rc < 0) {
			free(tok);
			return rc;
		}
	}
	if (tok != NULL && ver != kr->bundle_version) {
		free(kr->bundle);
		kr->bundle = tok;
		kr->bundle_version = ver;
		tok = NULL;
	}
	free(tok);
	return 0;
}

int
keyring_refresh(struct keyring *kr, struct store *st)
{
	int rc;

	/* a signer that died since the last tick is noticed here, within a
	 * second, even when nobody asks for a capability */
	signer_check(&kr->sg);
	pthread_mutex_lock(&kr->mu);
	rc = refresh_locked(kr, st);
	pthread_mutex_unlock(&kr->mu);
	return rc;
}

int
keyring_init(struct keyring *kr, struct store *st, const char *data_dir, int verbose)
{
	struct key_row rows[1];
	size_t n = 0;
	int fd = -1, rc;

	memset(kr, 0, sizeof(*kr));
	pthread_mutex_init(&kr->mu, NULL);
	/* the signer makes D/keys and the root key, and refuses to start on a
	 * key file it would not sign with */
	if ((rc = signer_start(&kr->sg, data_dir, verbose)) < 0)
		return rc;
	if ((size_t)snprintf(kr->keydir, sizeof(kr->keydir), "%s/keys", data_dir) >=
	    sizeof(kr->keydir))
		return -ENAMETOOLONG;
	if ((rc = paserk_k4_public_encode(kr->sg.root_pk, kr->root_paserk)) < 0)
		return rc;
	if ((fd = keydir_lock(kr->keydir)) < 0)
		return fd;
	if ((rc = st->ops->keys_list(st, rows, 1, &n)) < 0)
		goto out;
	if (n == 0) {
		char kid[PASERK_K4_PID_LEN + 1];
		/* the first key signs at once: no token can predate it */
		if ((rc = new_signing_key(kr, st, now_unix(), 0, kid)) < 0)
			goto out;
		log_info("keyring: generated signing key %s", kid);
	}
	rc = keyring_refresh(kr, st);
out:
	close(fd);
	return rc;
}

void
keyring_free(struct keyring *kr)
{
	signer_stop(&kr->sg);
	free(kr->bundle);
	kr->bundle = NULL;
	pthread_mutex_destroy(&kr->mu);
}

int
keyring_rotate(struct store *st, const char *data_dir, int publish_delay, int verbose,
    char kid_out[PASERK_K4_PID_LEN + 1])
{
	struct keyring kr;
	int64_t switch_at = now_unix() + publish_delay;
	int fd, rc;

	if ((rc = keyring_init(&kr, st, data_dir, verbose)) < 0)
		goto out;
	if ((fd = keydir_lock(kr.keydir)) < 0) {
		rc = fd;
		goto out;
	}
	/* the old key signs until switch_at; its last token expires at
	 * switch_at + lifetime, accepted for one clock skew more */
	rc = new_signing_key(&kr, st, switch_at,
	    switch_at + SPACE_CAP_LIFETIME + SPACE_CLOCK_SKEW, kid_out);
	close(fd);
	if (rc == 0)
		rc = keyring_refresh(&kr, st);
out:
	keyring_free(&kr);
	return rc;
}

static void
maybe_refresh(struct keyring *kr, struct store *st)
{
	static _Atomic uint64_t last;
	uint64_t now = now_mono_ns();

	if (now - last >= 1000000000ull) {
		last = now;
		(void)refresh_locked(kr, st);
	}
}

int
keyring_current(struct keyring *kr, struct store *st, int64_t now,
    char kid[PASERK_K4_PID_LEN + 1], uint8_t pk[32])
{
	size_t i, best = SIZE_MAX;
	int rc = -ENOKEY;

	pthread_mutex_lock(&kr->mu);
	maybe_refresh(kr, st);
	for (i = 0; i < kr->n; i++) {
		const struct key_row *r = &kr->rows[i];
		if (r->activate_at > now)
			continue;       /* published, not yet signing */
		if (r->not_after != 0 && r->not_after <= now + SPACE_CAP_LIFETIME)
			continue;       /* its tokens would outlive its publication */
		if (best == SIZE_MAX || r->activate_at > kr->rows[best].activate_at)
			best = i;
	}
	if (best != SIZE_MAX) {
		memcpy(kid, kr->rows[best].kid, PASERK_K4_PID_LEN + 1);
		memcpy(pk, kr->rows[best].pk, 32);
		rc = 0;
	}
	pthread_mutex_unlock(&kr->mu);
	return rc;
}

int
keyring_bundle(struct keyring *kr, struct store *st, char **bundle,
    char root[PASERK_K4_PUBLIC_LEN + 1])
{
	int rc = 0;

	pthread_mutex_lock(&kr->mu);
	/* always current: a rotation by the subcommand is visible at once */
	(void)refresh_locked(kr, st);
	if (kr->bundle == NULL)
		rc = -ENOENT;
	else if ((*bundle = strdup(kr->bundle)) == NULL)
		rc = -ENOMEM;
	memcpy(root, kr->root_paserk, PASERK_K4_PUBLIC_LEN + 1);
	pthread_mutex_unlock(&kr->mu);
	return rc;
}
