#!/bin/sh
# Runs every benchmark of one build tree: bench/run.sh BUILD_DIR
#   the C micro-benchmarks BUILD_DIR/bench/bench_*, the process start of
#   the CLI beside `true` (bench/startup.py, also as Markdown in
#   BUILD_DIR/bench/startup.md), then the platform benchmark
#   (bench/platform.py: space up on private copies of
#   BUILD_DIR/bin, each figure beside a baseline measured in the same run),
#   which ends with the summary table, and the E2B SDK beside the native
#   API (bench/e2b.sh, as Markdown in BUILD_DIR/bench/e2b.md). BENCH_ARGS
#   are passed to platform.py
#   (e.g. BENCH_ARGS=--quick for a smoke run). The whole output is kept in
#   BUILD_DIR/bench/last-run.txt, the table as Markdown in
#   BUILD_DIR/bench/summary.md.
set -u
B=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in /*) ;; *) B=$top/$B ;; esac
mkdir -p "$B/bench"
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

# Debian's python3 (python3-websockets, for the streams) when there is one
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3

run_all() {
	rc=0
	found=0
	for b in "$B"/bench/bench_*; do
		[ -x "$b" ] || continue
		# helpers platform.py runs with arguments, not benchmarks alone
		case "$(basename "$b")" in bench_framecat|bench_httpget|bench_netsvc|bench_sendfile) continue ;; esac
		found=1
		echo "== $(basename "$b")"
		"$b" >"$tmp/one" 2>&1 || { echo "bench: $(basename "$b") failed"; rc=1; }
		cat "$tmp/one"
		cat "$tmp/one" >>"$tmp/admit"
	done
	[ "$found" = 1 ] || { echo "bench: no benchmark in $B/bench"; rc=1; }
	"$PY" "$top/bench/startup.py" --bin "$B/bin" --md "$B/bench/startup.md" || rc=1
	# shellcheck disable=SC2086 # BENCH_ARGS is a list of words
	"$PY" "$top/bench/platform.py" --bin "$B/bin" --admit "$tmp/admit" \
	    --summary-md "$B/bench/summary.md" ${BENCH_ARGS:-} || rc=1
	# the E2B SDK through space-edge beside the native API (docs/e2b.md)
	sh "$top/bench/e2b.sh" "$B" || rc=1
	# a host killed: the time until its sandbox serves elsewhere (as Markdown in BUILD_DIR/bench/host_loss.md)
	sh "$top/bench/host_loss.sh" "$B" || rc=1
	echo "$rc" >"$tmp/rc"
}

run_all 2>&1 | tee "$B/bench/last-run.txt"
exit "$(cat "$tmp/rc" 2>/dev/null || echo 1)"
