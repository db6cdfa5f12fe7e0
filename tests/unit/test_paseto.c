/* PASETO v4.public and PASERK against the official vectors (directory in
 * $SPACE_VECTORS), then from the attacker's side: every way a token can be
 * malformed or tampered with must be refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <sodium.h>

#include "limits.h"
#include "paseto.h"
#include "util.h"
#include "tap.h"

static json_t *
load_vectors(const char *name)
{
	const char *dir = getenv("SPACE_VECTORS");
	char path[1024];
	json_error_t e;
	json_t *root;

	if (dir == NULL)
		dir = "../shared/vectors";
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	root = json_load_file(path, JSON_REJECT_DUPLICATES, &e);
	if (root == NULL)
		diag("cannot load %s: %s", path, e.text);
	return root;
}

static const char *
jstr(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static int
hexkey(const char *h, uint8_t *out, size_t n)
{
	return h && strlen(h) == 2 * n && hex_decode(h, 2 * n, out, n) == (ssize_t)n ? 0 : -1;
}

static void
test_paseto_vectors(void)
{
	json_t *root = load_vectors("paseto-v4.json"), *tests, *t;
	size_t i;
	int n_sign = 0, n_fail = 0;

	ok(root != NULL, "paseto-v4.json loaded");
	if (root == NULL)
		return;
	tests = json_object_get(root, "tests");
	json_array_foreach(tests, i, t) {
		const char *name = jstr(t, "name"), *tok = jstr(t, "token");
		const char *payload = jstr(t, "payload"), *footer = jstr(t, "footer");
		const char *implicit = jstr(t, "implicit-assertion");
		bool fail = json_is_true(json_object_get(t, "expect-fail"));
		uint8_t pk[32], sk[64], seed[32], pk2[32], sk2[64];
		uint8_t *msg = NULL;
		size_t mlen = 0;
		char *gotf = NULL, *signed_tok = NULL;
		int r;

		if (name == NULL || tok == NULL)
			continue;
		if (strncmp(name, "4-S-", 4) == 0 && !fail) {
			n_sign++;
			ok(hexkey(jstr(t, "public-key"), pk, 32) == 0 &&
			    hexkey(jstr(t, "secret-key"), sk, 64) == 0 &&
			    hexkey(jstr(t, "secret-key-seed"), seed, 32) == 0, "%s: keys", name);
			r = paseto_v4_verify(pk, tok, strlen(tok), SPACE_TOKEN_MAX, implicit, &msg, &mlen, &gotf);
			is_int(r, 0, "%s: verifies", name);
			ok(r == 0 && payload && mlen == strlen(payload) && memcmp(msg, payload, mlen) == 0,
			    "%s: payload", name);
			ok(r == 0 && footer && strcmp(gotf, footer) == 0, "%s: footer", name);
			free(msg);
			free(gotf);
			msg = NULL;
			gotf = NULL;
			/* the seed alone reproduces the key pair */
			crypto_sign_seed_keypair(pk2, sk2, seed);
			ok(memcmp(pk2, pk, 32) == 0 && memcmp(sk2, sk, 64) == 0, "%s: seed gives the key pair", name);
			/* Ed25519 is deterministic: byte-for-byte the same token */
			r = paseto_v4_sign(sk, payload, strlen(payload), footer, implicit, &signed_tok);
			ok(r == 0 && strcmp(signed_tok, tok) == 0, "%s: sign reproduces the token", name);
			free(signed_tok);
			signed_tok = NULL;
			/* the same token under a wrong implicit assertion or key fails */
			r = paseto_v4_verify(pk, tok, strlen(tok), SPACE_TOKEN_MAX, "x", &msg, &mlen, NULL);
			is_int(r, -EBADMSG, "%s: wrong implicit assertion refused", name);
			free(msg);
			msg = NULL;
			pk2[0] = pk[0] ^ 1;
			memcpy(pk2 + 1, pk + 1, 31);
			r = paseto_v4_verify(pk2, tok, strlen(tok), SPACE_TOKEN_MAX, implicit, &msg, &mlen, NULL);
			ok(r != 0 && msg == NULL, "%s: wrong key refused", name);
			free(msg);
			msg = NULL;
			/* the footer is bound to the signature */
			if (footer && *footer) {
				char *tf = NULL;

				paseto_v4_sign(sk, payload, strlen(payload), "{\"kid\":\"other\"}", implicit, &signed_tok);
				/* splice the other footer onto the vector's body */
				if (signed_tok) {
					const char *of = strrchr(signed_tok, '.'), *vf = strrchr(tok, '.');

					if (asprintf(&tf, "%.*s%s", (int)(vf - tok), tok, of) < 0)
						tf = NULL;
				}
				r = tf ? paseto_v4_verify(pk, tf, strlen(tf), SPACE_TOKEN_MAX, implicit, &msg, &mlen, NULL) : 0;
				is_int(r, -EBADMSG, "%s: swapped footer refused", name);
				free(tf);
				free(signed_tok);
				free(msg);
				msg = NULL;
				signed_tok = NULL;
				r = paseto_v4_peek_footer(tok, strlen(tok), &gotf);
				ok(r == 0 && strcmp(gotf, footer) == 0, "%s: peek footer", name);
				free(gotf);
				gotf = NULL;
			}
		} else if (strncmp(name, "4-F-", 4) == 0 && fail) {
			/* every failure vector is refused by the v4.public verifier;
			 * the ones without a public key (v4.local material) are tried
			 * under the 4-S key pair, which must refuse them too */
			if (hexkey(jstr(t, "public-key"), pk, 32) != 0)
				hexkey("1eb9dbbbbc047c03fd70604e0071f0987e16b28b757225c11f00415d0e20b1a2", pk, 32);
			n_fail++;
			r = paseto_v4_verify(pk, tok, strlen(tok), SPACE_TOKEN_MAX, implicit, &msg, &mlen, NULL);
			ok(r != 0 && msg == NULL, "%s: refused (%s)", name, paseto_strerror(r));
			if (strncmp(tok, "v4.public.", 10) != 0)
				is_int(r, -EPROTO, "%s: refused for its header", name);
			free(msg);
			msg = NULL;
		}
	}
	ok(n_sign >= 3, "%d v4.public vectors", n_sign);
	ok(n_fail >= 5, "%d failure vectors", n_fail);
	json_decref(root);
}

static void
test_paserk_vectors(void)
{
	json_t *root, *tests, *t;
	size_t i;

	root = load_vectors("paserk-k4.public.json");
	ok(root != NULL, "paserk-k4.public.json loaded");
	tests = json_object_get(root, "tests");
	json_array_foreach(tests, i, t) {
		const char *name = jstr(t, "name"), *key = jstr(t, "key"), *paserk = jstr(t, "paserk");
		bool fail = json_is_true(json_object_get(t, "expect-fail"));
		char out[PASERK_K4_PUBLIC_LEN + 1];
		uint8_t pk[32], back[32];

		if (!fail) {
			ok(public_key_parse(key, pk) == 0, "%s: hex key", name);
			ok(paserk_k4_public_encode(pk, out) == 0 && paserk && strcmp(out, paserk) == 0,
			    "%s: encode", name);
			ok(paserk_k4_public_decode(paserk, back) == 0 && memcmp(back, pk, 32) == 0,
			    "%s: decode", name);
			ok(public_key_parse(paserk, back) == 0 && memcmp(back, pk, 32) == 0,
			    "%s: public_key_parse of the PASERK", name);
		} else {
			/* a key of the wrong length (e.g. a k3 / P-384 key) never
			 * becomes a k4.public key */
			is_int(public_key_parse(key, pk), -EINVAL, "%s: refused", name);
			if (paserk)
				ok(paserk_k4_public_decode(paserk, pk) != 0, "%s: PASERK refused", name);
		}
	}
	json_decref(root);

	root = load_vectors("paserk-k4.pid.json");
	ok(root != NULL, "paserk-k4.pid.json loaded");
	tests = json_object_get(root, "tests");
	json_array_foreach(tests, i, t) {
		const char *name = jstr(t, "name"), *key = jstr(t, "key"), *paserk = jstr(t, "paserk");
		bool fail = json_is_true(json_object_get(t, "expect-fail"));
		char out[PASERK_K4_PID_LEN + 1];
		uint8_t pk[32];

		if (!fail) {
			ok(public_key_parse(key, pk) == 0 && paserk_k4_pid(pk, out) == 0 && paserk &&
			    strcmp(out, paserk) == 0, "%s: k4.pid", name);
			is_int(strlen(out), PASERK_K4_PID_LEN, "%s: id length", name);
		} else
			is_int(public_key_parse(key, pk), -EINVAL, "%s: refused", name);
	}
	json_decref(root);

	/* hand-made PASERK refusals */
	{
		uint8_t pk[32];
		static const char *bad[] = {
			"k3.public.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"k4.secret.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"k4.public.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"k4.public.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"k4.public.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAB",  /* non-canonical tail */
			"k4.public.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
			"K4.PUBLIC.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
			"00000000000000000000000000000000000000000000000000000000000000zz",
			"000000000000000000000000000000000000000000000000000000000000000",
			"",
		};
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
			is_int(public_key_parse(bad[i], pk), -EINVAL, "public_key_parse refuses bad #%zu", i);
	}
}

static void
test_pae(void)
{
	uint8_t *out = NULL;
	size_t len = 0;
	const void *p1[1] = { "" };
	size_t l1[1] = { 0 };
	const void *p2[2] = { "test", "" };
	size_t l2[2] = { 4, 0 };

	/* examples from the PASETO specification */
	ok(paseto_pae(NULL, NULL, 0, &out, &len) == 0 && len == 8 &&
	    memcmp(out, "\0\0\0\0\0\0\0\0", 8) == 0, "PAE([])");
	free(out);
	ok(paseto_pae(p1, l1, 1, &out, &len) == 0 && len == 16 &&
	    memcmp(out, "\x01\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) == 0, "PAE([''])");
	free(out);
	ok(paseto_pae(p2, l2, 2, &out, &len) == 0 && len == 28 &&
	    memcmp(out, "\x02\0\0\0\0\0\0\0\x04\0\0\0\0\0\0\0test\0\0\0\0\0\0\0\0", 28) == 0,
	    "PAE(['test',''])");
	free(out);
}

static int
verify(const uint8_t pk[32], const char *tok, const char *implicit)
{
	uint8_t *msg = NULL;
	size_t mlen;
	char *f = NULL;
	int r;

	r = paseto_v4_verify(pk, tok, strlen(tok), SPACE_TOKEN_MAX, implicit, &msg, &mlen, &f);
	if (r != 0 && (msg != NULL || f != NULL))
		r = 999;        /* a refusal must hand nothing out */
	free(msg);
	free(f);
	return r;
}

static void
test_malformed(void)
{
	uint8_t pk[32], sk[64];
	char *tok = NULL, *t = NULL, *foot = NULL;
	const char *payload = "{\"sub\":\"p_1\"}";
	size_t len, bodylen;
	char *dot;

	crypto_sign_keypair(pk, sk);
	ok(paseto_v4_sign(sk, payload, strlen(payload), "{\"kid\":\"k\"}", CAPABILITY_IMPLICIT, &tok) == 0,
	    "sign with footer");
	is_int(verify(pk, tok, CAPABILITY_IMPLICIT), 0, "own token verifies");
	len = strlen(tok);
	dot = strrchr(tok, '.');
	bodylen = (size_t)(dot - tok);

	is_int(verify(pk, tok, BUNDLE_IMPLICIT), -EBADMSG, "other implicit assertion refused");
	is_int(verify(pk, tok, NULL), -EBADMSG, "empty implicit assertion refused");
	is_int(verify(pk, "", NULL), -EINVAL, "empty token refused");
	is_int(verify(pk, "v4.public.", NULL), -EINVAL, "header only refused");
	{
		uint8_t *m = NULL;

		is_int(paseto_v4_verify(pk, tok, len, len - 1, CAPABILITY_IMPLICIT, &m, NULL, NULL), -E2BIG,
		    "over the size limit refused");
		free(m);
	}
	/* truncated at every length */
	{
		size_t cut;
		int bad = 0;

		for (cut = 0; cut < len; cut++) {
			uint8_t *m = NULL;
			int r = paseto_v4_verify(pk, tok, cut, SPACE_TOKEN_MAX, CAPABILITY_IMPLICIT, &m, NULL, NULL);

			free(m);
			if (r == 0)
				bad++;
		}
		is_int(bad, 0, "every truncation refused");
	}
	/* flip each bit of every character in the body and footer: nothing passes */
	{
		size_t i;
		int bad = 0, b;

		t = strdup(tok);
		for (i = 10; i < len; i++) {
			for (b = 0; b < 8; b++) {
				t[i] ^= (char)(1 << b);
				if (t[i] != '\0' && verify(pk, t, CAPABILITY_IMPLICIT) == 0)
					bad++;
				t[i] ^= (char)(1 << b);
			}
		}
		is_int(bad, 0, "no single bit flip in payload, signature or footer verifies");
		free(t);
		t = NULL;
	}
	/* a flipped signature byte, a flipped payload byte (re-encoded canonically) */
	{
		uint8_t body[512];
		ssize_t n = b64url_decode(tok + 10, bodylen - 10, body, sizeof(body));
		char enc[1024];

		ok(n > 64, "body decodes");
		body[n - 1] ^= 0x01;
		b64url_encode(body, (size_t)n, enc, sizeof(enc));
		if (asprintf(&t, "v4.public.%s%s", enc, dot) < 0)
			t = NULL;
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EBADMSG, "flipped signature bit refused");
		free(t);
		body[n - 1] ^= 0x01;
		body[0] ^= 0x20;
		b64url_encode(body, (size_t)n, enc, sizeof(enc));
		if (asprintf(&t, "v4.public.%s%s", enc, dot) < 0)
			t = NULL;
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EBADMSG, "flipped payload bit refused");
		free(t);
		/* payload shorter than a signature */
		b64url_encode(body, 63, enc, sizeof(enc));
		if (asprintf(&t, "v4.public.%s", enc) < 0)
			t = NULL;
		is_int(verify(pk, t, NULL), -EINVAL, "body shorter than 64 bytes refused");
		free(t);
	}
	/* structure */
	if (asprintf(&t, "%s.e30", tok) > 0)
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "fifth part refused");
	free(t);
	if (asprintf(&t, "%s=", tok) > 0)
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "padding '=' refused");
	free(t);
	if (asprintf(&t, "%.*s=%s", (int)bodylen, tok, dot) > 0)
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "padding in body refused");
	free(t);
	t = strdup(tok);
	t[12] = '+';
	is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "invalid base64url char '+' refused");
	t[12] = '\xc3';
	is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "byte >= 0x80 refused");
	free(t);
	t = strdup(tok);
	memcpy(t, "v4.local.", 9);
	memmove(t + 9, t + 10, len - 9);
	is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EPROTO, "v4.local header refused");
	free(t);
	t = strdup(tok);
	t[1] = '3';
	is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EPROTO, "v3.public header refused");
	t[1] = '4';
	t[3] = 'P';
	is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EPROTO, "v4.Public header refused");
	free(t);
	/* non-canonical last character: find the canonical one and bump its
	 * unused low bits (the body is 13 + 64 = 77 bytes: 2 spare bits) */
	{
		char *u = NULL;
		const char *alpha = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
		size_t last = bodylen - 1;
		const char *pos;

		t = strdup(tok);
		pos = strchr(alpha, t[last]);
		ok((77 % 3) != 0 && pos != NULL, "body has spare bits in its last character");
		t[last] = alpha[(pos - alpha) ^ 1];
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EINVAL, "non-canonical last character refused");
		free(t);
		if (asprintf(&u, "%.*s.", (int)bodylen, tok) > 0)
			is_int(verify(pk, u, CAPABILITY_IMPLICIT), -EINVAL, "empty footer part refused");
		free(u);
	}
	/* wrong footer: the same body under a footer it was not signed with */
	if (asprintf(&t, "%.*s.eyJraWQiOiJ4In0", (int)bodylen, tok) > 0)
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EBADMSG, "wrong footer refused");
	free(t);
	/* footer removed */
	if (asprintf(&t, "%.*s", (int)bodylen, tok) > 0)
		is_int(verify(pk, t, CAPABILITY_IMPLICIT), -EBADMSG, "footer removed refused");
	free(t);
	t = NULL;
	/* peek */
	ok(paseto_v4_peek_footer(tok, len, &foot) == 0 && strcmp(foot, "{\"kid\":\"k\"}") == 0, "peek footer");
	free(foot);
	foot = NULL;
	is_int(paseto_v4_peek_footer("v4.local.AAAA", 13, &foot), -EPROTO, "peek refuses v4.local");
	ok(foot == NULL, "nothing handed out");
	/* a huge footer is refused before it is decoded */
	{
		size_t big = SPACE_FOOTER_MAX + 10;
		char *fb = malloc(big + 1);

		memset(fb, 'a', big);
		fb[big] = '\0';
		free(tok);
		tok = NULL;
		ok(paseto_v4_sign(sk, payload, strlen(payload), fb, NULL, &tok) == 0, "sign with a big footer");
		is_int(verify(pk, tok, NULL), -E2BIG, "footer over SPACE_FOOTER_MAX refused");
		free(fb);
	}
	/* no footer: none written, "" returned */
	free(tok);
	tok = NULL;
	ok(paseto_v4_sign(sk, "", 0, NULL, NULL, &tok) == 0 && strchr(tok + 10, '.') == NULL,
	    "empty footer is omitted");
	{
		uint8_t *m = NULL;
		size_t ml = 99;

		ok(paseto_v4_verify(pk, tok, strlen(tok), SPACE_TOKEN_MAX, NULL, &m, &ml, &foot) == 0 &&
		    ml == 0 && m && m[0] == '\0' && foot && foot[0] == '\0', "empty payload and footer");
		free(m);
		free(foot);
	}
	is_str(paseto_strerror(-EBADMSG), "bad signature", "strerror");
	free(tok);
	sodium_memzero(sk, sizeof(sk));
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	test_pae();
	test_paseto_vectors();
	test_paserk_vectors();
	test_malformed();
	return done_testing();
}
