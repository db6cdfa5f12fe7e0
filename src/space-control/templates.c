/* Templates (docs/templates.md): the control plane stores each image by
 * its digest and each name as a small JSON file pointing at one:
 *
 *   DATA/templates/blobs/DIGEST.img    the squashfs image, 0600
 *   DATA/templates/names/NAME.json     {name, digest, size, owner, created_at, meta}
 *
 * An image arrives by PUT /v1/templates/blobs/DIGEST, streamed to a
 * temporary file and hashed on the way; it is kept only if its bytes are
 * the digest. POST /v1/templates names an image that is here. Workers
 * fetch images by digest (GET /v1/workers/ID/templates/DIGEST, with their
 * own credential, as every worker route is) and
 * verify them again; a sandbox records the digest, never the name, so
 * rebuilding a name does not change a sandbox made from it. An image is
 * removed with the last name pointing at it, once no sandbox that is not
 * killed was made from it; one kept for such a sandbox is collected by
 * templates_collect() once that sandbox is killed. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api_common.h"
#include "control.h"
#include "log.h"
#include "templates.h"
#include "tplimage.h"
#include "upsink.h"
#include "util.h"

static void
hash_init(void *h)
{
	tpl_hash_init(h);
}

static void
hash_update(void *h, const void *p, size_t n)
{
	tpl_hash_update(h, p, n);
}

static const struct upsink_kind image_kind = {
	.what = "template image", .suffix = ".XXXXXX", .init = hash_init, .update = hash_update,
};

static int
tdir(const struct ctl *c, const char *sub, char *out, size_t cap)
{
	char base[PATH_MAX + 16];

	snprintf(base, sizeof(base), "%s/templates", c->cfg.data_dir);
	if (mkdir(base, 0700) < 0 && errno != EEXIST)
		return -errno;
	if ((size_t)snprintf(out, cap, "%s/%s", base, sub) >= cap)
		return -ENAMETOOLONG;
	if (mkdir(out, 0700) < 0 && errno != EEXIST)
		return -errno;
	return 0;
}

static int
blob_path(const struct ctl *c, const char *digest, char *out, size_t cap)
{
	char d[PATH_MAX + 32];
	int r;

	if ((r = tdir(c, "blobs", d, sizeof(d))) < 0)
		return r;
	if ((size_t)snprintf(out, cap, "%s/%s.img", d, digest) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

static int
name_path(const struct ctl *c, const char *name, char *out, size_t cap)
{
	char d[PATH_MAX + 32];
	int r;

	if ((r = tdir(c, "names", d, sizeof(d))) < 0)
		return r;
	if ((size_t)snprintf(out, cap, "%s/%s.json", d, name) >= cap)
		return -ENAMETOOLONG;
	return 0;
}

/* the record of name, or NULL (-ENOENT in *rc) */
static json_t *
name_load(const struct ctl *c, const char *name, int *rc)
{
	char p[PATH_MAX + 128];
	json_error_t e;
	json_t *o;

	if ((*rc = name_path(c, name, p, sizeof(p))) < 0)
		return NULL;
	if ((o = json_load_file(p, JSON_REJECT_DUPLICATES, &e)) == NULL) {
		*rc = access(p, F_OK) == 0 ? -EIO : -ENOENT;
		return NULL;
	}
	*rc = 0;
	return o;
}

/* The names directory locked (flock, so that control planes sharing
 * D/templates exclude each other too): a name's owner is read and its
 * file replaced or removed as one step. The descriptor to close, or
 * -errno. */
static int
names_lock(const struct ctl *c)
{
	char d[PATH_MAX + 32];
	int r;

	return (r = tdir(c, "names", d, sizeof(d))) < 0 ? r : dir_lock(d);
}

/* whether the name record o was created by principal */
static bool
owned_by(json_t *o, const char *principal)
{
	const char *owner = json_string_value(json_object_get(o, "owner"));

	return owner != NULL && strcmp(owner, principal) == 0;
}

/* whether principal may replace or remove name: a name nobody holds, or
 * one it created. 0, -EPERM, or another -errno (an unreadable record is
 * nobody's to take over). */
static int
name_owned(const struct ctl *c, const char *name, const char *principal)
{
	json_t *o;
	int rc;

	if ((o = name_load(c, name, &rc)) == NULL)
		return rc == -ENOENT ? 0 : rc;
	rc = owned_by(o, principal) ? 0 : -EPERM;
	json_decref(o);
	return rc;
}

int
templates_resolve(const struct ctl *c, const char *name, char digest[TPL_DIGEST_HEX + 1])
{
	const char *d;
	json_t *o;
	int rc;

	if (!id_valid(name) || (o = name_load(c, name, &rc)) == NULL)
		return -ENOENT;
	d = json_string_value(json_object_get(o, "digest"));
	rc = d && tpl_digest_valid(d) ? 0 : -EIO;
	if (rc == 0)
		memcpy(digest, d, TPL_DIGEST_HEX + 1);
	json_decref(o);
	return rc;
}

/* ---- PUT /v1/templates/blobs/{digest}: the streamed body ---- */

int
templates_sink(struct req *r, const char *p, size_t n)
{
	char path[PATH_MAX + 64];

	if (r->sink == NULL) {
		if (!tpl_digest_valid(r->params[0])) {
			reply_error(r, 400, "bad_request", "a digest is 64 lowercase hex characters");
			return -1;
		}
		if (blob_path(r->ctl, r->params[0], path, sizeof(path)) < 0) {
			reply_error(r, 500, "internal", "cannot store the image");
			return -1;
		}
		if (upsink_open(r, &image_kind, path) < 0)
			return -1;
	}
	return upsink_write(r, &image_kind, TPL_IMAGE_MAX, p, n);
}

void
templates_sink_end(struct req *r)
{
	upsink_end(r);
}

void
api_template_blob_put(struct req *r)
{
	struct upsink *s = r->sink;
	char got[TPL_DIGEST_HEX + 1], path[PATH_MAX + 64];

	if (!tpl_digest_valid(r->params[0])) {
		reply_error(r, 400, "bad_request", "a digest is 64 lowercase hex characters");
		return;
	}
	if (s == NULL) {
		reply_error(r, 400, "bad_request", "the body is the image");
		return;
	}
	if (upsink_finish(r, &image_kind) < 0)         /* the hash whole */
		return;
	tpl_hash_final(&s->h.image, got);
	if (strcmp(got, r->params[0]) != 0) {
		reply_error(r, 400, "digest_mismatch", "the body's SHA-256 is %s", got);
		return;
	}
	if (blob_path(r->ctl, got, path, sizeof(path)) < 0 || fsync(s->fd) < 0 ||
	    rename(s->tmp, path) < 0) {
		reply_error(r, 500, "internal", "cannot store the image");
		return;
	}
	s->tmp[0] = '\0';
	reply_json(r, 201, json_pack("{s:s,s:I}", "digest", got, "size", (json_int_t)s->size));
}

void
api_template_blob_get(struct req *r)
{
	char path[PATH_MAX + 64];
	struct stat st;
	int fd;

	/* params[0] is the worker (the credential's), params[1] the digest */
	if (!tpl_digest_valid(r->params[1])) {
		reply_error(r, 400, "bad_request", "a digest is 64 lowercase hex characters");
		return;
	}
	if (blob_path(r->ctl, r->params[1], path, sizeof(path)) < 0 ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		reply_error(r, 404, "not_found", "no template image %s", r->params[1]);
		return;
	}
	if (fstat(fd, &st) < 0) {
		close(fd);
		reply_error(r, 500, "internal", "cannot read the image");
		return;
	}
	r->status = 200;
	r->content_type = "application/octet-stream";
	r->file_fd = fd;
	r->file_size = (uint64_t)st.st_size;
}

/* ---- names ---- */

/* one member of meta, by its name (the keys are checked before) */
static bool
meta_value_ok(const char *k, json_t *v)
{
	const char *ek;
	json_t *e;
	size_t i;

	if (strcmp(k, "version") == 0)
		return json_is_integer(v) && json_integer_value(v) >= 1;
	if (strcmp(k, "uid") == 0 || strcmp(k, "gid") == 0)
		return json_is_integer(v) && json_integer_value(v) >= 0 &&
		    json_integer_value(v) <= 65534;
	if (strcmp(k, "workdir") == 0)
		return json_is_string(v) && json_string_value(v)[0] == '/';
	if (strcmp(k, "source") == 0)
		return json_is_string(v);
	if (strcmp(k, "env") == 0) {
		if (!json_is_object(v))
			return false;
		json_object_foreach(v, ek, e)
			if (!json_is_string(e))
				return false;
		return true;
	}
	if (strcmp(k, "cmd") == 0) {
		if (!json_is_array(v))
			return false;
		json_array_foreach(v, i, e)
			if (!json_is_string(e))
				return false;
		return true;
	}
	return false;
}

/* meta: what the image's TPL_META_PATH holds, shown by list and show */
static bool
meta_ok(json_t *m, const char **why)
{
	static const char *const keys[] = { "version", "uid", "gid", "workdir", "env", "cmd",
	    "source", NULL };
	const char *k;
	json_t *v;
	size_t i;
	char *s;

	if (!json_is_object(m))
		return *why = "\"meta\" must be an object", false;
	if ((s = json_dumps(m, JSON_COMPACT)) == NULL)
		return *why = "out of memory", false;
	i = strlen(s);
	free(s);
	if (i > TPL_META_MAX)
		return *why = "\"meta\" is too large", false;
	json_object_foreach(m, k, v) {
		for (i = 0; keys[i] && strcmp(keys[i], k) != 0; i++)
			;
		if (keys[i] == NULL)
			return *why = "unknown field in \"meta\"", false;
		if (!meta_value_ok(k, v))
			return *why = "\"meta\": version is an integer from 1, uid and gid 0..65534, "
			    "workdir an absolute path, source a string, env an object of strings, "
			    "cmd an array of strings", false;
	}
	return true;
}

void
api_template_create(struct req *r)
{
	static const char *const keys[] = { "name", "digest", "meta", NULL };
	char path[PATH_MAX + 128], tmp[PATH_MAX + 160], ts[RFC3339_LEN + 1];
	const char *name, *digest, *why = NULL;
	struct stat st;
	json_t *in, *meta, *rec = NULL;
	int lk = -1, rc;
	bool ok;

	if ((in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	name = api_id_field(r, in, "name", false, &ok);
	if (!ok)
		goto out;
	digest = json_string_value(json_object_get(in, "digest"));
	meta = json_object_get(in, "meta");
	if (name == NULL || strcmp(name, "host") == 0 || strcmp(name, "blobs") == 0) {
		reply_error(r, 400, "bad_request", "\"name\" must be an id other than host and blobs");
		goto out;
	}
	if (digest == NULL || !tpl_digest_valid(digest)) {
		reply_error(r, 400, "bad_request", "\"digest\" must be 64 lowercase hex characters");
		goto out;
	}
	if (meta == NULL)
		meta = json_object();
	else
		json_incref(meta);
	if (!meta_ok(meta, &why)) {
		json_decref(meta);
		reply_error(r, 400, "bad_request", "%s", why);
		goto out;
	}
	/* under the names' lock: the image a name is given cannot be
	 * collected between its check and the name (collection takes it) */
	if ((lk = names_lock(r->ctl)) < 0) {
		json_decref(meta);
		reply_error(r, 500, "internal", "cannot record the template");
		goto out;
	}
	if (blob_path(r->ctl, digest, path, sizeof(path)) < 0 || stat(path, &st) < 0) {
		json_decref(meta);
		reply_error(r, 409, "conflict", "no image %s here: PUT /v1/templates/blobs/%s first",
		    digest, digest);
		goto out;
	}
	rfc3339_format(time(NULL), ts);
	rec = json_pack("{s:s,s:s,s:I,s:s,s:s,s:o}", "name", name, "digest", digest,
	    "size", (json_int_t)st.st_size, "owner", r->principal, "created_at", ts, "meta", meta);
	if (rec == NULL || name_path(r->ctl, name, path, sizeof(path)) < 0) {
		reply_error(r, 500, "internal", "cannot record the template");
		goto out;
	}
	/* names are shared by every API key, each held by the principal that
	 * created it: another's is neither re-pointed nor taken over (a
	 * sandbox made from it would run an image its owner never chose) */
	if ((rc = name_owned(r->ctl, name, r->principal)) < 0) {
		if (rc == -EPERM)
			reply_error(r, 403, "forbidden", "template %s belongs to another principal", name);
		else
			reply_error(r, 500, "internal", "cannot read the template %s", name);
		goto out;
	}
	/* a whole file or none: written aside, then renamed over */
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp%ld", path, (long)gettid()) >= sizeof(tmp) ||
	    json_dump_file(rec, tmp, JSON_COMPACT) < 0 || rename(tmp, path) < 0) {
		unlink(tmp);
		reply_error(r, 500, "internal", "cannot record the template");
		goto out;
	}
	log_info("template %s -> %s by %s", name, digest, r->principal);
	reply_json(r, 201, json_incref(rec));
out:
	if (lk >= 0)
		close(lk);
	json_decref(rec);
	json_decref(in);
}

void
api_template_list(struct req *r)
{
	char d[PATH_MAX + 32], name[SPACE_ID_MAX + 1];
	struct dirent *e;
	json_t *arr = json_array(), *o;
	size_t n;
	DIR *dp;
	int rc;

	json_array_append_new(arr, json_pack("{s:s,s:b}", "name", "host", "builtin", 1));
	if (tdir(r->ctl, "names", d, sizeof(d)) == 0 && (dp = opendir(d)) != NULL) {
		while ((e = readdir(dp)) != NULL) {
			n = strlen(e->d_name);
			if (n <= 5 || n - 5 > SPACE_ID_MAX || strcmp(e->d_name + n - 5, ".json") != 0)
				continue;
			memcpy(name, e->d_name, n - 5);
			name[n - 5] = '\0';
			if (id_valid(name) && (o = name_load(r->ctl, name, &rc)) != NULL)
				json_array_append_new(arr, o);
		}
		closedir(dp);
	}
	reply_json(r, 200, json_pack("{s:o}", "templates", arr));
}

void
api_template_get(struct req *r)
{
	json_t *o;
	int rc;

	if (strcmp(r->params[0], "host") == 0) {
		reply_json(r, 200, json_pack("{s:s,s:b}", "name", "host", "builtin", 1));
		return;
	}
	if ((o = name_load(r->ctl, r->params[0], &rc)) == NULL) {
		reply_error(r, rc == -ENOENT ? 404 : 500, rc == -ENOENT ? "not_found" : "internal",
		    "no template %s", r->params[0]);
		return;
	}
	reply_json(r, 200, o);
}

/* another name points at digest */
static bool
digest_named(const struct ctl *c, const char *digest)
{
	char d[PATH_MAX + 32], name[SPACE_ID_MAX + 1];
	struct dirent *e;
	bool found = false;
	json_t *o;
	size_t n;
	DIR *dp;
	int rc;

	if (tdir(c, "names", d, sizeof(d)) < 0 || (dp = opendir(d)) == NULL)
		return true;    /* unsure: keep the image */
	while (!found && (e = readdir(dp)) != NULL) {
		n = strlen(e->d_name);
		if (n <= 5 || n - 5 > SPACE_ID_MAX || strcmp(e->d_name + n - 5, ".json") != 0)
			continue;
		memcpy(name, e->d_name, n - 5);
		name[n - 5] = '\0';
		if ((o = name_load(c, name, &rc)) == NULL)
			continue;
		found = json_string_value(json_object_get(o, "digest")) != NULL &&
		    strcmp(json_string_value(json_object_get(o, "digest")), digest) == 0;
		json_decref(o);
	}
	closedir(dp);
	return found;
}

void
api_template_delete(struct req *r)
{
	char path[PATH_MAX + 128], digest[TPL_DIGEST_HEX + 1];
	bool removed = false;
	int64_t refs = 1;
	json_t *o;
	int lk, rc;

	if (strcmp(r->params[0], "host") == 0) {
		reply_error(r, 400, "bad_request", "host is built in");
		return;
	}
	if ((lk = names_lock(r->ctl)) < 0) {
		reply_error(r, 500, "internal", "cannot remove the template");
		return;
	}
	if ((o = name_load(r->ctl, r->params[0], &rc)) == NULL) {
		close(lk);
		reply_error(r, 404, "not_found", "no template %s", r->params[0]);
		return;
	}
	if (!owned_by(o, r->principal)) {
		close(lk);
		json_decref(o);
		reply_error(r, 403, "forbidden", "template %s belongs to another principal",
		    r->params[0]);
		return;
	}
	snprintf(digest, sizeof(digest), "%s", json_string_value(json_object_get(o, "digest")));
	json_decref(o);
	if (name_path(r->ctl, r->params[0], path, sizeof(path)) < 0 || unlink(path) < 0) {
		close(lk);
		reply_error(r, 500, "internal", "cannot remove the template");
		return;
	}
	/* the image goes with its last name, unless a sandbox still needs it
	 * (a paused one resumes from it; the next rm of a name collects it) */
	/* a store without the count (PostgreSQL, not yet) keeps every image */
	if (tpl_digest_valid(digest) && !digest_named(r->ctl, digest) &&
	    r->ctl->st->ops->template_refs != NULL &&
	    r->ctl->st->ops->template_refs(r->ctl->st, digest, &refs) == 0 && refs == 0 &&
	    blob_path(r->ctl, digest, path, sizeof(path)) == 0 && unlink(path) == 0)
		removed = true;
	close(lk);
	log_info("template %s removed by %s%s", r->params[0], r->principal,
	    removed ? ", and its image" : "");
	reply_json(r, 200, json_pack("{s:s,s:s,s:b,s:I}", "deleted", r->params[0], "digest", digest,
	    "image_removed", removed, "sandboxes", (json_int_t)refs));
}

/* The collection by reference: an image no name points at and no sandbox
 * that is not killed was made from is removed, once it is older than
 * --archive-grace (an upload is named right after it arrives). A store
 * without the count (PostgreSQL, not yet) keeps every image. Returns the
 * number removed. */
int
templates_collect(struct ctl *c)
{
	char d[PATH_MAX + 32], path[PATH_MAX + 128], digest[TPL_DIGEST_HEX + 1];
	struct dirent *e;
	struct stat st;
	int64_t refs;
	size_t n;
	DIR *dp;
	int lk, removed = 0;

	if (c->st->ops->template_refs == NULL || tdir(c, "blobs", d, sizeof(d)) < 0 ||
	    (dp = opendir(d)) == NULL)
		return 0;
	while ((e = readdir(dp)) != NULL) {
		n = strlen(e->d_name);
		if (n != TPL_DIGEST_HEX + 4 || strcmp(e->d_name + TPL_DIGEST_HEX, ".img") != 0)
			continue;
		memcpy(digest, e->d_name, TPL_DIGEST_HEX);
		digest[TPL_DIGEST_HEX] = '\0';
		if (!tpl_digest_valid(digest) || blob_path(c, digest, path, sizeof(path)) < 0 ||
		    lstat(path, &st) < 0 || !S_ISREG(st.st_mode) ||
		    st.st_mtime > time(NULL) - c->cfg.archive_grace)
			continue;
		if ((lk = names_lock(c)) < 0)
			break;
		refs = 1;
		if (!digest_named(c, digest) &&
		    c->st->ops->template_refs(c->st, digest, &refs) == 0 && refs == 0 &&
		    unlink(path) == 0) {
			removed++;
			log_info("template image %s collected: no name and no sandbox needs it", digest);
		}
		close(lk);
	}
	closedir(dp);
	return removed;
}
