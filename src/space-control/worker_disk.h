/* Disk use reported by the workers' heartbeats (worker_disk.c). */
#ifndef SPACE_CONTROL_WORKER_DISK_H
#define SPACE_CONTROL_WORKER_DISK_H
#include <jansson.h>

struct req;
/* {"layers","run","snapshots"} exactly, each 0..2^53; else 400 sent */
int worker_disk_parse(struct req *r, json_t *d, json_int_t out[3]);
void worker_disk_set(const char *worker, const json_int_t v[3]);
/* adds "disk" to each worker object of the array that reported one */
void worker_disk_annotate(json_t *workers);
#endif
