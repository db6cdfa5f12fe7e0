/* Client route cache and recovery rules (DESIGN section 8), driven through
 * a fake transport that scripts the outcome of every attempt and counts
 * attempts and resolutions. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "claims.h"
#include "routecache.h"
#include "util.h"
#include "tap.h"

static char top[256];
static int64_t T0;

static struct route_entry
mk(const char *sbx, uint64_t gen, const char *worker)
{
	struct route_entry e;

	memset(&e, 0, sizeof(e));
	snprintf(e.route.sandbox, sizeof(e.route.sandbox), "%s", sbx);
	e.route.generation = gen;
	snprintf(e.route.worker, sizeof(e.route.worker), "%s", worker);
	snprintf(e.route.substrate, sizeof(e.route.substrate), "jail");
	e.route.activation = 1;
	snprintf(e.route.resident, sizeof(e.route.resident), "inc_%s", worker);
	snprintf(e.endpoint, sizeof(e.endpoint), "http://127.0.0.1:%d", 8000 + (int)gen);
	snprintf(e.capability, sizeof(e.capability), "v4.public.cap-%s-g%llu", sbx,
	    (unsigned long long)gen);
	e.access = ACC_ALL;
	e.cap_exp = T0 + 120;
	return e;
}

static bool
entry_eq(const struct route_entry *a, const struct route_entry *b)
{
	return route_identity_equal(&a->route, &b->route) && strcmp(a->endpoint, b->endpoint) == 0 &&
	    strcmp(a->capability, b->capability) == 0 && a->access == b->access &&
	    a->cap_exp == b->cap_exp && a->cache_exp == b->cache_exp;
}

/* ---- the cache alone ---- */

static void
test_cache(void)
{
	struct route_cache *rc = route_cache_new();
	struct route_entry e8 = mk("sbx_a", 8, "wA"), e7 = mk("sbx_a", 7, "wB");
	struct route_entry e9 = mk("sbx_a", 9, "wC"), got, other;
	int r;

	is_int(route_cache_get(rc, "sbx_a", T0, &got), -ENOENT, "empty cache: miss");
	is_int(route_cache_put(rc, &e8, T0), 0, "put generation 8");
	is_int(route_cache_get(rc, "sbx_a", T0 + 10, &got), 0, "hit");
	ok(got.route.generation == 8 && got.cache_exp == T0 + ROUTE_CACHE_TTL,
	    "cache_exp = put time + 300 s");
	ok(got.flags == 0, "capability not expired at +10 s");
	is_int(route_cache_get(rc, "sbx_a", T0 + 299, &got), 0, "hit just before cache_exp");
	is_int(route_cache_get(rc, "sbx_a", T0 + 300, &got), -ENOENT, "miss at cache_exp");
	is_int(route_cache_get(rc, "sbx_a", T0 + 121, &got), 0, "hit after the capability expired");
	ok(got.flags & ROUTE_CAP_EXPIRED, "flagged ROUTE_CAP_EXPIRED (now > cap_exp)");
	route_cache_get(rc, "sbx_a", T0 + 120, &got);
	ok(!(got.flags & ROUTE_CAP_EXPIRED), "not flagged at now == cap_exp");

	/* compare-and-swap: a delayed rejection of generation 7 arrives after
	 * the cache already holds generation 8 */
	r = route_cache_replace_if(rc, "sbx_a", &e7.route, &e9);
	is_int(r, 0, "late rejection of gen 7 does not replace the gen 8 entry");
	route_cache_get(rc, "sbx_a", T0, &got);
	ok(got.route.generation == 8 && strcmp(got.capability, e8.capability) == 0,
	    "entry still holds gen 8 and its capability");

	/* a rejected route that differs from the entry in one field only */
	{
		struct route_entry x = e8;
		x.route.activation = 2;
		is_int(route_cache_replace_if(rc, "sbx_a", &x.route, &e9), 0, "activation differs: no swap");
		x = e8;
		snprintf(x.route.resident, sizeof(x.route.resident), "inc_other");
		is_int(route_cache_replace_if(rc, "sbx_a", &x.route, &e9), 0, "resident differs: no swap");
		x = e8;
		snprintf(x.route.worker, sizeof(x.route.worker), "wZ");
		is_int(route_cache_replace_if(rc, "sbx_a", &x.route, &e9), 0, "worker differs: no swap");
	}

	r = route_cache_replace_if(rc, "sbx_a", &e8.route, &e9);
	is_int(r, 1, "rejection of the held route (gen 8) replaces it with gen 9");
	route_cache_get(rc, "sbx_a", T0 + 200, &got);
	ok(got.route.generation == 9 && strcmp(got.endpoint, e9.endpoint) == 0 &&
	    strcmp(got.capability, e9.capability) == 0, "entry now gen 9 with its endpoint and capability");
	is_int(got.cache_exp, T0 + ROUTE_CACHE_TTL, "repair kept the original cache_exp");

	other = mk("sbx_b", 3, "wA");
	is_int(route_cache_replace_if(rc, "sbx_a", &e9.route, &other), -EINVAL,
	    "a fresh entry for another sandbox is refused");
	is_int(route_cache_replace_if(rc, "sbx_b", &other.route, &other), 0,
	    "no entry: nothing replaced");
	is_int(route_cache_get(rc, "sbx_b", T0, &got), -ENOENT, "and nothing created");

	/* renewal of the capability keeps route and cache_exp */
	{
		struct route_entry n = e9;
		snprintf(n.capability, sizeof(n.capability), "v4.public.renewed");
		n.cap_exp = T0 + 400;
		n.access = ACC_FS_R;
		is_int(route_cache_renew_capability(rc, &n), 1, "renew the capability of the held route");
		route_cache_get(rc, "sbx_a", T0 + 10, &got);
		ok(strcmp(got.capability, "v4.public.renewed") == 0 && got.cap_exp == T0 + 400 &&
		    got.access == ACC_FS_R && got.cache_exp == T0 + ROUTE_CACHE_TTL,
		    "renewed capability stored, cache_exp kept");
		n = e8;
		is_int(route_cache_renew_capability(rc, &n), 0, "renewal for another route refused");
	}

	/* invalid entries never enter */
	{
		struct route_entry bad = mk("sbx_c", 1, "wA");
		snprintf(bad.endpoint, sizeof(bad.endpoint), "file:///etc/passwd");
		is_int(route_cache_put(rc, &bad, T0), -EINVAL, "non-http endpoint refused");
		bad = mk("sbx_c", 1, "wA");
		bad.route.generation = 0;
		is_int(route_cache_put(rc, &bad, T0), -EINVAL, "generation 0 refused");
		bad = mk("sbx_c", 1, "wA");
		snprintf(bad.route.sandbox, sizeof(bad.route.sandbox), "../x");
		is_int(route_cache_put(rc, &bad, T0), -EINVAL, "invalid sandbox id refused");
		bad = mk("sbx_c", 1, "wA");
		bad.capability[0] = '\0';
		is_int(route_cache_put(rc, &bad, T0), -EINVAL, "empty capability refused");
	}

	is_int(route_cache_drop(rc, "sbx_a", &e8.route), 0, "drop only-if gen 8: not dropped (holds gen 9)");
	is_int(route_cache_drop(rc, "sbx_a", NULL), 1, "drop");
	is_int(route_cache_get(rc, "sbx_a", T0, &got), -ENOENT, "dropped: miss");
	route_cache_free(rc);
}

/* ---- the recovery driver with a fake transport ---- */

struct fake {
	enum route_outcome script[8];
	int nscript, attempts, resolves;
	uint64_t next_gen;              /* generation the next resolve answers */
	const char *answer_sandbox;     /* NULL: the asked one */
	int resolve_error;
	bool rejected_seen[8];
	struct route_identity rejected[8];
	uint64_t attempted_gen[8];
	char attempted_cap[8][64];
	int64_t now;
	struct route_cache *rc;
	bool race;                      /* during a repair, another update installs gen 50 */
};

static int
fake_resolve(void *ctx, const char *sandbox, const struct route_identity *rejected,
    struct route_entry *out)
{
	struct fake *f = ctx;
	int i = f->resolves++;

	if (i < 8) {
		f->rejected_seen[i] = rejected != NULL;
		if (rejected)
			f->rejected[i] = *rejected;
	}
	if (f->resolve_error)
		return f->resolve_error;
	if (f->race && rejected) {
		struct route_entry n = mk(sandbox, 50, "wRace");
		route_cache_put(f->rc, &n, f->now);
	}
	*out = mk(f->answer_sandbox ? f->answer_sandbox : sandbox, f->next_gen, "wN");
	snprintf(out->capability, sizeof(out->capability), "v4.public.fresh-%d", i);
	out->cap_exp = f->now + 120;
	out->cache_exp = 12345;         /* must be ignored */
	f->next_gen++;
	return 0;
}

static enum route_outcome
fake_attempt(void *ctx, const struct route_entry *e)
{
	struct fake *f = ctx;
	int i = f->attempts++;

	if (i < 8) {
		f->attempted_gen[i] = e->route.generation;
		if (snprintf(f->attempted_cap[i], sizeof(f->attempted_cap[i]), "%s", e->capability) < 0)
			f->attempted_cap[i][0] = '\0';
	}
	return i < f->nscript ? f->script[i] : ROUTE_OK;
}

static int64_t
fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

static struct route_ops ops_read = {
	.resolve = fake_resolve, .attempt = fake_attempt, .now = fake_now,
	.idempotent = true, .access = ACC_FS_R,
};
static struct route_ops ops_exec = {
	.resolve = fake_resolve, .attempt = fake_attempt, .now = fake_now,
	.idempotent = false, .access = ACC_EXEC,
};

/* a cache primed with generation 8 at T0, and a fake at T0 + 50 */
static struct route_cache *
primed(struct fake *f)
{
	struct route_cache *rc = route_cache_new();
	struct route_entry e8 = mk("sbx_a", 8, "wA");

	route_cache_put(rc, &e8, T0);
	memset(f, 0, sizeof(*f));
	f->next_gen = 9;
	f->now = T0 + 50;
	f->rc = rc;
	return rc;
}

static void
test_driver(void)
{
	struct route_call_result res;
	struct route_entry got, e8 = mk("sbx_a", 8, "wA");
	struct route_cache *rc;
	struct fake f;
	int r;

	/* miss: resolve, put, attempt */
	rc = route_cache_new();
	memset(&f, 0, sizeof(f));
	f.next_gen = 3;
	f.now = T0;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == 0 && res.attempts == 1 && res.resolves == 1 && !res.from_cache,
	    "miss: one resolution, one attempt");
	ok(!f.rejected_seen[0], "a miss sends no rejected route");
	ok(route_cache_get(rc, "sbx_a", T0 + 1, &got) == 0 && got.route.generation == 3 &&
	    got.cache_exp == T0 + ROUTE_CACHE_TTL, "resolution cached with cache_exp = now + TTL (resolver's value ignored)");
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == 0 && res.from_cache && res.resolves == 0 && res.attempts == 1, "second call served from the cache");
	route_cache_free(rc);

	/* REFRESH_ROUTE, then OK: exactly one rebuilt attempt */
	rc = primed(&f);
	f.script[0] = ROUTE_REFRESH;
	f.nscript = 1;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	is_int(r, 0, "REFRESH then OK succeeds");
	is_int(res.attempts, 2, "2 attempts");
	is_int(res.resolves, 1, "1 resolution");
	ok(f.rejected_seen[0] && route_identity_equal(&f.rejected[0], &e8.route),
	    "the resolution carried the rejected route (gen 8)");
	ok(f.attempted_gen[0] == 8 && f.attempted_gen[1] == 9, "first attempt gen 8, rebuilt attempt gen 9");
	ok(strcmp(f.attempted_cap[1], "v4.public.fresh-0") == 0, "rebuilt attempt used the fresh capability");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 9, "cache repaired to gen 9");
	is_int(got.cache_exp, T0 + ROUTE_CACHE_TTL, "repair kept the original cache_exp (not now + TTL)");
	ok(res.repaired && res.route.generation == 9, "result says repaired, last route gen 9");
	route_cache_free(rc);

	/* REFRESH twice: an error after 2 attempts, never 3 */
	rc = primed(&f);
	f.script[0] = ROUTE_REFRESH;
	f.script[1] = ROUTE_REFRESH;
	f.script[2] = ROUTE_OK;
	f.nscript = 3;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	is_int(r, -ESTALE, "second REFRESH_ROUTE is an error to the caller");
	is_int(f.attempts, 2, "transport saw exactly 2 attempts");
	is_int(res.attempts, 2, "result counts 2 attempts");
	is_int(res.resolves, 1, "one resolution");
	ok(res.outcome == ROUTE_REFRESH, "last outcome REFRESH_ROUTE");
	route_cache_free(rc);

	/* a newer entry appears while the repair is resolved: the CAS keeps
	 * it, the rebuilt attempt still goes to the fresh answer */
	rc = primed(&f);
	f.race = true;
	f.script[0] = ROUTE_REFRESH;
	f.nscript = 1;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == 0 && res.attempts == 2, "repair with a concurrent update: 2 attempts");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 50,
	    "the newer entry (gen 50) was not evicted by the repair of gen 8");
	route_cache_free(rc);

	/* REFRESH, and the control plane cannot answer (still the same route) */
	rc = primed(&f);
	f.script[0] = ROUTE_REFRESH;
	f.nscript = 1;
	f.resolve_error = -EAGAIN;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == -EAGAIN && res.attempts == 1, "resolution failure is returned, no blind retry");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 8, "entry unchanged");
	route_cache_free(rc);

	/* EXPIRED: renew once */
	rc = primed(&f);
	f.script[0] = ROUTE_EXPIRED;
	f.nscript = 1;
	f.next_gen = 8;                 /* same route, new capability */
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == 0 && res.attempts == 2 && res.resolves == 1 && res.renewed, "EXPIRED: renewed once, 2 attempts");
	ok(!f.rejected_seen[0], "a renewal sends no rejected route");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 8 &&
	    strcmp(got.capability, "v4.public.fresh-0") == 0 && got.cap_exp == f.now + 120,
	    "cache holds the renewed capability");
	is_int(got.cache_exp, T0 + ROUTE_CACHE_TTL, "renewal kept cache_exp");
	route_cache_free(rc);

	rc = primed(&f);
	f.script[0] = ROUTE_EXPIRED;
	f.script[1] = ROUTE_EXPIRED;
	f.nscript = 2;
	f.next_gen = 8;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == -EKEYEXPIRED && f.attempts == 2 && res.resolves == 1, "EXPIRED twice: error after 2 attempts");
	route_cache_free(rc);

	/* DENY: never retried */
	rc = primed(&f);
	f.script[0] = ROUTE_DENY;
	f.nscript = 1;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == -EACCES && f.attempts == 1 && res.resolves == 0, "DENY: 1 attempt, no resolution");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 8, "DENY does not touch the cache");
	route_cache_free(rc);

	/* transport failures per operation class */
	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_AFTER_SEND;
	f.nscript = 1;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == -ECONNRESET && f.attempts == 1, "exec: failure after send is not retried (1 attempt)");
	route_cache_free(rc);

	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_BEFORE_SEND;
	f.nscript = 1;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == 0 && f.attempts == 2, "exec: failure before send is retried (2 attempts)");
	route_cache_free(rc);

	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_AFTER_SEND;
	f.nscript = 1;
	f.next_gen = 8;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == 0 && f.attempts == 2 && res.transport_retried, "read: failure after send is retried (2 attempts)");
	route_cache_free(rc);

	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_AFTER_SEND;
	f.script[1] = ROUTE_TRANSPORT_AFTER_SEND;
	f.nscript = 2;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == -ECONNRESET && f.attempts == 2, "read: retried once only");
	route_cache_free(rc);

	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_BEFORE_SEND;
	f.script[1] = ROUTE_TRANSPORT_BEFORE_SEND;
	f.nscript = 2;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == -ECONNREFUSED && f.attempts == 2, "before send: retried once only");
	route_cache_free(rc);

	/* a worker that died: the transport retry follows the sandbox */
	rc = primed(&f);
	f.script[0] = ROUTE_TRANSPORT_BEFORE_SEND;
	f.nscript = 1;
	f.next_gen = 9;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == 0 && f.attempted_gen[1] == 9, "transport retry goes to the route the control plane names");
	ok(route_cache_get(rc, "sbx_a", f.now, &got) == 0 && got.route.generation == 9 &&
	    got.cache_exp == T0 + ROUTE_CACHE_TTL, "cache moved to gen 9, cache_exp kept");
	route_cache_free(rc);

	/* one of each recovery in one call: bounded */
	rc = primed(&f);
	f.script[0] = ROUTE_REFRESH;
	f.script[1] = ROUTE_EXPIRED;
	f.script[2] = ROUTE_TRANSPORT_BEFORE_SEND;
	f.script[3] = ROUTE_REFRESH;
	f.nscript = 4;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == -ESTALE && f.attempts == 4, "REFRESH, EXPIRED, transport, REFRESH: 4 attempts then error");
	route_cache_free(rc);

	/* a cached capability that already expired is renewed before use */
	rc = primed(&f);
	f.now = T0 + 200;
	f.next_gen = 8;
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == 0 && res.attempts == 1 && res.resolves == 1 && res.renewed &&
	    strcmp(f.attempted_cap[0], "v4.public.fresh-0") == 0,
	    "expired cached capability renewed before the first attempt");
	route_cache_free(rc);

	/* a cached capability without the needed access is renewed first
	 * rather than spending the attempt on a certain DENY */
	rc = route_cache_new();
	{
		struct route_entry ro = mk("sbx_a", 8, "wA");
		ro.access = ACC_FS_R;
		route_cache_put(rc, &ro, T0);
	}
	memset(&f, 0, sizeof(f));
	f.now = T0 + 1;
	f.next_gen = 8;
	r = route_call(rc, "sbx_a", &ops_exec, &f, &res);
	ok(r == 0 && res.resolves == 1 && res.attempts == 1 &&
	    strcmp(f.attempted_cap[0], "v4.public.fresh-0") == 0, "missing access: capability renewed first");
	route_cache_free(rc);

	/* the control plane answers for another sandbox: never used */
	rc = route_cache_new();
	memset(&f, 0, sizeof(f));
	f.now = T0;
	f.next_gen = 1;
	f.answer_sandbox = "sbx_other";
	r = route_call(rc, "sbx_a", &ops_read, &f, &res);
	ok(r == -EPROTO && f.attempts == 0, "answer for another sandbox: -EPROTO, no attempt");
	is_int((long long)route_cache_count(rc), 0, "and nothing cached");
	route_cache_free(rc);

	rc = route_cache_new();
	r = route_call(rc, "../etc", &ops_read, &f, &res);
	is_int(r, -EINVAL, "invalid sandbox id refused");
	route_cache_free(rc);
}

/* ---- persistence ---- */

static void
write_text(const char *path, const char *s, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		exit(1);
	fchmod(fd, mode);
	close(fd);
}

static void
test_persistence(void)
{
	char path[600], dir[512], xdg[512];
	struct route_cache *rc, *rc2;
	struct route_entry a = mk("sbx_a", 8, "wA"), b = mk("sbx_b", 2, "wB"), got;
	struct stat st;
	int r;

	snprintf(dir, sizeof(dir), "%s/state/space", top);
	snprintf(path, sizeof(path), "%s/routes.json", dir);
	rc = route_cache_open(path);
	ok(rc != NULL && route_cache_count(rc) == 0, "open: missing file is an empty cache");
	b.access = ACC_FS_R | ACC_WATCH;
	route_cache_put(rc, &a, T0);
	route_cache_put(rc, &b, T0);
	r = route_cache_save(rc);
	is_int(r, 0, "save");
	ok(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "file mode 0600");
	ok(stat(dir, &st) == 0 && (st.st_mode & 0777) == 0700, "directory created 0700");
	rc2 = route_cache_open(path);
	ok(rc2 && route_cache_count(rc2) == 2, "reopen: 2 entries");
	ok(route_cache_get(rc2, "sbx_a", T0, &got) == 0 && (a.cache_exp = T0 + ROUTE_CACHE_TTL, entry_eq(&got, &a)),
	    "entry a round trip");
	ok(route_cache_get(rc2, "sbx_b", T0, &got) == 0 && (b.cache_exp = T0 + ROUTE_CACHE_TTL, entry_eq(&got, &b)),
	    "entry b round trip (access bits)");
	route_cache_free(rc2);

	/* cross-process compare-and-swap: both handles read gen 8; one
	 * repairs to gen 10 and saves; a late rejection in the other repairs
	 * its stale copy to gen 9 and saves: gen 10 must survive */
	rc2 = route_cache_open(path);
	{
		struct route_entry g10 = mk("sbx_a", 10, "wX"), g9 = mk("sbx_a", 9, "wY");
		route_cache_replace_if(rc2, "sbx_a", &a.route, &g10);
		is_int(route_cache_save(rc2), 0, "handle 2 saves gen 10");
		is_int(route_cache_replace_if(rc, "sbx_a", &a.route, &g9), 1, "handle 1 repairs its stale gen 8 to gen 9");
		is_int(route_cache_save(rc), 0, "handle 1 saves");
		ok(route_cache_get(rc, "sbx_a", T0, &got) == 0 && got.route.generation == 10,
		    "after the merge handle 1 sees gen 10");
	}
	route_cache_free(rc2);
	route_cache_free(rc);
	rc = route_cache_open(path);
	ok(route_cache_get(rc, "sbx_a", T0, &got) == 0 && got.route.generation == 10,
	    "file holds gen 10: the older repair did not overwrite it");
	ok(route_cache_count(rc) == 2, "sbx_b kept");

	/* a dropped entry leaves the file; an expired one is pruned */
	{
		struct route_entry old = mk("sbx_old", 1, "wA");
		route_cache_put(rc, &old, T0 - 1000);
	}
	route_cache_drop(rc, "sbx_b", NULL);
	route_cache_save(rc);
	route_cache_free(rc);
	rc = route_cache_open(path);
	ok(route_cache_count(rc) == 1 && route_cache_get(rc, "sbx_b", T0, &got) == -ENOENT,
	    "drop persisted, expired entry pruned");
	route_cache_free(rc);

	/* corrupt files are ignored, never fatal, and get rewritten */
	{
		static const char *bad[] = {
			"not json at all",
			"{\"version\":1,\"routes\":[],\"extra\":1}",
			"{\"version\":2,\"routes\":[]}",
			"{\"version\":1,\"version\":1,\"routes\":[]}",
			"{\"version\":1,\"routes\":[{\"route\":{}}]}",
			"{\"version\":1,\"routes\":{}}",
			"",
		};
		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			write_text(path, bad[i], 0600);
			rc = route_cache_open(path);
			ok(rc != NULL && route_cache_count(rc) == 0, "corrupt file %zu ignored", i);
			route_cache_put(rc, &a, T0);
			ok(route_cache_save(rc) == 0, "and rewritten by save");
			route_cache_free(rc);
		}
		rc = route_cache_open(path);
		ok(route_cache_count(rc) == 1, "rewritten file loads");
		route_cache_free(rc);
	}
	/* a file others could have written is not trusted */
	chmod(path, 0622);
	rc = route_cache_open(path);
	ok(rc != NULL && route_cache_count(rc) == 0, "group/world-writable file ignored");
	route_cache_free(rc);
	chmod(path, 0600);
	/* an entry with an unknown field poisons the whole file */
	{
		char *s = NULL;
		size_t len;
		struct route_cache *m = route_cache_new();
		route_cache_put(m, &a, T0);
		route_cache_serialize(m, &s, &len);
		char *p = strstr(s, "\"cap_exp\"");
		char *t = malloc(len + 32);
		memcpy(t, s, (size_t)(p - s));
		strcpy(t + (p - s), "\"admin\":true, ");
		strcat(t, p);
		write_text(path, t, 0600);
		rc = route_cache_open(path);
		ok(route_cache_count(rc) == 0, "entry with an unknown field: file ignored");
		route_cache_free(rc);
		free(s);
		free(t);
		route_cache_free(m);
	}

	/* the default location */
	snprintf(xdg, sizeof(xdg), "%s/xdg", top);
	setenv("XDG_STATE_HOME", xdg, 1);
	rc = route_cache_open(NULL);
	{
		char want[600];
		snprintf(want, sizeof(want), "%s/space/routes.json", xdg);
		is_str(route_cache_path(rc), want, "default path under $XDG_STATE_HOME");
	}
	route_cache_free(rc);
	unsetenv("XDG_STATE_HOME");
	setenv("HOME", top, 1);
	rc = route_cache_open(NULL);
	{
		char want[600];
		snprintf(want, sizeof(want), "%s/.local/state/space/routes.json", top);
		is_str(route_cache_path(rc), want, "default path under ~/.local/state");
	}
	route_cache_free(rc);
}

/* two processes updating different sandboxes at the same time */
static void
test_two_processes(void)
{
	char path[512];
	struct route_cache *rc;
	pid_t pid[2];
	int n = 25, status, okc = 0;

	snprintf(path, sizeof(path), "%s/conc/routes.json", top);
	for (int p = 0; p < 2; p++) {
		if ((pid[p] = fork()) == 0) {
			int bad = 0;
			for (int i = 0; i < n; i++) {
				char sbx[32];
				struct route_cache *c = route_cache_open(path);
				struct route_entry e;
				snprintf(sbx, sizeof(sbx), "sbx_p%d_%d", p, i);
				e = mk(sbx, 1 + (uint64_t)i, p ? "wB" : "wA");
				if (c == NULL || route_cache_put(c, &e, T0) != 0 || route_cache_save(c) != 0)
					bad++;
				route_cache_free(c);
			}
			_exit(bad ? 1 : 0);
		}
	}
	for (int p = 0; p < 2; p++)
		if (waitpid(pid[p], &status, 0) == pid[p] && WIFEXITED(status) && WEXITSTATUS(status) == 0)
			okc++;
	is_int(okc, 2, "both processes saved without error");
	rc = route_cache_open(path);
	is_int((long long)route_cache_count(rc), 2 * n, "no entry lost: %d from each process", n);
	route_cache_free(rc);
}

static void
test_file_round_trip(void)
{
	struct route_cache *a = route_cache_new(), *b = route_cache_new();
	char *s1 = NULL, *s2 = NULL;
	size_t l1 = 0, l2 = 0;
	const char *why = NULL;

	for (int i = 0; i < 5; i++) {
		char sbx[16];
		snprintf(sbx, sizeof(sbx), "sbx_%d", 4 - i);
		struct route_entry e = mk(sbx, (uint64_t)INT64_MAX - (uint64_t)i, "w");
		e.access = (uint32_t)i + 1;
		route_cache_put(a, &e, T0);
	}
	ok(route_cache_serialize(a, &s1, &l1) == 0, "serialize");
	ok(route_cache_parse(b, s1, l1, &why) == 0, "parse what serialize wrote (%s)", why ? why : "-");
	route_cache_serialize(b, &s2, &l2);
	ok(l1 == l2 && memcmp(s1, s2, l1) == 0, "same bytes after a round trip");
	ok(route_cache_entry(a, 0) && strcmp(route_cache_entry(a, 0)->route.sandbox, "sbx_0") == 0,
	    "entries kept in key order");
	{
		bool eq = route_cache_count(a) == route_cache_count(b);
		for (size_t i = 0; eq && i < route_cache_count(a); i++)
			eq = entry_eq(route_cache_entry(a, i), route_cache_entry(b, i));
		ok(eq, "equal entries (generation up to 2^63-1)");
	}
	free(s1);
	free(s2);
	route_cache_free(a);
	route_cache_free(b);
}

int
main(void)
{
	char cmd[600];

	T0 = (int64_t)time(NULL);
	snprintf(top, sizeof(top), "/tmp/test_routecache.XXXXXX");
	if (mkdtemp(top) == NULL)
		return 1;
	test_cache();
	test_driver();
	test_file_round_trip();
	test_persistence();
	test_two_processes();
	if (snprintf(cmd, sizeof(cmd), "rm -rf %s", top) < (int)sizeof(cmd) && system(cmd) != 0)
		diag("could not clean %s", top);
	return done_testing();
}
