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

# exec_one NAME TIMEOUT CMD...: runs one test, its output in its log, then
# "EXIT-STATUS SECONDS" in the log's .rc; report_one NAME: its result line
# and its share of the counts
logof() { echo "$logdir/$(echo "$1" | tr '/' '_').log"; }
exec_one() {
	log=$(logof "$1"); to=$2; shift 2
	t0=$(date +%s)
	timeout -k 10 "$to" "$@" >"$log" 2>&1
	echo "$? $(( $(date +%s) - t0 ))" >"$log.rc"
}
report_one() {
	name=$1; log=$(logof "$name")
	rc=255 secs=0
	[ -f "$log.rc" ] && read -r rc secs <"$log.rc"
	rm -f "$log.rc"
	p=$(grep -c '^ok ' "$log" 2>/dev/null); p=${p:-0}
	f=$(grep -c '^not ok ' "$log" 2>/dev/null); f=${f:-0}
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
run_one() { # name timeout cmd...
	exec_one "$@"
	report_one "$1"
}

if [ "$only" = all ] || [ "$only" = unit ]; then
	for t in "$top/$B"/tests/unit/test_*; do
		[ -x "$t" ] || continue
		run_one "unit/$(basename "$t")" 300 "$t"
	done
fi
# Integration tests marked "# ci: beside" start only daemons of their own
# (their own directory, ports and store) and spend most of their time
# waiting on leases, long-polls and timeouts, not on a processor: they run
# together, CI_JOBS (default 3) at a time, when the list reaches the first
# of them; their result lines follow in the list's order. The others run
# alone, one after another.
san_skip() { [ -n "${SPACE_SAN:-}" ] && grep -q '^# ci: once' "$1"; }
if [ "$only" = all ] || [ "$only" = integration ]; then
	beside_done=""
	for t in "$top"/tests/integration/[0-9]*.sh; do
		[ -f "$t" ] || continue
		# a long protocol test whose point is not memory safety runs once,
		# in the plain build, not again under the sanitizers
		if san_skip "$t"; then
			echo "skip integration/$(basename "$t"): runs once, in the plain build"
			continue
		fi
		if grep -q '^# ci: beside' "$t"; then
			[ -n "$beside_done" ] && continue
			beside_done=1
			for b in "$top"/tests/integration/[0-9]*.sh; do
				grep -q '^# ci: beside' "$b" && ! san_skip "$b" && echo "$b"
			done >"$logdir/beside.list"
			export logdir
			# shellcheck disable=SC2016 # expanded by the inner shell
			xargs -d '\n' -n 1 -P "${CI_JOBS:-3}" sh -c '
				log="$logdir/integration_$(basename "$1").log"; t0=$(date +%s)
				timeout -k 10 900 sh "$1" >"$log" 2>&1
				echo "$? $(( $(date +%s) - t0 ))" >"$log.rc"' exec_beside <"$logdir/beside.list"
			while read -r b; do
				report_one "integration/$(basename "$b")"
			done <"$logdir/beside.list"
			continue
		fi
		run_one "integration/$(basename "$t")" 900 sh "$t"
	done
fi
echo "$pass $fail" >"$logdir/summary"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
