#!/bin/sh
# space-control moves a sandbox between two real workers (sbx-manager +
# node-api each, disjoint data directories, no shared snapshot directory:
# the archive travels over HTTP by digest, uploaded by w1 and downloaded by
# w2): a file written on w1 is read back on w2, generation 1's capability
# is refused by w1 once retired, a client that reports the rejected route
# gets a route to w2 and generation 2, and w2 refuses a capability for the
# execution it does not run. The archive routes from the attacker's side:
# another worker's credential and an API key cannot fetch, an upload that
# is not its digest is refused, a digest that is a path is refused; a
# download whose bytes were changed on the control plane is refused by the
# worker and nothing is restored. The archive goes up while it is made
# (POST .../archives/stream, chunked, the digest only in its trailer):
# that route refuses a body whose trailer names another digest, one cut
# short, one padded, junk, a body over --archive-max-mb, another worker's
# credential and an API key, and keeps nothing of what it refused.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP1=$(free_port); NP2=$(free_port)

# a small bound, for the oversize upload below (the archives here are KiB)
check "space-control up" start_ctl --archive-max-mb 1
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP1=$(route "$S"); R1=$(jget route); E1=$(jget endpoint)
is "the route names w1's node-api" "$E1" "http://$(pl_addr w1):$NP1"
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
check "the move's archive ($P) was uploaded to the control plane" test -f "$T/c/archives/$P.snap"
check "... from w1's own cache" test -f "$T/w1/snapshots/$P.snap"
check "... and w2 downloaded it into its own (the same bytes)" cmp -s "$T/c/archives/$P.snap" "$T/w2/snapshots/$P.snap"
check "w2 logged the fetch by digest" grep -q "archive $P fetched from the control plane" "$T/mgr_w2.log"
check "w1 uploaded the archive while it made it" \
	grep -q "layer archived as $P (.*uploaded while it was made" "$T/mgr_w1.log"
check "... the control plane stored it from the stream" grep -q "archive $P stored (.*streamed" "$T/ctl.log"

# ---- the archive routes, from the attacker's side ----
C1=$(cat "$T/cred_w1"); C2=$(cat "$T/cred_w2")
aget() { curl -s --path-as-is -o "$T/blob" -w '%{http_code}' -H "Authorization: Bearer $2" "$CU$1"; }
aput() { curl -s --path-as-is -o "$T/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $2" --data-binary @"$3" "$CU$1"; }
is "w2, where the sandbox runs, fetches its archive with its own credential" "$(aget "/v1/workers/w2/archives/$P" "$C2")" 200
check "... the archive's bytes" cmp -s "$T/blob" "$T/c/archives/$P.snap"
is "w1, where it no longer runs (a compromised worker reading other sandboxes' archives) -> 404" \
	"$(aget "/v1/workers/w1/archives/$P" "$C1")" 404
check "... nothing of it sent" test ! -s "$T/blob" -o "$(head -c 1 "$T/blob")" = "{"
check "... the refusal logged" grep -q "archive $P refused to worker w1" "$T/ctl.log"
is "w2's credential on w1's path -> 403" "$(aget "/v1/workers/w1/archives/$P" "$C2")" 403
is "an API key -> 401" "$(aget "/v1/workers/w1/archives/$P" "$K")" 401
is "no credential -> 401" "$(curl -s -o /dev/null -w '%{http_code}' "$CU/v1/workers/w1/archives/$P")" 401
for t in '../../control.db' '..%2f..%2fcontrol.db' "$P.snap" "$(echo "$P" | tr a-f A-F)" "${P%?}/" '%2e%2e'; do
	c=$(aget "/v1/workers/w1/archives/$t" "$C1")
	check "digest path '$t' refused ($c)" test "$c" = 400 -o "$c" = 404
done
head -c 4096 /dev/urandom >"$T/junk"
BAD=$(rdigest)
is "an upload whose bytes are not its digest -> 400" "$(aput "/v1/workers/w1/archives/$BAD" "$C1" "$T/junk")" 400
is "... digest_mismatch" "$(jget error)" digest_mismatch
check "... nothing kept under that digest" test ! -e "$T/c/archives/$BAD.snap"
is "a real archive uploaded under another digest -> 400" "$(aput "/v1/workers/w1/archives/$BAD" "$C1" "$T/c/archives/$P.snap")" 400
check "... no temporary file left" sh -c "! ls '$T/c/archives' | grep -q tmp"
is "an API key cannot upload -> 401" "$(aput "/v1/workers/w1/archives/$P" "$K" "$T/junk")" 401
is "w2's credential on w1's upload path -> 403" "$(aput "/v1/workers/w1/archives/$P" "$C2" "$T/junk")" 403
check "the archive is intact" cmp -s "$T/c/archives/$P.snap" "$T/w1/snapshots/$P.snap"

# ---- the streamed upload, from the attacker's side ----
astream() {
	curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $2" \
		-H 'Transfer-Encoding: chunked' -H 'Expect:' --data-binary @"$3" \
		"$CU/v1/workers/$1/archives/stream"
}
nostream() { ! ls -A "$T/c/archives" | grep -q tmp; }
A=$T/c/archives/$P.snap
ASZ=$(stat -c %s "$A")
is "the same archive streamed again -> 201" "$(astream w1 "$C1" "$A")" 201
is "... named by its trailer's digest" "$(jget digest)" "$P"
check "... the stored archive unchanged" cmp -s "$A" "$T/w1/snapshots/$P.snap"
{ head -c $((ASZ - 32)) "$A"; head -c 32 /dev/urandom; } >"$T/wrongd"
is "an archive whose trailer names another digest -> 400" "$(astream w1 "$C1" "$T/wrongd")" 400
is "... digest_mismatch" "$(jget error)" digest_mismatch
head -c $((ASZ - 1)) "$A" >"$T/cut1"
is "an archive one byte short -> 400" "$(astream w1 "$C1" "$T/cut1")" 400
head -c $((ASZ - 40)) "$A" >"$T/notrailer"
is "an archive without its trailer -> 400" "$(astream w1 "$C1" "$T/notrailer")" 400
{ cat "$A"; printf 'x'; } >"$T/padded"
is "an archive with a byte after its trailer -> 400" "$(astream w1 "$C1" "$T/padded")" 400
is "junk -> 400" "$(astream w1 "$C1" "$T/junk")" 400
head -c 30 "$A" >"$T/tiny"
is "30 bytes (shorter than a trailer) -> 400" "$(astream w1 "$C1" "$T/tiny")" 400
head -c $((2 << 20)) /dev/zero >"$T/big"
# the answer comes while the body still goes in, and the connection is
# closed after it: a client still sending may see the close first
c=$(astream w1 "$C1" "$T/big")
check "a body over --archive-max-mb -> 413 ($c)" test "$c" = 413 -o "$c" = 000
curl -s -o "$T/metrics" "$CU/metrics"
check "... answered 413 by the stream route" \
	grep -q 'space_control_requests_total{route="/v1/workers/\*/archives/stream",status="413"} 1$' "$T/metrics"
is "an API key cannot stream an upload -> 401" "$(astream w1 "$K" "$A")" 401
is "w2's credential on w1's stream path -> 403" "$(astream w1 "$C2" "$A")" 403
check "nothing kept of what was refused (no temporary file)" nostream
check "... and only the archives the workers made are stored" \
	sh -c "test \"\$(ls '$T/c/archives' | wc -l)\" = 1"

CAP=$CAP1
is "generation-1 capability at w1 (retired) -> refused" "$(napi_at "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error) $(jget reason)" "409 refresh_route not_serving"
is "generation-1 capability sent to w2 -> refused: refresh the route (same sandbox, another execution)" \
	"$(napi_at "http://$(pl_addr w2):$NP2" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"
cpost "/v1/sandboxes/$S/routes" "{\"access\":[\"exec\",\"fs:r\",\"fs:w\"],\"rejected\":$R1}" >/dev/null
CAP=$(jget capability); E2=$(jget endpoint)
is "the client reports the rejected route and gets w2, generation 2" "$(jget route.worker) $(jget route.generation) $E2" "w2 2 http://$(pl_addr w2):$NP2"
is "the file is on w2" "$(napi_at "$E2" GET 'files?path=/home/user/keep.txt')" 200
check "... with its content" cmp -s "$T/body" "$T/f"
is "... served by generation 2 on w2" "$(hdr X-Space-Generation) $(hdr X-Space-Worker)" "2 w2"
is "a generation-2 capability sent to w1 -> refused" "$(napi_at "$E1" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"

# ---- a download whose bytes do not match: refused, nothing restored ----
is "write a second file on w2" "$(napi_at "$E2" PUT 'files?path=/home/user/two.txt' --data-binary @"$T/f")" 200
is "pause on w2 -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 60
P2=$(jget snapshot "$T/sbx")
check "w2's pause archive ($P2) was uploaded" test -f "$T/c/archives/$P2.snap"
check "... w1 does not have it" test ! -e "$T/w1/snapshots/$P2.snap"
cp "$T/c/archives/$P2.snap" "$T/keep.snap"
chmod u+w "$T/c/archives/$P2.snap"
python3 -c 'import sys; f = open(sys.argv[1], "r+b"); f.seek(64); b = f.read(1); f.seek(64); f.write(bytes([b[0] ^ 0xff]))' "$T/c/archives/$P2.snap"
is "resume on w1 from the changed archive -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{"worker":"w1"}')" 202
check "the resume failed" wait_state "$S" failed 60
check "w1 refused the download's bytes" grep -q "archive $P2: the control plane sent bytes of digest" "$T/mgr_w1.log"
check "... kept nothing of them in its cache" sh -c "! ls -A '$T/w1/snapshots' | grep -q '$P2\|tmp'"
check "... and built no layer for generation 3" test ! -e "$T/w1/exec/$S.g3/layer/disk.img"
cp "$T/keep.snap" "$T/c/archives/$P2.snap"
# the install ended (failed): w1 runs nothing of the sandbox any more
is "once w1's install of it failed, w1 is refused the archive -> 404" "$(aget "/v1/workers/w1/archives/$P2" "$C1")" 404

is "kill" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S")" 200
sbx "$S"
is "killed" "$(jget state "$T/sbx")" killed
check "no sanitizer report in the control plane's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/ctl.log'"
done_testing
