#!/bin/sh
# A control plane that stops answering (SIGSTOP: its socket still accepts
# connections, nothing answers) must not stall the worker: sbx-manager's
# status reports are queued and sent by one reporter thread, so the thread
# that relaunches dead bridges never waits for the control plane. Two
# bridges die one after the other while space-control is stopped; both are
# relaunched while it is still stopped, a sandbox nobody touched keeps
# serving, and once space-control runs again the queued reports reach it
# (a fresh capability names the new activation and is served).
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
platform_on_cleanup() { [ -n "$CTL" ] && kill -CONT "$CTL" 2>/dev/null; true; }

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
for n in A B C; do
	is "create sandbox $n" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
	eval "$n=\$(jget id)"
done
check "A running" wait_state "$A" running 30
check "B running" wait_state "$B" running 30
check "C running" wait_state "$C" running 30
CAPC=$(route "$C")

# serving LABEL SANDBOX ACTIVATION: within 20 s by the clock the record of
# SANDBOX is serving as ACTIVATION. A report that waits for a stopped
# control plane takes 5 tries of 10 s each: a relaunch queued behind one
# comes 50 s or more after the bridge died, never within this bound.
serving() {
	_end=$(($(date +%s) + 20))
	while [ "$(wsql w1 "select activation, state from records where sandbox='$2'")" != "$3|serving" ] &&
	    [ "$(date +%s)" -le $_end ]; do sleep 0.1; done
	is "$1" "$(wsql w1 "select activation, state from records where sandbox='$2'")" "$3|serving"
}
ctl_stopped() { [ "$(awk '/^State:/ { print $2 }' "/proc/$CTL/status")" = T ]; }

kill -STOP "$CTL"
check "space-control is stopped" ctl_stopped
# the relaunch of A reports "serving"; that report must not hold up B's
kill -9 "$(wsql w1 "select bridge_pid from records where sandbox='$A'")"
serving "A's bridge relaunched (activation 2) with the control plane stopped" "$A" 2
kill -9 "$(wsql w1 "select bridge_pid from records where sandbox='$B'")"
serving "B's bridge relaunched (activation 2) right after, not behind A's report" "$B" 2
check "... and space-control was stopped all along" ctl_stopped
S=$C CAP=$CAPC
is "C, untouched, is served while the control plane is stopped" \
    "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

kill -CONT "$CTL"
# the queued reports go out: the control plane learns activation 2 of B
i=0
while [ $i -lt 60 ]; do
	CAP=$(route "$B")
	S=$B
	st=$(napi POST exec --data-binary '{"argv":["true"]}')
	[ "$st" = 200 ] && break
	sleep 1; i=$((i + 1))
done
is "after SIGCONT a fresh capability for B (activation 2) is served" "$st" 200
check "no report was lost to the stop: the log names no dropped report" \
    sh -c "! grep -q 'reports waiting' '$T/mgr_w1.log'"
done_testing
