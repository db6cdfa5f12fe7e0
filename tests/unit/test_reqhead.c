/* The request-head decoder of space-edge and its Host names. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "reqhead.h"
#include "tap.h"

static struct reqhead h;

static int
parse(const char *s)
{
	const char *why = NULL;
	int rc = reqhead_parse(s, strlen(s), &h, &why);

	if (rc != 0 && why == NULL)
		return -1000;   /* a refusal must say why */
	return rc;
}

static void
test_head(void)
{
	char *big;
	size_t i;

	is_int(parse("GET / HTTP/1.1\r\nHost: 80-sbx_a.localhost\r\n\r\n"), 0, "a minimal head");
	ok(h.method_len == 3 && h.target_len == 1 && h.minor == 1 && h.nf == 1 && h.host == 0 &&
	    h.content_length == -1 && !h.chunked && !h.upgrade && !h.close, "... and its parts");
	is_int(parse("POST /a?b=c HTTP/1.1\r\nhost:x\r\nContent-Length: 12\r\nX-A:  v \t\r\n\r\n"), 0,
	    "fields with blanks");
	ok(h.content_length == 12 && h.f[2].value_len == 1 && h.f[2].value[0] == 'v' &&
	    h.f[1].line_off > 0, "... trimmed, Content-Length read");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n"),
	    0, "an upgrade");
	ok(h.upgrade && !h.close, "... is one");
	is_int(parse("GET / HTTP/1.0\r\nHost: a\r\n\r\n"), 0, "HTTP/1.0");
	ok(h.close && h.minor == 0, "... closes by default");
	is_int(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), 0, "chunked");
	ok(h.chunked, "... is seen");
	is_int(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0, "OPTIONS *");

	is_int(parse("GET / HTTP/1.1\r\n\r\n"), -EINVAL, "no Host");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), -EINVAL, "two Hosts");
	is_int(parse("GET / HTTP/1.1\nHost: a\r\n\r\n"), -EINVAL, "a bare LF");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\rb\r\n\r\n"), -EINVAL, "a bare CR");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), -EINVAL, "obs-fold");
	is_int(parse("GET / HTTP/1.1\r\nHo st: a\r\n\r\n"), -EINVAL, "a blank in a name");
	is_int(parse("GET / HTTP/1.1\r\nHost : a\r\n\r\n"), -EINVAL, "a blank before the colon");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\x01\r\n\r\n"), -EINVAL, "a control byte in a value");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"),
	    -EINVAL, "two Content-Lengths");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +1\r\n\r\n"), -EINVAL,
	    "a signed Content-Length");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
	    -EINVAL, "both framings (smuggling)");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), -EINVAL,
	    "a Transfer-Encoding other than chunked");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
	    -EINVAL, "Transfer-Encoding twice");
	is_int(parse("GET http://x/ HTTP/1.1\r\nHost: a\r\n\r\n"), -EINVAL, "absolute-form");
	is_int(parse("CONNECT a:80 HTTP/1.1\r\nHost: a\r\n\r\n"), -EINVAL, "CONNECT");
	is_int(parse("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), -EINVAL, "HTTP/2.0");
	is_int(parse("GET  / HTTP/1.1\r\nHost: a\r\n\r\n"), -EINVAL, "two blanks");
	is_int(parse("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), -EINVAL, "a method outside tchar");
	is_int(parse("GET / HTTP/1.1\r\nHost: a\r\n"), -EINVAL, "no empty line");
	{
		const char *why;
		const char s[] = "GET / HTTP/1.1\r\nHost: a\0b\r\n\r\n";
		is_int(reqhead_parse(s, sizeof(s) - 1, &h, &why), -EINVAL, "a NUL");
	}
	big = malloc(REQHEAD_MAX * 2);
	strcpy(big, "GET / HTTP/1.1\r\nHost: a\r\n");
	for (i = 0; i <= REQHEAD_HEADERS_MAX; i++)
		strcat(big, "X: y\r\n");
	strcat(big, "\r\n");
	is_int(parse(big), -EINVAL, "too many fields");
	free(big);

	is_int((long long)reqhead_end("GET / HTTP/1.1\r\nHost: a\r\n\r\nrest", 31), 27, "the head's end");
	is_int((long long)reqhead_end("GET / HTTP/1.1\r\nHost: a\r\n\r", 27), 0, "not yet");
}

static void
test_host(void)
{
	char sbx[SPACE_ID_MAX + 1];
	uint16_t port = 0;
#define H(s, d) edgehost_parse(s, strlen(s), d, &port, sbx)

	is_int(H("8080-sbx_abc.localhost:7000", "localhost:7000"), 1, "a port host");
	ok(port == 8080 && strcmp(sbx, "sbx_abc") == 0, "... names port and sandbox");
	is_int(H("1-a-b.EXAMPLE.org", "example.org"), 1, "the domain in any case, a sandbox with -");
	ok(port == 1 && strcmp(sbx, "a-b") == 0, "... the port is before the first -");
	is_int(H("65535-x.d", "d"), 1, "port 65535");
	is_int(H("localhost:7000", "localhost:7000"), 0, "the bare domain is the edge");
	is_int(H("65536-x.d", "d"), -EINVAL, "port 65536");
	is_int(H("0-x.d", "d"), -EINVAL, "port 0");
	is_int(H("080-x.d", "d"), -EINVAL, "a leading zero");
	is_int(H("123456-x.d", "d"), -EINVAL, "six digits");
	is_int(H("-x.d", "d"), -EINVAL, "no port");
	is_int(H("80-.d", "d"), -EINVAL, "no sandbox");
	is_int(H("80x.d", "d"), -EINVAL, "no dash");
	is_int(H("80-a.b.d", "d"), -EINVAL, "a dot in the sandbox");
	is_int(H("80-a%2e.d", "d"), -EINVAL, "an escape in the sandbox");
	is_int(H("80-a.d:81", "d"), -EINVAL, "another port than the domain's");
	is_int(H("80-a.xd", "d"), -EINVAL, "a domain that only ends like ours");
	is_int(H("80-a.d", "d:7000"), -EINVAL, "the domain without its port");
	is_int(H("80-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.d", "d"),
	    -EINVAL, "a sandbox id too long");
#undef H
}

static ssize_t
scan(const char *s, bool *done)
{
	struct chunkscan c;

	chunkscan_init(&c);
	return chunkscan(&c, s, strlen(s), done);
}

static void
test_chunked(void)
{
	struct chunkscan c;
	const char *body = "4\r\nWiki\r\n5;ext=1\r\npedia\r\n0\r\nX-T: 1\r\n\r\nGET / HTTP/1.1\r\n";
	bool done;
	size_t i;
	ssize_t r;

	is_int(scan(body, &done), (long long)(strlen(body) - 16), "a chunked body ends where it ends");
	ok(done, "... and says so");
	is_int(scan("0\r\n\r\n", &done), 5, "the empty body");
	is_int(scan("a\r\n0123", &done), 7, "a body not finished: all of it is the body's");
	ok(!done, "... not done");
	chunkscan_init(&c);
	for (i = 0, r = 0; i < strlen(body) && !done; i++)
		r += chunkscan(&c, body + i, 1, &done);
	is_int(r, (long long)(strlen(body) - 16), "byte by byte, the same end");
	is_int(scan("x\r\n", &done), -1, "a size that is not hex");
	is_int(scan("\r\n", &done), -1, "no size");
	is_int(scan("4\nWiki", &done), -1, "a bare LF");
	is_int(scan("4\r\nWikiX\r\n", &done), -1, "data longer than its size");
	is_int(scan("fffffffffffffffff\r\n", &done), -1, "a size over 2^56");
	{
		char big[CHUNKSCAN_LINE_MAX + 16];
		memset(big, 'e', sizeof(big));
		memcpy(big, "1;", 2);
		big[sizeof(big) - 1] = '\0';
		is_int(scan(big, &done), -1, "an extension too long");
	}
}

int
main(void)
{
	test_head();
	test_host();
	test_chunked();
	return done_testing();
}
