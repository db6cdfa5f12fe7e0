/* The comparator (DESIGN section 4): one function, four outcomes.
 *
 * Every receiver runs exactly this code. The order of the checks is part of
 * the contract, because it decides what the client does next: DENY is final,
 * EXPIRED means "renew your capability", REFRESH_ROUTE means "your route is
 * stale, ask the control plane where the sandbox runs now". A check that can
 * only be answered by repairing the route must therefore come after every
 * check whose failure no route repair could fix; otherwise a forged or
 * misdirected request would make the client (and the control plane) chase a
 * route that was never the problem. */
#include <errno.h>
#include <string.h>

#include "admit.h"
#include "limits.h"

static struct admit_result
result(enum admit_outcome o, enum admit_reason r)
{
	struct admit_result res = { o, r };
	return res;
}

/* identifiers in the structs are NUL-terminated fixed arrays; bound the
 * comparison by the array size anyway so a missing NUL cannot run past it */
static int
field_eq(const char *a, const char *b, size_t cap)
{
	return strncmp(a, b, cap) == 0;
}

static int
kind_valid(enum receiver_kind kind)
{
	return kind == RECV_SBX_MANAGER || kind == RECV_BRIDGE || kind == RECV_NETGTW;
}

struct admit_result
admit_profile(const struct capability *cap, enum receiver_kind kind)
{
	enum cap_audience want_aud;
	enum cap_purpose want_pur;

	/* The audience and purpose bind a capability to one kind of receiver:
	 * a service capability handed to a gateway must never open a control
	 * channel at sbx-manager, and the reverse. An unknown kind refuses
	 * everything (fail closed). */
	switch (kind) {
	case RECV_SBX_MANAGER:
	case RECV_BRIDGE:
		want_aud = AUD_NODE_API;
		want_pur = PUR_CONTROL;
		break;
	case RECV_NETGTW:
		want_aud = AUD_NETGTW;
		want_pur = PUR_SERVICE;
		break;
	default:
		return result(ADMIT_DENY, R_WRONG_AUDIENCE);
	}
	if (cap->aud != want_aud)
		return result(ADMIT_DENY, R_WRONG_AUDIENCE);
	if (cap->pur != want_pur)
		return result(ADMIT_DENY, R_WRONG_PURPOSE);

	/* The profile: a control capability names access and no port; a
	 * service capability names exactly one valid port and protocol and no
	 * access. A mixed one is not something the issuer makes, so it is a
	 * forgery or a bug, and either way step 7 could not judge it. */
	if (want_pur == PUR_CONTROL) {
		if (cap->acc == 0 || (cap->acc & ~ACC_ALL) != 0 ||
		    cap->port != 0 || cap->proto != PROTO_NONE)
			return result(ADMIT_DENY, R_BAD_PROFILE);
	} else {
		if (cap->port == 0 || cap->acc != 0 ||
		    (cap->proto != PROTO_HTTP && cap->proto != PROTO_TCP))
			return result(ADMIT_DENY, R_BAD_PROFILE);
	}
	return result(ADMIT_ALLOW, R_NONE);
}

struct admit_result
admit(const struct capability *cap, const struct runtime_record *rec,
    const struct admit_request *req)
{
	struct admit_result r;
	const struct route_identity *want, *have;

	if (cap == NULL || req == NULL || !kind_valid(req->kind))
		return result(ADMIT_DENY, R_MALFORMED);

	/* Step 1 (the part that needs no signature) again: the bridge reaches
	 * this function with claims forwarded by sbx-manager, without
	 * verifier_check(). Cheap, and it keeps admit() safe on its own. */
	r = admit_profile(cap, req->kind);
	if (r.outcome != ADMIT_ALLOW)
		return r;

	/* Step 2: time. Before any identity check, because an expired
	 * capability must be renewed whatever the route says; refreshing the
	 * route would hand the client nothing it could use. The skew allows
	 * for receivers whose clocks lag or lead the issuer's a little:
	 * exp + 15 is still accepted, exp + 16 is not. */
	if (req->now > cap->exp + SPACE_CLOCK_SKEW)
		return result(ADMIT_EXPIRED, R_EXPIRED);
	/* a capability from the future means a clock far off or a forged
	 * iat; either way it must not extend its own lifetime */
	if (cap->iat > req->now + SPACE_CLOCK_SKEW)
		return result(ADMIT_EXPIRED, R_NOT_YET_VALID);

	/* Step 3: the destination. A capability for sandbox A presented at
	 * B's URL (or at B's bridge or gateway) is refused for good: no route
	 * repair can make A's authorization valid for B, so this is DENY and
	 * comes before every REFRESH_ROUTE rule. */
	if (req->target_sandbox == NULL ||
	    !field_eq(req->target_sandbox, cap->route.sandbox, sizeof(cap->route.sandbox)))
		return result(ADMIT_DENY, R_TARGET_MISMATCH);
	if (req->kind != RECV_SBX_MANAGER) {
		/* a per-sandbox receiver serves one sandbox only; it must not
		 * act for another even when the URL agrees with the token */
		if (req->receiver_sandbox == NULL ||
		    !field_eq(req->receiver_sandbox, cap->route.sandbox,
		    sizeof(cap->route.sandbox)))
			return result(ADMIT_DENY, R_RECEIVER_MISMATCH);
	}

	/* Step 4: a record to compare against. sbx-manager serves many
	 * sandboxes and may simply not have installed this one yet (or has
	 * forgotten a long-retired one): the client's route is stale, so the
	 * answer is REFRESH_ROUTE. A bridge or gateway exists only for its one
	 * execution and always holds that record; one without it is not in a
	 * state to serve anything, and saying REFRESH_ROUTE would send the
	 * client back to the same receiver. It refuses as a receiver that does
	 * not serve this sandbox. */
	if (rec == NULL) {
		if (req->kind == RECV_SBX_MANAGER)
			return result(ADMIT_REFRESH_ROUTE, R_NO_RECORD);
		return result(ADMIT_DENY, R_RECEIVER_MISMATCH);
	}
	want = &cap->route;
	have = &rec->id;
	/* the caller looked the record up by this sandbox; a record of another
	 * sandbox here is a lookup bug, and forwarding on it would cross
	 * sandboxes, so it is refused like any foreign receiver */
	if (!field_eq(have->sandbox, want->sandbox, sizeof(have->sandbox)))
		return result(ADMIT_DENY, R_RECEIVER_MISMATCH);

	/* Step 5: the execution. The capability names the one execution the
	 * control plane authorized; every field of the record must agree.
	 *  - generation: once a receiver installs N+1 it refuses N's tokens
	 *    even though they are unexpired, because execution N is being or
	 *    has been retired and its state may have moved on (a resume from a
	 *    snapshot, a move); a request meant for N must not act on N+1.
	 *    The reverse (token N+1, record N) means the control plane is
	 *    ahead of this receiver; the client retries after a refresh.
	 *  - worker: the same generation cannot legitimately be on two
	 *    workers; a mismatch is a stale or misdirected route.
	 *  - substrate: a jail and a microVM of the same generation are
	 *    different executions with different isolation.
	 *  - resident: a re-created worker (or pod) reuses the worker id but
	 *    gets a new incarnation; routes made for the old one must not
	 *    reach whatever now runs under that name.
	 *  - state: only a serving execution takes requests; a retiring,
	 *    retired or paused one is still the right identity but the client
	 *    must find where the sandbox serves now. */
	if (have->generation != want->generation)
		return result(ADMIT_REFRESH_ROUTE, R_GENERATION);
	if (!field_eq(have->worker, want->worker, sizeof(have->worker)))
		return result(ADMIT_REFRESH_ROUTE, R_WORKER);
	if (!field_eq(have->substrate, want->substrate, sizeof(have->substrate)))
		return result(ADMIT_REFRESH_ROUTE, R_SUBSTRATE);
	if (!field_eq(have->resident, want->resident, sizeof(have->resident)))
		return result(ADMIT_REFRESH_ROUTE, R_RESIDENT);
	if (rec->state != EXEC_SERVING)
		return result(ADMIT_REFRESH_ROUTE, R_NOT_SERVING);

	/* Step 6: the activation (a re-activation of the bridge/guest inside
	 * one generation). New opens must carry the current one, so they reach
	 * the guest that is actually running. A stream the gateway already
	 * admitted stays open: the execution (and its state) is the same, only
	 * the attempt changed (DESIGN section 7). Control streams get no such
	 * grace: each control operation is a new open. */
	if (have->activation != want->activation &&
	    !(req->kind == RECV_NETGTW && req->established_stream))
		return result(ADMIT_REFRESH_ROUTE, R_ACTIVATION);

	/* Step 7: the operation. Last, because it can only be judged once we
	 * know the capability reached the execution it names. */
	if (cap->pur == PUR_CONTROL) {
		/* need_access 0 would admit anything with any capability;
		 * an operation that needs no access is a caller bug, refused */
		if (req->need_access == 0 ||
		    (cap->acc & req->need_access) != req->need_access)
			return result(ADMIT_DENY, R_ACCESS);
	} else {
		if (cap->port != req->port)
			return result(ADMIT_DENY, R_PORT);
		if (cap->proto != req->proto)
			return result(ADMIT_DENY, R_PROTO);
	}

	/* Step 8 */
	return result(ADMIT_ALLOW, R_NONE);
}

static const char *const outcome_names[] = {
	[ADMIT_ALLOW] = "allow",
	[ADMIT_DENY] = "deny",
	[ADMIT_EXPIRED] = "expired",
	[ADMIT_REFRESH_ROUTE] = "refresh_route",
};

static const char *const reason_names[R__COUNT] = {
	[R_NONE] = "ok",
	[R_MALFORMED] = "malformed_token",
	[R_UNKNOWN_KID] = "unknown_kid",
	[R_BAD_SIGNATURE] = "bad_signature",
	[R_BAD_CLAIMS] = "bad_claims",
	[R_WRONG_PURPOSE] = "wrong_purpose",
	[R_WRONG_AUDIENCE] = "wrong_audience",
	[R_BAD_PROFILE] = "invalid_port_profile",
	[R_EXPIRED] = "expired",
	[R_NOT_YET_VALID] = "issued_in_future",
	[R_TARGET_MISMATCH] = "sandbox_mismatch",
	[R_RECEIVER_MISMATCH] = "receiver_sandbox_mismatch",
	[R_NO_RECORD] = "no_record",
	[R_GENERATION] = "generation_mismatch",
	[R_WORKER] = "worker_mismatch",
	[R_SUBSTRATE] = "substrate_mismatch",
	[R_RESIDENT] = "resident_mismatch",
	[R_NOT_SERVING] = "not_serving",
	[R_ACTIVATION] = "activation_mismatch",
	[R_ACCESS] = "access_denied",
	[R_PORT] = "port_mismatch",
	[R_PROTO] = "proto_mismatch",
};

const char *
admit_outcome_str(enum admit_outcome o)
{
	if ((unsigned)o >= sizeof(outcome_names) / sizeof(outcome_names[0]))
		return "unknown";
	return outcome_names[o];
}

const char *
admit_reason_str(enum admit_reason r)
{
	if ((unsigned)r >= R__COUNT || reason_names[r] == NULL)
		return "unknown";
	return reason_names[r];
}

struct admit_error
admit_error_code(struct admit_result res)
{
	struct admit_error e = { 403, "deny", NULL };

	switch (res.outcome) {
	case ADMIT_EXPIRED:
		e.code = "capability_expired";
		break;
	case ADMIT_REFRESH_ROUTE:
		e.code = "refresh_route";
		break;
	case ADMIT_DENY:
	case ADMIT_ALLOW:
	default:
		/* ALLOW never reaches an error path; if it did, the safe
		 * answer is a refusal */
		res.outcome = ADMIT_DENY;
		break;
	}
	e.status = admit_http_status(res.outcome);
	if (res.reason != R_NONE)
		e.reason = admit_reason_str(res.reason);
	return e;
}

int
admit_http_status(enum admit_outcome o)
{
	switch (o) {
	case ADMIT_ALLOW:
		return 200;
	case ADMIT_DENY:
		return 403;
	case ADMIT_EXPIRED:
		return 401;
	case ADMIT_REFRESH_ROUTE:
		return 409;
	}
	/* an outcome we do not know is never mapped to success */
	return 403;
}

static const char *const state_names[] = {
	[EXEC_PENDING] = "pending",
	[EXEC_STARTING] = "starting",
	[EXEC_SERVING] = "serving",
	[EXEC_RETIRING] = "retiring",
	[EXEC_RETIRED] = "retired",
	[EXEC_FAILED] = "failed",
	[EXEC_PAUSED] = "paused",
};
#define STATE_COUNT (sizeof(state_names) / sizeof(state_names[0]))

const char *
exec_state_str(enum exec_state s)
{
	if ((unsigned)s >= STATE_COUNT)
		return "unknown";
	return state_names[s];
}

int
exec_state_parse(const char *s, enum exec_state *out)
{
	if (s == NULL)
		return -EINVAL;
	for (unsigned i = 0; i < STATE_COUNT; i++)
		if (strcmp(s, state_names[i]) == 0) {
			*out = (enum exec_state)i;
			return 0;
		}
	return -EINVAL;
}
