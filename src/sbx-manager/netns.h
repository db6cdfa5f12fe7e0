/* The network namespace of an execution, kept across its activations
 * (netns.c, docs/network.md). */
#ifndef SBX_MANAGER_NETNS_H
#define SBX_MANAGER_NETNS_H
#include <stdbool.h>
#include <stddef.h>

struct record;

/* is path a bind of a network namespace? its inode in *ino when ino is
 * not NULL */
bool netns_bound(const char *path, unsigned long *ino);
/* RUNDIR/netns */
void netns_path(const struct record *r, char *out, size_t cap);
/* the execution's namespace, made if it is not held yet; its path in
 * out. 0 or -errno. */
int netns_ensure(const struct record *r, char *out, size_t cap);
/* an fd of the held namespace (O_CLOEXEC), or -errno */
int netns_open(const struct record *r);
/* the execution ended: the namespace is let go (it ends with the last
 * process and interface in it); idempotent */
void netns_release(const struct record *r);
void netns_release_dir(const char *run_dir);

struct mgr;
/* netnspool.c: namespaces made ahead of creates. start: wipe the pool
 * directory, start the thread that fills it (nothing when cfg.netns_pool
 * is 0); claim: bind a pooled namespace onto dst (an existing empty file)
 * and remove it from the pool, 0 or -errno (-ENOENT: the pool is empty);
 * stop: unbind what the pool holds */
void netnspool_start(struct mgr *m);
int netnspool_claim(const char *dst);
void netnspool_stop(void);
#endif
