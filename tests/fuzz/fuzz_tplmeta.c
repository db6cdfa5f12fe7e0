/* The template metadata decoder (libspace/tplmeta.c): bytes the sandbox
 * controls (its upper layer may rewrite /.space/template.json). */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "tplimage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tpl_meta m;
	size_t i;

	if (tpl_meta_parse((const char *)data, size, &m) == 0) {
		/* what the guest relies on: ids in range, "K=V" entries */
		if (m.uid > 65534 || m.gid > 65534 || (m.workdir && m.workdir[0] != '/'))
			__builtin_trap();
		for (i = 0; i < m.nenv; i++)
			if (strchr(m.env[i], '=') == NULL || m.env[i][0] == '=')
				__builtin_trap();
		tpl_meta_free(&m);
	}
	return 0;
}
