#!/bin/sh
# Disk reclamation from the operator's side: a paused execution's layer is
# deleted once its archive is in the store, a kill deletes the layer and
# run directory of the sandbox, so the worker's data directory goes back
# to what it was before the sandbox; the worker reports its disk use in
# /metrics. A kill -9 of sbx-manager while a reclamation is held up (a
# stray mount in the run directory) leaves the durable journal entry, and
# the restart finishes it; a journal entry that names an execution still
# serving (planted) deletes nothing, and the other sandbox's files and its
# named snapshot stay. The snapshot store is collected by reference, the
# worker's cache and the control plane's archives alike: the killed
# sandbox's archive goes, the named snapshot of the other stays, an
# archive nothing references goes, one whose collection was cut short is
# put back.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# short graces: archives are offered as soon as they are a second old;
# the restore path is what this tests: no image kept for a resume here
# (docs/worker.md, "Kept layers"; 5m_incremental_move.sh tests those)
MGR_FLAGS="--snapshot-gc-grace 1 --kept-layers 0"
CTL_FLAGS="--archive-grace 1"
NAPI_FLAGS="--metrics-file $T/w1/metrics.prom"
NP=$(free_port)
NU=http://127.0.0.1:$NP
W=$T/w1
platform_on_cleanup() { umount -l "$T/stray" 2>/dev/null; umount -l "$W"/run/*/stray 2>/dev/null; :; }

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"

# the layers and run directories of w1, in KiB
du_w() { du -sk --one-file-system "$W/exec" "$W/run" 2>/dev/null | awk '{ s += $1 } END { print s + 0 }'; }
exec_sh() { napi POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]]}))' "$1")" >/dev/null; }
# wait_gone PATH [seconds]: true once PATH does not exist
wait_gone() { _e=$(($(date +%s) + ${2:-20})); while [ -e "$1" ] && [ "$(date +%s)" -le $_e ]; do sleep 0.2; done; [ ! -e "$1" ]; }
killsbx() { curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"; }

# A: a sandbox that stays, with a file and a named snapshot
is "create sandbox A" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
check "A running" wait_state "$A" running 20
S=$A; CAP=$(route "$A")
is "A writes a file" "$(exec_sh 'echo keep-me >/home/user/keep'; jget exit_code)" 0
is "named snapshot of A -> 202" "$(cpost "/v1/sandboxes/$A/snapshots" '{"name":"keep"}')" 202
i=0; while [ $i -lt 200 ]; do
	curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$A/snapshots"
	[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
	sleep 0.1; i=$((i + 1))
done
NAMED=$(jget snapshots.0.digest "$T/snaps")
check "A's named snapshot is in the store" test -f "$W/snapshots/$NAMED.snap"
check "... and uploaded to the control plane" test -f "$T/c/archives/$NAMED.snap"
BASE=$(du_w)
diag "w1 layers and run directories with A: $BASE KiB"

# S: writes 60 MiB, is paused, resumed, killed
is "create sandbox S" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "S running" wait_state "$S" running 20
CAP=$(route "$S")
is "S writes 60 MiB (its archive stays below the cache's bound, SPACE_TEE_CACHE_MAX)" "$(exec_sh 'dd if=/dev/urandom of=/home/user/big bs=1M count=60 2>/dev/null && sync && md5sum </home/user/big'; jget exit_code)" 0
SUM=$(jget stdout)
USED=$(du_w)
check "the data is on w1's disk ($USED KiB)" test "$USED" -gt $((BASE + 60000))
is "pause S -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "S paused" wait_state "$S" paused 60
P=$(jget snapshot "$T/sbx")
check "the pause archive is in the store" test -f "$W/snapshots/$P.snap"
check "generation 1's layer is deleted once its archive is durable" wait_gone "$W/exec/$S.g1"
check "... and its run directory" wait_gone "$W/run/$S.g1"
is "resume S -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
check "S running again" wait_state "$S" running 60
CAP=$(route "$S")
is "the 60 MiB are back" "$(exec_sh 'md5sum </home/user/big'; jget stdout)" "$SUM"

i=0; while [ $i -lt 60 ]; do
	curl -s "$NU/metrics" >"$T/metrics"
	# the figures are taken every 10 s: wait for one taken after the
	# pause wrote its archive
	grep -q '^space_sbxmgr_disk_bytes{area="layers"} [1-9]' "$T/metrics" &&
		grep -q '^space_sbxmgr_disk_bytes{area="snapshots"} [1-9]' "$T/metrics" && break
	sleep 0.5; i=$((i + 1))
done
check "/metrics reports the worker's disk use (layers, run, snapshots)" \
	sh -c "grep -q '^space_sbxmgr_disk_bytes{area=\"layers\"} [1-9]' '$T/metrics' &&
	grep -q '^space_sbxmgr_disk_bytes{area=\"snapshots\"} [1-9]' '$T/metrics'"

i=0; while [ $i -lt 40 ]; do
	curl -s -o "$T/workers" -H "Authorization: Bearer $K" "$CU/v1/workers"
	[ "$(jget workers.0.disk.layers "$T/workers")" -gt 60000000 ] 2>/dev/null && break
	sleep 0.5; i=$((i + 1))
done
check "GET /v1/workers shows w1's disk use from its heartbeat" test "$(jget workers.0.disk.layers "$T/workers")" -gt 60000000
SPACE_API_URL=$CU SPACE_API_KEY=$K "$SPACE_BIN/space" workers >"$T/ws" 2>&1
check "space workers has DISK and STORE columns with w1's figures" \
	sh -c "head -1 '$T/ws' | grep -q 'DISK *STORE' && grep -Eq '^w1 .* [0-9]+M +[0-9]+M\$' '$T/ws'"
hb() { curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $(cat "$T/cred_w1")" \
	--data-binary "$1" "$CU/v1/workers/w1/heartbeat"; }
INC=$(cat "$W/incarnation")
is "a heartbeat with a negative disk figure -> 400" "$(hb "{\"incarnation\":\"$INC\",\"disk\":{\"layers\":-1,\"run\":0,\"snapshots\":0}}")" 400
is "... with an unknown disk key -> 400" "$(hb "{\"incarnation\":\"$INC\",\"disk\":{\"layers\":1,\"run\":0,\"snapshots\":0,\"x\":1}}")" 400

is "kill S" "$(killsbx "$S")" 200
check "the killed execution's layer is deleted" wait_gone "$W/exec/$S.g2"
check "... and its run directory" wait_gone "$W/run/$S.g2"
AFTER=$(du_w)
check "w1's layers and run directories are back to the baseline ($AFTER KiB, was $BASE)" \
	test "$AFTER" -le $((BASE + 1024))
check "grep reclaimed in the log" eventually 10 grep -q "reclaimed the layer and run directory of $S.g2" "$T/mgr_w1.log"

# ---- a failed execution: a resume from a tampered archive ----
# flip FILE OFFSET: one byte inverted in place (writing a fixed byte
# changes nothing when the byte already is it: 1 run in 256)
flip() { python3 -c 'import sys; f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0xff]))' "$1" "$2"; }
is "create sandbox S3" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S3=$(jget id)
check "S3 running" wait_state "$S3" running 20
is "pause S3 -> 202" "$(cpost "/v1/sandboxes/$S3/pause" '{}')" 202
check "S3 paused" wait_state "$S3" paused 60
P3=$(jget snapshot "$T/sbx")
# the worker's cached copy damaged (a crash, the disk): the restore
# refuses it, drops it and fetches the control plane's copy again
chmod u+w "$W/snapshots/$P3.snap"
flip "$W/snapshots/$P3.snap" 64
is "resume S3 with its cached archive damaged -> 202" "$(cpost "/v1/sandboxes/$S3/resume" '{}')" 202
check "S3 running (the damaged cached copy was fetched again)" wait_state "$S3" running 60
check "... the log says why" grep -q "archive $P3: the cached copy failed verification" "$T/mgr_w1.log"
check "... and the cache holds the good copy again" cmp -s "$W/snapshots/$P3.snap" "$T/c/archives/$P3.snap"
# the cache without it: the restore reads the archive while it arrives
is "pause S3 again -> 202" "$(cpost "/v1/sandboxes/$S3/pause" '{}')" 202
check "S3 paused" wait_state "$S3" paused 60
P3=$(jget snapshot "$T/sbx")
rm -f "$W/snapshots/$P3.snap"
N0=$(grep -c "archive $P3 fetched from the control plane" "$T/mgr_w1.log")
is "resume S3, its archive only on the control plane -> 202" "$(cpost "/v1/sandboxes/$S3/resume" '{}')" 202
check "S3 running (restored while the archive arrived)" wait_state "$S3" running 60
check "... the log says it was fetched" \
	test "$(grep -c "archive $P3 fetched from the control plane" "$T/mgr_w1.log")" -gt "$N0"
check "... and the cache holds it" cmp -s "$W/snapshots/$P3.snap" "$T/c/archives/$P3.snap"
is "pause S3 a third time -> 202" "$(cpost "/v1/sandboxes/$S3/pause" '{}')" 202
check "S3 paused" wait_state "$S3" paused 60
P3=$(jget snapshot "$T/sbx")
# now the control plane's copy is damaged in its middle and the cache
# has none: the restore reading along must not keep what it extracted
rm -f "$W/snapshots/$P3.snap"
f="$T/c/archives/$P3.snap"
chmod u+w "$f"
flip "$f" $(($(stat -c %s "$f") / 2))
is "resume S3 from its tampered archive -> 202" "$(cpost "/v1/sandboxes/$S3/resume" '{}')" 202
check "S3 failed (the download and the restore refused the archive)" wait_state "$S3" failed 60
check "... the download of the tampered copy was refused" grep -q "archive $P3: the control plane sent bytes of digest" "$T/mgr_w1.log"
check "... and nothing of it entered the cache" test ! -e "$W/snapshots/$P3.snap"
check "the failed execution's layer is reclaimed (its archive is the whole of it)" wait_gone "$W/exec/$S3.g4"
check "... and its run directory" wait_gone "$W/run/$S3.g4"
is "kill S3" "$(killsbx "$S3")" 200

# ---- the snapshot store, collected by reference ----
ORPHAN=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo junk >"$W/snapshots/$ORPHAN.snap"
echo junk >"$T/c/archives/$ORPHAN.snap"
# a collection cut short (renamed aside, not deleted) of A's named snapshot
mv "$W/snapshots/$NAMED.snap" "$W/snapshots/.gc.$NAMED.0123456789abcdef"
check "the killed sandbox's pause archive leaves the store" wait_gone "$W/snapshots/$P.snap" 60
check "an archive nothing references leaves it too" wait_gone "$W/snapshots/$ORPHAN.snap" 30
check "the control plane's copy of the killed sandbox's archive is collected" wait_gone "$T/c/archives/$P.snap" 30
check "... and the orphan planted there" wait_gone "$T/c/archives/$ORPHAN.snap" 30
check "the control plane keeps A's named snapshot" test -f "$T/c/archives/$NAMED.snap"
check "an archive whose collection was cut short is put back" test -f "$W/snapshots/$NAMED.snap"
check "... and the aside name is gone" test ! -e "$W/snapshots/.gc.$NAMED.0123456789abcdef"
i=0; while [ $i -lt 40 ]; do
	curl -s "$NU/metrics" >"$T/metrics"
	grep -Eq '^space_sbxmgr_archives_collected_total [2-9]' "$T/metrics" && break
	sleep 0.5; i=$((i + 1))
done
check "node-api's /metrics counts the archives collected" \
	grep -Eq '^space_sbxmgr_archives_collected_total [2-9]' "$T/metrics"

# ---- a kill -9 while a reclamation is held up, then a restart ----
is "create sandbox S2" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S2=$(jget id)
check "S2 running" wait_state "$S2" running 20
mkdir -p "$W/run/$S2.g1/stray"
check "a stray mount in S2's run directory" mount -t tmpfs -o size=1m stray "$W/run/$S2.g1/stray"
is "kill S2" "$(killsbx "$S2")" 200
check "S2's layer is deleted" wait_gone "$W/exec/$S2.g1"
check "the journal entry stays while the run directory cannot go" test -f "$W/reclaim/$S2.g1"
crash M1
check "after kill -9: the entry is still there" test -f "$W/reclaim/$S2.g1"
umount "$W/run/$S2.g1/stray"
# a planted entry naming A's serving execution
: >"$W/reclaim/$A.g1"
# the socket's binding directory, as a kill between making it and
# removing it leaves it
mkdir "$W/run/.apiQx3Zp1" && : >"$W/run/.apiQx3Zp1/s"
check "sbx-manager restarted" start_mgr 1 w1 "$NP"
check "... and removed the binding directory an earlier life left" test ! -e "$W/run/.apiQx3Zp1"
check "the restart finished the reclamation" wait_gone "$W/run/$S2.g1"
check "... and dropped its journal entry" wait_gone "$W/reclaim/$S2.g1"
check "the planted entry for a serving execution deleted nothing" test -f "$W/exec/$A.g1/layer/disk.img"
check "... and was dropped" wait_gone "$W/reclaim/$A.g1"
S=$A; CAP=$(route "$A")
is "A still serves its file" "$(exec_sh 'cat /home/user/keep'; jget stdout)" keep-me
check "A's named snapshot is still in the store" test -f "$W/snapshots/$NAMED.snap"
check "... and on the control plane" test -f "$T/c/archives/$NAMED.snap"

check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
