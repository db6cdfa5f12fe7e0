#!/bin/sh
# netgtw: declared service ports and the gateway into a sandbox port.
# A web server, a TCP echo and a protocol-switching server run inside a
# sandbox (tests/tools/sbx_servers.py, on the sandbox's 127.0.0.1); a
# client (tests/tools/gwc.py) reaches them through the worker's gateway
# listener with the hello and a service capability. Attacks at netgtw
# from the outside: an undeclared port, another sandbox's capability, a
# control capability, an expired and a tampered one, garbage, an
# oversized and a slow hello; each refused with its code and the daemons
# unharmed. A move (a generation change) closes an open connection: a
# WebSocket with 4409, raw TCP with a reset. The space port CLI.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
cp "$SPACE_BIN/netgtw" "$BIN/"
GC=$SPACE_TOP/tests/tools/gwc.py
NP1=$(free_port) NP2=$(free_port) GP1=$(free_port) GP2=$(free_port)
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
sp() { SPACE_API_URL=$CU SPACE_API_KEY=$K SPACE_ROUTE_CACHE=$T/routes.json "$SPACE_BIN/space" "$@"; }
# svc SBX PORT PROTO: a service capability; the answer stays in $T/body
svc() { cpost "/v1/sandboxes/$1/routes" "{\"port\":$2,\"proto\":\"$3\"}" >/dev/null; jget capability; }
# a port's declaration reaches w1 a moment after the control plane
# answered: ndecl is how many ports w1 last said S declares
ndecl() { grep "gateway: $S declares" "$T/mgr_w1.log" | tail -1 | sed 's/.*declares \([0-9]*\) port.*/\1/'; }
declares() { [ "$(ndecl)" = "$1" ]; }
gw() { python3 "$GC" "$@" 2>>"$T/gwc.log"; }
# netgtw processes of this test (their executable is our private copy)
netgtws() {
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$BIN/netgtw" ] && echo "${p#/proc/}"
	done
}

# they end with their sbx-manager (parent-death signal); this is the net
platform_on_cleanup() { for p in $(netgtws); do kill -9 "$p" 2>/dev/null; done; }

check "space-control up" start_ctl
check "worker w1 up, gateway on $GP1" add_worker 1 w1 "$NP1" --gateway-listen "127.0.0.1:$GP1"
check "worker w2 up, gateway on $GP2" add_worker 2 w2 "$NP2" --gateway-listen "127.0.0.1:$GP2"

# ---- declared ports: at create, API, CLI ----
is "create with a declared port" "$(cpost /v1/sandboxes '{"worker":"w1","ports":[{"port":8080}]}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
is "create with port 0 -> 400" "$(cpost /v1/sandboxes '{"ports":[{"port":0}]}')" 400
is "create with a port given twice -> 400" "$(cpost /v1/sandboxes '{"ports":[{"port":1},{"port":1}]}')" 400
is "space port expose 8081" "$(sp port expose "$S" 8081 >/dev/null; echo $?)" 0
is "space port expose 8082 --public" "$(sp port expose "$S" 8082 --public >/dev/null; echo $?)" 0
is "space port ls" "$(sp port ls "$S" | tr '\n' ,)" "8080,8081,8082 public,"
is "expose again changes public" "$(sp port expose "$S" 8081 --public | tr '\n' ,)" "8080,8081 public,8082 public,"
is "POST ports with an unknown member -> 400" "$(cpost "/v1/sandboxes/$S/ports" '{"port":1,"x":1}')" 400
is "space port expose 70000 refused" "$(sp port expose "$S" 70000 2>/dev/null; echo $?)" 2
is "space port url" "$(SPACE_EDGE_DOMAIN=localhost:8000 sp port url "$S" 8080)" "http://8080-$S.localhost:8000"
is "GET ports with a key that is not one -> 401" "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sk_nobody' "$CU/v1/sandboxes/$S/ports")" 401

# ---- the servers inside the sandbox ----
NU=http://127.0.0.1:$NP1
CAP=$(route "$S")
is "copy the servers in" "$(napi PUT 'files?path=/home/user/srv.py' --data-binary @"$SPACE_TOP/tests/tools/sbx_servers.py")" 200
sp exec "$S" --background --timeout 600 -- python3 /home/user/srv.py >/dev/null
i=0; while [ $i -lt 100 ]; do
	C=$(svc "$S" 8080 http)
	case "$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" in ok*) break ;; esac
	sleep 0.1; i=$((i + 1))
done

# ---- through the gateway ----
C=$(svc "$S" 8080 http)
is "service route endpoint is w1's gateway" "$(jget endpoint)" "tcp://127.0.0.1:$GP1"
is "HTTP GET through netgtw" "$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" "ok 200 hello from the sandbox"
C=$(svc "$S" 8081 tcp)
is "raw TCP through netgtw" "$(gw "127.0.0.1:$GP1" "$C" 8081 tcp echo hi)" "ok echo: hi"
G=$(for p in $(netgtws); do grep -q gateway "/proc/$p/cmdline" && echo "$p"; done | head -1)
is "the gateway runs as nobody" "$(awk '/^Uid:/ { print $2 $3 $4 $5 }' "/proc/$G/status")" 65534655346553465534
is "... with no capabilities" "$(awk '/^CapEff:|^CapPrm:/ { print $2 }' "/proc/$G/status" | tr '\n' ,)" "0000000000000000,0000000000000000,"
is "... no_new_privs" "$(awk '/^NoNewPrivs:/ { print $2 }' "/proc/$G/status")" 1
check "... in the sandbox's network namespace, not the worker's" \
	test "$(readlink "/proc/$G/ns/net")" != "$(readlink /proc/self/ns/net)"

# ---- attacks at netgtw ----
is "control plane refuses a route to an undeclared port" "$(cpost "/v1/sandboxes/$S/routes" '{"port":8083,"proto":"http"}')" 404
N0=$(ndecl)
sp port expose "$S" 8083 >/dev/null
eventually 20 declares $((N0 + 1))
C83=$(svc "$S" 8083 http)
sp port rm "$S" 8083 >/dev/null
is "port rm" "$(sp port ls "$S" | tr '\n' ,)" "8080,8081 public,8082 public,"
check "... applied by w1 (it declares $N0 ports again)" eventually 20 declares "$N0"
is "undeclared port (capability issued before rm): refused" "$(gw "127.0.0.1:$GP1" "$C83" 8083 http http /)" \
	"error port_not_declared port 8083 is not declared"
C=$(svc "$S" 8080 http)
is "hello for another port than the capability's" "$(gw "127.0.0.1:$GP1" "$C" 8081 http http /)" "error deny port_mismatch"
is "hello for another protocol" "$(gw "127.0.0.1:$GP1" "$C" 8080 tcp echo x)" "error deny proto_mismatch"
is "a control capability" "$(gw "127.0.0.1:$GP1" "$(route "$S")" 8080 http http /)" "error deny wrong_audience"
EXP=$(python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$C" 300 2>>"$T/log")
is "an expired capability" "$(gw "127.0.0.1:$GP1" "$EXP" 8080 http http /)" "error capability_expired expired"
# one character of the signature changed
TAMP=$(python3 -c 'import sys; t=sys.argv[1]; b=t.split("."); s=b[2]; i=len(s)-10; b[2]=s[:i]+("A" if s[i]!="A" else "B")+s[i+1:]; print(".".join(b))' "$C")
is "a tampered capability" "$(gw "127.0.0.1:$GP1" "$TAMP" 8080 http http /)" "error deny bad_signature"
# a gateway runs only while the sandbox declares a port
is "create a second sandbox on w1, no port" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S2=$(jget id)
check "second sandbox running" wait_state "$S2" running 20
gw_of() { for p in $(netgtws); do argv_of "$p" | grep -q -- "--sandbox $1 " && echo "$p"; done; }
# until_ok N CMD...: CMD succeeds within N tenths of a second
until_ok() { _n=$1; shift; _i=0; while [ $_i -lt "$_n" ]; do "$@" && return 0; sleep 0.1; _i=$((_i + 1)); done; return 1; }
has_gw() { [ -n "$(gw_of "$1")" ]; }
no_gw() { [ -z "$(gw_of "$1")" ]; }
check "no gateway process for a sandbox without a declared port" no_gw "$S2"
is "... its gateway socket is absent" "$(ls "$T/w1/gw/" | grep -c "$S2")" 0
is "... a hello for it: refresh_route no_record" "$(gw "127.0.0.1:$GP1" "$(route "$S2")" 8080 http http /)" \
	"error refresh_route no_record"
is "declare 8080 later" "$(sp port expose "$S2" 8080 >/dev/null; echo $?)" 0
check "... a gateway starts for it" until_ok 100 has_gw "$S2"
C2=$(svc "$S2" 8080 http)
is "... it refuses a control capability as before" "$(gw "127.0.0.1:$GP1" "$(route "$S2")" 8080 http http /)" \
	"error deny wrong_audience"
is "another sandbox's capability for port 8080 does not reach this sandbox's server" \
	"$(gw "127.0.0.1:$GP1" "$C2" 8080 http http /)" "error unavailable nothing listens on port 8080 in the sandbox"
is "S's capability at w2's gateway (no such execution there)" "$(gw "127.0.0.1:$GP2" "$C" 8080 http http /)" \
	"error refresh_route no_record"
is "garbage instead of a hello" "$(gw "127.0.0.1:$GP1" raw 474554202f20485454502f312e310d0a0d0a)" \
	"error bad_request not a gateway hello (SGW1, length 1..4096)"
is "an oversized hello" "$(gw "127.0.0.1:$GP1" raw 5347573100100000)" \
	"error bad_request not a gateway hello (SGW1, length 1..4096)"
is "a hello that is not the right JSON" "$(gw "127.0.0.1:$GP1" raw 53475731000000027b7d)" "error bad_request bad_members"
is "a slow hello is cut off" "$(gw "127.0.0.1:$GP1" raw 53475731)" "error timeout no complete hello in time"
sp port rm "$S2" 8080 >/dev/null
check "the last port removed: its gateway stops" until_ok 100 no_gw "$S2"
is "... the capability issued before: refresh_route no_record" "$(gw "127.0.0.1:$GP1" "$C2" 8080 http http /)" \
	"error refresh_route no_record"
check "... S's gateway still runs" has_gw "$S"
check "sbx-manager w1 unharmed" alive "$M1"
C=$(svc "$S" 8080 http)
is "the gateway still serves after the attacks" "$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" "ok 200 hello from the sandbox"
# a client that half-closes and then resets, to a service that says
# nothing: the gateway must not spin on the dead socket's hang-up
N0=$(ndecl)
is "space port expose 8084" "$(sp port expose "$S" 8084 >/dev/null; echo $?)" 0
check "... applied by w1" eventually 20 declares $((N0 + 1))
C84=$(svc "$S" 8084 tcp)
is "half-close then reset, to a silent service" "$(gw "127.0.0.1:$GP1" "$C84" 8084 tcp finrst 0.3)" "reset sent"
G=$(gw_of "$S" | head -1)
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
t0=$(ticks "$G"); sleep 2; t1=$(ticks "$G")
diag "the gateway's CPU over 2 s after it: $((t1 - t0)) ticks"
check "... the gateway ($G) is not spinning (under 50 ticks of CPU in 2 s; a spin takes about 200)" test $((t1 - t0)) -lt 50
is "... and serves on" "$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" "ok 200 hello from the sandbox"

# ---- an answer that comes too late is not taken for the next check's ----
# sbx-manager stalls past the gateway's wait (5 s) while an allowed open
# waits for its check. The owner has removed port 8083, whose capability
# an attacker kept; the attacker's open is the next one, and sbx-manager's
# late "ok" for the first must not be taken for its answer.
# sbx-manager is stalled only once it applied the removal (what it says of
# 8083 later is then the answer to the attacker's open, not the state
# before the removal)
N0=$(ndecl)
sp port expose "$S" 8083 >/dev/null
eventually 20 declares $((N0 + 1))
C83=$(svc "$S" 8083 http)
sp port rm "$S" 8083 >/dev/null
check "w1 applied the removal of 8083 (it declares $N0 ports again)" eventually 20 declares "$N0"
kill -STOP "$M1"
is "sbx-manager stalled: an allowed open is refused once the gateway stops waiting" \
	"$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" "error unavailable the worker did not answer the admission check"
gw "127.0.0.1:$GP1" "$C83" 8083 http http / >"$T/late" &
LATE=$!
sleep 0.5
kill -CONT "$M1"
wait "$LATE"
is "the next open, to the removed port, gets its own answer, not the late ok" "$(cat "$T/late")" \
	"error port_not_declared port 8083 is not declared"
check "... the late answer was seen and dropped" grep -q "the answer to check .* came after it was given up: dropped" "$T/mgr_w1.log"
is "... and the gateway serves on" "$(gw "127.0.0.1:$GP1" "$C" 8080 http http /)" "ok 200 hello from the sandbox"

# ---- a generation change closes open connections ----
CW=$(svc "$S" 8082 http)
gw "127.0.0.1:$GP1" "$CW" 8082 http hold "$T/ws_open" >"$T/ws_end" &
WSC=$!
CT=$(svc "$S" 8081 tcp)
gw "127.0.0.1:$GP1" "$CT" 8081 tcp holdtcp "$T/tcp_open" >"$T/tcp_end" &
TCC=$!
i=0; while { [ ! -s "$T/ws_open" ] || [ ! -s "$T/tcp_open" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "WebSocket and TCP connections open through the gateway" test -s "$T/ws_open" -a -s "$T/tcp_open"
is "move to w2 -> 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
wait "$WSC"; wait "$TCC"
is "the WebSocket was closed with 4409" "$(cat "$T/ws_end")" "close 4409"
is "the TCP connection was reset" "$(cat "$T/tcp_end")" "reset"
check "running on w2" wait_state "$S" running 30
is "the generation-1 capability at w2's gateway -> refresh_route" "$(gw "127.0.0.1:$GP2" "$C" 8080 http http /)" \
	"error refresh_route generation_mismatch"
NU=http://127.0.0.1:$NP2
sp exec "$S" --background --timeout 600 -- python3 /home/user/srv.py >/dev/null
i=0; while [ $i -lt 100 ]; do
	C=$(svc "$S" 8080 http)
	case "$(gw "127.0.0.1:$GP2" "$C" 8080 http http /)" in ok*) break ;; esac
	sleep 0.1; i=$((i + 1))
done
is "after the move the route names w2's gateway" "$(jget endpoint)" "tcp://127.0.0.1:$GP2"
is "the declared ports moved with the sandbox" "$(gw "127.0.0.1:$GP2" "$C" 8080 http http /)" "ok 200 hello from the sandbox"
is "no gateway socket of S left on w1" "$(ls "$T/w1/gw/" | grep -c "$S")" 0
check "sbx-manager w1 alive" alive "$M1"
check "sbx-manager w2 alive" alive "$M2"
L=$(for p in $(netgtws); do grep -q "w1/gw" "/proc/$p/cmdline" && echo "$p"; done | head -1)
stop M1
check "the listener ends with its sbx-manager" gone "$L" 5
done_testing
