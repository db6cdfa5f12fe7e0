/* Signing key files and key bundles, from the side of someone who can
 * write files next to ours, replay old bundles, or sign with a key of their
 * own. */
/* the malformed-bundle tables below are printf formats by design */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include <sodium.h>

#include "captest.h"
#include "keys.h"
#include "paseto.h"
#include "util.h"
#include "tap.h"

static char dir[] = "/tmp/test_keys.XXXXXX";

static void
put(const char *path, const char *text, mode_t mode)
{
	unlink(path);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
		diag("cannot write %s", path);
	if (fd >= 0) {
		fchmod(fd, mode);
		close(fd);
	}
}

static void
test_key_files(void)
{
	struct signing_key k, l;
	char path[256], p2[256];
	struct stat st;
	static const char *corrupt[] = {
		"",
		"{}",
		"not json",
		"{\"secret\":\"00\",\"created\":\"2026-01-01T00:00:00Z\"}",
		"{\"secret\":\"zz00000000000000000000000000000000000000000000000000000000000000\",\"created\":\"2026-01-01T00:00:00Z\"}",
		"{\"secret\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"created\":\"yesterday\"}",
		"{\"secret\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"created\":\"2026-01-01T00:00:00Z\",\"kid\":\"x\"}",
		"{\"secret\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"secret\":\"0000000000000000000000000000000000000000000000000000000000000000\",\"created\":\"2026-01-01T00:00:00Z\"}",
		"{\"secret\":1,\"created\":\"2026-01-01T00:00:00Z\"}",
		"[\"0000000000000000000000000000000000000000000000000000000000000000\"]",
	};

	snprintf(path, sizeof(path), "%s/signing.key", dir);
	is_int(signing_key_generate(&k), 0, "generate a signing key");
	ok(strncmp(k.kid, "k4.pid.", 7) == 0 && strlen(k.kid) == PASERK_K4_PID_LEN, "kid is a k4.pid");
	is_int(signing_key_save(path, &k), 0, "save");
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "key file has mode 0600");
	is_int(signing_key_load(path, &l), 0, "load");
	ok(memcmp(k.sk, l.sk, 64) == 0 && memcmp(k.pk, l.pk, 32) == 0, "round trip keeps the key");
	is_str(l.kid, k.kid, "round trip derives the same kid");
	is_int(l.created, k.created, "round trip keeps created");

	chmod(path, 0644);
	is_int(signing_key_load(path, &l), -EACCES, "world-readable key file refused");
	ok(sodium_is_zero(l.sk, sizeof(l.sk)), "nothing of the key is left after a refusal");
	chmod(path, 0640);
	is_int(signing_key_load(path, &l), -EACCES, "group-readable key file refused");
	chmod(path, 0600);

	snprintf(p2, sizeof(p2), "%s/link.key", dir);
	ok(symlink(path, p2) == 0, "symlink to the key");
	ok(signing_key_load(p2, &l) < 0, "key file reached through a symlink refused");

	snprintf(p2, sizeof(p2), "%s/corrupt.key", dir);
	for (size_t i = 0; i < sizeof(corrupt) / sizeof(corrupt[0]); i++) {
		put(p2, corrupt[i], 0600);
		is_int(signing_key_load(p2, &l), -EINVAL, "corrupted key file refused: '%.40s'", corrupt[i]);
	}
	{
		char big[2048];
		memset(big, ' ', sizeof(big) - 1);
		big[sizeof(big) - 1] = '\0';
		put(p2, big, 0600);
		is_int(signing_key_load(p2, &l), -EFBIG, "oversized key file refused");
	}
	signing_key_wipe(&k);
	ok(sodium_is_zero((uint8_t *)&k, sizeof(k)), "wipe zeroes the whole key");
	signing_key_wipe(&l);
}

/* sign an arbitrary bundle payload with root, with the right implicit and footer */
static char *
sign_payload(const struct signing_key *root, const char *payload)
{
	char footer[96], *tok = NULL;
	snprintf(footer, sizeof(footer), "{\"kid\":\"%s\"}", root->kid);
	if (paseto_v4_sign(root->sk, payload, strlen(payload), footer, BUNDLE_IMPLICIT, &tok) < 0)
		return NULL;
	return tok;
}

static void
test_bundles(void)
{
	struct signing_key root, other, k1, k2;
	struct key_bundle b = { 0 }, out;
	char *tok = NULL, pub[PASERK_K4_PUBLIC_LEN + 1], *p;

	signing_key_generate(&root);
	signing_key_generate(&other);
	signing_key_generate(&k1);
	signing_key_generate(&k2);

	b.version = 3;
	ct_bundle_add(&b, &k1, T0 - 100, T0 + 100);
	ct_bundle_add(&b, &k2, T0, 0);
	is_int(bundle_sign(&b, &root, &tok), 0, "sign a bundle");
	is_int(bundle_verify(tok, strlen(tok), root.pk, &out), 0, "verify under the pinned root");
	ok(out.version == 3 && out.n == 2, "version and key count");
	ok(strcmp(out.keys[0].kid, k1.kid) == 0 && memcmp(out.keys[0].pk, k1.pk, 32) == 0 &&
	    out.keys[0].not_before == T0 - 100 && out.keys[0].not_after == T0 + 100, "first key intact");
	ok(out.keys[1].not_after == 0, "open-ended key (not_after null)");
	ok(bundle_find(&out, k1.kid, T0) != NULL, "find a key inside its window");
	ok(bundle_find(&out, k1.kid, T0 + 101) == NULL, "key past not_after is not found");
	ok(bundle_find(&out, k2.kid, T0 - 1) == NULL, "key before not_before is not found");
	ok(bundle_find(&out, other.kid, T0) == NULL, "unknown kid not found");

	/* untrusted signer: the same payload signed by another key */
	free(tok);
	bundle_sign(&b, &other, &tok);
	ok(bundle_verify(tok, strlen(tok), root.pk, &out) < 0, "bundle signed by an untrusted key refused");
	ok(out.n == 0, "refused bundle leaves nothing behind");

	/* tampering: flip one payload character */
	free(tok);
	bundle_sign(&b, &root, &tok);
	p = tok + strlen(PASETO_V4_PUBLIC_HDR) + 20;
	*p = *p == 'A' ? 'B' : 'A';
	ok(bundle_verify(tok, strlen(tok), root.pk, &out) < 0, "tampered bundle refused");
	free(tok);

	/* a capability token is not a bundle (different implicit assertion) */
	tok = ct_sign_json(&root, "{\"version\":9,\"keys\":[]}");
	ok(tok && bundle_verify(tok, strlen(tok), root.pk, &out) < 0,
	    "token signed with the capability implicit assertion is not a bundle");
	free(tok);

	/* a kid that does not belong to its key */
	b.n = 0;
	ct_bundle_add(&b, &k1, T0, 0);
	memcpy(b.keys[0].kid, k2.kid, sizeof(b.keys[0].kid));
	bundle_sign(&b, &root, &tok);
	is_int(bundle_verify(tok, strlen(tok), root.pk, &out), -EINVAL,
	    "bundle naming key K1 with K2's kid refused");
	free(tok);

	/* strict payload decoding behind a valid signature */
	paserk_k4_public_encode(k1.pk, pub);
	{
		char good[512], buf[4096];
		static const char *const fmts[] = {
			"{\"version\":1,\"keys\":[%s],\"extra\":1}",
			"{\"version\":1,\"version\":2,\"keys\":[%s]}",
			"{\"version\":0,\"keys\":[%s]}",
			"{\"version\":-1,\"keys\":[%s]}",
			"{\"version\":\"1\",\"keys\":[%s]}",
			"{\"version\":1.5,\"keys\":[%s]}",
			"{\"version\":1,\"keys\":[%s,%s]}",
			"{\"keys\":[%s]}",
		};
		snprintf(good, sizeof(good),
		    "{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"2026-01-01T00:00:00Z\",\"not_after\":null}",
		    k1.kid, pub);
		snprintf(buf, sizeof(buf), "{\"version\":1,\"keys\":[%s]}", good);
		tok = sign_payload(&root, buf);
		is_int(bundle_verify(tok, strlen(tok), root.pk, &out), 0, "hand-made valid bundle accepted");
		free(tok);
		for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
			snprintf(buf, sizeof(buf), fmts[i], good, good);
			tok = sign_payload(&root, buf);
			ok(bundle_verify(tok, strlen(tok), root.pk, &out) < 0, "signed but malformed bundle refused: %s", fmts[i]);
			free(tok);
		}
		static const char *keyfmts[] = {
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"2026-01-01T00:00:00Z\",\"not_after\":null,\"role\":\"root\"}",
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"2026-01-01T00:00:00Z\"}",
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"soon\",\"not_after\":null}",
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"2026-01-01T00:00:00Z\",\"not_after\":\"2025-01-01T00:00:00Z\"}",
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":null,\"not_after\":null}",
			/* not_after at the epoch must not read as "open" */
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"1970-01-01T00:00:00Z\",\"not_after\":\"1970-01-01T00:00:00Z\"}",
			"{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"1969-12-31T23:59:59Z\",\"not_after\":null}",
		};
		for (size_t i = 0; i < sizeof(keyfmts) / sizeof(keyfmts[0]); i++) {
			char key[512];
			snprintf(key, sizeof(key), keyfmts[i], k1.kid, pub);
			snprintf(buf, sizeof(buf), "{\"version\":1,\"keys\":[%s]}", key);
			tok = sign_payload(&root, buf);
			ok(bundle_verify(tok, strlen(tok), root.pk, &out) < 0, "malformed key entry refused (%zu)", i);
			free(tok);
		}
		/* more keys than the limit */
		size_t o = (size_t)snprintf(buf, sizeof(buf), "{\"version\":1,\"keys\":[");
		struct signing_key many;
		for (int i = 0; i < SPACE_BUNDLE_KEYS_MAX + 1; i++) {
			char pb[PASERK_K4_PUBLIC_LEN + 1];
			signing_key_generate(&many);
			paserk_k4_public_encode(many.pk, pb);
			o += (size_t)snprintf(buf + o, sizeof(buf) - o,
			    "%s{\"kid\":\"%s\",\"public\":\"%s\",\"not_before\":\"2026-01-01T00:00:00Z\",\"not_after\":null}",
			    i ? "," : "", many.kid, pb);
		}
		snprintf(buf + o, sizeof(buf) - o, "]}");
		tok = sign_payload(&root, buf);
		ok(o < sizeof(buf) - 3 && bundle_verify(tok, strlen(tok), root.pk, &out) < 0,
		    "bundle with %d keys refused", SPACE_BUNDLE_KEYS_MAX + 1);
		free(tok);
		signing_key_wipe(&many);
	}
	signing_key_wipe(&root);
	signing_key_wipe(&other);
	signing_key_wipe(&k1);
	signing_key_wipe(&k2);
}

/* rotation as the control plane does it: publish K2 before signing with it,
 * keep K1 until its last token is past exp + skew, then drop it */
static void
test_rotation(void)
{
	struct signing_key root, k1, k2;
	struct key_bundle b1 = { 0 }, b2 = { 0 }, b3 = { 0 }, got;
	struct verifier *v = verifier_new(64);
	struct capability c, out;
	char *t1, *t2, *tb;
	struct admit_result r;

	signing_key_generate(&root);
	signing_key_generate(&k1);
	signing_key_generate(&k2);
	b1.version = 1;
	ct_bundle_add(&b1, &k1, T0 - 1000, 0);
	b2.version = 2;
	ct_bundle_add(&b2, &k1, T0 - 1000, 0);
	ct_bundle_add(&b2, &k2, T0 - 10, 0);
	b3.version = 3;
	ct_bundle_add(&b3, &k2, T0 - 10, 0);

	ct_control(&c, "sbx_a", 1, T0, ACC_EXEC);
	t1 = ct_mint(&k1, &c);
	ct_unique(&c);
	t2 = ct_mint(&k2, &c);

	/* each bundle travels as a signed token and is verified first */
	bundle_sign(&b1, &root, &tb);
	is_int(bundle_verify(tb, strlen(tb), root.pk, &got), 0, "v1 verifies");
	free(tb);
	is_int(verifier_set_bundle(v, &got), 0, "install v1 {K1}");
	r = verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out);
	is_int(r.outcome, ADMIT_ALLOW, "K1 token verifies under v1");
	r = verifier_check(v, t2, strlen(t2), RECV_SBX_MANAGER, T0, &out);
	ok(r.outcome == ADMIT_DENY && r.reason == R_UNKNOWN_KID, "K2 token refused before K2 is published");

	bundle_sign(&b2, &root, &tb);
	is_int(bundle_verify(tb, strlen(tb), root.pk, &got), 0, "v2 verifies");
	free(tb);
	is_int(verifier_set_bundle(v, &got), 0, "install v2 {K1,K2}");
	is_int(verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out).outcome, ADMIT_ALLOW,
	    "K1 token still verifies under v2 (overlap)");
	is_int(verifier_check(v, t2, strlen(t2), RECV_SBX_MANAGER, T0, &out).outcome, ADMIT_ALLOW,
	    "K2 token verifies under v2");

	bundle_sign(&b3, &root, &tb);
	is_int(bundle_verify(tb, strlen(tb), root.pk, &got), 0, "v3 verifies");
	free(tb);
	is_int(verifier_set_bundle(v, &got), 0, "install v3 {K2}");
	r = verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out);
	ok(r.outcome == ADMIT_DENY && r.reason == R_UNKNOWN_KID, "K1 token refused once K1 is dropped");
	is_int(verifier_check(v, t2, strlen(t2), RECV_SBX_MANAGER, T0, &out).outcome, ADMIT_ALLOW,
	    "K2 token verifies under v3");
	is_int(verifier_set_bundle(v, &b2), -ESTALE, "replaying v2 after v3 refused (rollback)");
	r = verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out);
	ok(r.outcome == ADMIT_DENY && r.reason == R_UNKNOWN_KID, "K1 still refused after the rollback attempt");

	/* not_before in the future */
	{
		struct key_bundle b4 = { 0 };
		b4.version = 4;
		ct_bundle_add(&b4, &k2, T0 - 10, 0);
		ct_bundle_add(&b4, &k1, T0 + 3600, 0);
		verifier_set_bundle(v, &b4);
		r = verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0, &out);
		ok(r.outcome == ADMIT_DENY && r.reason == R_UNKNOWN_KID,
		    "token of a key whose not_before is in the future refused");
		r = verifier_check(v, t1, strlen(t1), RECV_SBX_MANAGER, T0 + 3600, &out);
		is_int(r.outcome, ADMIT_ALLOW, "... and accepted by the verifier once not_before is reached");
	}
	free(t1);
	free(t2);
	verifier_free(v);
	signing_key_wipe(&root);
	signing_key_wipe(&k1);
	signing_key_wipe(&k2);
}

int
main(void)
{
	if (mkdtemp(dir) == NULL)
		return 1;
	test_key_files();
	test_bundles();
	test_rotation();
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			diag("cannot remove %s", dir);
	}
	return done_testing();
}
