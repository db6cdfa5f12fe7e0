/* space template: building images (template_build.c) and storing them
 * in the control plane (cmd_template.c). docs/templates.md. */
#ifndef SPACE_TEMPLATE_H
#define SPACE_TEMPLATE_H
#include <stdbool.h>
#include <jansson.h>
#include "tplimage.h"

/* run argv (argv[0] looked up in PATH), as uid/gid when as_uid >= 0;
 * 0 when it exits 0, else 1 after printing why */
int tpl_run(const char *verb, char *const argv[], long as_uid);
/* the Debian mirror of this machine's apt sources (the first that is not
 * a security archive): malloc'd URL or NULL */
char *tpl_apt_mirror(void);
/* write meta as ROOT/.space/template.json, replacing whatever the tree
 * had there (never through a link it planted); 0 or 1 after printing */
int tpl_write_meta(const char *verb, const char *root, json_t *meta);
/* uid and gid of user ("NAME", "UID" or "UID:GID") in ROOT/etc/passwd
 * (read without leaving ROOT); 0 or 1 after printing */
int tpl_resolve_user(const char *verb, const char *root, const char *user, long *uid, long *gid);
/* remove device nodes, fifos and sockets, clear set-id bits, in ROOT
 * (links are never followed); counts of each */
int tpl_neutralise(const char *root, unsigned *devices, unsigned *setid);
/* squashfs of ROOT at IMG (reproducible: fixed times, no xattrs; all
 * files root's when all_root); 0 or 1 after printing */
int tpl_squash(const char *verb, const char *root, const char *img, bool all_root);
/* rm -rf without following links; 0 or -errno */
int tpl_rmtree(const char *path);
/* space template import: an OCI layout or docker-save archive to ROOT and
 * meta; 0 or 1 after printing */
int tpl_import_tree(const char *verb, const char *file, const char *work, const char *root,
    json_t *meta);
#endif
