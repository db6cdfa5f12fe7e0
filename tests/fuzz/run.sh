#!/bin/sh
# Runs each libFuzzer harness for N seconds on its seed corpus; fails on a finding.
set -eu
secs=$1; shift
top=$(cd "$(dirname "$0")/../.." && pwd)
for f in "$@"; do
	name=$(basename "$f")
	corpus="$top/build-fuzz/corpus/$name"
	mkdir -p "$corpus"
	[ -d "$top/tests/fuzz/corpus/$name" ] && cp -n "$top/tests/fuzz/corpus/$name"/* "$corpus"/ 2>/dev/null || true
	echo "fuzz: $name for ${secs}s"
	"$f" -max_total_time="$secs" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$top/build-fuzz/$name-" "$corpus" 2>"$top/build-fuzz/$name.log" \
		|| { tail -50 "$top/build-fuzz/$name.log"; echo "fuzz: $name FAILED"; exit 1; }
	grep -E 'stat::number_of_executed_units' "$top/build-fuzz/$name.log" || true
done
echo "fuzz: all harnesses clean"
