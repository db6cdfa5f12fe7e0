/* Stream leases (DESIGN section 7). Every relayed operation holds a lease
 * {sandbox, generation, activation, epoch}. Installing a replacement or
 * retiring bumps the record's epoch and cancels the leases of older
 * epochs: both sockets of the relay are shut down so no more input reaches
 * the old execution and no more output reaches the client; the relay
 * thread then tells the client CANCEL {"reason":"execution_replaced"}. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "sbx-manager.h"

struct lease {
	struct route_identity id;
	uint64_t epoch;
	int cfd, bfd;
	bool cancelled;
	struct lease *next, *prev;
};

static pthread_mutex_t lease_lock = PTHREAD_MUTEX_INITIALIZER;
static struct lease *leases;
static unsigned nleases;

struct lease *
lease_add(const struct route_identity *id, uint64_t epoch, int cfd, int bfd)
{
	struct lease *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->id = *id;
	l->epoch = epoch;
	l->cfd = cfd;
	l->bfd = bfd;
	pthread_mutex_lock(&lease_lock);
	/* one sandbox cannot take every relay thread of the worker */
	{
		struct lease *o;
		unsigned n = 0;

		for (o = leases; o; o = o->next)
			if (strcmp(o->id.sandbox, id->sandbox) == 0)
				n++;
		if (n >= SPACE_STREAMS_PER_SBX) {
			pthread_mutex_unlock(&lease_lock);
			free(l);
			errno = EBUSY;
			return NULL;
		}
	}
	l->next = leases;
	if (leases)
		leases->prev = l;
	leases = l;
	nleases++;
	pthread_mutex_unlock(&lease_lock);
	return l;
}

void
lease_remove(struct lease *l)
{
	if (l == NULL)
		return;
	pthread_mutex_lock(&lease_lock);
	if (l->prev)
		l->prev->next = l->next;
	else
		leases = l->next;
	if (l->next)
		l->next->prev = l->prev;
	nleases--;
	pthread_mutex_unlock(&lease_lock);
	free(l);
}

void
lease_set_bridge(struct lease *l, int bfd)
{
	pthread_mutex_lock(&lease_lock);
	l->bfd = bfd;
	pthread_mutex_unlock(&lease_lock);
}

bool
lease_cancelled(struct lease *l)
{
	bool c;

	pthread_mutex_lock(&lease_lock);
	c = l->cancelled;
	pthread_mutex_unlock(&lease_lock);
	return c;
}

unsigned
lease_cancel_before(const char *sandbox, uint64_t epoch)
{
	struct lease *l;
	unsigned n = 0;

	pthread_mutex_lock(&lease_lock);
	for (l = leases; l; l = l->next) {
		if (l->cancelled || strcmp(l->id.sandbox, sandbox) != 0 || l->epoch >= epoch)
			continue;
		l->cancelled = true;
		/* the fds stay open (the relay thread owns them and closes them
		 * after removing its lease, under this lock), so shutting them
		 * down here cannot hit a reused descriptor */
		if (l->bfd >= 0)
			shutdown(l->bfd, SHUT_RDWR);
		shutdown(l->cfd, SHUT_RD);
		n++;
	}
	pthread_mutex_unlock(&lease_lock);
	return n;
}

unsigned
lease_count(void)
{
	unsigned n;

	pthread_mutex_lock(&lease_lock);
	n = nleases;
	pthread_mutex_unlock(&lease_lock);
	return n;
}
