/* Checkpoints of an SQLite WAL off the commit path.
 *
 * SQLite's automatic checkpoint runs inside the commit that crosses its
 * threshold: that commit (a create, a record of a bridge) also writes the
 * WAL's pages back into the database and syncs it, several times its own
 * cost, and it is the request at the tail of every latency figure. Here the
 * commit only signals (its WAL hook), and a thread with a connection of its
 * own runs a PASSIVE checkpoint, which takes no lock a writer needs: the
 * writers go on meanwhile, and the next one after a complete checkpoint
 * starts the WAL over. Durability is unchanged: every commit is in the
 * synced WAL before it returns, as before. */
#ifndef SPACE_WALCP_H
#define SPACE_WALCP_H
#include <sqlite3.h>

struct walcp;

/* the WAL size that starts a checkpoint: SQLite's own default */
#define WALCP_PAGES 1000

/* db: the connection whose commits grow the WAL of the file at path;
 * pages: the WAL size (frames) that starts a checkpoint (WALCP_PAGES). Replaces db's
 * automatic checkpoint. NULL (the automatic checkpoint left as it was)
 * if the thread or its connection cannot be had. */
struct walcp *walcp_start(sqlite3 *db, const char *path, int pages);
/* ends the thread and its connection; before db is closed. NULL: nothing */
void walcp_stop(struct walcp *w);
/* checkpoints the thread ran (complete or partial); *inline_runs (if not
 * NULL): those commits ran themselves, the WAL being far behind */
unsigned long walcp_runs(const struct walcp *w, unsigned long *inline_runs);
#endif
