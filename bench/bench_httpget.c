/* A helper of bench/platform.py, not a benchmark of its own: one HTTP/1.1
 * GET over TCP whose body is received the way `cat` reads a file (into one
 * 1 MiB buffer of its own, then dropped), so that a large read's figure is
 * the server's and the path's, not the speed of curl's 16 KiB receive loop
 * and its 8 KiB writes. The answer must be 200 with a Content-Length, and
 * exactly that many bytes must arrive before the peer closes; prints the
 * count.
 *   bench_httpget HOST PORT PATH [AUTHORIZATION]
 * HOST may be the path of a local (AF_UNIX) socket, starting with '/':
 * node-api's --listen-unix; PORT is then not used. */
#include <errno.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "util.h"

#define BUF (1u << 20)
#define HEAD_MAX (16u << 10)

/* the status line's code and Content-Length of a complete head, or -1 */
static int
parse_head(char *head, unsigned *status, uint64_t *len)
{
	char *line, *save = NULL, *end;
	int have_len = 0;

	line = strtok_r(head, "\r\n", &save);
	if (line == NULL || strncmp(line, "HTTP/1.", 7) != 0 || strlen(line) < 12)
		return -1;
	*status = (unsigned)strtoul(line + 9, &end, 10);
	while ((line = strtok_r(NULL, "\r\n", &save)) != NULL) {
		if (strncasecmp(line, "content-length:", 15) == 0) {
			errno = 0;
			*len = strtoull(line + 15, &end, 10);
			if (errno != 0 || *end != '\0')
				return -1;
			have_len = 1;
		}
	}
	return have_len ? 0 : -1;
}

int
main(int argc, char **argv)
{
	struct addrinfo hints = { 0 }, *ai = NULL;
	char req[8192], *head, *buf, *eoh;
	size_t hn = 0;
	uint64_t want = 0, got;
	unsigned status = 0;
	ssize_t n;
	int fd = -1, k;

	if (argc != 4 && argc != 5) {
		fprintf(stderr, "usage: bench_httpget HOST PORT PATH [AUTHORIZATION]\n");
		return 2;
	}
	k = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s:%s\r\n%s%s%s"
	    "Connection: close\r\n\r\n", argv[3], argv[1][0] == '/' ? "localhost" : argv[1], argv[2],
	    argc == 5 ? "Authorization: " : "", argc == 5 ? argv[4] : "", argc == 5 ? "\r\n" : "");
	if (k < 0 || (size_t)k >= sizeof(req)) {
		fprintf(stderr, "bench_httpget: request too long\n");
		return 2;
	}
	if (argv[1][0] == '/') {
		struct sockaddr_un su = { .sun_family = AF_UNIX };

		if (strlen(argv[1]) >= sizeof(su.sun_path)) {
			fprintf(stderr, "bench_httpget: socket path too long\n");
			return 2;
		}
		memcpy(su.sun_path, argv[1], strlen(argv[1]) + 1);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&su, sizeof(su)) != 0 ||
		    fd_write_all(fd, req, (size_t)k) != 0) {
			fprintf(stderr, "bench_httpget: %s: %s\n", argv[1], strerror(errno));
			return 1;
		}
		goto sent;
	}
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	if (getaddrinfo(argv[1], argv[2], &hints, &ai) != 0 || ai == NULL) {
		fprintf(stderr, "bench_httpget: cannot resolve %s\n", argv[1]);
		return 1;
	}
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 ||
	    fd_write_all(fd, req, (size_t)k) != 0) {
		fprintf(stderr, "bench_httpget: %s:%s: %s\n", argv[1], argv[2], strerror(errno));
		return 1;
	}
	freeaddrinfo(ai);
sent:
	if ((buf = malloc(BUF)) == NULL || (head = malloc(HEAD_MAX + 1)) == NULL)
		return 1;
	/* the head, read until its blank line; what follows it is body */
	for (;;) {
		if (hn == HEAD_MAX) {
			fprintf(stderr, "bench_httpget: head over %u bytes\n", HEAD_MAX);
			return 1;
		}
		n = recv(fd, head + hn, HEAD_MAX - hn, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "bench_httpget: closed before the head ended\n");
			return 1;
		}
		hn += (size_t)n;
		head[hn] = '\0';
		if ((eoh = strstr(head, "\r\n\r\n")) != NULL)
			break;
	}
	got = (uint64_t)(hn - (size_t)(eoh + 4 - head));
	*eoh = '\0';
	if (parse_head(head, &status, &want) != 0 || status != 200) {
		fprintf(stderr, "bench_httpget: answer %u, or no Content-Length\n", status);
		return 1;
	}
	while (got < want) {
		n = recv(fd, buf, BUF, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (uint64_t)n;
	}
	/* nothing may follow the announced body */
	if (got == want && recv(fd, buf, 1, 0) != 0)
		got++;
	close(fd);
	if (got != want) {
		fprintf(stderr, "bench_httpget: %" PRIu64 " bytes, %" PRIu64 " announced\n", got, want);
		return 1;
	}
	printf("%" PRIu64 "\n", got);
	return 0;
}
