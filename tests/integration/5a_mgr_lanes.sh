#!/bin/sh
# The work of one sandbox does not hold up another's: sbx-manager runs each
# sandbox's assignments (and its relaunches) in a lane of its own, and no
# lock is held across a spawn, a stop, a restore or an archive. Sandbox A
# is paused, then resumed from the worker's archive cache, whose archive was swapped
# for a named pipe: A's restore blocks in open() (a stalled cache). While
# it is blocked, B is created, installed and served, and B's bridge,
# killed, is relaunched. Then the pipe is opened from the other end and
# given the archive's bytes: A's restore reads them as a stream (the
# one-pass restore checks the digest at the end) and A serves.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP=$(free_port)
NU=http://127.0.0.1:$NP
FEEDER=
platform_on_cleanup() { [ -n "$FEEDER" ] && kill "$FEEDER" 2>/dev/null; true; }
rec() { wsql w1 "select generation, state from records where sandbox='$1'"; }
# wait_rec SANDBOX WANT SECONDS
wait_rec() {
	_i=0
	while [ "$(rec "$1")" != "$2" ] && [ $_i -lt $(($3 * 10)) ]; do sleep 0.1; _i=$((_i + 1)); done
	[ "$(rec "$1")" = "$2" ]
}

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "create A" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
check "A running" wait_state "$A" running 30
is "pause A -> 202" "$(cpost "/v1/sandboxes/$A/pause" '{}')" 202
check "A paused" wait_state "$A" paused 30
P=$(jget snapshot "$T/sbx")
check "A's archive ($P) is in the store" test -f "$T/w1/snapshots/$P.snap"

# the store stalls: the archive's name now opens a pipe nobody writes
mv "$T/w1/snapshots/$P.snap" "$T/keep.snap"
mkfifo "$T/w1/snapshots/$P.snap"
is "resume A -> 202" "$(cpost "/v1/sandboxes/$A/resume" '{}')" 202
check "A's generation 2 is committed starting (its restore began)" wait_rec "$A" "2|starting" 30

is "create B while A's restore is blocked" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "B running" wait_state "$B" running 30
is "... while A is still restoring" "$(rec "$A")" "2|starting"
S=$B CAP=$(route "$B")
is "B serves exec" "$(napi POST exec --data-binary '{"argv":["sh","-c","echo b"]}')" 200
is "... its output" "$(jget stdout)" b
BP=$(wsql w1 "select bridge_pid from records where sandbox='$B'")
[ -n "$BP" ] && kill -9 "$BP"
check "B's bridge, killed, is relaunched (activation 2)" \
    sh -c "i=0; while [ \"\$(sqlite3 -cmd '.timeout 5000' '$T/w1/records.db' \"select activation, state from records where sandbox='$B'\")\" != '2|serving' ] && [ \$i -lt 300 ]; do sleep 0.1; i=\$((i + 1)); done; [ \$i -lt 300 ]"
is "... while A is still restoring" "$(rec "$A")" "2|starting"

# the other end of the pipe: A's restore reads the archive as a stream
cat "$T/keep.snap" >"$T/w1/snapshots/$P.snap" 2>/dev/null &
FEEDER=$!
check "A's install ends serving once the pipe opens" wait_rec "$A" "2|serving" 30
check "... reported to the control plane" wait_state "$A" running 30
S=$A CAP=$(route "$A")
is "A serves exec after its restore" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
kill "$FEEDER" 2>/dev/null; FEEDER=
S=$B CAP=$(route "$B")
is "B still serves" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
check "sbx-manager kept running" alive "$M1"
done_testing
