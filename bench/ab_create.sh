#!/bin/sh
# Two builds side by side on create to first exec (bench/platform.py --only
# create,timeline, with prepared jails), alternated BEFORE, AFTER, BEFORE,
# AFTER... so that a shared machine's load falls on both alike; then per
# run the API's create to first exec against `bwrap ... true` of the same
# run (the ratio), and the timeline's phases that changed.
#
#   sh bench/ab_create.sh BEFORE/bin AFTER/bin [ROUNDS] [CREATE_RUNS] [JAIL_POOL]
#
# docs/benchmarks.md, "The first exec's set-up".
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [ROUNDS] [CREATE_RUNS] [JAIL_POOL]" >&2; exit 2; }
before=$1 after=$2 rounds=${3:-2} runs=${4:-20} pool=${5:-4}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$top/bench/ab_lib.sh"
ab_alternate --only create,timeline --create-runs "$runs" --jail-pool "$pool"
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = [("API: POST sandboxes {wait, access} (route in the answer), POST exec `true`", "API one request"),
        ("API: POST sandboxes, GET ?until=running, route, POST exec `true`", "API create+exec"),
        ("bwrap --unshare-all ... true", "bwrap"),
        ("total: POST to the first exec done", "timeline total"),
        ("sbx-manager: bridge spawned to ready and checked", "spawn to ready"),
        ("    guest challenge + serving process ready", "serving ready"),
        ("      serving process: privileges dropped + seccomp filter", "privs+filter"),
        ("      guest challenge (round trip to the guest)", "challenge"),
        ("API: POST answered (auth, placement, store commit)", "POST answered"),
        ("long-poll wake + assignment to sbx-manager's lane", "long-poll wake"),
        ("sbx-manager: assignment checks + first record commit", "first commit"),
        ("sbx-manager: record 'serving' commit", "serving commit"),
        ("report to space-control (commit)", "report"),
        ("  route (POST routes to space-control)", "route"),
        ("  first exec `true` (new connection to node-api)", "first exec"),
        ("  second exec `true` (same connection)", "second exec")]
def medians(path):
    m = {}
    for line in open(path):
        for pre, key in rows:
            if line.startswith(pre) and key not in m:
                m[key] = float(line[len(pre):].split()[0])
    return m
runs = [(v, r, medians("%s/%s.%d" % (out, v, r))) for r in range(1, rounds + 1) for v in ("before", "after")]
print("median ms       " + "".join("%11s" % ("%s %d" % (v, r)) for v, r, _ in runs))
for _, key in rows:
    print("%-16s" % key + "".join("%11.1f" % m.get(key, float("nan")) for _, _, m in runs))
for key, label in (("API one request", "one request"), ("API create+exec", "four requests")):
    ratio = lambda m: m.get(key, float("nan")) / m["bwrap"]
    print("%-16s" % ("%s/bwrap" % label[:9]) + "".join("%10.2fx" % ratio(m) for _, _, m in runs))
    for v in ("before", "after"):
        xs = [ratio(m) for w, _, m in runs if w == v]
        print("%s, %s: median of the runs' ratios %.2fx (%s)" % (label, v, statistics.median(xs),
              ", ".join("%.2f" % x for x in xs)))
EOF
