/* A strict decoder of one HTTP/1.1 request head, as space-edge reads it
 * from the public (docs/network.md, "space-edge"), and of the Host names
 * of the public entry ({port}-{sandbox}.{domain}).
 *
 * The head is the bytes up to and including the first CRLF CRLF; the
 * caller bounds it (REQHEAD_MAX). Refused, with a static reason: a bare LF
 * or CR, a request line that is not `METHOD SP origin-form SP HTTP/1.x`
 * (or `OPTIONS *`), a header name outside the token characters, a control
 * character in a value, obs-fold, more than REQHEAD_HEADERS_MAX fields,
 * no Host or two, Content-Length not all digits or given twice, a
 * Transfer-Encoding other than exactly "chunked", both framings at once
 * (RFC 9112 section 6.3: a peer that framed it differently would see the
 * rest as another request). Nothing is copied: fields point into buf. */
#ifndef SPACE_REQHEAD_H
#define SPACE_REQHEAD_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "limits.h"

#define REQHEAD_MAX             16384   /* bytes of a request head */
#define REQHEAD_HEADERS_MAX     100
#define REQHEAD_METHOD_MAX      16

struct reqhead_field {
	const char *name, *value;       /* into buf, not NUL-terminated */
	size_t name_len, value_len;     /* value without surrounding blanks */
	size_t line_off, line_len;      /* the whole line, its CRLF included */
};

struct reqhead {
	const char *method, *target;
	size_t method_len, target_len;
	int minor;                      /* HTTP/1.minor: 0 or 1 */
	size_t line_len;                /* the request line, CRLF included */
	struct reqhead_field f[REQHEAD_HEADERS_MAX];
	size_t nf;
	int host;                       /* index of the Host field */
	int64_t content_length;         /* -1: none */
	bool chunked;
	bool upgrade;                   /* an Upgrade field and "upgrade" in Connection */
	bool close;                     /* "close" in Connection, or HTTP/1.0 without keep-alive */
};

/* buf[0..len) is one head ending in CRLF CRLF. 0, or -EINVAL with *why. */
int reqhead_parse(const char *buf, size_t len, struct reqhead *h, const char **why);

/* where the head ends in buf[0..len): the length up to and including the
 * first CRLF CRLF, or 0 when it has not arrived */
size_t reqhead_end(const char *buf, size_t len);

/* true when field i is named name (ASCII case-insensitive) */
bool reqhead_is(const struct reqhead *h, size_t i, const char *name);

/* A chunked request body (RFC 9112 section 7.1) as it passes through:
 * chunkscan() says how many of the bytes given belong to the body, so the
 * next request head is found after it. Strict: hex sizes (at most 2^56),
 * extensions and trailer lines bounded (CHUNKSCAN_LINE_MAX), CRLF only. */
#define CHUNKSCAN_LINE_MAX      1024

enum chunkscan_st { CH_SIZE, CH_EXT, CH_SIZE_LF, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER,
    CH_TRAILER_LF };

struct chunkscan {
	enum chunkscan_st st;
	uint64_t left;                  /* bytes of the current chunk still to come */
	size_t line;                    /* length of the extension or trailer line */
	bool digits, last;
};

void chunkscan_init(struct chunkscan *c);
/* How many of p[0..n) belong to the body (all of them until its end);
 * *done when its end was among them; -1 on a malformed body */
ssize_t chunkscan(struct chunkscan *c, const char *p, size_t n, bool *done);

/* A Host value of the public entry: "{port}-{sandbox}.{domain}" with
 * port 1..65535 in decimal without leading zeros, sandbox an id
 * ([A-Za-z0-9_-]{1,SPACE_ID_MAX}, case kept) and domain equal to the
 * configured one (ASCII case-insensitive, its ":PORT" included when it
 * has one). 1 and *port / sandbox; 0 when the value is exactly the domain
 * (the edge itself); -EINVAL anything else. */
int edgehost_parse(const char *host, size_t len, const char *domain, uint16_t *port,
    char sandbox[SPACE_ID_MAX + 1]);
#endif
