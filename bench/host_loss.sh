#!/bin/sh
# The time from a host's loss to its sandboxes serving again
# (docs/control-plane.md "Lost workers"): bench/host_loss.sh BUILD_DIR.
# space-control and three workers, each on a simulated host of its own
# (tests/lib_hosts.sh: network namespaces on a bridge, nothing leaves the
# machine). Each round: a sandbox with a named snapshot; its worker's host
# is killed (every process in it, kill -9); the clock runs from the kill to
# the first exec that succeeds on the sandbox's new execution. Printed
# beside what the configuration alone costs (--heartbeat-timeout +
# --lost-grace: the floor); median over HOSTLOSS_ROUNDS (default 3). As
# Markdown in BUILD_DIR/bench/host_loss.md. Needs root (namespaces).
# HOSTLOSS_LOGS=DIR keeps the daemons' logs there (their timestamps show
# where a round's time went).
# (platform_init runs this script again in a namespace, without its
# arguments: the build directory goes in HOSTLOSS_BUILD)
B=${HOSTLOSS_BUILD:-${1:-build}}
top=$(cd "$(dirname "$0")/.." && pwd)
case "$B" in /*) ;; *) B=$top/$B ;; esac
SPACE_TOP=$top SPACE_BIN=$B/bin HOSTLOSS_BUILD=$B
export SPACE_TOP SPACE_BIN HOSTLOSS_BUILD
if [ "$(id -u)" != 0 ]; then
	echo "host_loss: needs root (network namespaces); skipped"
	exit 0
fi
. "$top/tests/lib.sh"
SPACE_TEST_HOSTS=1
export SPACE_TEST_HOSTS
PLATFORM_TEST=bench-host-loss
. "$top/tests/lib_platform.sh"
if [ -n "${HOSTLOSS_LOGS:-}" ]; then
	platform_on_cleanup() { mkdir -p "$HOSTLOSS_LOGS" && cp "$T"/*.log "$HOSTLOSS_LOGS/" 2>/dev/null; }
fi
platform_init
HB=${HOSTLOSS_HEARTBEAT:-10}
GRACE=${HOSTLOSS_GRACE:-2}
ROUNDS=${HOSTLOSS_ROUNDS:-3}
CTL_FLAGS="--heartbeat-timeout $HB --lost-grace $GRACE"
# each worker keeps its own snapshot cache (its data directory); archives
# travel to space-control and back over HTTP by digest
fail() { echo "host_loss: $*"; exit 1; }
start_ctl || fail "space-control did not start"
for n in 1 2 3; do
	eval "NP$n=$(free_port)"
	eval "add_worker $n w$n \$NP$n" || fail "worker w$n did not start"
done
load() { cut -d' ' -f1-3 /proc/loadavg; }
LOAD0=$(load)
now_ms() { echo $(($(date +%s%N) / 1000000)); }
: >"$T/times"
r=0
while [ $r -lt "$ROUNDS" ]; do
	r=$((r + 1))
	[ "$(cpost /v1/sandboxes '{}')" = 201 ] || fail "create: $(cat "$T/body")"
	S=$(jget id)
	wait_state "$S" running 60 || fail "sandbox $S did not run"
	[ "$(cpost "/v1/sandboxes/$S/snapshots" '{}')" = 202 ] || fail "snapshot: $(cat "$T/body")"
	i=0; while [ $i -lt 300 ]; do
		curl -s -o "$T/snaps" -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S/snapshots"
		[ "$(jget snapshots.0.state "$T/snaps")" = ready ] && break
		sleep 0.1; i=$((i + 1))
	done
	sbx "$S"
	W=$(jget execution.worker "$T/sbx")
	n=${W#w}
	t0=$(now_ms)
	host_kill "$W"
	eval "M$n= N$n="
	# serving again: the first exec that succeeds on the new execution.
	# Until the worker is marked lost its route still names the dead host,
	# whose address may answer nothing at all (a neighbour entry still
	# cached): each attempt gets 1 s to connect, or a SYN sent there
	# would hold the loop for curl's whole -m 30 and the round would
	# measure that instead of the failover
	ok=0
	while [ $(($(now_ms) - t0)) -lt 180000 ]; do
		CAP=$(route "$S")
		E=$(jget endpoint)
		if [ -n "$CAP" ] && [ "$(napi_at "$E" POST exec --connect-timeout 1 --data-binary '{"argv":["true"]}')" = 200 ]; then
			ok=1; break
		fi
		sleep 0.05
	done
	t1=$(now_ms)
	[ $ok = 1 ] || fail "round $r: $S did not serve again within 180 s"
	echo "$((t1 - t0))" >>"$T/times"
	echo "round $r: $W lost, $S serving again after $((t1 - t0)) ms"
	curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$CU/v1/sandboxes/$S"
	# the host comes back (the same data directory) for the next round
	eval "start_mgr $n $W \$NP$n && start_napi $n $W \$NP$n" || fail "$W did not come back"
	i=0; while [ $i -lt 300 ] && [ "$(csql "SELECT state FROM workers WHERE id='$W'")" != live ]; do
		sleep 0.1; i=$((i + 1))
	done
done
med=$(sort -n "$T/times" | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
all=$(sort -n "$T/times" | tr '\n' ' ')
floor=$(((HB + GRACE) * 1000))
echo "host loss -> serving again: median $med ms over $ROUNDS rounds ($all); heartbeat timeout $HB s + grace $GRACE s = $floor ms; load average $LOAD0 at the start, $(load) at the end"
mkdir -p "$B/bench"
{
	echo "| measure | median | runs (ms) | configuration |"
	echo "|---|---|---|---|"
	echo "| a host killed -> its sandbox serving again elsewhere (first exec) | $med ms | $all | --heartbeat-timeout $HB s + --lost-grace $GRACE s = $floor ms (the floor) |"
	echo
	echo "Load average $LOAD0 at the start, $(load) at the end."
} >"$B/bench/host_loss.md"
