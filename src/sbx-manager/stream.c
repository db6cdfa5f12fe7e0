/* The stream relay (docs/protocol.md section 1, "Streams"; DESIGN sections
 * 7 and 14). A streaming operation (a process started or attached, a file
 * watch) is admitted and answered like any other (api.c); after its
 * RESPONSE the connection stays open and carries STREAM frames both ways
 * until one side ends it, or until its lease is cancelled.
 *
 * Memory is bounded per stream: each direction holds at most one frame,
 * and a side is read only when the frame read before from it has been
 * written to the other (framepump.h). A slow client therefore stops this
 * relay reading the bridge, which stops the bridge reading the guest,
 * which stops the process writing: flow control end to end, no buffer
 * grows.
 *
 * Cancellation (lease.c): a replacement commits, then lease_cancel_before()
 * shuts both sockets down. That wakes the poll below at once (no timer, no
 * polling period): the bridge side is dead from that instant, so no byte
 * of the old execution, and none of a newer one, can reach the client
 * after it; the client gets what was already in flight of the frame being
 * written (at most one frame, so its framing stays whole) and then CANCEL.
 *
 * Client to bridge: STREAM and END (a detach; the guest answers END).
 * Bridge to client: STREAM, then END, ERROR or CANCEL end the stream.
 *
 * Payloads are not decoded here: sbx-manager runs as root and has no need
 * to read them. Frame types are checked (a peer that sends another type
 * ends the stream) and lengths are bounded by the frame header's limits.
 * node-api decodes what the client sends, the guest what reaches it. An
 * open stream does not look at its capability again: one that expires
 * while the stream is open does not cut it (DESIGN section 14). */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include "framepump.h"
#include "log.h"
#include "msg.h"
#include "proto.h"
#include "sbx-manager.h"

#define CANCEL_JSON "{\"reason\":\"execution_replaced\"}"

/* blocking, bounded: finish what the client is owed, then stop */
static void
drain_to_client(int cfd, struct frame_wr *w)
{
	struct pollfd pf = { .fd = cfd, .events = POLLOUT };
	int r;

	while ((r = frame_wr_flush(w, cfd)) == 1)
		if (poll(&pf, 1, 1000) <= 0)
			return;
}

void
stream_relay(struct mgr *m, int cfd, int bfd, struct lease *l, const char *sandbox)
{
	struct frame_rd crd = { 0 }, brd = { 0 };
	struct frame_wr cwr = { 0 }, bwr = { 0 };
	struct pollfd pf[2];
	struct frame f;
	bool end = false, bdeaf = false;
	int r;

	for (;;) {
		pf[0] = (struct pollfd){ .fd = bfd };
		if (!frame_wr_pending(&cwr))
			pf[0].events |= POLLIN;
		if (frame_wr_pending(&bwr))
			pf[0].events |= POLLOUT;
		pf[1] = (struct pollfd){ .fd = cfd };
		if (!frame_wr_pending(&bwr))
			pf[1].events |= POLLIN;
		if (frame_wr_pending(&cwr))
			pf[1].events |= POLLOUT;
		/* a hung-up side we are not reading would wake poll at once,
		 * again and again: it is left out until its turn comes (its
		 * bytes stay in its socket until then) */
		if (pf[0].events == 0)
			pf[0].fd = -1;
		if (pf[1].events == 0)
			pf[1].fd = -1;
		if (pf[0].fd < 0 && pf[1].fd < 0)
			break;
		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (lease_cancelled(m, l))
			goto cancelled;
		/* bridge -> client */
		if ((pf[0].revents & (POLLIN | POLLHUP | POLLERR)) && (pf[0].events & POLLIN)) {
			memset(&f, 0, sizeof(f));
			r = frame_rd_step(&brd, bfd, &f);
			if (r < 0) {
				if (lease_cancelled(m, l))
					goto cancelled;
				break;          /* the bridge ended the stream */
			}
			if (r == 1) {
				switch (f.type) {
				case MSG_STREAM:
					break;
				case MSG_END:
				case MSG_ERROR:
				case MSG_CANCEL:
					end = true;
					break;
				default:
					log_warnx("stream %s: bridge sent %s", sandbox,
					    msg_type_str(f.type));
					frame_free(&f);
					goto out;
				}
				r = frame_wr_add(&cwr, f.type, f.payload, f.len);
				frame_free(&f);
				if (r != 0)
					goto out;
			}
		}
		if (frame_wr_pending(&cwr)) {
			if (frame_wr_flush(&cwr, cfd) < 0)
				break;          /* client gone: the process runs on */
		}
		if (end) {
			drain_to_client(cfd, &cwr);
			goto out;
		}
		/* client -> bridge: stdin, its end, resizes, signals */
		if ((pf[1].revents & (POLLIN | POLLHUP | POLLERR)) && (pf[1].events & POLLIN)) {
			memset(&f, 0, sizeof(f));
			r = frame_rd_step(&crd, cfd, &f);
			if (r < 0) {
				if (lease_cancelled(m, l))
					goto cancelled;
				break;          /* the bridge sees EOF */
			}
			if (r == 1) {
				/* a client's END detaches (the guest answers END) */
				if (f.type != MSG_STREAM && f.type != MSG_END) {
					frame_free(&f);
					drain_to_client(cfd, &cwr);
					frame_write_error(cfd, 400, "bad_request", NULL,
					    "unexpected frame on a stream");
					goto out;
				}
				r = frame_wr_add(&bwr, f.type, f.payload, f.len);
				frame_free(&f);
				if (r != 0)
					goto out;
			}
		}
		if (frame_wr_pending(&bwr) && !bdeaf && frame_wr_flush(&bwr, bfd) < 0) {
			if (lease_cancelled(m, l))
				goto cancelled;
			/* the bridge closed its side after the stream's end (a
			 * process's EXIT and END, crossing the client's last
			 * input): what it sent before closing is still to be
			 * read, and ends the stream; the client's input from
			 * now on is dropped */
			bdeaf = true;
		}
		if (bdeaf)
			frame_wr_free(&bwr);
	}
	goto out;
cancelled:
	/* the frame in flight to the client is completed (its framing must
	 * stay whole), then CANCEL; the bridge side is already shut down */
	drain_to_client(cfd, &cwr);
	frame_wr_add(&cwr, MSG_CANCEL, CANCEL_JSON, strlen(CANCEL_JSON));
	drain_to_client(cfd, &cwr);
out:
	frame_rd_free(&crd);
	frame_rd_free(&brd);
	frame_wr_free(&cwr);
	frame_wr_free(&bwr);
}
