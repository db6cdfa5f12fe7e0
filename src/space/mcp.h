/* space mcp: the Model Context Protocol server of the CLI (docs/mcp.md).
 * cmd_mcp.c speaks the protocol on stdio and runs each tool call in a
 * process of its own; mcp_tools.c is the table of tools (the file tools
 * are in mcp_files.c); a call's arguments are checked against the tool's
 * input schema by jschema.c (libspace). */
#ifndef SPACE_MCP_H
#define SPACE_MCP_H
#include <stddef.h>
#include <jansson.h>

struct space_client;

/* what a tool runs with, in the call's own process */
struct mcp_ctx {
	struct space_client *c;
	int out_fd;             /* the pipe to the server: progress lines */
	char err[1024];         /* why the call failed, for the agent */
};

struct mcp_tool {
	const char *name;
	const char *title;
	const char *description;
	const char *input_schema;       /* JSON text */
	const char *output_schema;      /* JSON text */
	const char *annotations;        /* JSON text: hints for the client */
	/* the structured result (an object matching output_schema), or NULL
	 * with x->err saying why: a tool result with isError */
	json_t *(*run)(struct mcp_ctx *x, json_t *args);
};

extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;

/* a progress message from inside a call; the server turns it into
 * notifications/progress when the request asked for them */
void mcp_progress(struct mcp_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* sets x->err; returns NULL, for "return mcp_fail(x, ...)" */
json_t *mcp_fail(struct mcp_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* shared by the tools (mcp_tools.c) */
struct space_data_op;
struct space_answer;
const char *mcp_jstr(const json_t *o, const char *key);
/* op with access, method, path; no body, no fds, a 60 s timeout */
void mcp_op_init(struct space_data_op *op, const char *access, const char *method, char *path);
/* one data-plane operation on sbx through the route cache: 0 with the 2xx
 * answer in *a, or -1 with x->err saying why in the agent's terms ("is
 * paused: call resume first") */
int mcp_data_op(struct mcp_ctx *x, const char *what, const char *sbx,
    struct space_data_op *op, struct space_answer *a);
/* "PREFIX?path=P[&mode=M]", escaped; NULL on ENOMEM */
char *mcp_path_query(const char *prefix, const char *path, const char *mode);

/* the file tools (mcp_files.c) */
json_t *mcp_read_file(struct mcp_ctx *x, json_t *args);
json_t *mcp_write_file(struct mcp_ctx *x, json_t *args);
json_t *mcp_list_dir(struct mcp_ctx *x, json_t *args);
#endif
