/* space token verify|inspect (being written) */
#include "space.h"

int
cmd_token(int argc, char **argv)
{
	return cli_fail("token", "not built yet");
}
