/* space workers: GET /v1/workers (user endpoint, API key) */
#include <stdio.h>

#include <jansson.h>

#include "space.h"

#define USAGE "[--json]\n" \
	"  List the workers: id, endpoint, state, capacity, sandboxes placed; for\n" \
	"  memory (MiB), cpu (percent of one CPU) and writable layers (MiB) what\n" \
	"  the sandboxes placed ask / what the worker reported (- : not reported);\n" \
	"  and the disk the worker uses for layers and run directories (DISK) and\n" \
	"  its snapshot store (STORE), as its last heartbeat said."

/* bytes as MiB, or "-" when the worker did not report it */
static void
mib(char *out, size_t cap, const json_t *disk, const char *k)
{
	json_t *v = json_object_get(disk, k);

	if (json_is_integer(v))
		snprintf(out, cap, "%lldM", (long long)(json_integer_value(v) >> 20));
	else
		snprintf(out, cap, "-");
}

/* "used/total" of one resource */
static void
res_cell(char *buf, size_t cap, const json_t *w, const char *k)
{
	json_t *t = json_object_get(json_object_get(w, "resources"), k);
	json_t *u = json_object_get(json_object_get(w, "used"), k);

	if (!json_is_integer(t) || json_integer_value(t) <= 0)
		snprintf(buf, cap, "%lld/-", (long long)json_integer_value(u));
	else
		snprintf(buf, cap, "%lld/%lld", (long long)json_integer_value(u),
		    (long long)json_integer_value(t));
}

static void
print_workers(const json_t *list, const char *arg)
{
	json_t *w, *d;
	size_t i;
	char cap[32], n[32], layers[32], store[32], mem[48], cpu[48], disk[48];

	printf("%-12s %-28s %-10s %-8s %-9s %-13s %-11s %-15s %-8s %s\n", "ID", "ENDPOINT",
	    "STATE", "CAPACITY", "SANDBOXES", "MEMORY", "CPU", "LAYERS", "DISK", "STORE");
	json_array_foreach(list, i, w) {
		long long lr = 0;

		cli_jscalar(cap, sizeof(cap), json_object_get(w, "capacity"));
		cli_jscalar(n, sizeof(n), json_object_get(w, "sandboxes"));
		res_cell(mem, sizeof(mem), w, "memory_mb");
		res_cell(cpu, sizeof(cpu), w, "cpu_percent");
		res_cell(disk, sizeof(disk), w, "disk_mb");
		d = json_object_get(w, "disk");
		if (json_is_integer(json_object_get(d, "layers")) &&
		    json_is_integer(json_object_get(d, "run"))) {
			lr = (long long)(json_integer_value(json_object_get(d, "layers")) +
			    json_integer_value(json_object_get(d, "run")));
			snprintf(layers, sizeof(layers), "%lldM", lr >> 20);
		} else
			snprintf(layers, sizeof(layers), "-");
		mib(store, sizeof(store), d, "snapshots");
		printf("%-12s %-28s %-10s %-8s %-9s %-13s %-11s %-15s %-8s %s\n",
		    cli_jstr(w, "id", "?"), cli_jstr(w, "endpoint", "-"), cli_jstr(w, "state", "?"),
		    cap, n, mem, cpu, disk, layers, store);
	}
}

/* --json prints only the array */
static const struct cli_listing workers = {
	"workers", USAGE, "/v1/workers", "workers", 0, print_workers,
};

int
cmd_workers(int argc, char **argv)
{
	return cli_list_verb(&workers, argc, argv);
}
