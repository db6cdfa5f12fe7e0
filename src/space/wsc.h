/* The CLI's WebSocket client (wsc.c): RFC 6455 framing by wslay over a
 * plain TCP socket to a node-api endpoint, and the terminal side of a
 * stream (output to stdout/stderr, stdin and window sizes to the process).
 * Wire contract: docs/protocol.md section 2, "Streams". */
#ifndef SPACE_WSC_H
#define SPACE_WSC_H
#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

#include "wsclient.h"

/* the exit status of a stream whose execution was replaced (close 4409):
 * EX_TEMPFAIL, the operation may be tried again */
#define WSC_EXIT_REPLACED 75

struct wsc_io {
	bool forward_stdin;     /* send stdin (STDIN, then STDIN_EOF at its end) */
	bool tty;               /* stdin is a terminal in raw mode: send resizes on SIGWINCH */
	bool events_json;       /* watch events as JSON lines (else "event path") */
	/* after the first message: called with its "result" (may print) */
	void (*on_result)(const json_t *result, void *arg);
	void *arg;
	/* the worker does not serve streams yet (an older node-api: 404 no
	 * such route; an older guest: 400 op not served here): wsc_stream
	 * returns WSC_NOT_SERVED, silently, so the caller can do without */
	bool fallback_ok;
};
#define WSC_NOT_SERVED (-2)
/* Runs the stream until it ends. Returns the exit status space should exit
 * with: the process's (128+N for signal N, 124 for a timeout) after its
 * EXIT; 0 when a watch or an attach ends cleanly without one; 75
 * (WSC_EXIT_REPLACED) on close 4409 after saying so on stderr; 1 on any
 * other failure, after saying why. */
int wsc_run(struct wsc *w, const struct wsc_io *io, const char *verb);
#endif

/* One stream verb: opens path (after /v1/sandboxes/{sbx}/) through the
 * route cache with its repair rules (a 409 refresh_route at open: one
 * rebuilt attempt), then wsc_run. Returns the exit status. access: what
 * the capability must grant ("exec", "exec,pty", "watch"); start: the
 * stream starts something (never sent twice after a transport failure). */
struct space_client;
int wsc_stream(struct space_client *c, const char *verb, const char *sbx,
    const char *access, bool start, const char *path, const struct wsc_io *io);
