/* Revocations for space-edge (docs/network.md "space-edge", "Revocation"):
 * a change through this daemon's API that can take away what the edge
 * was allowed (a traffic token replaced, a port declared anew or removed
 * (it may have become private), a sandbox paused or deleted) is noted
 * here with its sandbox, once the handler answered 2xx (http.c), and
 *   GET /v1/edge/revocations?after=SEQ&boot=B&wait=S   edge credential
 * hands the edge the sandboxes revoked after SEQ, waiting up to S seconds
 * (at most SPACE_LONGPOLL_MAX) for one. The ring is in memory: a cursor
 * of another boot of this daemon, or one the ring has overtaken, is
 * answered "all" (the edge drops every decision). What this daemon does
 * not see (another replica's API, an API key revoked with the
 * space-control command) reaches the edge through its short decision
 * lifetime (--auth-ttl) instead. */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sodium.h>

#include "api_common.h"
#include "control.h"
#include "util.h"

#define REVOKE_RING     1024

static pthread_mutex_t rv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rv_cv = PTHREAD_COND_INITIALIZER;
static uint64_t rv_seq;                         /* the last one noted */
static char rv_boot[17];                        /* this daemon's run, hex */
static struct {
	uint64_t seq;
	char sandbox[SPACE_ID_MAX + 1];
} rv_ring[REVOKE_RING];

/* under rv_mu */
static void
boot_init(void)
{
	uint8_t b[8];

	if (rv_boot[0])
		return;
	randombytes_buf(b, sizeof(b));
	for (int i = 0; i < 8; i++)
		snprintf(rv_boot + 2 * i, 3, "%02x", b[i]);
}

static void
note(const char *sandbox)
{
	pthread_mutex_lock(&rv_mu);
	boot_init();
	rv_seq++;
	rv_ring[rv_seq % REVOKE_RING].seq = rv_seq;
	snprintf(rv_ring[rv_seq % REVOKE_RING].sandbox, sizeof(rv_ring[0].sandbox), "%s", sandbox);
	pthread_cond_broadcast(&rv_cv);
	pthread_mutex_unlock(&rv_mu);
}

void
edge_revoke_after(struct req *r, handler_fn h)
{
	if (r->status < 200 || r->status >= 300 || !id_valid(r->params[0]))
		return;
	if (h == api_traffic_token || h == api_sandbox_ports_add || h == api_sandbox_ports_remove ||
	    h == api_sandbox_pause || h == api_sandbox_delete)
		note(r->params[0]);
}

void
api_edge_revocations(struct req *r)
{
	const char *boot = req_query(r, "boot");
	uint64_t after = 0, wait = 0, deadline, seq;
	json_t *list;
	bool all;

	if (r->body_len > 0) {
		reply_error(r, 400, "bad_request", "no body expected");
		return;
	}
	if (req_query_u(r, "after", UINT64_MAX / 2, &after) < 0 ||
	    req_query_u(r, "wait", SPACE_LONGPOLL_MAX, &wait) < 0 ||
	    (boot && strlen(boot) > 16)) {
		reply_error(r, 400, "bad_request", "after must be a sequence number, wait 0..%d "
		    "seconds, boot what an earlier answer said", SPACE_LONGPOLL_MAX);
		return;
	}
	if ((list = json_array()) == NULL) {
		reply_error(r, 500, "internal", "out of memory");
		return;
	}
	deadline = now_mono_ns() + wait * 1000000000ull;
	pthread_mutex_lock(&rv_mu);
	boot_init();
	for (;;) {
		uint64_t now = now_mono_ns(), until;
		struct timespec ts;

		/* a cursor of another run, from the future, or overtaken */
		all = boot == NULL || strcmp(boot, rv_boot) != 0 || after > rv_seq ||
		    rv_seq - after > REVOKE_RING;
		if (all || rv_seq > after || now >= deadline || r->ctl->stopping)
			break;
		/* in slices, so a stopping daemon is not held up */
		until = deadline - now > 1000000000ull ? now + 1000000000ull : deadline;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += (time_t)((until - now) / 1000000000ull);
		ts.tv_nsec += (long)((until - now) % 1000000000ull);
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		(void)pthread_cond_timedwait(&rv_cv, &rv_mu, &ts);
	}
	if (!all)
		for (uint64_t s = after + 1; s <= rv_seq; s++)
			json_array_append_new(list, json_string(rv_ring[s % REVOKE_RING].sandbox));
	seq = rv_seq;
	pthread_mutex_unlock(&rv_mu);
	reply_json(r, 200, json_pack("{s:s,s:I,s:b,s:o}", "boot", rv_boot, "seq",
	    (json_int_t)seq, "all", all, "sandboxes", list));
}
