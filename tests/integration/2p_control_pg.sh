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
run_scripts "on PostgreSQL" "${SPACE_PG_TESTS:-20 21 22 23 24 25 26 27 29 63 2s 2t}" SPACE_TEST_STORE=pg
done_testing
