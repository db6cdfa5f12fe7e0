#!/bin/sh
# The refusal audit lines of sbx-manager are bounded in rate (metrics.c,
# audit_refusal; docs/worker.md "Admission"): anyone who reaches node-api
# can have a request refused (a token of the right shape whose signature
# is not the control plane's) and each refusal writes a line, so a flood
# of them would fill the worker's disk with its log. Past 500 at once and
# 50 a second the lines are counted, not written, and the next line
# written says how many were not; the admission counters of metrics.prom
# count every refusal. Here 2,000 forged requests on one connection.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
NU=http://127.0.0.1:$NP
check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP"
is "create S" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "S running" wait_state "$S" running 30
CAP=$(route "$S")
# the capability with one bit of its signature flipped
BAD=$(python3 - "$CAP" <<'PY'
import base64, sys
def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def e(b): return base64.urlsafe_b64encode(b).decode().rstrip("=")
p = sys.argv[1].split(".")
body = bytearray(d(p[2])); body[-54] ^= 1
print("v4.public." + e(bytes(body)) + "." + p[3])
PY
)
CAP=$BAD
is "a forged capability is refused" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "403 bad_signature"
denied() { prom_fresh "$T/w1/metrics.prom" >/dev/null; awk '$1 ~ /^space_sbxmgr_admission_total\{outcome="deny",reason="bad_signature"\}$/ { print $2 }' "$T/w1/metrics.prom"; }
lines() { grep -c '"audit":"admission"' "$T/mgr_w1.log"; }
D0=$(denied); L0=$(lines)
T0=$(date +%s%N)
python3 - "$NP" "$S" "$BAD" >"$T/flood" 2>&1 <<'PY'
import http.client, sys
port, sbx, tok = sys.argv[1:4]
c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=30)
codes = {}
for i in range(2000):
    c.request("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}',
              {"Authorization": "Bearer " + tok, "Content-Type": "application/json"})
    r = c.getresponse(); r.read()
    codes[r.status] = codes.get(r.status, 0) + 1
print(" ".join("%d:%d" % kv for kv in sorted(codes.items())))
PY
T1=$(date +%s%N)
is "2,000 forged requests, each refused" "$(cat "$T/flood")" "403:2000"
SECS=$(( (T1 - T0) / 1000000000 + 1 ))
grown() { [ "$(denied)" -ge $((D0 + 2000)) ]; }
check "metrics.prom counts every refusal" eventually 20 grown
L=$(( $(lines) - L0 ))
diag "refusal lines written for 2,000 refusals in about $SECS s: $L"
check "at most 500 + 50 a second of them were written ($L)" test "$L" -le $((500 + 50 * SECS + 1))
is "A's genuine capability still works" "$(CAP=$(route "$S"); napi POST exec --data-binary '{"argv":["true"]}')" 200
sleep 1
CAP=$BAD
napi POST exec --data-binary '{"argv":["true"]}' >/dev/null
check "the next line written says how many were not" grep -q "refusal lines were not written" "$T/mgr_w1.log"
check "no sanitizer report in the worker's log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/mgr_w1.log'"
done_testing
