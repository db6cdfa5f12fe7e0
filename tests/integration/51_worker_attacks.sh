#!/bin/sh
# The worker from the attacker's side. Every refusal comes from the one
# comparator, with the status and reason of DESIGN section 4: a capability
# for sandbox A at B's URL, a tampered token, tokens signed by a foreign
# key, an operation outside the capability's access, an expired capability,
# a capability for an older activation. Garbage is refused by node-api
# before it reaches sbx-manager; sbx-manager's socket refuses strangers and
# survives garbage frames.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
MGR_FLAGS="--disk-mb 1100"
NP=$(free_port)
NU=http://127.0.0.1:$NP
W=$T/w1

register_worker w1
check "space-control up" start_ctl
check "sbx-manager made its socket" start_mgr 1 w1 "$NP"
check "node-api answers /healthz" start_napi 1 w1 "$NP" --metrics-file "$W/metrics.prom"
is "healthz body" "$(curl -s "$NU/healthz")" '{"ok":true}'

# mgr_requests: sbx-manager's request counter (metrics.prom, rewritten every 2 s)
mgr_requests() { prom_fresh "$W/metrics.prom"; awk '$1 == "space_sbxmgr_requests_total" { print $2 }' "$W/metrics.prom"; }
# b64 helpers for forging tokens
forge() { python3 - "$@" <<'PY'
import base64, json, sys
def d(s): return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))
def e(b): return base64.urlsafe_b64encode(b).decode().rstrip("=")
what, tok = sys.argv[1], sys.argv[2]
p = tok.split(".")
body, footer = d(p[2]), p[3]
msg, sig = body[:-64], body[-64:]
if what == "claims":          # the claims JSON, for re-signing
    print(msg.decode())
elif what == "footer":
    print(d(footer).decode())
elif what == "widen":         # add an access right, keep the signature
    c = json.loads(msg); c["acc"] = ["exec", "fs:r", "fs:w", "pty"]
    print("v4.public." + e(json.dumps(c, separators=(",", ":")).encode() + sig) + "." + footer)
elif what == "flip":          # one bit of the signature
    s = bytearray(sig); s[10] ^= 1
    print("v4.public." + e(msg + bytes(s)) + "." + footer)
PY
}

# ---- two sandboxes on the worker ----
is "create sandbox A" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
A=$(jget id)
is "create sandbox B" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
B=$(jget id)
check "A running" wait_state "$A" running 20
check "B running" wait_state "$B" running 20
CAPA=$(route "$A")
CAPB=$(route "$B")
S=$A CAP=$CAPA
is "A's capability works at A" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# ---- cheap rejections at node-api: nothing reaches sbx-manager ----
before=$(mgr_requests)
code=$(curl -s -o "$T/body" -w '%{http_code}' -X POST --data-binary '{"argv":["true"]}' "$NU/v1/sandboxes/$A/exec")
is "no bearer -> 401" "$code" 401
is "... unauthenticated" "$(jget error)" unauthenticated
code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Basic dXNlcjpwdw==" "$NU/v1/sandboxes/$A/fs/list?path=/")
is "Basic credentials -> 401" "$code" 401
for bad in "v3.public.$(echo "$CAPA" | cut -d. -f3-)" "v4.public.!!!!.e30" "v4.public.$(echo "$CAPA" | cut -d. -f3)" \
	"v4.public.$(echo "$CAPA" | cut -d. -f3).bm90IGpzb24" "v4.public.AAAA.$(echo "$CAPA" | cut -d. -f4)"; do
	code=$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $bad" "$NU/v1/sandboxes/$A/fs/list?path=/")
	is "malformed bearer ${bad%"${bad#??????????????}"}... -> 403" "$code $(jget error) $(jget reason)" "403 deny malformed_token"
done
long=$(python3 -c 'print("v4.public." + "A" * 5000 + ".e30")')
is "token over SPACE_TOKEN_MAX -> 403" "$(curl -s -o "$T/body" -w '%{http_code}' -H "Authorization: Bearer $long" "$NU/v1/sandboxes/$A/fs/list?path=/")" 403
is "bad sandbox id in the URL -> 400" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $CAPA" "$NU/v1/sandboxes/a.b/fs/list?path=/")" 400
is "URL over SPACE_HTTP_URL_MAX -> 414" "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $CAPA" "$NU/v1/sandboxes/$A/fs/list?path=/$(python3 -c 'print("a" * 5000)')")" 414
head -c 1700000 /dev/zero | tr '\0' ' ' >"$T/bigbody"
is "exec body over SPACE_EXEC_BODY_MAX -> 413" "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $CAPA" --data-binary @"$T/bigbody" "$NU/v1/sandboxes/$A/exec")" 413
head -c 1100000 /dev/zero | tr '\0' ' ' >"$T/bigbody"
is "other JSON body over SPACE_HTTP_BODY_MAX -> 413" "$(curl -s -o /dev/null -w '%{http_code}' -X POST -H "Authorization: Bearer $CAPA" --data-binary @"$T/bigbody" "$NU/v1/sandboxes/$A/fs/mkdir")" 413
is "body that is not a JSON object -> 400" "$(napi POST exec --data-binary '["argv"]')" 400
is "duplicate JSON keys -> 400" "$(napi POST exec --data-binary '{"argv":["true"],"argv":["id"]}')" 400
# args nested 1,500 deep: every hop that encodes them again recurses once
# a level (sbx-manager, root, on a 256 KiB thread stack)
python3 -c 'print("{\"path\":\"/tmp/d\",\"x\":" + "[" * 1500 + "]" * 1500 + "}")' >"$T/deep"
is "a body nested 1,500 deep -> 400" "$(napi POST fs/mkdir --data-binary @"$T/deep")" 400
is "unknown route -> 404" "$(curl -s -o /dev/null -w '%{http_code}' "$NU/v1/other")" 404
is "none of the above reached sbx-manager" "$(mgr_requests)" "$before"
check "sbx-manager is the same process" alive "$M1"

# ---- the comparator, from the attacker's side ----
S=$B CAP=$CAPA
is "A's capability at B's URL -> 403" "$(napi POST exec --data-binary '{"argv":["touch","/home/user/pwned"]}')" 403
is "... deny / sandbox_mismatch" "$(jget error) $(jget reason)" "deny sandbox_mismatch"
S=$B CAP=$CAPB
is "... and nothing ran in B" "$(napi GET 'fs/stat?path=/home/user/pwned')" 404
S=$A
CAP=$(forge widen "$CAPA")
is "claims widened under the original signature -> 403" "$(napi POST exec --data-binary '{"argv":["true"]}')" 403
is "... bad_signature" "$(jget reason)" bad_signature
CAP=$(forge flip "$CAPA")
is "one signature bit flipped -> 403 bad_signature" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "403 bad_signature"
SEED=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')
CAP=$(space token sign --secret-key "$SEED" --implicit space-capability-v1 --footer "$(forge footer "$CAPA")" "$(forge claims "$CAPA")")
is "same claims signed by a foreign key, real kid -> 403 bad_signature" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "403 bad_signature"
CAP=$(space token sign --secret-key "$SEED" --implicit space-capability-v1 --footer '{"kid":"k4.pid.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}' "$(forge claims "$CAPA")")
is "foreign key with its own kid -> 403 unknown_kid" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "403 unknown_kid"
CAP=$(space token sign --secret-key "$SEED" --footer "$(forge footer "$CAPA")" "$(forge claims "$CAPA")")
is "no capability implicit assertion -> 403" "$(napi POST exec --data-binary '{"argv":["true"]}')" 403
CAP=$(route "$A" '"fs:r"')
is "read-only capability: fs/list allowed" "$(napi GET 'fs/list?path=/home/user')" 200
is "read-only capability: exec -> 403 access_denied" "$(napi POST exec --data-binary '{"argv":["true"]}') $(jget reason)" "403 access_denied"
is "read-only capability: PUT files -> 403 access_denied" "$(napi PUT 'files?path=/home/user/w' --data-binary 'x') $(jget reason)" "403 access_denied"
CAP=$CAPA
is "... and the refused write left nothing" "$(napi GET 'fs/stat?path=/home/user/w')" 404
check "refusals are audited with both identities" \
	grep -q '"audit":"admission".*"reason":"sandbox_mismatch".*"cap_route":{"sandbox":"'"$A"'".*"record_route":{"sandbox":"'"$B"'"' "$T/mgr_w1.log"
prom_fresh "$W/metrics.prom"
curl -s "$NU/metrics" >"$T/metrics"
check "refusals counted by reason" grep -q 'space_sbxmgr_admission_total{outcome="deny",reason="bad_signature"} [1-9]' "$T/metrics"

# ---- an older activation: sbx-manager restarts and finds the bridge gone ----
crash M1
BPID=$(wsql w1 "select bridge_pid from records where sandbox='$A'")
kill -9 "$BPID"
start_mgr 1 w1 "$NP"
i=0; while [ "$(wsql w1 "select activation, state from records where sandbox='$A'")" != "2|serving" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
is "A relaunched as activation 2" "$(wsql w1 "select activation, state from records where sandbox='$A'")" "2|serving"
S=$A CAP=$CAPA
is "activation-1 capability -> 409" "$(napi POST exec --data-binary '{"argv":["true"]}')" 409
is "... refresh_route / activation_mismatch" "$(jget error) $(jget reason)" "refresh_route activation_mismatch"
CAP=$(route "$A")
is "a fresh capability (activation 2) works" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200
is "... served by activation 2 of generation 1" "$(hdr X-Space-Generation)" 1
S=$B CAP=$CAPB
is "B's bridge was adopted: its capability still works" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# ---- one sandbox cannot hold every relay: SPACE_STREAMS_PER_SBX (64) ----
# (each exec lasts 10 s, so that all 72 are open at once even when starting
# them takes seconds: a loaded machine, the sanitizers)
S=$A CAP=$(route "$A")
mkdir "$T/flood"
n=0; while [ $n -lt 72 ]; do
	curl -s -o "$T/flood/$n.body" -w '%{http_code}\n' -X POST -H "Authorization: Bearer $CAP" \
	    --data-binary '{"argv":["sleep","10"]}' "$NU/v1/sandboxes/$A/exec" >"$T/flood/$n.code" &
	FLOOD="$FLOOD $!"
	n=$((n + 1))
done
wait $FLOOD
# refused by sbx-manager's count, or (when an operation has ended here but
# not yet at the bridge) by the bridge's own limit
busy=$(grep -lE 'too many concurrent operations|the execution refused the operation' "$T/flood"/*.body 2>/dev/null | wc -l)
okc=$(cat "$T/flood"/*.code | grep -c '^200$')
diag "72 concurrent execs on one sandbox: $okc served, $busy refused as too many; codes: $(cat "$T/flood"/*.code | sort | uniq -c | tr -s ' \n' ' ')"
grep -hv exit_code "$T/flood"/*.body 2>/dev/null | sort | uniq -c | sed 's/^/#   /'
grep -h '"audit":"bridge"' "$T/mgr_w1.log" | sed 's/.*"reason":"\([^"]*\)".*/#   bridge refusal: \1/' | sort | uniq -c
check "some are refused once 64 operations are open ($busy)" test "$busy" -ge 1
check "at most 64 were served at once ($okc)" test "$okc" -le 64
is "every other answer was that refusal" "$((okc + busy))" 72
is "no bridge verification failed under load" "$(grep -c '"audit":"bridge"' "$T/mgr_w1.log")" 0
is "the sandbox serves again afterwards" "$(napi POST exec --data-binary '{"argv":["true"]}')" 200

# ---- an expired capability ----
# minted by the test with the control plane's signing key, 200 s in the
# past (space-control has no back-dating switch)
S=$A CAP=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$(route "$A")" 200)
is "expired capability -> 401" "$(napi POST exec --data-binary '{"argv":["true"]}')" 401
is "... body is exactly capability_expired" "$(cat "$T/body")" '{"error":"capability_expired"}'

# ---- sbx-manager's socket ----
cat >"$T/raw.py" <<'PY'
import socket, struct, sys, json
c = socket.socket(socket.AF_UNIX)
try:
    c.connect(sys.argv[1])
except OSError as e:
    print("connect-refused", e.errno); sys.exit(0)
c.settimeout(5)
def frame(t, p): return struct.pack(">HBBHHI", 0x5350, 1, 0, t, 0, len(p)) + p
mode = sys.argv[2]
if mode == "garbage":
    c.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
elif mode == "huge":
    c.sendall(struct.pack(">HBBHHI", 0x5350, 1, 0, 1, 0, 1 << 30))
else:
    c.sendall(frame(1, json.dumps({"role": "node-api", "min": 1, "max": 1}).encode()))
    c.recv(4096)
    req = {"op": "exec", "sandbox": sys.argv[3], "token": "x", "args": {}}
    if mode == "unknown":
        req["admin"] = True
    else:                       # "nul": a NUL inside the token string
        req["token"] = sys.argv[4][:20] + "\u0000" + sys.argv[4][20:]
    c.sendall(frame(2, json.dumps(req).encode()))
try:
    d = c.recv(4096)
    print("answer", d[12:].decode(errors="replace") if d else "closed")
except OSError as e:
    print("closed", e)
PY
out=$(setpriv --reuid=1000 --regid=1000 --clear-groups /usr/bin/python3 "$T/raw.py" "$W/run/sbx-manager.sock" x)
is "a user outside the api group cannot connect" "$out" "connect-refused 13"
out=$(python3 "$T/raw.py" "$W/run/sbx-manager.sock" garbage)
check "HTTP garbage on the socket: connection closed ($out)" sh -c "echo '$out' | grep -Eq '^(closed|answer closed|answer .*error)'"
out=$(python3 "$T/raw.py" "$W/run/sbx-manager.sock" huge)
check "a 1 GiB frame header: connection closed" sh -c "echo '$out' | grep -Eq '^(closed|answer closed|answer .*error)'"
out=$(python3 "$T/raw.py" "$W/run/sbx-manager.sock" unknown "$A")
check "REQUEST with an unknown field -> ERROR 400" sh -c "echo '$out' | grep -q '\"status\":400'"
out=$(python3 "$T/raw.py" "$W/run/sbx-manager.sock" nul "$A" "$CAPA")
check "a token with an embedded NUL -> ERROR 400" sh -c "echo '$out' | grep -q '\"status\":400'"
check "sbx-manager survived all of it" kill -0 "$M1"
S=$B CAP=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$(route "$B")" 200)
is "... and still refuses an expired capability properly" "$(napi POST exec --data-binary '{"argv":["true"]}')" 401

done_testing
