#!/bin/sh
# ci: once
# sbx-manager --resident (on Kubernetes the pod's UID): the resident of
# every route of this worker. A new pod on the same data directory is a new
# resident: the control plane fails what ran under the old one and places
# its sandboxes again; the new sbx-manager stops the old bridges (they must
# never serve again), archives their layers and refuses capabilities of the
# old resident. A resident that is not an id is refused at start.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP=$(free_port)
NU=http://127.0.0.1:$NP

register_worker w1
check "space-control up" start_ctl

# a resident that is not an id
"$BIN/sbx-manager" --data-dir "$T/bad" --control "$CU" --worker-id w1 \
    --credential-file "$T/cred_w1" --root-key "$ROOT" --endpoint "$NU" --capacity 2 \
    --resident 'pod/../x' >/dev/null 2>"$T/bad.err"; rc=$?
is "--resident 'pod/../x' exits 1" "$rc" 1
check "... saying why" grep -q -- '--resident: not an id' "$T/bad.err"

check "sbx-manager (resident pod-a) up" start_mgr 1 w1 "$NP" --resident pod-a
check "node-api up" start_napi 1 w1 "$NP"
is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
is "its execution's resident is pod-a" "$(csql "select resident from executions where sandbox='$S' and generation=1")" pod-a
CAP=$(route "$S")
is "the route names resident pod-a" "$(jget route.resident)" pod-a
is "exec under pod-a" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
CAPA=$CAP
OLDB=$(bridges)
check "one bridge runs" test -n "$OLDB"

# ---- the pod is replaced: same data directory, a new resident ----
stop N1
crash M1
check "sbx-manager (resident pod-b) up" start_mgr 1 w1 "$NP" --resident pod-b
check "node-api up again" start_napi 1 w1 "$NP"
i=0; while [ $i -lt 300 ]; do
	[ "$(csql "select count(*) from executions where sandbox='$S' and state='serving' and resident='pod-b'")" = 1 ] && break
	sleep 0.1; i=$((i + 1))
done
is "the sandbox serves again, under pod-b" "$(csql "select generation, resident from executions where sandbox='$S' and state='serving'")" "2|pod-b"
is "generation 1 (pod-a) failed" "$(csql "select state from executions where sandbox='$S' and generation=1")" failed
for b in $OLDB; do check "the old bridge $b is stopped" gone "$b" 10; done
A=$(sed -n 's/.*failed '"$S"' g1: layer archived as \([0-9a-f]*\) .*/\1/p' "$T/mgr_w1.log")
check "the old layer was archived (the user's files), then reclaimed" test -n "$A" -a -f "$T/c/archives/$A.snap"
is "the worker's record is generation 2 now" "$(wsql w1 "select generation, resident from records where sandbox='$S'")" "2|pod-b"
CAP=$CAPA
is "a capability of resident pod-a is refused: 409" "$(napi POST exec --data-binary '{"argv":["true"]}')" 409
is "... refresh_route" "$(jget error)" refresh_route
CAP=$(route "$S")
is "a fresh route names pod-b" "$(jget route.resident)" pod-b
is "exec under pod-b" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "sbx-manager alive" alive "$M1"
done_testing
