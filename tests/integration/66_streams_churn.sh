#!/bin/sh
# ci: once
# Stream churn: 50 open streams over 10 sandboxes on two workers, each a
# process printing sequence numbers, while 5 of the sandboxes move back and
# forth (two rounds): the streams of the moved ones close with 4409 having carried an
# unbroken prefix of their sequence, the others deliver every number in
# order and close 1000 when their process ends.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

PY=/usr/bin/python3
PROBE="$PY $SPACE_TOP/tests/tools/ws_probe.py"
platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
MGR_CAPACITY=12
# the 50 streams open at once from one address: more heads in flight than
# node-api's default per-address bound (16, the slowloris guard) allows
NAPI_FLAGS="--http-heads-per-ip 64"
N1P=$(free_port) N2P=$(free_port)
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$N1P"
check "worker w2 up" add_worker 2 w2 "$N2P"
T0=$(date +%s)
SB=""
for i in 1 2 3 4 5 6 7 8 9 10; do
	w=w$((i % 2 + 1))
	cpost /v1/sandboxes "{\"worker\":\"$w\"}" >/dev/null
	SB="$SB $(jget id)"
done
for s in $SB; do check "sandbox $s running" wait_state "$s" running 60; done
diag "sandboxes up after $(($(date +%s) - T0)) s"
set -- $SB
S=$1
ECHO=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' '{"argv":["/bin/true"]}')
# the first sandbox is on w2 (i % 2 + 1)
if [ "$($PROBE status "ws://127.0.0.1:$N2P/v1/sandboxes/$S/processes/stream?args=$ECHO" "$(route "$S" '"exec"')")" != 101 ]; then
	diag "this guest does not serve proc.start: the rest is not tested here"
	done_testing; exit
fi
MOVED="$1 $2 $3 $4 $5"
ARGS=$($PY -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]))' \
	'{"argv":["/bin/sh","-c","i=0; while [ $i -lt 400 ]; do echo $i; i=$((i+1)); sleep 0.1; done"]}')
: >"$T/streams"
# one capability per sandbox, shared by its streams (taken last, so that
# none nears its expiry on a loaded machine before the streams open)
for s in $SB; do
	cap= k=0        # asked again while the control plane says 503
	while [ -z "$cap" ] && [ $k -lt 50 ]; do
		cap=$(route "$s" '"exec"'); ep=$(jget endpoint); k=$((k + 1))
		[ -n "$cap" ] || sleep 0.2
	done
	echo "$s ws:${ep#http:} $cap" >>"$T/caps"
done
n=0
while [ $n -lt 50 ]; do
	while read -r s u cap; do
		[ $n -ge 50 ] && break
		echo "$s.$n $u/v1/sandboxes/$s/processes/stream?args=$ARGS $cap" >>"$T/streams"
		n=$((n + 1))
	done <"$T/caps"
done
$PROBE churn <"$T/streams" >"$T/churn" 2>"$T/churn.err" &
CH=$!
# every stream open before the first move (at most 60 s)
k=0; while [ "$(grep -c '^open ' "$T/churn.err")" -lt 50 ] && [ $k -lt 600 ]; do sleep 0.1; k=$((k + 1)); done
is "50 streams open before the moves" "$(grep -c '^open ' "$T/churn.err")" 50
other() { sbx "$1"; [ "$(jget execution.worker "$T/sbx")" = w1 ] && echo w2 || echo w1; }
for round in 1 2; do
	for s in $MOVED; do
		to=$(other "$s")
		is "round $round: move $s -> $to: 202" "$(cpost "/v1/sandboxes/$s/move" "{\"to\":\"$to\"}")" 202
	done
	for s in $MOVED; do check "round $round: $s serves again" wait_state "$s" running 60; done
done
diag "moves done after $(($(date +%s) - T0)) s"
wait $CH
diag "streams done after $(($(date +%s) - T0)) s"
sed 's/^/# /' "$T/churn"
for s in $SB; do
	case " $MOVED " in
	*" $s "*)
		is "every stream of moved $s closed 4409 with an unbroken prefix" \
		    "$(grep "^$s\." "$T/churn" | grep -vc 'close 4409 count [0-9]* inorder yes')" 0 ;;
	*)
		is "every stream of $s delivered 0..399 in order and closed 1000" \
		    "$(grep "^$s\." "$T/churn" | grep -vc 'close 1000 count 400 inorder yes')" 0 ;;
	esac
done
is "50 streams reported" "$(wc -l <"$T/churn")" 50
check "node-api w1 alive" alive "$N1"
check "sbx-manager w1 alive" alive "$M1"
done_testing
