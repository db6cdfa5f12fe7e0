/* The internal protocol between node-api, sbx-manager, spaced-host and
 * spaced-guest: framed, typed, versioned, bounded. The one header with the
 * message-type enum. Wire details: docs/protocol.md.
 *
 * Frame = 12-byte header, big-endian:
 *   u16 magic 0x5350 ("SP") | u8 version | u8 zero | u16 type | u16 zero | u32 len
 * followed by len payload bytes. Decoding rejects a bad magic, a version we
 * do not speak, a non-zero reserved field, an unknown type, and a length over
 * the type's limit (REQUEST, RESPONSE: SPACE_FRAME_OP_MAX; other JSON types:
 * SPACE_FRAME_JSON_MAX; DATA: SPACE_FRAME_MAX; STREAM: SPACE_STREAM_PAYLOAD_MAX).
 * An invalid frame closes the connection. */
#ifndef SPACE_PROTO_H
#define SPACE_PROTO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROTO_MAGIC         0x5350
#define PROTO_VERSION       1       /* the highest version this build speaks */
#define PROTO_VERSION_MIN   1
#define FRAME_HDR_LEN       12

enum msg_type {
	MSG_HELLO = 1,          /* JSON {"role","min","max"}; answered by HELLO {"role","version"} */
	MSG_REQUEST,            /* JSON: an operation (docs/protocol.md) */
	MSG_RESPONSE,           /* JSON: {"status":200,"serving":{identity},"result":{...}} */
	MSG_DATA,               /* raw bytes: one chunk of a file body */
	MSG_END,                /* empty: end of a data stream */
	MSG_ERROR,              /* JSON {"status","error","reason"?,"message"?}; ends the operation */
	MSG_CHALLENGE,          /* bridge -> guest: JSON {"nonce"} */
	MSG_CHALLENGE_REPLY,    /* guest -> bridge: JSON {"sandbox","generation","activation","mac"} */
	MSG_CANCEL,             /* JSON {"reason"}: the lease of this stream was cancelled (4409) */
	MSG_OPEN,               /* bridge -> guest on the control channel: carries a new
	                           operation socket as SCM_RIGHTS; payload JSON {"op_id"} */
	MSG_STREAM,             /* binary: one typed message of a live stream (msg_stream.h),
	                           both ways after the RESPONSE of a streaming operation */
	MSG__MAX
};

enum proto_role { ROLE_NODE_API = 1, ROLE_SBX_MANAGER, ROLE_SPACED_HOST, ROLE_SPACED_GUEST };

struct frame {
	uint16_t type;
	uint8_t  version;
	uint32_t len;
	uint8_t *payload;       /* malloc'd, len bytes + a NUL (not counted) */
};

/* header codec (pure, fuzzable) */
void frame_hdr_encode(uint8_t out[FRAME_HDR_LEN], uint16_t type, uint32_t len);
/* 0, or -EPROTO (magic/version/reserved/type) / -EMSGSIZE (length) */
int frame_hdr_decode(const uint8_t in[FRAME_HDR_LEN], uint16_t *type, uint32_t *len);
/* decode one whole frame from a buffer; *used = bytes consumed;
 * -EAGAIN when buf holds less than a frame */
int frame_decode(const uint8_t *buf, size_t n, struct frame *f, size_t *used);
size_t frame_max_len(uint16_t type);
const char *msg_type_str(uint16_t type);

/* blocking I/O on a stream socket; EINTR handled, short reads completed.
 * frame_read: 0, -ECONNRESET on EOF at a frame boundary, -EPROTO/-EMSGSIZE
 * on a bad frame, -errno on I/O errors. */
int frame_write(int fd, uint16_t type, const void *payload, size_t len);
int frame_write_json(int fd, uint16_t type, const char *json);
/* payloads (and frame_write_error) are msg.h's */
int frame_read(int fd, struct frame *f);
void frame_free(struct frame *f);

/* version handshake: the connecting side sends HELLO, the accepting side
 * answers with the chosen version or an ERROR; both return the version or
 * -EPROTO. */
int proto_hello_client(int fd, enum proto_role me, enum proto_role *peer);
int proto_hello_server(int fd, enum proto_role me, enum proto_role *peer);
const char *proto_role_str(enum proto_role r);

/* SCM_RIGHTS helpers for MSG_OPEN */
int frame_write_fd(int fd, uint16_t type, const void *payload, size_t len, int pass_fd);
int frame_read_fd(int fd, struct frame *f, int *got_fd);   /* *got_fd -1 if none */

/* operations and the access each needs (docs/protocol.md section 1).
 * Streaming operations (proc.start with "attach" not false, proc.attach,
 * fs.watch: msg_request_streams()) carry MSG_STREAM frames after their
 * RESPONSE; a proc.start with a "pty" needs ACC_PTY too
 * (msg_request_access()). */
enum op_kind {
	OP_EXEC = 1, OP_FS_READ, OP_FS_WRITE, OP_FS_LIST, OP_FS_STAT,
	OP_FS_MKDIR, OP_FS_REMOVE, OP_FS_RENAME,
	OP_PROC_START, OP_PROC_ATTACH, OP_PROC_LIST, OP_PROC_SIGNAL,
	OP_PROC_STDIN, OP_PROC_RESIZE, OP_FS_WATCH,
	OP__MAX
};
int op_parse(const char *name, enum op_kind *op);      /* "exec", "fs.read", ... */
const char *op_name(enum op_kind op);
uint32_t op_access(enum op_kind op);                   /* ACC_* bit */
/* The operations whose frames end with the guest's answer (REQUEST in;
 * RESPONSE, DATA* END for fs.read, or ERROR out): the file operations and
 * exec (never a stream). Once one ends cleanly nothing of it is left on
 * its channel, so the bridge keeps that channel idle and the guest's
 * child serves the next operation on it. fs.write is not among them: an
 * early ERROR leaves upload frames in flight. */
bool op_reusable(enum op_kind op);
#endif
