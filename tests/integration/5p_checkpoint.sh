#!/bin/sh
# Checkpoints (docs/worker.md, "Checkpoints"), two real workers: a serving
# layer that grew by --checkpoint-mb is archived while its sandbox runs
# and recorded by the control plane as an automatic snapshot; the move
# after it carries only what changed since (a delta of the checkpoint),
# and the worker it goes to restores the chain from the control plane.
# From the tenant's side: every change made after the checkpoint travels:
# appended, deleted, chmod'ed, added and replaced entries, a file whose
# mtime is put back, and a page of a shared mapping written before the
# checkpoint and again after it by a process that kept the mapping (the
# sync of the checkpoint protects its pages again, so the second write
# stamps the file's ctime). From a worker's side: a checkpoint of an
# execution placed elsewhere is refused (403), and one of an execution
# no longer serving (409).
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
MGR_FLAGS="--checkpoint-mb 8 --checkpoint-interval 1"
NP1=$(free_port); NP2=$(free_port)
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20

run() { sbx_sh "$S" "$1"; }
manifest() {
	run 'cd /home/user/t && find . -printf "%y %m %s %T@ %p %l\n" | sort && find . -type f | sort | xargs sha256sum'
}
snaps() {
	curl -s -m 10 -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots" |
	    python3 -c 'import json,sys; print(len(json.load(sys.stdin)["snapshots"]))'
}

is "no snapshot yet" "$(snaps)" 0
# a process that maps m shared, writes its first page, and after the
# checkpoint (the file go appears) writes that page again, then exits
cat >"$T/mapper.py" <<'PY'
import mmap, os, time
fd = os.open("/home/user/t/m", os.O_RDWR)
mm = mmap.mmap(fd, 65536, mmap.MAP_SHARED)
mm[0:8] = b"BEFORE.."
open("/home/user/t/.mapped", "w").close()
while not os.path.exists("/home/user/go"):
    time.sleep(0.05)
mm[0:8] = b"AFTER..."
mm.flush()
open("/home/user/done", "w").close()
PY
check "a tree written on w1 (24 MiB of it incompressible)" run "mkdir -p /home/user/t/d/e && cd /home/user/t &&
	head -c 25165824 /dev/urandom >big && echo a >a && echo bb >b && echo c >c && echo x >d/e/x &&
	echo same >same && ln -s a l && head -c 65536 /dev/zero >m &&
	printf '%s' '$(base64 -w0 "$T/mapper.py")' | base64 -d >/home/user/mapper.py &&
	setsid /usr/bin/python3 /home/user/mapper.py >/dev/null 2>&1 </dev/null &
	for i in \$(seq 100); do [ -e /home/user/t/.mapped ] && exit 0; sleep 0.1; done; exit 1"
ck() { grep -q "checkpoint of $S g1: layer archived as" "$T/mgr_w1.log"; }
check "w1 checkpointed the running layer (it grew by more than 8 MiB)" eventually 40 ck
C=$(grep "checkpoint of $S g1: layer archived as" "$T/mgr_w1.log" | head -1 | sed 's/.*layer archived as \([0-9a-f]*\).*/\1/')
check "... the control plane recorded it" grep -q "checkpoint of $S g1 on w1: ${C%"${C#????????????}"}" "$T/ctl.log"
is "... as a snapshot of the sandbox" "$(snaps)" 1
check "... and stores its archive" test -f "$T/c/archives/$C.snap"
is "the sandbox still runs" "$(run 'echo up')" up

MT=$(run 'stat -c %Y /home/user/t/same')
check "changes after the checkpoint" run "cd /home/user/t && echo more >>a && rm b && chmod 600 c &&
	echo new >n && rm -r d/e && echo now-a-file >d/e && rm l && ln -s c l &&
	printf 'SAME\n' >same && touch -d @$MT same && rm .mapped && touch /home/user/go &&
	for i in \$(seq 100); do [ -e /home/user/done ] && exit 0; sleep 0.1; done; exit 1"
is "the mapped page holds the second write" "$(run 'head -c 8 /home/user/t/m')" "AFTER..."
manifest >"$T/m1" || not_ok "manifest on w1"

is "move to w2" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
on_w2() { wait_state "$S" running 1 && [ "$(jget execution.worker "$T/sbx")" = w2 ]; }
check "running on w2" eventually 60 on_w2
P=$(jget snapshot "$T/sbx")
check "... w1 archived the layer as a delta of the checkpoint" \
	grep -q "layer archived as $P ([0-9]* bytes, incremental" "$T/mgr_w1.log"
SZ=$(stat -c %s "$T/c/archives/$P.snap")
check "... which is small ($SZ bytes; 24 MiB left alone did not travel)" test "$SZ" -lt 1048576
manifest >"$T/m2" || not_ok "manifest on w2"
check "the tree on w2 is the tree left on w1" cmp -s "$T/m1" "$T/m2"
is "... the mapped page's second write travelled" "$(run 'head -c 8 /home/user/t/m')" "AFTER..."
[ "$(cat "$T/m1")" = "$(cat "$T/m2")" ] || diff "$T/m1" "$T/m2" | head -20 | sed 's/^/# /'

# from a worker's side
# the identity of an execution of S from the control plane's record
ident() {
	csql "SELECT generation, worker, substrate, activation, resident FROM executions
	    WHERE sandbox = '$S' AND generation = $1" | python3 -c 'import json,sys
g, w, s, a, r = sys.stdin.read().strip().split("|")
print(json.dumps({"sandbox": sys.argv[1], "generation": int(g), "worker": w, "substrate": s,
    "activation": int(a), "resident": r}))' "$S"
}
ID=$(ident 2)
OLD=$(ident 1)
wpost() { curl -s -o "$T/wbody" -w '%{http_code}' -X POST -H "Authorization: Bearer $(cat "$T/cred_$1")" --data-binary "$2" "$CU/v1/workers/$1/checkpoints"; }
is "w1 cannot record a checkpoint of the execution on w2 -> 403" \
	"$(wpost w1 "{\"identity\":$ID,\"digest\":\"$C\",\"size\":1}")" 403
is "nor of its old execution there, no longer serving -> 409" \
	"$(wpost w1 "{\"identity\":$OLD,\"digest\":\"$C\",\"size\":1}")" 409
is "a malformed one -> 400" "$(wpost w2 "{\"identity\":$ID,\"digest\":\"xyz\",\"size\":1}")" 400
is "... or one whose base is no digest -> 400" \
	"$(wpost w2 "{\"identity\":$ID,\"digest\":\"$C\",\"size\":1,\"base\":\"../x\"}")" 400
is "... the sandbox still has its two snapshots" "$(snaps)" 2
check "w1 counted its checkpoint" eventually 10 grep -Eq '^space_sbxmgr_checkpoints_total [1-9]' "$T/w1/metrics.prom"
check "no sanitizer report in the daemons' logs" sh -c "! cat '$T'/mgr_w*.log '$T/ctl.log' | grep -Eq 'Sanitizer|runtime error'"

done_testing
