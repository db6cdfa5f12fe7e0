/* What of the host's file system a jail sees (docs/jail.md, "The base
 * namespace"): the system directories bound read-only into its root, the
 * few /etc files programs need to start, and the device nodes of its /dev.
 * spaced-host binds them into each jail's root; sbx-manager builds the
 * jails' base mount namespace of exactly these, so the two cannot drift.
 * Each list ends with NULL. */
#ifndef SPACE_JAILFS_H
#define SPACE_JAILFS_H

/* the mount points of the jails' base namespace that spaced-host uses:
 * where the child assembles the new root, and where this jail's own layer
 * and template root are moved in (sbx-manager jailbase.c makes them) */
#define JAILFS_ASSEMBLY "/tmp"
#define JAILFS_LAYER    "/layer"
#define JAILFS_TEMPLATE "/template"

/* directories (or, with a merged /usr, symlinks to them) */
extern const char *const jailfs_sys[];
/* the loader cache, the alternatives symlinks Debian's /usr/bin points
 * into, name service switch and time zone: nothing with secrets (no
 * shadow, no ssh) */
extern const char *const jailfs_etc[];
/* names under /dev: a few harmless character devices */
extern const char *const jailfs_dev[];

#endif
