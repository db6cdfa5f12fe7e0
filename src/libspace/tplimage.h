/* Template images (docs/templates.md): a read-only squashfs file named by
 * the SHA-256 of its bytes. Every hop that handles one (space-control on
 * upload, sbx-manager on fetch, spaced-host before the mount) recomputes
 * the digest from the bytes it holds; a name is never trusted. */
#ifndef SPACE_TPLIMAGE_H
#define SPACE_TPLIMAGE_H
#include <stdbool.h>
#include <stdint.h>

#define TPL_DIGEST_HEX   64                     /* lowercase hex of SHA-256 */
#define TPL_IMAGE_MAX    (16ull << 30)          /* bytes of one image */
#define TPL_META_MAX     (64u << 10)            /* the metadata JSON, bytes */
#define TPL_META_PATH    "/.space/template.json" /* inside the image */

/* exactly 64 lowercase hex characters */
bool tpl_digest_valid(const char *s);
/* SHA-256 of everything fd holds from offset 0 (pread: the offset is not
 * moved), as lowercase hex; *size the bytes read; 0 or -errno (-EFBIG past
 * TPL_IMAGE_MAX) */
int tpl_digest_fd(int fd, char hex[TPL_DIGEST_HEX + 1], uint64_t *size);

/* incremental form, for bytes that arrive in pieces */
struct tpl_hash {
	uint8_t st[256] __attribute__((aligned(64)));   /* crypto_hash_sha256_state */
	uint64_t size;
};
void tpl_hash_init(struct tpl_hash *h);
void tpl_hash_update(struct tpl_hash *h, const void *p, size_t n);
void tpl_hash_final(struct tpl_hash *h, char hex[TPL_DIGEST_HEX + 1]);

/* TPL_META_PATH: {"version":1,"uid","gid","workdir","env":{K:V},"cmd":[..],
 * "source"}, every key but version optional, no other key */
#define TPL_USER_DEFAULT 1000u          /* uid and gid when the file does not say */
struct tpl_meta {
	bool set;
	uint32_t uid, gid;              /* 0..65534 */
	char *workdir;                  /* absolute, or NULL */
	char **env;                     /* "K=V", nenv of them */
	size_t nenv;
};
/* strict decoder of untrusted bytes (the sandbox may rewrite the file in
 * its upper layer): 0, or -EINVAL / -EFBIG / -ENOMEM with *m reset */
int  tpl_meta_parse(const char *buf, size_t len, struct tpl_meta *m);
void tpl_meta_free(struct tpl_meta *m);
#endif
