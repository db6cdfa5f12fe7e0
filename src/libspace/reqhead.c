/* The strict request-head decoder of space-edge (reqhead.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "reqhead.h"
#include "util.h"

/* RFC 9110 tchar */
static bool
tchar(unsigned char c)
{
	if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
		return true;
	return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static bool
ieq(const char *a, size_t alen, const char *b)
{
	return alen == strlen(b) && strncasecmp(a, b, alen) == 0;
}

size_t
reqhead_end(const char *buf, size_t len)
{
	size_t i;

	for (i = 3; i < len; i++)
		if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
			return i + 1;
	return 0;
}

bool
reqhead_is(const struct reqhead *h, size_t i, const char *name)
{
	return i < h->nf && ieq(h->f[i].name, h->f[i].name_len, name);
}

/* the comma-separated tokens of a Connection value: sets close / upgrade
 * / keep-alive when one of them is named */
static void
connection_tokens(const char *v, size_t n, bool *close, bool *upgrade, bool *keep)
{
	size_t i = 0, s, e;

	while (i < n) {
		while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
			i++;
		s = i;
		while (i < n && v[i] != ',')
			i++;
		e = i;
		while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t'))
			e--;
		if (ieq(v + s, e - s, "close"))
			*close = true;
		else if (ieq(v + s, e - s, "upgrade"))
			*upgrade = true;
		else if (ieq(v + s, e - s, "keep-alive"))
			*keep = true;
	}
}

static int
request_line(const char *buf, size_t n, struct reqhead *h, const char **why)
{
	size_t i = 0, s;

	while (i < n && tchar((unsigned char)buf[i]))
		i++;
	if (i == 0 || i >= REQHEAD_METHOD_MAX || i >= n || buf[i] != ' ') {
		*why = "bad method";
		return -EINVAL;
	}
	h->method = buf;
	h->method_len = i;
	s = ++i;
	/* origin-form: printable ASCII, no blank; absolute-form (a proxy
	 * request) and authority-form (CONNECT) are not served */
	while (i < n && (unsigned char)buf[i] > 0x20 && (unsigned char)buf[i] < 0x7f)
		i++;
	if (i == s || i >= n || buf[i] != ' ') {
		*why = "bad request target";
		return -EINVAL;
	}
	h->target = buf + s;
	h->target_len = i - s;
	if (h->target[0] != '/' && !(h->target_len == 1 && h->target[0] == '*' &&
	    ieq(h->method, h->method_len, "OPTIONS"))) {
		*why = "the request target must be a path";
		return -EINVAL;
	}
	i++;
	if (n - i != 8 || memcmp(buf + i, "HTTP/1.", 7) != 0 || (buf[i + 7] != '0' && buf[i + 7] != '1')) {
		*why = "not HTTP/1.0 or HTTP/1.1";
		return -EINVAL;
	}
	h->minor = buf[i + 7] - '0';
	return 0;
}

static int
content_length(const char *v, size_t n, int64_t *out, const char **why)
{
	int64_t x = 0;
	size_t i;

	if (n == 0 || n > 15) {
		*why = "bad Content-Length";
		return -EINVAL;
	}
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9') {
			*why = "bad Content-Length";
			return -EINVAL;
		}
		x = x * 10 + (v[i] - '0');
	}
	*out = x;
	return 0;
}

int
reqhead_parse(const char *buf, size_t len, struct reqhead *h, const char **why)
{
	size_t pos, eol, i;
	bool keep = false, upgrade_field = false, conn_upgrade = false, te = false;
	int rc;

	memset(h, 0, sizeof(*h));
	h->host = -1;
	h->content_length = -1;
	*why = "bad head";
	if (len < 4 || len > REQHEAD_MAX || memcmp(buf + len - 4, "\r\n\r\n", 4) != 0) {
		*why = "the head does not end in an empty line";
		return -EINVAL;
	}
	/* every CR is followed by LF, every LF preceded by CR, no NUL */
	for (i = 0; i < len; i++) {
		if (buf[i] == '\0') {
			*why = "NUL in the head";
			return -EINVAL;
		}
		if ((buf[i] == '\r' && (i + 1 >= len || buf[i + 1] != '\n')) ||
		    (buf[i] == '\n' && (i == 0 || buf[i - 1] != '\r'))) {
			*why = "bare CR or LF";
			return -EINVAL;
		}
	}
	eol = (size_t)((const char *)memchr(buf, '\r', len) - buf);
	if ((rc = request_line(buf, eol, h, why)) < 0)
		return rc;
	h->line_len = eol + 2;
	pos = eol + 2;
	while (pos < len - 2) {
		struct reqhead_field *f;
		size_t s, e, c;

		eol = (size_t)((const char *)memchr(buf + pos, '\r', len - pos) - buf);
		if (buf[pos] == ' ' || buf[pos] == '\t') {
			*why = "obsolete line folding";
			return -EINVAL;
		}
		if (h->nf == REQHEAD_HEADERS_MAX) {
			*why = "too many header fields";
			return -EINVAL;
		}
		f = &h->f[h->nf];
		for (c = pos; c < eol && tchar((unsigned char)buf[c]); c++)
			;
		if (c == pos || c == eol || buf[c] != ':') {
			*why = "bad header field name";
			return -EINVAL;
		}
		f->name = buf + pos;
		f->name_len = c - pos;
		s = c + 1;
		e = eol;
		while (s < e && (buf[s] == ' ' || buf[s] == '\t'))
			s++;
		while (e > s && (buf[e - 1] == ' ' || buf[e - 1] == '\t'))
			e--;
		for (c = s; c < e; c++) {
			unsigned char ch = (unsigned char)buf[c];
			if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
				*why = "control character in a header value";
				return -EINVAL;
			}
		}
		f->value = buf + s;
		f->value_len = e - s;
		f->line_off = pos;
		f->line_len = eol + 2 - pos;
		if (ieq(f->name, f->name_len, "host")) {
			if (h->host >= 0) {
				*why = "two Host fields";
				return -EINVAL;
			}
			h->host = (int)h->nf;
		} else if (ieq(f->name, f->name_len, "content-length")) {
			if (h->content_length >= 0) {
				*why = "two Content-Length fields";
				return -EINVAL;
			}
			if ((rc = content_length(f->value, f->value_len, &h->content_length, why)) < 0)
				return rc;
		} else if (ieq(f->name, f->name_len, "transfer-encoding")) {
			if (te || !ieq(f->value, f->value_len, "chunked")) {
				*why = "a Transfer-Encoding other than chunked";
				return -EINVAL;
			}
			te = true;
		} else if (ieq(f->name, f->name_len, "connection")) {
			connection_tokens(f->value, f->value_len, &h->close, &conn_upgrade, &keep);
		} else if (ieq(f->name, f->name_len, "upgrade")) {
			upgrade_field = true;
		}
		h->nf++;
		pos = eol + 2;
	}
	if (h->host < 0) {
		*why = "no Host field";
		return -EINVAL;
	}
	if (te && h->content_length >= 0) {
		*why = "both Content-Length and Transfer-Encoding";
		return -EINVAL;
	}
	if (te && h->minor == 0) {
		*why = "Transfer-Encoding in HTTP/1.0";
		return -EINVAL;
	}
	h->chunked = te;
	h->upgrade = upgrade_field && conn_upgrade && h->minor == 1;
	if (h->minor == 0 && !keep)
		h->close = true;
	return 0;
}

int
edgehost_parse(const char *host, size_t len, const char *domain, uint16_t *port,
    char sandbox[SPACE_ID_MAX + 1])
{
	size_t dl = strlen(domain), i, p, sl;
	unsigned long v = 0;

	if (dl == 0 || len > 255)
		return -EINVAL;
	if (len == dl && strncasecmp(host, domain, dl) == 0)
		return 0;
	/* "{port}-{sandbox}." then the domain */
	if (len < dl + 4 || host[len - dl - 1] != '.' || strncasecmp(host + len - dl, domain, dl) != 0)
		return -EINVAL;
	len -= dl + 1;
	for (p = 0; p < len && host[p] >= '0' && host[p] <= '9'; p++) {
		v = v * 10 + (unsigned long)(host[p] - '0');
		if (p >= 5)
			return -EINVAL;
	}
	if (p == 0 || p >= len || host[p] != '-' || host[0] == '0' || v < 1 || v > 65535)
		return -EINVAL;
	sl = len - p - 1;
	if (sl == 0 || sl > SPACE_ID_MAX)
		return -EINVAL;
	for (i = 0; i < sl; i++) {
		char c = host[p + 1 + i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '_' || c == '-'))
			return -EINVAL;
		sandbox[i] = c;
	}
	sandbox[sl] = '\0';
	*port = (uint16_t)v;
	return 1;
}

void
chunkscan_init(struct chunkscan *c)
{
	memset(c, 0, sizeof(*c));
	c->st = CH_SIZE;
}

static int
hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

ssize_t
chunkscan(struct chunkscan *c, const char *p, size_t n, bool *done)
{
	size_t i = 0;

	*done = false;
	while (i < n) {
		char ch = p[i];

		switch (c->st) {
		case CH_SIZE:
			if (hexval(ch) >= 0) {
				if (c->left >> 56)
					return -1;
				c->left = c->left * 16 + (uint64_t)hexval(ch);
				c->digits = true;
				i++;
				break;
			}
			if (!c->digits)
				return -1;
			c->st = ch == '\r' ? CH_SIZE_LF : CH_EXT;
			if (ch != '\r' && ch != ';' && ch != ' ' && ch != '\t')
				return -1;
			i++;
			break;
		case CH_EXT:
			if (++c->line > CHUNKSCAN_LINE_MAX || ch == '\n')
				return -1;
			if (ch == '\r')
				c->st = CH_SIZE_LF;
			i++;
			break;
		case CH_SIZE_LF:
			if (ch != '\n')
				return -1;
			i++;
			c->line = 0;
			c->last = c->left == 0;
			c->st = c->last ? CH_TRAILER : CH_DATA;
			break;
		case CH_DATA: {
			size_t k = n - i < c->left ? n - i : (size_t)c->left;
			i += k;
			c->left -= k;
			if (c->left == 0)
				c->st = CH_DATA_CR;
			break;
		}
		case CH_DATA_CR:
			if (ch != '\r')
				return -1;
			c->st = CH_DATA_LF;
			i++;
			break;
		case CH_DATA_LF:
			if (ch != '\n')
				return -1;
			c->st = CH_SIZE;
			c->digits = false;
			i++;
			break;
		case CH_TRAILER:
			/* trailer fields, then an empty line */
			if (ch == '\r') {
				c->st = CH_TRAILER_LF;
			} else if (ch == '\n' || ++c->line > CHUNKSCAN_LINE_MAX * 8) {
				return -1;
			} else
				c->last = false;     /* a field: not the empty line */
			i++;
			break;
		case CH_TRAILER_LF:
			if (ch != '\n')
				return -1;
			i++;
			if (c->last) {
				*done = true;
				return (ssize_t)i;
			}
			c->last = true;
			c->st = CH_TRAILER;
			break;
		}
	}
	return (ssize_t)i;
}

