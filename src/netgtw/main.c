/* netgtw: `netgtw listen ...` (the per-worker listener) or `netgtw
 * gateway ...` (one per sandbox execution); see netgtw.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "gwhello.h"
#include "log.h"
#include "netgtw.h"

void
gw_harden(void)
{
	/* nothing we exec may gain privileges; no other process of our uid
	 * may attach to us or read our memory (every gateway of a worker
	 * runs as one uid) */
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		fatal("no_new_privs");
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		fatal("dumpable");
	if (geteuid() == 0 || getuid() == 0)
		fatalx("netgtw runs unprivileged (sbx-manager starts it under --gateway-uid)");
}

void
gw_refuse(int fd, const char *code, const char *message)
{
	uint8_t *f;
	size_t n;

	if (gwreply_error(code, message, &f, &n) == 0) {
		(void)!write(fd, f, n);
		free(f);
	}
	close(fd);
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "listen") == 0) {
		log_init("netgtw-listen", 0);
		return listen_main(argc - 1, argv + 1);
	}
	if (argc >= 2 && strcmp(argv[1], "gateway") == 0) {
		log_init("netgtw", 0);
		return gateway_main(argc - 1, argv + 1);
	}
	fprintf(stderr, "usage: netgtw listen --fd N --dir DIR\n"
	    "       netgtw gateway --ctl-fd N --accept-fd N --sandbox ID --generation N\n"
	    "           --activation N --worker ID --substrate S --resident ID --root-key KEY\n");
	return 2;
}
