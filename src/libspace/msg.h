/* The payloads of the internal protocol, one struct per message and one
 * strict decoder and encoder each (docs/protocol.md section 1). Every hop
 * that reads a payload reads it here, so node-api, sbx-manager, spaced-host
 * and spaced-guest cannot disagree on what a message is.
 *
 * Every decoder: a JSON object (duplicate keys refused), exactly its keys
 * (no unknown key, none missing but the optional ones), each of its type,
 * every string and array bounded by src/libspace/limits.h, nothing after
 * the value (jansson refuses trailing bytes). A refusal returns -EINVAL
 * (or -EACCES, see msg_request_decode) with *why a static reason that is
 * safe to show the sender. Every encoder refuses what the decoder would
 * refuse, so a hop never sends what the next one drops. */
#ifndef SPACE_MSG_H
#define SPACE_MSG_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "admit.h"
#include "claims.h"
#include "guestmac.h"
#include "limits.h"
#include "netpolicy.h"
#include "proto.h"
#include "snapshot.h"

struct json_t;

/* ---- REQUEST: one operation ----
 * The same message on three hops; the form says which members it holds:
 *   MSG_FORM_TOKEN   node-api -> sbx-manager  {"op","sandbox","token","args"}
 *   MSG_FORM_CLAIMS  sbx-manager -> bridge    {"op","sandbox","claims","args"}
 *   MSG_FORM_GUEST   bridge -> guest          {"op","args"}
 * "claims" is the claims object itself (claims_decode's rules), never a
 * string holding it. "args" is an object whose members belong to the
 * operation: spaced-guest checks them (the only hop that acts on them). */
enum msg_form { MSG_FORM_TOKEN = 1, MSG_FORM_CLAIMS, MSG_FORM_GUEST };

struct msg_request {
	enum op_kind op;
	char sandbox[SPACE_ID_MAX + 1];         /* TOKEN, CLAIMS */
	char *token;                            /* TOKEN: malloc'd, a bearer secret */
	size_t token_len;
	struct capability claims;               /* CLAIMS */
	struct json_t *args;                    /* an object, owned */
};
/* 0; -EINVAL for a malformed REQUEST (400 bad_request); -EACCES when only
 * the claims are refused (403 deny bad_claims: claims we cannot read are
 * refused like a bad token) */
int msg_request_decode(const void *buf, size_t len, enum msg_form form,
    struct msg_request *out, const char **why);
/* *out malloc'd, NUL-terminated, *out_len its length (at most
 * SPACE_FRAME_OP_MAX: -EMSGSIZE beyond); -EINVAL for a field the decoder
 * would refuse. The encoding of a TOKEN form holds the bearer: the caller
 * wipes it (msg_wipe_free). */
int msg_request_encode(const struct msg_request *m, enum msg_form form,
    char **out, size_t *out_len);
/* wipes the token, drops args */
void msg_request_free(struct msg_request *m);

/* whether v nests arrays and objects at most max deep (v itself is 1):
 * what every hop that encodes args again recurses through, so bounded
 * before any does (a thread's stack ends at a few hundred levels) */
bool msg_json_depth_ok(const json_t *v, unsigned max);
/* the ACC_* bits the request needs, all of them: op_access(), plus ACC_PTY
 * for a proc.start whose args hold a "pty" that is not null. Every hop that
 * admits a request asks this, not op_access(). */
uint32_t msg_request_access(const struct msg_request *m);
/* true when the operation turns into a stream after its RESPONSE:
 * proc.attach, fs.watch, and proc.start unless its args say
 * "attach":false (the guest refuses an "attach" that is not a boolean, so
 * no stream follows such a request either way) */
bool msg_request_streams(const struct msg_request *m);

/* ---- RESPONSE: the answer of a successful operation ----
 *   MSG_FORM_GUEST   guest -> bridge          {"status":200,"result":{...}}
 *   MSG_FORM_CLAIMS  bridge -> sbx-manager -> node-api
 *                                             {"status":200,"serving":{identity},"result":{...}}
 * (the served form; MSG_FORM_TOKEN is not a RESPONSE form). "serving" names
 * the execution that answered; "result" is the operation's. */
struct msg_response {
	struct route_identity serving;          /* served form only */
	struct json_t *result;                  /* an object, owned */
};
int msg_response_decode(const void *buf, size_t len, enum msg_form form,
    struct msg_response *out, const char **why);
int msg_response_encode(const struct msg_response *m, enum msg_form form,
    char **out, size_t *out_len);
void msg_response_free(struct msg_response *m);

/* ---- ERROR: ends an operation ----
 * {"status":400..599,"error":code,"reason"?:code,"message"?:text,"serving"?:{identity}}
 * code and reason: [a-z0-9_]{1,SPACE_ERROR_CODE_MAX}; message: at most
 * SPACE_ERROR_MESSAGE_MAX bytes, no NUL. "serving" is only ever added by
 * sbx-manager to an answer of an execution (allow_serving); below it an
 * ERROR carrying one is refused. */
struct msg_error {
	int status;
	char error[SPACE_ERROR_CODE_MAX + 1];
	char reason[SPACE_ERROR_CODE_MAX + 1];          /* "" = absent */
	bool has_message;
	char message[SPACE_ERROR_MESSAGE_MAX + 1];
	bool has_serving;
	struct route_identity serving;
};
int msg_error_decode(const void *buf, size_t len, bool allow_serving,
    struct msg_error *out, const char **why);
/* *out malloc'd; at most SPACE_FRAME_JSON_MAX */
int msg_error_encode(const struct msg_error *m, char **out, size_t *out_len);
/* an ERROR frame; reason and message may be NULL (then left out). A message
 * longer than SPACE_ERROR_MESSAGE_MAX is cut (at a UTF-8 boundary). */
int frame_write_error(int fd, int status, const char *code, const char *reason,
    const char *message);

/* the ERROR of a refusal by the comparator (admit_error_code) */
int frame_write_refusal(int fd, struct admit_result res);

/* ---- CHALLENGE and CHALLENGE_REPLY: the guest proves its activation ----
 * CHALLENGE {"nonce":b64url(32 bytes)}
 * CHALLENGE_REPLY {"sandbox","generation":1..2^63-1,"activation":1..2^32-1,
 *                  "mac":b64url(32 bytes)} */
struct msg_challenge {
	uint8_t nonce[GUEST_NONCE_LEN];
};
int msg_challenge_decode(const void *buf, size_t len, struct msg_challenge *out,
    const char **why);
int msg_challenge_encode(const struct msg_challenge *m, char **out, size_t *out_len);

struct msg_challenge_reply {
	char sandbox[SPACE_ID_MAX + 1];
	uint64_t generation;
	uint32_t activation;
	uint8_t mac[GUEST_MAC_LEN];
};
int msg_challenge_reply_decode(const void *buf, size_t len,
    struct msg_challenge_reply *out, const char **why);
int msg_challenge_reply_encode(const struct msg_challenge_reply *m, char **out,
    size_t *out_len);

/* ---- worker assignments (space-control -> sbx-manager) ----
 * The long-poll answer {"revision":n,"assignments":[a...]} (at most
 * SPACE_ASSIGNMENTS_MAX), each
 *   {"revision":n,"action":"install"|"retire"|"snapshot","identity":{identity},"spec":{...}}
 * with the spec of its action:
 *   install   {"template"?:id,"resources"?:{"memory_mb"?,"pids"?,"cpu_percent"?,"disk_mb"?},
 *              "snapshot"?:digest|null}
 *   retire    {"snapshot"?:bool}
 *   snapshot  {"snapshot_id":id,"name"?:id|null}
 * An answer whose envelope is malformed is refused whole; one malformed
 * assignment inside a good answer is kept as ASSIGN_INVALID (with its
 * revision when that much was readable) so that the worker skips it and
 * moves past it, as the control plane will not send it differently. */
/* network: a new egress policy and/or declared port list for a serving
 * execution (docs/network.md): spec {"network"?:policy,"ports"?:[N...]},
 * at least one */
enum assign_action { ASSIGN_INVALID = 0, ASSIGN_INSTALL, ASSIGN_RETIRE, ASSIGN_SNAPSHOT,
	ASSIGN_NETWORK };

struct msg_assignment {
	uint64_t revision;                      /* 0: none readable (INVALID only) */
	enum assign_action action;
	const char *invalid;                    /* INVALID: why (static) */
	struct route_identity id;
	/* install: 0 = not given (the worker's default applies) */
	char template_name[SPACE_ID_MAX + 1];   /* "" = not given */
	uint32_t memory_mb, pids, cpu_percent, disk_mb;
	char snapshot[SNAPSHOT_DIGEST_HEX + 1]; /* "" = none */
	/* install (optional: the worker's default policy) and network */
	bool has_network;
	struct netpolicy network;
	/* install and network (optional): the sandbox's declared service
	 * ports, strictly ascending, "ports":[N,...] (docs/network.md) */
	bool has_ports;
	uint8_t nports;
	uint16_t ports[SPACE_PORTS_MAX];
	/* retire */
	bool want_snapshot;
	/* snapshot */
	char snapshot_id[SPACE_ID_MAX + 1];
	char name[SPACE_ID_MAX + 1];            /* "" = none */
};

struct msg_assignments {
	uint64_t revision;
	size_t n;
	struct msg_assignment *a;               /* n entries, malloc'd */
};
int msg_assignments_decode(const void *buf, size_t len, struct msg_assignments *out,
    const char **why);
int msg_assignments_encode(const struct msg_assignments *m, char **out, size_t *out_len);
void msg_assignments_free(struct msg_assignments *m);

/* One decoded assignment in a fixed-size binary form, for the hand-off
 * between two processes of one worker (the unprivileged control client to
 * the privileged parent): big-endian integers and NUL-padded fixed fields,
 * so the receiver parses no JSON. The decoder takes exactly
 * MSG_ASSIGNMENT_WIRE_LEN bytes, checks the version byte, the zero padding
 * after every string's NUL, each field as msg_assignments_decode does, and
 * that no field of another action is set. */
#define MSG_ASSIGNMENT_WIRE_VERSION 2
#define MSG_ASSIGNMENT_WIRE_LEN 2048
int msg_assignment_pack(const struct msg_assignment *a, uint8_t out[MSG_ASSIGNMENT_WIRE_LEN]);
int msg_assignment_unpack(const uint8_t *buf, size_t len, struct msg_assignment *out,
    const char **why);

/* A network assignment (a policy, declared ports, or both: each whole)
 * queued behind another for the same execution: next folded into into,
 * each of its parts replacing into's, so that the worker applies the
 * latest of each once, however many came (a tenant changing its policy
 * in a loop queues one job, not thousands). true when folded; false, and
 * into unchanged, when either is not a network assignment or they are
 * for different executions. into keeps its revision. */
bool msg_assignment_fold(struct msg_assignment *into, const struct msg_assignment *next);

/* free an encoding that held a secret */
void msg_wipe_free(char *s);

/* for the codecs (msg.c, msg_assign.c): a JSON string that is an id
 * ([A-Za-z0-9_-]{1,cap-1}) copied into dst; false for anything else */
bool msg_take_id(const struct json_t *v, char *dst, size_t cap);
#endif
