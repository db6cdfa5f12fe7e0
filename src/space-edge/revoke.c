/* The revocation feed of space-edge (docs/network.md "space-edge"): one
 * thread long-polls space-control's GET /v1/edge/revocations with the
 * edge credential and drops every cached decision about a sandbox it
 * names (all of them when the feed says "all": space-control restarted,
 * or the edge fell too far behind). The next request for that sandbox,
 * on a new connection or a kept-alive one, is decided again by
 * space-control. When the feed is away, decisions still end after
 * --auth-ttl seconds: the feed makes a revocation prompt, the lifetime
 * bounds it. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <jansson.h>

#include "client.h"
#include "edge.h"
#include "log.h"
#include "util.h"

#define FEED_WAIT       25      /* s: one long-poll */

struct feed {
	struct edge *e;
	struct space_client *c;
	char boot[17];                  /* the cursor: space-control's run ... */
	uint64_t seq;                   /* ... and its last revocation */
};

/* one poll: 0 (drops done, cursor moved), or -(seconds to wait before
 * the next) */
static int
feed_poll(struct feed *f, int wait, bool *warned)
{
	struct edge *e = f->e;
	struct space_answer a;
	char path[128];
	const char *b;
	json_t *list, *v;
	size_t i;
	int rc, ret = -1;

	space_answer_init(&a);
	snprintf(path, sizeof(path), "/v1/edge/revocations?after=%" PRIu64 "&boot=%s&wait=%d",
	    f->seq, f->boot, wait);
	rc = space_control(f->c, "GET", path, NULL, &a);
	b = a.body ? json_string_value(json_object_get(a.body, "boot")) : NULL;
	v = a.body ? json_object_get(a.body, "seq") : NULL;
	list = a.body ? json_object_get(a.body, "sandboxes") : NULL;
	if (rc < 0 || a.status != 200 || b == NULL || strlen(b) >= sizeof(f->boot) ||
	    !json_is_integer(v) || json_integer_value(v) < 0 || !json_is_array(list) ||
	    !json_is_boolean(json_object_get(a.body, "all"))) {
		atomic_fetch_add(&e->st.feed_errors, 1);
		if (!*warned)
			log_warnx("revocation feed: %s; decisions end by --auth-ttl meanwhile",
			    rc < 0 ? a.message : a.status != 200 ? "refused" : "malformed answer");
		*warned = true;
		/* a control plane without the feed (501) is asked rarely */
		rc = a.status == 404 || a.status == 501 ? 30 : 1;
		space_answer_clear(&a);
		return -rc;
	}
	if (*warned)
		log_info("revocation feed: connected");
	*warned = false;
	if (json_is_true(json_object_get(a.body, "all"))) {
		size_t n = edge_routes_drop(e, NULL);
		atomic_fetch_add(&e->st.dropped, n);
		if (f->boot[0] != '\0')
			atomic_fetch_add(&e->st.revocations, 1);
	} else {
		json_array_foreach(list, i, v) {
			const char *s = json_string_value(v);
			if (s == NULL || !id_valid(s))
				continue;
			atomic_fetch_add(&e->st.dropped, edge_routes_drop(e, s));
			atomic_fetch_add(&e->st.revocations, 1);
			if (e->cfg.verbose)
				log_info("revoked: decisions about %s dropped", s);
		}
	}
	snprintf(f->boot, sizeof(f->boot), "%s", b);
	f->seq = (uint64_t)json_integer_value(json_object_get(a.body, "seq"));
	ret = 0;
	space_answer_clear(&a);
	return ret;
}

static void *
feed_main(void *arg)
{
	struct feed *f = arg;
	bool warned = false;

	for (;;) {
		int rc = feed_poll(f, FEED_WAIT, &warned);
		if (rc < 0)
			sleep((unsigned)-rc);
	}
	return NULL;
}

/* the cursor is taken once before the edge serves (a decision it makes
 * is then never older than the feed's start); when space-control is not
 * there yet, the thread's first answer ("all") drops whatever was
 * decided meanwhile */
int
edge_feed_start(struct edge *e)
{
	static struct feed f;
	pthread_t t;
	pthread_attr_t attr;
	bool warned = false;
	int rc;

	f.e = e;
	if ((f.c = space_client_new(e->cfg.control, e->cfg.cred)) == NULL)
		return -ENOMEM;
	f.c->connect_timeout = 2;
	(void)feed_poll(&f, 0, &warned);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, feed_main, &f);
	pthread_attr_destroy(&attr);
	return rc == 0 ? 0 : -rc;
}
