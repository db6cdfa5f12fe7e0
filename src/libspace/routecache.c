/* The client route cache (one entry per sandbox), its file, and the
 * recovery driver route_call(). Rules and their reasons: docs/recovery.md. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "claims.h"
#include "log.h"
#include "routecache.h"
#include "util.h"

#define RC_FILE_VERSION 1

struct rc_slot {
	struct route_entry e;
	bool present;                   /* false: dropped here, a tombstone until saved */
	bool dirty;                     /* changed through this handle since read */
	bool has_base;
	struct route_identity base;     /* the route the file held when we read it */
};

struct route_cache {
	char *path;                     /* NULL: in memory only */
	char *lock_path;
	int64_t ttl;
	struct rc_slot *slots;          /* sorted by sandbox */
	size_t n, cap;
};

static void
slots_wipe_free(struct rc_slot *s, size_t n)
{
	if (s == NULL)
		return;
	/* the capabilities are bearer secrets */
	sodium_memzero(s, n * sizeof(*s));
	free(s);
}

struct route_cache *
route_cache_new(void)
{
	struct route_cache *rc = calloc(1, sizeof(*rc));

	if (rc == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	rc->ttl = ROUTE_CACHE_TTL;
	return rc;
}

void
route_cache_free(struct route_cache *rc)
{
	if (rc == NULL)
		return;
	slots_wipe_free(rc->slots, rc->cap);
	free(rc->path);
	free(rc->lock_path);
	free(rc);
}

void
route_cache_set_ttl(struct route_cache *rc, int64_t seconds)
{
	if (seconds > 0)
		rc->ttl = seconds;
}

const char *
route_cache_path(const struct route_cache *rc)
{
	return rc->path;
}

/* ---- entries ---- */

static bool
printable(const char *s, size_t max)
{
	size_t i;

	for (i = 0; s[i]; i++)
		if (i >= max || s[i] <= 0x20 || s[i] >= 0x7f)
			return false;
	return i > 0;
}

/* The one validity rule for an entry, whether it comes from the control
 * plane or from the file: the route identity is checked by the strict
 * codec of claims.c (pack + unpack), so the cache accepts exactly the
 * identities the rest of space accepts. */
static bool
entry_valid(const struct route_entry *e)
{
	struct route_identity back;
	json_t *o;
	bool ok;

	if ((o = route_identity_pack(&e->route)) == NULL)
		return false;
	ok = route_identity_unpack(o, &back) == 0 && route_identity_equal(&back, &e->route);
	json_decref(o);
	if (!ok)
		return false;
	if (!printable(e->endpoint, SPACE_ENDPOINT_MAX) ||
	    (strncmp(e->endpoint, "http://", 7) != 0 && strncmp(e->endpoint, "https://", 8) != 0 &&
	    strncmp(e->endpoint, "tcp://", 6) != 0))     /* a worker's gateway (space-edge) */
		return false;
	if (!printable(e->capability, SPACE_TOKEN_MAX))
		return false;
	if (e->access & ~ACC_ALL)
		return false;
	return e->cap_exp >= 0 && e->cache_exp >= 0;
}

static struct rc_slot *
slot_find(struct route_cache *rc, const char *sandbox)
{
	for (size_t i = 0; i < rc->n; i++)
		if (strcmp(rc->slots[i].e.route.sandbox, sandbox) == 0)
			return &rc->slots[i];
	return NULL;
}

/* a new slot for sandbox at its sorted place; NULL when full */
static struct rc_slot *
slot_insert(struct route_cache *rc, const char *sandbox)
{
	size_t i;

	if (rc->n >= SPACE_ROUTECACHE_ENTRIES)
		return NULL;
	if (rc->n == rc->cap) {
		size_t cap = rc->cap ? rc->cap * 2 : 8;
		struct rc_slot *s = calloc(cap, sizeof(*s));
		if (s == NULL)
			return NULL;
		if (rc->n)
			memcpy(s, rc->slots, rc->n * sizeof(*s));
		slots_wipe_free(rc->slots, rc->cap);
		rc->slots = s;
		rc->cap = cap;
	}
	for (i = 0; i < rc->n && strcmp(rc->slots[i].e.route.sandbox, sandbox) < 0; i++)
		;
	memmove(&rc->slots[i + 1], &rc->slots[i], (rc->n - i) * sizeof(*rc->slots));
	memset(&rc->slots[i], 0, sizeof(*rc->slots));
	rc->n++;
	return &rc->slots[i];
}

static void
slot_remove(struct route_cache *rc, struct rc_slot *s)
{
	size_t i = (size_t)(s - rc->slots);

	memmove(s, s + 1, (rc->n - i - 1) * sizeof(*s));
	rc->n--;
	sodium_memzero(&rc->slots[rc->n], sizeof(*s));
}

/* the entry with the lowest cache_exp gives way when the cache is full */
static void
evict_oldest(struct route_cache *rc)
{
	struct rc_slot *old = NULL;

	for (size_t i = 0; i < rc->n; i++)
		if (old == NULL || !rc->slots[i].present ||
		    (old->present && rc->slots[i].e.cache_exp < old->e.cache_exp))
			old = &rc->slots[i];
	if (old)
		slot_remove(rc, old);
}

int
route_cache_get(struct route_cache *rc, const char *sandbox, int64_t now,
    struct route_entry *out)
{
	struct rc_slot *s = slot_find(rc, sandbox);

	if (s == NULL || !s->present || now >= s->e.cache_exp)
		return -ENOENT;
	*out = s->e;
	out->flags = now > s->e.cap_exp ? ROUTE_CAP_EXPIRED : 0;
	return 0;
}

int
route_cache_put(struct route_cache *rc, const struct route_entry *e, int64_t now)
{
	struct route_entry t = *e;
	struct rc_slot *s;
	int r = 0;

	if (now < 0 || now > INT64_MAX - rc->ttl) {
		r = -EINVAL;
		goto out;
	}
	t.cache_exp = now + rc->ttl;
	t.flags = 0;
	if (!entry_valid(&t)) {
		r = -EINVAL;
		goto out;
	}
	if ((s = slot_find(rc, t.route.sandbox)) == NULL) {
		if (rc->n >= SPACE_ROUTECACHE_ENTRIES)
			evict_oldest(rc);
		if ((s = slot_insert(rc, t.route.sandbox)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
	}
	s->e = t;
	s->present = true;
	s->dirty = true;
out:
	sodium_memzero(&t, sizeof(t));
	return r;
}

int
route_cache_replace_if(struct route_cache *rc, const char *sandbox,
    const struct route_identity *rejected, const struct route_entry *fresh)
{
	struct rc_slot *s;
	int64_t keep;

	if (strcmp(fresh->route.sandbox, sandbox) != 0 || strcmp(rejected->sandbox, sandbox) != 0)
		return -EINVAL;
	{
		struct route_entry t = *fresh;
		bool ok;
		t.cache_exp = 0;
		ok = entry_valid(&t);
		sodium_memzero(&t, sizeof(t));
		if (!ok)
			return -EINVAL;
	}
	/* compare-and-swap: a rejection is evidence against one route only;
	 * if the entry already moved on, the rejection is stale */
	s = slot_find(rc, sandbox);
	if (s == NULL || !s->present || !route_identity_equal(&s->e.route, rejected))
		return 0;
	/* route repair is not a renewal of caller authorization */
	keep = s->e.cache_exp;
	s->e = *fresh;
	s->e.cache_exp = keep;
	s->e.flags = 0;
	s->dirty = true;
	return 1;
}

int
route_cache_renew_capability(struct route_cache *rc, const struct route_entry *fresh)
{
	struct rc_slot *s;

	if (!printable(fresh->capability, SPACE_TOKEN_MAX) || (fresh->access & ~ACC_ALL) ||
	    fresh->cap_exp < 0)
		return -EINVAL;
	s = slot_find(rc, fresh->route.sandbox);
	if (s == NULL || !s->present || !route_identity_equal(&s->e.route, &fresh->route))
		return 0;
	memcpy(s->e.capability, fresh->capability, sizeof(s->e.capability));
	s->e.access = fresh->access;
	s->e.cap_exp = fresh->cap_exp;
	s->dirty = true;
	return 1;
}

int
route_cache_drop(struct route_cache *rc, const char *sandbox, const struct route_identity *route)
{
	struct rc_slot *s = slot_find(rc, sandbox);

	if (s == NULL || !s->present || (route && !route_identity_equal(&s->e.route, route)))
		return 0;
	if (!s->has_base) {             /* never on disk: nothing to merge */
		slot_remove(rc, s);
		return 1;
	}
	sodium_memzero(s->e.capability, sizeof(s->e.capability));
	s->present = false;
	s->dirty = true;
	return 1;
}

size_t
route_cache_count(const struct route_cache *rc)
{
	size_t n = 0;

	for (size_t i = 0; i < rc->n; i++)
		n += rc->slots[i].present;
	return n;
}

const struct route_entry *
route_cache_entry(const struct route_cache *rc, size_t i)
{
	for (size_t k = 0; k < rc->n; k++)
		if (rc->slots[k].present && i-- == 0)
			return &rc->slots[k].e;
	return NULL;
}

/* ---- the file ---- */

static json_t *
entry_pack(const struct route_entry *e)
{
	json_t *o = NULL, *route, *acc;
	uint32_t bit;

	if ((route = route_identity_pack(&e->route)) == NULL)
		return NULL;
	if ((acc = json_array()) == NULL) {
		json_decref(route);
		return NULL;
	}
	for (bit = 1; bit & ACC_ALL; bit <<= 1)
		if ((e->access & bit) && json_array_append_new(acc, json_string(acc_name(bit))) != 0)
			goto fail;
	o = json_pack("{s:o, s:s, s:s, s:o, s:I, s:I}", "route", route,
	    "endpoint", e->endpoint, "capability", e->capability, "access", acc,
	    "cap_exp", (json_int_t)e->cap_exp, "cache_exp", (json_int_t)e->cache_exp);
	return o;       /* json_pack took route and acc, even on failure */
fail:
	json_decref(route);
	json_decref(acc);
	return NULL;
}

int
route_cache_serialize(const struct route_cache *rc, char **out, size_t *len)
{
	json_t *root = NULL, *arr;
	char *s;
	int r = -ENOMEM;

	if ((arr = json_array()) == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < rc->n; i++) {
		json_t *o;
		if (!rc->slots[i].present)
			continue;
		if ((o = entry_pack(&rc->slots[i].e)) == NULL || json_array_append_new(arr, o) != 0) {
			r = -EINVAL;
			json_decref(arr);
			return r;
		}
	}
	root = json_pack("{s:i, s:o}", "version", RC_FILE_VERSION, "routes", arr);
	if (root == NULL)
		return -ENOMEM;
	if ((s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER)) != NULL) {
		*out = s;
		*len = strlen(s);
		r = 0;
	}
	json_decref(root);
	return r;
}

static int
string_field(const char *s, size_t len, char *dst, size_t cap)
{
	/* an embedded NUL would make the C string differ from the JSON one */
	if (len >= cap || strlen(s) != len)
		return -EINVAL;
	memcpy(dst, s, len + 1);
	return 0;
}

static int
entry_unpack(json_t *o, struct route_entry *e, const char **why)
{
	json_t *route, *acc, *v;
	const char *ep, *cap;
	size_t eplen, caplen, i;
	json_int_t ce, cx;
	json_error_t err;

	memset(e, 0, sizeof(*e));
	/* JSON_STRICT: every member must be one of these, so an unknown
	 * field is refused; "I" refuses reals, strings, booleans */
	if (json_unpack_ex(o, &err, JSON_STRICT, "{s:o, s:s%, s:s%, s:o, s:I, s:I}",
	    "route", &route, "endpoint", &ep, &eplen, "capability", &cap, &caplen,
	    "access", &acc, "cap_exp", &ce, "cache_exp", &cx) != 0) {
		*why = "route entry has missing, unknown or mistyped fields";
		return -EINVAL;
	}
	if (route_identity_unpack(route, &e->route) != 0) {
		*why = "invalid route identity";
		return -EINVAL;
	}
	if (string_field(ep, eplen, e->endpoint, sizeof(e->endpoint)) != 0 ||
	    string_field(cap, caplen, e->capability, sizeof(e->capability)) != 0) {
		*why = "endpoint or capability too long or with NUL";
		return -EINVAL;
	}
	if (!json_is_array(acc)) {
		*why = "access is not an array";
		return -EINVAL;
	}
	json_array_foreach(acc, i, v) {
		uint32_t bit;
		if (!json_is_string(v) || acc_parse(json_string_value(v), &bit) != 0 ||
		    (e->access & bit)) {
			*why = "unknown or repeated access name";
			return -EINVAL;
		}
		e->access |= bit;
	}
	e->cap_exp = ce;
	e->cache_exp = cx;
	if (!entry_valid(e)) {
		*why = "invalid route entry";
		return -EINVAL;
	}
	return 0;
}

int
route_cache_parse(struct route_cache *rc, const char *buf, size_t len, const char **why)
{
	struct route_cache tmp = { 0 };
	struct route_entry *e = NULL;
	json_t *root, *arr, *o;
	json_int_t ver;
	json_error_t err;
	size_t i;
	int r = -EINVAL;

	*why = NULL;
	if (len > SPACE_ROUTECACHE_FILE_MAX) {
		*why = "file too large";
		return -EINVAL;
	}
	if ((root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &err)) == NULL) {
		*why = "not JSON, or a duplicate key";
		return -EINVAL;
	}
	if (json_unpack_ex(root, &err, JSON_STRICT, "{s:I, s:o}", "version", &ver,
	    "routes", &arr) != 0 || ver != RC_FILE_VERSION || !json_is_array(arr)) {
		*why = "not a version 1 route cache";
		goto out;
	}
	if (json_array_size(arr) > SPACE_ROUTECACHE_ENTRIES) {
		*why = "too many entries";
		goto out;
	}
	if ((e = malloc(sizeof(*e))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	json_array_foreach(arr, i, o) {
		struct rc_slot *s;
		if ((r = entry_unpack(o, e, why)) < 0)
			goto out;
		if (slot_find(&tmp, e->route.sandbox) != NULL) {
			*why = "two entries for one sandbox";
			r = -EINVAL;
			goto out;
		}
		if ((s = slot_insert(&tmp, e->route.sandbox)) == NULL) {
			r = -ENOMEM;
			goto out;
		}
		s->e = *e;
		s->present = true;
		s->has_base = true;
		s->base = e->route;
	}
	slots_wipe_free(rc->slots, rc->cap);
	rc->slots = tmp.slots;
	rc->n = tmp.n;
	rc->cap = tmp.cap;
	tmp.slots = NULL;
	r = 0;
out:
	if (e)
		sodium_memzero(e, sizeof(*e));
	free(e);
	slots_wipe_free(tmp.slots, tmp.cap);
	json_decref(root);
	return r;
}

/* Reads the file into rc. A file that is missing is empty; a file we
 * cannot trust or parse is ignored with a warning: the cache is only an
 * optimisation, and the control plane can always answer again. */
static void
load_file(struct route_cache *rc, const char *path)
{
	struct stat st;
	const char *why = NULL;
	char *buf = NULL;
	size_t off = 0;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		if (errno != ENOENT)
			log_warn("route cache %s ignored", path);
		return;
	}
	/* another user's file, or one others may write, could point us (and
	 * our capabilities) at their endpoint */
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & 022)) {
		why = "not a regular file of ours, or writable by others";
		goto out;
	}
	if ((uint64_t)st.st_size > SPACE_ROUTECACHE_FILE_MAX) {
		why = "file too large";
		goto out;
	}
	if ((buf = malloc((size_t)st.st_size + 1)) == NULL) {
		why = "out of memory";
		goto out;
	}
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += (size_t)n;
	}
	if (route_cache_parse(rc, buf, off, &why) == 0)
		why = NULL;
out:
	if (why)
		log_warnx("route cache %s ignored: %s", path, why);
	if (buf) {
		sodium_memzero(buf, off);
		free(buf);
	}
	close(fd);
}

static char *
default_path(void)
{
	const char *base = getenv("XDG_STATE_HOME"), *home;
	char *p = NULL;

	if (base && base[0] == '/') {
		if (asprintf(&p, "%s/space/routes.json", base) < 0)
			p = NULL;
		return p;
	}
	home = getenv("HOME");
	if (home == NULL || home[0] != '/') {
		struct passwd *pw = getpwuid(geteuid());
		home = pw ? pw->pw_dir : NULL;
	}
	if (home == NULL || home[0] != '/') {
		errno = ENOENT;
		return NULL;
	}
	if (asprintf(&p, "%s/.local/state/space/routes.json", home) < 0)
		p = NULL;
	return p;
}

struct route_cache *
route_cache_open(const char *path)
{
	struct route_cache *rc;

	if ((rc = route_cache_new()) == NULL)
		return NULL;
	rc->path = path ? strdup(path) : default_path();
	if (rc->path == NULL || asprintf(&rc->lock_path, "%s.lock", rc->path) < 0) {
		rc->lock_path = NULL;
		if (errno != ENOENT)
			errno = ENOMEM;
		route_cache_free(rc);
		return NULL;
	}
	load_file(rc, rc->path);
	return rc;
}

static bool
route_newer(const struct route_identity *a, const struct route_identity *b)
{
	return a->generation > b->generation ||
	    (a->generation == b->generation && a->activation > b->activation);
}

/* Applies our dirty slots onto what the file holds now. Another process's
 * entries are kept, and a newer route it wrote is never replaced by an
 * older one of ours: the compare-and-swap rule, across processes. */
static int
merge_into(struct route_cache *disk, const struct route_cache *rc)
{
	for (size_t i = 0; i < rc->n; i++) {
		const struct rc_slot *s = &rc->slots[i];
		struct rc_slot *d;

		if (!s->dirty)
			continue;
		d = slot_find(disk, s->e.route.sandbox);
		if (!s->present) {
			if (d && s->has_base && route_identity_equal(&d->e.route, &s->base))
				slot_remove(disk, d);
			continue;
		}
		if (d == NULL) {
			if (disk->n >= SPACE_ROUTECACHE_ENTRIES)
				evict_oldest(disk);
			if ((d = slot_insert(disk, s->e.route.sandbox)) == NULL)
				return -ENOMEM;
		} else if (!(s->has_base && route_identity_equal(&d->e.route, &s->base))) {
			/* the file changed under us for this sandbox */
			if (route_identity_equal(&d->e.route, &s->e.route)) {
				if (d->e.cap_exp > s->e.cap_exp)
					continue;
			} else if (!route_newer(&s->e.route, &d->e.route))
				continue;
		}
		d->e = s->e;
		d->present = true;
	}
	return 0;
}

int
route_cache_save(struct route_cache *rc)
{
	struct route_cache *disk = NULL;
	char *dir = NULL, *slash, *buf = NULL;
	size_t len = 0;
	int lfd = -1, r;
	int64_t now = (int64_t)time(NULL);

	if (rc->path == NULL)
		return 0;
	if ((dir = strdup(rc->path)) == NULL)
		return -ENOMEM;
	if ((slash = strrchr(dir, '/')) != NULL && slash != dir) {
		*slash = '\0';
		/* 0700: the file holds bearer capabilities */
		if ((r = mkdir_p(dir, 0700)) < 0)
			goto out;
	}
	lfd = open(rc->lock_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (lfd < 0) {
		r = -errno;
		goto out;
	}
	/* load-modify-save under one lock, re-reading first, so concurrent
	 * CLI processes do not lose each other's entries */
	while ((r = flock(lfd, LOCK_EX)) < 0 && errno == EINTR)
		;
	if (r < 0) {
		r = -errno;
		goto out;
	}
	if ((disk = route_cache_new()) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	load_file(disk, rc->path);
	if ((r = merge_into(disk, rc)) < 0)
		goto out;
	for (size_t i = disk->n; i-- > 0;)
		if (disk->slots[i].e.cache_exp <= now)
			slot_remove(disk, &disk->slots[i]);
	if ((r = route_cache_serialize(disk, &buf, &len)) < 0)
		goto out;
	if ((r = write_file_atomic(rc->path, buf, len, 0600)) < 0)
		goto out;
	/* what we hold now is what the file holds */
	for (size_t i = 0; i < disk->n; i++) {
		disk->slots[i].dirty = false;
		disk->slots[i].has_base = true;
		disk->slots[i].base = disk->slots[i].e.route;
	}
	slots_wipe_free(rc->slots, rc->cap);
	rc->slots = disk->slots;
	rc->n = disk->n;
	rc->cap = disk->cap;
	disk->slots = NULL;
	disk->n = disk->cap = 0;
	r = 0;
out:
	if (buf) {
		sodium_memzero(buf, len);
		free(buf);
	}
	route_cache_free(disk);
	if (lfd >= 0)
		close(lfd);     /* releases the lock */
	free(dir);
	return r;
}

/* ---- the recovery driver ---- */

static int64_t
clock_now(const struct route_ops *ops, void *ctx)
{
	return ops->now ? ops->now(ctx) : (int64_t)time(NULL);
}

/* Asks the control plane; an answer about another sandbox, or one that is
 * not a valid entry, is a protocol error, never something to act on. */
static int
resolve(const struct route_ops *ops, void *ctx, const char *sandbox,
    const struct route_identity *rejected, struct route_entry *out,
    struct route_call_result *res)
{
	int r;

	memset(out, 0, sizeof(*out));
	res->resolves++;
	if ((r = ops->resolve(ctx, sandbox, rejected, out)) < 0)
		return r;
	out->cache_exp = 0;
	out->flags = 0;
	if (strcmp(out->route.sandbox, sandbox) != 0 || !entry_valid(out))
		return -EPROTO;
	return 0;
}

/* installs a renewed capability (same route) or, if the control plane
 * moved the sandbox meanwhile, the new route, by compare-and-swap on the
 * route we hold; cache_exp is kept either way */
static void
install_renewal(struct route_cache *rc, const char *sandbox,
    const struct route_identity *held, const struct route_entry *fresh)
{
	if (route_identity_equal(held, &fresh->route))
		route_cache_renew_capability(rc, fresh);
	else
		route_cache_replace_if(rc, sandbox, held, fresh);
}

int
route_call(struct route_cache *rc, const char *sandbox, const struct route_ops *ops,
    void *ctx, struct route_call_result *res)
{
	struct route_entry *e = NULL, *fresh = NULL;
	int64_t now = clock_now(ops, ctx);
	int r;

	memset(res, 0, sizeof(*res));
	if (!id_valid(sandbox))
		return -EINVAL;
	if ((e = calloc(1, sizeof(*e))) == NULL || (fresh = calloc(1, sizeof(*fresh))) == NULL) {
		r = -ENOMEM;
		goto out;
	}
	if (route_cache_get(rc, sandbox, now, e) == 0) {
		res->from_cache = true;
		/* renew first rather than spend an attempt on a certain
		 * EXPIRED or DENY; this is the one renewal of the call */
		if ((e->flags & ROUTE_CAP_EXPIRED) || (ops->access & ~e->access)) {
			if ((r = resolve(ops, ctx, sandbox, NULL, fresh, res)) < 0)
				goto out;
			install_renewal(rc, sandbox, &e->route, fresh);
			*e = *fresh;
			res->renewed = true;
		}
	} else {
		if ((r = resolve(ops, ctx, sandbox, NULL, e, res)) < 0)
			goto out;
		if ((r = route_cache_put(rc, e, now)) < 0)
			goto out;
	}

	for (;;) {
		res->attempts++;
		res->route = e->route;
		res->outcome = ops->attempt(ctx, e);
		switch (res->outcome) {
		case ROUTE_OK:
			r = 0;
			goto out;
		case ROUTE_DENY:
			/* a signature, audience, sandbox or access refusal:
			 * asking again cannot change the answer */
			r = -EACCES;
			goto out;
		case ROUTE_REFRESH:
			/* one rebuilt attempt: a second refusal means the
			 * control plane and the receivers disagree, and a
			 * loop would hide it */
			if (res->repaired) {
				r = -ESTALE;
				goto out;
			}
			res->repaired = true;
			if ((r = resolve(ops, ctx, sandbox, &e->route, fresh, res)) < 0)
				goto out;
			/* only if the entry still holds the rejected route,
			 * and with its cache_exp kept */
			route_cache_replace_if(rc, sandbox, &e->route, fresh);
			*e = *fresh;
			break;
		case ROUTE_EXPIRED:
			if (res->renewed) {
				r = -EKEYEXPIRED;
				goto out;
			}
			res->renewed = true;
			if ((r = resolve(ops, ctx, sandbox, NULL, fresh, res)) < 0)
				goto out;
			install_renewal(rc, sandbox, &e->route, fresh);
			*e = *fresh;
			break;
		case ROUTE_TRANSPORT_BEFORE_SEND:
		case ROUTE_TRANSPORT_AFTER_SEND:
			/* identity refusals happen before forwarding, so a
			 * rebuilt attempt is always safe; a transport failure
			 * after sending may have run the operation already,
			 * and exec, write, rename, remove must not run twice */
			if (res->transport_retried ||
			    (res->outcome == ROUTE_TRANSPORT_AFTER_SEND && !ops->idempotent)) {
				r = res->outcome == ROUTE_TRANSPORT_BEFORE_SEND ? -ECONNREFUSED : -ECONNRESET;
				goto out;
			}
			res->transport_retried = true;
			/* the endpoint may be gone with its worker: ask where
			 * the sandbox is now (not a rejection: no route sent) */
			if ((r = resolve(ops, ctx, sandbox, NULL, fresh, res)) < 0)
				goto out;
			install_renewal(rc, sandbox, &e->route, fresh);
			*e = *fresh;
			break;
		default:
			r = -EPROTO;
			goto out;
		}
	}
out:
	if (e)
		sodium_memzero(e, sizeof(*e));
	if (fresh)
		sodium_memzero(fresh, sizeof(*fresh));
	free(e);
	free(fresh);
	return r;
}
