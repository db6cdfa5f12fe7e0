#!/bin/sh
# space-edge, the public entry (docs/network.md "space-edge"), as space up
# runs it, against the real gateways (netgtw) of its workers: a web server
# in a sandbox reached by Host name; a private port refused without a
# credential and served with the owner's key and with a traffic token (the
# sandbox never sees either); another tenant's key and a wrong token
# refused; a public port served with none; a WebSocket through the edge;
# the same URL working across a move with one rebuilt attempt counted in
# /metrics; a second Host on one connection refused. Then the control
# plane's side from the attacker's view (an API key on the edge's
# endpoint, the edge's credential everywhere else) and the edge under bad
# input (malformed Host, a huge head, a slowloris, garbage), unharmed.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_up.sh"

up_init
up_start || exit
E=$SPACE_EDGE_URL
DOM=$SPACE_EDGE_DOMAIN
EP=${DOM##*:}
CU=$SPACE_API_URL
EC=$(cat "$D/edge/credential")
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 20 "$@"; }

# ---- a web server in a sandbox, through the edge ----
SBX=$(space create 2>"$T/err"); rc=$?
is "space create" "$rc" 0
W0=$(space show "$SBX" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin)["execution"]["worker"])' 2>/dev/null)
cat >"$T/srv.py" <<'EOF'
import asyncio, http.server, json, threading, time
import websockets

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def answer(self, body=b""):
        b = json.dumps({"port": self.server.server_address[1], "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                        "body": body.decode("latin-1")}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_GET(self):
        if self.path == "/slow101":
            # an answer whose body, sent a moment after its head, reads
            # like the head of a protocol switch
            b = b"HTTP/1.1 101 Switching Protocols\r\n\r\n"
            self.send_response(200)
            self.send_header("Content-Length", str(len(b)))
            self.end_headers()
            self.wfile.flush()
            time.sleep(1.5)
            self.wfile.write(b)
            return
        if self.path == "/big":
            self.send_response(200)
            self.send_header("Content-Length", str(4 << 20))
            self.end_headers()
            self.wfile.write(b"x" * (4 << 20))
            return
        self.answer()
    def do_POST(self):
        if self.headers.get("Transfer-Encoding") == "chunked":
            body = b""
            while True:
                n = int(self.rfile.readline().split(b";")[0], 16)
                body += self.rfile.read(n)
                self.rfile.readline()
                if n == 0:
                    break
            self.answer(body)
        else:
            self.answer(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
    def log_message(self, *a):
        pass

for p in (8080, 8081):
    s = http.server.ThreadingHTTPServer(("127.0.0.1", p), H)
    threading.Thread(target=s.serve_forever, daemon=True).start()

async def echo(ws, path=None):
    async for m in ws:
        await ws.send("echo: " + m)

async def main():
    async with websockets.serve(echo, "127.0.0.1", 8082):
        await asyncio.Future()
asyncio.run(main())
EOF
# started, then waited for until its last port (8082) takes connections:
# python's start under load can take more than a second
serve() {
	space fs write "$SBX" /home/user/srv.py <"$T/srv.py" 2>>"$T/err" &&
	space exec --timeout 20 "$SBX" -- sh -c 'setsid /usr/bin/python3 /home/user/srv.py >/home/user/srv.log 2>&1 </dev/null &
		exec /usr/bin/python3 -c "
import socket, time
for i in range(150):
    try:
        socket.create_connection((\"127.0.0.1\", 8082), 1).close()
        break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit(1)"' </dev/null >/dev/null 2>>"$T/err"
}
check "a web server starts in the sandbox (8080, 8081 HTTP; 8082 WebSocket)" serve
declare_port() {
	code -X POST -H "Authorization: Bearer $SPACE_API_KEY" -d "{\"port\":$1,\"public\":$2}" "$CU/v1/sandboxes/$SBX/ports"
}
is "the owner declares 8080 private" "$(declare_port 8080 false)" 200
is "and 8081 public" "$(declare_port 8081 true)" 200
check "8082 public too, with space port expose" sh -c 'space port expose "$1" 8082 --public >/dev/null' sh "$SBX"
# (the worker applies a declaration a moment after the control plane answered)
check "... applied by the worker" eventually 20 grep -q "gateway: $SBX declares 3 port" "$D"/logs/w*-sbx-manager.log
# the URLs as a user types them; curl resolves *.localhost to the loopback
U0="http://8080-$SBX.$DOM/"
U1="http://8081-$SBX.$DOM/"
is "space port url prints it" "$(space port url "$SBX" 8081)/" "$U1"
is "the private port without a credential: 401" "$(code "$U0")" 401
is "with the owner's key: 200" "$(code -H "Authorization: Bearer $SPACE_API_KEY" "$U0")" 200
is "... served by the sandbox's port 8080" "$(jget port)" 8080
is "... which never sees the key" "$(jget headers.authorization)" ""
is "... and sees its own Host" "$(jget headers.host)" "8080-$SBX.$DOM"
is "a POST body goes through" \
	"$(code -H "Authorization: Bearer $SPACE_API_KEY" --data-binary 'hello body' "${U0}p?q=1"; jget body)" "200hello body"
# a chunked body, then another request on the same connection: the edge
# found where the body ended
seq 1 3000 >"$T/chunked"
curl -s --max-time 20 -H "Authorization: Bearer $SPACE_API_KEY" -H "Transfer-Encoding: chunked" \
	--data-binary @"$T/chunked" -o "$T/c1" "${U0}chunked" -o "$T/c2" "${U0}after" -w '%{num_connects} ' >"$T/nc"
is "a chunked body goes through whole" "$(jget body "$T/c1")" "$(cat "$T/chunked")"
is "... and the next request on that connection is served" "$(jget path "$T/c2") $(cat "$T/nc")" "/after 1 0 "
K2=$(space-control apikey add mallory --data-dir "$D/control" 2>>"$T/err")
is "another tenant's key: 404" "$(code -H "Authorization: Bearer $K2" "$U0")" 404
is "a made-up key: 401" "$(code -H "Authorization: Bearer sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "$U0")" 401
code -X POST -H "Authorization: Bearer $SPACE_API_KEY" "$CU/v1/sandboxes/$SBX/traffic-token" >/dev/null
TT=$(jget traffic_token)
is "with the sandbox's traffic token: 200" "$(code -H "X-Space-Traffic-Token: $TT" "$U0")" 200
is "... which the sandbox never sees" "$(jget headers.x-space-traffic-token)" ""
code -X POST -H "Authorization: Bearer $K2" "$CU/v1/sandboxes" -d '{}' >/dev/null
SBX2=$(jget id)
code -X POST -H "Authorization: Bearer $K2" "$CU/v1/sandboxes/$SBX2/traffic-token" >/dev/null
TT2=$(jget traffic_token)
is "another sandbox's traffic token: 403" "$(code -H "X-Space-Traffic-Token: $TT2" "$U0")" 403
is "a made-up traffic token: 403" \
	"$(code -H "X-Space-Traffic-Token: tt_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" "$U0")" 403
is "the public port with no credential: 200" "$(code "$U1")" 200
is "... from port 8081" "$(jget port)" 8081
is "an undeclared port: 404" "$(code "http://8083-$SBX.$DOM/")" 404
# two requests on one kept-alive connection (curl reuses it)
curl -s --max-time 20 -o "$T/k1" "$U1" -o "$T/k2" "${U1}again" -w '%{num_connects} ' >"$T/nc"
is "two requests on one connection: both served" "$(jget path "$T/k1") $(jget path "$T/k2")" "/ /again"
is "... over one connection" "$(cat "$T/nc")" "1 0 "
# then a request for another host on that connection: 421, and closed
python3 - "$EP" "8081-$SBX.$DOM" "8080-$SBX.$DOM" >"$T/two" <<'EOF'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.settimeout(15)
f = s.makefile("rb")
def req(host):
    s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host).encode())
    status = f.readline().decode().strip()
    n = 0
    while True:
        l = f.readline()
        if l in (b"\r\n", b""):
            break
        if l.lower().startswith(b"content-length:"):
            n = int(l.split(b":")[1])
    f.read(n)
    return status
print(req(sys.argv[2]))
print(req(sys.argv[3]))
print("closed" if f.read(1) == b"" else "open")
EOF
is "another Host on a kept-alive connection: 421, then closed" "$(tr '\n' '|' <"$T/two")" \
	"HTTP/1.1 200 OK|HTTP/1.1 421 Misdirected Request|closed|"
# a WebSocket through the edge (an independent client library)
/usr/bin/python3 - "$EP" "8082-$SBX.$DOM" >"$T/ws" 2>&1 <<'EOF'
import asyncio, sys
import websockets
async def main():
    # the URL as a user gives it; the connection to the loopback
    async with websockets.connect("ws://%s/" % sys.argv[2], host="127.0.0.1",
                                  port=int(sys.argv[1])) as ws:
        for m in ("one", "two"):
            await ws.send(m)
            print(await asyncio.wait_for(ws.recv(), 10))
asyncio.run(main())
EOF
is "a WebSocket through the edge echoes both messages" "$(tr '\n' '|' <"$T/ws")" "echo: one|echo: two|"
# a client that pipelines requests while it reads the answers, to a
# service that reads the next request only once it wrote its answer: the
# edge must read the answers while the service takes no more requests,
# or both wait on each other until the idle timeout
/usr/bin/python3 - "$EP" "8081-$SBX.$DOM" >"$T/pipe" 2>&1 <<'EOF'
import socket, sys, threading, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
head = ("GET /big HTTP/1.1\r\nHost: %s\r\n\r\n" % sys.argv[2]).encode()
def send():
    try:
        s.sendall(head * ((64 << 20) // len(head)))
    except OSError:
        pass
threading.Thread(target=send, daemon=True).start()
s.settimeout(30)
got, want = 0, 96 << 20
try:
    while got < want:
        b = s.recv(1 << 20)
        if not b:
            break
        got += len(b)
except socket.timeout:
    pass
print("flowing" if got >= want else "stalled after %d bytes" % got)
EOF
is "64 MiB of pipelined requests for 4 MiB answers, answers read meanwhile: they keep coming" \
	"$(cat "$T/pipe")" "flowing"
# behind_slow FILE STEP...: on one connection, GET /slow101 with the
# owner's key (its head comes at once, its body 1.5 s later), then each
# STEP once that head is in: a request head (\r\n escaped) or "sleep:S";
# FILE gets every byte that came back until the edge closed (or 10 s)
cat >"$T/behind_slow.py" <<'EOF'
import socket, sys, time
port, host, key, out = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
s = socket.create_connection(("127.0.0.1", port))
s.sendall(("GET /slow101 HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n" % (host, key)).encode())
buf = b""
while b"\r\n\r\n" not in buf:
    buf += s.recv(4096)
for step in sys.argv[5:]:
    if step.startswith("sleep:"):
        time.sleep(float(step[6:]))
        continue
    try:
        s.sendall(step.replace("\\r\\n", "\r\n").encode())
    except OSError:
        pass
s.settimeout(10)
try:
    while True:
        b = s.recv(65536)
        if not b:
            break
        buf += b
except OSError:
    pass
open(out, "wb").write(buf)
EOF
behind_slow() { f=$1; shift; /usr/bin/python3 "$T/behind_slow.py" "$EP" "8080-$SBX.$DOM" "$SPACE_API_KEY" "$f" "$@" 2>>"$T/err"; }
# an upgrade asked as a later request, while the answer before it is on
# its way, and that answer's body reads like a 101: the connection must
# not turn raw (after which a request without any credential would reach
# the private port); the upgrade is refused once the answer is out
behind_slow "$T/up101" \
	"GET /ws HTTP/1.1\r\nHost: 8080-$SBX.$DOM\r\nAuthorization: Bearer $SPACE_API_KEY\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n" \
	sleep:2.5 "GET /nocred HTTP/1.1\r\nHost: 8080-$SBX.$DOM\r\n\r\n"
is "an upgrade behind an answer whose body reads like a 101: the request after it is not served unchecked" \
	"$(grep -c '"path": "/nocred"' "$T/up101") $(grep -c 'HTTP/1.1 400' "$T/up101") $(grep -c 'first request' "$T/up101")" "0 1 1"
# the edge's own refusal of a later request waits for the answer before
# it: said at once, it landed inside that answer's body
behind_slow "$T/splice" "GET / HTTP/1.1\r\nHost: 8081-$SBX.$DOM\r\n\r\n"
is "another Host behind an answer still streaming: that answer whole, then 421" \
	"$(python3 -c 'import sys; b = open(sys.argv[1], "rb").read().split(b"\r\n\r\n", 1)[1]
print("whole, then 421" if b.startswith(b"HTTP/1.1 101 Switching Protocols\r\n\r\nHTTP/1.1 421") else repr(b[:48]))' "$T/splice")" \
	"whole, then 421"

# ---- every request on a kept-alive connection is authorized ----
# one connection, steps in order: "req FIELD" (a request with that field,
# or none for "-"), "sh CMD" (a change made meanwhile), "until FIELD"
# (the same request again until it is refused, at most 40 tries 0.5 s
# apart: no time is asserted, only that a refusal comes). Prints each
# status, then whether the edge kept the connection open.
cat >"$T/conn.py" <<'EOF'
import socket, subprocess, sys, time
port, host = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(20)
f = s.makefile("rb")
def head(field):
    extra = "" if field == "-" else field + "\r\n"
    return ("GET /k HTTP/1.1\r\nHost: %s\r\n%s\r\n" % (host, extra)).encode()
def answer():
    line = f.readline()
    if not line:
        return "closed"
    n = 0
    while True:
        l = f.readline()
        if l in (b"\r\n", b""):
            break
        if l.lower().startswith(b"content-length:"):
            n = int(l.split(b":")[1])
    f.read(n)
    return line.split()[1].decode()
def req(field):
    s.sendall(head(field))
    return answer()
out = []
for step in sys.argv[3:]:
    kind, _, arg = step.partition(" ")
    if kind == "req":
        out.append(req(arg))
    elif kind == "pipe":
        # both heads in one write, before any answer
        fields = arg.split("|")
        s.sendall(b"".join(head(x) for x in fields))
        for x in fields:
            out.append(answer())
            if out[-1] == "closed":
                break
    elif kind == "sh":
        subprocess.run(arg, shell=True, check=True, stdout=subprocess.DEVNULL)
    elif kind == "until":
        for i in range(40):
            st = req(arg)
            if st != "200":
                break
            time.sleep(0.5)
        out.append(st)
    if out and out[-1] == "closed":
        break
s.settimeout(3)
try:
    out.append("closed" if f.read(1) == b"" else "open")
except socket.timeout:
    out.append("open")
print(" ".join(out))
EOF
conn() { python3 "$T/conn.py" "$EP" "$@" 2>>"$T/err"; }
H0="8080-$SBX.$DOM"
is "one connection: the token, then no credential: 200, 401, closed" \
	"$(conn "$H0" "req X-Space-Traffic-Token: $TT" "req -")" "200 401 closed"
is "the token, then another sandbox's token: 200, 403, closed" \
	"$(conn "$H0" "req X-Space-Traffic-Token: $TT" "req X-Space-Traffic-Token: $TT2")" "200 403 closed"
is "the owner's key, then a made-up key: 200, 401, closed" \
	"$(conn "$H0" "req Authorization: Bearer $SPACE_API_KEY" \
	    "req Authorization: Bearer sk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")" "200 401 closed"
is "pipelined, the token then none: the first answered, then 401, closed" \
	"$(conn "$H0" "pipe X-Space-Traffic-Token: $TT|-")" "200 401 closed"
is "pipelined, the token three times: three answers, kept open" \
	"$(conn "$H0" "pipe X-Space-Traffic-Token: $TT|X-Space-Traffic-Token: $TT|X-Space-Traffic-Token: $TT")" \
	"200 200 200 open"
is "the token, then the owner's key, then the token: each authorized and served, kept open" \
	"$(conn "$H0" "req X-Space-Traffic-Token: $TT" "req Authorization: Bearer $SPACE_API_KEY" \
	    "req X-Space-Traffic-Token: $TT")" "200 200 200 open"
is "a public port: two requests without a credential, both served, kept open" \
	"$(conn "8081-$SBX.$DOM" "req -" "req -")" "200 200 open"
is "the token replaced while its connection is open: the old one is refused (403), closed" \
	"$(conn "$H0" "req X-Space-Traffic-Token: $TT" \
	    "sh curl -s -X POST -H 'Authorization: Bearer $SPACE_API_KEY' $CU/v1/sandboxes/$SBX/traffic-token" \
	    "until X-Space-Traffic-Token: $TT")" "200 403 closed"
is "a public port made private while a connection is open: 401 without a credential, closed" \
	"$(conn "8081-$SBX.$DOM" "req -" \
	    "sh curl -s -X POST -H 'Authorization: Bearer $SPACE_API_KEY' -d '{\"port\":8081,\"public\":false}' $CU/v1/sandboxes/$SBX/ports" \
	    "until -")" "200 401 closed"
is "... and on a new connection too" "$(code "$U1")" 401
check "the edge heard the revocations from space-control (/metrics)" \
	sh -c 'curl -s --max-time 5 "$1/metrics" | grep -q "^space_edge_revocations_total [1-9]"' sh "$E"
is "the port made public again: 200" "$(declare_port 8081 true; code "$U1")" "200200"

# ---- the same URL across a move: one rebuilt attempt ----
# space up's edge trusts a decision 5 s (--auth-ttl), less than a move
# takes: after it, the route is simply asked again. A second edge with
# --auth-ttl 60 holds the old route across the move, so the recovery of
# DESIGN section 8 is what serves: one rebuilt attempt, counted.
EP2=$(free_port)
space-edge --listen "127.0.0.1:$EP2" --control "$CU" --domain "localhost:$EP2" \
	--edge-credential-file "$D/edge/credential" --user nobody --auth-ttl 60 2>"$T/edge2.log" &
UP_KILL="$UP_KILL $!"
check "a second edge with --auth-ttl 60 answers" wait_http "http://127.0.0.1:$EP2/healthz" 20
E2="http://127.0.0.1:$EP2"
U2="http://8081-$SBX.localhost:$EP2/"
rebuilt() { curl -s --max-time 5 "$E2/metrics" | sed -n 's/^space_edge_route_rebuilt_total //p'; }
R0=$(rebuilt)
is "the public port through it, cached for 60 s" "$(code "$U2")" 200
is "... and through space up's edge" "$(code "$U1")" 200
if [ "$W0" = w1 ]; then W1=w2; else W1=w1; fi
timeout 90 space move "$SBX" --to "$W1" >"$T/move" 2>&1; rc=$?
is "space move to $W1" "$rc" 0
check "the web server starts again after the move" serve
is "the same URL serves after the move" "$(code "$U2")" 200
is "... from the new execution's port 8081" "$(jget port)" 8081
is "with one rebuilt attempt counted in /metrics" "$(( $(rebuilt) - R0 ))" 1
is "the next request uses the repaired route: no new rebuilt attempt" \
	"$(code "$U2")$(( $(rebuilt) - R0 ))" 2001
is "space up's edge serves the same URL after the move" "$(code "$U1"; jget port)" 2008081
# the feed, not the lifetime: this edge trusts a decision 60 s, and the
# replaced token is refused well within the 20 s the loop allows
code -X POST -H "Authorization: Bearer $SPACE_API_KEY" "$CU/v1/sandboxes/$SBX/traffic-token" >/dev/null
TT3=$(jget traffic_token)
is "with --auth-ttl 60, a replaced token is refused by the revocation feed (403), closed" \
	"$(python3 "$T/conn.py" "$EP2" "8080-$SBX.localhost:$EP2" "req X-Space-Traffic-Token: $TT3" \
	    "sh curl -s -X POST -H 'Authorization: Bearer $SPACE_API_KEY' $CU/v1/sandboxes/$SBX/traffic-token" \
	    "until X-Space-Traffic-Token: $TT3" 2>>"$T/err")" "200 403 closed"

# ---- the control plane's side ----
check "the edge credential is an ek_ secret, mode 0600" \
	sh -c 'case "$1" in ek_*) [ "$(stat -c %a "$2")" = 600 ];; *) false;; esac' sh "$EC" "$D/edge/credential"
check "the store keeps only its hash" \
	sh -c '! grep -raq -- "${1#ek_}" "$2"' sh "$EC" "$D/control"
is "the edge credential cannot list sandboxes (401)" \
	"$(code -H "Authorization: Bearer $EC" "$CU/v1/sandboxes")" 401
is "nor ask for the owner's route (401)" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d '{"port":8080,"proto":"http"}' "$CU/v1/sandboxes/$SBX/routes")" 401
is "nor make a traffic token (401)" \
	"$(code -X POST -H "Authorization: Bearer $EC" "$CU/v1/sandboxes/$SBX/traffic-token")" 401
is "an API key cannot ask /v1/edge/routes (401)" \
	"$(code -X POST -H "Authorization: Bearer $SPACE_API_KEY" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\"}" "$CU/v1/edge/routes")" 401
is "a forged edge credential is refused (401)" \
	"$(code -X POST -H "Authorization: Bearer ek_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\"}" "$CU/v1/edge/routes")" 401
is "the edge's route for a port nobody declared: 404" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8089,\"proto\":\"http\"}" "$CU/v1/edge/routes")" 404
is "for a private port without the token: 401" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\"}" "$CU/v1/edge/routes")" 401
is "for a public port: a capability for the gateway" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8081,\"proto\":\"http\"}" "$CU/v1/edge/routes"; jget endpoint | cut -c1-6)" "200tcp://"
is "an unknown field is refused (400)" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\",\"owner\":\"x\"}" "$CU/v1/edge/routes")" 400

is "a traffic token for another tenant's sandbox: 404" \
	"$(code -X POST -H "Authorization: Bearer $K2" "$CU/v1/sandboxes/$SBX/traffic-token")" 404
is "the owner makes a traffic token (200)" \
	"$(code -X POST -H "Authorization: Bearer $SPACE_API_KEY" "$CU/v1/sandboxes/$SBX/traffic-token")" 200
TT=$(jget traffic_token "$T/body")
check "it is a tt_ secret" sh -c 'case "$1" in tt_?*) true;; *) false;; esac' sh "$TT"
check "the store keeps only its hash" sh -c '! grep -raq -- "${1#tt_}" "$2"' sh "$TT" "$D/control"
code -X POST -H "Authorization: Bearer $SPACE_API_KEY" "$CU/v1/sandboxes/$SBX/traffic-token" >/dev/null
TT2=$(jget traffic_token "$T/body")
check "asking again makes another one" test -n "$TT2" -a "$TT2" != "$TT"
# the revocation feed the edge long-polls (GET /v1/edge/revocations)
RV="$CU/v1/edge/revocations"
is "an API key cannot read the revocation feed (401)" \
	"$(code -H "Authorization: Bearer $SPACE_API_KEY" "$RV?wait=0")" 401
is "a cursor of no run: drop everything (all)" \
	"$(code -H "Authorization: Bearer $EC" "$RV?wait=0"; jget all)" 200True
RB=$(jget boot); RS=$(jget seq)
is "this run's cursor, nothing since: an empty list" \
	"$(code -H "Authorization: Bearer $EC" "$RV?after=$RS&boot=$RB&wait=0"; printf %s "$(jget all)"; jget sandboxes)" "200False[]"
code -X POST -H "Authorization: Bearer $SPACE_API_KEY" "$CU/v1/sandboxes/$SBX/traffic-token" >/dev/null
is "a traffic token replaced: its sandbox is listed" \
	"$(code -H "Authorization: Bearer $EC" "$RV?after=$RS&boot=$RB&wait=5"; printf %s "$(jget all)"; jget sandboxes)" \
	"200False[\"$SBX\"]"
is "a malformed cursor: 400" "$(code -H "Authorization: Bearer $EC" "$RV?after=x")" 400

# ---- the edge under bad input ----
# raw HOST-less exchanges: what the edge answers to bytes sent as they are
raw() { python3 - "$EP" "$@" <<'EOF'
import socket, sys, time
port, data = int(sys.argv[1]), sys.argv[2].encode().decode("unicode_escape").encode("latin-1")
s = socket.create_connection(("127.0.0.1", port))
s.settimeout(15)
try:
    s.sendall(data)
    r = s.recv(200)
except Exception as e:
    r = b"ERR " + type(e).__name__.encode()
print(r.split(b"\r\n")[0].decode("latin-1") if r else "closed")
EOF
}
H="Host: 8080-$SBX.$DOM"
is "the edge's /healthz by its address (a health probe)" "$(curl -s --max-time 5 "http://127.0.0.1:$EP/healthz")" ok
is "a Host of another domain: 421" "$(raw "GET / HTTP/1.1\r\nHost: 8080-$SBX.example.com\r\n\r\n")" \
	"HTTP/1.1 421 Misdirected Request"
is "a malformed Host (port 0): 400" "$(raw "GET / HTTP/1.1\r\nHost: 0-$SBX.$DOM\r\n\r\n")" "HTTP/1.1 400 Bad Request"
is "a malformed Host (a dot in the sandbox): 400" "$(raw "GET / HTTP/1.1\r\nHost: 80-a.b.$DOM\r\n\r\n")" \
	"HTTP/1.1 400 Bad Request"
is "two Hosts: 400" "$(raw "GET / HTTP/1.1\r\n$H\r\nHost: 8081-$SBX.$DOM\r\n\r\n")" "HTTP/1.1 400 Bad Request"
is "both framings (smuggling): 400" \
	"$(raw "POST / HTTP/1.1\r\n$H\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n")" \
	"HTTP/1.1 400 Bad Request"
is "absolute-form (a proxy request): 400" "$(raw "GET http://x/ HTTP/1.1\r\n$H\r\n\r\n")" "HTTP/1.1 400 Bad Request"
is "garbage: 400" "$(raw "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n")" "HTTP/1.1 400 Bad Request"
is "a head of 20 KiB: 431" \
	"$(raw "GET / HTTP/1.1\r\n$H\r\nX: $(head -c 20480 /dev/zero | tr '\0' a)\r\n\r\n")" \
	"HTTP/1.1 431 Request Header Fields Too Large"
H="Host: 8089-$SBX.$DOM"
is "no credential for a sandbox's port nobody declared: 404" \
	"$(code -H "$H" "$E/")" 404
is "the owner's key for it: 404 too" "$(code -H "$H" -H "Authorization: Bearer $SPACE_API_KEY" "$E/")" 404

# a slowloris: one byte a second; the edge ends it after its head timeout
# (10 s) and keeps serving others meanwhile
python3 - "$EP" "$H" >"$T/slow" 2>&1 <<'EOF' &
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
t = time.time()
try:
    for c in ("GET / HTTP/1.1\r\n" + sys.argv[2] + "\r\nX-Slow: " + "a" * 60).encode():
        s.send(bytes([c]))
        time.sleep(0.5)
    print("not cut")
except OSError:
    print("cut")
EOF
SLOW=$!
is "the edge serves others during a slowloris" "$(curl -s --max-time 5 "$E/healthz")" "ok"
wait "$SLOW"
is "the slowloris is cut" "$(cat "$T/slow")" "cut"

# many idle connections at once: each is closed by its head timeout; the
# edge answers meanwhile
python3 - "$EP" <<'EOF' &
import socket, sys, time
socks = [socket.create_connection(("127.0.0.1", int(sys.argv[1]))) for _ in range(100)]
time.sleep(3)
EOF
IDLE=$!
sleep 1
is "the edge answers while 100 idle connections wait" "$(curl -s --max-time 5 "$E/healthz")" "ok"
wait "$IDLE"

curl -s --max-time 5 "$E/metrics" >"$T/metrics"
check "/metrics counts the refusals" grep -q 'space_edge_refused_total{reason="misdirected"} [1-9]' "$T/metrics"
check "... and the head timeouts" grep -q 'space_edge_refused_total{reason="head_timeout"} [1-9]' "$T/metrics"
check "space-edge runs as nobody" sh -c '[ "$(ps -o user= -p "$(pgrep -f "space-edge --listen 127.0.0.1:$1")")" = nobody ]' sh "$EP"
is "space-edge is still alive and answers" "$(curl -s --max-time 5 "$E/healthz")" "ok"
done_testing
