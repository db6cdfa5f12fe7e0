/* Checks of the HTTP request head that both HTTP daemons (space-control,
 * node-api) make before routing, on what libmicrohttpd hands them. Pure
 * functions, no libmicrohttpd types. */
#ifndef SPACE_HTTPEDGE_H
#define SPACE_HTTPEDGE_H
#include <stdbool.h>

/* false when the raw request target (path and query, as received) holds a
 * control byte (0x00-0x1f, 0x7f), raw or percent-encoded: decoded, a NUL
 * would cut a path short and the rest would name another file */
bool http_target_clean(const char *raw);

/* message framing headers of one request, counted by header name */
struct http_framing {
	unsigned content_length;
	unsigned transfer_encoding;
};
void http_framing_count(struct http_framing *f, const char *header_name);
/* false when the body's length is ambiguous: Content-Length together with
 * Transfer-Encoding, or Content-Length twice. Such a request is answered
 * 400 and the connection closed (RFC 9112 section 6.3): a peer that framed
 * it differently would see the rest as another request (smuggling). */
bool http_framing_ok(const struct http_framing *f);
#endif
