/* headwatch.c from the attacker's side: connections of one address that
 * keep their heads pending are closed, oldest first, once the address has
 * too many; a burst whose heads the daemon has not read yet closes none
 * of its own below four times the bound; another address is never
 * touched; a head that does not arrive in time is cut. A connection is a
 * socketpair: the watchdog shuts the daemon's end down, and the client's
 * end then reads end of file. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "headwatch.h"
#include "tap.h"

#define N 24

struct pair {
	int srv, cli;
};

static struct pair p[N + 2];

static bool
closed(const struct pair *c)
{
	char b;

	return recv(c->cli, &b, 1, MSG_DONTWAIT) == 0;
}

static struct sockaddr_in
addr(const char *ip)
{
	struct sockaddr_in sa;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	inet_pton(AF_INET, ip, &sa.sin_addr);
	return sa;
}

static void
open_one(struct headwatch *hw, int i, const char *ip)
{
	struct sockaddr_in sa = addr(ip);
	int sv[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
		perror("socketpair");
		_exit(1);
	}
	p[i].srv = sv[0];
	p[i].cli = sv[1];
	headwatch_open(hw, &p[i], p[i].srv, (struct sockaddr *)&sa);
}

static int
count_closed(int from, int to)
{
	int i, n = 0;

	for (i = from; i < to; i++)
		n += closed(&p[i]);
	return n;
}

/* the first n connections unregistered and closed, the watchdog stopped */
static void
end_all(struct headwatch *hw, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		headwatch_close(hw, &p[i]);
		close(p[i].srv);
		close(p[i].cli);
	}
	headwatch_stop(hw);
}

int
main(void)
{
	struct headwatch *hw = NULL;
	int i;

	ok(headwatch_start(60, 4, 64, &hw) == 0 && hw != NULL, "a watchdog: 4 pending heads per address");
	for (i = 0; i < 16; i++)
		open_one(hw, i, "127.0.0.1");
	is_int(count_closed(0, 16), 0,
	    "a burst of 16 connections (4x the bound) opened at once: none closed while their heads are young");
	open_one(hw, 16, "127.0.0.1");
	ok(closed(&p[0]) && count_closed(1, 17) == 0,
	    "a 17th: the address has 4x the bound pending, its oldest is closed whatever its age, no other");
	open_one(hw, 17, "10.1.2.3");
	is_int(count_closed(0, 18), 1, "a connection from another address closes nothing");
	headwatch_head_done(hw, &p[1]);
	usleep(1100 * 1000);
	open_one(hw, 18, "127.0.0.1");
	ok(closed(&p[2]) && !closed(&p[1]) && count_closed(3, 19) == 0,
	    "past a second, a new one closes the oldest pending (not one whose head arrived)");
	open_one(hw, 19, "127.0.0.1");
	ok(closed(&p[3]) && count_closed(4, 20) == 0, "... and the next one the next oldest");
	headwatch_rearm(hw, &p[1]);
	open_one(hw, 20, "127.0.0.1");
	ok(closed(&p[4]) && !closed(&p[1]), "a kept-alive connection waiting for its next head is young again");
	ok(!closed(&p[17]), "the other address's connection is still open");
	end_all(hw, 21);

	ok(headwatch_start(1, 16, 64, &hw) == 0, "a watchdog with a head timeout of 1 s");
	open_one(hw, 0, "127.0.0.1");
	open_one(hw, 1, "127.0.0.1");
	headwatch_head_done(hw, &p[1]);
	for (i = 0; i < 40 && !closed(&p[0]); i++)
		usleep(100 * 1000);
	ok(closed(&p[0]), "a head that did not arrive within the timeout is cut (%d ms)", i * 100);
	ok(!closed(&p[1]), "... one whose head arrived is not");
	end_all(hw, 2);
	return done_testing();
}
