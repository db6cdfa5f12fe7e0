#!/bin/sh
# A uid slot is free again only once the execution that held it has
# stopped (records.c, records_slot_draining; docs/worker.md section 8).
# A retirement commits first (no request is admitted from then on) and
# stops the jail after; a stop may take seconds (a bridge that does not
# end on SIGTERM gets MGR_STOP_GRACE_MS). A is killed while its bridge is
# stopped (SIGSTOP: it cannot end its jail), and B is created on the same
# worker while A's processes still run. B must not be given A's uid range:
# its processes would run on the same host uids as A's, which still live.
# Once A's jail ended, its slot is taken by the next sandbox (C): a drained
# slot is not lost.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
R256='"resources":{"disk_mb":256}'
# the host uid of root in the user namespace of process $1
uid0_of() { awk '$1 == 0 { print $2 }' /proc/"$1"/uid_map 2>/dev/null; }
killsbx() { curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$1"; }
wstate() { wsql w1 "SELECT state FROM records WHERE sandbox='$1'"; }
is_retired() { [ "$(wstate "$1")" = retired ]; }
# guest NAME: start sandbox NAME's guest pid and its uid range into
# G_NAME / U_NAME
guest() {
	_bp=$(wsql w1 "SELECT bridge_pid FROM records WHERE sandbox='$2'")
	_g=$(guest_of "$_bp")
	eval "G_$1=\$_g U_$1=\$(uid0_of \"\$_g\")"
}
BP=
platform_on_cleanup() { [ -n "$BP" ] && kill -CONT "$BP" 2>/dev/null; }

check "space-control up" start_ctl
check "worker w1 up (no prepared jails)" add_worker 1 w1 "$NP" --jail-pool 0 --disk-mb 256

is "create A on w1" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
guest A "$A"
check "A's guest ($G_A) runs on a uid range ($U_A)" test -n "$U_A"

# A's bridge cannot act on the SIGTERM of its stop: the stop waits out
# its grace period, then kills it, then the jail it leaves behind
BP=$(wsql w1 "SELECT bridge_pid FROM records WHERE sandbox='$A'")
kill -STOP "$BP"
is "kill A -> 200" "$(killsbx "$A")" 200
check "w1 committed A's retirement" eventually 20 is_retired "$A"

is "create B on w1 while A's jail still runs" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
guest B "$B"
check "B's guest ($G_B) runs on a uid range ($U_B)" test -n "$U_B"
check "A's guest ($G_A) was still alive then" alive "$G_A"
check "B is not on the uid range A's processes still run on" test -n "$U_B" -a "$U_B" != "$U_A"
diag "A on $U_A, B on $U_B"

a_gone() { ! alive "$G_A" && grep -q "retired $A g1" "$T/mgr_w1.log"; }
check "A's jail ended (its stop gave up waiting for the stopped bridge)" eventually 40 a_gone
BP=

is "create C on w1" "$(cpost /v1/sandboxes "{\"worker\":\"w1\",$R256}")" 201
C=$(jget id)
check "C running" wait_state "$C" running 30
guest C "$C"
is "C takes the slot A left (the lowest free): a drained slot is free again" "$U_C" "$U_A"
is "B still runs on its own" "$(uid0_of "$G_B")" "$U_B"
NU=http://127.0.0.1:$NP
S=$B CAP=$(route "$B")
napi POST exec --data-binary '{"argv":["echo","b-ok"],"timeout":30}' >/dev/null
is "B still serves" "$(jget stdout)" b-ok
check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
