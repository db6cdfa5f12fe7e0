#!/bin/sh
# The audit table does not grow without bound: space-control removes rows
# older than --audit-keep-days (default 90; 0 keeps them all), oldest
# first, in batches of 5,000, every 10 s (scheduler.c). Every capability
# issued writes a row, so a platform in use would otherwise fill its
# store's disk with them. Rows younger than the bound and the daemon's own
# recent rows stay; a bound out of range stops the daemon at start.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")

refused() { ! space-control --data-dir "$D" --listen "127.0.0.1:$PORT" --audit-keep-days "$1" 2>"$T/err" && grep -q audit-keep-days "$T/err"; }
check "--audit-keep-days -1 is refused at start, naming the flag" refused -1
check "... as is 36501" refused 36501

NOW=$(date +%s)
# N rows of AGE seconds, in one statement (SQLite and PostgreSQL alike)
rows() {
	sql "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < $1)
	    INSERT INTO audit (ts, principal, action, target) SELECT $NOW - $2, 'alice',
	    'capability.issue', 'sbx_old' || i FROM n"
}
count() { sql "SELECT COUNT(*) FROM audit WHERE target LIKE '$1%'"; }

ctl_start --audit-keep-days 0
check "daemon started, keeping every row" true
is "w1 registers" "$(post /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":8}')" 200
is "a sandbox is created" "$(post /v1/sandboxes "$K" '{"worker":"w1"}')" 201
check "12,000 rows of two days ago" rows 12000 172800
sleep 12
is "--audit-keep-days 0: after a collection pass they are all there" "$(count sbx_old)" 12000
ctl_stop

ctl_start --audit-keep-days 1
check "daemon started again, keeping a day" true
sql "UPDATE audit SET target = 'young' || id WHERE id IN (SELECT id FROM audit WHERE target LIKE 'sbx_old%' ORDER BY id DESC LIMIT 10)"
sql "UPDATE audit SET ts = $NOW - 82800 WHERE target LIKE 'young%'"
gone() { [ "$(count sbx_old)" = 0 ]; }
check "the 11,990 rows older than a day are removed (batches of 5,000)" eventually 40 gone
is "the 10 rows of 23 hours ago stay" "$(count young)" 10
is "the daemon's own rows stay (worker.register, sandbox.create)" \
	"$(sql "SELECT COUNT(*) FROM audit WHERE action IN ('worker.register','sandbox.create')")" 2
curl -s "$U/metrics" >"$T/metrics"
is "/metrics counts them" "$(awk '$1 == "space_control_audit_pruned_total" { print $2 }' "$T/metrics")" 11990
check "the log says so" grep -q 'audit: [0-9]* row(s) older than 1 days removed' "$T/log"
is "the daemon still answers" "$(get /v1/sandboxes "$K")" 200
kill "$PID"; wait "$PID"; RC=$?; PID=
is "it stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"

done_testing
