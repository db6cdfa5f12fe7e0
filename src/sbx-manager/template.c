/* The worker's template cache (docs/templates.md): DATA/templates/DIGEST.img,
 * fetched from the control plane by digest with the worker credential,
 * hashed while it arrives and kept only when the bytes are the ones the
 * digest names. spaced-host hashes the file again before it mounts it. */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sbx-manager.h"
#include "tplimage.h"

struct fetch {
	int fd;
	struct tpl_hash h;
	bool over, failed;
};

static size_t
on_data(char *p, size_t sz, size_t nm, void *arg)
{
	struct fetch *f = arg;
	size_t n = sz * nm, off = 0;
	ssize_t w;

	if (f->h.size + n > TPL_IMAGE_MAX) {
		f->over = true;
		return 0;
	}
	tpl_hash_update(&f->h, p, n);
	while (off < n) {
		if ((w = write(f->fd, p + off, n - off)) < 0) {
			if (errno == EINTR)
				continue;
			f->failed = true;
			return 0;
		}
		off += (size_t)w;
	}
	return n;
}

static int
cache_dir(const struct mgr *m, char *dir, size_t cap)
{
	snprintf(dir, cap, "%s/templates", m->cfg.data_dir);
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

int
template_path(const struct mgr *m, const char *digest, char *path, size_t cap)
{
	char dir[1100];
	int r;

	if (!tpl_digest_valid(digest))
		return -EINVAL;
	if ((r = cache_dir(m, dir, sizeof(dir))) < 0)
		return r;
	snprintf(path, cap, "%s/%s.img", dir, digest);
	return 0;
}

int
template_ensure(const struct mgr *m, const char *digest, char *path, size_t cap, const char **why)
{
	char tmp[1200], url[2048], authz[600], got[TPL_DIGEST_HEX + 1];
	struct curl_slist *h = NULL;
	struct fetch f = { .fd = -1 };
	struct stat st;
	long status = 0;
	CURLcode rc;
	CURL *c = NULL;
	int r;

	*why = "template fetch failed";
	if ((r = template_path(m, digest, path, cap)) < 0) {
		*why = "bad template digest";
		return r;
	}
	if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
		utimensat(AT_FDCWD, path, NULL, 0);     /* last use, for the sweep */
		return 0;
	}
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	if ((f.fd = mkostemp(tmp, O_CLOEXEC)) < 0)
		return -errno;
	tpl_hash_init(&f.h);
	if ((c = curl_easy_init()) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	snprintf(url, sizeof(url), "%s/v1/workers/%s/templates/%s", m->cfg.control_url,
	    m->cfg.worker_id, digest);
	snprintf(authz, sizeof(authz), "Authorization: Bearer %s", m->cfg.credential);
	h = curl_slist_append(h, authz);
	explicit_bzero(authz, sizeof(authz));
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
	/* no total timeout (images are large); a stalled transfer ends */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &f);
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK || status != 200) {
		log_warnx("template %s: fetch from the control plane: %s (HTTP %ld)", digest,
		    rc != CURLE_OK ? curl_easy_strerror(rc) : "refused", status);
		*why = status == 404 ? "template unknown to the control plane" :
		    f.over ? "template image too large" : "template fetch failed";
		r = status == 404 ? -ENOENT : -EIO;
		goto out;
	}
	tpl_hash_final(&f.h, got);
	if (strcmp(got, digest) != 0) {
		log_warnx("template %s: the control plane sent bytes of digest %s: refused", digest, got);
		*why = "template image digest mismatch";
		r = -EBADMSG;
		goto out;
	}
	if (fchmod(f.fd, 0400) < 0 || fsync(f.fd) < 0 || rename(tmp, path) < 0) {
		r = -errno;
		goto out;
	}
	tmp[0] = '\0';
	log_info("template %s fetched (%llu bytes)", digest, (unsigned long long)f.h.size);
	r = 0;
out:
	if (f.fd >= 0)
		close(f.fd);
	if (tmp[0])
		unlink(tmp);
	curl_slist_free_all(h);
	if (c)
		curl_easy_cleanup(c);
	return r;
}

/* a record (of any state: a retired one may resume here) names digest */
static bool
in_use(struct mgr *m, const char *digest)
{
	struct record *rs = NULL;
	bool used = false;
	size_t i, n = 0;

	if (records_all(m, &rs, &n) != 0)
		return true;    /* unsure: keep it */
	for (i = 0; i < n && !used; i++)
		used = strcmp(rs[i].template_name, digest) == 0;
	free(rs);
	return used;
}

/* cached images no record names and not used for a day: removed */
void
template_sweep(struct mgr *m)
{
	char dir[1100], p[1300], d[TPL_DIGEST_HEX + 1];
	struct dirent *e;
	struct stat st;
	DIR *dp;
	size_t n;

	if (cache_dir(m, dir, sizeof(dir)) < 0 || (dp = opendir(dir)) == NULL)
		return;
	while ((e = readdir(dp)) != NULL) {
		n = strlen(e->d_name);
		if (n != TPL_DIGEST_HEX + 4 || strcmp(e->d_name + TPL_DIGEST_HEX, ".img") != 0)
			continue;
		memcpy(d, e->d_name, TPL_DIGEST_HEX);
		d[TPL_DIGEST_HEX] = '\0';
		snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
		if (!tpl_digest_valid(d) || in_use(m, d) || stat(p, &st) < 0 ||
		    st.st_mtime > time(NULL) - 86400)
			continue;
		if (unlink(p) == 0)
			log_info("template %s: cached image unused, removed", d);
	}
	closedir(dp);
}
