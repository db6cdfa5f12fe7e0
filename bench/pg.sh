#!/bin/sh
# A PostgreSQL for the benchmarks: the tests' own helper (tests/lib_pg.sh:
# a fresh cluster in a temporary directory, run as the user postgres,
# loopback only), with fsync on, as SQLite's store syncs every commit.
#   bench/pg.sh start        prints "DIR PORT URL" once it serves
#   bench/pg.sh stop DIR     stops it and removes DIR
set -u
SPACE_TOP=$(cd "$(dirname "$0")/.." && pwd)
. "$SPACE_TOP/tests/lib.sh"
PG_SERVER_OPTS="-c fsync=on -c synchronous_commit=on"
. "$SPACE_TOP/tests/lib_pg.sh"
case "${1:-}" in
start)
	pg_start >&2 || { [ -n "$PGT" ] && pg_cleanup; exit 1; }
	echo "$PGT $PG_PORT $PG_URL" ;;
stop)
	PGT=${2:?DIR}
	pg_cleanup ;;
*)
	echo "usage: bench/pg.sh start | stop DIR" >&2
	exit 2 ;;
esac
