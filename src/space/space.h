/* The space CLI: one file per verb (cmd_<verb>.c), listed in main.c. */
#ifndef SPACE_CLI_H
#define SPACE_CLI_H

struct verb {
	const char *name;
	int (*run)(int argc, char **argv);     /* argv[0] is the verb */
	const char *summary;
};

int cmd_version(int argc, char **argv);
int cmd_token(int argc, char **argv);

/* prints "space: <verb>: <message>" on stderr; returns 1 */
int cli_fail(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#endif
