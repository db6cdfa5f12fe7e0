#!/bin/sh
# space-control: the snapshot store's collection by reference, from the
# side of a worker offering archives (simulated with curl) and of a tenant
# trying to lose another's data. An archive is collectable only when no
# sandbox, snapshot row, install, recent report or open operation can need
# it: a killed sandbox's archive goes, a digest shared with a live sandbox
# stays, an archive reported late or still being written stays, a named
# snapshot outlives its sandbox until its owner deletes it, and a sandbox
# holds no more named snapshots than the operator allows (docs/recovery.md,
# "Collecting the snapshot store").
. "$SPACE_TOP/tests/lib.sh"

ctl_init
CTL_FLAGS="--heartbeat-timeout 3600 --archive-grace 2 --route-wait-ms 200 --max-named-snapshots 2"
K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
post /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":10}' >/dev/null
post /v1/workers/w2/register "$W2" '{"incarnation":"i2","endpoint":"http://127.0.0.1:9002","capacity":10}' >/dev/null
sim_fetch w1 "$W1" 0

# offer W CRED "DIGEST:AGE ..." -> the digests the answer collects, sorted
offer() {
	post "/v1/workers/$1/archives" "$2" "{\"archives\":[$(for a in $3; do
		printf '{"digest":"%s","age":%s},' "${a%:*}" "${a#*:}"; done | sed 's/,$//')]}" >"$T/code"
	python3 -c 'import json,sys; print(" ".join(sorted(json.load(open(sys.argv[1]))["collect"])))' "$T/body" 2>/dev/null
}
# run NAME: a sandbox on w1, serving; its id in $NAME
run() {
	post /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
	eval "$1=$(jget id)"
	sim_fetch w1 "$W1"
	sim_report w1 "$W1" serving >/dev/null
}
# pause SANDBOX DIGEST: paused with that archive
pause() {
	post "/v1/sandboxes/$1/pause" "$K" '{}' >/dev/null
	sim_fetch w1 "$W1"
	sim_report w1 "$W1" retired "$2" >/dev/null
}
sstate() { sql "SELECT state FROM sandboxes WHERE id='$1'"; }
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }
OLD=100000      # seconds: older than any operation of this test

run A; run B; run C; run N
DS=$(rdigest)   # the same layer content in A and B: one archive, two references
pause "$A" "$DS"
pause "$B" "$DS"
is "A and B paused on the same archive" "$(sstate "$A") $(sstate "$B")" "paused paused"
X=$(rdigest)    # in the store, referenced by nothing
is "an unreferenced archive is collected" "$(offer w1 "$W1" "$X:$OLD")" "$X"
is "... 200" "$(cat "$T/code")" 200
is "the shared archive is kept while A and B hold it" "$(offer w1 "$W1" "$DS:$OLD")" ""
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$A"
is "A killed" "$(sstate "$A")" killed
sleep 3         # past the reports' grace (2 s)
is "... the shared archive is still kept: B holds it" "$(offer w1 "$W1" "$DS:$OLD")" ""
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$B"
is "once B is killed too, it is collected" "$(offer w1 "$W1" "$DS:$OLD")" "$DS"
is "... by any worker sharing the store" "$(offer w2 "$W2" "$DS:$OLD")" "$DS"

# a named snapshot outlives its sandbox (the retention policy)
post "/v1/sandboxes/$N/snapshots" "$K" '{"name":"keep"}' >/dev/null
SNAP=$(jget snapshot.id)
sim_fetch w1 "$W1"
DN=$(rdigest)
is "the named snapshot is reported" "$(post /v1/workers/w1/snapshots "$W1" "{\"snapshot_id\":\"$SNAP\",\"sandbox\":\"$N\",\"generation\":1,\"digest\":\"$DN\",\"size\":4096}")" 200
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$N"
sleep 3
is "a killed sandbox's named snapshot is kept" "$(offer w1 "$W1" "$DN:$OLD")" ""

# named snapshots are bounded per sandbox (--max-named-snapshots 2 here)
# and deleted by their owner
run E
# nsnap NAME: a named snapshot of E, reported ready; its id in $SID, its
# digest in $SD
nsnap() {
	post "/v1/sandboxes/$E/snapshots" "$K" "{\"name\":\"$1\"}" >"$T/ncode"
	SID=$(jget snapshot.id)
	sim_fetch w1 "$W1"
	SD=$(rdigest)
	post /v1/workers/w1/snapshots "$W1" "{\"snapshot_id\":\"$SID\",\"sandbox\":\"$E\",\"generation\":1,\"digest\":\"$SD\",\"size\":4096}" >/dev/null
}
nsnap one; S1=$SID D1=$SD
is "a first named snapshot" "$(cat "$T/ncode")" 202
nsnap two
is "a second" "$(cat "$T/ncode")" 202
is "a third, past the operator's bound of 2 -> 429" "$(post "/v1/sandboxes/$E/snapshots" "$K" '{"name":"three"}')" 429
check "... saying to delete one first" grep -q "delete one first" "$T/body"
is "another tenant cannot delete one -> 404" "$(code -X DELETE -H "Authorization: Bearer $KB" "$U/v1/sandboxes/$E/snapshots/$S1")" 404
is "nor can anyone delete one that is not there -> 404" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$E/snapshots/snp_nosuch")" 404
is "an id of another shape -> 404" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$E/snapshots/x")" 404
is "the owner deletes the first -> 200" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$E/snapshots/$S1")" 200
is "... it stays as an automatic snapshot of the live sandbox (a later archive may be a delta of it)" \
	"$(sql "SELECT kind || ' ' || COALESCE(name, '-') FROM snapshots WHERE id='$S1'")" "auto -"
is "... so its archive is still kept" "$(offer w1 "$W1" "$D1:$OLD")" ""
is "deleting it again -> 404" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$E/snapshots/$S1")" 404
post "/v1/sandboxes/$E/snapshots" "$K" '{"name":"three"}' >"$T/ncode"
is "now a third is taken -> 202" "$(cat "$T/ncode")" 202
S3=$(jget snapshot.id)
is "a snapshot still being taken cannot be deleted -> 409" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$E/snapshots/$S3")" 409
sim_fetch w1 "$W1"
post /v1/workers/w1/snapshots "$W1" "{\"snapshot_id\":\"$S3\",\"sandbox\":\"$E\",\"generation\":1,\"digest\":\"$(rdigest)\",\"size\":4096}" >/dev/null
is "... once taken it is ready" "$(sql "SELECT state FROM snapshots WHERE id='$S3'")" ready
# the killed sandbox's named snapshot, deleted: its archive is collected
is "the killed sandbox's named snapshot is deleted -> 200" "$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$N/snapshots/$SNAP")" 200
is "... its row is gone" "$(sql "SELECT COUNT(*) FROM snapshots WHERE id='$SNAP'")" 0
is "... and its archive is collected" "$(offer w1 "$W1" "$DN:$OLD")" "$DN"

# in flight: C's pause is open (its worker has not reported): an archive
# younger than that operation may be the one it will report
post "/v1/sandboxes/$C/pause" "$K" '{}' >/dev/null
sim_fetch w1 "$W1"
Y=$(rdigest)
is "while an operation waits for its archive, a young archive is kept" "$(offer w1 "$W1" "$Y:0 $X:$OLD")" "$X"
Z=$(rdigest)
is "... by the operation's own worker only: w2's young archive is not held by w1's operation" \
	"$(offer w2 "$W2" "$Z:0")" "$Z"
# the same in space-control's own store: it knows who uploaded each
# archive (mkarch: an archive as a worker sends it, its digest on stdout)
mkarch() {
	python3 -c 'import hashlib, os, struct, sys
body = struct.pack("<III", 0x184D2A5C, 4, 1) + os.urandom(4096)
d = hashlib.sha256(body).digest()
open(sys.argv[1], "wb").write(body + struct.pack("<II", 0x184D2A5E, 32) + d)
print(d.hex())' "$1"
}
aput() {
	curl -s -o "$T/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $2" \
		--data-binary @"$3" "$U/v1/workers/$1/archives/$4"
}
A1=$(mkarch "$T/a1") A2=$(mkarch "$T/a2")
is "w1 uploads an archive while its operation is open" "$(aput w1 "$W1" "$T/a1" "$A1")" 201
is "w2 uploads one too" "$(aput w2 "$W2" "$T/a2" "$A2")" 201
a2_gone() { [ ! -e "$D/archives/$A2.snap" ]; }
check "space-control collects w2's unreferenced archive past the grace, w1's operation open or not" \
	eventually 40 a2_gone
check "... and keeps w1's: it may be the one that operation reports" test -e "$D/archives/$A1.snap"
# late: the report arrives after C was killed (the operation is over and
# the report refused), its archive is a pending reference for the grace
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$C"
sim_report w1 "$W1" retired "$Y" >/dev/null
is "the late report's archive is kept, even offered as old" "$(offer w1 "$W1" "$Y:$OLD")" ""
sleep 3
is "after the grace, nothing references it: collected" "$(offer w1 "$W1" "$Y:$OLD")" "$Y"

# a failed execution's layer stays on its worker (it may be the only copy
# of the files) until the sandbox is killed: the kill retires it there
run F
sim_report w1 "$W1" failed >/dev/null
is "F failed" "$(sstate "$F")" failed
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$F"
sim_fetch w1 "$W1" 5
is "killing a failed sandbox retires its execution on the worker, without an archive" \
	"$(sim_last w1 action) $(sim_last w1 identity.sandbox) $(sim_last w1 spec.snapshot)" "retire $F False"

# from the attacker's side: bad offers are refused, a worker speaks for itself
is "a digest that is not 64 lowercase hex -> 400" "$(offer w1 "$W1" "../../etc/passwd:$OLD"; cat "$T/code")" 400
is "a negative age -> 400" "$(offer w1 "$W1" "$X:-1"; cat "$T/code")" 400
MANY=$(for i in $(seq 1 257); do printf '%s:1 ' "$X"; done)
is "257 archives in one offer -> 400" "$(offer w1 "$W1" "$MANY"; cat "$T/code")" 400
is "w1's credential on w2's path -> 403" "$(offer w2 "$W1" "$X:$OLD"; cat "$T/code")" 403
is "an API key cannot offer -> 401" "$(offer w1 "$K" "$X:$OLD"; cat "$T/code")" 401
curl -s "$U/metrics" >"$T/metrics"
check "/metrics counts what was offered and what was collectable" \
	grep -Eq '^space_control_archives_collectable_total [1-9]' "$T/metrics"
done_testing
