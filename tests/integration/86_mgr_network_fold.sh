#!/bin/sh
# A tenant that changes its sandbox's declared ports (or its egress
# policy) in a loop does not stall its worker (msg_assignment_fold;
# docs/worker.md, "Assignments"): each change is a network assignment, and the worker queues at most
# JOBS_MAX jobs before it stops taking assignments for every sandbox; a
# change queued behind another one of the same execution, with nothing
# between them, is folded into it, so a burst costs one or two jobs, not
# hundreds, and what is applied in the end is the last change. Here the
# worker's control client is stopped while the tenant posts 200 changes,
# so that they reach the worker in one burst; then the worker applies the
# last ports declared, has folded most of them, and still installs another
# sandbox at once.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
CC=
platform_on_cleanup() { [ -n "$CC" ] && kill -CONT "$CC" 2>/dev/null; true; }
napplied() { grep -c "gateway: $S declares" "$T/mgr_w1.log"; }
folded() { awk '$1 == "space_sbxmgr_network_assignments_folded_total" { print $2 }' "$T/w1/metrics.prom"; }

# the control plane's own bound on a sandbox's changes (2x) is not this
# test's subject: off here
CTL_FLAGS="--network-changes-per-minute 0"
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "create S on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "S running" wait_state "$S" running 30
P0=$(napplied)

CC=$(ctl_child "$M1")
check "w1's control client found ($CC)" test -n "$CC"
kill -STOP "$CC"
# 200 changes on one kept-alive connection: a port declared and removed
# again, 197 times over, then ports 7001 to 7003 declared
python3 - "$CP" "$K" "$S" >"$T/posts" 2>&1 <<'PY'
import http.client, json, sys
port, key, sbx = sys.argv[1:4]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
codes = {}
def req(method, path, body=None):
    c.request(method, "/v1/sandboxes/%s/%s" % (sbx, path), json.dumps(body) if body else None,
              {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    codes[r.status] = codes.get(r.status, 0) + 1
for i in range(197):
    if i % 2 == 0:
        req("POST", "ports", {"port": 2000 + i})
    else:
        req("DELETE", "ports/%d" % (2000 + i - 1))
for p in (7001, 7002, 7003):
    req("POST", "ports", {"port": p})
print(" ".join("%d:%d" % kv for kv in sorted(codes.items())))
PY
is "the control plane took the 200 changes" "$(cat "$T/posts")" "200:200"
kill -CONT "$CC"
CC=

last_applied() { grep "gateway: $S declares" "$T/mgr_w1.log" | tail -1 | grep -q "declares 4 port(s)"; }
check "w1 applies the last change (ports 2196, 7001, 7002, 7003)" eventually 30 last_applied
check "... its metrics written since" prom_fresh "$T/w1/metrics.prom"
F=$(folded)
diag "port lists applied for the 200 changes: $(( $(napplied) - P0 )); folded: $F"
check "most changes were folded into one still queued ($F of 200)" test "${F:-0}" -ge 100
check "... so w1 applied far fewer port lists than it was sent" test $(( $(napplied) - P0 )) -lt 100
is "a sandbox created on w1 right after" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S2=$(jget id)
check "... runs" wait_state "$S2" running 30
check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
