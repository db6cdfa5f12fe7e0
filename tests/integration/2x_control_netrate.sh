#!/bin/sh
# space-control bounds how fast a principal may change one sandbox's
# network (egress policy, declared ports; --network-changes-per-minute,
# default 120, a quarter of it at once; netrate.c): each change is an
# assignment row and a job on the worker. From the tenant's side: a burst
# is taken up to the bound, then 429 rate_limited with Retry-After, and
# after that wait a change is taken again; its other sandboxes have their
# own allowance; another principal naming the sandbox gets 404 and spends
# nothing of the owner's.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
. "$SPACE_TOP/tests/lib_simworker.sh"
CTL_FLAGS="--heartbeat-timeout 3600"

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
KB=$(space-control apikey add bob --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true
is "w1 registers" "$(req POST /v1/workers/w1/register "$W1" '{"incarnation":"i1","endpoint":"http://127.0.0.1:9001","capacity":8}')" 200
fetch w1 "$W1" 0
for n in 1 2; do
	req POST /v1/sandboxes "$K" '{"worker":"w1"}' >/dev/null
	eval "S$n=\$(jget id)"
	fetch w1 "$W1"
	report w1 "$W1" serving >/dev/null
done
check "two sandboxes running" wait_state "$S2" running 10

# burst SBX KEY N: N port changes (declare, remove, ...) on one kept-alive
# connection, stopping at the first 429; prints "OKS CODE RETRY-AFTER"
burst() {
	python3 - "$PORT" "$2" "$1" "$3" <<'PY'
import http.client, json, sys
port, key, sbx, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
oks, last, ra = 0, 0, ""
for i in range(n):
    if i % 2 == 0:
        c.request("POST", "/v1/sandboxes/%s/ports" % sbx, json.dumps({"port": 3000 + i}),
                  {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    else:
        c.request("DELETE", "/v1/sandboxes/%s/ports/%d" % (sbx, 3000 + i - 1), None,
                  {"Authorization": "Bearer " + key})
    r = c.getresponse(); r.read()
    last = r.status
    if r.status != 200:
        ra = r.getheader("Retry-After") or ""
        break
    oks += 1
print(oks, last, ra)
PY
}
set -- $(burst "$S1" "$K" 80)
diag "changes taken before the bound: $1; then $2, Retry-After $3"
check "a burst of changes is taken up to the bound (at least 30)" test "$1" -ge 30
is "... then 429" "$2" 429
check "... with a Retry-After" test -n "$3" -a "${3:-0}" -ge 1
RA=$3
is "the answer says why" "$(req POST "/v1/sandboxes/$S1/ports" "$K" '{"port":4001}'; jget error)" "429rate_limited"
is "the owner's other sandbox has its own allowance" "$(req POST "/v1/sandboxes/$S2/ports" "$K" '{"port":4002}')" 200
is "another principal naming S1: 404" "$(req POST "/v1/sandboxes/$S1/ports" "$KB" '{"port":4003}')" 404
set -- $(burst "$S1" "$KB" 40)
is "... however many times (nothing of the owner's is spent)" "$1 $2" "0 404"
sleep "$RA"
is "after Retry-After, a change of S1 is taken again" "$(req POST "/v1/sandboxes/$S1/ports" "$K" '{"port":4004}')" 200
is "the egress policy shares the bound (a burst of it is refused too)" \
	"$(for i in $(seq 1 40); do req POST "/v1/sandboxes/$S2/network" "$K" '{"internet":true}'; echo; done | sort -u | tr '\n' ' ')" "200 429 "
check "space-control still runs" kill -0 "$PID"
done_testing
