#!/bin/sh
# space-control: generations are unique and strictly increasing per sandbox
# under concurrent creates and re-assignments (a worker re-created with a
# new incarnation while creates run); assignment revisions increase; the
# long-poll wakes on a new assignment; lost workers get no placements.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init

reg() { post "/v1/workers/$1/register" "$2" "{\"incarnation\":\"$3\",\"endpoint\":\"http://127.0.0.1:9$4\",\"capacity\":1000}"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start --heartbeat-timeout 3600
check "daemon started" true
is "w1 registers" "$(reg w1 "$W1" incA 1)" 200
is "w2 registers" "$(reg w2 "$W2" incX 2)" 200

# 50 creates in parallel
export U K
seq 1 50 | xargs -P 16 -I@ sh -c 'curl -s -o /dev/null -w "%{http_code}\n" -X POST \
	-H "Authorization: Bearer $K" --data-binary "{\"metadata\":{\"n\":@}}" "$U/v1/sandboxes"' >"$T/codes1"
is "50 parallel creates all answered 201" "$(grep -c '^201$' "$T/codes1")" 50
is "50 sandboxes, 50 executions, 50 install assignments" \
	"$(sql "SELECT (SELECT COUNT(*) FROM sandboxes) || ' ' || (SELECT COUNT(*) FROM executions) || ' ' || (SELECT COUNT(*) FROM assignments WHERE action='install')")" "50 50 50"
is "every first execution is generation 1" "$(sql "SELECT COUNT(*) FROM executions WHERE generation <> 1")" 0
check "the scheduler spread them over both workers" test "$(sql "SELECT COUNT(DISTINCT worker) FROM executions")" = 2
is "placement balances load (25 / 25)" "$(sql "SELECT GROUP_CONCAT(c) FROM (SELECT COUNT(*) c FROM executions GROUP BY worker) x")" "25,25"

# re-assignments: w1 is re-created (new incarnations) while 50 more creates run
seq 1 50 | xargs -P 16 -I@ sh -c 'curl -s -o /dev/null -w "%{http_code}\n" -X POST \
	-H "Authorization: Bearer $K" --data-binary "{}" "$U/v1/sandboxes"' >"$T/codes2" &
XP=$!
for inc in incB incC incD incE; do
	reg w1 "$W1" "$inc" 1 >>"$T/regcodes"
	echo >>"$T/regcodes"
done
wait "$XP"
is "50 more creates during re-creation all answered 201" "$(grep -c '^201$' "$T/codes2")" 50
is "the re-registrations were accepted" "$(grep -c '^200$' "$T/regcodes")" 4
is "no duplicate (sandbox, generation)" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, generation FROM executions GROUP BY 1, 2 HAVING COUNT(*) > 1) x")" 0
is "generations strictly increase in insertion order" \
	"$(sql "SELECT COUNT(*) FROM executions a JOIN executions b ON a.sandbox = b.sandbox AND a.rowid < b.rowid AND a.generation >= b.generation")" 0
is "generations have no gaps (max = count per sandbox)" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox FROM executions GROUP BY sandbox HAVING MAX(generation) <> COUNT(*)) x")" 0
check "some sandboxes were re-assigned (generation >= 2)" test "$(sql "SELECT COUNT(*) FROM executions WHERE generation >= 2")" -gt 0
is "nothing live remains on w1's old incarnations" \
	"$(sql "SELECT COUNT(*) FROM executions WHERE worker='w1' AND resident <> 'incE' AND state NOT IN ('failed','retired')")" 0
is "each sandbox has exactly one non-failed current execution" \
	"$(sql "SELECT COUNT(*) FROM sandboxes s WHERE (SELECT COUNT(*) FROM executions e WHERE e.sandbox = s.id AND e.state IN ('pending','starting','serving')) <> 1")" 0
is "assignment revisions are unique" "$(sql "SELECT COUNT(*) - COUNT(DISTINCT revision) FROM assignments")" 0

# the API agrees with the store
get /v1/sandboxes "$K" >/dev/null
cp "$T/body" "$T/list"
is "API lists 100 sandboxes" "$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["sandboxes"]))' "$T/list")" 100
sql "SELECT sandbox || ' ' || MAX(generation) FROM executions GROUP BY sandbox ORDER BY sandbox" >"$T/dbgens"
python3 -c 'import json,sys
for s in sorted(json.load(open(sys.argv[1]))["sandboxes"], key=lambda s: s["id"]):
    print(s["id"], s["execution"]["generation"])' "$T/list" >"$T/apigens"
check "API shows each sandbox's highest generation" cmp -s "$T/dbgens" "$T/apigens"

get "/v1/workers/w1/assignments?after=0" "$W1" >/dev/null
cp "$T/body" "$T/a1"
python3 -c 'import json,sys
a = json.load(open(sys.argv[1]))
revs = [x["revision"] for x in a["assignments"]]
assert revs == sorted(revs) and len(set(revs)) == len(revs), "order"
assert a["revision"] == (revs[-1] if revs else 0), "cursor"
assert all(x["identity"]["resident"] == "incE" for x in a["assignments"]), "old incarnation leaked"
print(len(revs))' "$T/a1" >"$T/a1n" 2>>"$T/log"
check "w1's stream: increasing revisions, only its current incarnation" test -s "$T/a1n"
REV=$(jget revision "$T/a1")
get "/v1/workers/w1/assignments?after=$REV" "$W1" >/dev/null
is "nothing after the cursor" "$(jget assignments)" "[]"

# long-poll wakes on a new assignment
get "/v1/workers/w2/assignments?after=0" "$W2" >/dev/null
R2=$(jget revision)
T0=$(date +%s%N)
curl -s -H "Authorization: Bearer $W2" "$U/v1/workers/w2/assignments?after=$R2&wait=20" >"$T/lp" &
LP=$!
sleep 1
post /v1/sandboxes "$K" '{"worker":"w2"}' >/dev/null
SP=$(jget id)
wait "$LP"
T1=$(date +%s%N)
is "long-poll returned the new install" "$(jget assignments.0.identity.sandbox "$T/lp")" "$SP"
is "... action install" "$(jget assignments.0.action "$T/lp")" install
# woken by the install, not by the end of its wait (the wait is 20 s; how
# fast the wake-up is belongs to make bench, not to a test)
check "... woken by it before its 20 s wait ended ($(( (T1 - T0) / 1000000 )) ms)" test $(( (T1 - T0) / 1000000 )) -lt 19000
T0=$(date +%s%N)
get "/v1/workers/w2/assignments?after=$(jget revision "$T/lp")&wait=1" "$W2" >/dev/null
T1=$(date +%s%N)
check "an idle long-poll waits its time and returns empty" sh -c \
	"[ '$(jget assignments)' = '[]' ] && [ $(( (T1 - T0) / 1000000 )) -ge 900 ]"
get "/v1/workers/w2/assignments?after=0" "$W2" >/dev/null
ALL2=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["assignments"]))' "$T/body")
get "/v1/workers/w2/assignments?after=99999999" "$W2" >/dev/null
is "a cursor from another store replays the whole stream" \
	"$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["assignments"]))' "$T/body")" "$ALL2"
is "wait above 30 s is refused" "$(get "/v1/workers/w2/assignments?after=0&wait=31" "$W2")" 400

is "GET /v1/workers with an API key" "$(get /v1/workers "$K")" 200
is "... lists both workers with their running executions" \
	"$(python3 -c 'import json,sys; print(" ".join("%s:%s:%d" % (w["id"], w["state"], w["sandboxes"]) for w in json.load(open(sys.argv[1]))["workers"]))' "$T/body")" \
	"w1:live:$(sql "SELECT COUNT(*) FROM executions WHERE worker='w1' AND resident='incE' AND state='pending'") w2:live:$(sql "SELECT COUNT(*) FROM executions WHERE worker='w2' AND state='pending'")"
check "... without credentials or incarnations" sh -c "! grep -Eq 'cred|incarnation|wk_' '$T/body'"
is "GET /v1/workers with a worker credential -> 401" "$(get /v1/workers "$W1")" 401

# kill: retire assignment, then the worker reports retired
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$SP"
is "kill makes the execution retiring" "$(sql "SELECT state FROM executions WHERE sandbox='$SP'")" retiring
is "... with a retire assignment for w2" "$(sql "SELECT action || ' ' || worker FROM assignments WHERE sandbox='$SP' ORDER BY revision DESC LIMIT 1")" "retire w2"
INC2=$(sql "SELECT resident FROM executions WHERE sandbox='$SP'")
is "worker reports retired" "$(post /v1/workers/w2/status "$W2" "{\"identity\":{\"sandbox\":\"$SP\",\"generation\":1,\"worker\":\"w2\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"$INC2\"},\"state\":\"retired\"}")" 200
is "... execution retired" "$(sql "SELECT state FROM executions WHERE sandbox='$SP'")" retired
is "a retired execution cannot be reported serving again" "$(post /v1/workers/w2/status "$W2" "{\"identity\":{\"sandbox\":\"$SP\",\"generation\":1,\"worker\":\"w2\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"$INC2\"},\"state\":\"serving\"}")" 409

# pinning and lost workers
is "pinned to an unknown worker -> 409" "$(post /v1/sandboxes "$K" '{"worker":"nosuch"}')" 409
ctl_stop
ctl_start --heartbeat-timeout 1
all_lost() { [ "$(sql "SELECT GROUP_CONCAT(state) FROM workers")" = "lost,lost" ]; }
eventually 20 all_lost
is "silent workers are marked lost" "$(sql "SELECT GROUP_CONCAT(state) FROM workers")" "lost,lost"
check "metrics count lost workers" sh -c "curl -s '$U/metrics' | grep -q 'space_control_workers{state=\"lost\"} 2'"
is "no live worker -> 503" "$(post /v1/sandboxes "$K" '{}')" 503
is "heartbeat with a stale incarnation -> 409" "$(post /v1/workers/w2/heartbeat "$W2" '{"incarnation":"old"}')" 409
is "heartbeat with the registered incarnation" "$(post /v1/workers/w2/heartbeat "$W2" '{"incarnation":"incX"}')" 200
is "pinned to a lost worker -> 409" "$(post /v1/sandboxes "$K" '{"worker":"w1"}')" 409
is "unpinned goes to the live worker" "$(post /v1/sandboxes "$K" '{}')" 201
is "... w2" "$(jget execution.worker)" w2
kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
