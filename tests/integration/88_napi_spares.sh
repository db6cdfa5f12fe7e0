#!/bin/sh
# node-api's connections to sbx-manager made ahead (node-api/manager.c,
# docs/protocol.md section 1): two, connected and through HELLO while
# node-api is idle; an operation takes one and a new one is made; each is
# replaced before sbx-manager would end it for its silence; after
# sbx-manager is killed and restarted, the first operation is answered (the
# dead connections are never used), and the connections are made again.
# Still one operation per connection: a REQUEST on a connection made ahead
# is admitted as any other (an expired capability is refused).
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP1=$(free_port)
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"

# node-api's connected unix sockets: the ones made ahead (and any in use)
spares() { ss -xpH 2>/dev/null | grep -c "pid=$N1,"; }
spare_ids() { ss -xpH 2>/dev/null | grep "pid=$N1," | awk '{ print $6 }' | sort | tr '\n' ' '; }
spares_are() { [ "$(spares)" = "$1" ]; }
check "node-api keeps 2 connections to sbx-manager made ahead" eventually 10 spares_are 2

is "create a sandbox" "$(cpost /v1/sandboxes '{}')" 201
S=$(jget id)
check "running" wait_state "$S" running 30
CAP=$(route "$S" '"exec"'); EP=$(jget endpoint)
n=0
for i in 1 2 3 4 5 6 7 8 9 10; do
	[ "$(napi_at "$EP" POST exec --data-binary '{"argv":["echo","hi"]}')" = 200 ] &&
	    [ "$(jget stdout)" = "hi" ] && n=$((n + 1))
done
is "10 execs in a row answered, one connection each" "$n" 10
check "... and 2 connections made ahead again" eventually 10 spares_are 2

# an expired capability on a connection made ahead: refused as ever
OLD=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$CAP" 300 2>/dev/null)
if [ -n "$OLD" ]; then
	C=$CAP; CAP=$OLD
	is "an expired capability is refused (401 capability_expired)" \
	    "$(napi_at "$EP" POST exec --data-binary '{"argv":["true"]}') $(cat "$T/body")" '401 {"error":"capability_expired"}'
	CAP=$C
else
	not_ok "an expired capability could be minted"
fi

# replaced before sbx-manager's 30 s end a silent connection: after 12 s
# (SPACE_MGR_SPARE_AGE_S 10) none of the first ones is left
B=$(spare_ids)
sleep 12
A=$(spare_ids)
left=0
for id in $B; do case " $A " in *" $id "*) left=$((left + 1)) ;; esac; done
is "connections made ahead are renewed within their age (before: $B, after: $A)" "$left $(spares)" "0 2"
is "an exec on a renewed connection" "$(napi_at "$EP" POST exec --data-binary '{"argv":["true"]}')" 200

# sbx-manager killed and restarted: the connections node-api made ahead to
# the old one are dead; the first operation after the restart is answered
crash M1
check "sbx-manager restarted" start_mgr 1 w1 "$NP1"
ok_first=
for i in $(seq 100); do
	st=$(napi_at "$EP" POST exec --data-binary '{"argv":["echo","back"]}')
	[ "$st" = 200 ] && { ok_first=$i; break; }
	# the recovery of the sandbox's record may take a moment: 503 until
	# the bridge is checked again, never a dead connection's error
	[ "$st" = 503 ] || break
	sleep 0.1
done
is "the first exec after the restart answers 200 (try $ok_first), not a dead connection's 503" \
    "$st $(jget stdout)" "200 back"
check "node-api made 2 connections ahead to the new sbx-manager" eventually 10 spares_are 2
check "node-api said nothing alarming" sh -c "! grep -Eq '\"level\":\"(warn|error)\"' '$T/napi_w1.log'"
done_testing
