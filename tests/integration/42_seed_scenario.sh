#!/bin/sh
# The routing scenario of a move, on a real platform (space up --workers 2),
# from the client's side and from an attacker's: sandbox S serving as
# generation N on w1 moves to w2 as N+1. N+1's capability sent to w1 is
# refused before anything is forwarded; N's unexpired capability is refused
# at w1 once it installed the retirement, and at w2; the CLI, whose route
# cache still holds N, repairs its route with exactly one rebuilt attempt
# (counted at both node-apis) and keeps the entry's cache_exp. Then: a late
# refusal does not evict a newer cache entry written by another process,
# pause/resume keeps files, two concurrent moves give one winner and one
# clear conflict, `space demo` passes, and under 4 concurrent readers while
# the sandbox moves 3 times every answer comes from the execution its
# capability names.
. "$SPACE_TOP/tests/lib.sh"

. "$SPACE_TOP/tests/lib_up.sh"

up_init
up_start || exit 1
EP1="http://127.0.0.1:$((P + 1))"
EP2="http://127.0.0.1:$((P + 2))"

# sp: a CLI call bounded in time, so a hung platform cannot stall the test
sp() { timeout 30 space "$@"; }
# metric URL REGEX: the sum of the node-api metrics whose line matches
metric() {
	curl -sf "$1/metrics" | python3 -c '
import re, sys
pat = re.compile(sys.argv[1]); t = 0
for l in sys.stdin:
    if not l.startswith("#") and pat.search(l.rsplit(" ", 1)[0]): t += int(float(l.rsplit(" ", 1)[1]))
print(t)' "$2"
}
# cache FIELD: a field of S's entry in the route cache file
cache() {
	python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
e = [r for r in d["routes"] if r["route"]["sandbox"] == sys.argv[2]]
v = e[0] if e else {}
for k in sys.argv[3].split("."): v = v.get(k, {}) if isinstance(v, dict) else {}
print(v if v != {} else "none")' "$SPACE_ROUTE_CACHE" "$SBX" "$1" 2>/dev/null || echo none
}
# jfield JSON PATH: a field of a JSON document
jfield() { python3 -c '
import json, sys
v = json.loads(sys.argv[1])
for k in sys.argv[2].split("."): v = v[k]
print(v)' "$1" "$2" 2>/dev/null; }
# raw PATH-AND-QUERY ENDPOINT CAP: status and error body of one request
raw() {
	curl -s -o "$T/raw.body" -w '%{http_code}' -H "Authorization: Bearer $3" "$2/v1/sandboxes/$SBX/$1"
}
pid_of() { # the pid of the node-api listening on 127.0.0.1:$1
	for c in /proc/[0-9]*/cmdline; do
		case "$(tr '\0' ' ' 2>/dev/null <"$c")" in
		*node-api*"--listen 127.0.0.1:$1 "*) p=${c#/proc/}; echo "${p%/cmdline}"; return ;;
		esac
	done
}

# --- S serves as generation N on w1 ------------------------------------------
SBX=$(sp create --worker w1 2>"$T/err"); rc=$?
is "create S on w1" "$rc" 0
[ "$rc" = 0 ] || { diag "$(cat "$T/err")"; done_testing; exit; }
head -c 200000 /dev/urandom >"$T/blob"
sp fs write "$SBX" /home/user/blob <"$T/blob" 2>"$T/err"
check "write a file before the move" test $? = 0
echo "before the move" | sp fs write "$SBX" /home/user/note.txt
sp fs mkdir -p "$SBX" /home/user/d1/d2 && echo nested | sp fs write "$SBX" /home/user/d1/d2/n.txt
is "read it back (the cache now grants fs:r and fs:w)" "$(sp fs read "$SBX" /home/user/note.txt 2>&1)" \
	"before the move"
N=$(cache route.generation)
is "the route cache holds S on w1" "$(cache route.worker)" "w1"
is "the cache file is mode 0600" "$(stat -c %a "$SPACE_ROUTE_CACHE")" 600
EXP0=$(cache cache_exp)

# N's capability, kept as a delayed request or a stale client would keep it
OLD=$(sp route "$SBX" --access fs:r --json 2>"$T/err")
OLDCAP=$(jfield "$OLD" capability)
is "N's capability names generation N on w1" "$(jfield "$OLD" route.generation) $(jfield "$OLD" route.worker)" "$N w1"
OLDEXP=$(jfield "$OLD" expires_at)

# --- the move: N on w1 -> N+1 on w2 ------------------------------------------
out=$(sp move "$SBX" --to w2 2>&1); rc=$?
is "space move S --to w2 exits 0" "$rc" 0
case "$out" in *"generation $((N + 1)) on w2"*) ok "move prints the new generation and worker" ;;
*) not_ok "move prints the new generation and worker"; diag "$out" ;; esac
NEW=$(sp route "$SBX" --access fs:r --json 2>"$T/err")
NEWCAP=$(jfield "$NEW" capability)
is "N+1's capability names generation N+1 on w2" \
	"$(jfield "$NEW" route.generation) $(jfield "$NEW" route.worker)" "$((N + 1)) w2"
show=$(sp show "$SBX" --json)
check "show --json: history has N on w1 retired, then N+1 on w2 serving" python3 -c '
import json, sys
s = json.loads(sys.argv[1]); n = int(sys.argv[2]); h = s["history"]
assert [(x["generation"], x["worker"], x["state"]) for x in h[-2:]] == [(n, "w1", "retired"), (n + 1, "w2", "serving")], h
assert h[-2]["ended_at"] and h[-1]["ended_at"] is None, h
e = s["execution"]; assert (e["generation"], e["worker"]) == (n + 1, "w2"), e
assert set(["id", "state", "execution"]) <= set(s), s
for k in ("generation", "worker", "substrate", "activation", "resident"): assert k in e, k' "$show" "$N"
out=$(sp show "$SBX")
case "$out" in *history*"w1"*"retired"*"w2"*"serving"*) ok "show prints the generation history" ;;
*) not_ok "show prints the generation history"; diag "$out" ;; esac

# N+1's capability at w1: refused before anything is forwarded
# (sbx-manager rewrites its counters every 2 s: wait for a fresh copy)
prom_fresh "$D/w1/metrics.prom"
fw1=$(metric "$EP1" '^space_sbxmgr_forwarded_total$')
st=$(raw "files?path=/home/user/note.txt" "$EP1" "$NEWCAP")
is "N+1's capability at w1: 409" "$st" 409
check "  ... refresh_route" grep -q '"refresh_route"' "$T/raw.body"
prom_fresh "$D/w1/metrics.prom"
is "  ... and w1's sbx-manager forwarded nothing" "$(metric "$EP1" '^space_sbxmgr_forwarded_total$')" "$fw1"
check "  ... its audit log names the refused capability's generation N+1" python3 -c '
import json, sys
n = int(sys.argv[2]); hit = False
for l in open(sys.argv[1]):
    try: e = json.loads(l)
    except ValueError: continue
    if e.get("audit") == "admission" and e.get("outcome") == "refresh_route" and \
       e.get("cap_route", {}).get("generation") == n + 1 and e.get("sandbox") == sys.argv[3]: hit = True
assert hit' "$D/logs/w1-sbx-manager.log" "$N" "$SBX"
st=$(curl -s -o "$T/raw.body" -w '%{http_code}' -H "Authorization: Bearer $NEWCAP" \
	-H 'Content-Type: application/json' -d '{"argv":["sh","-c","echo x > /home/user/should-not-exist"]}' \
	"$EP1/v1/sandboxes/$SBX/exec")
is "N+1's capability (fs:r only) for exec at w1: refused" "$([ "$st" -ge 400 ] && echo refused)" refused

# N's capability, unexpired, at w1 (which installed the retirement) and w2
now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
check "N's capability has not expired ($OLDEXP > $now)" test "$OLDEXP" \> "$now"
st=$(raw "files?path=/home/user/note.txt" "$EP1" "$OLDCAP")
is "N's unexpired capability at w1 after the retirement: 409" "$st" 409
check "  ... refresh_route" grep -q '"refresh_route"' "$T/raw.body"
st=$(raw "files?path=/home/user/note.txt" "$EP2" "$OLDCAP")
is "N's capability at w2: 409" "$st" 409
check "  ... refresh_route" grep -q '"refresh_route"' "$T/raw.body"
st=$(raw "files?path=/home/user/note.txt" "$EP2" "$NEWCAP")
is "N+1's capability at w2: 200" "$st" 200

# --- the client repairs its route: exactly one rebuilt attempt --------------
is "the cache still holds N on w1" "$(cache route.generation) $(cache route.worker)" "$N w1"
a1=$(metric "$EP1" 'route="files_get"'); a2=$(metric "$EP2" 'route="files_get"')
out=$(sp -v fs read "$SBX" /home/user/note.txt 2>"$T/v"); rc=$?
is "the CLI read after the move succeeds" "$rc $out" "0 before the move"
b1=$(metric "$EP1" 'route="files_get"'); b2=$(metric "$EP2" 'route="files_get"')
is "w1's node-api received exactly one request (the refused one)" "$((b1 - a1))" 1
is "w2's node-api received exactly one request (the rebuilt one)" "$((b2 - a2))" 1
check "-v: gen N on w1 refused: refresh_route, repaired to gen N+1 on w2" \
	grep -q "gen $N on w1 refused: refresh_route (.*); repaired to gen $((N + 1)) on w2; 1 rebuilt attempt" "$T/v"
check "-v: 2 attempts, 1 resolve, 1 rebuilt attempt" grep -q "done: 2 attempts, 1 resolve, 1 rebuilt attempt," "$T/v"
[ -f "$T/v" ] && sed 's/^/#   /' "$T/v"
is "the cache now holds N+1 on w2" "$(cache route.generation) $(cache route.worker)" "$((N + 1)) w2"
is "the repair kept the entry's cache_exp" "$(cache cache_exp)" "$EXP0"
sp fs read "$SBX" /home/user/blob >"$T/blob.back" 2>"$T/err"
check "files written before the move are there after it" cmp "$T/blob" "$T/blob.back"
is "  ... nested ones too" "$(sp fs read "$SBX" /home/user/d1/d2/n.txt 2>&1)" "nested"
sp -v fs read "$SBX" /home/user/note.txt >/dev/null 2>"$T/v"
check "the next call goes straight to w2 from the cache (1 attempt, 0 resolves)" \
	grep -q "done: 1 attempt, 0 resolves, 0 rebuilt attempts" "$T/v"

# --- a late refusal does not evict a newer entry (across processes) ---------
# The cache says N+1 on w2 while S moves on to N+4 on w1. Client A is
# refused at w2, repairs to N+4 on w1, and its rebuilt attempt is held
# (w1's node-api stopped). Meanwhile S moves to w2 as N+5, and client B
# (another process, same cache file) repairs to N+5 and saves it. Then A's
# held attempt meets its late refusal: A fails (no second repair), and its
# save must not replace the newer N+5 with its N+4.
sp move "$SBX" --to w1 >/dev/null 2>&1      # N+2 on w1; the cache still says N+1 on w2
sp move "$SBX" --to w2 >/dev/null 2>&1      # N+3 on w2
sp move "$SBX" --to w1 >/dev/null 2>&1      # N+4 on w1
G=$(jfield "$(sp show "$SBX" --json)" execution.generation)
is "three more moves: S is N+4 on w1" "$G" "$((N + 4))"
# A's cache says N+1 on w2: refused at w2, repaired to N+4 on w1; hold w1
NA1=$(pid_of $((P + 1)))
if [ -n "$NA1" ] && kill -STOP "$NA1"; then
	UP_STOPPED="$NA1"
	space -v fs read "$SBX" /home/user/note.txt >"$T/a.out" 2>"$T/a.err" &
	A=$!; UP_KILL="$A"
	i=0; while ! grep -q "repaired to gen" "$T/a.err" && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	check "A was refused and repaired to gen N+4 on w1 (its rebuilt attempt now held)" \
		grep -q "repaired to gen $((N + 4)) on w1" "$T/a.err"
	sleep 0.3
	# the sandbox moves on while A waits; w2 serves N+5
	sp move "$SBX" --to w2 >/dev/null 2>"$T/err"
	# B, another client process with the same cache file: refused at w2
	# (N+1), repaired to N+5, saves N+5
	out=$(space fs read "$SBX" /home/user/note.txt 2>"$T/b.err")
	is "B reads through its own repair" "$out" "before the move"
	is "the file holds B's newer route, N+5 on w2" "$(cache route.generation) $(cache route.worker)" \
		"$((N + 5)) w2"
	kill -CONT "$NA1"; UP_STOPPED=""
	wait "$A"; rc=$?; UP_KILL=""
	is "A's rebuilt attempt is refused too (N+4 retired): an error, not a loop" "$rc" 1
	check "  ... saying it was refused again after one rebuilt attempt" \
		grep -q "refused again after one rebuilt attempt" "$T/a.err"
	check "  ... after exactly 2 attempts" grep -q "done: 2 attempts, 1 resolve, 1 rebuilt attempt" "$T/a.err"
	is "A's late refusal did not evict the newer entry: still N+5 on w2" \
		"$(cache route.generation) $(cache route.worker)" "$((N + 5)) w2"
	N=$((N + 5))
else
	not_ok "stop w1's node-api (pid '$NA1')"
fi

# --- pause and resume through the CLI keep files ----------------------------
out=$(sp pause "$SBX" 2>&1); rc=$?
is "space pause exits 0" "$rc" 0
case "$out" in *paused*) ok "pause prints 'paused'" ;; *) not_ok "pause prints 'paused'"; diag "$out" ;; esac
is "show: paused" "$(jfield "$(sp show "$SBX" --json)" state)" paused
sp fs read "$SBX" /home/user/note.txt >/dev/null 2>"$T/err"; rc=$?
is "a read of a paused sandbox fails" "$rc" 1
check "  ... saying it is paused" grep -q "paused" "$T/err"
out=$(sp pause "$SBX" 2>&1); rc=$?
is "pausing it again is a conflict" "$rc" 1
out=$(sp resume "$SBX" --worker w1 2>&1); rc=$?
is "space resume --worker w1 exits 0" "$rc" 0
case "$out" in *"running: generation $((N + 1)) on w1"*) ok "resume prints the new generation on w1" ;;
*) not_ok "resume prints the new generation on w1"; diag "$out" ;; esac
sp fs read "$SBX" /home/user/blob >"$T/blob.back" 2>"$T/err"
check "files survive pause and resume" cmp "$T/blob" "$T/blob.back"
N=$((N + 1))
out=$(sp snapshot "$SBX" --name seedtest 2>&1); rc=$?
is "space snapshot --name exits 0" "$rc" 0
case "$out" in *seedtest*ready*) ok "snapshot prints its name and state" ;; *) not_ok "snapshot prints its name and state"; diag "$out" ;; esac
check "snapshot list --json has it, ready, with a digest" python3 -c '
import json, sys
s = [x for x in json.loads(sys.argv[1])["snapshots"] if x["name"] == "seedtest"]
assert len(s) == 1 and s[0]["state"] == "ready" and len(s[0]["digest"]) == 64, s' \
	"$(sp snapshot list "$SBX" --json 2>&1)"
SNID=$(sp snapshot list "$SBX" --json 2>/dev/null | python3 -c '
import json, sys
print([x for x in json.load(sys.stdin)["snapshots"] if x["name"] == "seedtest"][0]["id"])')
is "space snapshot rm deletes the named snapshot" "$(sp snapshot rm "$SBX" "$SNID" 2>&1)" "$SNID deleted"
is "... which the list shows without its name" "$(sp snapshot list "$SBX" --json 2>&1 | python3 -c '
import json, sys
print([x["name"] for x in json.load(sys.stdin)["snapshots"] if x["id"] == sys.argv[1]])' "$SNID")" "[None]"
out=$(sp snapshot rm "$SBX" "$SNID" 2>&1); rc=$?
check "... and a second rm fails (exit $rc)" test "$rc" != 0
out=$(sp timeout "$SBX" --idle 3600 --json 2>&1)
is "timeout --idle sets idle" "$(jfield "$out" idle) $(jfield "$out" action)" "3600 pause"
out=$(sp timeout "$SBX" --absolute 7200 --json 2>&1)
is "timeout --absolute keeps idle" "$(jfield "$out" idle) $(jfield "$out" absolute)" "3600 7200"

# --- concurrent moves: one wins, the other is a clear conflict ---------------
sp move "$SBX" --to w2 >"$T/m1" 2>&1 & m1=$!
sp move "$SBX" --to w2 >"$T/m2" 2>&1 & m2=$!
wait $m1; r1=$?; wait $m2; r2=$?
is "two concurrent moves: exactly one succeeds" "$(( (r1 == 0) + (r2 == 0) ))" 1
if [ "$r1" = 0 ]; then loser="$T/m2"; else loser="$T/m1"; fi
if grep -q "conflict: another lifecycle operation is in progress" "$loser" ||
   grep -q "conflict: .*current worker" "$loser"; then
	ok "the other gets a conflict error"
else
	not_ok "the other gets a conflict error"; diag "$(cat "$loser")"
fi
diag "loser said: $(cat "$loser")"
is "S serves on w2" "$(jfield "$(sp show "$SBX" --json)" execution.worker)" w2

out=$(sp pause "$SBX" --no-wait 2>&1)
case "$out" in *"pausing (not waiting)"*) ok "pause --no-wait returns at once, pausing" ;;
*) not_ok "pause --no-wait returns at once, pausing"; diag "$out" ;; esac
i=0; while [ "$(jfield "$(sp show "$SBX" --json)" state)" != paused ] && [ $i -lt 300 ]; do sleep 0.2; i=$((i + 1)); done
out=$(sp resume "$SBX" --json 2>&1)
is "resume without --worker: back on the previous worker, serving" \
	"$(jfield "$out" state) $(jfield "$out" execution.worker) $(jfield "$out" execution.state)" "running w2 serving"
is "  ... and the files are there" "$(sp fs read "$SBX" /home/user/note.txt 2>&1)" "before the move"

# --- space demo ----------------------------------------------------------------
sp demo >"$T/demo" 2>&1; rc=$?
is "space demo exits 0" "$rc" 0
[ "$rc" = 0 ] && check "  ... and says all steps behaved" grep -q "All steps behaved as expected" "$T/demo"
sed 's/^/#   /' "$T/demo"

# --- load: 4 readers while S moves back and forth 3 times --------------------
# after a move the cache names the execution before it: a write from a
# pipe is refused there and sent again, whole, to the new one
sp move "$SBX" --to w1 >/dev/null 2>&1
echo "load" | sp -v fs write "$SBX" /home/user/load.txt 2>"$T/v"; rc=$?
is "a write from a pipe after a move succeeds" "$rc" 0
check "  ... through one rebuilt attempt (the input was spooled)" \
	grep -q "done: 2 attempts, 1 resolve, 1 rebuilt attempt," "$T/v"
is "  ... and wrote all of it" "$(sp fs read "$SBX" /home/user/load.txt 2>&1)" "load"
end=$(($(date +%s) + 20))
for r in 1 2 3 4; do
	(
		while [ "$(date +%s)" -lt "$end" ]; do
			out=$(timeout 30 space -v fs read "$SBX" /home/user/load.txt 2>>"$T/load.$r.err")
			if [ "$out" = load ]; then echo ok; else echo fail; fi
		done >"$T/load.$r"
	) &
	UP_KILL="$UP_KILL $!"
done
moves_ok=0
for to in w2 w1 w2 w1 w2 w1; do
	sleep 1.5
	sp move "$SBX" --to "$to" >/dev/null 2>>"$T/moves.err" && moves_ok=$((moves_ok + 1))
done
for p in $UP_KILL; do wait "$p"; done
UP_KILL=""
is "6 moves (back and forth 3 times) under load" "$moves_ok" 6
cat "$T"/load.?.err >"$T/load.err"
calls=$(cat "$T"/load.? | wc -l)
fails=$(grep -c fail "$T"/load.? | awk -F: '{s += $2} END {print s + 0}')
served=$(grep -c "served by" "$T/load.err")
diag "load: $calls reads, $fails failed, $served answers"
check "load: the readers made calls" test "$calls" -gt 20
# every answer: the serving execution is the one the capability was for
# "route: attempt 1: gen 3 on w1: HTTP 200, served by gen 3 on w1"
bad=$(awk '/served by/ { w = $7; sub(/:$/, "", w); if ($5 != $13 || w != $15) print }' \
	"$T/load.err" | head -5)
is "load: every answer came from the execution its capability named" "$bad" ""
is "load: no answer was flagged as a mismatch" "$(grep -c MISMATCH "$T/load.err")" 0
is "load: no call made more than one rebuilt attempt" \
	"$(grep "done:" "$T/load.err" | grep -vc ", [01] rebuilt attempts\{0,1\},")" 0
rep=$(grep -c "done: .* 1 rebuilt attempt," "$T/load.err")
diag "load: $rep calls repaired their route with one rebuilt attempt"
check "load: some calls met a moved sandbox and repaired their route" test "$rep" -gt 0
# a call can fail only while S is between executions (no route yet, or the
# route it repaired to was retired before its one rebuilt attempt)
check "load: at least 90% of the reads succeeded" test $((fails * 10)) -le "$calls"
grep "^space: " "$T/load.err" | sort | uniq -c | sort -rn | head -5 | sed 's/^/#   /'

sp kill "$SBX" >/dev/null 2>&1
stop_up
done_testing
