#!/bin/sh
# space-control keeps --store-min-free-mb of its store's disk free: an
# upload (a snapshot archive, PUT or streamed, from a worker that is buggy
# or taken over) that would leave less is refused with 507 and leaves
# nothing behind, however many come, and the database on the same disk
# keeps taking writes. An upload that fits goes on to the usual checks.
# The data directory is a tmpfs of 64 MiB of the test's own, so the free
# space is the test's alone.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
. "$SPACE_TOP/tests/lib_simworker.sh"
mkdir -p "$D"
mount -t tmpfs -o size=64m,mode=0700 space-test "$D" || { not_ok "a tmpfs for the data directory"; exit 1; }
floor_cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	PID=
	umount "$D" 2>/dev/null
	ctl_cleanup
}
trap floor_cleanup EXIT
CTL_FLAGS="--heartbeat-timeout 3600 --store-min-free-mb 24"

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started, its data on a 64 MiB tmpfs" true
is "w1 registers" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":4}')" 200

free_mb() { df -m --output=avail "$D" | tail -1 | tr -d ' '; }
astream() {
	curl -s -o "$T/body" -w '%{http_code}' -X POST -H "Authorization: Bearer $W1" \
		-H 'Transfer-Encoding: chunked' -H 'Expect:' --data-binary @"$1" \
		"$U/v1/workers/w1/archives/stream"
}
aput() {
	curl -s -o "$T/body" -w '%{http_code}' -X PUT -H "Authorization: Bearer $W1" \
		-H 'Expect:' --data-binary @"$1" "$U/v1/workers/w1/archives/$2"
}
no_tmp() { ! ls -A "$D/archives" 2>/dev/null | grep -q tmp; }
FREE0=$(free_mb)
diag "free on the store's disk: $FREE0 MiB"
head -c $((48 << 20)) /dev/urandom >"$T/big"
head -c $((4 << 20)) /dev/urandom >"$T/small"

# the answer may come while the body still goes in, and the connection
# is closed after it: a client still sending may see the close first
c=$(astream "$T/big")
check "a streamed upload of 48 MiB that would leave under 24 MiB free -> 507 ($c)" test "$c" = 507 -o "$c" = 000
check "... nothing of it left behind" no_tmp
is "... the disk's space back" "$(free_mb)" "$FREE0"
c=$(aput "$T/big" "$(rdigest)")
check "the same as a PUT -> 507 ($c)" test "$c" = 507 -o "$c" = 000
check "... nothing of it left behind" no_tmp
i=0; while [ $i -lt 5 ]; do astream "$T/big" >/dev/null; i=$((i + 1)); done
check "five more: nothing of them left behind" no_tmp
is "... the disk's space back" "$(free_mb)" "$FREE0"
curl -s -o "$T/metrics" "$U/metrics"
check "the refusals counted by their route, as 507" \
	grep -q 'space_control_requests_total{route="/v1/workers/\*/archives/stream",status="507"}' "$T/metrics"
check "... and said in the log" grep -q "its disk would have less than 24 MiB free" "$T/log"

is "an upload that fits goes on to its checks (4 MiB of junk -> 400)" "$(astream "$T/small")" 400
is "... digest_mismatch" "$(jget error)" digest_mismatch
is "the database on the same disk still takes writes: create -> 201" \
	"$(req POST /v1/sandboxes "$K" '{"worker":"w1"}')" 201
S=$(jget id)
is "... and reads" "$(req GET "/v1/sandboxes/$S" "$K")" 200
check "space-control still runs" kill -0 "$PID"
done_testing
