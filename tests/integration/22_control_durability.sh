#!/bin/sh
# space-control: kill -9 in the middle of a burst of creates. After the
# restart every acknowledged (201) create is there with its execution and
# its install assignment, no row is half-written, the database passes its
# integrity check, and keys and generations continue where they were.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init KILL

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ROOT=$(space-control keys root --data-dir "$D" 2>>"$T/log")
ctl_start --heartbeat-timeout 3600
check "daemon started" true
post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://127.0.0.1:1","capacity":100000}' >/dev/null
BUNDLE1=$(curl -s "$U/v1/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bundle"])')

# a burst of creates; each job prints "<status> <body>"
export U K
mkdir "$T/out"
seq 1 400 | xargs -P 12 -I@ sh -c 'curl -s -m 10 -o "'"$T"'/out/@" -w "%{http_code}" -X POST \
	-H "Authorization: Bearer $K" --data-binary "{\"metadata\":{\"n\":@}}" "$U/v1/sandboxes" \
	>"'"$T"'/out/@.code" 2>/dev/null' &
XP=$!
# kill once the burst is well under way
i=0
while [ "$(ls "$T/out" | grep -c code)" -lt 60 ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 "$PID"
wait "$PID" 2>/dev/null
PID=
wait "$XP"
python3 -c 'import json,os,sys
d = sys.argv[1]
ok = []
for f in os.listdir(d):
    if f.endswith(".code") and open(os.path.join(d, f)).read().strip() == "201":
        ok.append(json.load(open(os.path.join(d, f[:-5])))["id"])
print("\n".join(sorted(ok)))' "$T/out" >"$T/acked"
NACK=$(wc -l <"$T/acked")
diag "acknowledged before kill -9: $NACK of 400"
check "some creates were acknowledged before the kill" test "$NACK" -gt 0

ctl_start --heartbeat-timeout 3600
check "daemon restarts on the same data" true
is "integrity_check ok" "$(store_integrity)" ok
is "no foreign key violation" "$(store_fk_violations)" 0
sql "SELECT id FROM sandboxes ORDER BY id" >"$T/stored"
is "every acknowledged create is stored" "$(comm -23 "$T/acked" "$T/stored" | wc -l)" 0
is "no sandbox without its execution" \
	"$(sql "SELECT COUNT(*) FROM sandboxes s WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE e.sandbox = s.id)")" 0
is "no execution without its install assignment" \
	"$(sql "SELECT COUNT(*) FROM executions e WHERE NOT EXISTS (SELECT 1 FROM assignments a WHERE a.sandbox = e.sandbox AND a.generation = e.generation AND a.action = 'install')")" 0
is "no assignment without its execution" \
	"$(sql "SELECT COUNT(*) FROM assignments a WHERE NOT EXISTS (SELECT 1 FROM executions e WHERE a.sandbox = e.sandbox AND a.generation = e.generation)")" 0
is "no sandbox without its audit record" \
	"$(sql "SELECT COUNT(*) FROM sandboxes s WHERE NOT EXISTS (SELECT 1 FROM audit a WHERE a.target = s.id AND a.action = 'sandbox.create')")" 0
MISSING=0
for id in $(head -20 "$T/acked"); do
	c=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $K" "$U/v1/sandboxes/$id")
	[ "$c" = 200 ] || MISSING=$((MISSING + 1))
done
is "acknowledged sandboxes answer through the API" "$MISSING" 0
is "the root key survived" "$(curl -s "$U/v1/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["root"])')" "$ROOT"
is "the bundle survived unchanged" "$(curl -s "$U/v1/keys" | python3 -c 'import json,sys; print(json.load(sys.stdin)["bundle"])')" "$BUNDLE1"

# generations continue after the restart: re-create the worker
post /v1/workers/w1/register "$W" '{"incarnation":"inc2","endpoint":"http://127.0.0.1:1","capacity":100000}' >/dev/null
is "re-created worker: every live sandbox gets generation 2" \
	"$(sql "SELECT COUNT(*) FROM sandboxes s WHERE (SELECT MAX(generation) FROM executions WHERE sandbox = s.id) <> 2")" 0
is "no duplicate generation" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, generation FROM executions GROUP BY 1, 2 HAVING COUNT(*) > 1) x")" 0
if on_pg; then
	is "store settings: commits wait for the WAL flush" "$(sql 'SHOW synchronous_commit')" on
	V=$(sql 'SELECT MAX(version) FROM schema_version')
else
	is "store settings: WAL" "$(sql 'PRAGMA journal_mode')" wal
	V=$(sql 'PRAGMA user_version')
fi
# both backends are at the same version (store_sqlite.c, store_pg.c)
is "schema is versioned (13 migrations: lifecycle, worker resources, key quotas, route holds, archive references, egress policies, the public entry, declared ports, refusals, access tokens, snapshot bases, live rows' indexes)" "$V" 13
# a create's quota count reads the key's live sandboxes, not its history
if on_pg; then
	is "indexes of each key's live sandboxes and each worker's active executions" \
		"$(sql "SELECT COUNT(*) FROM pg_indexes WHERE indexname IN ('sandboxes_key_live', 'executions_live')")" 2
else
	PLAN=$(sql "EXPLAIN QUERY PLAN SELECT COUNT(*) FROM sandboxes s WHERE s.api_key = 'k' AND s.state NOT IN ('killed','paused','failed')")
	case $PLAN in *"USING INDEX sandboxes_key_live"*) ok "the quota's count of live sandboxes reads the index of live ones" ;;
	*) not_ok "the quota's count of live sandboxes reads the index of live ones"; diag "plan: $PLAN" ;; esac
	PLAN=$(sql "EXPLAIN QUERY PLAN SELECT e.worker, COUNT(*), SUM(COALESCE(json_extract(s.resources, '\$.memory_mb'), 0)) FROM executions e JOIN sandboxes s ON s.id = e.sandbox WHERE e.state IN ('pending','starting','serving') GROUP BY e.worker, e.resident")
	case $PLAN in *"USING INDEX executions_live"*) ok "placement's count of active executions reads the index of active ones" ;;
	*) not_ok "placement's count of active executions reads the index of active ones"; diag "plan: $PLAN" ;; esac
fi
kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
