/* Templates stored by the control plane (templates.c). */
#ifndef SPACE_CONTROL_TEMPLATES_H
#define SPACE_CONTROL_TEMPLATES_H
#include "tplimage.h"

struct ctl;

/* the digest a template name stands for: 0, -ENOENT, -EIO */
int templates_resolve(const struct ctl *c, const char *name, char digest[TPL_DIGEST_HEX + 1]);
/* remove the images nothing references (templates.c): the number removed */
int templates_collect(struct ctl *c);
/* remove the snapshot archives nothing references (archive_blobs.c) */
int archive_blobs_collect(struct ctl *c);
#endif
