/* Capability claims (DESIGN section 5) and the route identity as JSON.
 *
 * The decoder is the gate every receiver's decision rests on, so it accepts
 * exactly one shape: a JSON object holding the claims of one purpose, each
 * once, each of the right type and range, nothing else. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "claims.h"
#include "util.h"

#define ISSUER          "space-control"
#define NUMBERS_MAX     8       /* a valid claims set holds at most 3 numbers */

/* which purpose a claim belongs to */
#define P_BOTH      (PUR_CONTROL_BIT | PUR_SERVICE_BIT)
#define PUR_CONTROL_BIT 1u
#define PUR_SERVICE_BIT 2u

enum claim_id {
	C_ISS, C_SUB, C_JTI, C_AUD, C_PUR, C_IAT, C_EXP, C_SBX, C_GEN, C_WRK,
	C_SST, C_ACT, C_RES, C_ACC, C_PORT, C_PROTO, C_COUNT
};

static const struct claim_def {
	const char *name;
	unsigned    purposes;
	const char *missing;            /* static reasons, safe to show a sender */
	const char *other_purpose;
} claim_defs[C_COUNT] = {
	[C_ISS]   = { "iss",   P_BOTH, "missing claim iss", NULL },
	[C_SUB]   = { "sub",   P_BOTH, "missing claim sub", NULL },
	[C_JTI]   = { "jti",   P_BOTH, "missing claim jti", NULL },
	[C_AUD]   = { "aud",   P_BOTH, "missing claim aud", NULL },
	[C_PUR]   = { "pur",   P_BOTH, "missing claim pur", NULL },
	[C_IAT]   = { "iat",   P_BOTH, "missing claim iat", NULL },
	[C_EXP]   = { "exp",   P_BOTH, "missing claim exp", NULL },
	[C_SBX]   = { "sbx",   P_BOTH, "missing claim sbx", NULL },
	[C_GEN]   = { "gen",   P_BOTH, "missing claim gen", NULL },
	[C_WRK]   = { "wrk",   P_BOTH, "missing claim wrk", NULL },
	[C_SST]   = { "sst",   P_BOTH, "missing claim sst", NULL },
	[C_ACT]   = { "act",   P_BOTH, "missing claim act", NULL },
	[C_RES]   = { "res",   P_BOTH, "missing claim res", NULL },
	[C_ACC]   = { "acc",   PUR_CONTROL_BIT, "missing claim acc", "acc in a service capability" },
	[C_PORT]  = { "port",  PUR_SERVICE_BIT, "missing claim port", "port in a control capability" },
	[C_PROTO] = { "proto", PUR_SERVICE_BIT, "missing claim proto", "proto in a control capability" },
};

static const struct { uint32_t bit; const char *name; } acc_names[] = {
	{ ACC_EXEC, "exec" }, { ACC_FS_R, "fs:r" }, { ACC_FS_W, "fs:w" },
	{ ACC_PTY, "pty" }, { ACC_WATCH, "watch" },
};
#define ACC_COUNT (sizeof(acc_names) / sizeof(acc_names[0]))

const char *
acc_name(uint32_t bit)
{
	size_t i;

	for (i = 0; i < ACC_COUNT; i++)
		if (acc_names[i].bit == bit)
			return acc_names[i].name;
	return NULL;
}

int
acc_parse(const char *name, uint32_t *bit)
{
	size_t i;

	if (name == NULL)
		return -EINVAL;
	for (i = 0; i < ACC_COUNT; i++)
		if (strcmp(acc_names[i].name, name) == 0) {
			*bit = acc_names[i].bit;
			return 0;
		}
	return -EINVAL;
}

int
acc_parse_list(const char *list, uint32_t *bits)
{
	uint32_t out = 0, b;
	const char *p = list, *comma;
	char name[16];
	size_t n;

	if (list == NULL || *list == '\0')
		return -EINVAL;
	for (;;) {
		comma = strchr(p, ',');
		n = comma ? (size_t)(comma - p) : strlen(p);
		if (n == 0 || n >= sizeof(name))
			return -EINVAL;
		memcpy(name, p, n);
		name[n] = '\0';
		if (acc_parse(name, &b) != 0 || (out & b))
			return -EINVAL;
		out |= b;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	*bits = out;
	return 0;
}

bool
route_identity_equal(const struct route_identity *a, const struct route_identity *b)
{
	return a->generation == b->generation && a->activation == b->activation &&
	    strcmp(a->sandbox, b->sandbox) == 0 && strcmp(a->worker, b->worker) == 0 &&
	    strcmp(a->substrate, b->substrate) == 0 && strcmp(a->resident, b->resident) == 0;
}

/* substrate names: [a-z0-9]{1,15}, they become parts of paths and metrics */
static bool
substrate_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (i >= SPACE_SUBSTRATE_MAX || !((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return false;
	return i > 0;
}

static bool
copy_id(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return false;
	memcpy(dst, src, n + 1);
	return true;
}

/* ---- numbers ---- */

/*
 * jansson keeps integers in a signed 64-bit json_int_t and refuses larger
 * ones, but gen is a u64 and may be written up to 2^64-1. So the document
 * is decoded with every number as a real (nothing overflows), and the exact
 * value of each number is taken from its own text, found by this scan.
 * Outside strings, the only characters of a JSON document that can form a
 * number token are [-+.eE0-9], and tokens appear in document order, which
 * is also the order in which jansson (>= 2.8) keeps object members.
 */
struct num_tok {
	bool     plain;         /* 0 or [1-9][0-9]*: no sign, fraction or exponent */
	bool     overflow;      /* plain but above 2^64-1 */
	uint64_t value;         /* when plain and not overflow */
	double   approx;        /* strtod of the text, to cross-check jansson */
};

static int
scan_numbers(const char *s, size_t len, struct num_tok *toks, size_t *count)
{
	size_t i = 0, n = 0;

	while (i < len) {
		char c = s[i];

		if (c == '"') {
			/* to the closing quote: the first '"' of the string that
			 * follows an even run of backslashes (each "\\" pair is one
			 * escaped backslash, an odd one out escapes the quote) */
			const char *body = s + i + 1, *q = body, *b;

			for (;;) {
				q = memchr(q, '"', (size_t)(s + len - q));
				if (q == NULL) {
					i = len;        /* unterminated: jansson refuses it */
					break;
				}
				for (b = q; b > body && b[-1] == '\\'; b--)
					;
				if ((q - b) % 2 == 0) {
					i = (size_t)(q - s) + 1;
					break;
				}
				q++;
			}
		} else if (c == '-' || (c >= '0' && c <= '9')) {
			size_t start = i, j;
			char txt[64];
			struct num_tok *t;

			while (i < len && (s[i] == '-' || s[i] == '+' || s[i] == '.' ||
			    s[i] == 'e' || s[i] == 'E' || (s[i] >= '0' && s[i] <= '9')))
				i++;
			if (n == NUMBERS_MAX)
				return -E2BIG;
			t = &toks[n++];
			memset(t, 0, sizeof(*t));
			t->plain = s[start] != '-';
			for (j = start; j < i; j++)
				if (s[j] < '0' || s[j] > '9')
					t->plain = false;
			if (i - start > 1 && s[start] == '0')
				t->plain = false;
			if (t->plain) {
				for (j = start; j < i && !t->overflow; j++) {
					uint64_t d = (uint64_t)(s[j] - '0');

					if (t->value > (UINT64_MAX - d) / 10)
						t->overflow = true;
					else
						t->value = t->value * 10 + d;
				}
			}
			/* the value jansson computed for the same text: strtod() is
			 * correctly rounded, and so is the conversion of an exact
			 * integer, so a plain number needs no second strtod() */
			if (t->plain && !t->overflow)
				t->approx = (double)t->value;
			else if (i - start < sizeof(txt)) {
				memcpy(txt, s + start, i - start);
				txt[i - start] = '\0';
				t->approx = strtod(txt, NULL);
			} else
				t->approx = -1;  /* such a long number is never a valid claim */
		} else
			i++;
	}
	*count = n;
	return 0;
}

/* the number token behind a decoded number value, cross-checked */
static const struct num_tok *
take_number(const json_t *v, const struct num_tok *toks, size_t count, size_t *next)
{
	const struct num_tok *t;

	if (*next >= count)
		return NULL;
	t = &toks[(*next)++];
	/* a mismatch would mean the scan and jansson disagree on the document:
	 * refuse rather than guess */
	if (t->approx != json_number_value(v))
		return NULL;
	return t;
}

/* ---- claims ---- */

static const char *
check_string(const json_t *v, char *dst, size_t cap, bool (*valid)(const char *),
    const char *bad)
{
	const char *s;

	if (!json_is_string(v))
		return bad;
	s = json_string_value(v);
	if (strlen(s) != json_string_length(v) || !valid(s) || !copy_id(dst, cap, s))
		return bad;
	return NULL;
}

static bool
jti_valid(const char *s)
{
	return id_valid(s) && strlen(s) <= SPACE_JTI_MAX;
}

static const char *
check_time(const json_t *v, int64_t *out, const char *bad)
{
	if (!json_is_string(v) ||
	    rfc3339_parse(json_string_value(v), json_string_length(v), out) != 0)
		return bad;
	return NULL;
}

static const char *
check_acc(const json_t *v, uint32_t *bits)
{
	size_t i;
	json_t *e;
	uint32_t b;

	if (!json_is_array(v))
		return "acc is not an array";
	if (json_array_size(v) == 0)
		return "acc is empty";
	*bits = 0;
	json_array_foreach(v, i, e) {
		if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e))
			return "acc entry is not a string";
		if (acc_parse(json_string_value(e), &b) != 0)
			return "acc entry unknown";
		if (*bits & b)
			return "acc entry repeated";
		*bits |= b;
	}
	return NULL;
}

int
claims_decode(const void *json, size_t len, struct capability *out, const char **why)
{
	struct num_tok toks[NUMBERS_MAX];
	const json_t *vals[C_COUNT] = { 0 };
	const struct num_tok *nums[C_COUNT] = { 0 };
	struct capability c;
	size_t ntoks = 0, next = 0, k;
	json_error_t e;
	json_t *root = NULL, *v;
	const char *key, *r = NULL, *s;
	unsigned pur_bit;
	int err = -EINVAL;

	memset(&c, 0, sizeof(c));
	*why = NULL;
	if (json == NULL || len == 0) {
		r = "claims are empty";
		goto out;
	}
	if (len > SPACE_CLAIMS_MAX) {
		r = "claims too large";
		goto out;
	}
	if (scan_numbers(json, len, toks, &ntoks) != 0) {
		r = "too many numbers in claims";
		goto out;
	}
	/* duplicate keys are refused: two readers of one token must never see
	 * different values for the same claim */
	root = json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &e);
	if (root == NULL) {
		r = json_error_code(&e) == json_error_duplicate_key ? "duplicate claim" :
		    "claims are not valid JSON";
		goto out;
	}
	if (!json_is_object(root)) {
		r = "claims are not a JSON object";
		goto out;
	}
	json_object_foreach(root, key, v) {
		for (k = 0; k < C_COUNT; k++)
			if (claim_defs[k].name[0] == key[0] && strcmp(claim_defs[k].name, key) == 0)
				break;
		/* unknown claims are refused, not ignored: a claim we do not
		 * understand may be a restriction we would fail to apply */
		if (k == C_COUNT || strlen(key) != strlen(claim_defs[k].name)) {
			r = "unknown claim";
			goto out;
		}
		vals[k] = v;
		if (json_is_number(v)) {
			nums[k] = take_number(v, toks, ntoks, &next);
			if (nums[k] == NULL) {
				r = "claims are not valid JSON";
				goto out;
			}
		} else if (json_is_array(v) || json_is_object(v)) {
			/* only acc may be an array, and only of strings; anything
			 * else nested is a type error decided right here, before a
			 * number inside it could shift the scan's order */
			if (k != C_ACC || !json_is_array(v)) {
				r = "claim of the wrong type";
				goto out;
			}
			if ((r = check_acc(v, &c.acc)) != NULL)
				goto out;
		}
	}
	if (next != ntoks) {
		r = "claims are not valid JSON";
		goto out;
	}

	/* purpose first: it decides which claims must and must not be there */
	if (vals[C_PUR] == NULL) {
		r = claim_defs[C_PUR].missing;
		goto out;
	}
	s = json_string_value(vals[C_PUR]);
	if (s && strcmp(s, "control") == 0) {
		c.pur = PUR_CONTROL;
		pur_bit = PUR_CONTROL_BIT;
	} else if (s && strcmp(s, "service") == 0) {
		c.pur = PUR_SERVICE;
		pur_bit = PUR_SERVICE_BIT;
	} else {
		r = "pur is not \"control\" or \"service\"";
		goto out;
	}
	for (k = 0; k < C_COUNT; k++) {
		if ((claim_defs[k].purposes & pur_bit) && vals[k] == NULL) {
			r = claim_defs[k].missing;
			goto out;
		}
		if (!(claim_defs[k].purposes & pur_bit) && vals[k] != NULL) {
			r = claim_defs[k].other_purpose;
			goto out;
		}
	}

	s = json_string_value(vals[C_ISS]);
	if (s == NULL || json_string_length(vals[C_ISS]) != strlen(ISSUER) || strcmp(s, ISSUER) != 0) {
		r = "iss is not \"space-control\"";
		goto out;
	}
	if ((r = check_string(vals[C_SUB], c.sub, sizeof(c.sub), id_valid, "sub is not a valid id")) ||
	    (r = check_string(vals[C_JTI], c.jti, sizeof(c.jti), jti_valid, "jti is not valid")) ||
	    (r = check_string(vals[C_SBX], c.route.sandbox, sizeof(c.route.sandbox), id_valid,
	        "sbx is not a valid id")) ||
	    (r = check_string(vals[C_WRK], c.route.worker, sizeof(c.route.worker), id_valid,
	        "wrk is not a valid id")) ||
	    (r = check_string(vals[C_RES], c.route.resident, sizeof(c.route.resident), id_valid,
	        "res is not a valid id")) ||
	    (r = check_string(vals[C_SST], c.route.substrate, sizeof(c.route.substrate), substrate_valid,
	        "sst is not a valid substrate")))
		goto out;
	s = json_string_value(vals[C_AUD]);
	if (s && strcmp(s, "node-api") == 0)
		c.aud = AUD_NODE_API;
	else if (s && strcmp(s, "netgtw") == 0)
		c.aud = AUD_NETGTW;
	else {
		r = "aud is not \"node-api\" or \"netgtw\"";
		goto out;
	}
	if ((r = check_time(vals[C_IAT], &c.iat, "iat is not an RFC 3339 time")) ||
	    (r = check_time(vals[C_EXP], &c.exp, "exp is not an RFC 3339 time")))
		goto out;
	if (c.exp < c.iat) {
		r = "exp is before iat";
		goto out;
	}
	/* gen: a JSON integer written without sign, fraction or exponent */
	if (nums[C_GEN] == NULL || !nums[C_GEN]->plain) {
		r = "gen is not an integer";
		goto out;
	}
	if (nums[C_GEN]->overflow || nums[C_GEN]->value == 0) {
		r = "gen out of range";
		goto out;
	}
	c.route.generation = nums[C_GEN]->value;
	if (nums[C_ACT] == NULL || !nums[C_ACT]->plain) {
		r = "act is not an integer";
		goto out;
	}
	if (nums[C_ACT]->overflow || nums[C_ACT]->value == 0 || nums[C_ACT]->value > UINT32_MAX) {
		r = "act out of range";
		goto out;
	}
	c.route.activation = (uint32_t)nums[C_ACT]->value;
	if (c.pur == PUR_CONTROL) {
		/* acc was checked while walking, if it was an array at all */
		if (!json_is_array(vals[C_ACC])) {
			r = "acc is not an array";
			goto out;
		}
	} else {
		if (nums[C_PORT] == NULL || !nums[C_PORT]->plain) {
			r = "port is not an integer";
			goto out;
		}
		if (nums[C_PORT]->overflow || nums[C_PORT]->value == 0 || nums[C_PORT]->value > 65535) {
			r = "port out of range";
			goto out;
		}
		c.port = (uint16_t)nums[C_PORT]->value;
		s = json_string_value(vals[C_PROTO]);
		if (s && strcmp(s, "http") == 0)
			c.proto = PROTO_HTTP;
		else if (s && strcmp(s, "tcp") == 0)
			c.proto = PROTO_TCP;
		else {
			r = "proto is not \"http\" or \"tcp\"";
			goto out;
		}
	}
	*out = c;
	err = 0;
out:
	json_decref(root);
	if (err)
		*why = r ? r : "claims refused";
	return err;
}

int
claims_encode(const struct capability *cap, char **json_out)
{
	char iat[RFC3339_LEN + 1], exp[RFC3339_LEN + 1], acc[64], tail[96];
	size_t i, o = 0;
	int n;

	*json_out = NULL;
	/*
	 * Written by hand in a fixed order because gen is a u64 and jansson's
	 * integers stop at 2^63-1. It is safe without escaping only because
	 * every string is checked against its restricted alphabet first: the
	 * encoder refuses what the decoder would refuse.
	 */
	if (!id_valid(cap->sub) || !jti_valid(cap->jti) || !id_valid(cap->route.sandbox) ||
	    !id_valid(cap->route.worker) || !id_valid(cap->route.resident) ||
	    !substrate_valid(cap->route.substrate) || cap->route.generation == 0 ||
	    cap->route.activation == 0 || (cap->aud != AUD_NODE_API && cap->aud != AUD_NETGTW) ||
	    cap->exp < cap->iat)
		return -EINVAL;
	if (rfc3339_format(cap->iat, iat) != 0 || rfc3339_format(cap->exp, exp) != 0)
		return -EINVAL;
	if (cap->pur == PUR_CONTROL) {
		if (cap->acc == 0 || (cap->acc & ~ACC_ALL))
			return -EINVAL;
		o = (size_t)snprintf(acc, sizeof(acc), "[");
		for (i = 0; i < ACC_COUNT; i++)
			if (cap->acc & acc_names[i].bit)
				o += (size_t)snprintf(acc + o, sizeof(acc) - o, "%s\"%s\"",
				    o > 1 ? "," : "", acc_names[i].name);
		snprintf(acc + o, sizeof(acc) - o, "]");
		snprintf(tail, sizeof(tail), ",\"acc\":%s", acc);
	} else if (cap->pur == PUR_SERVICE) {
		if (cap->port == 0 || (cap->proto != PROTO_HTTP && cap->proto != PROTO_TCP))
			return -EINVAL;
		snprintf(tail, sizeof(tail), ",\"port\":%u,\"proto\":\"%s\"", (unsigned)cap->port,
		    cap->proto == PROTO_HTTP ? "http" : "tcp");
	} else
		return -EINVAL;
	n = asprintf(json_out,
	    "{\"iss\":\"" ISSUER "\",\"sub\":\"%s\",\"jti\":\"%s\",\"aud\":\"%s\",\"pur\":\"%s\","
	    "\"iat\":\"%s\",\"exp\":\"%s\",\"sbx\":\"%s\",\"gen\":%llu,\"wrk\":\"%s\","
	    "\"sst\":\"%s\",\"act\":%lu,\"res\":\"%s\"%s}",
	    cap->sub, cap->jti, cap->aud == AUD_NODE_API ? "node-api" : "netgtw",
	    cap->pur == PUR_CONTROL ? "control" : "service", iat, exp, cap->route.sandbox,
	    (unsigned long long)cap->route.generation, cap->route.worker, cap->route.substrate,
	    (unsigned long)cap->route.activation, cap->route.resident, tail);
	if (n < 0) {
		*json_out = NULL;
		return -ENOMEM;
	}
	return 0;
}

/* ---- route identity as a JSON object ---- */

struct json_t *
route_identity_pack(const struct route_identity *r)
{
	json_t *o;

	/* json_int_t is signed: a generation above 2^63-1 cannot be packed */
	if (r->generation == 0 || r->generation > (uint64_t)INT64_MAX) {
		errno = ERANGE;
		return NULL;
	}
	o = json_pack("{s:s, s:I, s:s, s:s, s:I, s:s}",
	    "sandbox", r->sandbox, "generation", (json_int_t)r->generation,
	    "worker", r->worker, "substrate", r->substrate,
	    "activation", (json_int_t)r->activation, "resident", r->resident);
	if (o == NULL)
		errno = ENOMEM;
	return o;
}

int
route_identity_unpack(const struct json_t *obj, struct route_identity *r)
{
	struct route_identity t;
	const char *sbx, *wrk, *sst, *res;
	json_int_t gen, act;
	json_error_t e;

	memset(&t, 0, sizeof(t));
	if (!json_is_object(obj) || json_object_size(obj) != 6)
		return -EINVAL;
	/* "!" makes unpack refuse members beyond the six; json_unpack's
	 * integer format refuses reals, strings and booleans */
	if (json_unpack_ex((json_t *)obj, &e, JSON_STRICT, "{s:s, s:I, s:s, s:s, s:I, s:s}",
	    "sandbox", &sbx, "generation", &gen, "worker", &wrk, "substrate", &sst,
	    "activation", &act, "resident", &res) != 0)
		return -EINVAL;
	if (gen < 1 || act < 1 || act > (json_int_t)UINT32_MAX)
		return -EINVAL;
	if (!id_valid(sbx) || !id_valid(wrk) || !id_valid(res) || !substrate_valid(sst))
		return -EINVAL;
	copy_id(t.sandbox, sizeof(t.sandbox), sbx);
	copy_id(t.worker, sizeof(t.worker), wrk);
	copy_id(t.resident, sizeof(t.resident), res);
	copy_id(t.substrate, sizeof(t.substrate), sst);
	t.generation = (uint64_t)gen;
	t.activation = (uint32_t)act;
	*r = t;
	return 0;
}
