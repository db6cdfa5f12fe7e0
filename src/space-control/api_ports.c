/* Declared service ports: POST, GET /v1/sandboxes/{id}/ports and DELETE
 * /v1/sandboxes/{id}/ports/{port} (docs/network.md "Service ports").
 * Stored on the sandbox (a move or resume keeps them: every install
 * carries them); a change reaches the running execution as a 'network'
 * assignment with "ports", which netgtw's second check reads at the
 * worker. Owner's API key only (AUTH_USER and the owner filter). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_common.h"
#include "control.h"
#include "lifecycle.h"
#include "log.h"
#include "netrate.h"
#include "ports.h"
#include "util.h"

struct pentry { uint16_t port; bool pub; };

static int
pcmp(const void *a, const void *b)
{
	return (int)((const struct pentry *)a)->port - (int)((const struct pentry *)b)->port;
}

/* the stored list into e[] (ascending); NULL text: none. count or -EIO */
static int
ports_parse_stored(const char *text, struct pentry *e)
{
	json_t *l, *v;
	size_t i;
	int n = 0;

	if (text == NULL)
		return 0;
	if ((l = json_loads(text, 0, NULL)) == NULL || !json_is_array(l) ||
	    json_array_size(l) > SPACE_PORTS_MAX) {
		json_decref(l);
		return -EIO;
	}
	json_array_foreach(l, i, v) {
		json_t *p = json_object_get(v, "port");

		if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535) {
			json_decref(l);
			return -EIO;
		}
		e[n].port = (uint16_t)json_integer_value(p);
		e[n++].pub = json_is_true(json_object_get(v, "public"));
	}
	json_decref(l);
	return n;
}

static json_t *
ports_json(const struct pentry *e, int n)
{
	json_t *l = json_array();
	int i;

	for (i = 0; l != NULL && i < n; i++)
		if (json_array_append_new(l, json_pack("{s:i,s:b}", "port", (int)e[i].port,
		    "public", e[i].pub)) != 0) {
			json_decref(l);
			return NULL;
		}
	return l;
}

static char *
ports_text(const struct pentry *e, int n)
{
	json_t *l = ports_json(e, n);
	char *s = l ? json_dumps(l, JSON_COMPACT) : NULL;

	json_decref(l);
	return s;
}

/* one {"port":N,"public"?:b} of the API */
static bool
entry_from_api(json_t *v, struct pentry *e, char *why, size_t cap)
{
	json_t *p, *pub;
	const char *k;
	json_t *x;

	if (!json_is_object(v)) {
		snprintf(why, cap, "a port is an object {\"port\":N,\"public\":bool}");
		return false;
	}
	json_object_foreach(v, k, x)
		if (strcmp(k, "port") != 0 && strcmp(k, "public") != 0) {
			snprintf(why, cap, "unknown member \"%.64s\" in a port", k);
			return false;
		}
	p = json_object_get(v, "port");
	pub = json_object_get(v, "public");
	if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535) {
		snprintf(why, cap, "\"port\" must be an integer in 1..65535");
		return false;
	}
	if (pub != NULL && !json_is_boolean(pub)) {
		snprintf(why, cap, "\"public\" must be a boolean");
		return false;
	}
	e->port = (uint16_t)json_integer_value(p);
	e->pub = pub != NULL && json_is_true(pub);
	return true;
}

char *
ports_from_api(json_t *list, char *why, size_t cap)
{
	struct pentry e[SPACE_PORTS_MAX];
	size_t i;
	json_t *v;
	int n = 0, j;

	if (!json_is_array(list) || json_array_size(list) > SPACE_PORTS_MAX) {
		snprintf(why, cap, "\"ports\" must be an array of at most %d ports", SPACE_PORTS_MAX);
		return NULL;
	}
	json_array_foreach(list, i, v) {
		if (!entry_from_api(v, &e[n], why, cap))
			return NULL;
		for (j = 0; j < n; j++)
			if (e[j].port == e[n].port) {
				snprintf(why, cap, "port %u given twice", e[n].port);
				return NULL;
			}
		n++;
	}
	qsort(e, (size_t)n, sizeof(e[0]), pcmp);
	if (n == 0)
		return strdup("[]");
	return ports_text(e, n);
}

int
ports_spec_with(struct store *s, const char *sandbox, const char *spec, char **out)
{
	struct pentry e[SPACE_PORTS_MAX];
	char *stored = NULL;
	json_t *sp, *l;
	int rc, n, i;

	*out = NULL;
	if (R(s)->sandbox_ports_get == NULL)
		return 0;
	if ((rc = R(s)->sandbox_ports_get(s, NULL, sandbox, &stored)) < 0)
		return rc;
	n = ports_parse_stored(stored, e);
	free(stored);
	if (n <= 0)
		return n;
	sp = json_loads(spec, 0, NULL);
	l = json_array();
	for (i = 0; l != NULL && i < n; i++)
		if (json_array_append_new(l, json_integer(e[i].port)) != 0)
			break;
	if (sp == NULL || l == NULL || i < n || json_object_set(sp, "ports", l) != 0 ||
	    (*out = json_dumps(sp, JSON_COMPACT)) == NULL)
		rc = -EIO;
	json_decref(l);
	json_decref(sp);
	return rc < 0 ? rc : 0;
}

struct text_get {
	const char *owner, *id;
	bool worker;            /* the worker's gateway, else the sandbox's ports */
	char *out;
	int found;
};

static int
text_get_tx(struct store *s, void *arg)
{
	struct text_get *x = arg;

	free(x->out);           /* a retried transaction starts again */
	x->out = NULL;
	x->found = x->worker ? R(s)->worker_gateway_get(s, x->id, &x->out) :
	    R(s)->sandbox_ports_get(s, x->owner, x->id, &x->out);
	return x->found < 0 ? x->found : 0;
}

/* a read of one row operation outside any transaction: in one of its own,
 * so every backend runs it under its lock and on a live connection (the
 * row operations themselves run inside the caller's transaction) */
static int
text_get(struct store *s, bool worker, const char *owner, const char *id, char **out)
{
	struct text_get x = { owner, id, worker, NULL, 0 };
	int rc;

	*out = NULL;
	if ((rc = R(s)->tx(s, text_get_tx, &x)) < 0) {
		free(x.out);
		return rc;
	}
	*out = x.out;
	return x.found;
}

int
ports_declared(struct store *s, const char *owner, const char *sandbox, uint16_t port, bool *pub)
{
	struct pentry e[SPACE_PORTS_MAX];
	char *stored = NULL;
	int rc, n, i;

	*pub = false;
	if (R(s)->sandbox_ports_get == NULL)
		return 0;
	if ((rc = text_get(s, false, owner, sandbox, &stored)) < 0)
		return rc;
	if (rc == 0)
		return -ENOENT;
	n = ports_parse_stored(stored, e);
	free(stored);
	for (i = 0; i < n; i++)
		if (e[i].port == port) {
			*pub = e[i].pub;
			return 1;
		}
	return n < 0 ? n : 0;
}

bool
ports_gateway_valid(const char *s)
{
	const char *c, *colon;
	size_t n = strlen(s);
	char *end;
	unsigned long p;

	if (n < 9 || n > 256 || strncmp(s, "tcp://", 6) != 0)
		return false;
	/* a host name, an IPv4 address or a bracketed IPv6 one, then :PORT */
	for (c = s + 6; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
		    *c == '.' || *c == '-' || *c == ':' || *c == '[' || *c == ']'))
			return false;
	if ((colon = strrchr(s + 6, ':')) == NULL || colon == s + 6)
		return false;
	p = strtoul(colon + 1, &end, 10);
	return *end == '\0' && colon[1] >= '1' && colon[1] <= '9' && p >= 1 && p <= 65535;
}

int
ports_gateway(struct store *s, const char *worker, char *out, size_t cap)
{
	char *g = NULL;
	int rc;

	out[0] = '\0';
	if (R(s)->worker_gateway_get == NULL)
		return 0;
	if ((rc = text_get(s, true, NULL, worker, &g)) < 0)
		return rc;
	rc = g != NULL && g[0] && strlen(g) < cap;
	if (rc)
		memcpy(out, g, strlen(g) + 1);
	free(g);
	return rc;
}

/* ---- the API ---- */

struct ports_set {
	const char *owner, *id;
	uint16_t port;
	bool pub, remove;
	int found;                      /* remove: the port was declared */
	json_t *out;                    /* the list after the change */
	bool sent;
};

static int
ports_set_tx(struct store *s, void *arg)
{
	struct ports_set *x = arg;
	struct pentry e[SPACE_PORTS_MAX];
	struct sbx_cur c;
	char *stored = NULL, *text = NULL, *spec = NULL;
	json_t *o = NULL, *l = NULL;
	int rc, n, i, j;

	/* a retried transaction starts again */
	json_decref(x->out);
	x->out = NULL;
	if ((rc = R(s)->sandbox_cur(s, x->owner, x->id, &c)) < 0)
		return rc;
	if ((rc = R(s)->sandbox_ports_get(s, x->owner, x->id, &stored)) <= 0) {
		rc = rc == 0 ? -ENOENT : rc;
		goto out;
	}
	if ((n = ports_parse_stored(stored, e)) < 0) {
		rc = n;
		goto out;
	}
	for (i = 0; i < n && e[i].port != x->port; i++)
		;
	x->found = i < n;
	if (x->remove) {
		if (i < n) {
			for (j = i; j + 1 < n; j++)
				e[j] = e[j + 1];
			n--;
		}
	} else if (i < n) {
		e[i].pub = x->pub;
	} else {
		if (n >= SPACE_PORTS_MAX) {
			rc = -E2BIG;
			goto out;
		}
		e[n].port = x->port;
		e[n++].pub = x->pub;
		qsort(e, (size_t)n, sizeof(e[0]), pcmp);
	}
	if ((text = ports_text(e, n)) == NULL || (x->out = ports_json(e, n)) == NULL) {
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = R(s)->sandbox_ports_set(s, x->id, text)) < 0)
		goto out;
	/* the running execution gets the new list (its gateway's second
	 * check); a later install carries it anyway */
	if (c.gen > 0 && lc_exec_active(c.exec_state)) {
		l = json_array();
		for (i = 0; l != NULL && i < n; i++)
			json_array_append_new(l, json_integer(e[i].port));
		o = l ? json_pack("{s:O}", "ports", l) : NULL;
		if (o == NULL || (spec = json_dumps(o, JSON_COMPACT)) == NULL) {
			rc = -ENOMEM;
			goto out;
		}
		rc = R(s)->assignment_add(s, c.worker, x->id, c.gen, "network", spec, now_unix());
		x->sent = rc == 0;
	}
out:
	free(spec);
	free(text);
	free(stored);
	json_decref(o);
	json_decref(l);
	lc_cur_free(&c);
	return rc;
}

static bool
ports_stored(struct req *r)
{
	if (R(r->ctl->st)->sandbox_ports_get != NULL && R(r->ctl->st)->sandbox_ports_set != NULL)
		return true;
	reply_error(r, 501, "not_implemented", "this store does not hold declared ports");
	return false;
}

static void
ports_change(struct req *r, struct ports_set *x)
{
	int rc;

	if (netrate_refused(r, x->id))
		return;
	if ((rc = R(r->ctl->st)->tx(r->ctl->st, ports_set_tx, x)) < 0) {
		if (rc == -E2BIG)
			reply_error(r, 409, "conflict", "a sandbox declares at most %d ports",
			    SPACE_PORTS_MAX);
		else
			reply_store_error(r, rc, "sandbox");
		json_decref(x->out);
		return;
	}
	if (x->sent)
		assign_notify(r->ctl, x->id);
	if (x->remove && !x->found) {
		json_decref(x->out);
		reply_error(r, 404, "not_found", "port %u is not declared", x->port);
		return;
	}
	log_info("sandbox %s: port %u %s", x->id, x->port, x->remove ? "removed" :
	    x->pub ? "declared public" : "declared");
	reply_json(r, 200, json_pack("{s:o}", "ports", x->out));
}

void
api_sandbox_ports_get(struct req *r)
{
	struct pentry e[SPACE_PORTS_MAX];
	char *stored = NULL;
	int rc, n;

	if (!ports_stored(r))
		return;
	rc = text_get(r->ctl->st, false, r->principal, r->params[0], &stored);
	if (rc <= 0) {
		reply_store_error(r, rc == 0 ? -ENOENT : rc, "sandbox");
		return;
	}
	n = ports_parse_stored(stored, e);
	free(stored);
	if (n < 0) {
		reply_error(r, 500, "internal", "stored ports unreadable");
		return;
	}
	reply_json(r, 200, json_pack("{s:o}", "ports", ports_json(e, n)));
}

void
api_sandbox_ports_add(struct req *r)
{
	static const char *const keys[] = { "port", "public", NULL };
	struct ports_set x = { .owner = r->principal, .id = r->params[0] };
	struct pentry e;
	char why[128];
	json_t *in;

	if (!ports_stored(r) || (in = req_json(r, false)) == NULL)
		return;
	if (!json_keys_only(r, in, keys))
		goto out;
	if (!entry_from_api(in, &e, why, sizeof(why))) {
		reply_error(r, 400, "bad_request", "%s", why);
		goto out;
	}
	x.port = e.port;
	x.pub = e.pub;
	ports_change(r, &x);
out:
	json_decref(in);
}

void
api_sandbox_ports_remove(struct req *r)
{
	struct ports_set x = { .owner = r->principal, .id = r->params[0], .remove = true };
	const char *p = r->params[1];
	char *end;
	unsigned long v;

	if (!ports_stored(r))
		return;
	v = strtoul(p, &end, 10);
	if (*p < '1' || *p > '9' || *end != '\0' || v > 65535) {
		reply_error(r, 400, "bad_request", "the port must be an integer in 1..65535");
		return;
	}
	x.port = (uint16_t)v;
	ports_change(r, &x);
}
