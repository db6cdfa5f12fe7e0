/* The claim of a kept prepared bridge (poolclaim.h): round trips, and
 * what a claim may not be is refused. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "poolclaim.h"
#include "tap.h"

static struct pool_claim
claim(void)
{
	struct pool_claim c;

	memset(&c, 0, sizeof(c));
	strcpy(c.id.sandbox, "sbx_a");
	c.id.generation = 1;
	strcpy(c.id.worker, "w1");
	strcpy(c.id.substrate, "jail");
	c.id.activation = 1;
	strcpy(c.id.resident, "r1");
	strcpy(c.claim_from, "pool-0011223344556677");
	strcpy(c.nameserver, "10.0.0.1");
	c.uid_base = 200000;
	c.memory_mb = 512;
	c.pids = 256;
	c.cpu_percent = 100;
	c.disk_mb = 4096;
	strcpy(c.run_dir, "/var/lib/space/run/sbx_a.g1");
	strcpy(c.layer_dir, "/var/lib/space/exec/sbx_a.g1/layer");
	strcpy(c.netns, "/var/lib/space/run/sbx_a.g1/netns");
	return c;
}

/* the claim after one change, encoded: must be refused by the encoder,
 * and the same bytes made by hand refused by the decoder */
static int
encode_with(void (*f)(struct pool_claim *))
{
	struct pool_claim c = claim();
	uint8_t buf[POOLCLAIM_MAX];

	f(&c);
	return poolclaim_encode(&c, buf, sizeof(buf));
}

static void gen0(struct pool_claim *c) { c->id.generation = 0; }
static void act0(struct pool_claim *c) { c->id.activation = 0; }
static void uid_low(struct pool_claim *c) { c->uid_base = 1000; }
static void mem_big(struct pool_claim *c) { c->memory_mb = (1u << 20) + 1; }
static void bad_id(struct pool_claim *c) { strcpy(c->id.sandbox, "a/b"); }
static void no_from(struct pool_claim *c) { c->claim_from[0] = '\0'; }
static void rel_path(struct pool_claim *c) { strcpy(c->run_dir, "run/x"); }
static void nl_path(struct pool_claim *c) { strcpy(c->layer_dir, "/a\nb"); }
static void bad_ns(struct pool_claim *c) { strcpy(c->nameserver, "10.0.0.01"); }

int
main(void)
{
	struct pool_claim c = claim(), d;
	uint8_t buf[POOLCLAIM_MAX], b2[POOLCLAIM_MAX];
	const char *why;
	int n;

	n = poolclaim_encode(&c, buf, sizeof(buf));
	ok(n > POOLCLAIM_HDR_LEN, "a claim encodes (%d bytes)", n);
	is_int(poolclaim_decode(buf, (size_t)n, &d, &why), 0, "... and decodes");
	ok(memcmp(&c, &d, sizeof(c)) == 0, "... to the same claim");
	c.nameserver[0] = '\0';
	n = poolclaim_encode(&c, buf, sizeof(buf));
	is_int(poolclaim_decode(buf, (size_t)n, &d, &why), 0, "no nameserver: decodes");
	ok(d.nameserver[0] == '\0', "... as none");
	c = claim();
	n = poolclaim_encode(&c, buf, sizeof(buf));
	is_int(poolclaim_decode(buf, (size_t)n - 1, &d, &why), -EPROTO, "truncated: refused");
	memcpy(b2, buf, (size_t)n);
	b2[n] = 0;
	b2[7]++;
	is_int(poolclaim_decode(b2, (size_t)n + 1, &d, &why), -EPROTO,
	    "a byte after the last field: refused (%s)", why);
	memcpy(b2, buf, (size_t)n);
	b2[0] ^= 1;
	is_int(poolclaim_decode(b2, (size_t)n, &d, &why), -EPROTO, "bad magic: refused");
	memcpy(b2, buf, (size_t)n);
	b2[3] = 2;
	is_int(poolclaim_decode(b2, (size_t)n, &d, &why), -EPROTO, "other version: refused");
	/* generation 0 written by hand (the encoder would not) */
	memcpy(b2, buf, (size_t)n);
	memset(b2 + POOLCLAIM_HDR_LEN, 0, 8);
	is_int(poolclaim_decode(b2, (size_t)n, &d, &why), -EPROTO, "generation 0: refused (%s)", why);
	ok(d.id.sandbox[0] == '\0', "... and nothing of it is handed over");
	/* a NUL inside the sandbox id (its first byte after the length) */
	memcpy(b2, buf, (size_t)n);
	b2[POOLCLAIM_HDR_LEN + 32 + 1] = '\0';
	is_int(poolclaim_decode(b2, (size_t)n, &d, &why), -EPROTO, "a NUL in an id: refused");
	is_int(encode_with(gen0), -EINVAL, "encoder refuses generation 0");
	is_int(encode_with(act0), -EINVAL, "encoder refuses activation 0");
	is_int(encode_with(uid_low), -EINVAL, "encoder refuses a uid base under 65536");
	is_int(encode_with(mem_big), -EINVAL, "encoder refuses a memory limit out of range");
	is_int(encode_with(bad_id), -EINVAL, "encoder refuses a sandbox that is not an id");
	is_int(encode_with(no_from), -EINVAL, "encoder refuses a claim of no prepared jail");
	is_int(encode_with(rel_path), -EINVAL, "encoder refuses a relative path");
	is_int(encode_with(nl_path), -EINVAL, "encoder refuses a path with a newline");
	is_int(encode_with(bad_ns), -EINVAL, "encoder refuses an address in another spelling");
	return done_testing();
}
