#!/bin/sh
# space-control: kill -9 at random points of lifecycle operations. Two
# workers are simulated by one process that behaves like sbx-manager
# (follows its assignment stream, installs, retires with an archive,
# retries its reports until the control plane answers). The test moves a
# sandbox back and forth and pauses/resumes it, killing the daemon at a
# random moment of each operation and restarting it. After every round:
# exactly one execution serves, no two executions ever ran at once on the
# workers' side, and every new generation restored the archive of the one
# before it.
# ci: beside
. "$SPACE_TOP/tests/lib.sh"

ctl_init
SIM=
cleanup() { [ -n "$SIM" ] && kill "$SIM" 2>/dev/null; ctl_cleanup KILL; }
trap cleanup EXIT INT TERM

. "$SPACE_TOP/tests/lib_simworker.sh"
CTL_FLAGS="--heartbeat-timeout 3600 --lease-ttl 1"
pause_ms() { sleep "0.$(printf '%03d' $(( $(od -An -N2 -tu2 /dev/urandom) % 700 )))"; }

K=$(space-control apikey add alice --data-dir "$D" 2>>"$T/log")
W1=$(space-control worker add w1 --data-dir "$D" 2>>"$T/log")
W2=$(space-control worker add w2 --data-dir "$D" 2>>"$T/log")
ctl_start
check "daemon started" true

# the simulated workers
cat >"$T/sim.py" <<'EOF'
import json, os, random, sys, threading, time, urllib.request, urllib.error
base, out = sys.argv[1], sys.argv[2]
workers = {"w1": sys.argv[3], "w2": sys.argv[4]}
lock = threading.Lock()
running = {}        # sandbox -> set of generations running on "our" workers
log = open(out, "a", buffering=1)

def call(w, method, path, body=None, timeout=35):
    # a worker retries until the control plane answers (it may be restarting)
    data = json.dumps(body).encode() if body is not None else None
    while True:
        try:
            r = urllib.request.Request(base + path, data=data, method=method,
                headers={"Authorization": "Bearer " + workers[w]})
            with urllib.request.urlopen(r, timeout=timeout) as f:
                return f.status, json.load(f)
        except urllib.error.HTTPError as e:
            return e.code, json.load(e)
        except Exception:
            time.sleep(0.1)

def worker(w, inc):
    call(w, "POST", "/v1/workers/%s/register" % w,
         {"incarnation": inc, "endpoint": "http://127.0.0.1:9", "capacity": 10})
    cur = 0
    while True:
        st, a = call(w, "GET", "/v1/workers/%s/assignments?after=%d&wait=5" % (w, cur))
        if st != 200:
            time.sleep(0.1)
            continue
        for x in a["assignments"]:
            i, sp = x["identity"], x["spec"]
            s, g = i["sandbox"], i["generation"]
            if x["action"] == "install":
                with lock:
                    others = running.setdefault(s, set())
                    if others:
                        log.write("OVERLAP %s g%d while %s run\n" % (s, g, sorted(others)))
                    others.add(g)
                log.write("install %s g%d %s on %s\n" % (s, g, sp.get("snapshot"), w))
                time.sleep(random.uniform(0, 0.4))      # restoring, launching
                st, _ = call(w, "POST", "/v1/workers/%s/status" % w, {"identity": i, "state": "serving"})
                log.write("serving %s g%d -> %d\n" % (s, g, st))
            elif x["action"] == "retire":
                with lock:
                    running.setdefault(s, set()).discard(g)
                time.sleep(random.uniform(0, 0.4))      # stopping, archiving
                b = {"identity": i, "state": "retired"}
                if sp.get("snapshot"):
                    b["snapshot"] = {"digest": os.urandom(32).hex(), "size": 1}
                st, _ = call(w, "POST", "/v1/workers/%s/status" % w, b)
                log.write("retired %s g%d -> %d\n" % (s, g, st))
        cur = a["revision"]

for w, inc in (("w1", "incA"), ("w2", "incB")):
    threading.Thread(target=worker, args=(w, inc), daemon=True).start()
while True:
    time.sleep(1)
EOF
python3 "$T/sim.py" "$U" "$T/sim.log" "$W1" "$W2" 2>>"$T/sim.err" &
SIM=$!
# both simulated workers registered (python starts slowly on a busy machine)
i=0
while [ "$(sql "SELECT COUNT(*) FROM workers WHERE state = 'live'")" != 2 ] && [ $i -lt 300 ]; do
	sleep 0.1; i=$((i + 1))
done

req POST /v1/sandboxes "$K" '{}' >/dev/null
S=$(jget id)
check "the sandbox runs" wait_state "$S" running 10

fails=0
rounds=0
for i in 1 2 3 4 5 6 7 8 9 10; do
	cur=$(req GET "/v1/sandboxes/$S" "$K" >/dev/null; jget execution.worker)
	if [ $((i % 4)) = 0 ]; then
		req POST "/v1/sandboxes/$S/pause" "$K" '{}' >/dev/null
		pause_ms
		ctl_crash; ctl_start
		wait_state "$S" paused 15 || { [ "$(state "$S")" = running ] || fails=$((fails + 1)); }
		req POST "/v1/sandboxes/$S/resume" "$K" '{}' >/dev/null
		pause_ms
		ctl_crash; ctl_start
	else
		to=w1; [ "$cur" = w1 ] && to=w2
		req POST "/v1/sandboxes/$S/move" "$K" "{\"to\":\"$to\"}" >/dev/null
		pause_ms
		ctl_crash; ctl_start
	fi
	if ! wait_state "$S" running 15; then
		fails=$((fails + 1)); diag "round $i: sandbox is $(state "$S")"
	fi
	n=$(sql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state IN ('pending','starting','serving')")
	sv=$(sql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND state='serving'")
	[ "$n" = 1 ] && [ "$sv" = 1 ] || { fails=$((fails + 1)); diag "round $i: $n active, $sv serving"; }
	rounds=$((rounds + 1))
done
is "10 rounds with a kill -9 each: running with exactly one serving execution after every one" "$fails" 0
G=$(sql "SELECT MAX(generation) FROM executions WHERE sandbox='$S'")
check "operations happened ($G generations)" test "$G" -ge 5
is "generations 1..$G, none reused" "$(sql "SELECT COUNT(*) || ' ' || COUNT(DISTINCT generation) FROM executions WHERE sandbox='$S'")" "$G $G"
is "generations strictly increase in creation order" \
	"$(sql "SELECT COUNT(*) FROM executions a JOIN executions b ON a.sandbox = b.sandbox AND a.rowid < b.rowid AND a.generation >= b.generation")" 0
is "every execution but the last retired, none failed" \
	"$(sql "SELECT COUNT(*) FROM executions WHERE sandbox='$S' AND generation < $G AND state <> 'retired'")" 0
is "every new generation restored the archive of the one before it" \
	"$(sql "SELECT COUNT(*) FROM assignments a JOIN snapshots s ON s.sandbox = a.sandbox AND s.generation = a.generation - 1 AND s.kind = 'auto' WHERE a.sandbox='$S' AND a.action = 'install' AND a.generation > 1 AND json_extract(a.spec, '$.snapshot') = s.digest")" "$((G - 1))"
is "the workers never ran two executions of the sandbox at once" "$(grep -c OVERLAP "$T/sim.log")" 0
is "no operation left open, no lease held" \
	"$(sql "SELECT COUNT(*) FROM operations WHERE step <> 'done'") $(sql "SELECT COUNT(*) FROM sandboxes WHERE lease_owner IS NOT NULL")" "0 0"
TK=$(sql "SELECT COUNT(*) FROM audit WHERE action='operation.takeover'")
check "operations were taken over after crashes ($TK takeovers, $(sql "SELECT COUNT(*) FROM operations") operations)" test "$TK" -ge 1
is "store integrity" "$(store_integrity)" ok
kill "$SIM"; SIM=
kill "$PID"; wait "$PID"; RC=$?; PID=
is "clean shutdown" "$RC" 0
check "no sanitizer report in the daemon log" sh -c "! grep -Eq 'Sanitizer|runtime error' '$T/log'"
done_testing
