/* The opening of a WebSocket to a node-api endpoint (wsclient.h), shared
 * by the CLI (src/space/wsc.c) and space-edge. The opening handshake is
 * written here (an HTTP/1.1 GET with the RFC 6455 headers; the answer's
 * head is read whole, at most WSC_HEAD_MAX bytes, and its
 * Sec-WebSocket-Accept checked); everything after it is wslay's. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <sodium.h>

#include "client.h"
#include "util.h"
#include "wsclient.h"
#include "wskey.h"

#define WSC_HEAD_MAX    (16u << 10)
#define WSC_BODY_MAX    (64u << 10)
#define WSC_IO_TIMEOUT  30

static void
fail_msg(struct space_answer *a, const char *what, const char *arg)
{
	snprintf(a->message, sizeof(a->message), "%s%s", what, arg ? arg : "");
}

/* http://HOST[:PORT]/PATH -> host, port, path */
static int
split_url(const char *url, char *host, size_t hcap, char *port, size_t pcap, const char **path)
{
	const char *h, *e, *colon;

	if (strncmp(url, "http://", 7) != 0)
		return -EPROTONOSUPPORT;
	h = url + 7;
	if ((e = strchr(h, '/')) == NULL)
		return -EINVAL;
	*path = e;
	colon = memchr(h, ':', (size_t)(e - h));
	if (h[0] == '[') {
		const char *rb = memchr(h, ']', (size_t)(e - h));
		if (rb == NULL)
			return -EINVAL;
		colon = rb[1] == ':' ? rb + 1 : NULL;
		if ((size_t)(rb - h - 1) >= hcap)
			return -EINVAL;
		memcpy(host, h + 1, (size_t)(rb - h - 1));
		host[rb - h - 1] = '\0';
	} else {
		size_t hl = (size_t)((colon ? colon : e) - h);
		if (hl == 0 || hl >= hcap)
			return -EINVAL;
		memcpy(host, h, hl);
		host[hl] = '\0';
	}
	if (colon) {
		if ((size_t)(e - colon - 1) >= pcap || e - colon - 1 == 0)
			return -EINVAL;
		memcpy(port, colon + 1, (size_t)(e - colon - 1));
		port[e - colon - 1] = '\0';
	} else
		snprintf(port, pcap, "80");
	return 0;
}

static int
tcp_connect(const char *host, const char *port)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res, *ai;
	int fd = -1, one = 1;

	if (getaddrinfo(host, port, &hints, &res) != 0)
		return -EHOSTUNREACH;
	for (ai = res; ai; ai = ai->ai_next) {
		fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
		if (fd < 0)
			continue;
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			/* a stream is interactive: a keystroke goes at once,
			 * not after the peer's delayed ACK of the last one */
			(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			break;
		}
		close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd < 0 ? -ECONNREFUSED : fd;
}

/* the value of header name in head (lines after the status line), copied */
static int
head_value(const char *head, const char *name, char *out, size_t cap)
{
	const char *p = strstr(head, "\r\n"), *e;
	size_t nl = strlen(name), vl;

	while (p && p[2] != '\r') {
		p += 2;
		e = strstr(p, "\r\n");
		if (e == NULL)
			return -1;
		if ((size_t)(e - p) > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
			const char *v = p + nl + 1;
			while (*v == ' ' || *v == '\t')
				v++;
			vl = (size_t)(e - v);
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			if (vl >= cap)
				return -1;
			memcpy(out, v, vl);
			out[vl] = '\0';
			return 0;
		}
		p = e;
	}
	return -1;
}

/* node-api's local socket (--listen-unix) */
static int
unix_connect(const char *path)
{
	struct sockaddr_un su = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(su.sun_path))
		return -ENAMETOOLONG;
	memcpy(su.sun_path, path, strlen(path) + 1);
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&su, sizeof(su)) != 0) {
		close(fd);
		return -ECONNREFUSED;
	}
	return fd;
}

int
wsc_open(void *ctx, const char *url, const char *sock, const char *bearer,
    struct space_answer *a)
{
	struct wsc *w = ctx;
	char host[256], port[16], key[WS_KEY_LEN + 1], want[WS_ACCEPT_LEN + 1], v[128];
	char *req = NULL, *buf = NULL, *end;
	const char *path;
	struct timeval tv = { .tv_sec = WSC_IO_TIMEOUT };
	size_t len = 0, hl;
	ssize_t n;
	int fd, r, status;

	space_answer_clear(a);
	wsc_close(w);
	if ((r = split_url(url, host, sizeof(host), port, sizeof(port), &path)) < 0) {
		fail_msg(a, "streams need an http:// endpoint, not ", url);
		a->not_sent = 1;
		return r;
	}
	if ((fd = sock ? unix_connect(sock) : tcp_connect(host, port)) < 0) {
		fail_msg(a, "cannot connect to ", sock ? sock : host);
		a->not_sent = 1;
		return fd;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	ws_key_new(key);
	if (asprintf(&req, "GET %s HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
	    "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
	    "Sec-WebSocket-Protocol: space.v1\r\nAuthorization: Bearer %s\r\n\r\n",
	    path, host, port, key, bearer) < 0) {
		close(fd);
		return -ENOMEM;
	}
	r = fd_write_all(fd, req, strlen(req));
	sodium_memzero(req, strlen(req));
	free(req);
	if (r < 0) {
		fail_msg(a, "sending the request: ", strerror(-r));
		a->not_sent = 1;
		close(fd);
		return -ECONNRESET;
	}
	if ((buf = malloc(WSC_HEAD_MAX + WSC_BODY_MAX + 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	/* the head, whole */
	for (;;) {
		n = recv(fd, buf + len, WSC_HEAD_MAX - len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fail_msg(a, "no answer from the endpoint", NULL);
			goto fail;
		}
		len += (size_t)n;
		buf[len] = '\0';
		if ((end = strstr(buf, "\r\n\r\n")) != NULL)
			break;
		if (len >= WSC_HEAD_MAX) {
			fail_msg(a, "answer head too large", NULL);
			goto fail;
		}
	}
	hl = (size_t)(end - buf) + 4;
	end[2] = '\0';          /* head_value stops at the blank line */
	if (sscanf(buf, "HTTP/1.%*1d %3d", &status) != 1) {
		fail_msg(a, "not an HTTP answer", NULL);
		goto fail;
	}
	a->status = status;
	head_value(buf, "X-Space-Generation", a->generation, sizeof(a->generation));
	head_value(buf, "X-Space-Worker", a->worker, sizeof(a->worker));
	if (status != 101) {
		/* an HTTP answer: its JSON error body, as any request's */
		size_t cl = 0;
		json_t *o;

		if (head_value(buf, "Content-Length", v, sizeof(v)) == 0)
			cl = strtoul(v, NULL, 10);
		if (cl > WSC_BODY_MAX)
			cl = WSC_BODY_MAX;
		memmove(buf, buf + hl, len - hl);
		len -= hl;
		while (len < cl) {
			n = recv(fd, buf + len, cl - len, 0);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				break;
			len += (size_t)n;
		}
		if ((o = json_loadb(buf, len < cl ? len : cl, 0, NULL)) != NULL) {
			const char *s;
			if ((s = json_string_value(json_object_get(o, "error"))))
				snprintf(a->error, sizeof(a->error), "%s", s);
			if ((s = json_string_value(json_object_get(o, "reason"))))
				snprintf(a->reason, sizeof(a->reason), "%s", s);
			if ((s = json_string_value(json_object_get(o, "message"))))
				snprintf(a->message, sizeof(a->message), "%s", s);
			a->body = o;
		}
		if (a->message[0] == '\0')
			snprintf(a->message, sizeof(a->message), "HTTP %d", status);
		free(buf);
		close(fd);
		return 0;
	}
	/* RFC 6455 4.1: the client checks the server's proof */
	ws_accept_of(key, want);
	if (head_value(buf, "Sec-WebSocket-Accept", v, sizeof(v)) != 0 || strcmp(v, want) != 0) {
		a->status = 0;
		fail_msg(a, "the endpoint did not accept the WebSocket properly", NULL);
		goto fail;
	}
	w->fd = fd;
	w->pre_len = len - hl;
	w->pre_off = 0;
	if (w->pre_len) {
		memmove(buf, buf + hl, w->pre_len);
		w->pre = (uint8_t *)buf;
	} else
		free(buf);
	tv.tv_sec = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return 0;
fail:
	free(buf);
	close(fd);
	return -ECONNRESET;
}

void
wsc_close(struct wsc *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	free(w->pre);
	w->pre = NULL;
	w->pre_len = w->pre_off = 0;
	json_decref(w->result);
	w->result = NULL;
}
