#!/bin/sh
# The worker side of the lifecycle: pause archives the writable layer into
# the snapshot store after the execution is retired (and refused), resume
# installs generation 2 from that archive (files back, owned by the
# sandbox user), a capability for generation 1 is refused with
# refresh_route at the receiver that now holds generation 2, and a live
# snapshot archives a serving layer.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP=$(free_port)
NU=http://$(pl_addr w1):$NP
W=$T/w1

register_worker w1
check "space-control up" start_ctl
check "sbx-manager made its socket" start_mgr 1 w1 "$NP"
check "node-api answers /healthz" start_napi 1 w1 "$NP" --metrics-file "$W/metrics.prom"
is "healthz body" "$(curl -s "$NU/healthz")" '{"ok":true}'

is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP1=$(route "$S")
CAP=$CAP1
printf 'kept across pause\n' >"$T/f"
is "write a file in generation 1" "$(napi PUT 'files?path=/home/user/keep.txt' --data-binary @"$T/f")" 200
is "make a directory" "$(napi POST fs/mkdir --data-binary '{"path":"/home/user/dir"}')" 200

# ---- live snapshot ----
is "POST snapshots -> 202" "$(cpost "/v1/sandboxes/$S/snapshots" '{"name":"live"}')" 202
i=0; while [ $i -lt 100 ]; do
	curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots"
	[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
	sleep 0.1; i=$((i + 1))
done
is "live snapshot ready" "$(jget snapshots.0.state "$T/snaps")" ready
D=$(jget snapshots.0.digest "$T/snaps")
check "archive $D uploaded to the control plane" test -f "$T/c/archives/$D.snap"
check "... the same bytes as in the worker's own cache" cmp -s "$T/c/archives/$D.snap" "$W/snapshots/$D.snap"

# ---- pause: retire with an archive ----
is "pause -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 30
is "generation 1 record retired" "$(wsql w1 "select state, generation from records where sandbox='$S'")" "retired|1"
is "generation-1 capability after pause -> 409 not_serving" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "409 not_serving"
P=$(jget snapshot "$T/sbx")
check "the pause archive ($P) is in the store" test -f "$T/c/archives/$P.snap"

# ---- resume: generation 2 from the archive ----
is "resume -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
check "running again" wait_state "$S" running 30
is "record now generation 2, serving" "$(wsql w1 "select state, generation from records where sandbox='$S'")" "serving|2"
CAP=$CAP1
is "generation-1 capability at the generation-2 receiver -> 409" "$(napi POST exec --data-binary '{"argv":["true"]}')" 409
is "... refresh_route / generation_mismatch" "$(jget error) $(jget reason)" "refresh_route generation_mismatch"
CAP=$(route "$S")
is "generation-2 capability: the file is back" "$(napi GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/f"
is "... served by generation 2" "$(hdr X-Space-Generation)" 2
is "the restored files belong to the sandbox user (append works)" \
	"$(napi POST exec --data-binary '{"argv":["sh","-c","echo more >> /home/user/keep.txt && stat -c %U /home/user/keep.txt /home/user/dir"]}' >/dev/null; jget stdout)" \
	"$(printf 'user\nuser')"

done_testing
