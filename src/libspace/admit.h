/* The comparator: one function, four outcomes (DESIGN section 4).
 * Every receiver (sbx-manager, spaced-host, netgtw) calls admit_token()
 * (verifier.h) or admit(); there is no second copy of these checks
 * anywhere. */
#ifndef SPACE_ADMIT_H
#define SPACE_ADMIT_H
#include <stdbool.h>
#include <stdint.h>
#include "claims.h"

enum admit_outcome {
	ADMIT_ALLOW = 0,
	ADMIT_DENY,
	ADMIT_EXPIRED,
	ADMIT_REFRESH_ROUTE,
};

/* one reason per rule; the string form (admit_reason_str) is what
 * HTTP bodies, metrics and audit logs carry */
enum admit_reason {
	/* not R_OK: <unistd.h> defines R_OK (4) for access(), which would
	 * silently turn "no reason" into R_BAD_CLAIMS */
	R_NONE = 0,
	/* step 1: DENY */
	R_MALFORMED,            /* "malformed_token" */
	R_UNKNOWN_KID,          /* "unknown_kid" */
	R_BAD_SIGNATURE,        /* "bad_signature" */
	R_BAD_CLAIMS,           /* "bad_claims": unknown/duplicate/mistyped claim */
	R_WRONG_PURPOSE,        /* "wrong_purpose" */
	R_WRONG_AUDIENCE,       /* "wrong_audience" */
	R_BAD_PROFILE,          /* "invalid_port_profile" */
	/* step 2: EXPIRED */
	R_EXPIRED,              /* "expired" */
	R_NOT_YET_VALID,        /* "issued_in_future" */
	/* step 3: DENY */
	R_TARGET_MISMATCH,      /* "sandbox_mismatch": URL names another sandbox */
	R_RECEIVER_MISMATCH,    /* "receiver_sandbox_mismatch" */
	/* step 4-6: REFRESH_ROUTE */
	R_NO_RECORD,            /* "no_record" */
	R_GENERATION,           /* "generation_mismatch" */
	R_WORKER,               /* "worker_mismatch" */
	R_SUBSTRATE,            /* "substrate_mismatch" */
	R_RESIDENT,             /* "resident_mismatch" */
	R_NOT_SERVING,          /* "not_serving" */
	R_ACTIVATION,           /* "activation_mismatch" */
	/* step 7: DENY */
	R_ACCESS,               /* "access_denied" */
	R_PORT,                 /* "port_mismatch" */
	R_PROTO,                /* "proto_mismatch" */
	R__COUNT
};

enum receiver_kind {
	RECV_SBX_MANAGER = 1,   /* multi-sandbox: audience node-api, purpose control */
	RECV_BRIDGE,            /* per-sandbox: audience node-api, purpose control */
	RECV_NETGTW,            /* per-sandbox: audience netgtw, purpose service */
};

enum exec_state {
	EXEC_PENDING = 0, EXEC_STARTING, EXEC_SERVING, EXEC_RETIRING,
	EXEC_RETIRED, EXEC_FAILED, EXEC_PAUSED,
};

/* what a receiver holds for one sandbox (its durable runtime record) */
struct runtime_record {
	struct route_identity id;
	enum exec_state state;
	uint64_t epoch;         /* bumped by every replacement; cancels leases */
};

struct admit_request {
	enum receiver_kind kind;
	const char *target_sandbox;     /* sandbox named by the request (URL) */
	const char *receiver_sandbox;   /* the sandbox a per-sandbox receiver serves; NULL for sbx-manager */
	uint32_t need_access;           /* ACC_* bit the operation needs (control) */
	uint16_t port;                  /* service: requested port and protocol */
	enum cap_proto proto;
	bool established_stream;        /* netgtw: an open stream, activation change tolerated */
	int64_t now;                    /* unix seconds */
};

struct admit_result {
	enum admit_outcome outcome;
	enum admit_reason reason;
};

/* The claim checks of step 1 that need no signature: audience and purpose
 * for the receiver kind, and the port profile (service: port 1..65535,
 * proto http|tcp; control: no port, non-empty acc). verifier_check() runs it
 * on every call (hit or miss) and admit() runs it first again, because the
 * bridge calls admit() on claims forwarded by sbx-manager. */
struct admit_result admit_profile(const struct capability *cap, enum receiver_kind kind);

/* Steps 2-8 on an already verified capability (step 1 is verification,
 * see verifier.h). rec is NULL when the receiver has no record. */
struct admit_result admit(const struct capability *cap,
    const struct runtime_record *rec, const struct admit_request *req);

/* Steps 1-8 on a token, admit_token(), are in verifier.h: step 1 is the
 * verifier's, and the verifier itself runs admit_profile(). */

const char *admit_outcome_str(enum admit_outcome o);   /* "allow" "deny" "expired" "refresh_route" */
const char *admit_reason_str(enum admit_reason r);
int admit_http_status(enum admit_outcome o);           /* 200 403 401 409 */

/* How a refusal is told to the sender, the same at every hop (node-api,
 * sbx-manager, spaced-host): the HTTP status, the error code and the
 * reason. deny -> 403 "deny", expired -> 401 "capability_expired",
 * refresh_route -> 409 "refresh_route"; an outcome we do not know, or
 * ALLOW asked for as an error, is a 403 "deny": never success, never a
 * code the client would retry. reason is NULL for R_NONE. */
struct admit_error {
	int status;
	const char *code;
	const char *reason;
};
struct admit_error admit_error_code(struct admit_result res);
const char *exec_state_str(enum exec_state s);
int exec_state_parse(const char *s, enum exec_state *out);
#endif
