#!/bin/sh
# space-control: the sandboxes of a worker that stays lost are placed
# elsewhere (docs/control-plane.md, "Lost workers"). Workers simulated with
# curl; two daemons A and B on one store, both sweeping, so only one may act.
#  - w1 misses heartbeats and is marked lost, then heartbeats within the
#    grace: it keeps its executions;
#  - w1 stays silent past the heartbeat timeout and the grace: a sandbox
#    with a snapshot is placed on another worker (next generation,
#    restoring that snapshot), one still creating is placed from its
#    template, one that served without a snapshot fails (not resumable),
#    one pinned to w1 fails and resumes elsewhere from its snapshot;
#  - the lost executions are failed ("worker lost") with a retire
#    assignment in the same commit; each sandbox failed over once (one
#    audit row, no generation twice, never two active executions);
#  - w1 comes back (same incarnation): its long-poll delivers the retires,
#    its report of serving for a lost execution is refused, no capability
#    names it.
# SPACE_TEST_STORE=pg: the same on PostgreSQL (2p_control_pg.sh runs it).
# ci: once
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
PB=$(free_port)
while [ "$PB" = "$PORT" ]; do PB=$(free_port); done
PIDB=
# (a heartbeat every 0.3 s: a loaded machine may still delay a few)
HB=6
GRACE=12
cleanup_more() {
	rm -f "$T"/hb_*
	[ -n "$PIDB" ] && kill "$PIDB" 2>/dev/null && wait "$PIDB" 2>/dev/null
	ctl_cleanup
}
trap cleanup_more EXIT
trap 'exit 1' INT TERM

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
for w in w1 w2 w3; do
	space-control worker add $w --data-dir "$D" >"$T/cred_$w" 2>>"$T/log"
done
cred() { cat "$T/cred_$1"; }
ctl_start --heartbeat-timeout $HB --lost-grace $GRACE --lease-ttl 5
check "daemon A started" true
space-control --data-dir "$D" --listen "127.0.0.1:$PB" --heartbeat-timeout $HB \
	--lost-grace $GRACE --lease-ttl 5 2>>"$T/logB" &
PIDB=$!
check "daemon B started on the same store" wait_http "http://127.0.0.1:$PB/healthz" 10

reg() {
	post "/v1/workers/$1/register" "$(cred "$1")" \
		"{\"incarnation\":\"inc_$1\",\"endpoint\":\"http://127.0.0.1:9$2\",\"capacity\":10}"
}
# a worker's heartbeats, every 0.3 s while $T/hb_W exists
beat() {
	touch "$T/hb_$1"
	(c=$(cred "$1")
	while [ -f "$T/hb_$1" ]; do
		curl -s -o /dev/null -X POST -H "Authorization: Bearer $c" \
			--data-binary "{\"incarnation\":\"inc_$1\"}" "$U/v1/workers/$1/heartbeat"
		sleep 0.3
	done) &
}
quiet() { rm -f "$T/hb_$1"; sleep 0.5; }
# until_sql SECONDS QUERY WANT: until the store answers WANT, bounded
until_sql() {
	_n=$(($1 * 10))
	while [ "$_n" -gt 0 ]; do [ "$(sql "$2")" = "$3" ] && return 0; sleep 0.1; _n=$((_n - 1)); done
	return 1
}
wstate() { sql "SELECT state FROM workers WHERE id='$1'"; }
state() { get "/v1/sandboxes/$1" "$K" >/dev/null; jget state; }
cur() { get "/v1/sandboxes/$1" "$K" >/dev/null; echo "$(jget execution.generation) $(jget execution.worker) $(jget execution.state)"; }
# report STATE on the execution of SANDBOX that W's last fetch named
report_on() {
	post "/v1/workers/$1/status" "$(cred "$1")" "$(python3 -c 'import json,sys
for a in json.load(open(sys.argv[1]))["assignments"]:
    if a["identity"]["sandbox"] == sys.argv[2]: i = a["identity"]
print(json.dumps({"identity": i, "state": sys.argv[3]}))' "$T/a_$1" "$2" "$3")"
}
# what W's last fetch asked for SANDBOX: "action gN snapshot"
asked() {
	python3 -c 'import json,sys
for a in json.load(open(sys.argv[1]))["assignments"]:
    if a["identity"]["sandbox"] == sys.argv[2]:
        print(a["action"], "g%d" % a["identity"]["generation"], json.dumps(a["spec"].get("snapshot")))' \
		"$T/a_$1" "$2"
}
create() { post /v1/sandboxes "$K" "${1:-{\}}" >/dev/null; jget id; }
serve() { sim_fetch "$1" "$(cred "$1")" 5; sim_report "$1" "$(cred "$1")" serving >/dev/null; }
pause_resume() { # SANDBOX: pause with a digest, resume on w1; the digest
	post "/v1/sandboxes/$1/pause" "$K" '{}' >/dev/null
	sim_fetch w1 "$(cred w1)" 5
	_d=$(rdigest)
	sim_report w1 "$(cred w1)" retired "$_d" >/dev/null
	until_sql 30 "SELECT state FROM sandboxes WHERE id='$1'" paused
	_i=0
	while [ "$(post "/v1/sandboxes/$1/resume" "$K" '{}')" != 202 ] && [ $_i -lt 100 ]; do
		sleep 0.2; _i=$((_i + 1))
	done
	serve w1
	echo "$_d"
}

# only w1 at first: every sandbox is placed there
is "w1 registers" "$(reg w1 1)" 200
beat w1
S1=$(create)
serve w1
D1=$(pause_resume "$S1")
is "S1 (snapshot D1) serves generation 2 on w1" "$(state "$S1") $(cur "$S1")" "running 2 w1 serving"
S2=$(create)
serve w1
is "S2 (no snapshot) serves generation 1 on w1" "$(state "$S2") $(cur "$S2")" "running 1 w1 serving"
S3=$(create '{"worker":"w1"}')
serve w1
D3=$(pause_resume "$S3")
is "S3 (pinned to w1, snapshot D3) serves generation 2 on w1" "$(state "$S3") $(cur "$S3")" "running 2 w1 serving"
S4=$(create)
sim_fetch w1 "$(cred w1)" 5
is "S4 is still creating on w1" "$(state "$S4") $(cur "$S4")" "creating 1 w1 pending"
is "w2 registers" "$(reg w2 2)" 200
is "w3 registers" "$(reg w3 3)" 200
beat w2
beat w3

# ---- lost, then back within the grace ----
quiet w1
check "w1 silent: marked lost after the heartbeat timeout" \
	until_sql 20 "SELECT state FROM workers WHERE id='w1'" lost
beat w1
check "w1 heartbeats again within the grace: live" \
	until_sql 5 "SELECT state FROM workers WHERE id='w1'" live
is "... and kept its executions (no failover)" \
	"$(sql "SELECT COUNT(*) FROM audit WHERE action='sandbox.failover'") $(cur "$S1")" "0 2 w1 serving"

# ---- lost for good ----
quiet w1
check "w1 stays silent: its four sandboxes are failed over" \
	until_sql 40 "SELECT COUNT(*) FROM audit WHERE action='sandbox.failover'" 4
is "w1 is lost" "$(wstate w1)" lost
is "the lost executions failed with 'worker lost'" \
	"$(sql "SELECT COUNT(*) FROM executions WHERE worker='w1' AND state='failed' AND error='worker lost'")" 4
is "nothing of w1 is active" \
	"$(sql "SELECT COUNT(*) FROM executions WHERE worker='w1' AND state IN ('pending','starting','serving')")" 0
is "each sandbox failed over once (one audit row each, daemons A and B both sweeping)" \
	"$(sql "SELECT COUNT(DISTINCT target) FROM audit WHERE action='sandbox.failover'")" 4
is "never two active executions of a sandbox" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox FROM executions WHERE state IN ('pending','starting','serving') GROUP BY sandbox HAVING COUNT(*) > 1) x")" 0
is "no generation twice, none skipped" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox FROM executions GROUP BY sandbox HAVING MAX(generation) <> COUNT(*)) x")" 0
is "leases released" "$(sql "SELECT COUNT(*) FROM sandboxes WHERE lease_owner IS NOT NULL")" 0

# S1: generation 3 on another worker, restoring D1
set -- $(cur "$S1")
G1=$1 W=$2
is "S1: generation 3, pending, creating" "$(state "$S1") $G1 $3" "creating 3 pending"
check "... on w2 or w3" test "$W" = w2 -o "$W" = w3
is "routes while it starts -> 503" "$(post "/v1/sandboxes/$S1/routes" "$K" '{"access":["exec"]}')" 503
sim_fetch "$W" "$(cred "$W")" 5
is "$W is asked to install generation 3 restoring D1" "$(asked "$W" "$S1")" "install g3 \"$D1\""
is "$W reports it serving" "$(report_on "$W" "$S1" serving)" 200
is "S1 runs again" "$(state "$S1")" running
is "a route names generation 3 on $W" \
	"$(post "/v1/sandboxes/$S1/routes" "$K" '{"access":["exec"]}') $(jget route.generation) $(jget route.worker)" "200 3 $W"

# S4: never served, placed again from its template
set -- $(cur "$S4")
is "S4: generation 2, creating, elsewhere" "$(state "$S4") $1 $3" "creating 2 pending"
sim_fetch "$2" "$(cred "$2")" 5
is "... installed from its template (no snapshot)" "$(asked "$2" "$S4")" "install g2 null"

# S2: served, nothing archived: failed, not resumable
is "S2 failed" "$(state "$S2") $(cur "$S2")" "failed 1 w1 failed"
is "... a resume is refused (nothing to resume from)" "$(post "/v1/sandboxes/$S2/resume" "$K" '{}')" 409

# S3: pinned to the lost worker: failed, resumable from D3 elsewhere
is "S3 (pinned to w1) failed" "$(state "$S3") $(cur "$S3")" "failed 2 w1 failed"
is "... resumes on w3 -> 202" "$(post "/v1/sandboxes/$S3/resume" "$K" '{"worker":"w3"}')" 202
sim_fetch w3 "$(cred w3)" 5
is "... w3 installs generation 3 restoring D3" "$(asked w3 "$S3")" "install g3 \"$D3\""
report_on w3 "$S3" serving >/dev/null
is "... S3 runs on w3" "$(state "$S3") $(cur "$S3")" "running 3 w3 serving"

check "metrics count the failovers (2 placed, 2 failed)" sh -c \
	"curl -s '$U/metrics' http://127.0.0.1:$PB/metrics | grep -E '^space_control_failovers_total' | \
	awk '{ n[\$1] += \$2 } END { exit !(n[\"space_control_failovers_total{result=\\\"placed\\\"}\"] == 2 && n[\"space_control_failovers_total{result=\\\"failed\\\"}\"] == 2) }'"

# ---- w1 comes back with the same incarnation ----
is "w1 heartbeats again (same incarnation) -> 200" \
	"$(post /v1/workers/w1/heartbeat "$(cred w1)" '{"incarnation":"inc_w1"}')" 200
sim_fetch w1 "$(cred w1)" 5
is "its long-poll delivers the retire of S1's lost generation (no archive)" "$(asked w1 "$S1")" "retire g2 false"
check "... and the spec says snapshot false" python3 -c 'import json,sys
a=[a for a in json.load(open(sys.argv[1]))["assignments"] if a["identity"]["sandbox"] == sys.argv[2]][-1]
sys.exit(a["spec"] != {"snapshot": False})' "$T/a_w1" "$S1"
is "... and of the other three" "$(asked w1 "$S2" | cut -c1-6) $(asked w1 "$S3" | cut -c1-6) $(asked w1 "$S4" | cut -c1-6)" "retire retire retire"
is "w1 reporting S1's lost generation serving -> 409" "$(report_on w1 "$S1" serving)" 409
is "w1 reporting it retired -> 200, the record keeps 'worker lost'" \
	"$(report_on w1 "$S1" retired) $(sql "SELECT state || ' ' || error FROM executions WHERE sandbox='$S1' AND generation=2")" \
	"200 failed worker lost"
is "S1 still runs generation 3 on $W" "$(state "$S1") $(cur "$S1")" "running 3 $W serving"
is "store integrity" "$(store_integrity)" ok
done_testing
