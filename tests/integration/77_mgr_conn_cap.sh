#!/bin/sh
# sbx-manager --api-conns N: at most N connections from node-api at once
# (an open stream is one for as long as it is open). A client that holds N
# idle connections gets every further one closed at once, counted in
# space_sbxmgr_connection_limit_total; a slot it gives back is taken again.
# A value out of range is refused at start.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
NP=$(free_port)
register_worker w1
check "space-control up" start_ctl

for bad in 0 65537 4294967298 x; do
	"$BIN/sbx-manager" --data-dir "$T/bad" --control "$CU" --worker-id w1 \
	    --credential-file "$T/cred_w1" --root-key "$ROOT" --endpoint "http://127.0.0.1:$NP" \
	    --capacity 2 --api-conns "$bad" >/dev/null 2>&1
	is "--api-conns $bad is refused (exit 2)" "$?" 2
done

check "sbx-manager with --api-conns 3 up" start_mgr 1 w1 "$NP" --api-conns 3
SOCK=$T/w1/run/sbx-manager.sock
# hold: 3 idle connections; a 4th must be closed by sbx-manager (EOF), and
# once one of the 3 is closed a new one must stay open
python3 - "$SOCK" >"$T/cap.out" 2>&1 <<'PY'
import socket, sys, time
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    s.settimeout(1.5)
    return s
def state(s, wait=1.5):
    s.settimeout(wait)
    try:
        return "closed" if s.recv(1) == b"" else "data"
    except socket.timeout:
        return "open"
    except OSError:
        return "closed"
held = [conn() for _ in range(3)]
time.sleep(0.3)
print("held", " ".join(state(s) for s in held))
print("fourth", state(conn(), 10))
held[0].close()
# sbx-manager sees the slot given back once it read the close
for _ in range(20):
    time.sleep(0.5)
    st = state(conn())
    if st == "open":
        break
print("after one closed", st)
PY
is "three idle connections are held open" "$(sed -n 1p "$T/cap.out")" "held open open open"
is "a fourth is closed at once" "$(sed -n 2p "$T/cap.out")" "fourth closed"
is "a slot given back is taken again" "$(sed -n 3p "$T/cap.out")" "after one closed open"
i=0; while ! grep -Eq '^space_sbxmgr_connection_limit_total [1-9]' "$T/w1/metrics.prom" 2>/dev/null && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "the refusal is counted (space_sbxmgr_connection_limit_total)" grep -Eq '^space_sbxmgr_connection_limit_total [1-9]' "$T/w1/metrics.prom"
check "sbx-manager is still running" kill -0 "$M1"
done_testing
