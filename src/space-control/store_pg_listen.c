/* Wake-ups across replicas on the PostgreSQL backend. Every transaction
 * that adds an assignment sends NOTIFY space_assignments (store_pg_rows.c,
 * delivered when it commits); this listener holds a connection of its own
 * that LISTENs on that channel and calls the daemon's wake() for each
 * batch of notifications, so a worker's long-poll on one replica returns
 * as soon as another replica committed its assignment, without looking at
 * the table meanwhile.
 *
 * A notification sent while the listener was not connected is lost to
 * it: whenever it (re)connects it calls wake() once, and the long-polls
 * read the store again. While it is not connected, pg_listening() is
 * false and the long-polls fall back to looking at the store in short
 * slices, as on SQLite. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libpq-fe.h>

#include "log.h"
#include "store_pg.h"

#define LISTEN_CHANNEL  "space_assignments"
#define LISTEN_SLICE_MS 500     /* how often the thread looks at its stop flag */

static PGconn *
listen_dial(struct pgs *q)
{
	PGconn *conn = pg_dial(q->conninfo);
	PGresult *res;

	if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
		PQfinish(conn);
		return NULL;
	}
	res = PQexec(conn, "LISTEN " LISTEN_CHANNEL);
	if (PQresultStatus(res) != PGRES_COMMAND_OK || PQsetnonblocking(conn, 1) != 0) {
		PQclear(res);
		PQfinish(conn);
		return NULL;
	}
	PQclear(res);
	return conn;
}

static void *
listen_main(void *arg)
{
	struct pgs *q = arg;
	PGconn *conn = NULL;
	PGnotify *nf;
	struct pollfd p;
	bool warned = false;
	unsigned got;
	int i;

	while (!__atomic_load_n(&q->lstop, __ATOMIC_ACQUIRE)) {
		if (conn == NULL) {
			if ((conn = listen_dial(q)) == NULL) {
				if (!warned)
					log_warnx("store: postgresql: cannot listen for other replicas'"
					    " assignments; long-polls look at the store meanwhile");
				warned = true;
				for (i = 0; i < 2 && !__atomic_load_n(&q->lstop, __ATOMIC_ACQUIRE); i++)
					usleep(LISTEN_SLICE_MS * 1000);
				continue;
			}
			log_info("store: postgresql: listening for other replicas' assignments");
			warned = false;
			__atomic_store_n(&q->listening, 1, __ATOMIC_RELEASE);
			q->wake(q->wake_arg, 0);        /* what was committed meanwhile */
		}
		p.fd = PQsocket(conn);
		p.events = POLLIN;
		p.revents = 0;
		if (poll(&p, 1, LISTEN_SLICE_MS) <= 0)
			continue;
		got = 0;
		if (PQconsumeInput(conn) == 1) {
			while ((nf = PQnotifies(conn)) != NULL) {
				got++;
				PQfreemem(nf);
			}
		}
		if (got > 0)
			q->wake(q->wake_arg, got);
		if (PQstatus(conn) != CONNECTION_OK || (p.revents & (POLLHUP | POLLERR))) {
			__atomic_store_n(&q->listening, 0, __ATOMIC_RELEASE);
			log_warnx("store: postgresql: the listening connection was lost; dialling again");
			PQfinish(conn);
			conn = NULL;
		}
	}
	__atomic_store_n(&q->listening, 0, __ATOMIC_RELEASE);
	PQfinish(conn);
	return NULL;
}

int
pg_listen(struct store *s, void (*wake)(void *, unsigned), void *arg)
{
	struct pgs *q = PGS(s);
	int rc;

	if (q->lstarted)
		return -EALREADY;
	q->wake = wake;
	q->wake_arg = arg;
	q->lstop = 0;
	if ((rc = pthread_create(&q->lthread, NULL, listen_main, q)) != 0)
		return -rc;
	q->lstarted = true;
	return 0;
}

bool
pg_listening(struct store *s)
{
	return __atomic_load_n(&PGS(s)->listening, __ATOMIC_ACQUIRE) != 0;
}

void
pg_listen_stop(struct pgs *q)
{
	if (!q->lstarted)
		return;
	__atomic_store_n(&q->lstop, 1, __ATOMIC_RELEASE);
	pthread_join(q->lthread, NULL);
	q->lstarted = false;
}
