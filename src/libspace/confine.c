#include "confine.h"

#include <errno.h>
#include <linux/filter.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int
confine_add_names(scmp_filter_ctx ctx, const char *const *names, uint32_t action)
{
	int r, nr;

	for (size_t i = 0; names[i]; i++) {
		nr = seccomp_syscall_resolve_name(names[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;       /* not on this architecture */
		if ((r = seccomp_rule_add(ctx, action, nr, 0)) < 0)
			return r;
	}
	return 0;
}

scmp_filter_ctx
confine_threads_only(const char *const *names, int *err)
{
	scmp_filter_ctx ctx;
	int r;

	if ((ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM))) == NULL) {
		*err = -ENOMEM;
		return NULL;
	}
	if ((r = confine_add_names(ctx, names, SCMP_ACT_ALLOW)) == 0 &&
	    (r = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(clone), 1,
	    SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD))) == 0)
		r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (r < 0) {
		seccomp_release(ctx);
		*err = r;
		return NULL;
	}
	return ctx;
}

/* ctx exported as BPF into out as C, the array NAME and its length
 * NAME_len. 0 or -errno. */
static int
export_c(FILE *out, const char *name, scmp_filter_ctx ctx)
{
	char *buf = NULL;
	size_t len = 0, n;
	FILE *mem;
	int r, fd;

	/* seccomp_export_bpf writes to a descriptor: a memory stream's is not
	 * one, so a pipe-free temporary file */
	char tmpl[] = "/tmp/filter_gen.XXXXXX";
	if ((fd = mkstemp(tmpl)) < 0)
		return -errno;
	unlink(tmpl);
	if ((r = seccomp_export_bpf(ctx, fd)) < 0) {
		close(fd);
		return r;
	}
	if (lseek(fd, 0, SEEK_SET) != 0 || (mem = fdopen(fd, "rb")) == NULL) {
		close(fd);
		return -errno;
	}
	for (;;) {
		char *nb;
		if ((nb = realloc(buf, len + 4096)) == NULL) {
			free(buf);
			fclose(mem);
			return -ENOMEM;
		}
		buf = nb;
		if ((n = fread(buf + len, 1, 4096, mem)) == 0)
			break;
		len += n;
	}
	fclose(mem);
	if (len == 0 || len % sizeof(struct sock_filter) != 0 ||
	    len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		free(buf);
		return -EINVAL;
	}
	fprintf(out, "const struct sock_filter %s[] = {\n", name);
	for (size_t i = 0; i < len / sizeof(struct sock_filter); i++) {
		struct sock_filter f;
		memcpy(&f, buf + i * sizeof(f), sizeof(f));
		fprintf(out, "\t{ 0x%04x, %u, %u, 0x%08x },\n", f.code, f.jt, f.jf, f.k);
	}
	fprintf(out, "};\nconst unsigned short %s_len = %zu;\n\n", name,
	    len / sizeof(struct sock_filter));
	free(buf);
	return 0;
}

int
confine_gen_file(const char *path, const char *head, size_t n,
    const char *const name[], scmp_filter_ctx ctx[])
{
	char tmp[4096];
	FILE *out;
	size_t i;
	int r = 0;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp) ||
	    (out = fopen(tmp, "w")) == NULL) {
		fprintf(stderr, "filter_gen: cannot write %s.tmp\n", path);
		r = -1;
	} else {
		fputs(head, out);
		for (i = 0; i < n && r == 0; i++)
			if ((r = export_c(out, name[i], ctx[i])) < 0)
				fprintf(stderr, "filter_gen: cannot export %s: %s\n", name[i],
				    strerror(-r));
		if (fclose(out) != 0 && r == 0) {
			fprintf(stderr, "filter_gen: cannot write %s: %s\n", tmp, strerror(errno));
			r = -1;
		}
		if (r == 0 && rename(tmp, path) != 0) {
			fprintf(stderr, "filter_gen: cannot rename to %s: %s\n", path, strerror(errno));
			r = -1;
		}
		if (r != 0)
			unlink(tmp);
	}
	for (i = 0; i < n; i++)
		seccomp_release(ctx[i]);
	return r == 0 ? 0 : 1;
}
