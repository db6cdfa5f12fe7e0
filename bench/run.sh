#!/bin/sh
# Runs every benchmark of one build tree: bench/run.sh BUILD_DIR
set -u
B=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
rc=0
found=0
for b in "$top/$B"/bench/bench_*; do
	[ -x "$b" ] || continue
	found=1
	echo "== $(basename "$b")"
	"$b" || { echo "bench: $(basename "$b") failed"; rc=1; }
done
[ "$found" = 1 ] || { echo "bench: no benchmark in $B/bench"; rc=1; }
exit $rc
