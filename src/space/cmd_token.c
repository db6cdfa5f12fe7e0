/* space token verify|inspect|sign: PASETO v4.public from the command line.
 *
 *   verify   any v4.public token (capabilities, key bundles, vectors)
 *   inspect  a space capability: implicit assertion space-capability-v1 and
 *            the strict claims decoder, exactly as receivers run them
 *   sign     make a token from a payload (tests, tooling)
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "claims.h"
#include "limits.h"
#include "paseto.h"
#include "util.h"
#include "space.h"

#define VERB "token"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: space token verify  --public-key KEY [--footer F] [--implicit I] TOKEN\n"
	    "       space token inspect --public-key KEY [--footer F] TOKEN\n"
	    "       space token sign    (--secret-key HEX | --secret-key-file PATH) [--footer F]\n"
	    "                           [--implicit I] PAYLOAD\n"
	    "\n"
	    "  verify   verify a PASETO v4.public token and print its payload\n"
	    "  inspect  verify a space capability (implicit assertion " CAPABILITY_IMPLICIT ")\n"
	    "           and print its claims as JSON\n"
	    "  sign     sign PAYLOAD and print the v4.public token\n"
	    "\n"
	    "  KEY      64 hex characters or a k4.public PASERK\n"
	    "  HEX      the 32-byte Ed25519 seed as 64 hex characters (visible in the\n"
	    "           process list: prefer --secret-key-file outside tests)\n"
	    "  TOKEN, PAYLOAD  '-' reads it from standard input\n"
	    "\n"
	    "Exit status: 0 verified / signed, 1 refused (reason on stderr), 2 usage.\n");
}

/* an argument, or standard input for "-" (one trailing newline dropped) */
static int
arg_or_stdin(const char *arg, size_t max, char **out, size_t *len)
{
	char *buf;
	size_t n = 0;

	if (strcmp(arg, "-") != 0) {
		*len = strlen(arg);
		*out = strdup(arg);
		return *out ? 0 : -ENOMEM;
	}
	buf = malloc(max + 2);
	if (buf == NULL)
		return -ENOMEM;
	n = fread(buf, 1, max + 1, stdin);
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > max) {
		free(buf);
		return -E2BIG;
	}
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

static int
load_seed(const char *hex, const char *file, uint8_t sk[64])
{
	uint8_t seed[32], pk[32];
	char *text = NULL;
	size_t len = 0;
	int err = 0;

	if (file) {
		err = read_file(file, 256, &text, &len);
		if (err)
			return err;
		while (len > 0 && (text[len - 1] == '\n' || text[len - 1] == '\r'))
			len--;
		hex = text;
	} else
		len = strlen(hex);
	if (len != 64 || hex_decode(hex, 64, seed, sizeof(seed)) != 32)
		err = -EINVAL;
	else
		crypto_sign_seed_keypair(pk, sk, seed);
	sodium_memzero(seed, sizeof(seed));
	if (text) {
		sodium_memzero(text, len);
		free(text);
	}
	return err;
}

/* claims as a pretty JSON object, written from the decoded struct: every
 * string in it passed the decoder's alphabets, and gen may exceed what
 * jansson can hold */
static void
print_claims(const struct capability *c)
{
	char iat[RFC3339_LEN + 1], exp[RFC3339_LEN + 1];
	uint32_t b;
	int first = 1;

	rfc3339_format(c->iat, iat);
	rfc3339_format(c->exp, exp);
	printf("{\n  \"iss\": \"space-control\",\n  \"sub\": \"%s\",\n  \"jti\": \"%s\",\n"
	    "  \"aud\": \"%s\",\n  \"pur\": \"%s\",\n  \"iat\": \"%s\",\n  \"exp\": \"%s\",\n"
	    "  \"sbx\": \"%s\",\n  \"gen\": %llu,\n  \"wrk\": \"%s\",\n  \"sst\": \"%s\",\n"
	    "  \"act\": %lu,\n  \"res\": \"%s\",\n",
	    c->sub, c->jti, c->aud == AUD_NODE_API ? "node-api" : "netgtw",
	    c->pur == PUR_CONTROL ? "control" : "service", iat, exp, c->route.sandbox,
	    (unsigned long long)c->route.generation, c->route.worker, c->route.substrate,
	    (unsigned long)c->route.activation, c->route.resident);
	if (c->pur == PUR_CONTROL) {
		printf("  \"acc\": [");
		for (b = 1; b <= ACC_ALL; b <<= 1)
			if (c->acc & b) {
				printf("%s\"%s\"", first ? "" : ", ", acc_name(b));
				first = 0;
			}
		printf("]\n}\n");
	} else
		printf("  \"port\": %u,\n  \"proto\": \"%s\"\n}\n", (unsigned)c->port,
		    c->proto == PROTO_HTTP ? "http" : "tcp");
}

enum mode { M_VERIFY, M_INSPECT, M_SIGN };

int
cmd_token(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "public-key",      required_argument, NULL, 'k' },
		{ "secret-key",      required_argument, NULL, 's' },
		{ "secret-key-file", required_argument, NULL, 'S' },
		{ "footer",          required_argument, NULL, 'f' },
		{ "implicit",        required_argument, NULL, 'i' },
		{ "help",            no_argument,       NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *pubkey = NULL, *seckey = NULL, *seckey_file = NULL, *footer = NULL;
	const char *implicit = NULL, *sub;
	char *input = NULL, *got_footer = NULL, *tok = NULL;
	uint8_t *msg = NULL, pk[32], sk[64];
	size_t ilen = 0, mlen = 0;
	struct capability cap;
	enum mode mode;
	const char *why = NULL;
	int c, r, rc = 1;

	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	sub = argv[1];
	if (strcmp(sub, "verify") == 0)
		mode = M_VERIFY;
	else if (strcmp(sub, "inspect") == 0)
		mode = M_INSPECT;
	else if (strcmp(sub, "sign") == 0)
		mode = M_SIGN;
	else {
		fprintf(stderr, "space: token: unknown subcommand '%s'\n", sub);
		usage(stderr);
		return 2;
	}
	optind = 0;     /* GNU getopt: full re-initialisation */
	while ((c = getopt_long(argc - 1, argv + 1, "k:s:S:f:i:h", opts, NULL)) != -1) {
		switch (c) {
		case 'k': pubkey = optarg; break;
		case 's': seckey = optarg; break;
		case 'S': seckey_file = optarg; break;
		case 'f': footer = optarg; break;
		case 'i': implicit = optarg; break;
		case 'h': usage(stdout); return 0;
		default:  usage(stderr); return 2;
		}
	}
	if (optind + 1 != argc - 1) {
		fprintf(stderr, "space: token: %s takes exactly one %s\n", sub,
		    mode == M_SIGN ? "PAYLOAD" : "TOKEN");
		return 2;
	}
	if (mode == M_SIGN ? (pubkey != NULL || (seckey == NULL) == (seckey_file == NULL)) :
	    (pubkey == NULL || seckey != NULL || seckey_file != NULL)) {
		fprintf(stderr, "space: token: %s needs %s\n", sub, mode == M_SIGN ?
		    "exactly one of --secret-key, --secret-key-file" : "--public-key (and no secret key)");
		return 2;
	}
	if (mode == M_INSPECT && implicit != NULL) {
		fprintf(stderr, "space: token: inspect always uses the implicit assertion "
		    CAPABILITY_IMPLICIT "\n");
		return 2;
	}
	if (sodium_init() < 0)
		return cli_fail(VERB, "libsodium unavailable");

	r = arg_or_stdin(argv[optind + 1], mode == M_SIGN ? SPACE_FRAME_JSON_MAX : SPACE_BUNDLE_TOKEN_MAX,
	    &input, &ilen);
	if (r) {
		cli_fail(VERB, "cannot read input: %s", strerror(-r));
		goto out;
	}

	if (mode == M_SIGN) {
		r = load_seed(seckey, seckey_file, sk);
		if (r) {
			cli_fail(VERB, "bad secret key (want a 32-byte seed as 64 hex characters)");
			goto out;
		}
		r = paseto_v4_sign(sk, input, ilen, footer, implicit, &tok);
		sodium_memzero(sk, sizeof(sk));
		if (r) {
			cli_fail(VERB, "sign: %s", strerror(-r));
			goto out;
		}
		printf("%s\n", tok);
		rc = 0;
		goto out;
	}

	if (public_key_parse(pubkey, pk) != 0) {
		cli_fail(VERB, "bad public key (want 64 hex characters or k4.public)");
		goto out;
	}
	r = paseto_v4_verify(pk, input, ilen,
	    mode == M_INSPECT ? SPACE_TOKEN_MAX : SPACE_BUNDLE_TOKEN_MAX,
	    mode == M_INSPECT ? CAPABILITY_IMPLICIT : implicit, &msg, &mlen, &got_footer);
	if (r) {
		cli_fail(VERB, "%s", paseto_strerror(r));
		goto out;
	}
	/* the footer is signed, so this compares what the signer wrote */
	if (footer != NULL && strcmp(footer, got_footer) != 0) {
		cli_fail(VERB, "footer does not match");
		goto out;
	}
	if (mode == M_VERIFY) {
		fwrite(msg, 1, mlen, stdout);
		fputc('\n', stdout);
		rc = 0;
		goto out;
	}
	if (claims_decode(msg, mlen, &cap, &why) != 0) {
		cli_fail(VERB, "claims refused: %s", why);
		goto out;
	}
	print_claims(&cap);
	rc = 0;
out:
	if (fflush(stdout) != 0 && rc == 0)
		rc = cli_fail(VERB, "write error");
	free(input);
	free(msg);
	free(got_footer);
	free(tok);
	return rc;
}
