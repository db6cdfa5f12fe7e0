#!/bin/sh
# space-control: refusals counted per sandbox (docs/console.md "Refused
# routes"). Workers send the counts since their last heartbeat with the
# next one; the store adds them to the sandboxes the reporting worker ran
# an execution of, nothing else (another worker's sandbox, an id that
# exists nowhere); GET /v1/sandboxes/{id} shows the sums to the owner only;
# a malformed "refusals" is refused whole and adds nothing; the sums
# survive a restart. 2p_control_pg.sh runs it on PostgreSQL.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
K2=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start --heartbeat-timeout 3600
check "daemon started" true
reg() { post "/v1/workers/$1/register" "$2" "{\"incarnation\":\"inc$1\",\"endpoint\":\"http://127.0.0.1:9$3\",\"capacity\":10}"; }
is "w1 registers" "$(reg w1 "$W1" 1)" 200
is "w2 registers" "$(reg w2 "$W2" 2)" 200
# hb WORKER CRED REFUSALS-JSON: a heartbeat carrying them
hb() { post "/v1/workers/$1/heartbeat" "$2" "{\"incarnation\":\"inc$1\",\"refusals\":$3}"; }
counts() { # KEY SANDBOX: "refresh_route deny expired", or the status
	c=$(get "/v1/sandboxes/$2" "$1")
	[ "$c" = 200 ] || { echo "$c"; return; }
	python3 -c 'import json, sys
r = json.load(open(sys.argv[1])).get("refusals", {})
print(r.get("refresh_route"), r.get("deny"), r.get("expired"))' "$T/body"
}

is "alice creates a sandbox" "$(post /v1/sandboxes "$K" '{}')" 201
S=$(jget id)
is "bob creates one" "$(post /v1/sandboxes "$K2" '{}')" 201
S2=$(jget id)
WS=$(sql "SELECT worker FROM executions WHERE sandbox = '$S'")
if [ "$WS" = w1 ]; then WC=$W1 WO=w2 WOC=$W2; else WC=$W2 WO=w1 WOC=$W1; fi
diag "$S runs on $WS"
is "none counted at first" "$(counts "$K" "$S")" "0 0 0"

is "its worker reports refusals for it, for an id that exists nowhere" \
	"$(hb "$WS" "$WC" "[{\"sandbox\":\"$S\",\"refresh_route\":2,\"deny\":1},{\"sandbox\":\"made_up_1\",\"deny\":5}]")" 200
is "the owner reads them" "$(counts "$K" "$S")" "2 1 0"
is "another tenant cannot (404)" "$(counts "$K2" "$S")" 404
is "the made-up id got no row" "$(sql "SELECT COUNT(*) FROM sandbox_refusals WHERE sandbox = 'made_up_1'")" 0
is "the next heartbeat adds to them" "$(hb "$WS" "$WC" "[{\"sandbox\":\"$S\",\"refresh_route\":1,\"expired\":3}]")" 200
is "summed" "$(counts "$K" "$S")" "3 1 3"
is "a worker that never ran it reports for it: accepted, not counted" \
	"$(hb "$WO" "$WOC" "[{\"sandbox\":\"$S\",\"deny\":100}]")" 200
is "still the same" "$(counts "$K" "$S")" "3 1 3"
is "bob's sandbox counts none" "$(counts "$K2" "$S2")" "0 0 0"

# a malformed report is refused whole
n=0 bad=
for body in '{}' '[1]' '"x"' "[{\"sandbox\":\"$S\",\"deny\":-1}]" "[{\"sandbox\":\"$S\",\"deny\":1.5}]" \
	"[{\"sandbox\":\"a.b\",\"deny\":1}]" "[{\"deny\":1}]" "[{\"sandbox\":\"$S\",\"deny\":1,\"x\":1}]" \
	"[{\"sandbox\":\"$S\",\"deny\":2199023255553}]" \
	"[$(seq 1 65 | sed "s/.*/{\"sandbox\":\"$S\",\"deny\":1}/" | paste -sd,)]"; do
	c=$(hb "$WS" "$WC" "$body")
	[ "$c" = 400 ] || bad="$bad $c:$body"
	n=$((n + 1))
done
is "$n malformed refusal reports answered 400" "${bad:-none}" none
is "and added nothing" "$(counts "$K" "$S")" "3 1 3"
is "64 entries are accepted" \
	"$(hb "$WS" "$WC" "[$(seq 1 64 | sed "s/.*/{\"sandbox\":\"$S\",\"deny\":1}/" | paste -sd,)]")" 200
is "each counted" "$(counts "$K" "$S")" "3 65 3"
is "a heartbeat of a stale incarnation adds nothing (409)" \
	"$(post "/v1/workers/$WS/heartbeat" "$WC" "{\"incarnation\":\"old\",\"refusals\":[{\"sandbox\":\"$S\",\"deny\":9}]}")" 409
is "unchanged" "$(counts "$K" "$S")" "3 65 3"
is "the list does not carry them" "$(get /v1/sandboxes "$K" >/dev/null; jget sandboxes.0.refusals)" ""
# a counter driven to the integer's bound (by a worker that once ran the
# sandbox, reporting the most it may, many times) stays there: the next
# report of any worker is still taken
sql "UPDATE sandbox_refusals SET deny = 9223372036854775807 - 1099511627776 WHERE sandbox = '$S'" >/dev/null
is "a report that reaches the bound" "$(hb "$WS" "$WC" "[{\"sandbox\":\"$S\",\"deny\":1099511627776}]")" 200
is "one past it: still taken" "$(hb "$WS" "$WC" "[{\"sandbox\":\"$S\",\"deny\":1},{\"sandbox\":\"$S\",\"refresh_route\":1}]")" 200
is "the count stays at the bound, an integer" "$(counts "$K" "$S")" "4 9223372036854775807 3"
sql "UPDATE sandbox_refusals SET deny = 65 WHERE sandbox = '$S'" >/dev/null
sql "UPDATE sandbox_refusals SET refresh_route = 3 WHERE sandbox = '$S'" >/dev/null

ctl_stop
ctl_start --heartbeat-timeout 3600
is "they survive a restart" "$(counts "$K" "$S")" "3 65 3"
done_testing
