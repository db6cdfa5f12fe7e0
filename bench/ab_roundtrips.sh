#!/bin/sh
# Two builds side by side on the round trips of bench/platform.py (exec of
# `true` and a 4 KiB read, full path and straight to the bridge, with the
# host's spawn and a bare frame round trip as baselines), alternated
# BEFORE, AFTER, BEFORE, AFTER... so that a shared machine's load falls on
# both alike; then each row's medians and the exec's ratios per run.
#
#   sh bench/ab_roundtrips.sh BEFORE/bin AFTER/bin [ROUNDS] [ITERS]
#
# docs/benchmarks.md, "Exec path: fixed costs".
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_BIN AFTER_BIN [ROUNDS] [ITERS]" >&2; exit 2; }
before=$1 after=$2 rounds=${3:-2} iters=${4:-60}
top=$(cd "$(dirname "$0")/.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$top/bench/ab_lib.sh"
ab_alternate --only roundtrips --iters "$iters"
/usr/bin/python3 - "$out" "$rounds" <<'EOF'
import re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = [("exec `true`: HTTP to node-api", "exec full"),
        ("exec `true`: frames straight to the bridge", "exec bridge"),
        ("`true` on the host: posix_spawn", "host spawn"),
        ("read 4 KiB: HTTP GET files", "read full"),
        ("read 4 KiB: fs.read straight to the bridge", "read bridge"),
        ("bare frame round trip to the bridge", "connect+HELLO"),
        ("HTTP GET /healthz", "healthz")]
def medians(path):
    m = {}
    for line in open(path):
        for pre, key in rows:
            if line.startswith(pre):
                m[key] = float(line.split()[-3])
    return m
runs = [(v, r, medians("%s/%s.%d" % (out, v, r))) for r in range(1, rounds + 1) for v in ("before", "after")]
print("median us  " + "".join("%14s" % ("%s %d" % (v, r)) for v, r, _ in runs))
for _, key in rows:
    print("%-11s" % key + "".join("%14.0f" % m.get(key, float("nan")) for _, _, m in runs))
print("%-11s" % "bridge/host" + "".join("%13.2fx" % (m["exec bridge"] / m["host spawn"]) for _, _, m in runs))
print("%-11s" % "full/host" + "".join("%13.2fx" % (m["exec full"] / m["host spawn"]) for _, _, m in runs))
EOF
