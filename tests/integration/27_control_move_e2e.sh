#!/bin/sh
# space-control moves a sandbox between two real workers (sbx-manager +
# node-api each, one shared snapshot store): a file written on w1 is read
# back on w2, generation 1's capability is refused by w1 once retired, a
# client that reports the rejected route gets a route to w2 and generation
# 2, and w2 refuses a capability for the execution it does not run.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
MGR_FLAGS="--snapshot-dir $T/snapshots"
NP1=$(free_port); NP2=$(free_port)

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP1=$(route "$S"); R1=$(jget route); E1=$(jget endpoint)
is "the route names w1's node-api" "$E1" "http://127.0.0.1:$NP1"
CAP=$CAP1
printf 'moved with the sandbox\n' >"$T/f"
is "write a file on w1" "$(napi_at "$E1" PUT 'files?path=/home/user/keep.txt' --data-binary @"$T/f")" 200

is "move to w2 -> 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
check "running again" wait_state "$S" running 30
is "now generation 2 on w2" "$(jget execution.generation "$T/sbx") $(jget execution.worker "$T/sbx")" "2 w2"
is "history: g1 retired on w1, g2 serving on w2" \
	"$(python3 -c 'import json,sys; print(" ".join("%d:%s:%s" % (h["generation"], h["worker"], h["state"]) for h in json.load(open(sys.argv[1]))["history"]))' "$T/sbx")" \
	"1:w1:retired 2:w2:serving"
P=$(jget snapshot "$T/sbx")
check "the move's archive ($P) is in the shared store" test -f "$T/snapshots/$P.snap"

CAP=$CAP1
is "generation-1 capability at w1 (retired) -> refused" "$(napi_at "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error) $(jget reason)" "409 refresh_route not_serving"
is "generation-1 capability sent to w2 -> refused: refresh the route (same sandbox, another execution)" \
	"$(napi_at "http://127.0.0.1:$NP2" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"
cpost "/v1/sandboxes/$S/routes" "{\"access\":[\"exec\",\"fs:r\",\"fs:w\"],\"rejected\":$R1}" >/dev/null
CAP=$(jget capability); E2=$(jget endpoint)
is "the client reports the rejected route and gets w2, generation 2" "$(jget route.worker) $(jget route.generation) $E2" "w2 2 http://127.0.0.1:$NP2"
is "the file is on w2" "$(napi_at "$E2" GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/f"
is "... served by generation 2 on w2" "$(hdr X-Space-Generation) $(hdr X-Space-Worker)" "2 w2"
is "a generation-2 capability sent to w1 -> refused" "$(napi_at "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"

is "kill" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S")" 200
i=0; while [ $i -lt 100 ]; do
	sbx "$S"
	[ "$(jget execution.state "$T/sbx")" = retired ] && break
	sleep 0.1; i=$((i + 1))
done
is "w2 retired generation 2" "$(jget execution.state "$T/sbx")" retired
check "no sanitizer report in the control plane's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/ctl.log'"
done_testing
