/* Ed25519 signing keys (space-control only) and verification-key bundles
 * (DESIGN section 5).
 *
 * A signing key file holds the 32-byte seed; the public key and the kid are
 * derived from it on load, so a file cannot pair a seed with a foreign kid.
 * A bundle is a PASETO v4.public token signed by the root key whose public
 * half a worker pinned at enrollment; its payload is decoded strictly and
 * every kid must be the PASERK id of the key it names, so a signed bundle
 * cannot attach a trusted name to another key. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <jansson.h>
#include <sodium.h>

#include "keys.h"
#include "limits.h"
#include "paseto.h"
#include "util.h"

#define KEYFILE_MAX 512         /* {"secret":"<64 hex>","created":"<RFC 3339>"} */

int
signing_key_generate(struct signing_key *k)
{
	uint8_t seed[crypto_sign_SEEDBYTES];
	int r;

	if (sodium_init() < 0)
		return -EIO;
	memset(k, 0, sizeof(*k));
	randombytes_buf(seed, sizeof(seed));
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	sodium_memzero(seed, sizeof(seed));
	if ((r = paserk_k4_pid(k->pk, k->kid)) < 0) {
		signing_key_wipe(k);
		return r;
	}
	k->created = now_unix();
	return 0;
}

void
signing_key_wipe(struct signing_key *k)
{
	if (k != NULL)
		sodium_memzero(k, sizeof(*k));
}

int
signing_key_save(const char *path, const struct signing_key *k)
{
	char hex[crypto_sign_SEEDBYTES * 2 + 1];
	char created[RFC3339_LEN + 1];
	char buf[KEYFILE_MAX];
	int n, r;

	/* the seed is the first half of libsodium's secret key */
	if (hex_encode(k->sk, crypto_sign_SEEDBYTES, hex, sizeof(hex)) < 0)
		return -EINVAL;
	if ((r = rfc3339_format(k->created, created)) < 0)
		goto out;
	/* hex and RFC 3339 need no JSON escaping */
	n = snprintf(buf, sizeof(buf), "{\"secret\":\"%s\",\"created\":\"%s\"}\n", hex, created);
	if (n < 0 || (size_t)n >= sizeof(buf)) {
		r = -EOVERFLOW;
		goto out;
	}
	/* 0600 from the first byte on (write_file_atomic sets the mode on
	 * the temporary before writing) */
	r = write_file_atomic(path, buf, (size_t)n, 0600);
out:
	sodium_memzero(hex, sizeof(hex));
	sodium_memzero(buf, sizeof(buf));
	return r;
}

/* read the key file through one descriptor, so the mode we check is the
 * mode of the file we read (no stat-then-open race) */
static int
keyfile_read(const char *path, char *buf, size_t cap, size_t *len)
{
	struct stat st;
	size_t got = 0;
	int fd, r = 0;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		r = -errno;
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = -EINVAL;
		goto out;
	}
	/* a signing key others could read may already be copied: refuse to
	 * sign with it rather than pretend it is still secret. The owner must
	 * be us, or another user could plant a key for us to sign with. */
	if ((st.st_mode & 077) != 0 || st.st_uid != geteuid()) {
		r = -EACCES;
		goto out;
	}
	if (st.st_size < 0 || (size_t)st.st_size >= cap) {
		r = -EFBIG;
		goto out;
	}
	while (got < cap - 1) {
		ssize_t k = read(fd, buf + got, cap - 1 - got);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		if (k == 0)
			break;
		got += (size_t)k;
	}
	if (got == cap - 1) {
		r = -EFBIG;
		goto out;
	}
	buf[got] = '\0';
	*len = got;
out:
	close(fd);
	return r;
}

int
signing_key_load(const char *path, struct signing_key *k)
{
	char buf[KEYFILE_MAX];
	uint8_t seed[crypto_sign_SEEDBYTES];
	json_t *o = NULL, *js, *jc;
	size_t len = 0;
	int r;

	memset(k, 0, sizeof(*k));
	if (sodium_init() < 0)
		return -EIO;
	if ((r = keyfile_read(path, buf, sizeof(buf), &len)) < 0)
		goto out;
	r = -EINVAL;
	o = json_loadb(buf, len, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o) || json_object_size(o) != 2)
		goto out;
	js = json_object_get(o, "secret");
	jc = json_object_get(o, "created");
	if (!json_is_string(js) || !json_is_string(jc))
		goto out;
	if (json_string_length(js) != 2 * crypto_sign_SEEDBYTES ||
	    hex_decode(json_string_value(js), json_string_length(js), seed,
	    sizeof(seed)) != crypto_sign_SEEDBYTES)
		goto out;
	if (rfc3339_parse(json_string_value(jc), json_string_length(jc), &k->created) < 0)
		goto out;
	crypto_sign_seed_keypair(k->pk, k->sk, seed);
	if ((r = paserk_k4_pid(k->pk, k->kid)) < 0)
		goto out;
	r = 0;
out:
	/* the copy of the secret inside the JSON tree is ours to wipe too */
	if (json_is_object(o)) {
		js = json_object_get(o, "secret");
		if (json_is_string(js))
			sodium_memzero((char *)(uintptr_t)json_string_value(js),
			    json_string_length(js));
	}
	json_decref(o);
	sodium_memzero(buf, sizeof(buf));
	sodium_memzero(seed, sizeof(seed));
	if (r < 0)
		signing_key_wipe(k);
	return r;
}

/* ---- bundles ---- */

int
bundle_sign(const struct key_bundle *b, const struct signing_key *root, char **token_out)
{
	json_t *o = NULL, *keys = NULL;
	char *payload = NULL, footer[16 + PASERK_K4_PID_LEN];
	size_t i;
	int r = -ENOMEM;

	*token_out = NULL;
	if (b->n == 0 || b->n > SPACE_BUNDLE_KEYS_MAX || b->version == 0 ||
	    b->version > (uint64_t)INT64_MAX)
		return -EINVAL;
	if ((keys = json_array()) == NULL)
		goto out;
	for (i = 0; i < b->n; i++) {
		const struct bundle_key *bk = &b->keys[i];
		char pub[PASERK_K4_PUBLIC_LEN + 1], nb[RFC3339_LEN + 1], na[RFC3339_LEN + 1];
		json_t *k;

		/* never sign what bundle_verify would refuse */
		if (bk->not_before < 0 || bk->not_after < 0 ||
		    (bk->not_after != 0 && bk->not_after < bk->not_before)) {
			r = -EINVAL;
			goto out;
		}
		if (paserk_k4_public_encode(bk->pk, pub) < 0 ||
		    rfc3339_format(bk->not_before, nb) < 0 ||
		    (bk->not_after != 0 && rfc3339_format(bk->not_after, na) < 0)) {
			r = -EINVAL;
			goto out;
		}
		k = json_pack("{s:s,s:s,s:s,s:o}", "kid", bk->kid, "public", pub,
		    "not_before", nb, "not_after",
		    bk->not_after != 0 ? json_string(na) : json_null());
		if (k == NULL || json_array_append_new(keys, k) != 0)
			goto out;
	}
	o = json_pack("{s:I,s:O}", "version", (json_int_t)b->version, "keys", keys);
	if (o == NULL)
		goto out;
	if ((payload = json_dumps(o, JSON_COMPACT)) == NULL)
		goto out;
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", root->kid);
	r = paseto_v4_sign(root->sk, payload, strlen(payload), footer, BUNDLE_IMPLICIT,
	    token_out);
out:
	free(payload);
	json_decref(o);
	json_decref(keys);
	return r;
}

static int
time_field(json_t *v, bool nullable, int64_t *out)
{
	if (nullable && json_is_null(v)) {
		*out = 0;
		return 0;
	}
	if (!json_is_string(v))
		return -EINVAL;
	return rfc3339_parse(json_string_value(v), json_string_length(v), out) < 0 ? -EINVAL : 0;
}

static int
bundle_key_decode(json_t *o, struct bundle_key *bk)
{
	json_t *kid, *pub;
	char want[PASERK_K4_PID_LEN + 1];

	/* exactly these four members: an unknown field could be a
	 * restriction a newer issuer meant and we would silently ignore */
	if (!json_is_object(o) || json_object_size(o) != 4)
		return -EINVAL;
	kid = json_object_get(o, "kid");
	pub = json_object_get(o, "public");
	if (!json_is_string(kid) || !json_is_string(pub) ||
	    json_string_length(kid) != PASERK_K4_PID_LEN ||
	    json_string_length(pub) != PASERK_K4_PUBLIC_LEN)
		return -EINVAL;
	if (paserk_k4_public_decode(json_string_value(pub), bk->pk) < 0)
		return -EINVAL;
	/* the kid is derived from the key, never chosen: otherwise a bundle
	 * could publish key B under the name tokens of key A carry */
	if (paserk_k4_pid(bk->pk, want) < 0 ||
	    strcmp(want, json_string_value(kid)) != 0)
		return -EINVAL;
	memcpy(bk->kid, want, sizeof(bk->kid));
	if (json_object_get(o, "not_before") == NULL || json_object_get(o, "not_after") == NULL)
		return -EINVAL;
	if (time_field(json_object_get(o, "not_before"), false, &bk->not_before) < 0 ||
	    time_field(json_object_get(o, "not_after"), true, &bk->not_after) < 0)
		return -EINVAL;
	/* 0 is how we spell "open" (JSON null): a key window ending at the
	 * epoch would otherwise silently become a window that never ends.
	 * Times before 1970 have no use and no canonical round trip. */
	if (bk->not_before < 0 || bk->not_after < 0 ||
	    (!json_is_null(json_object_get(o, "not_after")) && bk->not_after == 0))
		return -EINVAL;
	if (bk->not_after != 0 && bk->not_after < bk->not_before)
		return -EINVAL;
	return 0;
}

static int
bundle_decode(const uint8_t *msg, size_t mlen, struct key_bundle *out)
{
	json_t *o, *ver, *keys;
	json_int_t v;
	size_t i, j;
	int r = -EINVAL;

	o = json_loadb((const char *)msg, mlen, JSON_REJECT_DUPLICATES, NULL);
	if (!json_is_object(o) || json_object_size(o) != 2)
		goto out;
	ver = json_object_get(o, "version");
	keys = json_object_get(o, "keys");
	if (!json_is_integer(ver) || !json_is_array(keys))
		goto out;
	if ((v = json_integer_value(ver)) < 1)
		goto out;
	if (json_array_size(keys) == 0 || json_array_size(keys) > SPACE_BUNDLE_KEYS_MAX)
		goto out;
	out->version = (uint64_t)v;
	out->n = json_array_size(keys);
	for (i = 0; i < out->n; i++) {
		if (bundle_key_decode(json_array_get(keys, i), &out->keys[i]) < 0)
			goto out;
		/* one entry per key: two entries with different windows would
		 * make "valid at now" depend on which one we looked at */
		for (j = 0; j < i; j++)
			if (strcmp(out->keys[j].kid, out->keys[i].kid) == 0)
				goto out;
	}
	r = 0;
out:
	json_decref(o);
	return r;
}

int
bundle_verify(const char *token, size_t len, const uint8_t root_pk[32], struct key_bundle *out)
{
	uint8_t *msg = NULL;
	size_t mlen = 0;
	char *footer = NULL, want[16 + PASERK_K4_PID_LEN], rkid[PASERK_K4_PID_LEN + 1];
	int r;

	memset(out, 0, sizeof(*out));
	if (token == NULL || len == 0 || len > SPACE_BUNDLE_TOKEN_MAX)
		return -E2BIG;
	/* the pinned root is the only trust anchor; the bundle's own footer
	 * does not choose the key */
	r = paseto_v4_verify(root_pk, token, len, SPACE_BUNDLE_TOKEN_MAX, BUNDLE_IMPLICIT,
	    &msg, &mlen, &footer);
	if (r < 0)
		goto out;
	r = -EINVAL;
	if (paserk_k4_pid(root_pk, rkid) < 0)
		goto out;
	snprintf(want, sizeof(want), "{\"kid\":\"%s\"}", rkid);
	if (footer == NULL || strcmp(footer, want) != 0)
		goto out;
	r = bundle_decode(msg, mlen, out);
out:
	if (r < 0)
		memset(out, 0, sizeof(*out));
	free(msg);
	free(footer);
	return r;
}

const struct bundle_key *
bundle_find(const struct key_bundle *b, const char *kid, int64_t now)
{
	size_t i;

	if (b == NULL || kid == NULL)
		return NULL;
	for (i = 0; i < b->n && i < SPACE_BUNDLE_KEYS_MAX; i++) {
		const struct bundle_key *k = &b->keys[i];

		if (strcmp(k->kid, kid) != 0)
			continue;
		/* a key is used only inside its window: before not_before it
		 * is published but not yet in use; after not_after its last
		 * tokens are past exp + skew and nothing signed later is
		 * legitimate */
		if (now < k->not_before)
			return NULL;
		if (k->not_after != 0 && now > k->not_after)
			return NULL;
		return k;
	}
	return NULL;
}
