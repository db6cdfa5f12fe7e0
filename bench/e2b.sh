#!/bin/sh
# The E2B-compatible API beside space's native API (bench/e2b_bench.mjs):
# space up (two workers) on private copies of BUILD_DIR/bin and free ports,
# the pinned e2b SDK of tests/js, then the figures as a Markdown table
# (also in BUILD_DIR/bench/e2b.md). bench/e2b.sh BUILD_DIR
set -u
B=${1:-build}
top=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in /*) ;; *) B=$top/$B ;; esac
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "e2b bench: skipped (node and npm are needed for the E2B SDK)"
	exit 0
fi
JS="$top/tests/js"
(
	flock 9
	[ -d "$JS/node_modules/e2b" ] || (cd "$JS" && npm ci --no-audit --no-fund --loglevel=error >&2)
) 9>"$JS/.install.lock"
SPACE_TOP=$top SPACE_BIN=$B/bin
export SPACE_TOP SPACE_BIN
. "$top/tests/lib.sh"
. "$top/tests/lib_up.sh"
up_init
up_start >/dev/null || { echo "e2b bench: space up failed"; exit 1; }
mkdir -p "$B/bench"
node "$top/bench/e2b_bench.mjs" | tee "$B/bench/e2b.md"
