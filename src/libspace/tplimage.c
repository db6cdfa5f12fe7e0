/* Template image digests: SHA-256 through libsodium (tplimage.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sodium.h>

#include "tplimage.h"

_Static_assert(sizeof(crypto_hash_sha256_state) <= sizeof(((struct tpl_hash *)0)->st),
    "tpl_hash state too small");

bool
tpl_digest_valid(const char *s)
{
	size_t i;

	for (i = 0; i < TPL_DIGEST_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return s[i] == '\0';
}

void
tpl_hash_init(struct tpl_hash *h)
{
	memset(h, 0, sizeof(*h));
	crypto_hash_sha256_init((crypto_hash_sha256_state *)h->st);
}

void
tpl_hash_update(struct tpl_hash *h, const void *p, size_t n)
{
	crypto_hash_sha256_update((crypto_hash_sha256_state *)h->st, p, n);
	h->size += n;
}

void
tpl_hash_final(struct tpl_hash *h, char hex[TPL_DIGEST_HEX + 1])
{
	uint8_t d[crypto_hash_sha256_BYTES];

	crypto_hash_sha256_final((crypto_hash_sha256_state *)h->st, d);
	sodium_bin2hex(hex, TPL_DIGEST_HEX + 1, d, sizeof(d));
}

int
tpl_digest_fd(int fd, char hex[TPL_DIGEST_HEX + 1], uint64_t *size)
{
	/* on the heap for the call, not thread-local: a static TLS buffer
	 * is zeroed into every thread of every process linking this file
	 * (64 KiB resident per thread, per sandbox's bridge) */
	enum { BUF = 1 << 16 };
	uint8_t *buf = malloc(BUF);
	struct tpl_hash h;
	ssize_t n;
	int rc = 0;

	if (buf == NULL)
		return -ENOMEM;
	tpl_hash_init(&h);
	for (;;) {
		n = pread(fd, buf, BUF, (off_t)h.size);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = -errno;
			break;
		}
		if (n == 0)
			break;
		if (h.size + (uint64_t)n > TPL_IMAGE_MAX) {
			rc = -EFBIG;
			break;
		}
		tpl_hash_update(&h, buf, (size_t)n);
	}
	free(buf);
	if (rc != 0)
		return rc;
	if (size)
		*size = h.size;
	tpl_hash_final(&h, hex);
	return 0;
}
