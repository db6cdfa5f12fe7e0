#!/bin/sh
# The retirement propagation delay: a sandbox moves between two real
# workers ten times; a poller asks the source worker with a capability for
# the serving execution every 5 ms, from before the move call until after
# the sandbox runs again. Reported (diag line and build/test-logs/
# retire-propagation.txt): the time from the 202 to the first 409. Asserted:
# only correctness. Before the first 409 every 200 came from the old
# generation on the source worker, after it never a 200 again.
. "$SPACE_TOP/tests/lib.sh"
. "$SPACE_TOP/tests/lib_platform.sh"

platform_init
# every worker caches archives in its own DATA/snapshots; the control
# plane keeps them in $T/c/archives (they travel over HTTP by digest)
NP1=$(free_port); NP2=$(free_port)

check "space-control up" start_ctl
check "worker w1 up" add_worker 1 w1 "$NP1"
check "worker w2 up" add_worker 2 w2 "$NP2"

is "create a sandbox on w1" "$(cpost /v1/sandboxes '{"worker":"w1"}')" 201
S=$(jget id)
check "running" wait_state "$S" running 30

cat >"$T/measure.py" <<'PY'
# For each move: a capability for the serving execution, a poller that asks
# the source worker with it every 5 ms from before the move call until well
# after the sandbox runs again, and the times of the 202 and of every answer.
import http.client, json, statistics, sys, threading, time, urllib.parse
cu, key, sbx, nmoves, out = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
cp = urllib.parse.urlsplit(cu)

def ctl(method, path, body=None):
    c = http.client.HTTPConnection(cp.hostname, cp.port, timeout=20)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Authorization": "Bearer " + key})
    r = c.getresponse(); d = r.read(); c.close()
    return r.status, (json.loads(d) if d else None)

def state():
    return ctl("GET", "/v1/sandboxes/" + sbx)[1]

def wait_running(limit=30):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        s = state()
        if s["state"] == "running" and s["execution"]["state"] == "serving":
            return s
        time.sleep(0.05)
    raise SystemExit("not running again within %d s" % limit)

def route():
    for _ in range(150):
        st, b = ctl("POST", "/v1/sandboxes/%s/routes" % sbx, {"access": ["fs:r", "fs:w"]})
        if st == 200:
            return b
        time.sleep(0.2)
    raise SystemExit("no route")

def poll(ep, cap, answers, stop):
    u = urllib.parse.urlsplit(ep)
    path = "/v1/sandboxes/%s/files?path=/home/user/mark" % sbx
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
            c.request("GET", path, headers={"Authorization": "Bearer " + cap})
            r = c.getresponse(); r.read()
            answers.append((t0, time.monotonic(), r.status, r.getheader("X-Space-Generation"),
                            r.getheader("X-Space-Worker")))
            c.close()
        except Exception as e:
            answers.append((t0, time.monotonic(), 0, None, str(e)))
        d = 0.005 - (time.monotonic() - t0)
        if d > 0:
            time.sleep(d)

res = {"moves": [], "violations": []}
cur = wait_running()
rt = route()
u = urllib.parse.urlsplit(rt["endpoint"])
c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
c.request("PUT", "/v1/sandboxes/%s/files?path=/home/user/mark" % sbx, body=b"mark\n",
          headers={"Authorization": "Bearer " + rt["capability"]})
if c.getresponse().status != 200:
    raise SystemExit("cannot write the file the poller reads")
c.close()
for i in range(nmoves):
    g, w = cur["execution"]["generation"], cur["execution"]["worker"]
    rt = route()
    if rt["route"]["generation"] != g or rt["route"]["worker"] != w:
        res["violations"].append("move %d: route is not the serving execution" % i)
    to = "w2" if w == "w1" else "w1"
    answers, stop = [], threading.Event()
    th = threading.Thread(target=poll, args=(rt["endpoint"], rt["capability"], answers, stop))
    th.start()
    # a few answers before the call: at least one 200 of the old
    # execution (a loaded machine may take longer than a few polls)
    t_wait = time.monotonic() + 20
    while not any(a[2] == 200 for a in answers) and time.monotonic() < t_wait:
        time.sleep(0.01)
    time.sleep(0.02)
    st, _ = ctl("POST", "/v1/sandboxes/%s/move" % sbx, {"to": to})
    t202 = time.monotonic()
    if st != 202:
        stop.set(); th.join()
        raise SystemExit("move %d: %d" % (i, st))
    cur = wait_running()
    time.sleep(0.3)                         # and more after the new one serves
    stop.set(); th.join()
    first = next((a for a in answers if a[2] == 409), None)
    if first is None:
        res["violations"].append("move %d: never refused" % i)
        continue
    k = answers.index(first)
    for a in answers[:k]:
        # before the refusal: the old execution or a clean cut-off, never the new one
        if a[2] == 200 and (a[3] != str(g) or a[4] != w):
            res["violations"].append("move %d: before 409, served by g%s on %s" % (i, a[3], a[4]))
        elif a[2] not in (0, 200, 503):   # 0: a transfer cut when the old execution retired (the client sees a short body or a closed connection, never wrong data)
            res["violations"].append("move %d: before 409, status %d" % (i, a[2]))
    for a in answers[k:]:
        if a[2] == 200:
            res["violations"].append("move %d: 200 (g%s) after the first 409" % (i, a[3]))
    res["moves"].append({"from": w, "to": to, "old_generation": g,
        "new_generation": cur["execution"]["generation"],
        "delay_ms": round((first[1] - t202) * 1000, 2),
        # the retirement took effect after the last 200 was sent and
        # before the first 409 came back: a bracket as wide as one poll
        "after_ms": round((max([a[0] for a in answers[:k] if a[2] == 200] or [t202]) - t202) * 1000, 2),
        "served_after_202": sum(1 for a in answers[:k] if a[2] == 200 and a[0] >= t202),
        "polls": len(answers), "ok_before": sum(1 for a in answers[:k] if a[2] == 200),
        "refused_after": len(answers) - k,
        "cut_503": sum(1 for a in answers if a[2] == 503)})
d = [m["delay_ms"] for m in res["moves"]]
if d:
    res["median_ms"] = statistics.median(d); res["min_ms"] = min(d); res["max_ms"] = max(d)
    res["median_after_ms"] = statistics.median(m["after_ms"] for m in res["moves"])
json.dump(res, open(out, "w"), indent=1)
PY
python3 "$T/measure.py" "$CU" "$K" "$S" 10 "$T/res.json" 2>"$T/measure.err"
check "10 moves measured" test "$(jget moves "$T/res.json" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))')" = 10 || sed 's/^/# /' "$T/measure.err"
is "no answer before the first 409 came from the new generation; no 200 after it" "$(jget violations "$T/res.json")" "[]"
is "generations strictly increase, one per move" \
	"$(python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["moves"]; print(all(x["new_generation"] == x["old_generation"] + 1 for x in m) and all(m[i+1]["old_generation"] == m[i]["new_generation"] for i in range(len(m)-1)))' "$T/res.json")" True
check "the old execution answered before the refusal in every move (the poller saw it serve)" \
	python3 -c 'import json,sys; m=json.load(open(sys.argv[1]))["moves"]; sys.exit(not all(x["ok_before"] > 0 for x in m))' "$T/res.json"
SUM=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
m=r["moves"]
print("retire propagation (move API 202 -> first 409 at the source worker, 5 ms polling, %d moves): median %.1f ms, min %.1f ms, max %.1f ms (the refusal began between %.1f ms and %.1f ms, medians); old generation still answered 200 after the 202: %s polls per move; cut off with 503: %d" % (len(m), r["median_ms"], r["min_ms"], r["max_ms"], r["median_after_ms"], r["median_ms"], "/".join(str(x["served_after_202"]) for x in m), sum(x["cut_503"] for x in m)))' "$T/res.json")
diag "$SUM"
L=$(dirname "$SPACE_BIN")/test-logs; mkdir -p "$L"
{ echo "$SUM"; python3 -c 'import json,sys
for x in json.load(open(sys.argv[1]))["moves"]: print("  g%(old_generation)d %(from)s -> g%(new_generation)d %(to)s: first 409 %(delay_ms).1f ms after the 202 (last 200 sent at %(after_ms).1f ms), %(polls)d polls" % x)' "$T/res.json"; } >"$L/retire-propagation.txt"
check "no sanitizer report in any log" sh -c "! cat '$T'/*.log | grep -Eq 'Sanitizer|runtime error'"
done_testing
