#!/bin/sh
# Named snapshots are kept until their owner deletes them, also after
# their sandbox is killed, so a count per sandbox (--max-named-snapshots)
# does not bound what a principal keeps: it could make sandboxes, snapshot
# each, kill them and go on. space-control also bounds the bytes of a
# principal's named snapshots over all its sandboxes, killed ones too
# (--max-named-snapshot-mb, default 65536): a snapshot asked for when they
# hold as much is 429 quota_exceeded until some are deleted. From the
# tenant's side: the bound holds across sandboxes and kills, a deletion
# makes room again, another principal is not affected, and what failed or
# is automatic does not count. Workers simulated with curl.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
CTL_FLAGS="--heartbeat-timeout 3600 --max-named-snapshot-mb 3"
K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
post /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":20}' >/dev/null
sim_fetch w1 "$W1" 0
code() { curl -s -o "$T/body" -w '%{http_code}' "$@"; }

# sandbox KEY: a sandbox of KEY on w1, serving; its id printed
sandbox() {
	post /v1/sandboxes "$1" '{"worker":"w1"}' >/dev/null
	_id=$(jget id)
	sim_fetch w1 "$W1" >/dev/null
	sim_report w1 "$W1" serving >/dev/null
	echo "$_id"
}
# nsnap KEY SBX NAME MIB [error]: a named snapshot of SBX asked for; when
# taken (202), the worker reports it ready with MIB MiB (or failed); the
# answer's status printed, its id in $T/sid
nsnap() {
	_nc=$(post "/v1/sandboxes/$2/snapshots" "$1" "{\"name\":\"$3\"}")
	if [ "$_nc" = 202 ]; then
		jget snapshot.id >"$T/sid"
		sim_fetch w1 "$W1" >/dev/null
		if [ -n "${5:-}" ]; then
			_b="{\"snapshot_id\":\"$(cat "$T/sid")\",\"sandbox\":\"$2\",\"generation\":1,\"error\":\"disk\"}"
		else
			_b="{\"snapshot_id\":\"$(cat "$T/sid")\",\"sandbox\":\"$2\",\"generation\":1,\"digest\":\"$(rdigest)\",\"size\":$(($4 * 1048576))}"
		fi
		[ "$(post /v1/workers/w1/snapshots "$W1" "$_b")" = 200 ] || echo "# report refused: $(cat "$T/body")" >&2
	fi
	echo "$_nc"
}

A=$(sandbox "$K")
is "a named snapshot of 2 MiB" "$(nsnap "$K" "$A" one 2)" 202
is "a failed one does not count" "$(nsnap "$K" "$A" bad 0 fail)" 202
is "a second, of 2 MiB (1 MiB held below the bound of 3 when asked)" "$(nsnap "$K" "$A" two 2)" 202
is "a third: 4 MiB held, the bound is 3 -> 429" "$(nsnap "$K" "$A" three 1)" 429
check "... quota_exceeded, saying which bound and what to do" \
	grep -q 'quota_exceeded.*max-named-snapshot-mb.*delete some first' "$T/body"
is "... nothing of it was recorded" "$(sql "SELECT COUNT(*) FROM snapshots WHERE name = 'three'")" 0

B=$(sandbox "$K")
is "another sandbox of the same principal -> 429 too" "$(nsnap "$K" "$B" other 1)" 429
curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$A"
C=$(sandbox "$K")
is "killing the sandbox does not make room (its named snapshots stay)" "$(nsnap "$K" "$C" again 1)" 429

X=$(sandbox "$KB")
is "another principal is not affected" "$(nsnap "$KB" "$X" theirs 1)" 202

ONE=$(sql "SELECT id FROM snapshots WHERE name = 'one'")
is "the owner deletes one of the killed sandbox's -> 200" \
	"$(code -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$A/snapshots/$ONE")" 200
is "... then there is room again (2 MiB held)" "$(nsnap "$K" "$C" again 1)" 202
is "... until the bound: 3 MiB held -> 429" "$(nsnap "$K" "$B" more 1)" 429
is "the daemon still answers" "$(get /v1/sandboxes "$K")" 200
kill "$PID"; wait "$PID"; RC=$?; PID=
is "it stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"

done_testing
