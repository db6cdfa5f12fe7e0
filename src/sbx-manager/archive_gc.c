/* The snapshot store's collection, the worker's half (docs/recovery.md,
 * "Collecting the snapshot store"). The control plane holds the
 * references, this worker holds (a share of) the files: every pass offers
 * the archives older than --snapshot-gc-grace found in the store and
 * deletes those the answer names, and only those it offered.
 *
 * A deletion must not take an archive that was written again meanwhile
 * (another worker may rename a new copy of the same digest into place at
 * any moment, and will report it). So the file is first renamed aside to
 * ".gc.<digest>.<random>", atomically; if what was moved is not the inode
 * that was offered, it is put back (renameat2 RENAME_NOREPLACE: a newer
 * copy in place wins, and holds the same bytes). A crash between the two
 * leaves a ".gc." file, which the next pass puts back under its digest
 * rather than deletes: an interrupted collection never loses an archive,
 * it only offers it again. Temporary files of a writer that died
 * (".tmp.*", not written for an hour and the grace) are deleted. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <jansson.h>
#include <sodium.h>

#include "log.h"
#include "sbx-manager.h"
#include "snapshot.h"
#include "util.h"

struct offered {
	char digest[SNAPSHOT_DIGEST_HEX + 1];
	dev_t dev;
	ino_t ino;
};

static bool
hex64(const char *s)
{
	size_t i;

	for (i = 0; i < SNAPSHOT_DIGEST_HEX; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
	return true;
}

/* "<64 hex>.snap" -> the digest */
static bool
archive_name(const char *name, char digest[SNAPSHOT_DIGEST_HEX + 1])
{
	if (strlen(name) != SNAPSHOT_DIGEST_HEX + 5 || strcmp(name + SNAPSHOT_DIGEST_HEX, ".snap") != 0 ||
	    !hex64(name))
		return false;
	memcpy(digest, name, SNAPSHOT_DIGEST_HEX);
	digest[SNAPSHOT_DIGEST_HEX] = '\0';
	return true;
}

/* ".gc.<64 hex>.<random>": put back under its name unless one is there */
static void
put_back(int sfd, const char *gcname)
{
	char final[SNAPSHOT_DIGEST_HEX + 8];

	if (strlen(gcname) <= 4 + SNAPSHOT_DIGEST_HEX || !hex64(gcname + 4) ||
	    gcname[4 + SNAPSHOT_DIGEST_HEX] != '.')
		return;
	snprintf(final, sizeof(final), "%.*s.snap", SNAPSHOT_DIGEST_HEX, gcname + 4);
	if (renameat2(sfd, gcname, sfd, final, RENAME_NOREPLACE) == 0)
		return;
	if (errno == EEXIST)            /* a copy with the same bytes is in place */
		unlinkat(sfd, gcname, 0);
	else
		log_warnx("snapshot store: cannot put %s back: %s", gcname, strerror(errno));
}

/* rename aside, check it is what was offered, delete; 1 deleted, 0 kept */
static int
collect_one(int sfd, const struct offered *o)
{
	char final[SNAPSHOT_DIGEST_HEX + 8], gcname[SNAPSHOT_DIGEST_HEX + 64];
	unsigned char rnd[8];
	struct stat st;

	snprintf(final, sizeof(final), "%s.snap", o->digest);
	randombytes_buf(rnd, sizeof(rnd));
	snprintf(gcname, sizeof(gcname), ".gc.%s.%02x%02x%02x%02x%02x%02x%02x%02x", o->digest,
	    rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	if (renameat(sfd, final, sfd, gcname) < 0)
		return 0;       /* gone already (another worker collected it) */
	if (fstatat(sfd, gcname, &st, AT_SYMLINK_NOFOLLOW) < 0 || st.st_dev != o->dev ||
	    st.st_ino != o->ino) {
		put_back(sfd, gcname);  /* written again since it was offered */
		return 0;
	}
	if (unlinkat(sfd, gcname, 0) < 0) {
		put_back(sfd, gcname);
		return 0;
	}
	return 1;
}

/* the digests the answer named (the control client decoded it: exact
 * keys, digests only): each deleted only if we offered it */
static void
apply_answer(struct mgr *m, int sfd, char (*named)[65], size_t nn, const struct offered *o,
    size_t n)
{
	size_t i, k, done = 0;

	if (nn > n) {
		log_warnx("snapshot store: the answer names more than was offered; nothing deleted");
		return;
	}
	for (k = 0; k < nn; k++) {
		for (i = 0; i < n && strcmp(o[i].digest, named[k]) != 0; i++)
			;
		if (i == n)
			continue;       /* not offered: never deleted */
		/* nothing references it: its sandbox is gone, and so is an
		 * image kept of it (kept.c), whether the file goes or not */
		kept_forget_digest(m, named[k]);
		if (collect_one(sfd, &o[i]) == 1) {
			metrics_inc(m, MC_ARCHIVES_COLLECTED);
			done++;
		}
	}
	if (done)
		log_info("snapshot store: %zu archive(s) nothing references deleted", done);
}

/* Images kept of archives the cache does not hold (a large archive is
 * only uploaded, layer.c "archive_dir"): their digests are offered too, so
 * that such an image goes once nothing references its archive, as one
 * whose archive is cached does. No file is offered with them (dev and ino
 * are 0: a file that arrived under the digest meanwhile is put back by
 * collect_one). How many are offered now. */
static size_t
offer_kept(struct mgr *m, int sfd, json_t *arr, struct offered *o, size_t n)
{
	char (*kd)[SNAPSHOT_DIGEST_HEX + 1] = NULL;
	int64_t *age = NULL;
	size_t nk, i, j;

	if (n >= SPACE_ARCHIVE_BATCH_MAX ||
	    (kd = calloc(SPACE_ARCHIVE_BATCH_MAX - n, sizeof(*kd))) == NULL ||
	    (age = calloc(SPACE_ARCHIVE_BATCH_MAX - n, sizeof(*age))) == NULL)
		goto out;
	nk = kept_tags(m, kd, age, SPACE_ARCHIVE_BATCH_MAX - n);
	for (i = 0; i < nk && n < SPACE_ARCHIVE_BATCH_MAX; i++) {
		char name[SNAPSHOT_DIGEST_HEX + 8];
		struct stat st;

		if (age[i] < (int64_t)m->cfg.snapshot_gc_grace)
			continue;
		snprintf(name, sizeof(name), "%s.snap", kd[i]);
		if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			continue;       /* cached: offered with its file, or not old enough */
		for (j = 0; j < n && strcmp(o[j].digest, kd[i]) != 0; j++)
			;
		if (j < n)
			continue;
		memcpy(o[n].digest, kd[i], sizeof(o[n].digest));
		o[n].dev = 0;
		o[n].ino = 0;
		if (json_array_append_new(arr, json_pack("{s:s,s:I}", "digest", o[n].digest,
		    "age", (json_int_t)age[i])) < 0)
			break;
		n++;
	}
out:
	free(kd);
	free(age);
	return n;
}

void
archive_gc_pass(struct mgr *m)
{
	struct offered *o = NULL;
	struct dirent *de;
	json_t *req = NULL, *arr;
	char *body = NULL, (*named)[65] = NULL;
	size_t n = 0, nn = 0;
	time_t now = time(NULL);
	DIR *d = NULL;
	int sfd;

	if (!m->cfg.snapshot_dir[0] ||
	    (sfd = open(m->cfg.snapshot_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0)
		return;
	if ((d = fdopendir(dup(sfd))) == NULL || (o = calloc(SPACE_ARCHIVE_BATCH_MAX, sizeof(*o))) == NULL ||
	    (req = json_object()) == NULL || (arr = json_array()) == NULL ||
	    json_object_set_new(req, "archives", arr) < 0)
		goto out;
	while ((de = readdir(d)) != NULL && n < SPACE_ARCHIVE_BATCH_MAX) {
		struct stat st;
		int64_t age;

		if (fstatat(sfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		age = (int64_t)now - (int64_t)st.st_mtime;
		if (strncmp(de->d_name, ".gc.", 4) == 0) {
			put_back(sfd, de->d_name);      /* a collection cut short */
			continue;
		}
		if (strncmp(de->d_name, ".tmp.", 5) == 0) {
			/* a writer that died; a live one writes it all the time */
			if (age >= (int64_t)MGR_SNAPSHOT_TMP_GRACE && age >= (int64_t)m->cfg.snapshot_gc_grace)
				unlinkat(sfd, de->d_name, 0);
			continue;
		}
		if (age < (int64_t)m->cfg.snapshot_gc_grace)
			continue;
		if (!archive_name(de->d_name, o[n].digest))
			continue;
		o[n].dev = st.st_dev;
		o[n].ino = st.st_ino;
		if (json_array_append_new(arr, json_pack("{s:s,s:I}", "digest", o[n].digest,
		    "age", (json_int_t)age)) < 0)
			goto out;
		n++;
	}
	n = offer_kept(m, sfd, arr, o, n);
	if (n == 0 || (body = json_dumps(req, JSON_COMPACT)) == NULL)
		goto out;
	if (control_archives(m, body, &named, &nn) == 0)
		apply_answer(m, sfd, named, nn, o, n);
out:
	free(named);
	free(body);
	json_decref(req);
	free(o);
	if (d)
		closedir(d);
	close(sfd);
}
