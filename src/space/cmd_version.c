/* space version */
#include <stdio.h>
#include <string.h>

#include "proto.h"
#include "space.h"

#ifndef SPACE_VERSION
#define SPACE_VERSION "0.1.0"
#endif

int
cmd_version(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "--help") == 0) {
		printf("usage: space version\n");
		return 0;
	}
	printf("space %s (protocol %d)\n", SPACE_VERSION, PROTO_VERSION);
	return 0;
}
