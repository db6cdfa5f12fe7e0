#!/bin/sh
# The move, pause and resume tests again in the layout of simulated hosts
# (tests/lib_hosts.sh): each script runs with SPACE_TEST_HOSTS=1, so
# space-control, each worker and space-edge (when the test starts one)
# run in a network namespace of their own, with their own address on a
# bridge the test made, and reach each other only through it. One result
# line per script: ok when every check of it passed; the failing checks
# are shown otherwise. SPACE_HOSTS_TESTS sets the list (default 27 53 55
# 5j: a move between two workers, pause and resume with the files back, a
# retire reaching the old worker, a sandbox's web server through
# space-edge on host "edge" before and after a move; 54, the crash
# recovery, passes too but is long: SPACE_HOSTS_TESTS=54).
# 5i_host_loss.sh kills a host in the same layout.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
L=$(mktemp -d)
trap 'rm -rf "$L"' EXIT INT TERM
run_scripts "on simulated hosts" "${SPACE_HOSTS_TESTS:-27 53 55 5j}" SPACE_TEST_HOSTS=1
done_testing
