#!/bin/sh
# A host disappears (docs/control-plane.md "Lost workers", docs/recovery.md
# "What a lost host loses"), in the layout of simulated hosts
# (tests/lib_hosts.sh): space-control and three workers each in a network
# namespace of its own with its own address on a bridge the test made.
#  - w1's host is killed: kill -9 of sbx-manager, node-api, the bridges and
#    sandboxes, and the process holding its namespace;
#  - w1 is marked lost after the heartbeat timeout; after the grace its
#    sandbox with a snapshot serves again on another worker, as a new
#    generation, with the snapshot's files and without what was written
#    after it; its sandbox without a snapshot is failed, and not resumable;
#  - the old capability is refused by the new worker (refresh_route);
#  - w1 comes back (a new namespace, the same address and data directory):
#    its long-poll retires the lost executions, it serves neither (the old
#    capability is refused there too), and the sandbox keeps one execution.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
SPACE_TEST_HOSTS=1
export SPACE_TEST_HOSTS
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
HB=10
GRACE=2
# sbx-manager heartbeats every 5 s: the timeout must leave room for one late
CTL_FLAGS="--heartbeat-timeout $HB --lost-grace $GRACE"
# each worker keeps its own snapshot cache (its data directory); archives
# travel to space-control and back over HTTP by digest
NP1=$(free_port); NP2=$(free_port); NP3=$(free_port)
netns() { readlink "/proc/$1/ns/net"; }

check "space-control up on its host" start_ctl
check "worker w1 up on its host" add_worker 1 w1 "$NP1"
check "space-control, w1 and the test each in a network namespace of its own" \
	test "$(netns "$CTL")" != "$(netns $$)" -a "$(netns "$M1")" != "$(netns "$CTL")" -a "$(netns "$M1")" != "$(netns $$)"
check "w1's sbx-manager and node-api share w1's host" test "$(netns "$M1")" = "$(netns "$N1")"
check "the control plane listens on its host's address only" \
	sh -c "! curl -s -m 2 -o /dev/null http://127.0.0.1:$CP/healthz && curl -s -m 2 -o /dev/null $CU/healthz"

# two sandboxes on w1 (the only worker yet)
is "create A" "$(cpost /v1/sandboxes '{}')" 201
A=$(jget id)
is "create B" "$(cpost /v1/sandboxes '{}')" 201
B=$(jget id)
check "A running" wait_state "$A" running 30
check "B running" wait_state "$B" running 30
is "both on w1" "$(sbx "$A"; jget execution.worker "$T/sbx") $(sbx "$B"; jget execution.worker "$T/sbx")" "w1 w1"
check "worker w2 up on its host" add_worker 2 w2 "$NP2"
check "worker w3 up on its host" add_worker 3 w3 "$NP3"
check "w2 and w3 on hosts of their own" test "$(netns "$M2")" != "$(netns "$M1")" -a "$(netns "$M3")" != "$(netns "$M2")"

S=$A
CAP=$(route "$A"); CAPA1=$CAP; E1=$(jget endpoint)
is "A's route names w1's address" "$E1" "http://$(pl_addr w1):$NP1"
printf 'in the snapshot\n' >"$T/keep"
is "A: write keep.txt" "$(napi_at "$E1" PUT 'files?path=/home/user/keep.txt' --data-binary @"$T/keep")" 200
is "A: named snapshot -> 202" "$(cpost "/v1/sandboxes/$A/snapshots" '{"name":"before"}')" 202
i=0; while [ $i -lt 200 ]; do
	curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$A/snapshots"
	[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
	sleep 0.1; i=$((i + 1))
done
is "A: the snapshot is ready" "$(jget snapshots.0.state "$T/snaps")" ready
DA=$(jget snapshots.0.digest "$T/snaps")
is "A: write after.txt after the snapshot" "$(napi_at "$E1" PUT 'files?path=/home/user/after.txt' --data-binary @"$T/keep")" 200
S=$B
CAP=$(route "$B")
is "B: write a file (no snapshot ever)" "$(napi_at "$E1" PUT 'files?path=/home/user/b.txt' --data-binary @"$T/keep")" 200

# ---- w1's host disappears ----
S=$A
CAPA1=$(route "$A")
MGR1=$M1
check "w1's host is gone (its processes, bridges, sandboxes and namespace)" host_kill w1
wait "$MGR1" 2>/dev/null; wait "$N1" 2>/dev/null
M1= N1=
check "... nothing of it runs" sh -c "! kill -0 $MGR1 2>/dev/null"
check "... its node-api's address does not answer" sh -c "! curl -s -m 2 -o /dev/null $E1/healthz"
lost=0; i=0
while [ $i -lt 300 ]; do
	[ "$(csql "SELECT state FROM workers WHERE id='w1'")" = lost ] && { lost=1; break; }
	sleep 0.1; i=$((i + 1))
done
is "w1 is marked lost after the heartbeat timeout ($HB s)" "$lost" 1
# (A stays "running" while w1 is only lost: its next generation is the sign)
i=0
while [ $i -lt 600 ]; do
	sbx "$A"
	[ "$(jget execution.generation "$T/sbx") $(jget state "$T/sbx")" = "2 running" ] && break
	sleep 0.1; i=$((i + 1))
done
is "A serves again after the grace ($GRACE s): generation 2, running" \
	"$(jget execution.generation "$T/sbx") $(jget state "$T/sbx")" "2 running"
set -- $(jget execution.generation "$T/sbx") $(jget execution.worker "$T/sbx")
check "... on w2 or w3" test "$2" = w2 -o "$2" = w3
WA=$2
is "history: generation 1 failed on w1 (worker lost), 2 serving on $WA" \
	"$(python3 -c 'import json,sys; print(" ".join("%d:%s:%s" % (h["generation"], h["worker"], h["state"]) for h in json.load(open(sys.argv[1]))["history"]))' "$T/sbx")" \
	"1:w1:failed 2:$WA:serving"
is "... the record says why" "$(csql "SELECT error FROM executions WHERE sandbox='$A' AND generation=1")" "worker lost"
S=$A
CAP=$(route "$A"); E2=$(jget endpoint)
is "A's new route names $WA's address" "$E2" "http://$(pl_addr "$WA"):$(eval echo \$NP${WA#w})"
is "A: keep.txt is back (the snapshot's files)" "$(napi_at "$E2" GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/keep"
is "A: after.txt, written after the snapshot, is lost" "$(napi_at "$E2" GET 'files?path=/home/user/after.txt')" 404
is "A: restored from the snapshot $DA" "$(sbx "$A"; jget snapshot "$T/sbx")" "$DA"
CAP=$CAPA1
refused() { # WHERE URL: the old capability is refused there (409
	# refresh_route; 401 when a slow machine let its 120 s pass first)
	r="$(napi_at "$2" POST exec --data-binary '{"argv":["true"]}') $(jget error)"
	case $r in
	"409 refresh_route" | "401 capability_expired") ok "A: the old capability at $1 is refused ($r)" ;;
	*) not_ok "A: the old capability at $1 is refused"; diag "got '$r'" ;;
	esac
}
refused "$WA" "$E2"
check "B is failed (it served, nothing was archived)" wait_state "$B" failed 30
is "B: a resume is refused" "$(cpost "/v1/sandboxes/$B/resume" '{}')" 409

# ---- w1 comes back: a new namespace, the same address and data ----
check "w1's host comes back, sbx-manager restarts on its data" start_mgr 1 w1 "$NP1"
check "... and node-api" start_napi 1 w1 "$NP1"
i=0
while [ $i -lt 300 ]; do
	[ "$(wsql w1 "SELECT state FROM records WHERE sandbox='$A'")" = retired ] &&
	    [ "$(wsql w1 "SELECT state FROM records WHERE sandbox='$B'")" = retired ] && break
	sleep 0.1; i=$((i + 1))
done
is "w1 retired A's lost execution (its long-poll's retire)" "$(wsql w1 "SELECT state, generation FROM records WHERE sandbox='$A'")" "retired|1"
is "... and B's" "$(wsql w1 "SELECT state FROM records WHERE sandbox='$B'")" retired
S=$A
CAP=$CAPA1
refused w1 "$E1"
is "w1 is live again" "$(csql "SELECT state FROM workers WHERE id='w1'")" live
is "A: one active execution, generation 2 on $WA" \
	"$(csql "SELECT COUNT(*) || ' ' || MAX(generation) || ' ' || MAX(worker) FROM executions WHERE sandbox='$A' AND state IN ('pending','starting','serving')")" "1 2 $WA"
is "A: still running there" "$(sbx "$A"; jget state "$T/sbx") $(jget execution.worker "$T/sbx")" "running $WA"
is "audit: one failover each" "$(csql "SELECT COUNT(*) FROM audit WHERE action='sandbox.failover'")" 2
done_testing
