#!/bin/sh
# Moves under load while daemons, bridges and guests are killed with
# kill -9, on the platform run the way a user runs it: space up --workers 2,
# whose supervisor restarts what dies. Four CLI clients read and write for
# the whole run. Every answer is checked against the execution its
# capability named (a single mismatch fails), no call makes more than one
# rebuilt attempt, and at the end the platform has converged: the sandbox
# runs with one serving execution in the control plane and on the workers
# together, no generation was reused, and every acknowledged write reads
# back unchanged.
# A load test whose point is where requests land, not memory safety: it
# runs once, in the plain build (tests/run.sh), not again under the
# sanitizers, which cover the same paths in 50-55.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

up_init
up_start || exit 1

sp() { timeout 60 space "$@"; }
csql() { sqlite3 -cmd '.timeout 5000' "$D/control/control.db" "$1"; }
wsql() { sqlite3 -cmd '.timeout 5000' "$D/$1/records.db" "$2"; }
# the bridge serving S now, and its guest
# (retried for 10 s: the control plane may be restarting)
cur() {
	for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		sp show "$SBX" --json 2>/dev/null | python3 -c 'import json,sys; e=json.load(sys.stdin)["execution"]; print(e["worker"], e["generation"])' 2>/dev/null && return 0
		sleep 0.5
	done
	return 1
}
bridge_of() { # WORKER GEN
	for c in /proc/[0-9]*/cmdline; do
		case "$(tr '\0' ' ' 2>/dev/null <"$c")" in
		*spaced-host*"--sandbox $SBX --generation $2 "*"--run-dir $D/$1/"*)
			p=${c#/proc/}; p=${p%/cmdline}
			# not a jail child of the bridge (same command line until it execs)
			pp=$(awk '/^PPid:/ { print $2 }' /proc/"$p"/status 2>/dev/null)
			tr '\0' ' ' 2>/dev/null </proc/"$pp"/cmdline | grep -q spaced-host && continue
			echo "$p"; return 0 ;;
		esac
	done
	return 1
}
other() { [ "$1" = w1 ] && echo w2 || echo w1; }

SBX=$(sp create --worker w1 2>"$T/err"); rc=$?
is "create S on w1" "$rc" 0
[ "$rc" = 0 ] || { diag "$(cat "$T/err")"; done_testing; exit; }
echo load | sp fs write "$SBX" /home/user/load.txt
is "a file to read" "$(sp fs read "$SBX" /home/user/load.txt 2>&1)" load
mkdir "$T/w"

# --- the clients: 2 readers, 2 writers of new files, until $T/stop -------------
for r in 1 2; do
	(
		while [ ! -f "$T/stop" ]; do
			out=$(timeout 30 space -v fs read "$SBX" /home/user/load.txt 2>>"$T/load.r$r.err")
			if [ "$out" = load ]; then echo ok; else echo fail; fi
		done >"$T/load.r$r"
	) &
	UP_KILL="$UP_KILL $!"
done
for r in 1 2; do
	(
		n=0
		while [ ! -f "$T/stop" ]; do
			n=$((n + 1)); f="c$r.$n"
			printf 'writer %s, write %s, %s\n' "$r" "$n" "$(od -An -N8 -tx8 /dev/urandom)" >"$T/w/$f"
			# acknowledged = the CLI said it was written: it must stay
			if timeout 30 space -v fs write "$SBX" "/home/user/$f" <"$T/w/$f" 2>>"$T/load.w$r.err"; then
				echo "$f" >>"$T/acked"; echo ok
			else
				echo fail
			fi
		done >"$T/load.w$r"
	) &
	UP_KILL="$UP_KILL $!"
done
sleep 1

# --- the chaos: moves, and a kill -9 of every kind of process ------------------
# killed PROCESS-KIND PID: a line in the log, for the diagnostics
killed() { echo "$1 (pid $2)" >>"$T/kills"; }
# move_with KIND: a move, with a kill -9 landing at a random moment of it
# (see below): the source's bridge or guest, or the target's
# sbx-manager (restarted by the supervisor, which relaunches the install)
move_with() {
	set -- "$1" $(cur)
	from=$2; g=$3; to=$(other "$from")
	bp=$(bridge_of "$from" "$g")
	case $1 in
	source-bridge) v=$bp ;;
	source-guest) v=$(guest_of "$bp") ;;
	target-manager) v=$(daemon_pid sbx-manager "$to") ;;
	*) v= ;;
	esac
	# from 40 ms before the call to 60 ms after it: the source retires a
	# few ms after the call, so a kill before it is the one that races the
	# relaunch with the retirement
	d=$(rnd 100)
	if [ "$d" -lt 40 ]; then
		kill9 "$v" 2>/dev/null && killed "$1 $((40 - d)) ms before the move $from -> $to" "$v"
		sleep "0.0$(printf '%02d' $((40 - d)))"
	fi
	sp move "$SBX" --to "$to" >>"$T/moves.out" 2>>"$T/moves.err" &
	mv=$!
	if [ "$d" -ge 40 ]; then
		sleep "0.0$(printf '%02d' $((d - 40)))"
		kill9 "$v" 2>/dev/null && killed "$1 $((d - 40)) ms into the move $from -> $to" "$v"
	fi
	if wait "$mv"; then moves_ok=$((moves_ok + 1)); else diag "move $from -> $to ($1) failed: $(tail -1 "$T/moves.err")"; fi
}
moves_ok=0; moves=0
for step in move source-bridge bridge source-guest guest target-manager node-api \
    move manager control move source-bridge; do
	sleep 1.2
	set -- $(cur); w=$1; g=$2
	case $step in
	move|source-*|target-*)
		moves=$((moves + 1)); move_with "$step" ;;
	bridge)
		p=$(bridge_of "$w" "$g"); kill9 "$p" && killed "bridge of g$g on $w" "$p" ;;
	guest)
		p=$(guest_of "$(bridge_of "$w" "$g")"); kill9 "$p" && killed "guest of g$g on $w" "$p" ;;
	node-api|manager)
		d=$step; [ $d = manager ] && d=sbx-manager
		p=$(daemon_pid "$d" "$w"); kill9 "$p" && killed "$d of $w" "$p" ;;
	control)
		# between operations: an operation the control plane held when it
		# died is taken over only when its lease expires (60 s by default)
		p=$(daemon_pid space-control); kill9 "$p" && killed "space-control" "$p" ;;
	esac
done
sleep 2
touch "$T/stop"
for p in $UP_KILL; do wait "$p"; done
UP_KILL=""
sed 's/^/# killed: /' "$T/kills"
# the kills between moves always find their process; one during a move
# may find the source's bridge already stopped by the retirement
is "the 5 kills between moves landed" "$(grep -vc ' the move ' "$T/kills")" 5
diag "$(grep -c ' the move ' "$T/kills") of 4 kills around moves landed"
is "$moves moves under load and kills, each completed" "$moves_ok" "$moves"

# --- what the clients saw ----------------------------------------------------
cat "$T"/load.*.err >"$T/load.err"
calls=$(cat "$T"/load.r? "$T"/load.w? | wc -l)
fails=$(cat "$T"/load.r? "$T"/load.w? | grep -c fail)
diag "load: $calls calls, $fails failed, $(grep -c "served by" "$T/load.err") answers, $(wc -l <"$T/acked") acknowledged writes"
check "the clients made calls" test "$calls" -gt 40
# "route: attempt 1: gen 3 on w1: HTTP 200, served by gen 3 on w1"
bad=$(awk '/served by/ { w = $7; sub(/:$/, "", w); if ($5 != $13 || w != $15) print }' "$T/load.err" | head -5)
is "every answer came from the execution its capability named" "$bad" ""
is "no answer was flagged as a mismatch" "$(grep -c MISMATCH "$T/load.err")" 0
is "no call made more than one rebuilt attempt" \
	"$(grep "done:" "$T/load.err" | grep -vc ", [01] rebuilt attempts\{0,1\},")" 0
diag "calls that repaired their route with one rebuilt attempt: $(grep -c "done: .* 1 rebuilt attempt," "$T/load.err")"
grep "^space: " "$T/load.err" | sed 's/[0-9a-z_]\{26,\}/…/g' | sort | uniq -c | sort -rn | head -8 | sed 's/^/#   /'
# a call fails only in the short windows a kill opens (no route while a
# daemon restarts, a request cut by its bridge's death)
check "at least half of the calls succeeded" test $((fails * 2)) -le "$calls"

# --- convergence -------------------------------------------------------------
i=0
while [ $i -lt 300 ]; do
	a=$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$SBX' AND state IN ('pending','starting','serving','retiring')")
	v=$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$SBX' AND state='serving'")
	r1=$(wsql w1 "SELECT generation FROM records WHERE sandbox='$SBX' AND state IN ('starting','serving')")
	r2=$(wsql w2 "SELECT generation FROM records WHERE sandbox='$SBX' AND state IN ('starting','serving')")
	st=$(sp show "$SBX" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["state"])' 2>/dev/null)
	[ "$st $a $v" = "running 1 1" ] && [ -n "$r1$r2" ] && [ "$r1" = "" -o "$r2" = "" ] && break
	sleep 0.1; i=$((i + 1))
done
is "converged: running, one serving execution (control: $a active, $v serving; records: w1 [$r1] w2 [$r2])" \
	"$st $a $v $([ -n "$r1$r2" ] && [ -z "$r1" -o -z "$r2" ] && echo one)" "running 1 1 one"
is "... the same generation everywhere" "$r1$r2" "$(csql "SELECT generation FROM executions WHERE sandbox='$SBX' AND state='serving'")"
is "no generation reused, none going down" \
	"$(csql "SELECT COUNT(*) - COUNT(DISTINCT generation) FROM executions WHERE sandbox='$SBX'") $(csql "SELECT COUNT(*) FROM executions a JOIN executions b ON a.sandbox = b.sandbox AND a.rowid < b.rowid AND a.generation >= b.generation")" "0 0"
bad=0
for f in $(cat "$T/acked"); do
	sp fs read "$SBX" "/home/user/$f" >"$T/back" 2>>"$T/verify.err" && cmp -s "$T/back" "$T/w/$f" || { bad=$((bad + 1)); diag "$f differs or is gone"; }
done
is "every acknowledged write reads back unchanged ($(wc -l <"$T/acked") files)" "$bad" 0
echo after | sp fs write "$SBX" /home/user/after.txt
is "the platform serves new writes" "$(sp fs read "$SBX" /home/user/after.txt 2>&1)" after
diag "relaunches: $(cat "$D"/logs/*sbx-manager*.log 2>/dev/null | grep -c relaunching); supervisor restarts: $(grep -c restarting "$T/up.log")"
check "no sanitizer report in any log" sh -c "! cat '$D'/logs/*.log | grep -Eq 'Sanitizer|runtime error'"

sp kill "$SBX" >/dev/null 2>&1
stop_up
is "space up stops cleanly" "$up_rc" 0
done_testing
