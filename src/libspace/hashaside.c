/* A hash on a thread of its own (hashaside.h) */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "hashaside.h"

struct hashaside {
	pthread_t t;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	void (*update)(void *h, const void *p, size_t n);
	void *h;
	unsigned slots;
	unsigned head;          /* the slot given out next */
	unsigned count;         /* slots put and not hashed yet (those before head) */
	bool stop;              /* hash what is left, then end */
	size_t slot_bytes;
	size_t *len;
	unsigned char *buf;
};

static void *
aside_main(void *arg)
{
	struct hashaside *a = arg;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		unsigned slot;

		while (a->count == 0 && !a->stop)
			pthread_cond_wait(&a->cv, &a->mu);
		if (a->count == 0)
			break;          /* stopped, and nothing is left */
		slot = (a->head + a->slots - a->count) % a->slots;
		pthread_mutex_unlock(&a->mu);
		a->update(a->h, a->buf + (size_t)slot * a->slot_bytes, a->len[slot]);
		pthread_mutex_lock(&a->mu);
		a->count--;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

static void
aside_free(struct hashaside *a)
{
	free(a->buf);
	free(a->len);
	free(a);
}

struct hashaside *
hashaside_start(void (*update)(void *h, const void *p, size_t n), void *h, size_t slot_bytes,
    unsigned slots)
{
	struct hashaside *a;
	pthread_attr_t at;
	int r;

	if (slots < 2 || slot_bytes == 0 || (a = calloc(1, sizeof(*a))) == NULL)
		return NULL;
	a->update = update;
	a->h = h;
	a->slots = slots;
	a->slot_bytes = slot_bytes;
	if ((a->len = calloc(slots, sizeof(*a->len))) == NULL ||
	    (a->buf = malloc((size_t)slots * slot_bytes)) == NULL) {
		aside_free(a);
		return NULL;
	}
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	/* the hash functions need little stack */
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, 256u << 10);
	r = pthread_create(&a->t, &at, aside_main, a);
	pthread_attr_destroy(&at);
	if (r != 0) {
		pthread_cond_destroy(&a->cv);
		pthread_mutex_destroy(&a->mu);
		aside_free(a);
		return NULL;
	}
	return a;
}

unsigned char *
hashaside_slot(struct hashaside *a)
{
	unsigned char *p;

	pthread_mutex_lock(&a->mu);
	while (a->count == a->slots)
		pthread_cond_wait(&a->cv, &a->mu);
	p = a->buf + (size_t)a->head * a->slot_bytes;
	pthread_mutex_unlock(&a->mu);
	return p;
}

void
hashaside_put(struct hashaside *a, size_t n)
{
	pthread_mutex_lock(&a->mu);
	a->len[a->head] = n;
	a->head = (a->head + 1) % a->slots;
	a->count++;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

void
hashaside_end(struct hashaside *a)
{
	if (a == NULL)
		return;
	pthread_mutex_lock(&a->mu);
	a->stop = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
	pthread_join(a->t, NULL);
	pthread_cond_destroy(&a->cv);
	pthread_mutex_destroy(&a->mu);
	aside_free(a);
}
