#!/bin/sh
# ci: once
# The protocol model (docs/model/space.pml, docs/model.md) checked by spin:
# the safety properties in every reachable state, progress under weak
# fairness; then each property is shown able to fail, by checking a model
# with one rule of the protocol taken out (a mutant), which must be refused.
. "$(dirname "$0")/../lib.sh"
command -v spin >/dev/null || { echo "not ok 1 - spin is not installed (packages.txt)"; exit 1; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cp "$SPACE_TOP/docs/model/space.pml" "$T/space.pml"
cd "$T" || exit 1

# check MODEL MODE: prints spin's verdict line; MODE safety or progress
check() {
	rm -f pan pan.* _spin_nvr.tmp
	spin -a "$1" >spin.out 2>&1 || { cat spin.out; return 2; }
	if [ "$2" = safety ]; then
		gcc -O2 -w -DSAFETY -DNOCLAIM -o pan pan.c || return 2
		./pan -m400000 >pan.out 2>&1
	else
		gcc -O2 -w -DNFAIR=3 -o pan pan.c || return 2
		./pan -a -f -m400000 -N progress >pan.out 2>&1
	fi
	grep -q 'errors: 0' pan.out && return 0
	grep -q 'errors: [1-9]' pan.out && return 1
	cat pan.out; return 2
}

n=0
ok_if() { n=$((n + 1)); if eval "$1"; then echo "ok $n - $2"; else echo "not ok $n - $2"; tail -20 pan.out 2>/dev/null | sed 's/^/# /'; fi; }

check space.pml safety; rc=$?
ok_if '[ $rc = 0 ]' "model: never two serving executions, no request served after its retirement was acknowledged, a second refusal only while not running ($(grep -o '[0-9.e+]* states, stored' pan.out))"
ok_if 'grep -q "depth reached" pan.out && ! grep -q "max search depth too small" pan.out' "model: the search was exhaustive (no depth cut-off)"
check space.pml progress; rc=$?
ok_if '[ $rc = 0 ]' "model: with fair processes and network every request is answered and every move completes"

# mutants: each must be refused by the checker
mutant() { # name sed-expression mode
	sed "$2" space.pml >m.pml
	if cmp -s space.pml m.pml; then
		n=$((n + 1)); echo "not ok $n - mutant $1: the edit did not apply"; return
	fi
	check m.pml "$3"; rc=$?
	ok_if '[ $rc = 1 ]' "mutant refused: $1"
}
mutant "a commit without the lease fence" 's/^#define FENCE .*/#define FENCE true/' safety
mutant "the next generation before the retirement is acknowledged" 's/^\([[:space:]]*\)rep_retired\[cur_gen\] ->/\1true ->/' safety
mutant "a retirement acknowledged before it is committed" 's/rec_state\[w\] = 2; g = rec_gen\[w\]/g = rec_gen[w]/' safety
mutant "no route hold for a repair" 's/if :: repair -> hold = true :: else -> skip fi/skip/' safety
mutant "a route hold never released" 's/hold = false .*/skip/' progress
