/* A hash computed on a thread of its own, beside the thread that reads
 * the bytes: the reader reads (or gathers) each piece into a slot of a
 * small ring, hands it over, and reads the next into the next slot while
 * the piece before is hashed; a slot is given out again only once its
 * piece was hashed, and pieces are hashed in the order they were handed
 * over. So the hash is of exactly the bytes the reader used, as if it had
 * hashed them itself, while hashing overlaps the reader's other work
 * (decompressing and extracting an archive being restored, receiving and
 * writing an upload). Memory: slots * slot bytes, bounded by the caller.
 *
 * The hash state is the caller's; while the thread runs only the thread
 * touches it, and hashaside_end (after which the caller may finalize it)
 * returns once every piece handed over was hashed and the thread ended. */
#ifndef SPACE_HASHASIDE_H
#define SPACE_HASHASIDE_H

#include <stddef.h>

struct hashaside;

/* NULL when the thread cannot start (no memory, no thread): the caller
 * hashes on its own thread then, as before */
struct hashaside *hashaside_start(void (*update)(void *h, const void *p, size_t n), void *h,
    size_t slot_bytes, unsigned slots);
/* the slot the next piece goes into (slot_bytes long), once it is free */
unsigned char *hashaside_slot(struct hashaside *a);
/* the piece of n bytes now in that slot: to the hash */
void hashaside_put(struct hashaside *a, size_t n);
/* every piece put hashed, the thread gone, a freed; NULL does nothing */
void hashaside_end(struct hashaside *a);

#endif
