/* What of the host's file system a jail sees (jailfs.h). */
#include <stddef.h>

#include "jailfs.h"

const char *const jailfs_sys[] = {
	"/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", NULL
};

const char *const jailfs_etc[] = {
	"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d",
	"/etc/alternatives", "/etc/nsswitch.conf", "/etc/localtime",
	"/etc/protocols", "/etc/services", "/etc/mime.types", NULL
};

const char *const jailfs_dev[] = {
	"null", "zero", "full", "random", "urandom", "tty", NULL
};
