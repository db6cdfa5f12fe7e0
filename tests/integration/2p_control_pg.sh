#!/bin/sh
# Control-plane tests again, on PostgreSQL: each script runs with
# SPACE_TEST_STORE=pg (tests/lib.sh's ctl_init, lib_platform.sh's
# platform_init, lib_up.sh's up_init and 29 honour it), so it starts a
# fresh cluster of its own (tests/lib_pg.sh), the daemon and its
# subcommands use it, and the test's own SQL checks read it. One result
# line per script: ok when every check of it passed; the failing checks
# are shown otherwise. SPACE_PG_TESTS sets the list (e.g. "20 21 23 24").
#
# By default every control-plane test: 20-27 and 29 (credentials,
# generations under concurrent creates, kill -9 durability, capabilities
# and key rotation, bad input, lifecycle leases by compare-and-swap, a
# crash in the middle of a lifecycle operation, a move end to end, two
# daemons handing leases over while one is stopped or killed), 63 (the
# snapshot store's collection: the reference queries), 2s (refusals per
# sandbox: an upsert of its own), 2t (the failover of a lost worker's
# sandboxes, two daemons sweeping). 2r_control_pg_replicas.sh runs three
# replicas on PostgreSQL. 28 checks control.db's file modes: nothing to
# check on PostgreSQL. Verified on PostgreSQL too, and left to a manual
# run because what they add runs the same statements as the ones above:
# 69 (template references), 71 (egress policies, needs network
# namespaces), 72 (declared ports), 73 (edge credentials, traffic tokens).
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_pg.sh"
if [ ! -x "$PG_BIN/initdb" ]; then
	not_ok "a PostgreSQL server is installed (postgresql in packages.txt)"
	done_testing; exit
fi
L=$(mktemp -d)
trap 'rm -rf "$L"' EXIT INT TERM
for n in ${SPACE_PG_TESTS:-20 21 22 23 24 25 26 27 29 63 2s 2t}; do
	for t in "$SPACE_TOP"/tests/integration/${n}_*.sh; do
		[ -f "$t" ] || continue
		name=$(basename "$t" .sh)
		t0=$(date +%s)
		SPACE_TEST_STORE=pg timeout -k 10 600 sh "$t" >"$L/$name.log" 2>&1
		rc=$?
		p=$(grep -c '^ok ' "$L/$name.log")
		f=$(grep -c '^not ok ' "$L/$name.log")
		if [ "$rc" = 0 ] && [ "$f" = 0 ] && [ "$p" -gt 0 ]; then
			ok "$name on PostgreSQL: $p checks ($(( $(date +%s) - t0 )) s)"
		else
			not_ok "$name on PostgreSQL: $p passed, $f failed, exit $rc"
			grep -E '^not ok |^#' "$L/$name.log" | head -20 | sed 's/^/#   /'
			tail -5 "$L/$name.log" | sed 's/^/#   | /'
		fi
	done
done
done_testing
