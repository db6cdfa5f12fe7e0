/* The JSON text form of a MSG_STREAM payload, for WebSocket clients that
 * would rather not build binary messages (docs/protocol.md section 2,
 * "Streams"). It maps one to one onto msg_stream.h, which stays the only
 * definition of what a stream message is: a text message is decoded here
 * into a struct msg_stream, then encoded by msg_stream_encode (which
 * refuses what its decoder would), so both forms reach the backend as the
 * same bytes.
 *
 *   {"type":"stdin","data":"text"}         or "data_b64": standard base64
 *   {"type":"stdin_eof"}
 *   {"type":"resize","rows":24,"cols":80}
 *   {"type":"signal","signo":15}
 * and, server to client (subprotocol space.v1.json):
 *   {"type":"stdout"|"stderr"|"pty","data":"..."} ("data_b64" when the
 *      bytes are not UTF-8 or hold a NUL)
 *   {"type":"exit","exit_code":0,"signal":0,"timed_out":false,"oom_killed":false}
 *   {"type":"event","event":"create","path":"/p","to":"/q","is_dir":false}
 *      ("to" only for rename; "path_b64"/"to_b64" for a name that is
 *      not UTF-8)
 *
 * The decoder takes exactly the members of its type (duplicate keys,
 * unknown or missing members refused), at most SPACE_STREAM_PAYLOAD_MAX*2
 * bytes of text. */
#ifndef SPACE_STREAM_JSON_H
#define SPACE_STREAM_JSON_H
#include <stddef.h>
#include <stdint.h>

#include "msg_stream.h"

/* a client's text message (the "in" direction) into one MSG_STREAM
 * payload: 0 with out[0..*out_len) (cap SPACE_STREAM_PAYLOAD_MAX
 * suffices), or -EINVAL with *why */
int stream_json_to_payload(const char *text, size_t len, uint8_t *out, size_t cap,
    size_t *out_len, const char **why);
/* a decoded message (the "out" direction) as JSON text, malloc'd; NULL on
 * ENOMEM */
char *stream_json_of(const struct msg_stream *m);
#endif
