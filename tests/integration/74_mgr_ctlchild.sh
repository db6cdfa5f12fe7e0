#!/bin/sh
# sbx-manager's control-plane client runs in a child of its own: the only
# process of the worker that speaks HTTP to space-control and parses its
# JSON. Read from /proc: it runs as nobody, with no capability in any set,
# no_new_privs and a seccomp filter; the root parent holds no TCP socket.
# Killed with SIGKILL it is started again, and a new sandbox is installed
# and served through the new one. A stand-in control plane answering with
# hostile bodies (not JSON, over 4 MiB, nested 200000 deep, over the
# assignments limit, megabyte ids, bad bundles) does not bring the root
# parent down, and installs nothing.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
HP=$(free_port)
HPID=
platform_on_cleanup() { [ -n "$HPID" ] && kill "$HPID" 2>/dev/null; true; }

# wait_child MGRPID OLDPID: a control client other than OLDPID, confined
# (Seccomp 2 is the last step before it serves), within 20 s
wait_child() {
	_i=0
	while [ $_i -lt 200 ]; do
		_c=$(ctl_child "$1") && [ "$_c" != "$2" ] &&
		    [ "$(awk '/^Seccomp:/ { print $2 }' "/proc/$_c/status" 2>/dev/null)" = 2 ] &&
		    { echo "$_c"; return 0; }
		sleep 0.1; _i=$((_i + 1))
	done
	return 1
}
field() { awk -v f="$2:" '$1 == f { $1 = ""; sub(/^ /, ""); print }' "/proc/$1/status"; }
# the socket inodes of PID that are TCP sockets (v4 or v6)
tcp_of() {
	for _l in $(ls -l /proc/"$1"/fd 2>/dev/null | sed -n 's/.*socket:\[\([0-9]*\)\]$/\1/p'); do
		awk -v i="$_l" 'NR > 1 && $10 == i { print i }' /proc/net/tcp /proc/net/tcp6
	done
}

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
C1=$(wait_child "$M1" none)
check "sbx-manager started its control client ($C1)" test -n "$C1"
NOBODY=$(id -u nobody)
is "the client runs as nobody (real, effective, saved, fs)" "$(field "$C1" Uid | tr -s '\t ' ' ')" \
    "$NOBODY $NOBODY $NOBODY $NOBODY"
is "... with no supplementary group" "$(field "$C1" Groups | tr -d ' \t')" ""
is "... CapEff 0" "$(field "$C1" CapEff)" 0000000000000000
is "... CapPrm 0" "$(field "$C1" CapPrm)" 0000000000000000
is "... CapBnd 0" "$(field "$C1" CapBnd)" 0000000000000000
is "... CapInh and CapAmb 0" "$(field "$C1" CapInh) $(field "$C1" CapAmb)" \
    "0000000000000000 0000000000000000"
is "... NoNewPrivs 1" "$(field "$C1" NoNewPrivs)" 1
is "... Seccomp 2 (a filter)" "$(field "$C1" Seccomp)" 2
check "... its parent is sbx-manager" test "$(awk '{ print $4 }' /proc/"$C1"/stat)" = "$M1"
check "... it holds neither records.db nor the credential file" \
    sh -c "! ls -l /proc/$C1/fd | grep -q -e records.db -e cred_w1"
# the credential's bytes: in the client's memory (the scan finds them
# there), never in the root parent's
check "the worker credential is in the client's memory" \
    test "$(/usr/bin/python3 "$SPACE_TOP/tests/tools/memscan.py" "$C1" "file:$T/cred_w1")" -ge 1
is "... and nowhere in the root parent's" "$(/usr/bin/python3 "$SPACE_TOP/tests/tools/memscan.py" "$M1" "file:$T/cred_w1")" 0

is "create a sandbox on w1 (installed through the client)" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
check "A running within 30 s" wait_state "$A" running 30
S=$A CAP=$(route "$A")
is "A serves exec (the key bundle came through the client)" \
    "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "the root parent holds no TCP socket (the client does the HTTP)" "$(tcp_of "$M1")" ""

# ---- the client dies: sbx-manager starts it again and goes on ----
kill -9 "$C1"
is "A is served while the client is being restarted" \
    "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
C2=$(wait_child "$M1" "$C1")
check "a new control client within 20 s ($C2)" test -n "$C2"
is "... again as nobody, CapEff 0, NoNewPrivs 1, Seccomp 2" \
    "$(field "$C2" Uid | awk '{ print $1 }') $(field "$C2" CapEff) $(field "$C2" NoNewPrivs) $(field "$C2" Seccomp)" \
    "$NOBODY 0000000000000000 1 2"
check "the restart is logged" grep -q "control client (pid $C1) ended by signal 9" "$T/mgr_w1.log"
is "create a sandbox after the restart" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "B installed and running within 30 s" wait_state "$B" running 30
S=$B CAP=$(route "$B")
is "B serves exec" "$(napi POST exec --data-binary '{"argv":["sh","-c","echo b"]}')" 200
is "... its output" "$(jget stdout)" b
check "sbx-manager kept running" alive "$M1"

# ---- a hostile control plane ----
python3 "$SPACE_TOP/tests/doubles/hostile_control.py" "$HP" "$T/hostile.count" 2>>"$T/hostile.log" &
HPID=$!
check "the hostile stand-in answers" wait_http "http://127.0.0.1:$HP/v1/x" 10
echo "hostile-credential" >"$T/cred_w2"
NP2=$(free_port)
_cu=$CU
CU=http://127.0.0.1:$HP
check "worker w2 up against the hostile control plane" start_mgr 2 w2 "$NP2"
CU=$_cu
# every kind of hostile body, twice over (ten kinds)
_i=0
while [ "$(cat "$T/hostile.count" 2>/dev/null || echo 0)" -lt 20 ] && [ $_i -lt 600 ]; do
	sleep 0.1; _i=$((_i + 1))
done
check "w2 asked the hostile control plane 20 times" \
    test "$(cat "$T/hostile.count" 2>/dev/null || echo 0)" -ge 20
check "w2's sbx-manager is still running" alive "$M2"
check "... and still listens" test -S "$T/w2/run/sbx-manager.sock"
C3=$(wait_child "$M2" none)
check "... with a confined control client" test -n "$C3"
check "the malformed answers were refused (logged)" grep -q "malformed answer" "$T/mgr_w2.log"
is "nothing was installed from them" "$(wsql w2 "select count(*) from records")" 0
check "no key bundle was taken from them" test ! -e "$T/w2/keys.bundle"
S=$A CAP=$(route "$A")
is "w1 is unaffected: A serves exec" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
done_testing
