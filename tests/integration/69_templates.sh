#!/bin/sh
# Templates (docs/templates.md): an OCI layout this test writes itself is
# imported, stored by the control plane by digest, fetched by a worker,
# verified and mounted as the read-only lower layer of the sandbox's root;
# its files, env, user and workdir are the image's. The sandbox writes,
# pauses, resumes on a worker that never had the template (which fetches
# it). A corrupted image is refused by the worker and by the bridge; a
# hostile image (../ paths, links out of the tree and writes through
# them, device nodes, fifos, set-id files) is neutralised. Last, a small
# Debian template is built with mmdebstrap (minbase), cached by the digest
# of its inputs in $SPACE_TEMPLATE_CACHE: the first build takes about 3
# minutes on our machines, a cached one a second.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP1=$(free_port); NP2=$(free_port)
# --archive-grace 1: an image nobody references is collected 1 s after it
# arrived (the default gives an upload an hour to be named)
# a second tenant: template names are shared by every key, held by the
# one that created them
KM=$("$BIN/space-control" apikey add mallory --data-dir "$T/c" 2>>"$T/ctl.log")
check "space-control up" start_ctl --archive-grace 1
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"
SPACE_API_URL=$CU SPACE_API_KEY=$K
export SPACE_API_URL SPACE_API_KEY
SP=$SPACE_BIN/space
# exec_sh SCRIPT: sh -c SCRIPT in $S through the node-api at $NU; the answer in $T/body
exec_sh() { napi POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]],"timeout":30}))' "$1")" >/dev/null; }

# ---- import an OCI layout ----
python3 "$SPACE_TOP/tests/tools/mkoci.py" "$T/oci" tiny
check "space template import tiny (an OCI layout with two layers)" sh -c "'$SP' template import tiny '$T/oci' >'$T/imp' 2>'$T/imp.err'"
D=$(cut -d' ' -f2 "$T/imp")
check "its digest is 64 hex characters" sh -c "printf '%s' '$D' | grep -Eqx '[0-9a-f]{64}'"
check "the control plane holds the image under its digest" cmp -s "$T/c/templates/blobs/$D.img" "$T/c/templates/blobs/$D.img"
is "... and its bytes are that digest" "$(sha256sum "$T/c/templates/blobs/$D.img" | cut -c1-64)" "$D"
"$SP" template list >"$T/list"
check "template list shows host and tiny" sh -c "grep -q '^host ' '$T/list' && grep -q '^tiny ' '$T/list'"
"$SP" template show tiny --json >"$T/show"
is "template show: the config's user, workdir, env" "$(jget meta.uid "$T/show") $(jget meta.workdir "$T/show") $(jget meta.env.GREETING "$T/show")" "1000 /srv hello from the config"

# ---- another tenant's name is not theirs to take ----
tpost() { curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $1" \
    -H 'Content-Type: application/json' -d "$2" "$CU/v1/templates"; }
is "another key cannot re-point the name tiny: 403" \
	"$(tpost "$KM" "{\"name\":\"tiny\",\"digest\":\"$D\",\"meta\":{\"workdir\":\"/evil\"}}") $(jget error)" "403 forbidden"
"$SP" template show tiny --json >"$T/show"
is "... the name is still its creator's, unchanged" "$(jget meta.workdir "$T/show")" /srv
is "... nor remove it: 403" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $KM" "$CU/v1/templates/tiny")" 403
is "its creator re-points it (the same image): 201" \
	"$(tpost "$K" "{\"name\":\"tiny\",\"digest\":\"$D\",\"meta\":$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["meta"]))' "$T/show")}")" 201
is "the other key names the image for itself: 201" "$(tpost "$KM" "{\"name\":\"mine\",\"digest\":\"$D\"}")" 201
is "... which the first key cannot take: 403" "$(tpost "$K" "{\"name\":\"mine\",\"digest\":\"$D\"}")" 403
is "meta is decoded strictly: a uid that is not a number: 400" "$(tpost "$K" "{\"name\":\"bad\",\"digest\":\"$D\",\"meta\":{\"uid\":\"root\"}}")" 400
is "... env values that are not strings: 400" "$(tpost "$K" "{\"name\":\"bad\",\"digest\":\"$D\",\"meta\":{\"env\":{\"A\":{\"x\":1}}}}")" 400
is "... a relative workdir: 400" "$(tpost "$K" "{\"name\":\"bad\",\"digest\":\"$D\",\"meta\":{\"workdir\":\"srv\"}}")" 400
is "... and its own key removes: 200" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $KM" "$CU/v1/templates/mine")" 200

# ---- a sandbox from it ----
is "create --template tiny on w1" "$(cpost /v1/sandboxes '{"template":"tiny","worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 30
check "its jail was cloned from the base mount namespace, the template's root moved in" \
	grep -q "jail of $S g1 in .*cloned from the base mount namespace" "$T/mgr_w1.log"
is "the sandbox records the digest, not the name" "$(jget template "$T/sbx")" "$D"
check "w1 cached the image by digest" test -f "$T/w1/templates/$D.img"
CAP=$(route "$S"); NU=http://127.0.0.1:$NP1
look='pwd; echo "$GREETING"; read l </etc/greeting; echo "$l"; read l </etc/second; echo "$l";
	[ -e /etc/doomed ] && echo doomed-present || echo doomed-gone;
	while read k v r; do [ "$k" = Uid: ] && echo "uid $v"; done </proc/self/status'
is "inside: workdir, env, files of both layers, the whiteout applied, user 1000" \
	"$(exec_sh "$look"; jget stdout)" \
	"$(printf '/srv\nhello from the config\nhello from layer one\nfrom layer two\ndoomed-gone\nuid 1000')"
is "the image is read-only to the user: /etc is not writable" "$(exec_sh 'echo x >/etc/x 2>/dev/null && echo wrote || echo refused'; jget stdout)" refused
is "write into the image's tree (/data, 1777) and the home" \
	"$(exec_sh 'echo upper >/data/u && echo home >/home/user/h && echo ok'; jget stdout)" ok
check "the write landed in the writable layer's upper directory, not the image" \
	sh -c "unsquashfs -l '$T/c/templates/blobs/$D.img' | grep -q 'data/u' && exit 1; exit 0"

# ---- pause, then resume on a worker that never had the template ----
check "w2 has no copy of the template yet" test ! -e "$T/w2/templates/$D.img"
is "pause -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 60
P=$(jget snapshot "$T/sbx")
zstd -qdc "$T/c/archives/$P.snap" 2>/dev/null | tar -tf - >"$T/snaplist" 2>/dev/null
check "the snapshot holds the upper layer (data/u) and not the image (etc/greeting)" \
	sh -c "grep -q 'upper/data/u' '$T/snaplist' && ! grep -q 'greeting' '$T/snaplist'"
is "resume on w2 -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{"worker":"w2"}')" 202
check "running again" wait_state "$S" running 60
is "... on w2" "$(jget execution.worker "$T/sbx")" w2
check "w2 fetched the template and verified it" test -f "$T/w2/templates/$D.img"
CAP=$(route "$S"); NU=http://127.0.0.1:$NP2
is "on w2: the writes are back and the image is the same" \
	"$(exec_sh 'read a </data/u; read b </home/user/h; read c </etc/greeting; echo "$a $b $c"'; jget stdout)" \
	"upper home hello from layer one"

# ---- corrupted images ----
dd if=/dev/zero of="$T/w1/templates/$D.img" bs=1 count=16 seek=4096 conv=notrunc 2>/dev/null
is "create on w1, whose cached image was corrupted" "$(cpost /v1/sandboxes '{"template":"tiny","worker":"w1"}')" 201
S2=$(jget id)
i=0; while [ $i -lt 100 ]; do sbx "$S2"; [ "$(jget state "$T/sbx")" = running ] && break; grep -q 'refused' "$T/mgr_w1.log" && break; sleep 0.1; i=$((i + 1)); done
check "the bridge refused the image: its digest differs" grep -q "has digest .*, not $D: refused" "$T/mgr_w1.log"
check "... and the sandbox never ran on it" sh -c "[ \"\$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"state\"])' '$T/sbx')\" != running ]"
head -c 1000 /dev/urandom >"$T/junk"
is "an upload whose bytes are not its digest -> 400 digest_mismatch" \
	"$(curl -s -o "$T/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $K" --data-binary @"$T/junk" "$CU/v1/templates/blobs/$D") $(jget error)" "400 digest_mismatch"
is "the image route refuses an API key (workers only)" \
	"$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $K" "$CU/v1/workers/w1/templates/$D")" 401
is "... and another worker's credential" \
	"$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/cred_w2")" "$CU/v1/workers/w1/templates/$D")" 403

# ---- a hostile image ----
MKOCI_TAG=t$$ python3 "$SPACE_TOP/tests/tools/mkoci.py" "$T/evil" hostile
"$SP" template import evil "$T/evil" >"$T/evil.out" 2>"$T/evil.err"; rc=$?
check "nothing was written outside the unpacking directory" \
	sh -c "! ls /tmp/*t$$ /var/tmp/*t$$ /dotdot*t$$ '$T'/*t$$ 2>/dev/null | grep -q ."
if [ $rc -eq 0 ]; then
	E=$(cut -d' ' -f2 "$T/evil.out")
	unsquashfs -lls "$T/c/templates/blobs/$E.img" >"$T/evil.ls" 2>/dev/null
	check "the imported image has no device node, fifo or socket" sh -c "! grep -Eq '^[cbps]' '$T/evil.ls'"
	check "... and no set-id file" sh -c "! grep -Eq '^-..[sS]|^-.....[sS]' '$T/evil.ls'"
	check "... the ../ and absolute paths stayed inside the tree" \
		sh -c "grep -q 'squashfs-root/dotdot-t$$' '$T/evil.ls' && grep -q 'squashfs-root/tmp/abs-t$$' '$T/evil.ls'"
	check "... writes through links to / and .. landed inside the tree" \
		sh -c "grep -q 'squashfs-root/tmp/through-t$$' '$T/evil.ls' && grep -q 'squashfs-root/tmp/up-t$$' '$T/evil.ls'"
	check "the import said what it removed" grep -q 'removed .* device nodes' "$T/evil.err"
else
	ok "the hostile image was refused"
fi
is "template rm tiny (a sandbox still uses it: the image stays)" "$("$SP" template rm tiny)" "tiny removed"
check "... its image stays for the sandbox" test -f "$T/c/templates/blobs/$D.img"
sleep 11
check "... also after a collection pass" test -f "$T/c/templates/blobs/$D.img"
for s in "$S" "$S2"; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$s"; done
i=0; while [ -f "$T/c/templates/blobs/$D.img" ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "once its sandboxes are killed, the image is collected (no name, no sandbox)" test ! -e "$T/c/templates/blobs/$D.img"
check "... and the control plane says so" eventually 10 grep -q "template image $D collected" "$T/ctl.log"
# the workers' caches: an image no record names and unused for a day is
# removed by the worker's periodic sweep (its mtime is its last use)
check "w2 still caches the image of its killed sandbox" test -f "$T/w2/templates/$D.img"
touch -d '2 days ago' "$T/w2/templates/$D.img"
i=0; while [ -f "$T/w2/templates/$D.img" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
SWEEP=$(( i / 10 + 1 ))
check "w2's sweep removed it once it was unused for a day" test ! -e "$T/w2/templates/$D.img"
check "... saying so" eventually 10 grep -q "template $D: cached image unused, removed" "$T/mgr_w2.log"

# ---- a Debian template, built with mmdebstrap (cached by its inputs) ----
CACHE=${SPACE_TEMPLATE_CACHE:-/var/cache/space-test-templates}
check "space template build deb (minbase; cached in $CACHE)" \
	sh -c "'$SP' template build deb --env LANG=C.UTF-8 --workdir /home/user --cache '$CACHE' >'$T/deb' 2>'$T/deb.err'"
is "create --template deb" "$(cpost /v1/sandboxes '{"template":"deb","worker":"w2"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 60
CAP=$(route "$S"); NU=http://127.0.0.1:$NP2
is "inside: Debian's files, user 1000 (user), the workdir, env" \
	"$(exec_sh 'cat /etc/debian_version >/dev/null && echo debian; id -un; pwd; echo $LANG; ls /usr/bin/apt-get'; jget stdout)" \
	"$(printf 'debian\nuser\n/home/user\nC.UTF-8\n/usr/bin/apt-get')"

DEB=$(jget template "$T/sbx")
check "w2 caches the deb image its sandbox runs on" test -f "$T/w2/templates/$DEB.img"
touch -d '2 days ago' "$T/w2/templates/$DEB.img"
sleep $(( ${SWEEP:-10} + 6 ))
check "a cached image a live sandbox uses is kept, however old (two sweep periods later)" \
	test -f "$T/w2/templates/$DEB.img"
check "no sanitizer report in the workers' logs" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log' '$T/mgr_w2.log'"
done_testing
