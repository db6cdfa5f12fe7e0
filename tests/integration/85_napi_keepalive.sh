#!/bin/sh
# A stream whose client vanished is closed, and its place freed
# (node-api --tcp-keepalive; libspace/util.c tcp_keepalive; docs/protocol.md
# "Streams"). In the layout of simulated hosts (tests/lib_hosts.sh): a
# client on a host of its own opens a stream on each of two workers, then
# its host disappears without a word (the link cut first, so no FIN and no
# RST ever leaves it). An idle stream sends nothing and reads nothing, so
# without keepalive node-api would hold it, and with it one of the
# sandbox's 64 operations, for ever: w2's node-api, run with
# --tcp-keepalive 0, still holds its stream, w1's (--tcp-keepalive 2) has
# closed it within seconds and says why. A client that is alive but quiet,
# even stopped (SIGSTOP, as by Ctrl-Z) for longer than that, keeps its
# stream: its kernel answers the probes.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
SPACE_TEST_HOSTS=1
export SPACE_TEST_HOSTS
. "$SPACE_TOP/tests/lib_platform.sh"

PY=/usr/bin/python3
PROBE="$PY $SPACE_TOP/tests/tools/ws_probe.py"
platform_init
NP1=$(free_port) NP2=$(free_port)
A1=$(host_addr w1) A2=$(host_addr w2)
q() { $PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' "$1"; }
# streams_open ADDR:PORT: node-api's gauge of open streams
streams_open() { curl -s -m 5 "http://$1/metrics" | awk '$1 == "space_nodeapi_streams_open" { print $2 }'; }
open_is() { [ "$(streams_open "$1")" = "$2" ]; }
HOLDERS=
platform_on_cleanup() { for p in $HOLDERS; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; }

check "space-control up on its host" start_ctl
NAPI_FLAGS="--tcp-keepalive 2"
check "worker w1 up, node-api with --tcp-keepalive 2" add_worker 1 w1 "$NP1"
NAPI_FLAGS="--tcp-keepalive 0"
check "worker w2 up, node-api with --tcp-keepalive 0" add_worker 2 w2 "$NP2"
NAPI_FLAGS=

is "create S1 on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S1=$(jget id)
is "create S2 on w2" "$(cpost /v1/sandboxes '{"worker":"w2"}')" 201
S2=$(jget id)
check "S1 running" wait_state "$S1" running 30
check "S2 running" wait_state "$S2" running 30
CAP1=$(route "$S1" '"exec"')
CAP2=$(route "$S2" '"exec"')
LONG=$(q '{"argv":["/bin/sh","-c","echo started; exec sleep 600"]}')

# the client's host, and a stream from it to each worker
check "the client's host is up" host_up cl
$(host_ns cl) $PROBE hold "ws://$A1:$NP1/v1/sandboxes/$S1/processes/stream?args=$LONG" "$CAP1" 600 \
    >"$T/cl1.out" 2>&1 &
C1=$!
$(host_ns cl) $PROBE hold "ws://$A2:$NP2/v1/sandboxes/$S2/processes/stream?args=$LONG" "$CAP2" 600 \
    >"$T/cl2.out" 2>&1 &
C2=$!
started() { grep -q "out stdout b'started" "$1" 2>/dev/null; }
check "the stream to w1 carries its process's output" eventually 30 started "$T/cl1.out"
check "the stream to w2 too" eventually 30 started "$T/cl2.out"
is "w1's node-api holds one stream" "$(streams_open "$A1:$NP1")" 1
is "w2's node-api holds one stream" "$(streams_open "$A2:$NP2")" 1

# the host vanishes: its link goes down first, so nothing it would send
# on its way out (a FIN when its processes are killed) reaches anyone
ip link set h-cl down
# (its namespace and veth go when the kernel gets to them)
host_kill cl || true
both_gone() { ! alive "$C1" && ! alive "$C2"; }
check "the client's processes are gone" eventually 10 both_gone
check "w1 closed the stream of the vanished client (keepalive)" eventually 30 open_is "$A1:$NP1" 0
check "... and says so in its log" grep -q "the client's connection timed out" "$T/napi_w1.log"
sleep 5
is "w2, without keepalive, still holds it (what w1 no longer does)" "$(streams_open "$A2:$NP2")" 1

# a client that is alive but stopped for longer than w1's keepalive
SOON=$(q '{"argv":["/bin/sh","-c","sleep 9; echo alive"]}')
$PROBE hold "ws://$A1:$NP1/v1/sandboxes/$S1/processes/stream?args=$SOON" "$CAP1" 60 >"$T/live.out" 2>&1 &
LIVE=$!
HOLDERS="$LIVE"
first() { grep -q "^first " "$T/live.out" 2>/dev/null; }
check "a second client's stream opened on w1" eventually 30 first
kill -STOP "$LIVE"
sleep 7
is "w1 still holds the stopped client's stream" "$(streams_open "$A1:$NP1")" 1
kill -CONT "$LIVE"
wait "$LIVE"
HOLDERS=
is "the stopped client got its process's output and exit when it went on" \
    "$(grep -v '^first ' "$T/live.out")" "out stdout b'alive\\n'
exit 0 0 0
close 1000"
check "no sanitizer report in node-api's logs" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/napi_w1.log' '$T/napi_w2.log'"
done_testing
