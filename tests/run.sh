#!/bin/sh
# Runs every test of one build tree and ends with "N passed, N failed".
#   tests/run.sh BUILD_DIR [unit|integration]
# Each test program or script prints TAP ("ok N - what" / "not ok N - what").
# A program that exits non-zero, dies, or prints no result line counts as
# one more failure, so a suite that asserts nothing cannot pass.
set -u
B=${1:-build}
only=${2:-all}
top=$(cd "$(dirname "$0")/.." && pwd)
export SPACE_TOP="$top"
export SPACE_BIN="$top/$B/bin"
# Debian's python3 and tools first (tests/lib.sh says why)
export PATH="/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
# the official PASETO/PASERK vectors live in the shared directory beside
# the checkout; they are read from there, not copied into the tree
if [ -z "${SPACE_VECTORS:-}" ]; then
	for d in "$top/../shared/vectors" "$top/../../shared/vectors" /work/shared/vectors; do
		if [ -f "$d/paseto-v4.json" ]; then SPACE_VECTORS=$(cd "$d" && pwd); break; fi
	done
fi
export SPACE_VECTORS="${SPACE_VECTORS:-$top/../shared/vectors}"
logdir="$top/$B/test-logs"
mkdir -p "$logdir"
pass=0 fail=0

run_one() { # name timeout cmd...
	name=$1; to=$2; shift 2
	log="$logdir/$(echo "$name" | tr '/' '_').log"
	t0=$(date +%s)
	timeout -k 10 "$to" "$@" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - t0 ))
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	extra=""
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; extra=" (exit $rc)"; fi
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then f=1; extra=" (no test ran)"; fi
	pass=$((pass + p)); fail=$((fail + f))
	if [ "$f" != 0 ]; then
		echo "FAIL $name: $p passed, $f failed$extra (${secs} s)"
		grep -E '^not ok |^#' "$log" | head -40 | sed 's/^/    /'
		[ "$rc" != 0 ] && tail -15 "$log" | sed 's/^/    | /'
	else
		echo "ok   $name: $p passed (${secs} s)"
	fi
}

if [ "$only" = all ] || [ "$only" = unit ]; then
	for t in "$top/$B"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		run_one "unit/$(basename "$t")" 300 "$t"
	done
fi
if [ "$only" = all ] || [ "$only" = integration ]; then
	for t in "$top"/tests/integration/[0-9]*.sh; do
		[ -f "$t" ] || continue
		# a long protocol test whose point is not memory safety runs once,
		# in the plain build, not again under the sanitizers
		if [ -n "${SPACE_SAN:-}" ] && grep -q '^# ci: once' "$t"; then
			echo "skip integration/$(basename "$t"): runs once, in the plain build"
			continue
		fi
		run_one "integration/$(basename "$t")" 900 sh "$t"
	done
fi
echo "$pass $fail" >"$logdir/summary"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
