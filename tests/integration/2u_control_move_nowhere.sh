#!/bin/sh
# space-control: a move whose install finds no worker with room (the
# target and the old worker both filled while the old execution retired)
# leaves the sandbox failed with its execution retired and its own
# archive stored: it is resumed from that archive once there is room, as
# a paused one would be, not refused as a sandbox whose files were lost.
# Two workers of capacity 1 simulated by curl (as 25_control_lifecycle).
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init

. "$SPACE_TOP/tests/lib_simworker.sh"
CTL_FLAGS="--heartbeat-timeout 3600"

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
is "w1 registers (capacity 1)" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"incA","endpoint":"http://127.0.0.1:9001","capacity":1}')" 200
is "w2 registers (capacity 1)" "$(req POST /v1/workers/w2/register "$W2" '{"incarnation":"incB","endpoint":"http://127.0.0.1:9002","capacity":1}')" 200
fetch w1 "$W1" 0
fetch w2 "$W2" 0

is "create S (unpinned)" "$(req POST /v1/sandboxes "$K" '{}')" 201
S=$(jget id)
A=$(jget execution.worker)
case "$A" in w1) CA=$W1 B=w2 CB=$W2 ;; *) CA=$W2 B=w1 CB=$W1 ;; esac
fetch "$A" "$CA"
report "$A" "$CA" serving >/dev/null
is "S running on $A" "$(state "$S")" running

is "move S to $B -> 202" "$(req POST "/v1/sandboxes/$S/move" "$K" "{\"to\":\"$B\"}")" 202
fetch "$A" "$CA"
is "$A gets the retirement of g1, with an archive" "$(got "$A")" "retire g1 true"
# while S's execution retires, both workers fill up
is "create T on $B (its one place)" "$(req POST /v1/sandboxes "$K" "{\"worker\":\"$B\"}")" 201
T2=$(jget id)
is "create V on $A (the place S left)" "$(req POST /v1/sandboxes "$K" "{\"worker\":\"$A\"}")" 201
DG=$(digest)
is "$A reports S retired with its archive" "$(report "$A" "$CA" retired "$DG")" 200
check "S failed: nowhere to install it" wait_state "$S" failed 10
check "... the control plane says why" grep -q "nowhere to run $S" "$T/log"
req GET "/v1/sandboxes/$S" "$K" >/dev/null
is "... its execution retired, its snapshot the archive of that retirement" \
    "$(jget execution.state) $(jget snapshot)" "retired $DG"

is "resume while every worker is full -> 503" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{}') $(jget error)" "503 unavailable"
is "kill T ($B has room again)" "$(req DELETE "/v1/sandboxes/$T2" "$K")" 200
is "resume S -> 202 (its files were archived)" "$(req POST "/v1/sandboxes/$S/resume" "$K" '{}')" 202
fetch "$B" "$CB"
is "$B's last assignment: S's install of g2 from that archive" "$(got "$B" | awk '{print $(NF-2), $(NF-1), $NF}')" "install g2 \"$DG\""
report "$B" "$CB" serving >/dev/null
check "S running again" wait_state "$S" running 10
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
