#!/bin/sh
# space-control: capabilities verify against the published bundle (with
# the C library through `space token` and with an independent Python
# verifier), carry exactly the current route, live 120 s; rotation keeps
# old tokens valid and switches signing after the publish delay; rejected
# routes and non-serving executions get 503 + Retry-After.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
# the route wait (how long a route request waits for a converging
# execution) is not what this test is about: a short one keeps it fast
CTL_FLAGS="--route-wait-ms 200"
CHECK="$SPACE_TOP/tests/tools/paseto_check.py"

ident() { echo "{\"sandbox\":\"$1\",\"generation\":${2:-1},\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":${3:-1},\"resident\":\"inc1\"}"; }

# verify.py KEYS_JSON TOKEN: verifies the bundle under the root (pinned
# from `space-control keys root`), finds the token's kid in it, verifies the
# token with that key, all with paseto_check.py; prints a JSON summary
cat >"$T/verify.py" <<'PY'
import base64, json, subprocess, sys
def b64d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def pk_hex(paserk):
    assert paserk.startswith("k4.public.")
    return b64d(paserk[len("k4.public."):]).hex()
check, keys, token, pinned = sys.argv[1], json.load(open(sys.argv[2])), sys.argv[3], sys.argv[4]
def verify(pub, tok, implicit):
    r = subprocess.run(["/usr/bin/python3", check, "verify", pub, tok, implicit],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("verification failed: " + r.stderr)
    return json.loads(r.stdout)
bundle = verify(pk_hex(pinned), keys["bundle"], "space-key-bundle-v1")
kid = json.loads(b64d(token.split(".")[3]))["kid"]
match = [k for k in bundle["keys"] if k["kid"] == kid]
if not match:
    sys.exit("kid not in bundle")
claims = verify(pk_hex(match[0]["public"]), token, "space-capability-v1")
print(json.dumps({"kid": kid, "public": match[0]["public"], "claims": claims,
                  "version": bundle["version"], "nkeys": len(bundle["keys"]),
                  "not_after": {k["kid"]: k["not_after"] for k in bundle["keys"]}}))
PY
# seconds between two RFC 3339 instants
span() { python3 -c 'import sys,datetime as d
f=lambda s: d.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ")
print(int((f(sys.argv[2]) - f(sys.argv[1])).total_seconds()))' "$1" "$2"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ROOT=$(space-control keys root --data-dir "$D" 2>>"$T/log")
check "keys root prints a k4.public PASERK" sh -c "echo '$ROOT' | grep -Eq '^k4\.public\.[A-Za-z0-9_-]{43}$'"
check "key files are 0600 in a 0700 directory" sh -c \
	"[ \$(stat -c %a '$D/keys') = 700 ] && [ -z \"\$(find '$D/keys' -name '*.key' ! -perm 600)\" ] && [ \$(ls '$D/keys'/*.key | wc -l) = 2 ]"
ctl_start --rotate-publish-delay 2 --heartbeat-timeout 3600
check "daemon started" true

curl -s "$U/v1/keys" >"$T/keys"
is "GET /v1/keys publishes the pinned root" "$(jget root "$T/keys")" "$ROOT"
post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://127.0.0.1:7811","capacity":4,"gateway":"tcp://127.0.0.1:7812"}' >/dev/null
is "create a sandbox" "$(post /v1/sandboxes "$K" '{}')" 201
S=$(jget id)

is "routes while pending -> 503" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 503
is "... with the documented message" "$(jget message)" "execution is not serving yet"
check "... and Retry-After" grep -qi '^Retry-After: 1' "$T/headers"

is "worker reports serving" "$(post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S"),\"state\":\"serving\"}")" 200
is "routes for a serving execution -> 200" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec","fs:r"]}')" 200
cp "$T/body" "$T/r1"
TOK1=$(jget capability "$T/r1")
is "endpoint is the worker's node-api" "$(jget endpoint "$T/r1")" "http://127.0.0.1:7811"
is "route is the current execution" "$(jget route "$T/r1")" "$(echo "$(ident "$S")" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')"
python3 "$T/verify.py" "$CHECK" "$T/keys" "$TOK1" "$ROOT" >"$T/v1" 2>>"$T/log"
check "capability verifies (paseto_check.py) under a key of the bundle signed by the pinned root" test -s "$T/v1"
check "space token verify accepts it with the bundle key" sh -c \
	"space token verify --public-key '$(jget public "$T/v1")' --implicit space-capability-v1 '$TOK1' >/dev/null 2>&1"
check "space token verify refuses it without the capability assertion" sh -c \
	"! space token verify --public-key '$(jget public "$T/v1")' '$TOK1' >/dev/null 2>&1"
check "space token verify refuses it under the root key" sh -c \
	"! space token verify --public-key '$ROOT' --implicit space-capability-v1 '$TOK1' >/dev/null 2>&1"
is "claims: iss" "$(jget claims.iss "$T/v1")" space-control
is "claims: sub is the principal" "$(jget claims.sub "$T/v1")" alice
is "claims: aud node-api" "$(jget claims.aud "$T/v1")" node-api
is "claims: pur control" "$(jget claims.pur "$T/v1")" control
is "claims: acc" "$(jget claims.acc "$T/v1")" '["exec", "fs:r"]'
is "claims: route = sandbox" "$(jget claims.sbx "$T/v1")" "$S"
is "claims: route = generation" "$(jget claims.gen "$T/v1")" 1
is "claims: route = worker" "$(jget claims.wrk "$T/v1")" w1
is "claims: route = substrate" "$(jget claims.sst "$T/v1")" jail
is "claims: route = activation" "$(jget claims.act "$T/v1")" 1
is "claims: route = resident" "$(jget claims.res "$T/v1")" inc1
is "claims: exp - iat = 120" "$(span "$(jget claims.iat "$T/v1")" "$(jget claims.exp "$T/v1")")" 120
is "expires_at = exp" "$(jget expires_at "$T/r1")" "$(jget claims.exp "$T/v1")"
check "claims: jti is 128 bits base64url" sh -c "echo '$(jget claims.jti "$T/v1")' | grep -Eq '^[A-Za-z0-9_-]{22}$'"
KID1=$(jget kid "$T/v1")
post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec","fs:r"]}' >/dev/null
TOK1B=$(jget capability)
python3 "$T/verify.py" "$CHECK" "$T/keys" "$TOK1B" "$ROOT" >"$T/v1b" 2>>"$T/log"
check "each issuance has a fresh jti" test "$(jget claims.jti "$T/v1")" != "$(jget claims.jti "$T/v1b")"

is "service route for a port not declared -> 404" "$(post "/v1/sandboxes/$S/routes" "$K" '{"port":8080,"proto":"http"}')" 404
is "declare port 8080 -> 200" "$(post "/v1/sandboxes/$S/ports" "$K" '{"port":8080}')" 200
is "service route -> 200" "$(post "/v1/sandboxes/$S/routes" "$K" '{"port":8080,"proto":"http"}')" 200
python3 "$T/verify.py" "$CHECK" "$T/keys" "$(jget capability)" "$ROOT" >"$T/vs" 2>>"$T/log"
is "... its endpoint is the worker's gateway" "$(jget endpoint)" tcp://127.0.0.1:7812
is "service capability: aud netgtw" "$(jget claims.aud "$T/vs")" netgtw
is "service capability: pur service, port, proto" \
	"$(jget claims.pur "$T/vs") $(jget claims.port "$T/vs") $(jget claims.proto "$T/vs")" "service 8080 http"
check "service capability has no acc" sh -c "! grep -q '\"acc\"' '$T/vs'"

# per-sandbox access tokens (api_access.c): a bearer of its own sandbox's
# control capabilities, and of nothing else
is "access token for the sandbox -> 200" "$(post "/v1/sandboxes/$S/access-token" "$K" '{}')" 200
AT=$(jget access_token)
check "... at_ + 43 base64url characters" sh -c "echo '$AT' | grep -Eq '^at_[A-Za-z0-9_-]{43}$'"
store_dump >"$T/dump" 2>>"$T/log"
check "... stored hashed, never in clear" sh -c "[ -s '$T/dump' ] && ! grep -q '${AT#at_}' '$T/dump'"
is "the access token obtains a control capability of its sandbox" "$(post "/v1/sandboxes/$S/routes" "$AT" '{"access":["exec","fs:r"]}')" 200
python3 "$T/verify.py" "$CHECK" "$T/keys" "$(jget capability)" "$ROOT" >"$T/va" 2>>"$T/log"
is "... in the owner's name, for that sandbox" "$(jget claims.sub "$T/va") $(jget claims.sbx "$T/va") $(jget claims.pur "$T/va")" "alice $S control"
is "... not a service capability (403)" "$(post "/v1/sandboxes/$S/routes" "$AT" '{"port":8080,"proto":"http"}')" 403
is "create a second sandbox" "$(post /v1/sandboxes "$K" '{}')" 201
S2=$(jget id)
is "the token of one sandbox on another's routes -> 403" "$(post "/v1/sandboxes/$S2/routes" "$AT" '{"access":["exec"]}')" 403
is "... the list of sandboxes -> 401" "$(get /v1/sandboxes "$AT")" 401
is "... its own sandbox's record -> 401" "$(get "/v1/sandboxes/$S" "$AT")" 401
is "... a create -> 401" "$(post /v1/sandboxes "$AT" '{}')" 401
is "... another access token -> 401" "$(post "/v1/sandboxes/$S/access-token" "$AT" '{}')" 401
is "... a pause -> 401" "$(post "/v1/sandboxes/$S/pause" "$AT" '{}')" 401
is "a forged token of the same shape -> 401" "$(post "/v1/sandboxes/$S/routes" "at_$(printf 'A%.0s' $(seq 1 43))" '{"access":["exec"]}')" 401
is "an access token of an unknown sandbox -> 404" "$(post /v1/sandboxes/nosuch/access-token "$K" '{}')" 404
is "an access token with an unknown field -> 400" "$(post "/v1/sandboxes/$S2/access-token" "$K" '{"x":1}')" 400
post "/v1/sandboxes/$S2/access-token" "$K" '{}' >/dev/null
AT2=$(jget access_token)
is "the second sandbox's token passes authentication (not serving: 503)" "$(post "/v1/sandboxes/$S2/routes" "$AT2" '{"access":["exec"]}')" 503
curl -s -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$S2" >/dev/null
is "killed: its token is refused (401)" "$(post "/v1/sandboxes/$S2/routes" "$AT2" '{"access":["exec"]}')" 401
is "... and no new one is made (404)" "$(post "/v1/sandboxes/$S2/access-token" "$K" '{}')" 404
is "the first sandbox's token still works" "$(post "/v1/sandboxes/$S/routes" "$AT" '{"access":["exec"]}')" 200

# route repair: the client names the route that was rejected
is "rejected == current route -> 503" "$(post "/v1/sandboxes/$S/routes" "$K" "{\"access\":[\"exec\"],\"rejected\":$(ident "$S")}")" 503
is "... route is converging" "$(jget message)" "route is converging"
check "... with Retry-After" grep -qi '^Retry-After:' "$T/headers"
is "bridge relaunch: worker reports activation 2" "$(post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S" 1 2),\"state\":\"serving\"}")" 200
is "rejected = the old activation -> a new capability" "$(post "/v1/sandboxes/$S/routes" "$K" "{\"access\":[\"exec\"],\"rejected\":$(ident "$S" 1 1)}")" 200
is "... carrying activation 2" "$(jget route.activation)" 2
is "an older activation report is refused (409)" "$(post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S" 1 1),\"state\":\"serving\"}")" 409
is "a malformed rejected route -> 400" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"],"rejected":{"sandbox":"x"}}')" 400

# rotation while the daemon runs
V1=$(jget version "$T/v1")
NEWKID=$(space-control keys rotate --data-dir "$D" --rotate-publish-delay 6 2>>"$T/log")
check "keys rotate prints the new kid" sh -c "echo '$NEWKID' | grep -Eq '^k4\.pid\.'"
post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}' >/dev/null
TOK2=$(jget capability)
curl -s "$U/v1/keys" >"$T/keys2"
python3 "$T/verify.py" "$CHECK" "$T/keys2" "$TOK2" "$ROOT" >"$T/v2" 2>>"$T/log"
is "right after rotate: still signed with the old key" "$(jget kid "$T/v2")" "$KID1"
is "... the new key is already published (2 keys)" "$(jget nkeys "$T/v2")" 2
check "... in a newer bundle version" test "$(jget version "$T/v2")" -gt "$V1"
python3 "$T/verify.py" "$CHECK" "$T/keys2" "$TOK1" "$ROOT" >"$T/v1r" 2>>"$T/log"
check "the token issued before rotation verifies against the new bundle" test -s "$T/v1r"
NA=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["not_after"][sys.argv[2]])' "$T/v2" "$KID1")
check "the old key's not_after covers its last token (>= its exp + 15)" sh -c \
	"[ \$(( \$(date -d '$NA' +%s) - \$(date -d '$(jget claims.exp "$T/v2")' +%s) )) -ge 15 ]"
sleep 7
post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}' >/dev/null
TOK3=$(jget capability)
curl -s "$U/v1/keys" >"$T/keys3"
python3 "$T/verify.py" "$CHECK" "$T/keys3" "$TOK3" "$ROOT" >"$T/v3" 2>>"$T/log"
is "after the publish delay: signed with the new key" "$(jget kid "$T/v3")" "$NEWKID"
python3 "$T/verify.py" "$CHECK" "$T/keys3" "$TOK1" "$ROOT" >"$T/v1rr" 2>>"$T/log"
check "old tokens still verify after the switch" test -s "$T/v1rr"

# once the old key's last token is past exp + skew it leaves the bundle;
# instead of waiting 135 s, move its not_after into the past in the store
V3=$(jget version "$T/v3")
sql "UPDATE signing_keys SET not_after = strftime('%s','now') - 1 WHERE kid = '$KID1'"
sleep 2
curl -s "$U/v1/keys" >"$T/keys5"
python3 "$T/verify.py" "$CHECK" "$T/keys5" "$TOK3" "$ROOT" >"$T/v5" 2>>"$T/log"
is "an expired key is withdrawn: the bundle holds one key" "$(jget nkeys "$T/v5")" 1
check "... in a newer version" test "$(jget version "$T/v5")" -gt "$V3"
check "... and tokens of the withdrawn key no longer verify" sh -c \
	"! python3 '$T/verify.py' '$CHECK' '$T/keys5' '$TOK1' '$ROOT' >/dev/null 2>&1"

# non-serving executions
post /v1/sandboxes "$K" '{}' >/dev/null
S2=$(jget id)
post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S2"),\"state\":\"failed\",\"error\":\"boom\"}" >/dev/null
is "failed sandbox -> 409 (it will not serve again)" "$(post "/v1/sandboxes/$S2/routes" "$K" '{"access":["exec"]}')" 409
is "... the sandbox shows failed" "$(curl -s -H "Authorization: Bearer $K" "$U/v1/sandboxes/$S2" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["state"], d["execution"]["state"])')" "failed failed"
curl -s -X DELETE -H "Authorization: Bearer $K" "$U/v1/sandboxes/$S" >/dev/null
is "killed sandbox -> no capability (409)" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 409
check "issuances counted by purpose" sh -c \
	"curl -s '$U/metrics' | grep -Eq 'space_control_capabilities_issued_total\\{purpose=\"control\"\\} ([5-9]|[1-9][0-9])'"

# a create that waits ("wait") and brings its route ("access"): no
# capability before the execution serves, then one naming exactly it
is "create with access but no wait -> 400" "$(post /v1/sandboxes "$K" '{"access":["exec"]}')" 400
is "create with wait 31 -> 400" "$(post /v1/sandboxes "$K" '{"wait":31}')" 400
is "create with a bad access name -> 400" "$(post /v1/sandboxes "$K" '{"wait":1,"access":["root"]}')" 400
is "create waiting 1 s for a worker that never reports -> 201" \
	"$(post /v1/sandboxes "$K" '{"wait":1,"access":["exec"]}')" 201
is "... answered creating, without a route" \
	"$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["state"], "route" in d)' "$T/body")" "creating False"
NR=$(jget id)
# waiting_create BODY OUT: a create that waits, in the background (its
# pid in CW, its status in OUT.code); SW: the sandbox it made, the one
# creating that is not NR's
waiting_create() {
	curl -s -o "$2" -w '%{http_code}' -X POST -H "Authorization: Bearer $K" \
		-H 'Content-Type: application/json' --data-binary "$1" "$U/v1/sandboxes" >"$2.code" &
	CW=$!
	for _ in $(seq 100); do
		SW=$(sql "SELECT id FROM sandboxes WHERE state = 'creating' AND id <> '$NR' LIMIT 1" 2>/dev/null)
		[ -n "$SW" ] && break
		sleep 0.05
	done
}
waiting_create '{"wait":20,"access":["exec","fs:r"]}' "$T/cw"
S4=$SW
sleep 0.3
check "... the create still waits while the execution does not serve" kill -0 "$CW"
post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S4"),\"state\":\"serving\"}" >/dev/null
wait "$CW"
is "create that waited -> 201 once the worker reports serving" "$(cat "$T/cw.code")" 201
is "... running, serving" "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["id"], d["state"], d["execution"]["state"])' "$T/cw")" "$S4 running serving"
is "... its route is that execution" "$(jget route.route "$T/cw")" "$(echo "$(ident "$S4")" | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin), sort_keys=True))')"
is "... at the worker's endpoint" "$(jget route.endpoint "$T/cw")" "http://127.0.0.1:7811"
curl -s "$U/v1/keys" >"$T/keys6"
python3 "$T/verify.py" "$CHECK" "$T/keys6" "$(jget route.capability "$T/cw")" "$ROOT" >"$T/v6" 2>>"$T/log"
check "... its capability verifies under the bundle" test -s "$T/v6"
is "... and names that route, for exec and fs:r" \
	"$(python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["claims"]; print(c["sbx"], c["gen"], c["act"], c["res"], sorted(c["acc"]))' "$T/v6" 2>>"$T/log")" \
	"$S4 1 1 inc1 ['exec', 'fs:r']"
sleep 0.3
is "... its issue is in the audit" "$(sql "SELECT count(*) FROM audit WHERE action = 'capability.issue' AND target = '$S4'")" 1
# a wait longer than a capability signed ahead may age: one signed at
# the end of the wait, its lifetime whole
waiting_create '{"wait":20,"access":["exec"]}' "$T/cw2"
S5=$SW
sleep 6.5
T5=$(date +%s)
post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S5"),\"state\":\"serving\"}" >/dev/null
wait "$CW"
curl -s "$U/v1/keys" >"$T/keys7"
python3 "$T/verify.py" "$CHECK" "$T/keys7" "$(jget route.capability "$T/cw2")" "$ROOT" >"$T/v7" 2>>"$T/log"
check "after a 6.5 s wait the capability handed out was signed at its end (iat >= the report - 1 s)" \
	sh -c "[ \$(date -d '$(jget claims.iat "$T/v7")' +%s) -ge $((T5 - 1)) ]"

# an expired capability is minted by the test itself with the control
# plane's signing key (space-control has no back-dating switch)
ctl_stop
check "space-control refuses a --test- option" sh -c \
	"! space-control --data-dir '$D' --test-cap-backdate 300 >/dev/null 2>&1"
ctl_start --heartbeat-timeout 3600
post /v1/sandboxes "$K" '{}' >/dev/null
S3=$(jget id)
post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S3"),\"state\":\"serving\"}" >/dev/null
post "/v1/sandboxes/$S3/routes" "$K" '{"access":["exec"]}' >/dev/null
curl -s "$U/v1/keys" >"$T/keys4"
OLD=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$D/keys" "$(jget capability)" 300 2>>"$T/log")
python3 "$T/verify.py" "$CHECK" "$T/keys4" "$OLD" "$ROOT" >"$T/v4" 2>>"$T/log"
check "backdated capability is already expired" sh -c \
	"[ \$(date -d '$(jget claims.exp "$T/v4")' +%s) -lt \$(date +%s) ]"
is "... and still exp - iat = 120" "$(span "$(jget claims.iat "$T/v4")" "$(jget claims.exp "$T/v4")")" 120
check "... and verifies under the published bundle" test -s "$T/v4"
kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
