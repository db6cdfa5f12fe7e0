/* A template's defaults for every operation (docs/templates.md): the
 * image's TPL_META_PATH names the user, the working directory and the
 * environment. The file is read once, by PID 1 after the challenge, with
 * the same strictness as a request (tpl_meta_parse, fuzzed): it is
 * inside the jail, and the
 * sandbox's root may have rewritten it in its upper layer (that only
 * changes defaults of its own sandbox: any uid here is unprivileged). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest.h"
#include "log.h"
#include "tplimage.h"

struct tpl_meta guest_tpl = { false, GUEST_USER_UID, GUEST_USER_GID, NULL, NULL, 0 };

int
guest_template_load(void)
{
	char *buf;
	ssize_t n;
	size_t got = 0;
	int fd, r;

	struct stat st;

	/* not blocking on a FIFO planted in place of the file (the upper
	 * layer is the sandbox's): only a regular file is read */
	if ((fd = open(TPL_META_PATH, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0)
		return errno == ENOENT ? 0 : -errno;    /* host: no template file */
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	if ((buf = malloc(TPL_META_MAX + 1)) == NULL) {
		close(fd);
		return -ENOMEM;
	}
	while (got <= TPL_META_MAX && (n = read(fd, buf + got, TPL_META_MAX + 1 - got)) != 0) {
		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out;
		}
		got += (size_t)n;
		if (got == TPL_META_MAX + 1)
			break;
	}
	r = tpl_meta_parse(buf, got, &guest_tpl);
out:
	free(buf);
	close(fd);
	return r;
}
