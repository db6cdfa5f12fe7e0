/* The claim of a prepared jail's kept bridge (poolclaim.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <string.h>

#include "poolclaim.h"
#include "util.h"

#define FIXED_LEN (8 + 4 * 6)

static bool
id_ok(const char *s, size_t max)
{
	size_t l = strnlen(s, max + 1);

	return l >= 1 && l <= max && id_valid(s);
}

static bool
path_ok(const char *s)
{
	size_t l = strnlen(s, POOLCLAIM_PATH_MAX + 1);

	return l >= 2 && l <= POOLCLAIM_PATH_MAX && s[0] == '/' && strchr(s, '\n') == NULL;
}

/* "" or a dotted IPv4 address written as inet_ntop writes it */
static bool
ns_ok(const char *s)
{
	struct in_addr a;
	char back[16];

	if (strnlen(s, 16) == 16)
		return false;
	if (s[0] == '\0')
		return true;
	return inet_pton(AF_INET, s, &a) == 1 &&
	    inet_ntop(AF_INET, &a, back, sizeof(back)) != NULL && strcmp(back, s) == 0;
}

/* what spaced-host takes on its command line, and nothing else */
static const char *
claim_check(const struct pool_claim *c)
{
	if (c->id.generation < 1 || c->id.generation > INT64_MAX)
		return "generation out of range";
	if (c->id.activation < 1)
		return "activation out of range";
	if (c->uid_base < 65536 || c->uid_base > UINT32_MAX - 65536)
		return "uid base out of range";
	if (c->memory_mb < 16 || c->memory_mb > (1u << 20) || c->pids < 8 ||
	    c->pids > (1u << 22) || c->cpu_percent < 1 || c->cpu_percent > 100000 ||
	    c->disk_mb < 16 || c->disk_mb > (1u << 24))
		return "limit out of range";
	if (!id_ok(c->id.sandbox, SPACE_ID_MAX) || !id_ok(c->id.worker, SPACE_ID_MAX) ||
	    !id_ok(c->id.resident, SPACE_ID_MAX) ||
	    !id_ok(c->id.substrate, SPACE_SUBSTRATE_MAX) ||
	    !id_ok(c->claim_from, SPACE_ID_MAX))
		return "not an id";
	if (!ns_ok(c->nameserver))
		return "nameserver not an IPv4 address";
	if (!path_ok(c->run_dir) || !path_ok(c->layer_dir) || !path_ok(c->netns))
		return "not an absolute path";
	return NULL;
}



int
poolclaim_encode(const struct pool_claim *c, uint8_t *buf, size_t cap)
{
	size_t n = POOLCLAIM_HDR_LEN;

	/* the largest claim fits: 6 ids of at most 64 bytes and 3 paths of
	 * at most POOLCLAIM_PATH_MAX, with their lengths, and the numbers */
	_Static_assert(POOLCLAIM_HDR_LEN + FIXED_LEN + 6 * (1 + SPACE_ID_MAX) +
	    3 * (2 + POOLCLAIM_PATH_MAX) <= POOLCLAIM_MAX, "a claim fits");
	if (cap < POOLCLAIM_MAX || claim_check(c) != NULL)
		return -EINVAL;
	be_store(buf + n, c->id.generation, 8);
	n += 8;
	be_store(buf + n, c->id.activation, 4);
	be_store(buf + n + 4, c->uid_base, 4);
	be_store(buf + n + 8, c->memory_mb, 4);
	be_store(buf + n + 12, c->pids, 4);
	be_store(buf + n + 16, c->cpu_percent, 4);
	be_store(buf + n + 20, c->disk_mb, 4);
	n += 24;
	n += lstr_put(buf + n, c->id.sandbox, 1);
	n += lstr_put(buf + n, c->id.worker, 1);
	n += lstr_put(buf + n, c->id.resident, 1);
	n += lstr_put(buf + n, c->id.substrate, 1);
	n += lstr_put(buf + n, c->claim_from, 1);
	n += lstr_put(buf + n, c->nameserver, 1);
	n += lstr_put(buf + n, c->run_dir, 2);
	n += lstr_put(buf + n, c->layer_dir, 2);
	n += lstr_put(buf + n, c->netns, 2);
	be_store(buf, POOLCLAIM_MAGIC, 2);
	be_store(buf + 2, POOLCLAIM_VERSION, 2);
	be_store(buf + 4, n - POOLCLAIM_HDR_LEN, 4);
	return (int)n;
}


int
poolclaim_decode(const uint8_t *buf, size_t n, struct pool_claim *c, const char **why)
{
	const uint8_t *p, *end;

	memset(c, 0, sizeof(*c));
	*why = "truncated";
	if (n < POOLCLAIM_HDR_LEN + FIXED_LEN)
		return -EPROTO;
	*why = "not a claim";
	if (be_load(buf, 2) != POOLCLAIM_MAGIC || be_load(buf + 2, 2) != POOLCLAIM_VERSION)
		return -EPROTO;
	*why = "length is not the payload's";
	if (n > POOLCLAIM_MAX || be_load(buf + 4, 4) != n - POOLCLAIM_HDR_LEN)
		return -EPROTO;
	p = buf + POOLCLAIM_HDR_LEN;
	end = buf + n;
	c->id.generation = be_load(p, 8);
	c->id.activation = (uint32_t)be_load(p + 8, 4);
	c->uid_base = (uint32_t)be_load(p + 12, 4);
	c->memory_mb = (uint32_t)be_load(p + 16, 4);
	c->pids = (uint32_t)be_load(p + 20, 4);
	c->cpu_percent = (uint32_t)be_load(p + 24, 4);
	c->disk_mb = (uint32_t)be_load(p + 28, 4);
	p += FIXED_LEN;
	*why = "bad field";
	if (lstr_get(&p, end, 1, c->id.sandbox, SPACE_ID_MAX) < 0 ||
	    lstr_get(&p, end, 1, c->id.worker, SPACE_ID_MAX) < 0 ||
	    lstr_get(&p, end, 1, c->id.resident, SPACE_ID_MAX) < 0 ||
	    lstr_get(&p, end, 1, c->id.substrate, SPACE_SUBSTRATE_MAX) < 0 ||
	    lstr_get(&p, end, 1, c->claim_from, SPACE_ID_MAX) < 0 ||
	    lstr_get(&p, end, 1, c->nameserver, sizeof(c->nameserver) - 1) < 0 ||
	    lstr_get(&p, end, 2, c->run_dir, POOLCLAIM_PATH_MAX) < 0 ||
	    lstr_get(&p, end, 2, c->layer_dir, POOLCLAIM_PATH_MAX) < 0 ||
	    lstr_get(&p, end, 2, c->netns, POOLCLAIM_PATH_MAX) < 0)
		goto bad;
	*why = "bytes after the claim";
	if (p != end)
		goto bad;
	if ((*why = claim_check(c)) != NULL)
		goto bad;
	return 0;
bad:
	memset(c, 0, sizeof(*c));
	return -EPROTO;
}
