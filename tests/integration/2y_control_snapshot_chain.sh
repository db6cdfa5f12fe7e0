#!/bin/sh
# A sandbox paused and resumed many times does not grow the snapshot store
# without bound (docs/recovery.md, "Collecting the snapshot store"). Each
# pause archives the layer as a delta of the archive it was restored from,
# up to SNAPSHOT_DELTA_DEPTH_MAX (8) deep, then whole again; space-control
# records what each archive is a delta of (read from the archive it
# stored) and, when a pause makes an archive the latest, removes the
# automatic snapshots nothing can restore from any more: not the latest's
# chain, not a named snapshot's chain. Their archives then go with the
# collection. From the tenant's side: every file written between the
# pauses is still there after the last resume, the named snapshot and the
# archives it needs stay, and the list of snapshots stays short.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# no grace after a report: the collection answers by references alone
CTL_FLAGS="--archive-grace 1"
NP1=$(free_port)
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"

is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20

run() { sbx_sh "$S" "$1"; }
# the sandbox's snapshots: "named|auto digest" per line, oldest first
snaps() {
	curl -s -m 10 -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots" |
	    python3 -c 'import json,sys
for s in json.load(sys.stdin)["snapshots"]:
    print("named" if s.get("name") else "auto", s.get("digest") or "-")'
}
cycle() {
	run "head -c 200000 /dev/urandom >/home/user/f$1 && sha256sum /home/user/f$1 >>/home/user/sums" >/dev/null &&
	[ "$(cpost "/v1/sandboxes/$S/pause" '{}')" = 202 ] && wait_state "$S" paused 60 &&
	[ "$(cpost "/v1/sandboxes/$S/resume" '{}')" = 202 ] && wait_state "$S" running 60
}
stored() { ls "$T/c/archives" | grep -c '\.snap$'; }

i=1
while [ $i -le 3 ]; do
	check "cycle $i: write, pause, resume" cycle $i
	i=$((i + 1))
done
snaps >"$T/s3"
is "three pauses: three automatic snapshots (a chain: whole, delta, delta)" \
	"$(grep -c '^auto ' "$T/s3")" 3
check "... the second and third were deltas" \
	test "$(grep -c "layer archived as .* incremental" "$T/mgr_w1.log")" -ge 2

# a named snapshot of the running sandbox: a delta of the third
is "a named snapshot" "$(cpost "/v1/sandboxes/$S/snapshots" '{"name":"keep"}')" 202
NID=$(jget snapshot.id)
check "... ready" eventually 30 sh -c "curl -s -H 'Authorization: Bearer $K' '$CU/v1/sandboxes/$S/snapshots' | grep -q '\"name\": *\"keep\".*\"state\": *\"ready\"\|\"state\": *\"ready\"[^}]*\"name\": *\"keep\"'"
ND=$(snaps | awk '$1 == "named" { print $2 }')
check "... has a digest" test -n "$ND"
CHAIN3=$(awk '$1 == "auto" { print $2 }' "$T/s3")

while [ $i -le 11 ]; do
	check "cycle $i: write, pause, resume" cycle $i
	i=$((i + 1))
done
snaps >"$T/s11"
check "a pause archived the layer whole again after 8 deltas" \
	test "$(grep -c "layer archived as .* (.* bytes, uploaded" "$T/mgr_w1.log")" -ge 2
check "space-control removed the superseded automatic snapshots" \
	grep -q "sandbox $S: [0-9]* automatic snapshot(s) superseded" "$T/ctl.log"
N11=$(grep -c '^auto ' "$T/s11")
check "eleven pauses: at most 9 automatic snapshots listed, not 11 ($N11)" test "$N11" -le 9
is "the named snapshot is still listed" "$(grep -c "^named $ND\$" "$T/s11")" 1
LATEST=$(sbx "$S"; jget snapshot "$T/sbx")
check "the latest is listed" grep -q "^auto $LATEST\$" "$T/s11"

# what the named snapshot is a delta of stays: the first three pauses' archives
for d in $CHAIN3; do
	check "... the named snapshot's base ${d%"${d#????????????}"} is kept (row or archive)" \
		test -f "$T/c/archives/$d.snap"
done
# the superseded archives leave the control plane's store (collected every 10 s)
GONE=''
ALL=$(grep -o "layer archived as [0-9a-f]*" "$T/mgr_w1.log" | awk '{ print $4 }')
for d in $ALL; do
	grep -q " $d\$" "$T/s11" && continue
	echo "$CHAIN3 $ND" | grep -q "$d" && continue
	GONE="$GONE $d"
done
check "some archives were superseded" test -n "$GONE"
gone_all() { for d in $GONE; do [ ! -e "$T/c/archives/$d.snap" ] || return 1; done; }
check "... and collected from the control plane's store" eventually 40 gone_all
for d in $(awk '{ print $2 }' "$T/s11"); do
	[ "$d" = - ] && continue
	check "listed archive ${d%"${d#????????????}"} is still stored" test -f "$T/c/archives/$d.snap"
done

# the sandbox, moved to a worker that never held it (no kept image, no
# cache: it downloads the chain from the control plane), holds every file
NP2=$(free_port)
check "worker w2 up" add_worker 2 w2 "$NP2"
is "move to w2" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
check "running on w2" eventually 60 sh -c "curl -s -H 'Authorization: Bearer $K' '$CU/v1/sandboxes/$S' | python3 -c 'import json,sys; s=json.load(sys.stdin); sys.exit(not (s[\"state\"] == \"running\" and s[\"execution\"][\"worker\"] == \"w2\"))'"
is "every file written is intact" "$(run 'cd /home/user && sha256sum -c sums >/dev/null && ls f* | wc -l')" 11
check "no sanitizer report in the daemons' logs" sh -c "! cat '$T'/mgr_w*.log '$T/ctl.log' | grep -Eq 'Sanitizer|runtime error'"

done_testing
