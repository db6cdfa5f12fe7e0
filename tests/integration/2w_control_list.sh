#!/bin/sh
# space-control: the list of a principal's sandboxes comes in pages
# (GET /v1/sandboxes?limit=N&after=ID&live=true; docs/protocol.md). A page
# is at most 1,000 sandboxes, so a principal that made a great many (killed
# sandboxes stay in the store) never has its whole list built at once, nor
# read under the store's lock in one go. Oldest first; "next" names the
# last of a full page, null after the last one; live=true leaves the
# killed out. From the tenant's side: bad parameters are 400, and another
# principal's sandbox as the cursor reveals nothing.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
. "$SPACE_TOP/tests/lib_simworker.sh"
CTL_FLAGS="--heartbeat-timeout 3600"

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
is "w1 registers" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":20}')" 200
fetch w1 "$W1" 0

IDS=
for i in 1 2 3 4 5; do
	req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
	IDS="$IDS $(jget id)"
	fetch w1 "$W1"
	report w1 "$W1" serving >/dev/null
done
IDS=${IDS# }
set -- $IDS
S1=$1 S2=$2 S3=$3 S4=$4 S5=$5
check "five sandboxes running" wait_state "$S5" running 10
# S2 and S4 killed: their worker retires them
for s in "$S2" "$S4"; do
	req DELETE "/v1/sandboxes/$s" "$K" >/dev/null
	fetch w1 "$W1"
	report w1 "$W1" retired >/dev/null
done
is "S2 killed" "$(state "$S2")" killed
is "S4 killed" "$(state "$S4")" killed
req POST /v1/sandboxes "$KB" '{"worker":"w1"}' >/dev/null
B1=$(jget id)

ids() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(" ".join(s["id"] for s in d["sandboxes"]))' "$T/body"; }
nextof() { python3 -c 'import json,sys; n=json.load(open(sys.argv[1]))["next"]; print("null" if n is None else n)' "$T/body"; }

is "the whole list" "$(req GET /v1/sandboxes "$K")" 200
ALL=$(ids)
is "... every one of alice's (oldest first, by second, then by id)" \
    "$(echo "$ALL" | tr ' ' '\n' | sort | tr '\n' ' ')" "$(echo "$IDS" | tr ' ' '\n' | sort | tr '\n' ' ')"
is "... and no page after it" "$(nextof)" null
set -- $ALL
P1=$1 P2=$2 P3=$3 P4=$4 P5=$5
LIVE=$(for s in $ALL; do [ "$s" = "$S2" ] || [ "$s" = "$S4" ] || printf '%s ' "$s"; done)
LIVE=${LIVE% }
is "pages of 2: the first" "$(req GET '/v1/sandboxes?limit=2' "$K")" 200
is "... two sandboxes" "$(ids)" "$P1 $P2"
is "... next names the last of them" "$(nextof)" "$P2"
req GET "/v1/sandboxes?limit=2&after=$P2" "$K" >/dev/null
is "the second page" "$(ids) $(nextof)" "$P3 $P4 $P4"
req GET "/v1/sandboxes?limit=2&after=$P4" "$K" >/dev/null
is "the last page: one, and no next" "$(ids) $(nextof)" "$P5 null"
req GET "/v1/sandboxes?live=true" "$K" >/dev/null
is "live=true leaves the killed out" "$(ids)" "$LIVE"
set -- $LIVE
req GET "/v1/sandboxes?live=true&limit=1&after=$1" "$K" >/dev/null
is "... and pages the same way" "$(ids) $(nextof)" "$2 $2"
req GET "/v1/sandboxes?limit=5&after=$P5" "$K" >/dev/null
is "after the last one: an empty page" "$(ids)x $(nextof)" "x null"
is "another principal's sandbox as the cursor -> 200" "$(req GET "/v1/sandboxes?after=$B1" "$K")" 200
is "... reveals nothing (an empty page)" "$(ids)x $(nextof)" "x null"
is "bob sees only his own" "$(req GET /v1/sandboxes "$KB" >/dev/null; ids)" "$B1"
is "limit=0 -> 400" "$(req GET '/v1/sandboxes?limit=0' "$K")" 400
is "limit=1001 -> 400" "$(req GET '/v1/sandboxes?limit=1001' "$K")" 400
is "limit=x -> 400" "$(req GET '/v1/sandboxes?limit=x' "$K")" 400
is "after that is no id -> 400" "$(req GET '/v1/sandboxes?after=../x' "$K")" 400
is "live=maybe -> 400" "$(req GET '/v1/sandboxes?live=maybe' "$K")" 400
is "limit=1000 -> 200" "$(req GET '/v1/sandboxes?limit=1000' "$K")" 200
check "space-control still runs" kill -0 "$PID"
done_testing
