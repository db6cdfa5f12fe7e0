/* The egress policy of a sandbox: GET, POST and PATCH
 * /v1/sandboxes/{id}/network (docs/network.md). A change is stored on the
 * sandbox (every later install carries it: resume and move keep it) and,
 * when an execution is active, sent to its worker as a 'network'
 * assignment, which the worker applies to the running sandbox. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "lifecycle.h"
#include "log.h"
#include "netrate.h"
#include "network.h"
#include "util.h"

struct net_set {
	const char *owner, *id, *stored;
	bool sent;
};

static int
net_set_tx(struct store *s, void *arg)
{
	struct net_set *x = arg;
	struct sbx_cur c;
	json_t *o = NULL, *spec = NULL;
	char *text = NULL;
	int rc;

	if ((rc = R(s)->sandbox_cur(s, x->owner, x->id, &c)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_network_set(s, x->id, x->stored)) < 0)
		goto out;
	if (c.gen > 0 && lc_exec_active(c.exec_state)) {
		o = json_loads(x->stored, 0, NULL);
		spec = o ? json_pack("{s:O}", "network", json_object_get(o, "resolved")) : NULL;
		text = spec ? json_dumps(spec, JSON_COMPACT) : NULL;
		if (text == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		rc = R(s)->assignment_add(s, c.worker, x->id, c.gen, "network", text, now_unix());
		x->sent = rc == 0;
	}
out:
	free(text);
	json_decref(spec);
	json_decref(o);
	lc_cur_free(&c);
	return rc;
}

struct net_get {
	const char *owner, *id;
	char *stored;
	int found;
};

/* the row operation in a transaction of its own: every backend runs its
 * statements under its lock and on a live connection */
static int
net_get_tx(struct store *s, void *arg)
{
	struct net_get *x = arg;

	free(x->stored);        /* a retried transaction starts again */
	x->stored = NULL;
	x->found = R(s)->sandbox_network_get(s, x->owner, x->id, &x->stored);
	return x->found < 0 ? x->found : 0;
}

/* 1 and *out (NULL: none set), 0 unknown, or <0 */
static int
net_get(struct store *s, const char *owner, const char *id, char **out)
{
	struct net_get x = { owner, id, NULL, 0 };
	int rc;

	if ((rc = R(s)->tx(s, net_get_tx, &x)) < 0) {
		free(x.stored);
		return rc;
	}
	*out = x.stored;
	return x.found;
}

void
api_sandbox_network_get(struct req *r)
{
	char *stored = NULL, why[256];
	int rc;
	json_t *o;

	rc = net_get(r->ctl->st, r->principal, r->params[0], &stored);

	if (rc == 0)
		rc = -ENOENT;
	if (rc < 0) {
		reply_store_error(r, rc, "sandbox");
		return;
	}
	if (stored == NULL) {
		/* the default, shown in the stored form */
		json_t *empty = json_object();

		stored = net_policy_stored(empty, NULL, why, sizeof(why));
		json_decref(empty);
	}
	o = stored ? json_loads(stored, 0, NULL) : NULL;
	free(stored);
	if (o == NULL) {
		reply_error(r, 500, "internal", "stored policy unreadable");
		return;
	}
	reply_json(r, 200, o);
}

void
api_sandbox_network_set(struct req *r)
{
	struct net_set x = { .owner = r->principal, .id = r->params[0] };
	char *base = NULL, *stored = NULL, why[256] = "";
	json_t *in;
	int rc;

	static const char *const keys[] = { "internet", "allow", "deny", NULL };

	if ((in = req_json(r, false)) == NULL)
		return;
	/* the shape first: an unknown member is 400 whatever the sandbox */
	if (!json_keys_only(r, in, keys))
		goto out;
	rc = net_get(r->ctl->st, r->principal, r->params[0], &base);
	if (rc <= 0) {
		reply_store_error(r, rc == 0 ? -ENOENT : rc, "sandbox");
		goto out;
	}
	if (netrate_refused(r, x.id))
		goto out;
	/* resolved outside the transaction: a slow resolver holds no lock */
	if ((stored = net_policy_stored(in, base, why, sizeof(why))) == NULL) {
		reply_error(r, 400, "bad_request", "%s", why);
		goto out;
	}
	x.stored = stored;
	if ((rc = R(r->ctl->st)->tx(r->ctl->st, net_set_tx, &x)) < 0) {
		reply_store_error(r, rc, "sandbox");
		goto out;
	}
	if (x.sent)
		assign_notify(r->ctl, x.id);
	log_info("sandbox %s: egress policy set%s", x.id, x.sent ? " and sent to its worker" : "");
	reply_json(r, 200, json_loads(stored, 0, NULL));
out:
	free(base);
	free(stored);
	json_decref(in);
}
