#!/bin/sh
# space-control: two live daemons A and B on the same data directory, and
# the lifecycle lease handed between them (docs/control-plane.md,
# "Ownership lease and takeover"). Seen from the adversary's side:
#  1. A starts a move and is frozen (SIGSTOP) past its lease: B takes the
#     operation over and drives it to the end; the new execution is exactly
#     generation N+1 on the target, activation 1, and capabilities name it.
#  2. A wakes up (SIGCONT) and must take no step on that sandbox: no
#     execution, no assignment, no lease, no operation change; its reads
#     agree with B's.
#  3. A wakes up while B holds the lease of an unfinished operation: A
#     neither takes the lease back nor steps; a worker report sent to A
#     (not the holder) is recorded and B takes the step it allows. A third
#     daemon with a long lease, frozen before the step a report allows,
#     keeps A and B off while its lease runs; then one of them takes it,
#     once.
#  4. Concurrent pause/move/resume calls split across A and B: exactly one
#     202 per sandbox and round, the rest 409; generations stay unique and
#     increasing and never two executions of a sandbox are active at once.
# Workers are simulated with curl and a small python driver.
# A protocol test of leases and timing (the control plane's code paths run
# under the sanitizers in 25 and 26): once, in the plain build, and again on
# PostgreSQL in 2p.
# ci: once
# ci: beside
# SPACE_TEST_STORE=pg: the daemons share a PostgreSQL of the test's own
# (tests/lib_pg.sh) instead of the data directory's SQLite file.
. "$SPACE_TOP/tests/lib.sh"

if on_pg; then
	. "$SPACE_TOP/tests/lib_pg.sh"
	pg_start || { not_ok "PostgreSQL of the test started"; exit 1; }
	export SPACE_CONTROL_STORE="$PG_URL"
	DB=$PG_URL
fi
T=$(mktemp -d)
D=$T/data
PA=$(free_port)
PB=$(free_port)
while [ "$PB" = "$PA" ]; do PB=$(free_port); done
UA=http://127.0.0.1:$PA
UB=http://127.0.0.1:$PB
PIDA=
PIDB=
PIDC=
cleanup() {
	rc=$?
	for p in $PIDA $PIDB $PIDC; do kill -CONT "$p" 2>/dev/null; kill "$p" 2>/dev/null; done
	for p in $PIDA $PIDB $PIDC; do wait "$p" 2>/dev/null; done
	if [ "$_tap_fail" != 0 ] || [ "$rc" != 0 ]; then
		L=$(dirname "$SPACE_BIN")/test-logs/29-daemons
		rm -rf "$L"; mkdir -p "$L"; cp "$T"/*.log "$L/" 2>/dev/null
		cp "$D/control.db" "$L/" 2>/dev/null
		on_pg && cp "$PGT/server.log" "$L/pg_server.log" 2>/dev/null
		echo "# daemons' logs kept in $L"
	fi
	on_pg && pg_cleanup
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# req URL METHOD PATH CRED [BODY] -> status; body in $T/body (bounded: a
# request to a frozen daemon must not hang the test)
req() { curl -s -m 20 -o "$T/body" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $4" \
	${5:+--data-binary "$5"} "$1$3"; }
start() { # NAME PORT [FLAG...]
	n=$1 p=$2; shift 2
	# on PostgreSQL each daemon's sessions carry its name, for freeze
	SPACE_CONTROL_STORE=${DB:+$DB?application_name=space-control-$n} \
	space-control --data-dir "$D" --listen "127.0.0.1:$p" --heartbeat-timeout 3600 \
		--lease-ttl 2 "$@" 2>>"$T/$n.log" &
	eval "PID$n=\$!"
	wait_http "http://127.0.0.1:$p/healthz" 10
}
instance() { sed -n 's/.*instance \(ctl_[A-Za-z0-9_-]*\).*/\1/p' "$T/$1.log" | head -n 1; }
digest() { head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
# freeze NAME: SIGSTOP a daemon at a moment it holds no write lock of the
# store: one stopped inside a transaction would keep every other daemon
# from writing until it runs again (nobody can take a lock from a stopped
# process), which is not the takeover this test is about (a CI run froze
# A inside its pause's first step; B took over only after the SIGCONT).
# On SQLite the test holds the write lock itself while it stops the
# daemon, which is then outside any write or waiting for one. On
# PostgreSQL a statement sent goes on in the server, so the test stops
# the daemon, lets what it sent finish, and lets it run again a moment if
# one of its sessions is still inside a transaction (or a statement).
freeze() {
	eval "fpid=\$PID$1"
	if on_pg; then
		i=0
		while [ $i -lt 100 ]; do
			kill -STOP "$fpid"
			sleep 0.2
			n=$(sql "SELECT COUNT(*) || ' ' || COUNT(*) FILTER (WHERE state <> 'idle')
				FROM pg_stat_activity WHERE application_name = 'space-control-$1'")
			case $n in
			"0 "*) not_ok "freeze $1: the daemon's sessions are found by name"; return 0 ;;
			*" 0") [ $i = 0 ] || diag "freeze $1: stopped outside a transaction at try $((i + 1))"
				return 0 ;;
			esac
			kill -CONT "$fpid"
			sleep 0.05; i=$((i + 1))
		done
		diag "freeze $1: a session still in a transaction after 100 tries"
		kill -STOP "$fpid"
	else
		printf 'BEGIN IMMEDIATE;\n.shell kill -STOP %s\nCOMMIT;\n' "$fpid" |
			sqlite3 -cmd '.timeout 10000' "$D/control.db" >/dev/null
	fi
}
owner() { sql "SELECT COALESCE(lease_owner,'none') FROM sandboxes WHERE id='$1'"; }
takeovers() { sql "SELECT COUNT(*) FROM audit WHERE action='operation.takeover' AND target='$1'"; }
# everything a step could change for a sandbox, in one line
footprint() { sql "SELECT (SELECT COUNT(*) || '/' || MAX(generation) FROM executions WHERE sandbox='$1')
	|| ' rev=' || (SELECT MAX(revision) FROM assignments WHERE sandbox='$1')
	|| ' ops=' || (SELECT group_concat(step || ':' || COALESCE(result,'-'), ',') FROM operations WHERE sandbox='$1')
	|| ' audit=' || (SELECT COUNT(*) FROM audit WHERE target='$1')
	|| ' state=' || (SELECT state FROM sandboxes WHERE id='$1')"; }

# a simulated worker, as in 25: fetch URL W CRED [WAIT] -> W's next
# assignments in $T/a_W, the cursor kept like a worker's
fetch() {
	c=$(cat "$T/cur_$2" 2>/dev/null || echo 0)
	curl -s -m 40 -H "Authorization: Bearer $3" "$1/v1/workers/$2/assignments?after=$c&wait=${4:-5}" >"$T/a_$2"
	jget revision "$T/a_$2" >"$T/cur_$2"
}
got() { python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["assignments"]
print(" ".join("%s g%d %s" % (x["action"], x["identity"]["generation"],
    json.dumps(x["spec"].get("snapshot"))) for x in a))' "$T/a_$1"; }
report() { # URL W CRED STATE [DIGEST]: status of what W's last fetch named
	body=$(python3 -c 'import json,sys
a=json.load(open(sys.argv[1]))["assignments"][-1]
b={"identity": a["identity"], "state": sys.argv[2]}
if len(sys.argv) > 3: b["snapshot"] = {"digest": sys.argv[3], "size": 4096}
print(json.dumps(b))' "$T/a_$2" "$4" $5)
	req "$1" POST "/v1/workers/$2/status" "$3" "$body"
}
state() { req "$1" GET "/v1/sandboxes/$2" "$K" >/dev/null; jget state; }
wait_state() { # URL SANDBOX WANT SECONDS
	i=0
	while [ $i -lt $(($4 * 10)) ]; do
		[ "$(state "$1" "$2")" = "$3" ] && return 0
		sleep 0.1; i=$((i + 1))
	done
	return 1
}
view() { # URL SANDBOX: the sandbox as that daemon shows it
	req "$1" GET "/v1/sandboxes/$2" "$K" >/dev/null
	python3 -c 'import json,sys
s=json.load(open(sys.argv[1])); e=s["execution"]
print(s["state"], e["generation"], e["worker"], e["substrate"], e["activation"], e["resident"], e["state"], s["snapshot"])' "$T/body"; }
active() { sql "SELECT COUNT(*) FROM executions WHERE sandbox='$1' AND state IN ('pending','starting','serving')"; }
# wait_takeover SANDBOX OLD_OWNER: until another daemon holds the lease and
# one more takeover row exists (bounded, 15 s); prints the delay in ms
wait_takeover() {
	n0=$(takeovers "$1"); t0=$(ms); i=0
	while [ $i -lt 150 ]; do
		o=$(owner "$1")
		[ "$o" != "$2" ] && [ "$o" != none ] && [ "$(takeovers "$1")" -gt "$n0" ] && break
		sleep 0.1; i=$((i + 1))
	done
	echo $(($(ms) - t0))
}

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/cli.log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/cli.log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/cli.log")
check "daemon A started" start A "$PA"
check "daemon B started on the same data directory" start B "$PB"
IA=$(instance A)
IB=$(instance B)
check "A and B are distinct lease owners" test -n "$IA" -a -n "$IB" -a "$IA" != "$IB"
is "w1 registers (through A)" "$(req "$UA" POST /v1/workers/w1/register "$W1" '{"incarnation":"incA","endpoint":"http://127.0.0.1:9001","capacity":20}')" 200
is "w2 registers (through B)" "$(req "$UB" POST /v1/workers/w2/register "$W2" '{"incarnation":"incB","endpoint":"http://127.0.0.1:9002","capacity":20}')" 200
fetch "$UA" w1 "$W1" 0
fetch "$UB" w2 "$W2" 0

# ---- 1. a move started through A, A frozen, B takes over and finishes ----
req "$UB" POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
S=$(jget id)
fetch "$UB" w1 "$W1"
is "w1 gets install g1 (through B)" "$(got w1)" "install g1 null"
report "$UB" w1 "$W1" serving >/dev/null
wait_state "$UA" "$S" running 5
is "A sees the sandbox running" "$(state "$UA" "$S")" running
req "$UA" POST "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}' >/dev/null
OLDROUTE=$(jget route)
is "move to w2 through A -> 202" "$(req "$UA" POST "/v1/sandboxes/$S/move" "$K" '{"to":"w2"}')" 202
is "A's instance holds the lease" "$(owner "$S")" "$IA"
N=$(sql "SELECT MAX(generation) FROM executions WHERE sandbox='$S'")
ID_BEFORE=$(view "$UB" "$S")
freeze A
DELAY1=$(wait_takeover "$S" "$IA")
is "A frozen past its lease: B's instance takes it over (within 15 s)" "$(owner "$S")" "$IB"
diag "takeover delay after SIGSTOP (lease ttl 2 s): $DELAY1 ms"
is "... one takeover audit row naming A as the previous owner" \
	"$(sql "SELECT COUNT(*) FROM audit WHERE action='operation.takeover' AND target='$S' AND detail LIKE '%from=$IA'")" 1
is "... the takeover changed nothing else (execution identity, state)" "$(view "$UB" "$S")" "$ID_BEFORE"
fetch "$UB" w1 "$W1"
is "w1 gets retire g$N with snapshot:true (through B)" "$(got w1)" "retire g$N true"
DG=$(digest)
is "w1 reports retired to B" "$(report "$UB" w1 "$W1" retired "$DG")" 200
fetch "$UB" w2 "$W2"
is "w2 gets install g$((N + 1)) restoring that digest (B took the step)" "$(got w2)" "install g$((N + 1)) \"$DG\""
is "w2 reports serving to B" "$(report "$UB" w2 "$W2" serving)" 200
wait_state "$UB" "$S" running 5
is "the move completed through B: generation N+1 on w2, activation 1, serving" \
	"$(view "$UB" "$S")" "running $((N + 1)) w2 jail 1 incB serving $DG"
is "... the old execution retired" "$(sql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$N")" retired
is "... exactly one active execution" "$(active "$S")" 1
is "... the operation ended ok and the lease is released" \
	"$(sql "SELECT step || ' ' || result FROM operations WHERE sandbox='$S'") $(owner "$S")" "done ok none"
check "... the end was B's doing (B's log)" eventually 10 grep -q "on $S: ok" "$T/B.log"
is "a capability issued through B names generation N+1 on w2, activation 1" \
	"$(req "$UB" POST "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}') $(jget route.generation) $(jget route.worker) $(jget route.activation) $(jget route.resident)" \
	"200 $((N + 1)) w2 1 incB"
NEWROUTE=$(jget route)

# ---- 2. A wakes up after the operation ended: it takes no step ----
FP=$(footprint "$S")
LA=$(wc -l <"$T/A.log")
kill -CONT "$PIDA"
sleep 3.5    # three of A's ticks (lease ttl 2 s)
is "3.5 s after SIGCONT: no execution, assignment, operation or audit change by A" "$(footprint "$S")" "$FP"
is "... the lease is not A's (none)" "$(owner "$S")" none
check "... A's log shows no step on the sandbox since it woke" \
	sh -c "! tail -n +$((LA + 1)) '$T/A.log' | grep -q '$S'"
is "A serves reads consistently with B" "$(view "$UA" "$S")" "$(view "$UB" "$S")"
is "A issues a capability for the same route as B" \
	"$(req "$UA" POST "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}') $(jget route)" "200 $NEWROUTE"
is "the route of generation N, rejected, through A -> the new route" \
	"$(req "$UA" POST "/v1/sandboxes/$S/routes" "$K" "{\"access\":[\"exec\"],\"rejected\":$OLDROUTE}") $(jget route)" "200 $NEWROUTE"

# ---- 3. A wakes up while B holds the lease; a report to the non-holder ----
is "pause through A -> 202" "$(req "$UA" POST "/v1/sandboxes/$S/pause" "$K" '{}')" 202
OP=$(sql "SELECT id FROM operations WHERE sandbox='$S' AND step <> 'done'")
is "A holds the lease" "$(owner "$S")" "$IA"
freeze A
DELAY2=$(wait_takeover "$S" "$IA")
is "A frozen: B takes the pause over" "$(owner "$S")" "$IB"
diag "second takeover delay after SIGSTOP: $DELAY2 ms"
FP=$(footprint "$S")
LA=$(wc -l <"$T/A.log")
kill -CONT "$PIDA"
bad=0; i=0
while [ $i -lt 16 ]; do     # 4 s: four of A's ticks, two lease lifetimes
	[ "$(owner "$S")" = "$IB" ] || bad=1
	# (renewed every second: a renewal a loaded machine delays by up to 1 s is not a lapse)
	[ "$(sql "SELECT lease_expiry >= strftime('%s','now') - 1 FROM sandboxes WHERE id='$S'")" = 1 ] || bad=1
	sleep 0.25; i=$((i + 1))
done
is "for 4 s after SIGCONT the lease stays B's and valid (renewed by B)" "$bad" 0
is "... A took no step meanwhile (executions, assignments, operation, audit)" "$(footprint "$S")" "$FP"
check "... A's log shows no takeover since it woke" sh -c "! tail -n +$((LA + 1)) '$T/A.log' | grep -q 'taken over'"
is "a new operation through A is refused: the lease is B's (409)" "$(req "$UA" POST "/v1/sandboxes/$S/pause" "$K" '{}') $(jget message)" \
	"409 another lifecycle operation is in progress"
fetch "$UA" w2 "$W2"
is "w2 gets retire g$((N + 1)) through A" "$(got w2)" "retire g$((N + 1)) true"
DP=$(digest)
T0=$(ms)
is "w2 reports retired to A, which does not hold the lease -> 200" "$(report "$UA" w2 "$W2" retired "$DP")" 200
is "... recorded at once (execution retired, digest archived)" \
	"$(sql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$((N + 1))") $(sql "SELECT COUNT(*) FROM snapshots WHERE sandbox='$S' AND digest='$DP' AND state='ready'")" "retired 1"
wait_state "$UB" "$S" paused 5
is "... and the holder B takes the step: paused" "$(state "$UB" "$S") $(jget snapshot)" "paused $DP"
diag "report at the non-holder -> step by the holder: $(($(ms) - T0)) ms"
is "... the operation ended ok, no more takeovers, lease released" \
	"$(sql "SELECT step || ' ' || result FROM operations WHERE id='$OP'") $(takeovers "$S") $(owner "$S")" "done ok 2 none"
check "... the step was B's (B's log), not A's" sh -c "grep -q 'operation $OP (pause) on $S: ok' '$T/B.log' && ! grep -q 'operation $OP (pause) on $S: ok' '$T/A.log'"

# an assignment committed by one daemon, seen by a worker long-polling the
# other one: measured, not asserted (a long-poll looks at the store every
# 250 ms for what another daemon committed)
fetch "$UA" w2 "$W2" 0
( fetch "$UA" w2 "$W2" 6 ) &
FPID=$!
sleep 0.5
T0=$(ms)
is "resume through B -> 202" "$(req "$UB" POST "/v1/sandboxes/$S/resume" "$K" '{}')" 202
wait "$FPID"
XLAT=$(($(ms) - T0))
is "w2, long-polling A, gets B's install g$((N + 2)) restoring the pause's archive" "$(got w2)" "install g$((N + 2)) \"$DP\""
diag "install committed by B -> returned to a long-poll waiting at A (wait=6): $XLAT ms"
is "w2 reports serving to A" "$(report "$UA" w2 "$W2" serving)" 200
wait_state "$UA" "$S" running 5
is "running again, generation N+2" "$(view "$UA" "$S" | cut -d' ' -f1,2,3,5)" "running $((N + 2)) w2 1"

# a third daemon C holding the lease of an unfinished move (a long lease,
# 10 s, as an operator may set) is frozen (SIGSTOP) before the step its
# worker's report allows; the retirement is reported to A, which records it;
# A and B must wait while C's lease runs, then one of them takes over and
# takes that step once
PC=$(free_port)
while [ "$PC" = "$PA" ] || [ "$PC" = "$PB" ]; do PC=$(free_port); done
UC=http://127.0.0.1:$PC
check "daemon C started (a 10 s lease)" start C "$PC" --lease-ttl 10
IC=$(instance C)
is "move to w1 through C -> 202" "$(req "$UC" POST "/v1/sandboxes/$S/move" "$K" '{"to":"w1"}')" 202
is "C's instance holds the lease" "$(owner "$S")" "$IC"
fetch "$UC" w2 "$W2"
is "w2 gets retire g$((N + 2)) through C" "$(got w2)" "retire g$((N + 2)) true"
freeze C
DC=$(digest)
is "w2 reports retired to A while the holder C is frozen" "$(report "$UA" w2 "$W2" retired "$DC")" 200
sleep 2.5
is "2.5 s later: recorded, no install yet, C's lease still refuses A and B the step" \
	"$(sql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$((N + 2))") $(sql "SELECT MAX(generation) FROM executions WHERE sandbox='$S'") $(owner "$S")" \
	"retired $((N + 2)) $IC"
DELAY3=$(wait_takeover "$S" "$IC")
NH=$(owner "$S")
[ "$NH" = "$IA" ] && NU=$UA || NU=$UB
check "C's lease expired: A or B (both live) takes the move over" test "$NH" = "$IA" -o "$NH" = "$IB"
diag "third takeover delay after the check: $DELAY3 ms (by $([ "$NH" = "$IA" ] && echo A || echo B))"
fetch "$NU" w1 "$W1"
is "... and takes the install step: w1 gets install g$((N + 3)) restoring the reported archive" "$(got w1)" "install g$((N + 3)) \"$DC\""
FP=$(footprint "$S")
kill -CONT "$PIDC"
sleep 2.5
is "C woken: nothing changed, the lease stays the new holder's" "$(footprint "$S") $(owner "$S")" "$FP $NH"
is "w1 reports serving to C (not the holder)" "$(report "$UC" w1 "$W1" serving)" 200
wait_state "$NU" "$S" running 5
is "the move ends through the new holder: generation N+3 on w1, activation 1" "$(view "$NU" "$S" | cut -d' ' -f1-5)" "running $((N + 3)) w1 jail 1"
is "... one install of each generation, one active execution" \
	"$(sql "SELECT COUNT(*) = COUNT(DISTINCT generation) FROM assignments WHERE sandbox='$S' AND action='install'") $(active "$S")" "1 1"
is "... the operation ended ok, lease released" \
	"$(sql "SELECT step || ' ' || result FROM operations WHERE sandbox='$S' ORDER BY created DESC, rowid DESC LIMIT 1") $(owner "$S")" "done ok none"
kill "$PIDC"; wait "$PIDC"; RC=$?; PIDC=
is "C stops cleanly" "$RC" 0

# ---- 4. concurrent operations split across A and B ----
cat >"$T/drive.py" <<'EOF'
# the workers w1 and w2: follow their streams through A or B at random and
# report to A or B at random, until no operation is open; checks on the way
# (the store: a SQLite file, or a PostgreSQL URL read through psql)
import json, os, random, sqlite3, subprocess, sys, time, urllib.request, urllib.error
T, urls, creds, deadline = sys.argv[1], sys.argv[2:4], {"w1": sys.argv[4], "w2": sys.argv[5]}, time.time() + float(sys.argv[6])
def query(sql):
    if sys.argv[7].startswith("postgres"):
        out = subprocess.run(["psql", "-X", "-q", "-At", "-d", sys.argv[7], "-c", sql],
            check=True, capture_output=True, text=True).stdout
        return [tuple(l.split("|")) for l in out.splitlines()]
    db = sqlite3.connect(sys.argv[7], timeout=5)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()
last = json.load(open(T + "/digests.json")) if os.path.exists(T + "/digests.json") else {}
bad, reports = [], 0
def call(url, w, method, path, body=None):
    r = urllib.request.Request(url + path, method=method, data=json.dumps(body).encode() if body is not None else None,
        headers={"Authorization": "Bearer " + creds[w]})
    try:
        with urllib.request.urlopen(r, timeout=20) as f:
            return f.status, json.load(f)
    except urllib.error.HTTPError as e:
        return e.code, None
idle = 0
while time.time() < deadline:
    n = 0
    for w in ("w1", "w2"):
        cur = int(open("%s/cur_%s" % (T, w)).read().strip() or 0)
        st, a = call(random.choice(urls), w, "GET", "/v1/workers/%s/assignments?after=%d&wait=0" % (w, cur))
        if st != 200:
            bad.append("fetch %s: %d" % (w, st)); continue
        for x in a["assignments"]:
            sb, g = x["identity"]["sandbox"], x["identity"]["generation"]
            if x["action"] == "install":
                if sb in last and x["spec"].get("snapshot") != last[sb]:
                    bad.append("%s g%d restores %s, not %s" % (sb, g, x["spec"].get("snapshot"), last[sb]))
                body = {"identity": x["identity"], "state": "serving"}
            elif x["action"] == "retire":
                last[sb] = os.urandom(32).hex()
                body = {"identity": x["identity"], "state": "retired", "snapshot": {"digest": last[sb], "size": 1}}
            else:
                continue
            st, _ = call(random.choice(urls), w, "POST", "/v1/workers/%s/status" % w, body)
            reports += 1
            if st != 200:
                bad.append("report %s g%d %s: %d" % (sb, g, body["state"], st))
            n += 1
        with open("%s/cur_%s" % (T, w), "w") as f:
            f.write("%d\n" % a["revision"])
    two = query("SELECT sandbox FROM executions WHERE state IN ('pending','starting','serving')"
        " GROUP BY sandbox HAVING COUNT(*) > 1")
    if two:
        bad.append("two active executions: %s" % two)
    open_ops = int(query("SELECT COUNT(*) FROM operations WHERE step <> 'done'")[0][0])
    idle = idle + 1 if n == 0 and open_ops == 0 else 0
    if idle >= 3:
        break
    time.sleep(0.05)
json.dump(last, open(T + "/digests.json", "w"))
print(json.dumps({"bad": bad[:10], "reports": reports, "finished": idle >= 3}))
EOF
# sandboxes placed alternately on w1 and w2, each created through A or B
SBX=
for i in 1 2 3 4; do
	w=w$((i % 2 + 1)); [ $((i % 2)) = 0 ] && u=$UA || u=$UB
	req "$u" POST /v1/sandboxes "$K" "{\"worker\":\"$w\"}" >/dev/null
	SBX="$SBX $(jget id)"
done
R=$(python3 "$T/drive.py" "$T" "$UA" "$UB" "$W1" "$W2" 20 "${DB:-$D/control.db}")
is "four sandboxes created through A and B, all running" \
	"$(for s in $SBX; do state "$UB" "$s"; done | grep -c '^running$')" 4
export UA UB K
for round in 1 2 3 4; do
	: >"$T/calls"
	for s in $SBX; do
		view "$UA" "$s" >"$T/v"
		st=$(cut -d' ' -f1 "$T/v"); cw=$(cut -d' ' -f3 "$T/v")
		[ "$cw" = w1 ] && to=w2 || to=w1
		if [ "$st" = paused ]; then
			printf '%s\n' "$s A resume -" "$s B resume -" "$s A resume -" "$s B resume -"
		else
			printf '%s\n' "$s A pause -" "$s B move $to" "$s B pause -" "$s A move $to"
		fi >>"$T/calls"
	done
	# all calls of the round at once, each sandbox's calls spread over A and B
	xargs -P 16 -L 1 sh -c '[ "$1" = A ] && u=$UA || u=$UB
		[ "$3" = - ] && b="{}" || b="{\"to\":\"$3\"}"
		c=$(curl -s -m 20 -o /dev/null -w "%{http_code}" -X POST -H "Authorization: Bearer $K" \
		--data-binary "$b" "$u/v1/sandboxes/$0/$2"); echo "$0 $1 $2 $c"' <"$T/calls" >"$T/codes_$round"
	okc=0
	for s in $SBX; do
		[ "$(grep -c "^$s .* 202$" "$T/codes_$round")" = 1 ] &&
		    [ "$(grep -c "^$s .* 409$" "$T/codes_$round")" = 3 ] && okc=$((okc + 1))
	done
	is "round $round: 16 concurrent calls over A and B, exactly one 202 and three 409 per sandbox" "$okc" 4
	diag "round $round winners: $(grep ' 202$' "$T/codes_$round" | cut -d' ' -f2,3 | sort | uniq -c | tr -s ' \n' ' ')"
	is "... one open operation per sandbox" "$(sql "SELECT COUNT(*), COUNT(DISTINCT sandbox) FROM operations WHERE step <> 'done'")" "4|4"
	R=$(python3 "$T/drive.py" "$T" "$UA" "$UB" "$W1" "$W2" 30 "${DB:-$D/control.db}")
	is "... the workers (fetching and reporting through A or B at random) drive all to the end, no anomaly" \
		"$(echo "$R" | jget finished /dev/stdin) $(echo "$R" | jget bad /dev/stdin)" "True []"
done
is "no operation open, every one ended ok" \
	"$(sql "SELECT COUNT(*) FROM operations WHERE step <> 'done' OR result <> 'ok'")" 0
is "per sandbox: generations 1..n, unique, created in increasing order" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox, COUNT(*) c, COUNT(DISTINCT generation) d, MAX(generation) m FROM executions GROUP BY sandbox) x WHERE c <> d OR c <> m")|$(sql "SELECT COUNT(*) FROM executions a JOIN executions b ON a.sandbox = b.sandbox AND a.rowid < b.rowid AND a.generation >= b.generation")" "0|0"
is "installs follow the assignment stream in increasing generation order" \
	"$(sql "SELECT COUNT(*) FROM assignments a JOIN assignments b ON a.sandbox = b.sandbox AND a.action = 'install' AND b.action = 'install' AND a.revision < b.revision AND a.generation >= b.generation")" 0
is "no sandbox has two active executions" \
	"$(sql "SELECT COUNT(*) FROM (SELECT sandbox FROM executions WHERE state IN ('pending','starting','serving') GROUP BY sandbox HAVING COUNT(*) > 1) x")" 0
is "every execution but each sandbox's last is retired" \
	"$(sql "SELECT COUNT(*) FROM executions e WHERE e.state <> 'retired' AND e.generation < (SELECT MAX(generation) FROM executions WHERE sandbox = e.sandbox)")" 0
is "A and B agree on every sandbox" "$(for s in $SBX $S; do view "$UA" "$s"; done)" "$(for s in $SBX $S; do view "$UB" "$s"; done)"
is "store integrity" "$(store_integrity)" ok
kill "$PIDA"; wait "$PIDA"; RA=$?; PIDA=
kill "$PIDB"; wait "$PIDB"; RB=$?; PIDB=
is "both daemons stop cleanly" "$RA $RB" "0 0"
check "no sanitizer report in the daemons' logs" sh -c "! cat '$T'/*.log | grep -Eq 'Sanitizer|runtime error'"
done_testing
