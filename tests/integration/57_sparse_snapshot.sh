#!/bin/sh
# Sparse files through the platform: a sandbox makes three files of 1 GiB
# with truncate (one with a little data), a named snapshot of it is a
# small archive (holes are not stored), and after pause and resume the
# files are back with the same sizes and data, still sparse (holes are
# restored as holes, not written out).
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP=$(free_port)
NU=http://127.0.0.1:$NP

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "create a sandbox" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
CAP=$(route "$S")

# sizes, allocated KiB, and the bytes at the data offsets, inside
look='cd /home/user && stat -c "%n %s" a b c && du -k a b c | awk "{ s += \$1 } END { print \"alloc\", (s < 1024) }" &&
	dd if=c bs=1 skip=536870912 count=6 2>/dev/null && dd if=c bs=1 skip=1073741819 count=5 2>/dev/null'
make='cd /home/user && truncate -s 1G a b c && printf middle | dd of=c bs=1 seek=536870912 conv=notrunc 2>/dev/null &&
	printf "tail\n" | dd of=c bs=1 seek=1073741819 conv=notrunc 2>/dev/null'
# exec_sh SCRIPT: runs it in the sandbox; the answer in $T/body
exec_sh() { napi POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]]}))' "$1")" >/dev/null; }

is "truncate -s 1G three times (and write a little into c)" "$(exec_sh "$make"; jget exit_code)" 0
is "inside: 3 x 1 GiB, under 1 MiB allocated" "$(exec_sh "$look"; jget stdout)" "$(printf 'a 1073741824\nb 1073741824\nc 1073741824\nalloc 1\nmiddletail')"
BEFORE=$(jget stdout)

is "named snapshot -> 202" "$(cpost "/v1/sandboxes/$S/snapshots" '{"name":"sparse"}')" 202
i=0; while [ $i -lt 300 ]; do
	curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots"
	[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
	sleep 0.1; i=$((i + 1))
done
is "snapshot ready" "$(jget snapshots.0.state "$T/snaps")" ready
D=$(jget snapshots.0.digest "$T/snaps")
SZ=$(stat -c %s "$T/c/archives/$D.snap" 2>/dev/null || echo missing)
check "the archive of 3 GiB of sparse files is small ($SZ bytes)" test "$SZ" -lt 1048576
is "the size the control plane records is the file's" "$(jget snapshots.0.size "$T/snaps")" "$SZ"
zstd -qdc "$T/c/archives/$D.snap" 2>/dev/null | tar -tvf - 2>/dev/null >"$T/list"
check "any tar reads it (zstd -dc | tar -tv): c is there, 1 GiB" \
	sh -c "grep -E ' 1073741824 .* (.*/)?c\$' '$T/list' >/dev/null"

is "pause -> 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
check "paused" wait_state "$S" paused 60
P=$(jget snapshot "$T/sbx")
SZ=$(stat -c %s "$T/c/archives/$P.snap" 2>/dev/null || echo missing)
check "the pause archive is small too ($SZ bytes)" test "$SZ" -lt 1048576
is "resume -> 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
check "running again" wait_state "$S" running 60
CAP=$(route "$S")
is "after resume: same sizes and data, still sparse" "$(exec_sh "$look"; jget stdout)" "$BEFORE"

check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
