/* A template as the read-only lower layer of the jail's root (template.c). */
#ifndef SPACED_HOST_TEMPLATE_H
#define SPACED_HOST_TEMPLATE_H
#include <stdbool.h>

#include "substrate.h"

struct tpl_mount {
	char ro[1100];          /* RUNDIR/tpl: the image, as the kernel reads it */
	char lower[1100];       /* RUNDIR/lower: the same, ids shifted to the sandbox's range */
	char root[1100];        /* RUNDIR/root: overlay(lower, LAYER/upper) */
	bool ro_mounted, lower_mounted, root_mounted;
};

/* cfg->template_name is a digest: verify cfg->template_image against it
 * (bytes read from the descriptor that is then attached to the loop
 * device), mount it read-only, nodev, nosuid, shift its ids to the
 * sandbox's range and mount the overlay whose upper layer is rw/upper of
 * the mounted writable layer at layer_rw. 0 or -errno (-EBADMSG: the
 * image is not the one named); on failure call template_unmount. */
int  template_mount(struct tpl_mount *t, const struct substrate_config *cfg, const char *layer_rw);
void template_adopt(struct tpl_mount *t, const struct substrate_config *cfg);
void template_unmount(struct tpl_mount *t);
#endif
