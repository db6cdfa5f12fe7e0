/* A file answered from the disk (an archive, a template image) */
#ifndef SPACE_CONTROL_FILEBODY_H
#define SPACE_CONTROL_FILEBODY_H

#include <stdbool.h>
#include <stdint.h>
#include <microhttpd.h>

/* The response for the whole of fd (owned from here, closed by the
 * response or here on failure), or NULL. */
struct MHD_Response *filebody_response(int fd, uint64_t size);

/* The same, read with O_DIRECT where the file system takes it (direct) or
 * through the page cache (what filebody_response does where O_DIRECT is
 * refused). */
struct MHD_Response *filebody_response_from(int fd, uint64_t size, bool direct);

#endif
