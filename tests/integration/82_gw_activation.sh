#!/bin/sh
# Gateway connections across an activation-only change (docs/network.md,
# "The network namespace belongs to the execution"). The sandbox's network
# namespace is made once per execution and every activation's jail joins
# it; its bridge is killed (-9) and relaunched as activation + 1. The
# jail itself is kept too (docs/jail.md, "The jail outlives its bridge"):
# the relaunched bridge attaches to the same guest. A WebSocket through
# the gateway to a server the sandbox runs (`space exec`) keeps exchanging
# messages across the relaunch; that server's pid and the sandbox's files
# are intact; so is a server placed into the namespace from the worker's
# side; the gateway is the same process; a new open with the old
# activation's capability is refused with refresh_route (at the gateway
# and at node-api), the new one's is admitted. A gateway killed on its
# own is started again. A move (a generation change) still closes a
# WebSocket with 4409, the old jail's processes are gone, and the
# namespace is released.
# ci: once
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
cp "$SPACE_BIN/netgtw" "$BIN/"
GC=$SPACE_TOP/tests/tools/gwc.py
WS=$SPACE_TOP/tests/tools/gwws.py
NP1=$(free_port) NP2=$(free_port) GP1=$(free_port) GP2=$(free_port)
MGR_FLAGS="--snapshot-dir $T/snapshots"
sp() { SPACE_API_URL=$CU SPACE_API_KEY=$K SPACE_ROUTE_CACHE=$T/routes.json "$SPACE_BIN/space" "$@"; }
svc() { cpost "/v1/sandboxes/$1/routes" "{\"port\":$2,\"proto\":\"$3\"}" >/dev/null; jget capability; }
gw() { python3 "$GC" "$@" 2>>"$T/gwc.log"; }
ws() { /usr/bin/python3 "$WS" "$@" 2>>"$T/gwws.log"; }
# fresh CAP: the capability re-signed with its identity and a new expiry
# (capabilities live 120 s; a slow machine must not turn an activation
# check into an expiry)
fresh() { python3 "$SPACE_TOP/tests/tools/mint_cap.py" "$T/c/keys" "$1" 0 2>>"$T/log"; }
netgtws() {
	for p in /proc/[0-9]*; do
		[ "$(readlink "$p/exe" 2>/dev/null)" = "$BIN/netgtw" ] && echo "${p#/proc/}"
	done
}
# the gateway of worker w1 (its command line names the sandbox)
gwpid() { for p in $(netgtws); do grep -q "$1" "/proc/$p/cmdline" && echo "$p"; done | head -1; }
# the namespace inode of a process, of a file
nsino() { readlink "/proc/$1/ns/net" | tr -dc 0-9; }
# the host pid of the jail's process whose command line has STRING (one
# scan of /proc: a loop of subshells per process is slow on a busy machine)
jproc() {
	/usr/bin/python3 -c '
import os, sys
want, ino = sys.argv[1], "net:[%s]" % sys.argv[2]
for p in sorted(os.listdir("/proc")):
    try:
        if p.isdigit() and os.readlink("/proc/%s/ns/net" % p) == ino and \
                want in open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode():
            print(p); break
    except OSError:
        pass' "$1" "$(stat -L -c %i "$NS")"
}
# the guest of a bridge monitor: its child in another network namespace
guest() {
	for c in $(cat "/proc/$1/task/$1/children" 2>/dev/null); do
		[ "$(nsino "$c")" != "$(nsino $$)" ] && echo "$c"
	done | head -1
}
# count DIR: the echoes a keep client has had
count() { cat "$1/count" 2>/dev/null || echo 0; }
# grows DIR N: true once DIR's client has had N more echoes than now (20 s)
grows() {
	_g0=$(count "$1"); _gi=0
	while [ "$(count "$1")" -lt $((_g0 + $2)) ] && [ $_gi -lt 200 ]; do sleep 0.1; _gi=$((_gi + 1)); done
	[ "$(count "$1")" -ge $((_g0 + $2)) ]
}
WSRV=
platform_on_cleanup() {
	[ -n "$WSRV" ] && kill "$WSRV" 2>/dev/null
	for p in $(netgtws); do kill -9 "$p" 2>/dev/null; done
}

check "space-control up" start_ctl
check "worker w1 up, gateway on $GP1" add_worker 1 w1 "$NP1" --gateway-listen "127.0.0.1:$GP1"
check "worker w2 up, gateway on $GP2" add_worker 2 w2 "$NP2" --gateway-listen "127.0.0.1:$GP2"

is "create a sandbox with ports 8080, 8090 and 8091" \
	"$(cpost /v1/sandboxes '{"worker":"w1","ports":[{"port":8080},{"port":8090},{"port":8091}]}')" 201
S=$(jget id)
check "running" wait_state "$S" running 20
NS=$T/w1/run/$S.g1/netns
check "its network namespace is held by the worker ($NS)" mountpoint -q "$NS"
BP=$(wsql w1 "SELECT bridge_pid FROM records WHERE sandbox='$S'")
G1=$(guest "$BP")
is "the jail runs in that namespace" "$(nsino "$G1")" "$(stat -L -c %i "$NS")"
GW=$(gwpid "$S")
is "the gateway works in it too" "$(nsino "$GW")" "$(stat -L -c %i "$NS")"

# a WebSocket echo server in the sandbox's namespace, placed there from
# the worker's side as nobody: it outlives the jail's processes
nsenter --net="$NS" setpriv --reuid=65534 --regid=65534 --clear-groups \
	/usr/bin/python3 "$WS" server 8090 2>>"$T/wsrv.log" &
WSRV=$!
# and the usual servers inside the jail (activation 1)
NU=http://127.0.0.1:$NP1
CAP=$(route "$S")
is "copy the servers in" "$(napi PUT 'files?path=/home/user/srv.py' --data-binary @"$SPACE_TOP/tests/tools/sbx_servers.py")" 200
sp exec "$S" --background --timeout 600 -- python3 /home/user/srv.py >/dev/null
# a WebSocket echo server the sandbox itself runs
is "copy the WebSocket server in" "$(napi PUT 'files?path=/home/user/gwws.py' --data-binary @"$WS")" 200
is "a file of the sandbox's" "$(napi PUT 'files?path=/home/user/keep.txt' --data-binary 'kept across activations')" 200
sp exec "$S" --background --timeout 600 -- /usr/bin/python3 /home/user/gwws.py server 8091 >/dev/null
i=0; while [ $i -lt 100 ]; do
	J1=$(svc "$S" 8091 http)
	[ "$(ws once "127.0.0.1:$GP1" "$J1" 8091)" = "ok echo" ] && break
	sleep 0.1; i=$((i + 1))
done
is "a WebSocket through the gateway to the sandbox's own server" "$(ws once "127.0.0.1:$GP1" "$J1" 8091)" "ok echo"
JS=$(jproc "gwws.py server 8091")
check "that server is a process of the jail (pid $JS on the host)" test -n "$JS"
i=0; while [ $i -lt 100 ]; do
	C1=$(svc "$S" 8090 http)
	[ "$(ws once "127.0.0.1:$GP1" "$C1" 8090)" = "ok echo" ] && break
	sleep 0.1; i=$((i + 1))
done
is "a WebSocket through the gateway" "$(ws once "127.0.0.1:$GP1" "$C1" 8090)" "ok echo"
i=0; while [ $i -lt 100 ]; do
	H1=$(svc "$S" 8080 http)
	case "$(gw "127.0.0.1:$GP1" "$H1" 8080 http http /)" in ok*) break ;; esac
	sleep 0.1; i=$((i + 1))
done
is "HTTP to the jail's server" "$(gw "127.0.0.1:$GP1" "$H1" 8080 http http /)" "ok 200 hello from the sandbox"

# ---- an activation-only change: the bridge killed, relaunched ----
mkdir "$T/k1" "$T/j1"
ws keep "127.0.0.1:$GP1" "$C1" 8090 "$T/k1" >"$T/k1/end" &
K1=$!
ws keep "127.0.0.1:$GP1" "$J1" 8091 "$T/j1" >"$T/j1/end" &
KJ=$!
W82=$(svc "$S" 8082 http)
check "a WebSocket kept open and exchanging" grows "$T/k1" 3
check "a WebSocket to the sandbox's own server kept open and exchanging" grows "$T/j1" 3
act=$(wsql w1 "SELECT activation FROM records WHERE sandbox='$S'")
kill -9 "$BP"
i=0; while [ "$(wsql w1 "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" != "serving $((act + 1))" ] && [ $i -lt 300 ]; do sleep 0.05; i=$((i + 1)); done
is "the bridge was relaunched as activation $((act + 1))" \
	"$(wsql w1 "SELECT state || ' ' || activation FROM records WHERE sandbox='$S'")" "serving $((act + 1))"
BP2=$(wsql w1 "SELECT bridge_pid FROM records WHERE sandbox='$S'")
check "the new bridge attached to the kept jail" grep -q "jail of $S g1 kept: activation $((act + 1)) attached to its guest (pid $G1)" "$T/mgr_w1.log"
check "the jail's guest is the same process" test -d "/proc/$G1"
is "... in the same network namespace" "$(nsino "$G1")" "$(stat -L -c %i "$NS")"
check "the WebSocket goes on exchanging messages after the relaunch" grows "$T/k1" 5
check "the WebSocket to the sandbox's own server too" grows "$T/j1" 5
is "that server is the same process" "$(jproc "gwws.py server 8091")" "$JS"
is "the gateway is the same process" "$(gwpid "$S")" "$GW"
check "sbx-manager logged the gateway kept" grep -q "gateway: $S g1 kept for activation $((act + 1))" "$T/mgr_w1.log"
touch "$T/k1/stop"; wait "$K1"
case "$(cat "$T/k1/end")" in "open "*) k1=open ;; *) k1=$(cat "$T/k1/end") ;; esac
is "... and was still open when the client stopped" "$k1" open
touch "$T/j1/stop"; wait "$KJ"
case "$(cat "$T/j1/end")" in "open "*) j1=open ;; *) j1=$(cat "$T/j1/end") ;; esac
is "... the one to the sandbox's server too" "$j1" open

is "a new open with the old activation's capability -> refresh_route" \
	"$(ws once "127.0.0.1:$GP1" "$(fresh "$C1")" 8090)" "error refresh_route activation_mismatch"
i=0; while [ $i -lt 100 ]; do
	C2=$(svc "$S" 8090 http)
	[ "$(jget route.activation)" = "$((act + 1))" ] && break
	sleep 0.1; i=$((i + 1))
done
is "a new capability names activation $((act + 1))" "$(jget route.activation)" "$((act + 1))"
is "... and is admitted" "$(ws once "127.0.0.1:$GP1" "$C2" 8090)" "ok echo"
OLDCAP=$(fresh "$CAP")
CAP=$(route "$S")
is "the sandbox's files are intact" "$(napi GET 'files?path=/home/user/keep.txt')" 200
is "... their content" "$(cat "$T/body")" "kept across activations"
is "the jail's own HTTP server survived its bridge" "$(gw "127.0.0.1:$GP1" "$(svc "$S" 8080 http)" 8080 http http /)" \
	"ok 200 hello from the sandbox"
CAP=$OLDCAP
is "the old activation's capability at node-api -> 409" "$(napi GET 'files?path=/home/user/keep.txt')" 409
is "... refresh_route activation_mismatch" "$(jget error) $(jget reason)" "refresh_route activation_mismatch"
CAP=$(route "$S")
is "the old capability for it -> refresh_route" "$(gw "127.0.0.1:$GP1" "$(fresh "$H1")" 8080 http http /)" \
	"error refresh_route activation_mismatch"

# ---- a gateway that dies on its own is started again ----
kill -9 "$GW"
i=0; while { [ -z "$(gwpid "$S")" ] || [ "$(gwpid "$S")" = "$GW" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
GW2=$(gwpid "$S")
check "a killed gateway is started again" test -n "$GW2" -a "$GW2" != "$GW"
check "... with a log line" grep -q "gateway: $S g1 (pid $GW) died on its own: starting another" "$T/mgr_w1.log"
is "... in the kept namespace" "$(nsino "$GW2")" "$(stat -L -c %i "$NS")"
C2=$(svc "$S" 8090 http)
i=0; while [ "$(ws once "127.0.0.1:$GP1" "$C2" 8090)" != "ok echo" ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
is "new opens work again" "$(ws once "127.0.0.1:$GP1" "$C2" 8090)" "ok echo"
is "... and the old activation is still refused there" "$(ws once "127.0.0.1:$GP1" "$(fresh "$C1")" 8090)" \
	"error refresh_route activation_mismatch"

# ---- a generation change still closes: 4409 ----
mkdir "$T/k2"
C2=$(svc "$S" 8090 http)
ws keep "127.0.0.1:$GP1" "$C2" 8090 "$T/k2" >"$T/k2/end" &
K2=$!
check "a WebSocket open again" grows "$T/k2" 3
is "move to w2 -> 202" "$(cpost "/v1/sandboxes/$S/move" '{"to":"w2"}')" 202
wait "$K2"
is "the move closed the WebSocket with 4409" "$(cat "$T/k2/end")" "close 4409"
check "running on w2" wait_state "$S" running 30
i=0; while { [ -d "/proc/$JS" ] || [ -d "/proc/$G1" ]; } && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "the old jail's server is gone (pid $JS)" test ! -d "/proc/$JS"
check "... and its guest (pid $G1)" test ! -d "/proc/$G1"
i=0; while mountpoint -q "$NS" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
check "the namespace of generation 1 was released on w1" sh -c "! mountpoint -q '$NS'"
is "no mount of w1's run directories left" "$(grep -c " $T/w1/run/" /proc/self/mountinfo)" 0
check "the new execution has a namespace of its own on w2" mountpoint -q "$T/w2/run/$S.g2/netns"
check "sbx-manager w1 alive" alive "$M1"
check "sbx-manager w2 alive" alive "$M2"
done_testing
