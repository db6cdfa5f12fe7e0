#!/bin/sh
# Layer images made ahead of creates (sbx-manager layerpool.c): the worker
# keeps --layer-pool fresh images in D/layer-pool; a new sandbox's layer is
# one of them (the same inode, moved), it serves as a layer made at the
# create would (files of the sandbox user, the root of the sandbox's
# range), and the pool is filled again. A sandbox of another disk size gets a
# copy of a blank of its size (D/layer-pool/.blank-MiB, made by mkfs at the
# first such create), not a pool image nor another sandbox's layer. A restart empties the pool before filling it: a file
# planted there (a symlink to a host file, or an image some earlier run
# left) is never a sandbox's layer. Images are copies of one blank made by
# mkfs at the start (D/layer-pool/.blank); a burst larger than the pool
# gets copies of the blank too, never an mkfs in the bridge.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
PD=$T/w1/layer-pool
pool_n() { find "$PD" -maxdepth 1 -name '*.img' -type f 2>/dev/null | wc -l; }
# wait_pool N SECONDS: true once the pool holds N images
wait_pool() {
	_i=0
	while [ "$(pool_n)" -ne "$1" ] && [ $_i -lt $(($2 * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
	[ "$(pool_n)" -eq "$1" ]
}

check "space-control up" start_ctl
check "worker w1 up (pool of 2, 256 MiB layers)" add_worker 1 w1 "$NP" --layer-pool 2 --disk-mb 256
check "the pool holds 2 images" wait_pool 2 60
is "... the pool directory is root's, 0700" "$(stat -c %u:%a "$PD")" "0:700"
INOS=$(find "$PD" -maxdepth 1 -name '*.img' -printf '%i\n' | sort | tr '\n' ' ')

# the control plane's default is 4096 MiB: the sandboxes here ask for the
# pool's size
R256='"resources":{"disk_mb":256}'
is "create A" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
AI=$(stat -c %i "$T/w1/exec/$A.g1/layer/disk.img")
case " $INOS " in *" $AI "*) ok "A's layer is a pool image (inode $AI)" ;;
*) not_ok "A's layer is a pool image (inode $AI, pool had $INOS)" ;; esac
S=$A CAP=$(route "$A")
is "A writes and reads its home" \
    "$(napi POST exec --data-binary '{"argv":["sh","-c","echo hi > /home/user/f && cat /home/user/f"]}')" 200
is "... its output" "$(jget stdout)" hi
is "... the file is the sandbox user's, inside" \
    "$(napi POST exec --data-binary '{"argv":["stat","-c","%u","/home/user/f"]}' >/dev/null; jget stdout)" 1000
is "... the layer root is the sandbox's root" \
    "$(napi POST exec --data-binary '{"argv":["stat","-c","%u","/"]}' >/dev/null; jget stdout)" 0
check "the pool is filled again" wait_pool 2 60

is "create B with another disk size" "$(cpost /v1/sandboxes '{"worker":"w1","resources":{"disk_mb":128}}')" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
is "B's layer is its own 128 MiB image" "$(stat -c %s "$T/w1/exec/$B.g1/layer/disk.img")" $((128 << 20))
is "... not taken from the pool" "$(pool_n)" 2
is "... a blank of 128 MiB was made: root's, 0600" "$(stat -c %u:%a:%s "$PD/.blank-128" 2>&1)" "0:600:$((128 << 20))"
check "... B's layer is a copy of it (its bridge ran no mkfs)" grep -q "jail of $B g1 in .*(mkfs 0\.0)" "$T/mgr_w1.log"
check "... not the blank itself" test "$(stat -c %i "$T/w1/exec/$B.g1/layer/disk.img")" != "$(stat -c %i "$PD/.blank-128")"
S=$B CAP=$(route "$B")
is "B writes in its home" \
    "$(napi POST exec --data-binary '{"argv":["sh","-c","echo bee > /home/user/f && cat /home/user/f && stat -c %u /"]}')" 200
is "... reads it back; its root is the sandbox's" "$(echo $(jget stdout))" "bee 0"
is "create D of 128 MiB too" "$(cpost /v1/sandboxes '{"worker":"w1","resources":{"disk_mb":128}}')" 201
D=$(jget id)
check "D running" wait_state "$D" running 30
check "... its bridge ran no mkfs either" grep -q "jail of $D g1 in .*(mkfs 0\.0)" "$T/mgr_w1.log"
is "... one blank of that size" "$(find "$PD" -maxdepth 1 -name '.blank-*' | wc -l)" 1
S=$D CAP=$(route "$D")
is "D's home does not hold B's file" \
    "$(napi POST exec --data-binary '{"argv":["sh","-c","ls -A /home/user; test ! -e /home/user/f"]}')" 200
is "... (exit code)" "$(jget exit_code)" 0
check "... D's layer is not B's" test "$(stat -c %i "$T/w1/exec/$D.g1/layer/disk.img")" != "$(stat -c %i "$T/w1/exec/$B.g1/layer/disk.img")"

# a restart: what is in the pool directory is not trusted (room for the
# burst below)
env_mgr8() { MGR_CAPACITY=8 start_mgr 1 w1 "$NP" --layer-pool 2 --disk-mb 256; }
stop M1
echo secret >"$T/hostfile"
ln -s "$T/hostfile" "$PD/900.img"
printf PLANTED >"$PD/901.img"
truncate -s 256M "$PD/901.img"
check "sbx-manager started again" env_mgr8
check "the pool holds 2 images again" wait_pool 2 60
check "... the planted symlink is gone" test ! -e "$PD/900.img" -a ! -L "$PD/900.img"
check "... the planted image is gone" test ! -e "$PD/901.img"
check "... the host file is untouched" grep -qx secret "$T/hostfile"
is "create C" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
C=$(jget id)
check "C running" wait_state "$C" running 30
CL=$T/w1/exec/$C.g1/layer/disk.img
check "C's layer is neither planted file" test ! -L "$CL" -a "$(head -c 7 "$CL")" != PLANTED
S=$C CAP=$(route "$C")
is "C serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "... the blank is root's, 0600, the pool's size" "$(stat -c %u:%a:%s "$PD/.blank")" "0:600:$((256 << 20))"

# a burst of four with two images in the pool: none of the four bridges
# runs mkfs, each layer is an image of its own
wait_pool 2 60
CURLS=
for i in 1 2 3 4; do
	curl -s -m 20 -o "$T/burst$i" -X POST -H "Authorization: Bearer $K" \
	    --data-binary "{\"worker\":\"w1\",$R256}" "$CU/v1/sandboxes" &
	CURLS="$CURLS $!"
done
wait $CURLS
INOS=
for i in 1 2 3 4; do
	X=$(jget id "$T/burst$i")
	check "burst create $i running" wait_state "$X" running 60
	check "... its bridge made no layer (mkfs 0.0)" grep -q "jail of $X g1 in .*(mkfs 0\.0)" "$T/mgr_w1.log"
	INOS="$INOS $(stat -c %i "$T/w1/exec/$X.g1/layer/disk.img")"
	S=$X CAP=$(route "$X")
	is "... it writes in its home" \
	    "$(napi POST exec --data-binary '{"argv":["sh","-c","echo $0 > /home/user/f && cat /home/user/f","'$i'"]}')" 200
	is "... and reads it back" "$(jget stdout)" "$i"
done
is "... four layers, four images" "$(echo $INOS | tr ' ' '\n' | sort -u | wc -l)" 4
check "sbx-manager kept running" alive "$M1"
done_testing
