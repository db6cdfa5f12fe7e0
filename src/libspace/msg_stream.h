/* The payload of a MSG_STREAM frame: one typed message of a live stream
 * (a process's output and input, a terminal's size, a watch's events),
 * docs/protocol.md section 1 "Streams". One strict decoder and one encoder;
 * every hop (spaced-guest, spaced-host, sbx-manager, node-api, the CLI) and
 * the WebSocket edge (one binary WebSocket message = one such payload) read
 * them with this code only.
 *
 * Payload = u8 kind, then the kind's fixed fields (big-endian), then its
 * bytes; at most SPACE_STREAM_PAYLOAD_MAX in all:
 *
 *   kind             dir   fields                          then
 *   1 STDOUT         out   -                               1.. bytes of output
 *   2 STDERR         out   -                               1.. bytes of output
 *   3 PTY            out   -                               1.. bytes from the terminal
 *   4 STDIN          in    -                               1.. bytes of input
 *   5 STDIN_EOF      in    -                               nothing
 *   6 RESIZE         in    u16 rows, u16 cols (1..SPACE_PTY_DIM_MAX)   nothing
 *   7 SIGNAL         in    u8 signo (1..SPACE_SIGNO_MAX)   nothing
 *   8 EXIT           out   u8 flags (bit0 timed_out, bit1 oom_killed, others 0),
 *                          u8 signal (0: exited), u8 exit_code (0 if signal)   nothing
 *   9 EVENT          out   u8 type (STREAM_EV_*), u8 flags (bit0 is_dir, others 0),
 *                          u16 path_len, path, u16 to_len, to
 *                          path: absolute, no NUL, 1..SPACE_PATH_MAX bytes
 *                          (empty for OVERFLOW); to: only for RENAME (same
 *                          rules), empty otherwise           nothing
 *
 * "out" goes from the process (guest) to the client, "in" from the client
 * to the process; the decoder takes the direction it reads and refuses a
 * kind of the other one. Anything else (an unknown kind, a short or long
 * field, a flag bit not defined, an empty data kind, bytes after a
 * fixed-size kind) is refused with a static reason. */
#ifndef SPACE_MSG_STREAM_H
#define SPACE_MSG_STREAM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "limits.h"

enum stream_kind {
	STREAM_STDOUT = 1,
	STREAM_STDERR,
	STREAM_PTY,
	STREAM_STDIN,
	STREAM_STDIN_EOF,
	STREAM_RESIZE,
	STREAM_SIGNAL,
	STREAM_EXIT,
	STREAM_EVENT,
	STREAM__MAX
};

enum stream_dir {
	STREAM_OUT = 1,         /* process/guest -> client */
	STREAM_IN,              /* client -> process/guest */
};

enum stream_event {
	STREAM_EV_CREATE = 1,   /* IN_CREATE, IN_MOVED_TO without its pair */
	STREAM_EV_WRITE,        /* IN_CLOSE_WRITE or IN_MODIFY */
	STREAM_EV_REMOVE,       /* IN_DELETE, IN_MOVED_FROM without its pair */
	STREAM_EV_RENAME,       /* IN_MOVED_FROM + IN_MOVED_TO: path -> to */
	STREAM_EV_CHMOD,        /* IN_ATTRIB */
	STREAM_EV_OVERFLOW,     /* events were lost (a queue was full); no path */
	STREAM_EV__MAX
};

#define STREAM_EXIT_TIMED_OUT  0x01
#define STREAM_EXIT_OOM_KILLED 0x02
#define STREAM_EVENT_IS_DIR    0x01

struct msg_stream {
	enum stream_kind kind;
	/* STDOUT, STDERR, PTY, STDIN: points into the decoded buffer (or the
	 * caller's bytes when encoding); 1..SPACE_STREAM_DATA_MAX */
	const uint8_t *data;
	size_t len;
	uint16_t rows, cols;                    /* RESIZE */
	uint8_t signo;                          /* SIGNAL */
	struct {
		bool timed_out, oom_killed;
		uint8_t signal;                 /* 0: exited with exit_code */
		uint8_t exit_code;
	} exit;                                 /* EXIT */
	struct {
		enum stream_event type;
		bool is_dir;
		char path[SPACE_PATH_MAX + 1];  /* "" for OVERFLOW */
		char to[SPACE_PATH_MAX + 1];    /* RENAME only, else "" */
	} event;                                /* EVENT */
};

/* 0, or -EINVAL with *why a static reason safe to show the sender.
 * out->data points into buf: keep buf while using it. */
int msg_stream_decode(const void *buf, size_t len, enum stream_dir dir,
    struct msg_stream *out, const char **why);
/* writes at most cap bytes to out (SPACE_STREAM_PAYLOAD_MAX always
 * suffices); 0 and *out_len, or -EINVAL for what the decoder would refuse
 * (-EMSGSIZE when cap is too small) */
int msg_stream_encode(const struct msg_stream *m, uint8_t *out, size_t cap,
    size_t *out_len);
/* the direction a kind travels in; 0 for an unknown kind */
enum stream_dir stream_kind_dir(enum stream_kind k);
const char *stream_kind_str(enum stream_kind k);   /* "stdout", ...; NULL if unknown */
const char *stream_event_str(enum stream_event e); /* "create", ...; NULL if unknown */

/* one MSG_STREAM frame on a blocking socket: encode and write */
int frame_write_stream(int fd, const struct msg_stream *m);
/* a data kind (STDOUT, STDERR, PTY, STDIN) of len bytes, split into as many
 * frames as SPACE_STREAM_DATA_MAX needs */
int frame_write_stream_data(int fd, enum stream_kind kind, const void *data,
    size_t len);
#endif
