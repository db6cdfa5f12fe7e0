#!/bin/sh
# Route repair under churn: the sandbox moves between the two workers and is
# paused and resumed without a pause between operations, while four CLI
# clients read it. A call may fail only because the sandbox really is
# paused (or being paused) when it is made: a call that fails after its one
# rebuilt attempt while the sandbox serves elsewhere is a defect (the repair
# was handed a route that stopped serving before the rebuilt attempt
# arrived). Bounded: CHURN_CALLS calls in all (default 2000; more while
# the churn has not made 8 operations, which a slow build's moves may
# need) or CHURN_SECONDS (default 150), whichever ends first; run it by
# hand with more for a longer churn.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

CALLS=${CHURN_CALLS:-2000}
SECS=${CHURN_SECONDS:-150}
up_init
up_start || exit 1

SBX=$(timeout 60 space create --worker w1 2>"$T/err"); rc=$?
is "create S on w1" "$rc" 0
[ "$rc" = 0 ] || { diag "$(cat "$T/err")"; done_testing; exit; }
echo churn | timeout 60 space fs write "$SBX" /home/user/c.txt
is "a file to read" "$(timeout 60 space fs read "$SBX" /home/user/c.txt 2>&1)" churn

# the clients: each makes CALLS/4 reads and logs one line per call, "ok" or
# the CLI's error; each has its own route cache, as separate agents would
per=$((CALLS / 4))
for r in 1 2 3 4; do
	(
		i=0
		while { [ $i -lt $per ] || [ ! -f "$T/enough" ]; } && [ ! -f "$T/stop" ]; do
			out=$(SPACE_ROUTE_CACHE="$T/routes.$r.json" timeout 30 space fs read "$SBX" /home/user/c.txt 2>&1)
			if [ "$out" = churn ]; then echo ok; else echo "fail: $out" | tr '\n' ' '; echo; fi
			i=$((i + 1))
		done >"$T/calls.$r"
		touch "$T/done.$r"
	) &
	UP_KILL="$UP_KILL $!"
done

# the churn: moves back and forth, and every fourth operation a pause and a
# resume, until every client is done (or SECS); each operation waits until
# it completed, so the next one starts at once after it
where=w1 ops=0 pauses=0 opfail=0
start=$(date +%s)
while :; do
	n=0; for r in 1 2 3 4; do [ -f "$T/done.$r" ] && n=$((n + 1)); done
	[ $n = 4 ] && break
	[ $(( $(date +%s) - start )) -ge "$SECS" ] && { touch "$T/stop"; break; }
	ops=$((ops + 1))
	[ $ops -ge 8 ] && touch "$T/enough"
	if [ $((ops % 4)) = 0 ]; then
		timeout 60 space pause "$SBX" >/dev/null 2>>"$T/ops.err" || opfail=$((opfail + 1))
		timeout 60 space resume "$SBX" >/dev/null 2>>"$T/ops.err" || opfail=$((opfail + 1))
		pauses=$((pauses + 1))
	else
		to=w2; [ "$where" = w2 ] && to=w1
		if timeout 60 space move "$SBX" --to "$to" >/dev/null 2>>"$T/ops.err"; then
			where=$to
		else
			opfail=$((opfail + 1))
		fi
	fi
done
for r in 1 2 3 4; do i=0; while [ ! -f "$T/done.$r" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done; done

cat "$T"/calls.* >"$T/calls"
total=$(wc -l <"$T/calls")
okn=$(grep -c '^ok$' "$T/calls")
# failures the sandbox's state explains: it was paused or being paused
paused=$(grep '^fail' "$T/calls" | grep -c -E 'sandbox is (pausing|paused)')
other=$(grep '^fail' "$T/calls" | grep -v -c -E 'sandbox is (pausing|paused)')
diag "$total calls: $okn ok, $paused refused while paused, $other other failures; $ops operations ($pauses pause+resume), $opfail failed"
check "the clients made calls during the churn (at least 200)" [ "$total" -ge 200 ]
check "the sandbox moved and paused during the calls" [ "$ops" -ge 8 ]
is "no lifecycle operation failed" "$opfail" 0
[ "$opfail" = 0 ] || diag "$(tail -5 "$T/ops.err")"
is "no call failed while the sandbox served (after its one repair)" "$other" 0
[ "$other" = 0 ] || grep '^fail' "$T/calls" | grep -v -E 'sandbox is (pausing|paused)' | sort | uniq -c | sort -rn | head -5 | while read -r l; do diag "$l"; done
check "most calls succeeded" [ "$okn" -ge $((total / 2)) ]
done_testing
