/* A file answered from the disk (an archive, a template image) */
#ifndef SPACE_CONTROL_FILEBODY_H
#define SPACE_CONTROL_FILEBODY_H

#include <stdint.h>
#include <microhttpd.h>

/* The response for the whole of fd (owned from here, closed by the
 * response or here on failure), or NULL. */
struct MHD_Response *filebody_response(int fd, uint64_t size);

#endif
