#!/bin/sh
# space-control lifecycle (docs/protocol.md section 5) against the real
# daemon, with two workers simulated by curl: each follows its assignment
# stream with long-polls and answers with status reports as sbx-manager
# would. Pause, resume, move, named snapshots, the ownership lease under
# concurrent calls, kill wins over an operation, kill -9 of the daemon at
# two points of a move, takeover without a route change, idle and absolute
# timeouts, history, metrics and audit rows.
. "$SPACE_TOP/tests/lib.sh"

ctl_init KILL

. "$SPACE_TOP/tests/lib_simworker.sh"
# a short route wait: the 503s below are what is tested, not the wait
CTL_FLAGS="--heartbeat-timeout 3600 --lease-ttl 2 --route-wait-ms 200"
EXEC='{"access":["exec"]}'
route() { req POST "/v1/sandboxes/$1/routes" "$K" "${2:-$EXEC}"; }
exec_id() { req GET "/v1/sandboxes/$1" "$K" >/dev/null; python3 -c 'import json,sys
e=json.load(open(sys.argv[1]))["execution"]
print(e["generation"], e["worker"], e["substrate"], e["activation"], e["resident"], e["state"])' "$T/body"; }
serving_count() { sql "SELECT COUNT(*) FROM executions WHERE sandbox='$1' AND state IN ('pending','starting','serving')"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
is "w1 registers" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"incA","endpoint":"http://127.0.0.1:9001","capacity":10}')" 200
is "w2 registers" "$(req POST /v1/workers/w2/register "$W2" '{"incarnation":"incB","endpoint":"http://127.0.0.1:9002","capacity":10}')" 200
fetch w1 "$W1" 0
fetch w2 "$W2" 0

# ---- a running sandbox on w1 ----
req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
S=$(jget id)
is "new sandbox has no snapshot and a one-entry history" "$(jget snapshot) $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["history"]))' "$T/body")" "null 1"
fetch w1 "$W1"
is "w1 gets the install of generation 1" "$(got w1)" "install g1 null"
report w1 "$W1" serving >/dev/null
is "sandbox running" "$(state "$S")" running
is "a route names w1, generation 1" "$(route "$S") $(jget route.worker) $(jget route.generation)" "200 w1 1"

# ---- pause ----
is "bob cannot pause alice's sandbox (404)" "$(req POST "/v1/sandboxes/$S/pause" "$KB" '{}')" 404
is "pause with an unknown field -> 400" "$(req POST "/v1/sandboxes/$S/pause" "$K" '{"now":true}')" 400
is "pause -> 202" "$(req POST "/v1/sandboxes/$S/pause" "$K" '{}')" 202
is "... state pausing" "$(jget state)" pausing
is "a second pause while the first holds the lease -> 409" "$(req POST "/v1/sandboxes/$S/pause" "$K" '{}')" 409
is "... 'another lifecycle operation is in progress'" "$(jget message)" "another lifecycle operation is in progress"
is "routes while pausing -> 409" "$(route "$S")" 409
fetch w1 "$W1"
is "w1 gets retire g1 with snapshot:true" "$(got w1)" "retire g1 true"
D1=$(digest)
is "w1 reports retired with the archive digest" "$(report w1 "$W1" retired "$D1")" 200
wait_state "$S" paused 5
is "sandbox paused" "$(state "$S")" paused
is "... its snapshot is that digest" "$(jget snapshot)" "$D1"
is "... lease released" "$(sql "SELECT COALESCE(lease_owner,'none') FROM sandboxes WHERE id='$S'")" none
is "routes to a paused sandbox -> 409 conflict" "$(route "$S") $(jget error)" "409 conflict"
is "pause a paused sandbox -> 409" "$(req POST "/v1/sandboxes/$S/pause" "$K" '{}')" 409
is "move a paused sandbox -> 409" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w2"}')" 409
req GET "/v1/sandboxes/$S/snapshots" "$K" >/dev/null
is "snapshot list: the automatic snapshot of generation 1" \
	"$(jget snapshots.0.state) $(jget snapshots.0.digest) $(jget snapshots.0.generation) $(jget snapshots.0.size)" "ready $D1 1 4096"
is "bob cannot list them (404)" "$(req GET "/v1/sandboxes/$S/snapshots" "$KB")" 404

# ---- resume: previous worker, generation + 1, from the digest ----
is "resume with a bad worker id -> 400" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{"worker":"w/1"}')" 400
is "resume -> 202" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{}')" 202
is "... state resuming, execution = generation 2 pending on w1" \
	"$(jget state) $(jget execution.generation) $(jget execution.state) $(jget execution.worker)" "resuming 2 pending w1"
is "routes while resuming -> 503" "$(route "$S")" 503
check "... with Retry-After" grep -qi '^Retry-After: 1' "$T/hdr"
fetch w1 "$W1"
is "w1 gets install g2 restoring that digest" "$(got w1)" "install g2 \"$D1\""
is "resume a resuming sandbox -> 409" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{}')" 409
report w1 "$W1" serving >/dev/null
wait_state "$S" running 5
is "sandbox running again" "$(state "$S")" running
route "$S" >/dev/null
cp "$T/body" "$T/r2"
is "the route names generation 2 on w1" "$(jget route.generation "$T/r2") $(jget route.worker "$T/r2")" "2 w1"
is "resume a running sandbox -> 409" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{}')" 409

# ---- move w1 -> w2 ----
is "move without \"to\" -> 400" "$(req POST "/v1/sandboxes/$S/move" "$K" '{}')" 400
is "move to the current worker -> 409" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w1"}')" 409
is "move to an unknown worker -> 409" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w9"}')" 409
is "w2 re-registers with capacity 0" "$(req POST /v1/workers/w2/register "$W2" '{"incarnation":"incB","endpoint":"http://127.0.0.1:9002","capacity":0}')" 200
is "move to a full worker -> 409" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w2"}') $(jget message)" "409 the target worker has no free capacity"
req POST /v1/workers/w2/register "$W2" '{"incarnation":"incB","endpoint":"http://127.0.0.1:9002","capacity":10}' >/dev/null
is "move to w2 -> 202" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w2"}')" 202
is "... state moving" "$(jget state)" moving
fetch w1 "$W1"
is "w1 gets retire g2 with snapshot:true" "$(got w1)" "retire g2 true"
fetch w2 "$W2" 1
is "w2 gets nothing before the old execution retired" "$(got w2)" ""
REJ=$(jget route "$T/r2")
is "rejected = the old route while nothing serves -> 503" "$(route "$S" "{\"access\":[\"exec\"],\"rejected\":$REJ}")" 503
check "... with Retry-After" grep -qi '^Retry-After: 1' "$T/hdr"
D2=$(digest)
report w1 "$W1" retired "$D2" >/dev/null
fetch w2 "$W2"
is "w2 gets install g3 restoring the new digest" "$(got w2)" "install g3 \"$D2\""
is "sandbox still moving, execution g3 pending on w2" "$(state "$S") $(jget execution.generation) $(jget execution.worker)" "moving 3 w2"
is "rejected = the old route while g3 is not serving -> 503" "$(route "$S" "{\"access\":[\"exec\"],\"rejected\":$REJ}")" 503
report w2 "$W2" serving >/dev/null
wait_state "$S" running 5
is "sandbox running after the move" "$(state "$S")" running
is "rejected = the old route once g3 serves -> a route to w2, generation 3" \
	"$(route "$S" "{\"access\":[\"exec\"],\"rejected\":$REJ}") $(jget route.worker) $(jget route.generation)" "200 w2 3"
is "one serving execution" "$(serving_count "$S")" 1

# ---- named snapshot; takeover after kill -9 changes no route identity ----
is "snapshot with a bad name -> 400" "$(req POST "/v1/sandboxes/$S/snapshots" "$K" '{"name":"a b"}')" 400
is "named snapshot -> 202" "$(req POST "/v1/sandboxes/$S/snapshots" "$K" '{"name":"before-upgrade"}')" 202
is "... pending, no digest yet" "$(jget snapshot.state) $(jget snapshot.name) $(jget snapshot.digest)" "pending before-upgrade null"
SNAP=$(jget snapshot.id)
is "pause during the snapshot -> 409 (lease held)" "$(req POST "/v1/sandboxes/$S/pause" "$K" '{}')" 409
fetch w2 "$W2"
is "w2 gets the snapshot assignment for g3" "$(got w2)" "snapshot g3 before-upgrade"
route "$S" >/dev/null
cp "$T/body" "$T/rsnap"
ID_BEFORE=$(exec_id "$S")
OWNER1=$(sql "SELECT lease_owner FROM sandboxes WHERE id='$S'")
ctl_crash
ctl_start
# the lease (TTL 2 s) expires, then the once-a-second sweep takes it over:
# wait for that, bounded, rather than for a fixed time a loaded machine
# may not meet
i=0
while [ $i -lt 150 ]; do
	OWNER2=$(sql "SELECT lease_owner FROM sandboxes WHERE id='$S'")
	[ -n "$OWNER2" ] && [ "$OWNER2" != "$OWNER1" ] &&
	    [ "$(sql "SELECT COUNT(*) FROM audit WHERE action='operation.takeover' AND target='$S'")" = 1 ] && break
	sleep 0.1; i=$((i + 1))
done
check "after kill -9 and the lease's expiry the new daemon took the lease over" \
	test -n "$OWNER2" -a "$OWNER1" != "$OWNER2"
is "... a takeover audit row" "$(sql "SELECT COUNT(*) FROM audit WHERE action='operation.takeover' AND target='$S'")" 1
is "... the execution identity is unchanged" "$(exec_id "$S")" "$ID_BEFORE"
RS=$(jget route "$T/rsnap")
is "... the route issued before is still the current one (rejected -> converging 503)" \
	"$(route "$S" "{\"access\":[\"exec\"],\"rejected\":$RS}") $(jget message)" "503 route is converging"
is "... a new capability names the same route" "$(route "$S") $(jget route)" "200 $RS"
D3=$(digest)
is "w1 cannot answer w2's snapshot (403)" "$(req POST /v1/workers/w1/snapshots "$W1" "{\"snapshot_id\":\"$SNAP\",\"sandbox\":\"$S\",\"generation\":3,\"digest\":\"$D3\",\"size\":1}")" 403
is "a malformed digest -> 400" "$(req POST /v1/workers/w2/snapshots "$W2" "{\"snapshot_id\":\"$SNAP\",\"sandbox\":\"$S\",\"generation\":3,\"digest\":\"ABC\",\"size\":1}")" 400
is "w2 reports the snapshot" "$(req POST /v1/workers/w2/snapshots "$W2" "{\"snapshot_id\":\"$SNAP\",\"sandbox\":\"$S\",\"generation\":3,\"digest\":\"$D3\",\"size\":1}")" 200
req GET "/v1/sandboxes/$S/snapshots" "$K" >/dev/null
is "the named snapshot is ready" "$(jget snapshots.2.name) $(jget snapshots.2.state) $(jget snapshots.2.digest)" "before-upgrade ready $D3"
is "... and is the sandbox's latest" "$(req GET "/v1/sandboxes/$S" "$K" >/dev/null; jget snapshot)" "$D3"
is "... lease released" "$(sql "SELECT COALESCE(lease_owner,'none') FROM sandboxes WHERE id='$S'")" none

# ---- kill -9 during a move, after the retire, before the worker's report ----
is "move w2 -> w1 -> 202" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w1"}')" 202
fetch w2 "$W2"
is "w2 gets retire g3" "$(got w2)" "retire g3 true"
ctl_crash
ctl_start
is "after restart: still moving" "$(state "$S")" moving
D4=$(digest)
is "w2 reports retired to the new daemon" "$(report w2 "$W2" retired "$D4")" 200
fetch w1 "$W1"
is "w1 gets install g4 with that digest (after takeover)" "$(got w1)" "install g4 \"$D4\""
report w1 "$W1" serving >/dev/null
wait_state "$S" running 5
is "sandbox running on w1, generation 4" "$(state "$S") $(jget execution.worker) $(jget execution.generation)" "running w1 4"
is "exactly one serving execution" "$(serving_count "$S")" 1

# ---- kill -9 during a move, after the report, before the install ----
# The move is started by a daemon with a long lease (20 s) that dies at
# once; its successor records the report but may not step while that lease
# runs, and is killed too; the next one takes over once the lease expired.
ctl_crash
ctl_start --lease-ttl 20
is "move w1 -> w2 -> 202" "$(req POST "/v1/sandboxes/$S/move" "$K" '{"to":"w2"}')" 202
ctl_crash
ctl_start
fetch w1 "$W1"
is "w1 gets retire g4" "$(got w1)" "retire g4 true"
D5=$(digest)
is "w1 reports retired" "$(report w1 "$W1" retired "$D5")" 200
is "report recorded, no install yet (generation 4 is the highest)" \
	"$(sql "SELECT state FROM executions WHERE sandbox='$S' AND generation=4") $(sql "SELECT MAX(generation) FROM executions WHERE sandbox='$S'") $(sql "SELECT snapshot FROM sandboxes WHERE id='$S'")" "retired 4 $D5"
ctl_crash
ctl_start
# the install comes once the dead daemon's 20 s lease has expired
for i in 1 2 3 4; do fetch w2 "$W2" 30; [ -n "$(got w2)" ] && break; done
is "after restart w2 gets install g5 with that digest" "$(got w2)" "install g5 \"$D5\""
report w2 "$W2" serving >/dev/null
wait_state "$S" running 5
is "sandbox running on w2, generation 5" "$(state "$S") $(jget execution.worker) $(jget execution.generation)" "running w2 5"
is "exactly one serving execution" "$(serving_count "$S")" 1
is "generations 1..5, none reused, strictly increasing with time" \
	"$(sql "SELECT COUNT(*), COUNT(DISTINCT generation), MAX(generation) FROM executions WHERE sandbox='$S'")" "5|5|5"
is "history lists every generation, oldest first, with its worker and state" \
	"$(python3 -c 'import json,sys
print(" ".join("%d:%s:%s:%s" % (h["generation"], h["worker"], h["state"], "E" if h["ended_at"] else "-") for h in json.load(open(sys.argv[1]))["history"]))' "$T/body")" \
	"1:w1:retired:E 2:w1:retired:E 3:w2:retired:E 4:w1:retired:E 5:w2:serving:-"
is "operations: 6 done ok, none open" "$(sql "SELECT COUNT(*) FROM operations WHERE sandbox='$S' AND result='ok'") $(sql "SELECT COUNT(*) FROM operations WHERE step <> 'done'")" "6 0"

# ---- timeouts ----
# (not pinned: the scheduler puts it on w1, which runs nothing now)
# idle 5 s: long enough that a loaded machine still issues the routes below
# well within it (each is a curl and a python3)
req POST /v1/sandboxes "$K" '{"timeouts":{"idle":5,"action":"pause"}}' >/dev/null
TI=$(jget id)
is "the idle-timeout sandbox went to the empty worker" "$(jget execution.worker)" w1
fetch w1 "$W1"
report w1 "$W1" serving >/dev/null
T0=$(date +%s)
for i in 1 2 3 4 5 6 7 8; do route "$TI" >/dev/null; sleep 0.8; done
is "capabilities issued keep an idle-5s sandbox running" "$(state "$TI")" running
wait_state "$TI" pausing 12
is "idle 5 s with action pause -> pausing" "$(state "$TI")" pausing
fetch w1 "$W1"
is "w1 gets retire with snapshot:true" "$(got w1)" "retire g1 true"
DTI=$(digest)
report w1 "$W1" retired "$DTI" >/dev/null
wait_state "$TI" paused 5
is "... then paused" "$(state "$TI")" paused
is "... audited as a timeout" "$(sql "SELECT detail LIKE '%reason=timeout idle%' FROM audit WHERE action='sandbox.pause' AND target='$TI'")" 1
# cleared now: the manual pause below must not race an idle one when this
# machine is slow (the idle clock of the resumed execution is 5 s)
is "timeouts cleared while paused" "$(req PUT "/v1/sandboxes/$TI/timeouts" "$K" '{}')" 200

# resume prefers the previous worker only while it has room
is "w1 re-registers with capacity 0" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"incA","endpoint":"http://127.0.0.1:9001","capacity":0}')" 200
is "resume naming the full worker -> 409" "$(req POST "/v1/sandboxes/$TI/resume" "$K" '{"worker":"w1"}')" 409
is "resume with the previous worker full -> the scheduler's choice, w2" \
	"$(req POST "/v1/sandboxes/$TI/resume" "$K" '{}') $(jget execution.worker) $(jget execution.generation)" "202 w2 2"
fetch w2 "$W2"
is "w2 gets install g2 restoring the pause's archive" "$(got w2)" "install g2 \"$DTI\""
report w2 "$W2" serving >/dev/null
wait_state "$TI" running 5
is "... running on w2" "$(state "$TI") $(jget execution.worker)" "running w2"
req POST /v1/workers/w1/register "$W1" '{"incarnation":"incA","endpoint":"http://127.0.0.1:9001","capacity":10}' >/dev/null
# a retirement that brings no archive: continuing from an older snapshot
# would roll the sandbox back silently
is "pause again -> 202" "$(req POST "/v1/sandboxes/$TI/pause" "$K" '{}')" 202
fetch w2 "$W2"
report w2 "$W2" retired >/dev/null
wait_state "$TI" failed 5
is "a pause whose retirement brought no archive ends failed" "$(state "$TI") $(jget snapshot)" "failed $DTI"

req POST /v1/sandboxes "$K" '{"worker":"w2"}' >/dev/null
TA=$(jget id)
fetch w2 "$W2"
report w2 "$W2" serving >/dev/null
is "PUT timeouts with a bad action -> 400" "$(req PUT "/v1/sandboxes/$TA/timeouts" "$K" '{"action":"sleep"}')" 400
is "PUT timeouts with a negative idle -> 400" "$(req PUT "/v1/sandboxes/$TA/timeouts" "$K" '{"idle":-1}')" 400
is "bob cannot set them (404)" "$(req PUT "/v1/sandboxes/$TA/timeouts" "$KB" '{"absolute":2}')" 404
is "PUT timeouts absolute 2 action kill -> 200" "$(req PUT "/v1/sandboxes/$TA/timeouts" "$K" '{"absolute":2,"action":"kill"}')" 200
is "... the sandbox object shows them" "$(jget timeouts)" '{"absolute": 2, "action": "kill", "idle": 0}'
wait_state "$TA" killed 6
is "absolute timeout with action kill -> killed" "$(state "$TA")" killed
fetch w2 "$W2"
is "w2 gets retire without snapshot" "$(got w2)" "retire g1 false"

# ---- concurrent lifecycle calls: exactly one 202; then kill wins ----
req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
SC=$(jget id)
fetch w1 "$W1"
report w1 "$W1" serving >/dev/null
export U K SC
( for i in 1 2 3 4; do echo pause; echo move; echo snapshots; done ) >"$T/calls"
xargs -P 12 -n 1 sh -c 'case $0 in move) b="{\"to\":\"w2\"}";; *) b="{}";; esac
	curl -s -o /dev/null -w "%{http_code}\n" -X POST -H "Authorization: Bearer $K" \
	--data-binary "$b" "$U/v1/sandboxes/$SC/$0"' <"$T/calls" >"$T/codes"
is "12 concurrent pause/move/snapshot calls: exactly one 202" "$(grep -c '^202$' "$T/codes")" 1
is "... the other 11 are 409" "$(grep -c '^409$' "$T/codes")" 11
is "... one operation row" "$(sql "SELECT COUNT(*) FROM operations WHERE sandbox='$SC'")" 1
LO=$(sql "SELECT lease_owner FROM sandboxes WHERE id='$SC'")
sleep 3
# renewed once a second: a tick late on a loaded machine renews a moment later
renewed() { [ "$(sql "SELECT lease_owner = '$LO' AND lease_expiry >= strftime('%s','now') FROM sandboxes WHERE id='$SC'")" = 1 ]; }
eventually 3 renewed
is "3 s later (lease ttl 2 s) the same daemon still holds the renewed lease" \
	"$(sql "SELECT lease_owner = '$LO' AND lease_expiry >= strftime('%s','now') FROM sandboxes WHERE id='$SC'")" 1
is "... so another call is still 409" "$(req POST "/v1/sandboxes/$SC/pause" "$K" '{}')" 409
is "DELETE while the operation holds the lease -> 200 (kill wins)" "$(req DELETE "/v1/sandboxes/$SC" "$K")" 200
is "... killed" "$(jget state)" killed
is "... the operation is abandoned, the lease released" \
	"$(sql "SELECT step || ' ' || result FROM operations WHERE sandbox='$SC'") $(sql "SELECT COALESCE(lease_owner,'none') FROM sandboxes WHERE id='$SC'")" "done abandoned none"
is "... the execution is retiring with one retire out" \
	"$(sql "SELECT state FROM executions WHERE sandbox='$SC'") $(sql "SELECT COUNT(*) FROM assignments WHERE sandbox='$SC' AND action='retire'")" "retiring 1"
fetch w1 "$W1"
report w1 "$W1" retired "$(digest)" >/dev/null
sleep 1.2
is "after the worker's report nothing new is placed for the killed sandbox" \
	"$(sql "SELECT COUNT(*) FROM executions WHERE sandbox='$SC'") $(state "$SC")" "1 killed"
is "a lifecycle call on a killed sandbox -> 409" "$(req POST "/v1/sandboxes/$SC/resume" "$K" '{}')" 409

# ---- an execution failing during an operation ----
req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
SF=$(jget id)
fetch w1 "$W1"
report w1 "$W1" serving >/dev/null
is "move to w2 -> 202" "$(req POST "/v1/sandboxes/$SF/move" "$K" '{"to":"w2"}')" 202
fetch w1 "$W1"
report w1 "$W1" retired "$(digest)" >/dev/null
fetch w2 "$W2"
is "w2 gets install g2" "$(got w2 | cut -d' ' -f1,2)" "install g2"
report w2 "$W2" failed >/dev/null
wait_state "$SF" failed 5
is "the target's install failed -> sandbox failed" "$(state "$SF")" failed
is "... the operation failed, the lease released" \
	"$(sql "SELECT result FROM operations WHERE sandbox='$SF'") $(sql "SELECT COALESCE(lease_owner,'none') FROM sandboxes WHERE id='$SF'")" "failed none"
is "... routes -> 409" "$(route "$SF")" 409
# a failed sandbox comes back only from an archive of the failed execution
# itself: resuming from the older one would roll its files back silently
is "resume of a failed sandbox whose files were not archived -> 409" \
	"$(req POST "/v1/sandboxes/$SF/resume" "$K" '{}') $(jget message)" \
	"409 the failed execution's files were not archived; it cannot be resumed"
# the worker archived the layer of an execution that failed (its bridge
# kept dying) and sent the archive with the report
req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
SG=$(jget id)
fetch w1 "$W1"
report w1 "$W1" serving >/dev/null
DF=$(digest)
is "a serving report carrying an archive -> 400" "$(report w1 "$W1" serving "$DF")" 400
is "a failed report carrying an archive -> 200" "$(report w1 "$W1" failed "$DF")" 200
wait_state "$SG" failed 5
is "... the sandbox failed, its latest snapshot is that archive" "$(state "$SG") $(jget snapshot)" "failed $DF"
is "resume of the failed sandbox -> 202" "$(req POST "/v1/sandboxes/$SG/resume" "$K" '{}')" 202
fetch w1 "$W1"
is "w1 gets install g2 restoring the failed layer's archive" "$(got w1)" "install g2 \"$DF\""
report w1 "$W1" serving >/dev/null
wait_state "$SG" running 5
is "... running again as generation 2" "$(state "$SG") $(jget execution.generation)" "running 2"

# ---- metrics, audit, store ----
# (an operation is counted once its transaction committed, after its answer)
resumed_counted() { curl -s "$U/metrics" | grep -q 'space_control_lifecycle_operations_total{kind="resume",result="ok"} 2'; }
eventually 10 resumed_counted
curl -s "$U/metrics" >"$T/metrics"
check "metrics: lifecycle operations by kind and result (move ok)" grep -q 'space_control_lifecycle_operations_total{kind="move",result="ok"} 1' "$T/metrics"
check "metrics: pause ok (timeout)" grep -q 'space_control_lifecycle_operations_total{kind="pause",result="ok"} 1' "$T/metrics"
check "metrics: pause failed (no archive)" grep -q 'space_control_lifecycle_operations_total{kind="pause",result="failed"} 1' "$T/metrics"
check "metrics: move failed" grep -q 'space_control_lifecycle_operations_total{kind="move",result="failed"} 1' "$T/metrics"
check "metrics: resume ok (a paused and a failed sandbox)" grep -q 'space_control_lifecycle_operations_total{kind="resume",result="ok"} 2' "$T/metrics"
check "metrics: conflicts counted" grep -Eq 'space_control_lifecycle_operations_total\{kind="[a-z]+",result="conflict"\} [0-9]+' "$T/metrics"
check "metrics: the abandoned operation" grep -Eq 'space_control_lifecycle_operations_total\{kind="[a-z]+",result="abandoned"\} 1' "$T/metrics"
is "audit: one start row per operation" \
	"$(sql "SELECT COUNT(*) FROM audit WHERE action IN ('sandbox.pause','sandbox.resume','sandbox.move','sandbox.snapshot')") $(sql "SELECT COUNT(*) FROM operations")" "12 12"
is "audit: one end row per operation" "$(sql "SELECT COUNT(*) FROM audit WHERE action='operation.end'")" 12
is "no execution generation reused anywhere" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, generation FROM executions GROUP BY 1, 2 HAVING COUNT(*) > 1) x")" 0
is "store integrity" "$(store_integrity)" ok

# ---- an execution that fails while it is retired ----
# its worker archived the stopped layer with the failure (a relaunch that
# failed, a bridge that kept dying): that archive carries a move or a
# pause on; one failed without an archive still fails the operation
req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
SM=$(jget id)
fetch w1 "$W1"
report w1 "$W1" serving >/dev/null
wait_state "$SM" running 5
is "move to w2 -> 202" "$(req POST "/v1/sandboxes/$SM/move" "$K" '{"to":"w2"}')" 202
fetch w1 "$W1"
is "w1 gets retire g1" "$(got w1 | cut -d' ' -f1,2)" "retire g1"
DM=$(digest)
is "w1 reports g1 failed, with its layer's archive -> 200" "$(report w1 "$W1" failed "$DM")" 200
fetch w2 "$W2"
is "... the move goes on: w2 gets install g2 restoring that archive" "$(got w2)" "install g2 \"$DM\""
report w2 "$W2" serving >/dev/null
wait_state "$SM" running 5
is "... and ends ok: running as generation 2 on w2" \
	"$(state "$SM") $(jget execution.generation) $(jget execution.worker) $(sql "SELECT result FROM operations WHERE sandbox='$SM'")" "running 2 w2 ok"
is "pause -> 202" "$(req POST "/v1/sandboxes/$SM/pause" "$K" '{}')" 202
fetch w2 "$W2"
DP=$(digest)
report w2 "$W2" failed "$DP" >/dev/null
wait_state "$SM" paused 5
is "a pause whose execution failed with an archive: paused, that archive its latest" "$(state "$SM") $(jget snapshot)" "paused $DP"
is "resume -> 202" "$(req POST "/v1/sandboxes/$SM/resume" "$K" '{}')" 202
fetch w1 "$W1"; fetch w2 "$W2"
W=w1; [ -n "$(got w2)" ] && W=w2
[ $W = w1 ] && WK=$W1 || WK=$W2
is "... its install restores that archive" "$(got $W)" "install g3 \"$DP\""
report $W "$WK" serving >/dev/null
wait_state "$SM" running 5
[ $W = w1 ] && TO=w2 || TO=w1
is "move -> 202" "$(req POST "/v1/sandboxes/$SM/move" "$K" "{\"to\":\"$TO\"}")" 202
fetch $W "$WK"
report $W "$WK" failed >/dev/null
wait_state "$SM" failed 5
is "a move whose execution failed without an archive fails" \
	"$(state "$SM") $(sql "SELECT result FROM operations WHERE sandbox='$SM' ORDER BY rowid DESC LIMIT 1")" "failed failed"

kill "$PID"; wait "$PID"; RC=$?; PID=
is "clean shutdown" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
