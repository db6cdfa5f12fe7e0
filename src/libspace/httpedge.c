/* HTTP request-head checks shared by the two HTTP daemons (httpedge.h). */
#include <stdint.h>
#include <strings.h>

#include "httpedge.h"

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

static bool
ctl(unsigned c)
{
	return c < 0x20 || c == 0x7f;
}

bool
http_target_clean(const char *raw)
{
	const unsigned char *p;

	for (p = (const unsigned char *)raw; *p; p++) {
		if (ctl(*p))
			return false;
		if (*p == '%' && hexval((char)p[1]) >= 0 && hexval((char)p[2]) >= 0 &&
		    ctl((unsigned)(hexval((char)p[1]) << 4 | hexval((char)p[2]))))
			return false;
	}
	return true;
}

void
http_framing_count(struct http_framing *f, const char *name)
{
	if (strcasecmp(name, "Content-Length") == 0)
		f->content_length++;
	else if (strcasecmp(name, "Transfer-Encoding") == 0)
		f->transfer_encoding++;
}

bool
http_framing_ok(const struct http_framing *f)
{
	return !(f->content_length > 0 && f->transfer_encoding > 0) && f->content_length <= 1;
}
