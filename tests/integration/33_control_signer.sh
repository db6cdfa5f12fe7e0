#!/bin/sh
# space-control's private keys live in its signer process only. From the
# attacker's side: the HTTP process's memory (read through /proc/PID/mem, as
# a memory-disclosure bug would) holds no private key byte while the signer
# holds them; a compromised HTTP process speaking to the signer gets
# nothing signed that is not a well-formed capability or a bundle of the
# signer's own keys; a dead signer means 503 for capabilities (fail
# closed) until it is restarted; a key file with a wrong mode stops the
# daemon at start with a clear error.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
D=$T/data
PORT=$(free_port)
U=http://127.0.0.1:$PORT
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; [ -n "$PID" ] && wait "$PID" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
trap 'exit 1' INT TERM

post() { curl -s -D "$T/headers" -o "$T/body" -w '%{http_code}' -X POST \
	-H "Authorization: Bearer $2" --data-binary "$3" "$U$1"; }
jget() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "${2:-$T/body}" "$1"; }
start() {
	space-control --data-dir "$D" --listen "127.0.0.1:$PORT" "$@" 2>>"$T/log" &
	PID=$!
	wait_http "$U/healthz" 10
}
signer_of() { for _c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
	tr '\0' ' ' <"/proc/$_c/cmdline" | grep -q '^space-control signer ' && echo "$_c"; done; }
ident() { echo "{\"sandbox\":\"$1\",\"generation\":1,\"worker\":\"w1\",\"substrate\":\"jail\",\"activation\":1,\"resident\":\"inc1\"}"; }

# memhits PID: occurrences in PID's readable memory of each private key
# of the key directory: the 32-byte seed, the 64-byte libsodium secret key
# and the seed's hex text as in the key file. Prints the total.
needles() { /usr/bin/python3 -c 'import glob, json, os, sys
import nacl.signing
for p in glob.glob(os.path.join(sys.argv[1], "*.key")):
    seed = bytes.fromhex(json.load(open(p))["secret"])
    sk = seed + bytes(nacl.signing.SigningKey(seed).verify_key)
    print("hex:" + seed.hex(), "hex:" + sk.hex(), "hex:" + seed.hex().encode().hex())' "$1"; }
# shellcheck disable=SC2046 # one needle per word
memhits() { /usr/bin/python3 "$SPACE_TOP/tests/tools/memscan.py" "$1" $(needles "$D/keys"); }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
ROOT=$(space-control keys root --data-dir "$D" 2>>"$T/log")
check "space-control up" start --heartbeat-timeout 3600
SG=$(signer_of "$PID")
check "the daemon runs one signer child ($SG)" test -n "$SG"
post /v1/workers/w1/register "$W" '{"incarnation":"inc1","endpoint":"http://127.0.0.1:7811","capacity":4}' >/dev/null
post /v1/sandboxes "$K" '{}' >/dev/null
S=$(jget id)
post /v1/workers/w1/status "$W" "{\"identity\":$(ident "$S"),\"state\":\"serving\"}" >/dev/null
is "a capability is issued" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 200
# a rotation makes the daemon have a bundle signed with the root key
space-control keys rotate --data-dir "$D" --rotate-publish-delay 0 >/dev/null 2>>"$T/log"
is "GET /v1/keys after a rotation" "$(curl -s -o "$T/keys" -w '%{http_code}' "$U/v1/keys")" 200
check "... lists both signing keys" sh -c "[ \$(python3 -c 'import json,sys,base64; b=json.load(open(sys.argv[1]))[\"bundle\"].split(\".\")[2]; d=base64.urlsafe_b64decode(b+\"=\"*(-len(b)%4))[:-64]; print(len(json.loads(d)[\"keys\"]))' '$T/keys') = 2 ]"
for i in 1 2 3; do post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}' >/dev/null; done
is "... and capabilities with the new key" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 200
is "the HTTP process's memory holds no private key (seed, secret key or hex)" "$(memhits "$PID")" 0
check "the signer's memory holds them (the scan finds keys where they are)" test "$(memhits "$SG")" -gt 0
check "the HTTP process has no key file open" sh -c "! ls -l /proc/$PID/fd | grep -q '\\.key'"

# ---- a compromised HTTP process asks the signer for what it should not ----
cat >"$T/evil.py" <<'PY'
import base64, json, os, socket, struct, subprocess, sys, time
import nacl.signing
data_dir = sys.argv[1]
def spawn():
    global a, p
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    def child():
        os.dup2(b.fileno(), 3)
    p = subprocess.Popen(["space-control", "signer", "--data-dir", data_dir], pass_fds=(b.fileno(), 3),
                         preexec_fn=child, stderr=open(os.path.join(os.path.dirname(data_dir), "evil.log"), "a"))
    b.close()
    a.settimeout(10)
    return a.recv(4096)
def frame(t, p): return struct.pack(">HBBHHI", 0x5347, 1, 0, t, 0, len(p)) + p
def ask(m):
    try:
        a.send(m)
    except OSError:
        return "closed"
    try:
        r = a.recv(1 << 17)
    except OSError:
        return "closed"
    if not r:
        return "closed"
    t = struct.unpack(">H", r[4:6])[0]
    return {5: "token", 6: "key", 7: "error"}.get(t, "type%d" % t)
hello = spawn()
assert struct.unpack(">H", hello[4:6])[0] == 1
now = int(time.time())
def ts(t): return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))
keys = [k for k in os.listdir(os.path.join(data_dir, "keys")) if k.endswith(".key") and k != "root.key"]
kid = "k4.pid." + keys[0][:-4]
def claims(**over):
    c = {"iss": "space-control", "sub": "alice", "jti": "A" * 22, "aud": "node-api", "pur": "control",
         "iat": ts(now), "exp": ts(now + 120), "sbx": "s1", "gen": 1, "wrk": "w1", "sst": "jail",
         "act": 1, "res": "inc1", "acc": ["exec"]}
    c.update(over)
    return {k: v for k, v in c.items() if v is not None}
def cap(c, k=kid):
    j = json.dumps(c).encode()
    return frame(2, struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(j)) + j)
def bundle(pks, version=7):
    return frame(3, struct.pack(">QH", version, len(pks)) +
                 b"".join(pk + struct.pack(">qq", now - 10, 0) for pk in pks))
own = bytes.fromhex(json.load(open(os.path.join(data_dir, "keys", keys[0])))["secret"])
own_pk = bytes(nacl.signing.SigningKey(own).verify_key)
foreign_pk = bytes(nacl.signing.SigningKey.generate().verify_key)
out = {
    "good_cap": ask(cap(claims())),
    "backdated": ask(cap(claims(iat=ts(now - 300), exp=ts(now - 180)))),
    "long_lived": ask(cap(claims(exp=ts(now + 86400)))),
    "extra_claim": ask(cap(dict(claims(), admin=True))),
    "wrong_audience": ask(cap(claims(aud="netgtw"))),
    "unknown_kid": ask(cap(claims(), "k4.pid." + "A" * 44)),
    "own_bundle": ask(bundle([own_pk])),
    "foreign_key_bundle": ask(bundle([own_pk, foreign_pk])),
}
out["trailing_byte"] = ask(cap(claims()) + b"x")
p.wait(timeout=10)
out["exit"] = p.returncode
spawn()
out["garbage"] = ask(b"GET / HTTP/1.1\r\n\r\n")
p.wait(timeout=10)
out["exit2"] = p.returncode
print(json.dumps(out, sort_keys=True))
PY
/usr/bin/python3 "$T/evil.py" "$D" >"$T/evil" 2>>"$T/log"
ev() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$T/evil" "$1"; }
is "signer: a well-formed capability is signed" "$(ev good_cap)" token
is "signer: a back-dated capability is refused" "$(ev backdated)" error
is "signer: a capability living longer than 120 s is refused" "$(ev long_lived)" error
is "signer: an unknown claim is refused" "$(ev extra_claim)" error
is "signer: an audience not of the purpose is refused" "$(ev wrong_audience)" error
is "signer: an unknown kid is refused" "$(ev unknown_kid)" error
is "signer: a bundle of its own keys is signed" "$(ev own_bundle)" token
is "signer: a bundle with a foreign public key is refused" "$(ev foreign_key_bundle)" error
is "signer: a frame with a leftover byte closes the connection" "$(ev trailing_byte)" closed
is "... and the signer exits" "$(ev exit)" 1
is "signer: a frame that is not its protocol closes the connection" "$(ev garbage)" closed
is "... and the signer exits" "$(ev exit2)" 1
check "space-control signer run by hand says what it is" sh -c \
	"space-control signer --data-dir '$D' </dev/null 2>&1 | grep -q 'started by space-control itself'"

# ---- the signer dies: fail closed, then restarted ----
# A signer that dies is restarted within a second; one that cannot start
# again (here: a key file made group-readable meanwhile) leaves capability
# issuance closed until it can.
KF=$(ls "$D"/keys/*.key | grep -v root.key | head -1)
chmod 0644 "$KF"
kill -9 "$SG"
sleep 1
is "signer killed and unable to restart: a capability request -> 503" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 503
check "... with Retry-After" grep -qi '^Retry-After:' "$T/headers"
check "... the death is logged" grep -q 'signer: .*capabilities are refused until it is restarted' "$T/log"
check "... the daemon is still up" kill -0 "$PID"
chmod 0600 "$KF"
i=0; while [ $i -lt 300 ] && [ -z "$(signer_of "$PID")" ]; do sleep 0.1; i=$((i + 1)); done
SG2=$(signer_of "$PID")
check "a new signer is started once it can ($SG2)" sh -c "[ -n '$SG2' ] && [ '$SG2' != '$SG' ]"
is "capabilities are issued again" "$(post "/v1/sandboxes/$S/routes" "$K" '{"access":["exec"]}')" 200
is "GET /v1/keys served throughout" "$(curl -s -o /dev/null -w '%{http_code}' "$U/v1/keys")" 200

kill "$PID"; wait "$PID"; RC=$?; PID=
is "daemon stops cleanly on SIGTERM" "$RC" 0
check "... and its signer with it" sh -c "! kill -0 $SG2 2>/dev/null"

# ---- a key file with a wrong mode is refused at start ----
chmod 0644 "$KF"
space-control --data-dir "$D" --listen "127.0.0.1:$PORT" >"$T/out" 2>&1 &
P2=$!
i=0; while [ $i -lt 100 ] && kill -0 "$P2" 2>/dev/null; do sleep 0.1; i=$((i + 1)); done
wait "$P2"; RC=$?
check "a signing key file of mode 0644: the daemon does not start (status $RC)" test "$RC" -ne 0
check "... and says which file and why" grep -q "signing key $KF: readable by group or others" "$T/out"
chmod 0600 "$KF"
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log' '$T/out'"
done_testing
