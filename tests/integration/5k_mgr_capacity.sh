#!/bin/sh
# sbx-manager --capacity above 256 (docs/worker.md section 8): a worker
# claims as many consecutive host uid windows of 256 slots as its capacity
# needs (at most 4: --capacity 1..1024), records them in D/uid-window as
# "FIRST COUNT", keeps them when it starts again with a smaller capacity,
# grows in place only when the next windows are free (never moving the uid
# bases of its records), and raises its soft RLIMIT_NOFILE to the hard one.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

REG=/var/lib/space/uid-windows
platform_init
NP=$(free_port)
register_worker w1
check "space-control up" start_ctl

for bad in 0 1025 4294967297 x; do
	"$BIN/sbx-manager" --data-dir "$T/bad" --control "$CU" --worker-id w1 \
	    --credential-file "$T/cred_w1" --root-key "$ROOT" --endpoint "http://127.0.0.1:$NP" \
	    --capacity "$bad" >/dev/null 2>&1
	is "--capacity $bad is refused (exit 2)" "$?" 2
done

# the worker's data directory holds window X (as an older sbx-manager, or
# one with --capacity 256 or less, left it) and another directory holds
# X+1: made under the registry's lock on four free windows (other tests
# claim windows too); both entries are stale once $T is removed
mkdir -p "$T/w1" "$T/other"
dir=$(realpath "$T/w1")
odir=$(realpath "$T/other")
X=$(flock "$REG" sh -c '
	x=0
	while [ $x -le 250 ]; do
		if [ ! -e "$1/$x" ] && [ ! -e "$1/$((x + 1))" ] && [ ! -e "$1/$((x + 2))" ] &&
		    [ ! -e "$1/$((x + 3))" ]; then
			printf %s "$2" >"$1/$x"; echo "$x" >"$2/uid-window"
			printf %s "$3" >"$1/$((x + 1))"; echo "$((x + 1))" >"$3/uid-window"
			echo "$x"; exit 0
		fi
		x=$((x + 1))
	done
	exit 1' sh "$REG" "$dir" "$odir")
check "four free host uid windows found" test -n "$X"

timeout 20 "$BIN/sbx-manager" --data-dir "$T/w1" --control "$CU" --worker-id w1 \
    --credential-file "$T/cred_w1" --root-key "$ROOT" --endpoint "http://127.0.0.1:$NP" \
    --capacity 600 --api-group nogroup >/dev/null 2>"$T/grow.log"
is "--capacity 600 with window X+1 taken: sbx-manager stops (exit 1)" "$?" 1
check "and says which window is taken" grep -q "window $((X + 1)) is taken" "$T/grow.log"
is "its window is unchanged" "$(cat "$T/w1/uid-window")" "$X"
is "the other directory's window is left to it" "$(cat "$REG/$((X + 1))")" "$odir"
rm -f "$REG/$((X + 1))"

# a low soft limit of descriptors, as a service manager's default would be
hard=$(ulimit -Hn)
if [ "$hard" != unlimited ] && [ "$hard" -gt 400 ]; then
	ulimit -Sn 300
fi
MGR_CAPACITY=600
check "window X+1 free: sbx-manager with --capacity 600 up" start_mgr 1 w1 "$NP"
is "it grew in place to three windows, recorded as 'X 3'" "$(cat "$T/w1/uid-window")" "$X 3"
own=0
for n in "$X" $((X + 1)) $((X + 2)); do
	[ "$(cat "$REG/$n" 2>/dev/null)" = "$dir" ] && own=$((own + 1))
done
is "the registry names the data directory for each of the three" "$own" 3
soft=$(awk '/^Max open files/ { print $4 }' "/proc/$M1/limits")
hlim=$(awk '/^Max open files/ { print $5 }' "/proc/$M1/limits")
is "sbx-manager raised its soft RLIMIT_NOFILE to the hard limit" "$soft" "$hlim"
kill "$M1"; wait "$M1" 2>/dev/null

MGR_CAPACITY=16
check "started again with --capacity 16" start_mgr 1 w1 "$NP"
is "it keeps its three windows" "$(cat "$T/w1/uid-window")" "$X 3"
kill "$M1"; wait "$M1" 2>/dev/null

if [ ! -e "$REG/$((X + 3))" ]; then
	MGR_CAPACITY=1024
	check "--capacity 1024 (the most) grows to four windows" start_mgr 1 w1 "$NP"
	is "recorded as 'X 4'" "$(cat "$T/w1/uid-window")" "$X 4"
else
	diag "window X+3 was claimed by another test meanwhile; --capacity 1024 not checked"
fi
done_testing
