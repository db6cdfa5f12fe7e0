#!/bin/sh
# Runs each libFuzzer harness for N seconds on its seed corpus; fails on a
# finding. FUZZ_JOBS harnesses run at once (default: the number of cores),
# each on one core, so the stage takes N seconds per FUZZ_JOBS harnesses.
set -eu
secs=$1; shift
top=$(cd "$(dirname "$0")/../.." && pwd)
jobs=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}

run_one() { # harness
	name=$(basename "$1")
	corpus="$top/build-fuzz/corpus/$name"
	mkdir -p "$corpus"
	[ -d "$top/tests/fuzz/corpus/$name" ] && cp -n "$top/tests/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null || true
	if "$1" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$top/build-fuzz/$name-" "$corpus" \
		2>"$top/build-fuzz/$name.log"; then
		echo "fuzz: $name clean after ${secs}s, $(grep -E 'stat::number_of_executed_units' "$top/build-fuzz/$name.log" | awk '{print $2}') runs"
	else
		tail -50 "$top/build-fuzz/$name.log"
		echo "fuzz: $name FAILED"
		return 1
	fi
}

failed=0
set -- "$@"
while [ $# -gt 0 ]; do
	pids=""
	i=0
	while [ $i -lt "$jobs" ] && [ $# -gt 0 ]; do
		run_one "$1" & pids="$pids $!"
		shift; i=$((i + 1))
	done
	for p in $pids; do wait "$p" || failed=1; done
done
[ "$failed" = 0 ] || { echo "fuzz: a harness FAILED"; exit 1; }
echo "fuzz: all harnesses clean"
