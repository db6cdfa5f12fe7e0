#!/bin/sh
# kill -9 of every daemon of the real platform (space-control, two workers:
# sbx-manager + node-api each, the bridges, a guest) at points of lifecycle
# operations, then restart it and check that the platform converges within
# bounded time: one serving execution per sandbox (control plane and both
# workers' records), generations only ever go up, every acknowledged write
# reads back unchanged, a retired execution refuses old capabilities, and
# new operations are served.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# an operation whose daemon died is taken over once its lease expires: that
# TTL (60 s by default) bounds the convergence after a crash of
# space-control, so it is short here
CTL_FLAGS="--lease-ttl 5"
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP1=$(free_port); NP2=$(free_port)

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

# route: a fresh capability for $S (retried while the sandbox is between
# executions); sets CAP, E (endpoint), R (route)
route() {
	i=0
	while [ $i -lt 150 ]; do
		st=$(cpost "/v1/sandboxes/$S/routes" '{"access":["exec","fs:r","fs:w"]}')
		[ "$st" = 200 ] && { CAP=$(jget capability); E=$(jget endpoint); R=$(jget route); return 0; }
		[ "$st" = 503 ] || { diag "route: $st $(cat "$T/body")"; return 1; }
		sleep 0.2; i=$((i + 1))
	done
	return 1
}
# write NAME: writes $T/data/NAME at /home/user/NAME; an acknowledged write
# (200) is remembered and must stay readable with that content for good
write() {
	st=$(napi_at "$E" PUT "files?path=/home/user/$1" --data-binary @"$T/data/$1")
	[ "$st" = 200 ] && { grep -qx "$S $1" "$T/acked" 2>/dev/null || echo "$S $1" >>"$T/acked"; }
	[ "$st" = 200 ]
}
mkdata() { printf '%s\n' "$2" >"$T/data/$1"; }
# verify_acked: every acknowledged write of $S reads back identical
verify_acked() {
	bad=0
	for f in $(awk -v s="$S" '$1 == s { print $2 }' "$T/acked"); do
		st=$(napi_at "$E" GET "files?path=/home/user/$f")
		[ "$st" = 200 ] && cmp -s "$T/body" "$T/data/$f" || { bad=$((bad + 1)); diag "$f: $st"; }
	done
	[ $bad = 0 ]
}
PREVGEN=0
# converged LABEL: within 30 s the sandbox runs with exactly one serving
# execution in the control plane and on the workers together, a generation
# above every earlier one, and every acknowledged write is intact
converged() {
	wait_state "$S" running 30 || { not_ok "$1: running (is $(jget state "$T/sbx"))"; return; }
	g=$(jget execution.generation "$T/sbx"); w=$(jget execution.worker "$T/sbx")
	i=0
	while [ $i -lt 300 ]; do
		a=$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state IN ('pending','starting','serving','retiring')")
		v=$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state='serving'")
		r1=$(wsql w1 "SELECT generation FROM records WHERE sandbox='$S' AND state IN ('starting','serving')")
		r2=$(wsql w2 "SELECT generation FROM records WHERE sandbox='$S' AND state IN ('starting','serving')")
		# and the worker serves the activation the control plane names,
		# with a live bridge (a relaunch in progress is not converged)
		ca=$(csql "SELECT activation FROM executions WHERE sandbox='$S' AND state='serving'")
		set -- "$1" $(wsql "$w" "SELECT activation, bridge_pid FROM records WHERE sandbox='$S' AND state='serving'" | tr '|' ' ')
		[ "$a $v" = "1 1" ] && [ "$r1$r2" = "$g" ] && [ "${2:-}" = "$ca" ] && alive "${3:-0}" && break
		[ $i = 0 ] && first="control: $a active, $v serving; records: w1 [$r1] w2 [$r2]"
		sleep 0.1; i=$((i + 1))
	done
	[ $i -gt 0 ] && diag "$1: running (g$g) but for $i00 ms not alone: $first"
	[ -n "$CRASHT" ] && { diag "$1: converged $(( ($(date +%s%N) - CRASHT) / 1000000 )) ms after the kill"; CRASHT=; }
	is "$1: one serving execution (control: $a active, $v serving; records: w1 [$r1] w2 [$r2]) = g$g on $w" \
		"$a $v $r1$r2" "1 1 $g"
	is "$1: generation $g above every earlier one ($PREVGEN), none reused" \
		"$([ "$g" -gt "$PREVGEN" ] && echo up) $(csql "SELECT COUNT(*) - COUNT(DISTINCT generation) FROM executions WHERE sandbox='$S'") $(csql "SELECT COUNT(*) FROM executions a JOIN executions b ON a.sandbox = b.sandbox AND a.rowid < b.rowid AND a.generation >= b.generation")" "up 0 0"
	PREVGEN=$g
	if route; then
		check "$1: every acknowledged write reads back ($(awk -v s="$S" '$1 == s' "$T/acked" | wc -l) files)" verify_acked
		n=$(($(wc -l <"$T/acked") + 1)); mkdata "after$n" "written after: $1"
		check "$1: the platform serves new writes" write "after$n"
	else
		not_ok "$1: a route"
	fi
}
# refused_old OLDCAP OLDENDPOINT LABEL: the old execution refuses
# (the capability re-signed with a fresh expiry: capabilities live 120 s, and
# a slow machine must not turn a check of the route into one of the expiry)
refused_old() {
	c=$CAP; CAP=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$1" 0 2>>"$T/ctl.log")
	is "$3: the old capability at the old worker -> 409 refresh_route" \
		"$(napi_at "$2" POST exec --data-binary '{"argv":["true"]}') $(jget error)" "409 refresh_route"
	CAP=$c
}
nport() { case "$1" in w1) echo "$NP1" ;; *) echo "$NP2" ;; esac; }
mgr_of() { case "$1" in w1) echo M1 ;; *) echo M2 ;; esac; }
restart_mgr() { case "$1" in w1) start_mgr 1 w1 "$NP1" ;; *) start_mgr 2 w2 "$NP2" ;; esac; }
restart_napi() { case "$1" in w1) start_napi 1 w1 "$NP1" ;; *) start_napi 2 w2 "$NP2" ;; esac; }
cur_worker() { sbx "$S"; jget execution.worker "$T/sbx"; }
other() { [ "$1" = w1 ] && echo w2 || echo w1; }

mkdir "$T/data"; : >"$T/acked"
is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 30
route
mkdata one "first file"; check "an acknowledged write" write one
PREVGEN=1

# 1. the source's sbx-manager killed right after the move call
OC=$CAP OE=$E
is "move w1 -> w2: 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
crash M1; restart_mgr w1
converged "source sbx-manager killed right after the move call"
is "... it ended on w2" "$(cur_worker)" w2
refused_old "$OC" "$OE" "source killed after the call"

# 2. the source's sbx-manager killed once it reported the retirement
OC=$CAP OE=$E; from=$(cur_worker); g=$(jget execution.generation "$T/sbx")
is "move $from -> $(other "$from"): 202" "$(cpost "/v1/sandboxes/$S/move" "{\"to\":\"$(other "$from")\"}")" 202
i=0; while [ "$(csql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$g")" != retired ] && [ $i -lt 1500 ]; do sleep 0.02; i=$((i + 1)); done
check "generation $g reported retired" test $i -lt 1500
crash "$(mgr_of "$from")"; restart_mgr "$from"
converged "source sbx-manager killed after it reported retired"
refused_old "$OC" "$OE" "source killed after retiring"

# 2b. the source's sbx-manager killed between its "retired" commit and the
#     report of the archive (the retirement is applied again after the
#     restart and must archive again, not report "retired" without one)
OC=$CAP OE=$E; from=$(cur_worker); g=$(jget execution.generation "$T/sbx")
is "move $from -> $(other "$from"): 202" "$(cpost "/v1/sandboxes/$S/move" "{\"to\":\"$(other "$from")\"}")" 202
i=0; while [ "$(wsql "$from" "SELECT state FROM records WHERE sandbox='$S' AND generation=$g")" != retired ] && [ $i -lt 3000 ]; do i=$((i + 1)); done
crash "$(mgr_of "$from")"
cs=$(csql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$g"); gold=$g
diag "killed with the worker's record retired and the control plane's execution '$cs'"
restart_mgr "$from"
converged "source sbx-manager killed after its retired commit (control: $cs)"
refused_old "$OC" "$OE" "source killed while archiving"
[ "$cs" = retiring ] && check "... the restarted sbx-manager archived the stopped layer again" \
	grep -q "$S g$gold again: archiving" "$T/mgr_$from.log"

# 3. the target's sbx-manager killed during the install
OC=$CAP OE=$E; from=$(cur_worker); to=$(other "$from"); g=$(jget execution.generation "$T/sbx")
is "move $from -> $to: 202" "$(cpost "/v1/sandboxes/$S/move" "{\"to\":\"$to\"}")" 202
i=0; while [ -z "$(wsql "$to" "SELECT state FROM records WHERE sandbox='$S' AND generation > $g AND state IN ('starting','serving')")" ] && [ $i -lt 3000 ]; do i=$((i + 1)); done
seen=$(wsql "$to" "SELECT state FROM records WHERE sandbox='$S' AND generation > $g")
crash "$(mgr_of "$to")"
diag "target's record was '$seen' when its sbx-manager was killed"
restart_mgr "$to"
converged "target sbx-manager killed during the install ($seen)"
refused_old "$OC" "$OE" "target killed during install"

# 4. space-control killed during a pause, then during the resume
OC=$CAP OE=$E
is "pause: 202" "$(cpost "/v1/sandboxes/$S/pause" '{}')" 202
sleep "0.$(printf '%03d' $(( $(od -An -N2 -tu2 /dev/urandom) % 100 )))"
diag "pause: the operation was at '$(csql "SELECT step FROM operations WHERE sandbox='$S' ORDER BY rowid DESC LIMIT 1")' when space-control was killed"
crash CTL; check "space-control restarted" start_ctl
check "paused within 30 s after the crash" wait_state "$S" paused 30
diag "paused $(( ($(date +%s%N) - CRASHT) / 1000000 )) ms after the kill (lease TTL 5 s)"
is "paused: no execution serving anywhere" \
	"$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state IN ('pending','starting','serving','retiring')") [$(wsql w1 "SELECT generation FROM records WHERE sandbox='$S' AND state IN ('starting','serving')")$(wsql w2 "SELECT generation FROM records WHERE sandbox='$S' AND state IN ('starting','serving')")]" "0 []"
refused_old "$OC" "$OE" "paused"
is "resume: 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
sleep "0.$(printf '%03d' $(( $(od -An -N2 -tu2 /dev/urandom) % 300 )))"
diag "resume: the operation was at '$(csql "SELECT step FROM operations WHERE sandbox='$S' ORDER BY rowid DESC LIMIT 1")' when space-control was killed"
crash CTL; check "space-control restarted" start_ctl
converged "space-control killed during the resume (lease TTL 5 s)"

# 5. node-api killed during a 64 MiB upload
w=$(cur_worker); route
mkdata big "the previous content"; check "a small file first" write big
head -c $((64 * 1048576 + 1)) /dev/urandom >"$T/big.new"
curl -s -m 30 -o /dev/null -w '%{http_code}' -X PUT -H "Authorization: Bearer $CAP" --limit-rate 16M \
	--data-binary @"$T/big.new" "$E/v1/sandboxes/$S/files?path=/home/user/big" >"$T/up.code" 2>/dev/null &
UP=$!
sleep 1.5
case $w in w1) crash N1 ;; *) crash N2 ;; esac
wait $UP; up=$(cat "$T/up.code")
check "the upload cut by the crash is not acknowledged (curl: $up)" test "$up" != 200
restart_napi "$w"; CRASHT=
is "the file keeps its previous content" "$(napi_at "$E" GET 'files?path=/home/user/big') $(cat "$T/body")" "200 the previous content"
i=0; left=
while [ $i -lt 50 ]; do
	napi_at "$E" POST exec --data-binary '{"argv":["ls","-a","/home/user"]}' >/dev/null
	left=$(jget stdout | grep -c 'space-'); [ "$left" = 0 ] && break
	sleep 0.1; i=$((i + 1))
done
is "no temporary file of the cut upload left behind" "$left" 0
cp "$T/big.new" "$T/data/big"
check "the next 64 MiB write succeeds" write big
is "... and reads back" "$(napi_at "$E" GET 'files?path=/home/user/big')" 200
check "... identical" cmp -s "$T/body" "$T/data/big"

# 6a. the bridge killed while its sbx-manager is down: relaunched as
#     activation + 1 when sbx-manager comes back
w=$(cur_worker); route; OC=$CAP OE=$E
act=$(wsql "$w" "SELECT activation FROM records WHERE sandbox='$S'")
bp=$(wsql "$w" "SELECT bridge_pid FROM records WHERE sandbox='$S'")
crash "$(mgr_of "$w")"
kill9 "$bp"
t0=$(date +%s%N)
restart_mgr "$w"; CRASHT=
i=0; while [ "$(wsql "$w" "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" != "serving $((act + 1))" ] && [ $i -lt 300 ]; do sleep 0.02; i=$((i + 1)); done
diag "relaunched and serving $(( ($(date +%s%N) - t0) / 1000000 )) ms after sbx-manager was started again"
is "bridge killed while sbx-manager was down: relaunched as activation $((act + 1))" \
	"$(wsql "$w" "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" "serving $((act + 1))"
CAP=$OC
is "the old activation's capability -> 409 refresh_route activation_mismatch" \
	"$(napi_at "$OE" POST exec --data-binary '{"argv":["true"]}') $(jget error) $(jget reason)" "409 refresh_route activation_mismatch"
i=0; while [ $i -lt 100 ]; do
	cpost "/v1/sandboxes/$S/routes" "{\"access\":[\"exec\",\"fs:r\",\"fs:w\"],\"rejected\":$R}" >/dev/null
	[ "$(jget route.activation)" = "$((act + 1))" ] && break
	sleep 0.1; i=$((i + 1))
done
CAP=$(jget capability); E=$(jget endpoint)
is "a new route names activation $((act + 1))" "$(jget route.activation)" "$((act + 1))"
check "every acknowledged write reads back on the relaunched bridge" verify_acked

# relaunched WORKER ACT OLDPID LABEL: within 10 s the record serves
# activation ACT with a bridge other than OLDPID, and the control plane
# shows that activation serving
relaunched() {
	i=0; while [ "$(wsql "$1" "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" != "serving $2" ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
	diag "$4: relaunched and serving as activation $2 $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill"
	is "$4: relaunched as activation $2 (record serving, a new bridge)" \
		"$(wsql "$1" "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'") $([ "$(wsql "$1" "SELECT bridge_pid FROM records WHERE sandbox='$S'")" != "$3" ] && echo new)" "serving $2 new"
	i=0; while [ "$(csql "SELECT state || ' ' || activation FROM executions WHERE sandbox='$S' AND state='serving'")" != "serving $2" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
	is "$4: the control plane shows activation $2 serving" \
		"$(csql "SELECT state || ' ' || activation FROM executions WHERE sandbox='$S' AND state='serving'")" "serving $2"
}
# new_route ACT LABEL: a route naming activation ACT, then the files
new_route() {
	i=0; while [ $i -lt 100 ]; do
		cpost "/v1/sandboxes/$S/routes" "{\"access\":[\"exec\",\"fs:r\",\"fs:w\"],\"rejected\":$R}" >/dev/null
		[ "$(jget route.activation)" = "$1" ] && break
		sleep 0.1; i=$((i + 1))
	done
	CAP=$(jget capability); E=$(jget endpoint); R=$(jget route)
	is "$2: a new route names activation $1" "$(jget route.activation)" "$1"
	check "$2: every acknowledged write reads back on the relaunched bridge" verify_acked
}
# old_mismatch OLDCAP OLDENDPOINT LABEL
old_mismatch() {
	c=$CAP; CAP=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$1" 0 2>>"$T/ctl.log")
	is "$3: the old activation's capability -> 409 refresh_route activation_mismatch" \
		"$(napi_at "$2" POST exec --data-binary '{"argv":["true"]}') $(jget error) $(jget reason)" "409 refresh_route activation_mismatch"
	CAP=$c
}

# 6b. the bridge killed while sbx-manager runs: its pidfd reports the exit
#     and the same relaunch as after a restart runs: activation + 1
OC=$CAP OE=$E; g=$(wsql "$w" "SELECT generation FROM records WHERE sandbox='$S'")
act=$(wsql "$w" "SELECT activation FROM records WHERE sandbox='$S'")
bp=$(wsql "$w" "SELECT bridge_pid FROM records WHERE sandbox='$S'")
kill9 "$bp"; t0=$(date +%s%N)
relaunched "$w" $((act + 1)) "$bp" "bridge killed while sbx-manager runs"
old_mismatch "$OC" "$OE" "bridge killed while sbx-manager runs"
new_route $((act + 1)) "bridge killed while sbx-manager runs"

# 6c. the relaunch is bounded: 3 per generation within 60 s (the one above
#     counts), then the execution fails as before; a crash-looping guest
#     does not keep the worker relaunching it
for n in 2 3; do
	bp=$(wsql "$w" "SELECT bridge_pid FROM records WHERE sandbox='$S'")
	kill9 "$bp"; t0=$(date +%s%N)
	relaunched "$w" $((act + n)) "$bp" "bridge killed again ($n)"
done
OC=$CAP OE=$E
new_route $((act + 3)) "after the third relaunch"
OC=$CAP OE=$E
bp=$(wsql "$w" "SELECT bridge_pid FROM records WHERE sandbox='$S'")
kill9 "$bp"; t0=$(date +%s%N)
i=0; while [ "$(wsql "$w" "SELECT state FROM records WHERE sandbox='$S'")" != failed ] && [ $i -lt 500 ]; do sleep 0.02; i=$((i + 1)); done
diag "fourth bridge exit committed as failed $(( ($(date +%s%N) - t0) / 1000000 )) ms after the kill"
is "a fourth bridge death within 60 s: the record is failed, not relaunched" \
	"$(wsql "$w" "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" "failed $((act + 3))"
check "... and so is the sandbox in the control plane" wait_state "$S" failed 30
is "... its execution failed there too" "$(csql "SELECT state FROM executions WHERE sandbox='$S' AND generation=$g")" failed
refused_old "$OC" "$OE" "bridge killed a fourth time"
is "no route for a failed sandbox" "$(cpost "/v1/sandboxes/$S/routes" '{"access":["exec"]}')" 409

# 6d. the failed execution's layer was archived and sent with the failure
#     report: the sandbox resumes from it as a new generation, with every
#     acknowledged write
is "the failure report carried an archive of generation $g, now the sandbox's latest" \
	"$(csql "SELECT COUNT(*) FROM snapshots WHERE sandbox='$S' AND generation=$g AND state='ready' AND digest=(SELECT snapshot FROM sandboxes WHERE id='$S')")" 1
check "... archived after the record was failed (sbx-manager's log)" grep -q "failed $S g$g: layer archived" "$T/mgr_$w.log"
is "resume the failed sandbox: 202" "$(cpost "/v1/sandboxes/$S/resume" '{}')" 202
converged "resumed from the failed execution's archive"

# 7. the guest (PID 1 of the jail) killed: the bridge ends with it, and is
#    relaunched as activation + 1 with a new guest
is "create a sandbox on w2" "$(cpost /v1/sandboxes '{"worker":"w2"}')" 201
S=$(jget id); PREVGEN=0
check "running" wait_state "$S" running 30
route; OC=$CAP OE=$E
mkdata g1 "guest file"; check "a write" write g1
act=$(wsql w2 "SELECT activation FROM records WHERE sandbox='$S'")
bp=$(wsql w2 "SELECT bridge_pid FROM records WHERE sandbox='$S'")
gp=$(guest_of "$bp")
check "the guest found among the bridge's descendants (pid $gp)" test -n "$gp"
kill9 "$gp"; t0=$(date +%s%N)
st=$(napi_at "$E" POST exec --data-binary '{"argv":["true"]}')
case $st in 503|409) ok "an operation right after the guest died -> $st ($(jget error))" ;; *) not_ok "an operation right after the guest died -> $st" ;; esac
relaunched w2 $((act + 1)) "$bp" "guest killed"
check "the old bridge is gone" sh -c "! kill -0 $bp 2>/dev/null"
old_mismatch "$OC" "$OE" "guest killed"
new_route $((act + 1)) "guest killed"
mkdata g2 "after the guest"; check "guest killed: a new write is served" write g2

# 7b. a bridge or a guest killed at a random moment of a move: on the
#     source (before, during or after its retirement) or on the target
#     (once its bridge runs). Each round must converge like the daemon
#     crashes above; a retirement wins over a relaunch, a relaunch on the
#     target is a new activation of the new generation.
# bridge_of SANDBOX GEN: the pid of that execution's bridge (not a jail
# child of it, which shares the command line until it execs the guest)
bridge_of() {
	for p in $(bridges); do
		tr '\0' ' ' </proc/"$p"/cmdline 2>/dev/null | grep -q -- "--sandbox $1 --generation $2 " || continue
		pp=$(awk '/^PPid:/ { print $2 }' /proc/"$p"/status 2>/dev/null)
		tr '\0' ' ' </proc/"$pp"/cmdline 2>/dev/null | grep -q -- "--sandbox $1 " && continue
		echo "$p"; return 0
	done
	return 1
}
route
k=0
for kind in source-bridge target-bridge source-guest target-guest source-bridge target-bridge source-guest target-guest; do
	k=$((k + 1))
	OC=$CAP OE=$E; from=$(cur_worker); to=$(other "$from"); g=$(jget execution.generation "$T/sbx")
	mkdata "m$k" "written before move $k"; check "round $k: a write before the move" write "m$k"
	# the source's victim is found first; the call runs in the background.
	# The source retires a few ms after the 202, so its kill lands from
	# 30 ms before the call (the relaunch then races the retirement) to
	# 30 ms after it (often the bridge is already stopped: nothing to kill)
	victim=; bp=$(bridge_of "$S" "$g"); d=$(rnd 60); killed=0; when=
	case $kind in source-bridge) victim=$bp ;; source-guest) [ -n "$bp" ] && victim=$(guest_of "$bp") ;; esac
	kill_victim() { kill9 "$victim" 2>/dev/null && { killed=1; CRASHT=$(date +%s%N); }; }
	case $kind in source-*)
		if [ "$d" -lt 30 ]; then
			when="$((30 - d)) ms before the move call"; kill_victim
			sleep "0.0$(printf '%02d' $((30 - d)))"
		fi ;;
	esac
	cpost "/v1/sandboxes/$S/move" "{\"to\":\"$to\"}" >"$T/move.code" &
	MV=$!
	case $kind in
	source-*)
		gen=$g
		if [ "$d" -ge 30 ]; then
			sleep "0.0$(printf '%02d' $((d - 30)))"
			when="$((d - 30)) ms after the move call"; kill_victim
		fi ;;
	target-*)
		gen=$((g + 1))
		i=0; while ! bridge_of "$S" "$gen" >/dev/null && [ $i -lt 1000 ]; do sleep 0.005; i=$((i + 1)); done
		sleep "0.0$(printf '%02d' "$(rnd 60)")"
		bp=$(bridge_of "$S" "$gen")
		case $kind in *-bridge) victim=$bp ;; *) [ -n "$bp" ] && victim=$(guest_of "$bp") ;; esac
		when="once the target's bridge ran"; kill_victim ;;
	esac
	at="source record '$(wsql "$from" "SELECT state || ' a' || activation FROM records WHERE sandbox='$S' AND generation=$g")', target record '$(wsql "$to" "SELECT state || ' a' || activation FROM records WHERE sandbox='$S' AND generation=$((g + 1))")'"
	if [ $killed = 1 ]; then
		diag "round $k: $kind killed (pid $victim) $when; just after: the $at"
		# a bridge ends when its guest dies: converged only after that
		i=0; while alive "$bp" && [ $i -lt 500 ]; do sleep 0.01; i=$((i + 1)); done
	else
		diag "round $k: no $kind left to kill $when (the $at)"
	fi
	wait $MV; is "round $k: move $from -> $to: 202" "$(cat "$T/move.code")" 202
	converged "round $k: $kind killed during a move"
	is "round $k: ... it ended on $to" "$(cur_worker)" "$to"
	refused_old "$OC" "$OE" "round $k"
done
is "the moves' bridge and guest kills left no execution failed" \
	"$(csql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state='failed'")" 0
diag "relaunches: w1 $(grep -c 'relaunching' "$T/mgr_w1.log"), w2 $(grep -c 'relaunching' "$T/mgr_w2.log") (all sections)"

# 8. the platform still serves new sandboxes and moves
is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id); PREVGEN=1
check "running" wait_state "$S" running 30
route; mkdata n1 "new"; check "a write" write n1
is "move -> w2: 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
converged "a new sandbox moved after all the crashes"
is "every sandbox: generations unique" "$(csql "SELECT COUNT(*) FROM (SELECT sandbox, generation FROM executions GROUP BY sandbox, generation HAVING COUNT(*) > 1)")" 0
is "no operation left open, no lease held" \
	"$(csql "SELECT COUNT(*) FROM operations WHERE step <> 'done'") $(csql "SELECT COUNT(*) FROM sandboxes WHERE lease_owner IS NOT NULL")" "0 0"
check "no sanitizer report in any log" sh -c "! cat '$T'/*.log | grep -Eq 'Sanitizer|runtime error'"
done_testing
