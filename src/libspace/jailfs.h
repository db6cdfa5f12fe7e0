/* What of the host's file system a jail sees (docs/jail.md, "The base
 * namespace"): the system directories bound read-only into its root, the
 * few /etc files programs need to start, and the device nodes of its /dev.
 * spaced-host binds them into each jail's root; sbx-manager builds the
 * jails' base mount namespace of exactly these, so the two cannot drift.
 * Each list ends with NULL. */
#ifndef SPACE_JAILFS_H
#define SPACE_JAILFS_H

/* directories (or, with a merged /usr, symlinks to them) */
extern const char *const jailfs_sys[];
/* the loader cache, the alternatives symlinks Debian's /usr/bin points
 * into, name service switch and time zone: nothing with secrets (no
 * shadow, no ssh) */
extern const char *const jailfs_etc[];
/* names under /dev: a few harmless character devices */
extern const char *const jailfs_dev[];

#endif
