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

struct mgr_leases {
	pthread_mutex_t lock;
	struct lease *head;
	unsigned n;
};

int
lease_init(struct mgr *m)
{
	struct mgr_leases *ls = calloc(1, sizeof(*ls));

	if (ls == NULL)
		return -ENOMEM;
	pthread_mutex_init(&ls->lock, NULL);
	m->leases = ls;
	return bpool_init(m);
}

struct lease *
lease_add(struct mgr *m, const struct route_identity *id, uint64_t epoch, int cfd, int bfd)
{
	struct mgr_leases *ls = m->leases;
	struct lease *l = calloc(1, sizeof(*l));

	if (l == NULL)
		return NULL;
	l->id = *id;
	l->epoch = epoch;
	l->cfd = cfd;
	l->bfd = bfd;
	pthread_mutex_lock(&ls->lock);
	/* one sandbox cannot take every relay thread of the worker */
	{
		struct lease *o;
		unsigned n = 0;

		for (o = ls->head; o; o = o->next)
			if (strcmp(o->id.sandbox, id->sandbox) == 0)
				n++;
		if (n >= SPACE_STREAMS_PER_SBX) {
			pthread_mutex_unlock(&ls->lock);
			free(l);
			errno = EBUSY;
			return NULL;
		}
	}
	l->next = ls->head;
	if (ls->head)
		ls->head->prev = l;
	ls->head = l;
	ls->n++;
	pthread_mutex_unlock(&ls->lock);
	return l;
}

void
lease_remove(struct mgr *m, struct lease *l)
{
	struct mgr_leases *ls = m->leases;

	if (l == NULL)
		return;
	pthread_mutex_lock(&ls->lock);
	if (l->prev)
		l->prev->next = l->next;
	else
		ls->head = l->next;
	if (l->next)
		l->next->prev = l->prev;
	ls->n--;
	pthread_mutex_unlock(&ls->lock);
	free(l);
}

void
lease_set_bridge(struct mgr *m, struct lease *l, int bfd)
{
	struct mgr_leases *ls = m->leases;

	pthread_mutex_lock(&ls->lock);
	l->bfd = bfd;
	pthread_mutex_unlock(&ls->lock);
}

bool
lease_cancelled(struct mgr *m, struct lease *l)
{
	struct mgr_leases *ls = m->leases;
	bool c;

	pthread_mutex_lock(&ls->lock);
	c = l->cancelled;
	pthread_mutex_unlock(&ls->lock);
	return c;
}

unsigned
lease_cancel_before(struct mgr *m, const char *sandbox, uint64_t epoch)
{
	struct mgr_leases *ls = m->leases;
	struct lease *l;
	unsigned n = 0;

	pthread_mutex_lock(&ls->lock);
	for (l = ls->head; l; l = l->next) {
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
	pthread_mutex_unlock(&ls->lock);
	/* kept bridge connections of the old execution go too (bridgepool.c
	 * would refuse them anyway: their epoch is older) */
	bpool_drop(m, sandbox);
	return n;
}

unsigned
lease_count(struct mgr *m)
{
	struct mgr_leases *ls = m->leases;
	unsigned n;

	pthread_mutex_lock(&ls->lock);
	n = ls->n;
	pthread_mutex_unlock(&ls->lock);
	return n;
}
