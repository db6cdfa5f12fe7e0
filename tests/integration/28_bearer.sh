#!/bin/sh
# One reading of "Authorization: Bearer" (src/libspace/bearer.c) in
# space-control and node-api, from the sender's side: the scheme is
# case-insensitive, the token is exactly one b64token; a second word, a
# glued scheme, another scheme or an overlong header is refused with the
# JSON error of docs/errors.md and never half-read. Around the bearers:
# control.db and records.db (with -wal, -shm) are 0600 whatever the umask,
# and no copy of a capability survives in node-api's or sbx-manager's memory.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

[ "${SPACE_SAN:-0}" = 1 ] && export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
# the first subcommand creates control.db, under the widest umask
CTL_DB_UMASK=0
platform_init
D=$T/c
W=$T/w1
NP=$(free_port)
NU=http://127.0.0.1:$NP

# the error convention: {"error":code,"message":string}, nothing else is an answer
errjson() { python3 -c 'import json,sys
d = json.load(open(sys.argv[1]))
assert isinstance(d.get("message"), str) or isinstance(d.get("reason"), str)
print(d["error"], d.get("reason", "-"))' "$T/body" 2>/dev/null || echo "not-json"; }
# auth URL AUTHZ [curl args...]: the raw Authorization value, status on stdout
auth() { _u=$1 _a=$2; shift 2; curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: $_a" "$@" "$_u"; }
metric() { curl -s "$CU/metrics" | awk -v k="space_control_auth_failures_total{kind=\"$1\"}" '$1 == k { print $2 }'; }

register_worker w1
WK=$(cat "$T/cred_w1")
# ---- database files: the owner's alone ----
is "control.db created 0600 by a subcommand (umask 0)" "$(stat -c %a "$D/control.db")" 600
# an installation from before: the database and a -wal left wider
: >"$D/control.db-wal"
chmod 644 "$D/control.db" "$D/control.db-wal"
check "space-control up" start_ctl
is "a 0644 control.db is narrowed to 0600 at start" "$(stat -c %a "$D/control.db")" 600
is "... and its leftover -wal too" "$(stat -c %a "$D/control.db-wal")" 600
check "... and the change is logged" grep -q 'control.db had mode 0644; set to 0600' "$T/ctl.log"
is "control.db-shm is 0600" "$(stat -c %a "$D/control.db-shm")" 600

# ---- space-control, API keys ----
L=$CU/v1/sandboxes
is "\"Bearer KEY\" -> 200" "$(auth "$L" "Bearer $K")" 200
is "\"bearer KEY\" (scheme is case-insensitive) -> 200" "$(auth "$L" "bearer $K")" 200
is "\"BEARER   KEY   \" -> 200" "$(auth "$L" "BEARER   $K   ")" 200
is "\"Bearer KEY<TAB>\" -> 200" "$(auth "$L" "$(printf 'Bearer %s\t' "$K")")" 200
m0=$(metric malformed)
is "\"Bearer KEY junk\" -> 401" "$(auth "$L" "Bearer $K junk")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "... counted as a malformed credential" "$(metric malformed)" "$((${m0:-0} + 1))"
is "\"Bearer junk KEY\" -> 401" "$(auth "$L" "Bearer junk $K")" 401
is "\"Basic KEY\" -> 401" "$(auth "$L" "Basic $K")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "\"BearerKEY\" -> 401" "$(auth "$L" "Bearer$K")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "\"Bearer<TAB>KEY\" -> 401" "$(auth "$L" "$(printf 'Bearer\t%s' "$K")")" 401
is "\"Bearer\" alone -> 401" "$(auth "$L" "Bearer")" 401
is "\"Bearer KEY,x=y\" -> 401" "$(auth "$L" "Bearer $K,x=y")" 401
is "\"Bearer KEY;\" -> 401" "$(auth "$L" "Bearer $K;")" 401
is "\"Bearer KEY=\" (another secret) -> 401" "$(auth "$L" "Bearer $K=")" 401
is "\"Bearer KEY<DEL>\" -> 401" "$(auth "$L" "$(printf 'Bearer %s\177' "$K")")" 401
long=$(python3 -c 'print("A" * 5000)')
is "overlong header (key + 5000 bytes) -> 401" "$(auth "$L" "Bearer $K$long")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"

# ---- space-control, worker credentials ----
RG=$CU/v1/workers/w1/assignments?after=0
is "\"bearer WK\" on a worker endpoint -> 200" "$(auth "$RG" "bearer $WK")" 200
is "\"Bearer WK junk\" -> 401" "$(auth "$RG" "Bearer $WK junk")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "\"Basic WK\" -> 401" "$(auth "$RG" "Basic $WK")" 401
is "\"BearerWK\" -> 401" "$(auth "$RG" "Bearer$WK")" 401
check "space-control still serves" wait_http "$CU/healthz" 2

# ---- node-api (capabilities; sbx-manager behind it) ----
# records.db does not exist yet: created by sbx-manager under umask 0
MGR_UMASK=0 MGR_CAPACITY=2 MGR_FLAGS="--disk-mb 1100"
start_mgr 1 w1 "$NP"
is "records.db is 0600" "$(stat -c %a "$W/records.db")" 600
is "records.db-wal is 0600" "$(stat -c %a "$W/records.db-wal")" 600
is "records.db-shm is 0600" "$(stat -c %a "$W/records.db-shm")" 600
check "node-api answers /healthz" start_napi 1 w1 "$NP" --metrics-file "$W/metrics.prom"
is "create a sandbox on w1" "$(auth "$L" "Bearer $K" -X POST --data-binary '{"worker":"w1"}')" 201
S=$(jget id)
i=0
while [ $i -lt 200 ]; do
	auth "$L/$S" "Bearer $K" >/dev/null
	[ "$(jget state)" = running ] && break
	sleep 0.1; i=$((i + 1))
done
is "sandbox running" "$(jget state)" running
auth "$L/$S/routes" "Bearer $K" -X POST --data-binary '{"access":["exec"]}' >/dev/null
CAP=$(jget capability)
X=$NU/v1/sandboxes/$S/exec
ex() { auth "$X" "$1" -X POST --data-binary '{"argv":["true"]}'; }
is "\"Bearer CAP\" -> 200" "$(ex "Bearer $CAP")" 200
is "\"bearer CAP\" -> 200" "$(ex "bearer $CAP")" 200
is "\"BEARER  CAP  \" -> 200" "$(ex "BEARER  $CAP  ")" 200
is "\"Basic CAP\" -> 401" "$(ex "Basic $CAP")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "\"BearerCAP\" -> 401" "$(ex "Bearer$CAP")" 401
is "... unauthenticated JSON" "$(errjson)" "unauthenticated -"
is "\"Bearer\" alone -> 401" "$(ex "Bearer")" 401
# a Bearer that is not one capability is a malformed capability at
# node-api (403, docs/protocol.md section 2), refused before sbx-manager
is "\"Bearer CAP junk\" -> 403 malformed_token" "$(ex "Bearer $CAP junk")" 403
is "... deny JSON" "$(errjson)" "deny malformed_token"
is "\"Bearer junk CAP\" -> 403 malformed_token" "$(ex "Bearer junk $CAP")" 403
is "\"Bearer CAP;\" -> 403 malformed_token" "$(ex "Bearer $CAP;")" 403
is "overlong header -> 403 malformed_token" "$(ex "Bearer $CAP$long")" 403
is "... deny JSON" "$(errjson)" "deny malformed_token"
is "the capability still works" "$(ex "Bearer $CAP")" 200
# one grammar for the token (capability_token_kid, the verifier's): a
# footer the verifier refuses is refused by node-api too, so it never
# reaches sbx-manager (whose audit log would show the refusal)
refooter() { python3 -c 'import sys, base64, json
t = sys.argv[1].split(".")
f = json.loads(base64.urlsafe_b64decode(t[3] + "=" * (-len(t[3]) % 4)))
exec(sys.argv[2])
t[3] = base64.urlsafe_b64encode(json.dumps(f, separators=(",", ":")).encode()).decode().rstrip("=")
print(".".join(t))' "$CAP" "$1"; }
seen() { grep -c '"audit":"admission".*"reason":"malformed_token"' "$T/mgr_w1.log"; }
a0=$(seen)
is "a footer with a member besides kid -> 403 malformed_token" "$(ex "Bearer $(refooter 'f["x"] = 1')")" 403
is "... deny JSON" "$(errjson)" "deny malformed_token"
is "a kid that is not a k4.pid -> 403 malformed_token" "$(ex "Bearer $(refooter 'f["kid"] = "k1"')")" 403
is "... deny JSON" "$(errjson)" "deny malformed_token"
is "... both refused by node-api: sbx-manager never saw them" "$(seen)" "$a0"

# ---- the capability does not outlive its requests in memory ----
# Every copy node-api and sbx-manager make of a bearer (header copy, the
# REQUEST frame, jansson's parser and string values) is wiped before it is
# freed; a freed but unwiped buffer keeps its bytes, and root can read them
# from /proc/PID/mem. The needle is 40 characters of the signature.
memhits() { /usr/bin/python3 "$SPACE_TOP/tests/tools/memscan.py" --rw-private "$1" "$2"; }
NEEDLE=$(python3 -c 'import sys; print(sys.argv[1].split(".")[2][-50:-10])' "$CAP")
for i in 1 2 3 4 5; do ex "Bearer $CAP" >/dev/null; done
auth "$X" "Bearer $CAP" -X POST --data-binary '{"argv":' >/dev/null    # refused after parsing
# (a request's buffers are released once its answer completed)
no_hits() { [ "$(memhits "$M1" "$NEEDLE")" = 0 ] && [ "$(memhits "$N1" "$NEEDLE")" = 0 ]; }
i=0; while ! no_hits && [ $i -lt 10 ]; do sleep 1; i=$((i + 1)); done
is "sbx-manager's memory holds no copy of the capability" "$(memhits "$M1" "$NEEDLE")" 0
is "node-api's memory holds no copy of the capability" "$(memhits "$N1" "$NEEDLE")" 0
# the scan itself finds a capability where one is meant to be
check "... (the scan finds the copy this shell holds)" test "$(memhits $$ "$NEEDLE")" -gt 0

# a clean stop; under SPACE_SAN the sanitizers report into these logs
stop N1; stop M1; stop CTL
check "no sanitizer report from the daemons" sh -c "! grep -E 'Sanitizer|runtime error' '$T/ctl.log' '$T/mgr_w1.log' '$T/napi_w1.log'"

done_testing
