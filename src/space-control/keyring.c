/* Signing keys and the key bundle. space-control is the only holder of
 * signing keys (DESIGN 5): the root key (D/keys/root.key) signs bundles
 * only; signing keys (D/keys/<kid>.key) sign capabilities. Files are 0600 in
 * a 0700 directory, keys are wiped when dropped.
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
#include "util.h"

static int
key_path(char *out, size_t cap, const char *keydir, const char *kid)
{
	const char *suffix = kid + strlen("k4.pid.");

	if (strncmp(kid, "k4.pid.", 7) != 0)
		return -EINVAL;
	if ((size_t)snprintf(out, cap, "%s/%s.key", keydir, suffix) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

/* serializes key creation between the daemon and the subcommands */
static int
keydir_lock(const char *keydir)
{
	char p[PATH_MAX];
	int fd;

	if ((size_t)snprintf(p, sizeof(p), "%s/lock", keydir) >= sizeof(p))
		return -ENAMETOOLONG;
	fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX) < 0) {
		int e = errno;
		close(fd);
		return -e;
	}
	return fd;
}

static int
new_signing_key(struct store *st, const char *keydir, int64_t activate_at, int64_t old_not_after,
    char kid_out[PASERK_K4_PID_LEN + 1])
{
	struct signing_key k;
	struct key_row row;
	char path[PATH_MAX];
	int rc;

	memset(&row, 0, sizeof(row));
	if ((rc = signing_key_generate(&k)) < 0)
		return rc;
	if ((rc = key_path(path, sizeof(path), keydir, k.kid)) < 0)
		goto out;
	/* the file first: a row must never name a key we cannot load */
	if ((rc = signing_key_save(path, &k)) < 0)
		goto out;
	memcpy(row.kid, k.kid, sizeof(row.kid));
	memcpy(row.pk, k.pk, sizeof(row.pk));
	row.activate_at = activate_at;
	row.not_before = now_unix();
	row.not_after = 0;
	if ((rc = st->ops->key_add(st, &row, old_not_after)) < 0)
		goto out;
	if (kid_out)
		memcpy(kid_out, k.kid, PASERK_K4_PID_LEN + 1);
out:
	signing_key_wipe(&k);
	return rc;
}

static void
drop_keys(struct keyring *kr)
{
	size_t i;

	for (i = 0; i < kr->n; i++)
		signing_key_wipe(&kr->keys[i]);
	memset(kr->rows, 0, sizeof(kr->rows));
	kr->n = 0;
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

/* caller holds kr->mu */
static int
refresh_locked(struct keyring *kr, struct store *st)
{
	struct key_row rows[SPACE_BUNDLE_KEYS_MAX];
	struct key_bundle cur, nb;
	uint64_t ver = 0;
	char *tok = NULL, path[PATH_MAX];
	int64_t stamp = 0;
	size_t n = 0, i;
	int rc;

	if ((rc = st->ops->keys_changed(st, &stamp)) < 0)
		return rc;
	if ((rc = st->ops->keys_list(st, rows, SPACE_BUNDLE_KEYS_MAX, &n)) < 0)
		return rc;
	if (stamp != kr->stamp || n != kr->n) {
		drop_keys(kr);
		for (i = 0; i < n; i++) {
			struct signing_key *k = &kr->keys[kr->n];
			if (key_path(path, sizeof(path), kr->keydir, rows[i].kid) < 0 ||
			    signing_key_load(path, k) < 0 ||
			    memcmp(k->pk, rows[i].pk, sizeof(k->pk)) != 0) {
				signing_key_wipe(k);
				log_warnx("keyring: key %s: file missing or not matching", rows[i].kid);
				continue;
			}
			kr->rows[kr->n++] = rows[i];
		}
		kr->stamp = stamp;
	}

	/* the published bundle must list exactly the keys that may be in use */
	rc = st->ops->bundle_latest(st, &ver, &tok);
	if (rc < 0 && rc != -ENOENT)
		return rc;
	memset(&cur, 0, sizeof(cur));
	if (tok != NULL && bundle_verify(tok, strlen(tok), kr->root.pk, &cur) < 0) {
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
		if (n > 0 && (rc = bundle_sign(&nb, &kr->root, &signed_tok)) == 0) {
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

	pthread_mutex_lock(&kr->mu);
	rc = refresh_locked(kr, st);
	pthread_mutex_unlock(&kr->mu);
	return rc;
}

int
keyring_init(struct keyring *kr, struct store *st, const char *data_dir)
{
	struct key_row rows[1];
	char path[PATH_MAX];
	size_t n = 0;
	int fd = -1, rc;

	memset(kr, 0, sizeof(*kr));
	pthread_mutex_init(&kr->mu, NULL);
	kr->stamp = -1;
	if ((size_t)snprintf(kr->keydir, sizeof(kr->keydir), "%s/keys", data_dir) >=
	    sizeof(kr->keydir))
		return -ENAMETOOLONG;
	if ((rc = mkdir_p(kr->keydir, 0700)) < 0)
		return rc;
	if (chmod(kr->keydir, 0700) < 0)
		return -errno;
	if ((fd = keydir_lock(kr->keydir)) < 0)
		return fd;
	if ((size_t)snprintf(path, sizeof(path), "%s/root.key", kr->keydir) >= sizeof(path)) {
		rc = -ENAMETOOLONG;
		goto out;
	}
	if (access(path, F_OK) == 0) {
		if ((rc = signing_key_load(path, &kr->root)) < 0) {
			log_warnx("keyring: cannot load %s", path);
			goto out;
		}
	} else {
		if ((rc = signing_key_generate(&kr->root)) < 0 ||
		    (rc = signing_key_save(path, &kr->root)) < 0)
			goto out;
		log_info("keyring: generated root key %s", kr->root.kid);
	}
	if ((rc = paserk_k4_public_encode(kr->root.pk, kr->root_paserk)) < 0)
		goto out;
	if ((rc = st->ops->keys_list(st, rows, 1, &n)) < 0)
		goto out;
	if (n == 0) {
		char kid[PASERK_K4_PID_LEN + 1];
		/* the first key signs at once: no token can predate it */
		if ((rc = new_signing_key(st, kr->keydir, now_unix(), 0, kid)) < 0)
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
	drop_keys(kr);
	signing_key_wipe(&kr->root);
	free(kr->bundle);
	kr->bundle = NULL;
	pthread_mutex_destroy(&kr->mu);
}

int
keyring_rotate(struct store *st, const char *data_dir, int publish_delay,
    char kid_out[PASERK_K4_PID_LEN + 1])
{
	struct keyring kr;
	int64_t switch_at = now_unix() + publish_delay;
	int fd, rc;

	if ((rc = keyring_init(&kr, st, data_dir)) < 0)
		goto out;
	if ((fd = keydir_lock(kr.keydir)) < 0) {
		rc = fd;
		goto out;
	}
	/* the old key signs until switch_at; its last token expires at
	 * switch_at + lifetime, accepted for one clock skew more */
	rc = new_signing_key(st, kr.keydir, switch_at,
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
keyring_current(struct keyring *kr, struct store *st, int64_t now, struct signing_key *out)
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
		*out = kr->keys[best];
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
