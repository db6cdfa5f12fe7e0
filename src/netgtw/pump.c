/* The byte pump of one admitted gateway connection: client <-> the
 * sandbox's 127.0.0.1:PORT, one bounded buffer per direction, no parsing
 * of what flows (HTTP, WebSocket and raw TCP are all bytes here). For an
 * http connection the first bytes of the sandbox's answer say whether it
 * switched protocols (101): only then does the end of the lease close
 * the client with a WebSocket close frame, written by wslay's frame API. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <wslay/wslay.h>

#include "gwhello.h"
#include "netgtw.h"

struct dir {
	int from, to;
	uint8_t *buf;
	size_t off, len;
	bool eof;                       /* read side ended, FIN passed on once flushed */
	bool shut;
};

struct pump {
	struct dir up;                  /* client -> sandbox */
	struct dir down;                /* sandbox -> client */
	bool http, sniffed, upgraded;
	bool hup_client, hup_upstream;  /* that socket reported a hang-up */
	int client, upstream;
};

struct pump *
pump_new(int client, int upstream, bool http, const uint8_t *early, size_t n)
{
	struct pump *p = calloc(1, sizeof(*p));

	if (p == NULL || (p->up.buf = malloc(NETGTW_BUF)) == NULL ||
	    (p->down.buf = malloc(NETGTW_BUF)) == NULL || n > NETGTW_BUF) {
		if (p) {
			free(p->up.buf);
			free(p);
		}
		return NULL;
	}
	p->client = client;
	p->upstream = upstream;
	p->http = http;
	p->up = (struct dir){ client, upstream, p->up.buf, 0, n, false, false };
	p->down = (struct dir){ upstream, client, p->down.buf, 0, 0, false, false };
	/* the bytes the client sent right after its hello */
	memcpy(p->up.buf, early, n);
	return p;
}

static short
want(const struct dir *d, int fd)
{
	short ev = 0;

	if (d->from == fd && !d->eof && d->len == 0)
		ev |= POLLIN;
	if (d->to == fd && d->len > 0)
		ev |= POLLOUT;
	return ev;
}

/* A hang-up is reported whatever was asked: a socket that hung up and
 * that nothing is asked of now is left out of the poll, or it would wake
 * the gateway at once, every time (a half-closed connection whose other
 * side says nothing) */
int
pump_pollfds(struct pump *p, struct pollfd *pf)
{
	short ec = want(&p->up, p->client) | want(&p->down, p->client);
	short eu = want(&p->up, p->upstream) | want(&p->down, p->upstream);

	pf[0] = (struct pollfd){ .fd = ec == 0 && p->hup_client ? -1 : p->client, .events = ec };
	pf[1] = (struct pollfd){ .fd = eu == 0 && p->hup_upstream ? -1 : p->upstream, .events = eu };
	return 2;
}

/* move what can move in one direction; false on an error */
static bool
dir_step(struct pump *p, struct dir *d, short rev_from, short rev_to)
{
	ssize_t r;

	if (d->len == 0 && !d->eof && (rev_from & (POLLIN | POLLHUP | POLLERR))) {
		r = read(d->from, d->buf, NETGTW_BUF);
		if (r > 0) {
			d->off = 0;
			d->len = (size_t)r;
			if (d == &p->down && p->http && !p->sniffed) {
				/* a 101 answer: the connection is a WebSocket now */
				p->sniffed = true;
				p->upgraded = r >= 12 && (memcmp(d->buf, "HTTP/1.1 101", 12) == 0 ||
				    memcmp(d->buf, "HTTP/1.0 101", 12) == 0);
			}
		} else if (r == 0) {
			d->eof = true;
		} else if (errno != EAGAIN && errno != EINTR) {
			return false;
		}
	}
	if (d->len > 0) {
		r = send(d->to, d->buf + d->off, d->len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r > 0) {
			d->off += (size_t)r;
			d->len -= (size_t)r;
		} else if (r < 0 && errno != EAGAIN && errno != EINTR) {
			return false;
		}
	}
	if (d->eof && d->len == 0 && !d->shut) {
		(void)shutdown(d->to, SHUT_WR);
		d->shut = true;
	}
	return true;
}

bool
pump_step(struct pump *p, const struct pollfd *pf, int n)
{
	short rc = n > 0 ? pf[0].revents : 0, ru = n > 1 ? pf[1].revents : 0;

	/* an error (a reset) ends the connection both ways */
	if ((rc | ru) & POLLERR)
		return false;
	p->hup_client |= (rc & POLLHUP) != 0;
	p->hup_upstream |= (ru & POLLHUP) != 0;
	if (!dir_step(p, &p->up, rc, ru) || !dir_step(p, &p->down, ru, rc))
		return false;
	return !(p->up.shut && p->down.shut);
}

static ssize_t
ws_send(const uint8_t *data, size_t len, int flags, void *user)
{
	struct pump *p = user;
	ssize_t r = send(p->client, data, len, MSG_NOSIGNAL);

	return r > 0 ? r : -1;
}

static void
reset(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	/* SO_LINGER 0: close sends a RST, the peer sees the stream broken,
	 * not a clean end it could take for a complete answer */
	(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

void
pump_lease_end(struct pump *p)
{
	if (p->upgraded) {
		/* RFC 6455 close, code 4409 (DESIGN section 7): an unmasked
		 * server frame. The client socket is blocking for this write
		 * only: the frame is a few bytes. */
		static const char reason[] = "generation changed";
		uint8_t payload[2 + sizeof(reason) - 1];
		struct wslay_frame_callbacks cb = { ws_send, NULL, NULL };
		struct wslay_frame_iocb io = { .fin = 1, .opcode = WSLAY_CONNECTION_CLOSE,
		    .mask = 0, .data = payload, .data_length = sizeof(payload),
		    .payload_length = sizeof(payload) };
		wslay_frame_context_ptr ctx;
		struct timeval tv = { 1, 0 };

		payload[0] = (uint8_t)(4409 >> 8);
		payload[1] = (uint8_t)(4409 & 0xff);
		memcpy(payload + 2, reason, sizeof(reason) - 1);
		(void)setsockopt(p->client, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		if (p->down.len > 0)
			(void)send(p->client, p->down.buf + p->down.off, p->down.len, MSG_NOSIGNAL);
		if (wslay_frame_context_init(&ctx, &cb, p) == 0) {
			(void)wslay_frame_send(ctx, &io);
			wslay_frame_context_free(ctx);
		}
		/* a clean FIN after the close frame: a reset could make the
		 * client drop the frame unread */
		(void)shutdown(p->client, SHUT_WR);
	} else {
		reset(p->client);
	}
	reset(p->upstream);
}

void
pump_free(struct pump *p)
{
	if (p == NULL)
		return;
	close(p->client);
	close(p->upstream);
	free(p->up.buf);
	free(p->down.buf);
	free(p);
}
