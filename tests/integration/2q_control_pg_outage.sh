#!/bin/sh
# space-control on PostgreSQL (tests/lib_pg.sh) when the database goes
# away and comes back: while it is away every request answers 503 with
# Retry-After (never a 500, never a hang); the daemon reconnects by itself
# once it is back; every create it acknowledged (201) before, during or
# after the outage is in the database and answers through the API. And at
# start: a database whose schema is newer than this build is refused with
# a clear error, and so is a connection string libpq cannot parse.
# ci: once
# ci: beside
. "$SPACE_TOP/tests/lib.sh"
SPACE_TEST_STORE=pg
export SPACE_TEST_STORE
ctl_init

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
check "daemon started on PostgreSQL" ctl_start --heartbeat-timeout 3600
is "worker registers" "$(post /v1/workers/w1/register "$W" \
	'{"incarnation":"inc1","endpoint":"http://127.0.0.1:1","capacity":100000}')" 200

# three clients create sandboxes one after the other until told to stop;
# each line of $T/c_N: "<status> <id or ->"
client() {
	while [ ! -e "$T/stop" ]; do
		code=$(curl -s -m 10 -o "$T/cb_$1" -w '%{http_code}' -X POST -H "Authorization: Bearer $K" \
			--data-binary '{"metadata":{}}' "$U/v1/sandboxes")
		id=$(jget id "$T/cb_$1")
		echo "$code ${id:--}" >>"$T/c_$1"
		[ "$code" = 503 ] && sleep 0.2
	done
}
for n in 1 2 3; do client $n & eval "CL$n=\$!"; done
acked() { cat "$T"/c_* 2>/dev/null | grep -c '^201 '; }
i=0; while [ "$(acked)" -lt 15 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "creates are acknowledged before the outage" test "$(acked)" -ge 15

pg_stop_server
check "PostgreSQL stopped" sh -c "! psql -X -q -h 127.0.0.1 -p $PG_PORT -U space -d space -c 'SELECT 1' 2>/dev/null"
sleep 1
is "a create while it is away -> 503" "$(post /v1/sandboxes "$K" '{"metadata":{}}')" 503
check "... with Retry-After" grep -qi '^retry-after: [0-9]' "$T/headers"
is "a read while it is away -> 503" "$(get /v1/sandboxes "$K")" 503
check "... with Retry-After" grep -qi '^retry-after: [0-9]' "$T/headers"
check "the daemon still runs" alive "$PID"
sleep 1
pg_start_server
check "PostgreSQL started again" true

# reconnected by itself: the clients' creates pass again
n0=$(acked)
i=0; while [ "$(acked)" -lt $((n0 + 15)) ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "the daemon reconnected by itself: creates pass again" test "$(acked)" -ge $((n0 + 15))
: >"$T/stop"
wait "$CL1" "$CL2" "$CL3"
diag "the clients' requests: $(cat "$T"/c_* | grep -c '^201 ') acknowledged, $(cat "$T"/c_* | grep -c '^503 ') refused with 503"
is "no request answered anything but 201 or 503" "$(cat "$T"/c_* | grep -cv '^201 \|^503 ')" 0
cat "$T"/c_* | awk '$1 == 201 { print $2 }' | sort >"$T/acked"
sql "SELECT id FROM sandboxes ORDER BY id" >"$T/stored"
is "every acknowledged create is stored ($(wc -l <"$T/acked") acknowledged)" \
	"$(comm -23 "$T/acked" "$T/stored" | wc -l)" 0
bad=0
for id in $(head -n 5 "$T/acked") $(tail -n 5 "$T/acked"); do
	[ "$(get "/v1/sandboxes/$id" "$K")" = 200 ] || bad=1
done
is "acknowledged sandboxes answer through the API" "$bad" 0
is "every stored sandbox has its execution and install" \
	"$(sql "SELECT COUNT(*) FROM sandboxes s WHERE NOT EXISTS (SELECT 1 FROM assignments a WHERE a.sandbox = s.id AND a.action = 'install')")" 0
check "the outage and the reconnection are logged" sh -c \
	"grep -q 'store: postgresql' '$T/log' && grep -q 'connected again' '$T/log'"
# the LISTEN connection (long-polls' wake-ups): lost with the server,
# dialled again by itself, and notified again of a commit
i=0; while [ "$(grep -c 'listening for other replicas' "$T/log")" -lt 2 ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "the listening connection was lost and dialled again by itself" sh -c \
	"grep -q 'listening connection was lost' '$T/log' && [ \$(grep -c 'listening for other replicas' '$T/log') -ge 2 ]"
nf() { curl -s "$U/metrics" | awk '$1 == "space_control_store_notifications_total" { print $2 }'; }
n1=$(nf)
post /v1/sandboxes "$K" '{"metadata":{}}' >/dev/null
i=0; while [ "$(nf)" -le "${n1:-0}" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "... and receives the notification of a create committed after ($n1 -> $(nf))" test "$(nf)" -gt "${n1:-0}"
ctl_stop

# at start: a newer schema, a bad connection string
sql "INSERT INTO schema_version VALUES (99, 0)"
check "a database whose schema is newer than this build is refused at start" sh -c \
	"! space-control --data-dir '$D' --listen 127.0.0.1:$PORT 2>'$T/newer'"
check "... with a clear error" grep -q 'schema is newer than this build' "$T/newer"
is "... and nothing was changed" "$(sql 'SELECT MAX(version) FROM schema_version')" 99
check "a connection string libpq cannot parse is refused at start" sh -c \
	"! space-control --data-dir '$D' --store 'postgresql://space@127.0.0.1:$PG_PORT/space?nosuch=1' --listen 127.0.0.1:$PORT 2>'$T/bad'"
check "... with a clear error that does not repeat the string" sh -c \
	"grep -q 'not a valid connection string' '$T/bad' && ! grep -q nosuch '$T/bad'"
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
