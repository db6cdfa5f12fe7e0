#!/bin/sh
# The two HTTP daemons (space-control, node-api) against a hostile client
# with raw sockets on loopback: a request with both Content-Length and
# Transfer-Encoding is answered 400 and its connection closed, so a request
# smuggled behind it is answered by nobody (RFC 9112 section 6.3); a NUL or
# another control character in the request target (%00 in path=, in a
# path parameter) is 400, never cut short; half-open connections and
# trickled heads cannot keep other clients out.
. "$SPACE_TOP/tests/lib.sh"

T=$(mktemp -d)
CP=$(free_port)
NP=$(free_port)
while [ "$NP" = "$CP" ]; do NP=$(free_port); done
PIDC= PIDN=
cleanup() {
	for p in $PIDC $PIDN; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# a short head timeout (an operator's flag) keeps the trickle test short
space-control --data-dir "$T/c" --listen "127.0.0.1:$CP" --http-head-timeout 3 2>>"$T/ctl.log" &
PIDC=$!
node-api --listen "127.0.0.1:$NP" --manager-socket "$T/none.sock" --worker-id w1 \
	--http-head-timeout 3 2>>"$T/napi.log" &
PIDN=$!
check "space-control up" wait_http "http://127.0.0.1:$CP/healthz" 10
check "node-api up" wait_http "http://127.0.0.1:$NP/healthz" 10

cat >"$T/raw.py" <<'PY'
import socket, sys, time
port, case = int(sys.argv[1]), sys.argv[2]
def raw(data, t=5):
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(t)
    s.sendall(data)
    out = b""
    try:
        while True:
            d = s.recv(65536)
            if not d:
                break
            out += d
    except socket.timeout:
        out += b"<open>"
    except ConnectionResetError:
        out += b"<reset>"
    return out
if case == "smuggle":
    # the first request's body is empty by its chunked framing; a reader
    # using Content-Length instead would take the next request as body
    r = raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    first = r.split(b"\r\n", 1)[0].decode(errors="replace")
    n = r.count(b"HTTP/1.1 ")
    print("%s|answers=%d|%s" % (first, n, "closed" if not r.endswith(b"<open>") else "open"))
elif case == "twocl":
    r = raw(b"GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 40\r\n\r\n"
            b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    print("%s|answers=%d" % (r.split(b"\r\n", 1)[0].decode(errors="replace"), r.count(b"HTTP/1.1 ")))
else:
    # a request target given on the command line, sent as is
    r = raw(b"GET " + case.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    print(r.split(b"\r\n", 1)[0].decode(errors="replace"))
PY
raw() { python3 "$T/raw.py" "$@"; }

for d in control:$CP node-api:$NP; do
	n=${d%%:*} p=${d#*:}
	is "$n: Content-Length + Transfer-Encoding -> 400, one answer, connection closed" \
		"$(raw "$p" smuggle)" "HTTP/1.1 400 Bad Request|answers=1|closed"
	is "$n: Content-Length twice -> 400, one answer" "$(raw "$p" twocl)" "HTTP/1.1 400 Bad Request|answers=1"
	is "$n: an ordinary request still works" "$(raw "$p" /healthz)" "HTTP/1.1 200 OK"
done
is "node-api: %00 in path= -> 400" "$(raw "$NP" '/v1/sandboxes/s1/files?path=/etc/passwd%00.txt')" "HTTP/1.1 400 Bad Request"
is "node-api: %0a in path= -> 400" "$(raw "$NP" '/v1/sandboxes/s1/fs/stat?path=/a%0ab')" "HTTP/1.1 400 Bad Request"
is "node-api: %00 in the sandbox id -> 400" "$(raw "$NP" '/v1/sandboxes/s1%00x/files?path=/a')" "HTTP/1.1 400 Bad Request"
is "node-api: %7F in path= -> 400" "$(raw "$NP" '/v1/sandboxes/s1/files?path=/a%7f')" "HTTP/1.1 400 Bad Request"
is "node-api: an ordinary path= is not refused as such (401: no bearer)" \
	"$(raw "$NP" '/v1/sandboxes/s1/files?path=/a%20b')" "HTTP/1.1 401 Unauthorized"
is "control: %00 in a path parameter -> 400" "$(raw "$CP" '/v1/sandboxes/ab%00cd')" "HTTP/1.1 400 Bad Request"
is "control: %01 in the query -> 400" "$(raw "$CP" '/v1/sandboxes?x=%01')" "HTTP/1.1 400 Bad Request"
is "control: an ordinary id is not refused as such (401: no key)" "$(raw "$CP" '/v1/sandboxes/abcd')" "HTTP/1.1 401 Unauthorized"

# ---- connection exhaustion ----
cat >"$T/flood.py" <<'PY'
import socket, subprocess, sys, time
port, case = int(sys.argv[1]), sys.argv[2]
if case == "halfopen":
    # 300 connections from this address, each stopped in the middle of its
    # head; then a client from the same address asks for /healthz
    held = []
    for i in range(300):
        s = socket.socket()
        try:
            s.connect(("127.0.0.1", port))
            s.send(b"GET /healthz HTTP/1.1\r\nHo")
            held.append(s)
        except OSError:
            s.close()
    time.sleep(1.5)   # the oldest pending head (a second or more) is closed for a new one
    r = subprocess.run(["curl", "-s", "-m", "10", "-o", "/dev/null", "-w", "%{http_code}",
                        "http://127.0.0.1:%d/healthz" % port], capture_output=True, text=True)
    print(r.stdout)
else:
    # one header byte every second, for up to 30 s: the head never ends
    # in time, and the server must not wait for it
    s = socket.create_connection(("127.0.0.1", port))
    s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    for i in range(30):
        try:
            s.send(b"a")
        except OSError:
            print("closed by the server"); sys.exit(0)
        s.settimeout(1)
        try:
            d = s.recv(4096)
            if not d:
                print("closed by the server"); sys.exit(0)
            print("answered: " + d.split(b"\r\n", 1)[0].decode()); sys.exit(0)
        except socket.timeout:
            pass
        except OSError:
            print("closed by the server"); sys.exit(0)
    print("still open after 30 s")
PY
for d in control:$CP node-api:$NP; do
	n=${d%%:*} p=${d#*:}
	is "$n: 300 half-open connections from one address, a new client from it is answered" \
		"$(python3 "$T/flood.py" "$p" halfopen)" 200
	is "$n: a head trickled at 1 byte/s is cut at the head timeout (3 s), not kept open" \
		"$(python3 "$T/flood.py" "$p" trickle)" "closed by the server"
done
check "both daemons survived" sh -c "kill -0 $PIDC && kill -0 $PIDN"

kill "$PIDC"; wait "$PIDC"; RC=$?; PIDC=
is "space-control stops cleanly" "$RC" 0
check "no sanitizer report" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/ctl.log' '$T/napi.log'"
done_testing
