#!/bin/sh
# space-edge, the public entry (docs/network.md "space-edge"), as space up
# runs it: the edge credential and the traffic token on the control plane,
# from the attacker's side (an API key on the edge's endpoint, the edge's
# credential everywhere else, another tenant's key, a wrong token), and the
# edge itself under bad input (malformed Host, a huge head, a slowloris,
# garbage, a second Host on one connection), unharmed afterwards.
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

# ---- the control plane's side ----
check "the edge credential is an ek_ secret, mode 0600" \
	sh -c 'case "$1" in ek_*) [ "$(stat -c %a "$2")" = 600 ];; *) false;; esac' sh "$EC" "$D/edge/credential"
check "the store keeps only its hash" \
	sh -c '! grep -raq -- "${1#ek_}" "$2"' sh "$EC" "$D/control"
SBX=$(space create 2>"$T/err"); rc=$?
is "space create" "$rc" 0
code() { curl -s -o "$T/body" -w '%{http_code}' --max-time 20 "$@"; }
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
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\"}" "$CU/v1/edge/routes")" 404
is "an unknown field is refused (400)" \
	"$(code -X POST -H "Authorization: Bearer $EC" -d "{\"sandbox\":\"$SBX\",\"port\":8080,\"proto\":\"http\",\"owner\":\"x\"}" "$CU/v1/edge/routes")" 400

K2=$(space-control apikey add mallory --data-dir "$D/control" 2>>"$T/err")
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
is "no credential for a sandbox's port nobody declared: 404" \
	"$(code -H "$H" "$E/")" 404

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
