/* GET /openapi.json: the OpenAPI 3.0 document of this API, built into the
 * binary (the build turns docs/openapi/space-control.json into C with
 * scripts/embed.sh, in build/gen/), so the daemon needs no file beside it
 * and the document served is the one the binary was built with.
 * Unauthenticated: it describes the API, it holds no data. */
#include <stdlib.h>
#include <string.h>

#include "api_common.h"

extern const char space_control_openapi[];
extern const size_t space_control_openapi_len;

void
api_openapi(struct req *r)
{
	char *t = strndup(space_control_openapi, space_control_openapi_len);

	if (t == NULL) {
		reply_error(r, 500, "internal", "out of memory");
		return;
	}
	reply_text(r, 200, t, "application/json");
}
