/* The file tools of `space mcp`: read_file, write_file, list_dir (rows of
 * the table in mcp_tools.c). Files move through a memfd, streamed by the
 * client's data-plane operation as `space fs read` / `write` do. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <jansson.h>
#include <sodium.h>

#include "client.h"
#include "limits.h"
#include "mcp.h"
#include "util.h"

#define READ_DEFAULT    (1u << 20)      /* read_file: bytes returned */
#define READ_FETCH_MAX  (64u << 20)     /* read_file: larger files are not fetched */

static int
memfd(const char *name)
{
	return memfd_create(name, MFD_CLOEXEC);
}

json_t *
mcp_read_file(struct mcp_ctx *x, json_t *args)
{
	const char *sbx = mcp_jstr(args, "sandbox"), *path = mcp_jstr(args, "path");
	const char *enc = mcp_jstr(args, "encoding") ? mcp_jstr(args, "encoding") : "text", *type;
	struct space_data_op op;
	struct space_answer a;
	json_int_t max = READ_DEFAULT, size;
	json_t *out = NULL, *text = NULL;
	char *q = NULL, *buf = NULL, *b64 = NULL;
	size_t n = 0, cut;
	ssize_t r;
	int fd = -1;

	space_answer_init(&a);
	if (json_is_integer(json_object_get(args, "max_bytes")))
		max = json_integer_value(json_object_get(args, "max_bytes"));
	/* stat first: a directory, or a file too large to fetch, is said
	 * before any byte moves */
	if ((q = mcp_path_query("fs/stat", path, NULL)) == NULL)
		goto oom;
	mcp_op_init(&op, "fs:r", "GET", q);
	if (mcp_data_op(x, "read_file", sbx, &op, &a) != 0)
		goto out;
	type = mcp_jstr(a.body, "type") ? mcp_jstr(a.body, "type") : "?";
	if (strcmp(type, "dir") == 0) {
		mcp_fail(x, "read_file: %s is a directory: use list_dir", path);
		goto out;
	}
	if (strcmp(type, "file") != 0) {
		mcp_fail(x, "read_file: %s is not a regular file (%s)", path, type);
		goto out;
	}
	size = json_integer_value(json_object_get(a.body, "size"));
	if (size > (json_int_t)READ_FETCH_MAX) {
		mcp_fail(x, "read_file: %s is %lld bytes; read_file fetches files up to %u "
		    "bytes: read a part with run_command (head -c, tail -c, dd)", path,
		    (long long)size, READ_FETCH_MAX);
		goto out;
	}
	space_answer_clear(&a);
	free(q);
	if ((q = mcp_path_query("files", path, NULL)) == NULL || (fd = memfd("read_file")) < 0)
		goto oom;
	mcp_op_init(&op, "fs:r", "GET", q);
	op.out_fd = fd;
	/* the size above was the path's own, then (a link's, or a file
	 * swapped or grown since): what is kept is bounded as it arrives */
	op.out_max = READ_FETCH_MAX;
	op.timeout = 0;
	if (mcp_data_op(x, "read_file", sbx, &op, &a) != 0)
		goto out;
	if (lseek(fd, 0, SEEK_SET) != 0 || (buf = malloc((size_t)max + 1)) == NULL)
		goto oom;
	while (n < (size_t)max + 1) {
		r = read(fd, buf + n, (size_t)max + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	cut = n > (size_t)max ? (size_t)max : n;
	if (strcmp(enc, "text") == 0 && memchr(buf, '\0', cut) == NULL) {
		size_t t = cut;
		/* a truncation inside a character is cut back to its start */
		if (n > cut)
			while (t > 0 && ((unsigned char)buf[t] & 0xc0) == 0x80)
				t--;
		if ((text = json_stringn(buf, t)) != NULL)
			cut = t;
	}
	if (text == NULL) {
		size_t bl = sodium_base64_encoded_len(cut, sodium_base64_VARIANT_ORIGINAL);
		if ((b64 = malloc(bl)) == NULL)
			goto oom;
		sodium_bin2base64(b64, bl, (unsigned char *)buf, cut, sodium_base64_VARIANT_ORIGINAL);
		text = json_string(b64);
		enc = "base64";
	}
	out = json_pack("{s:s,s:I,s:I,s:s,s:o,s:b}", "path", path,
	    "size", (json_int_t)(n > (size_t)max ? size : (json_int_t)n),
	    "returned_bytes", (json_int_t)cut, "encoding", enc, "content", text,
	    "truncated", n > cut);
	goto out;
oom:
	mcp_fail(x, "read_file: %s", strerror(errno ? errno : ENOMEM));
out:
	if (fd >= 0)
		close(fd);
	free(q);
	free(buf);
	free(b64);
	space_answer_clear(&a);
	return out;
}

json_t *
mcp_write_file(struct mcp_ctx *x, json_t *args)
{
	const char *sbx = mcp_jstr(args, "sandbox"), *path = mcp_jstr(args, "path");
	const char *enc = mcp_jstr(args, "encoding") ? mcp_jstr(args, "encoding") : "text";
	const json_t *content = json_object_get(args, "content");
	struct space_data_op op;
	struct space_answer a;
	unsigned char *bin = NULL;
	const void *data;
	size_t len, blen = 0;
	json_t *out = NULL, *body;
	char *q = NULL, *dir = NULL, *slash;
	int fd = -1;

	space_answer_init(&a);
	data = json_string_value(content);
	len = json_string_length(content);
	if (strcmp(enc, "base64") == 0) {
		if ((bin = malloc(len / 4 * 3 + 3)) == NULL)
			goto oom;
		if (sodium_base642bin(bin, len / 4 * 3 + 3, data, len, " \r\n", &blen, NULL,
		    sodium_base64_VARIANT_ORIGINAL) != 0) {
			mcp_fail(x, "write_file: content is not standard base64");
			goto out;
		}
		data = bin;
		len = blen;
	}
	if (len > SPACE_MCP_FILE_MAX) {
		mcp_fail(x, "write_file: %zu bytes; write_file takes at most %u", len,
		    SPACE_MCP_FILE_MAX);
		goto out;
	}
	if (json_is_true(json_object_get(args, "make_parents")) &&
	    (slash = strrchr(path, '/')) != NULL && slash != path) {
		if ((dir = strndup(path, (size_t)(slash - path))) == NULL)
			goto oom;
		body = json_pack("{s:s,s:b}", "path", dir, "parents", 1);
		mcp_op_init(&op, "fs:w", "POST", "fs/mkdir");
		op.body = body;
		if (mcp_data_op(x, "write_file (making its directory)", sbx, &op, &a) != 0) {
			json_decref(body);
			goto out;
		}
		json_decref(body);
		space_answer_clear(&a);
	}
	if ((fd = memfd("write_file")) < 0 || fd_write_all(fd, data, len) != 0 ||
	    lseek(fd, 0, SEEK_SET) != 0)
		goto oom;
	if ((q = mcp_path_query("files", path, mcp_jstr(args, "mode"))) == NULL)
		goto oom;
	mcp_op_init(&op, "fs:w", "PUT", q);
	op.in_fd = fd;
	op.timeout = 0;
	if (mcp_data_op(x, "write_file", sbx, &op, &a) != 0)
		goto out;
	out = json_pack("{s:s,s:I}", "path", path, "size", json_is_integer(json_object_get(a.body,
	    "size")) ? json_integer_value(json_object_get(a.body, "size")) : (json_int_t)len);
	goto out;
oom:
	mcp_fail(x, "write_file: %s", strerror(errno ? errno : ENOMEM));
out:
	if (fd >= 0)
		close(fd);
	free(bin);
	free(q);
	free(dir);
	space_answer_clear(&a);
	return out;
}

json_t *
mcp_list_dir(struct mcp_ctx *x, json_t *args)
{
	const char *sbx = mcp_jstr(args, "sandbox"), *path = mcp_jstr(args, "path");
	struct space_data_op op;
	struct space_answer a;
	json_t *out = NULL;
	char *q;

	space_answer_init(&a);
	if ((q = mcp_path_query("fs/list", path, NULL)) == NULL)
		return mcp_fail(x, "list_dir: out of memory");
	mcp_op_init(&op, "fs:r", "GET", q);
	if (mcp_data_op(x, "list_dir", sbx, &op, &a) == 0) {
		if (!json_is_array(json_object_get(a.body, "entries")))
			mcp_fail(x, "list_dir: malformed answer");
		else
			out = json_pack("{s:s,s:O}", "path", path, "entries",
			    json_object_get(a.body, "entries"));
	}
	free(q);
	space_answer_clear(&a);
	return out;
}
