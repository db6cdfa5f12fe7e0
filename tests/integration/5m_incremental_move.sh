#!/bin/sh
# Incremental moves (docs/recovery.md, "Incremental archives"; docs/worker.md,
# "Kept layers"), two real workers, archives over HTTP by digest. The first
# move archives the layer whole; the worker it left keeps the image. The
# next move back is a delta of the archive the layer was restored from,
# restored onto that kept image: the tree read back on the other side is
# the one left behind, byte for byte, with changed, rewritten (same size),
# chmod'ed, deleted, added and replaced entries, and the delta is small.
# From the tenant's side: a file rewritten with its size and mtime put back
# still travels (ctime cannot be set). A worker without a kept image
# restores the chain (base, then delta) from the control plane, and so
# does one whose kept image lost a file the delta takes from it. A pause and
# a resume on the same worker start from the image kept there. A kill drops
# the kept image of the worker it ran on. A large archive restored as it
# arrives is not kept in the receiving worker's cache, nor in the sending
# worker's (it is only uploaded), and one that fails there is fetched whole
# to be checked; an image kept of such an archive goes with the
# collection once nothing references the archive.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# the control plane answers for an archive by its references only (no
# grace after a report): what w2's collection asks at the end
CTL_FLAGS="--archive-grace 1"
NP1=$(free_port); NP2=$(free_port)
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20

# sh -c SCRIPT in the sandbox, through its current route; stdout printed
run() { sbx_sh "$S" "$1"; }
# every entry of the tree: type, mode, size, mtime (ns), link target, and
# every file's SHA-256
manifest() {
	run 'cd /home/user/t && find . -printf "%y %m %s %T@ %p %l\n" | sort && find . -type f | sort | xargs sha256sum'
}
move() {
	is "move to $1 -> 202" "$(cpost "/v1/sandboxes/$S/move" "{\"to\":\"$1\"}")" 202
	wait_state "$S" running 60 && sbx "$S" && [ "$(jget execution.worker "$T/sbx")" = "$1" ]
}

check "a tree written on w1" run 'mkdir -p /home/user/t/d/e && cd /home/user/t &&
	head -c 3000000 /dev/urandom >big && echo a >a && echo bb >b && echo c >c &&
	echo e >e && echo x >d/e/x && echo same >same && ln -s a l &&
	truncate -s 50M sparse && printf y | dd of=sparse bs=1 seek=10000000 conv=notrunc 2>/dev/null'
check "move 1 to w2" move w2
P1=$(jget snapshot "$T/sbx")
check "... its archive is whole" grep -q "layer archived as $P1 ([0-9]* bytes, uploaded" "$T/mgr_w1.log"
check "... w1 kept the image it archived" test -f "$T/w1/kept/$S.img"
is "... tagged with that archive" "$(cut -d' ' -f1 "$T/w1/kept/$S.tag")" "$P1"

# the changes of a sandbox that ran on w2
MT=$(run 'stat -c %Y /home/user/t/same')
check "changes on w2" run "cd /home/user/t && echo changed >a && echo BB >b && chmod 600 c &&
	rm e && echo new >n && rm -r d/e && echo now-a-file >d/e && rm l && ln -s b l &&
	printf 'SAME\n' >same && touch -d @$MT same"
is "the rewritten file kept its size and mtime" "$(run 'stat -c "%s %Y" /home/user/t/same')" "5 $MT"
manifest >"$T/m2" || not_ok "manifest on w2"
check "move 2 back to w1" move w1
P2=$(jget snapshot "$T/sbx")
check "... w2 made it a delta" grep -q "layer archived as $P2 ([0-9]* bytes, incremental" "$T/mgr_w2.log"
check "... w1 restored it onto the image it kept" \
	grep -q "layer of $S: $P2 restored onto the image kept here" "$T/mgr_w1.log"
SZ=$(stat -c %s "$T/c/archives/$P2.snap")
check "... the delta is small ($SZ bytes for a 3 MB file left alone)" test "$SZ" -lt 65536
check "... the control plane keeps its base" test -f "$T/c/archives/$P1.snap"
manifest >"$T/m1" || not_ok "manifest on w1"
check "the tree on w1 is the tree left on w2" cmp -s "$T/m1" "$T/m2"
is "... including the rewrite whose size and mtime were put back" "$(run 'cat /home/user/t/same')" SAME
is "the files are the sandbox user's" "$(run 'stat -c %u /home/user/t/big /home/user/t/d/e | sort -u')" 1000

# w2 has no image any more: the chain is restored from the control plane
check "one more change on w1" run 'echo third >>/home/user/t/n && rm /home/user/t/b'
manifest >"$T/m3" || not_ok "manifest before move 3"
rm -f "$T/w2/kept/$S.img" "$T/w2/kept/$S.tag"
check "move 3 to w2 (no kept image there)" move w2
P3=$(jget snapshot "$T/sbx")
check "... a delta again" grep -q "layer archived as $P3 ([0-9]* bytes, incremental" "$T/mgr_w1.log"
check "... w2 built it fresh, not onto a kept image" sh -c "! grep -q '$P3 restored onto the image kept here' '$T/mgr_w2.log'"
manifest >"$T/m3b" || not_ok "manifest after move 3"
check "... the tree is intact (base, delta, delta restored in turn)" cmp -s "$T/m3" "$T/m3b"

# w1 kept the image of move 3's archive; one of the files the next delta
# takes from it is gone from it: that restore fails, and the layer is
# built once more from the chain
is "w1 kept move 3's archive" "$(cut -d' ' -f1 "$T/w1/kept/$S.tag")" "$P3"
mkdir -p "$T/kmnt"
if mount -o loop "$T/w1/kept/$S.img" "$T/kmnt"; then
	f=$(find "$T/kmnt" -name big -path '*/t/big' | head -n 1)
	check "the kept image holds the unchanged file ($f)" test -n "$f"
	rm -f "$f"
	umount "$T/kmnt"
else
	not_ok "mount the kept image"
fi
check "move 4 back to w1 (its kept image damaged)" move w1
P4=$(jget snapshot "$T/sbx")
check "... the restore onto the kept image failed" \
	grep -q "layer of $S: restoring $P4 failed (a file as in the base, which the base does not hold)" "$T/mgr_w1.log"
manifest >"$T/m4" || not_ok "manifest after move 4"
check "... the layer was built from the chain instead: intact" cmp -s "$T/m3" "$T/m4"

# a pause and a resume on the same worker: the kept image is the archive
is "pause -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 60
P5=$(jget snapshot "$T/sbx")
is "resume on w1 -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{"worker":"w1"}')" 202
check "running" wait_state "$S" running 60
check "... from the image kept there, nothing restored" \
	grep -q "layer of $S: the image kept here is $P5 itself" "$T/mgr_w1.log"
manifest >"$T/m5" || not_ok "manifest after the resume"
check "... the tree is intact" cmp -s "$T/m3" "$T/m5"

# what the workers counted (metrics.prom, rewritten every 2 s)
prom_fresh "$T/w1/metrics.prom"
prom_fresh "$T/w2/metrics.prom"
for m in "w2 archives_incremental" "w1 archives_incremental" "w1 kept_layers_restored_onto" \
    "w1 kept_layers_used" "w1 restores_again"; do
	set -- $m
	check "$1 counted space_sbxmgr_$2_total" grep -q "^space_sbxmgr_$2_total [1-9]" "$T/$1/metrics.prom"
done

# a large archive (past SPACE_FOLLOW_CACHE_MAX, 64 MiB) restored along its
# download is released behind the restore: not kept in the cache, and a
# refusal is checked by a download of its own
flip() { python3 -c 'import sys; f = open(sys.argv[1], "r+b"); o = int(sys.argv[2]); f.seek(o); b = f.read(1); f.seek(o); f.write(bytes([b[0] ^ 0xff]))' "$1" "$2"; }
S0=$S
is "create a sandbox L on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "L running" wait_state "$S" running 20
SUM=$(run 'head -c 96M /dev/urandom >/home/user/big && sha256sum /home/user/big | cut -c1-64')
check "L wrote 96 MiB" test -n "$SUM"
check "move L to w2" move w2
PL=$(jget snapshot "$T/sbx")
check "... w2 restored it as it arrived and did not keep it" grep -q \
	"archive $PL fetched from the control plane ([0-9]* bytes) and restored as it arrived; not kept" \
	"$T/mgr_w2.log"
check "... not in w2's cache, and no part of it left there" \
	sh -c "! ls -A '$T/w2/snapshots' | grep -q '$PL\|tmp'"
check "... nor in w1's, which uploaded it while it made it" \
	sh -c "! ls -A '$T/w1/snapshots' | grep -q '$PL\|tmp'"
is "... w1 kept the image of it all the same" "$(cut -d' ' -f1 "$T/w1/kept/$S.tag")" "$PL"
is "... the data intact on w2" "$(run 'sha256sum /home/user/big | cut -c1-64')" "$SUM"
# space-control hashes an upload past its first MiB on a thread of its
# own: a byte changed near the end of a large one is refused all the same,
# sent under its digest or streamed, and the stored copy stays intact
cp "$T/c/archives/$PL.snap" "$T/lbad"
chmod u+w "$T/lbad"
flip "$T/lbad" $(($(stat -c %s "$T/lbad") - 1000))
up() { curl -s -m 60 -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $(cat "$T/cred_w1")" "$@"; }
is "a 96 MiB upload with a byte changed near its end -> 400" \
	"$(up -X PUT --data-binary @"$T/lbad" "$CU/v1/workers/w1/archives/$PL")" 400
is "... digest_mismatch" "$(jget error)" digest_mismatch
is "... streamed, the digest in its trailer -> 400" "$(up -X POST -H 'Transfer-Encoding: chunked' \
	-H 'Expect:' --data-binary @"$T/lbad" "$CU/v1/workers/w1/archives/stream")" 400
is "... digest_mismatch" "$(jget error)" digest_mismatch
is "... the stored archive is still its digest" \
	"$(head -c $(($(stat -c %s "$T/lbad") - 40)) "$T/c/archives/$PL.snap" | sha256sum | cut -c1-64)" "$PL"
rm -f "$T/lbad"
# w2's index gone, its pause archive is whole again; w1 without its kept
# image must download it, and the control plane's copy is damaged in its
# middle: the restore along the download fails after much of it was
# released
check "w2 had an index of L's layer" sh -c "ls '$T'/w2/exec/'$S'.g*/layer/base.idx >/dev/null"
rm -f "$T"/w2/exec/"$S".g*/layer/base.idx
is "pause L on w2 -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "L paused" wait_state "$S" paused 60
PW=$(jget snapshot "$T/sbx")
check "... its archive is whole" grep -q "layer archived as $PW ([0-9]* bytes, uploaded" "$T/mgr_w2.log"
rm -f "$T/w1/kept/$S.img" "$T/w1/kept/$S.tag" "$T/w1/snapshots/$PW.snap"
chmod u+w "$T/c/archives/$PW.snap"
flip "$T/c/archives/$PW.snap" $(($(stat -c %s "$T/c/archives/$PW.snap") / 2))
is "resume L on w1 from its damaged archive -> 202" \
	"$(cpost "/v1/sandboxes/$S/resume" '{"worker":"w1"}')" 202
check "L failed" wait_state "$S" failed 90
check "... the restore along the download failed; w1 fetched it whole to check it" \
	grep -q "archive $PW: the restore along its download failed" "$T/mgr_w1.log"
check "... and refused its bytes" \
	grep -q "archive $PW: the control plane sent bytes of digest" "$T/mgr_w1.log"
check "... nothing of it in w1's cache" sh -c "! ls -A '$T/w1/snapshots' | grep -q '$PW\|tmp'"
check "w2 kept the image of L's pause archive, which its cache does not hold" \
	sh -c "test -f '$T/w2/kept/$S.img' && ! test -e '$T/w2/snapshots/$PW.snap'"
is "... tagged with it" "$(cut -d' ' -f1 "$T/w2/kept/$S.tag")" "$PW"
is "kill L -> 200" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S")" 200
check "L killed" wait_state "$S" killed 30
# w2 again, offering what is a second old: its collection asks for the
# kept image's digest though no file of it is cached, and drops the image
stop M2
MGR_FLAGS="--snapshot-gc-grace 1" start_mgr 2 w2 "$NP2"
gc_dropped() {
	_i=0
	# the image goes first, then its tag: wait for both (a CI run looked
	# between the two)
	while { [ -e "$T/w2/kept/$1.img" ] || [ -e "$T/w2/kept/$1.tag" ]; } && [ $_i -lt 300 ]; do
		sleep 0.1; _i=$((_i + 1))
	done
	! [ -e "$T/w2/kept/$1.img" ] && ! [ -e "$T/w2/kept/$1.tag" ]
}
check "... w2's collection dropped the image kept of L (its archive was never cached there)" gc_dropped "$S"
check "... and kept the one of the sandbox still alive" test -f "$T/w2/kept/$S0.img"
S=$S0

# a kill keeps nothing on the worker it ran on
is "kill -> 200" "$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S")" 200
check "killed" wait_state "$S" killed 30
kept_gone() { ! ls "$T/w1/kept" 2>/dev/null | grep -q "$S"; }
check "... w1 dropped its kept image" eventually 30 kept_gone

platform_cleanup
done_testing
