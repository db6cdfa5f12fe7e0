#!/bin/sh
# A sandbox that comes back to a worker keeps its uid slot only if that
# slot is still free (records.c, records_put_slotted; docs/worker.md
# section 8): A runs on w1 and is paused (its record retired), B is
# created on w1 and takes the slot A left, then A is resumed on w1. A
# must come back on a uid range of its own, never on B's: two live
# sandboxes sharing host uids could signal, ptrace and read each other's
# files, and would share the slot's egress addresses. A's files come back
# with it, owned by its new range; B is untouched.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
R256='"resources":{"disk_mb":256}'
# the guest (PID 1 of the jail) listening on execution $1's jail.sock
guest_of() { ss -xlpn 2>/dev/null | awk -v p="$T/w1/run/$1/jail.sock" '$5 == p' |
    sed -n 's/.*pid=\([0-9]*\).*/\1/p' | head -1; }
# the host uid of root in the user namespace of process $1
uid0_of() { awk '$1 == 0 { print $2 }' /proc/"$1"/uid_map 2>/dev/null; }
# exec_sh SCRIPT: sh -c SCRIPT in $S through $NU with $CAP; stdout printed
exec_sh() {
	napi POST exec --data-binary "$(python3 -c 'import json,sys; print(json.dumps({"argv":["sh","-c",sys.argv[1]],"timeout":30}))' "$1")" >/dev/null
	jget stdout
}

check "space-control up" start_ctl
check "worker w1 up (no prepared jails)" add_worker 1 w1 "$NP" --jail-pool 0 --disk-mb 256

is "create A on w1" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
S=$A CAP=$(route "$A")
is "A writes a file" "$(exec_sh 'echo from-a >/home/user/f && cat /home/user/f')" from-a
GA=$(guest_of "$A.g1")
UA=$(uid0_of "$GA")
check "A's guest ($GA) runs on a uid range ($UA)" test -n "$UA"

is "pause A -> 202" "$(cpost "/v1/sandboxes/$A/pause" '{}')" 202
check "A paused" wait_state "$A" paused 60

is "create B on w1" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
GB=$(guest_of "$B.g1")
UB=$(uid0_of "$GB")
check "B's guest ($GB) runs on a uid range ($UB)" test -n "$UB"
diag "A had uid range $UA; B took $UB"

is "resume A on w1 -> 202" "$(cpost "/v1/sandboxes/$A/resume" '{"worker":"w1"}')" 202
check "A running again" wait_state "$A" running 60
is "... on w1" "$(jget execution.worker "$T/sbx")" w1
GEN=$(jget execution.generation "$T/sbx")
GA2=$(guest_of "$A.g$GEN")
UA2=$(uid0_of "$GA2")
check "A's new guest ($GA2) runs on a uid range ($UA2)" test -n "$UA2"
check "A and B, both live, are on different uid ranges" test -n "$UA2" -a "$UA2" != "$UB"
is "B's guest still runs on its own" "$(uid0_of "$GB")" "$UB"
S=$A CAP=$(route "$A")
is "A's file came back, readable and writable by its user" \
    "$(exec_sh 'cat /home/user/f && echo more >>/home/user/f && tail -1 /home/user/f')" "$(printf 'from-a\nmore')"
is "... owned by A's user inside" "$(exec_sh 'stat -c %U /home/user/f')" user
S=$B CAP=$(route "$B")
is "B still serves" "$(exec_sh 'echo b-ok')" b-ok
check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
