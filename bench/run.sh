#!/bin/sh
# Runs every benchmark of one build tree: bench/run.sh BUILD_DIR
#   the C micro-benchmarks BUILD_DIR/bench/bench_*, then the platform
#   benchmark (bench/platform.py: space up on private copies of
#   BUILD_DIR/bin, each figure beside a baseline measured in the same run),
#   which ends with the summary table. BENCH_ARGS are passed to platform.py
#   (e.g. BENCH_ARGS=--quick for a smoke run).
set -u
B=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in /*) ;; *) B=$top/$B ;; esac
out=$(mktemp) || exit 1
trap 'rm -f "$out"' EXIT
trap 'exit 1' INT TERM
rc=0
found=0
for b in "$B"/bench/bench_*; do
	[ -x "$b" ] || continue
	# a helper platform.py runs with arguments, not a benchmark alone
	[ "$(basename "$b")" = bench_framecat ] && continue
	found=1
	echo "== $(basename "$b")"
	"$b" | tee -a "$out" || { echo "bench: $(basename "$b") failed"; rc=1; }
done
[ "$found" = 1 ] || { echo "bench: no benchmark in $B/bench"; rc=1; }
# shellcheck disable=SC2086 # BENCH_ARGS is a list of words
python3 "$top/bench/platform.py" --bin "$B/bin" --admit "$out" ${BENCH_ARGS:-} || rc=1
exit $rc
