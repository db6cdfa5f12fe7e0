#!/bin/sh
# Kept operation channels (docs/jail.md, "Operations in the guest"): file
# operations after the first reuse an idle channel whose guest child waits
# for its next REQUEST. Each answer stays the one asked for, at most
# SPACE_OPCHAN_IDLE_MAX children wait, a client that leaves mid-stream or a
# user who kills the waiting children costs nothing but a fresh channel,
# and a waiting child is no easier to reach from the sandbox than an
# operation child (the user, no capabilities, not dumpable).
. "$SPACE_TOP/tests/lib.sh"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
W=$(mktemp -d)
HP=""
cleanup() {
	[ -n "$HP" ] && kill "$HP" 2>/dev/null
	i=0; while [ -n "$HP" ] && kill -0 "$HP" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

UB=$((1000000 + (($$ + 1733) % 4000) * 65536))
SB=oc$$
mkdir -p "$W/layer" && mkdir -m 700 "$W/run"
"$SPACE_BIN/spaced-host" --sandbox "$SB" --generation 1 --activation 1 --worker w1 \
    --resident r1 --substrate jail --template host --run-dir "$W/run" --layer-dir "$W/layer" \
    --uid-base "$UB" --disk-mb 256 --memory-mb 256 --pids 64 >"$W/ready" 2>"$W/log" &
HP=$!
i=0; while [ $i -lt 200 ] && [ ! -s "$W/ready" ]; do sleep 0.1; i=$((i + 1)); done
is "bridge ready" "$(cut -d" " -f1 "$W/ready")" "ready"
SOCK=$W/run/bridge.sock
C=$($SPC claims --sandbox "$SB" --gen 1 --worker w1 --resident r1)
call() { $SPC call "$SOCK" "$1" "$SB" "$C" "$2" ${3:+--in "$3"} ${4:+--out "$4"}; }
f() { printf '%s\n' "$1" | $SPC get "$2"; }
# the guest's processes other than PID 1, as "pid comm uid dumpable-probe"
# lines, seen from inside by the sandbox user (an exec; its own operation
# child, the shell's parent, is left out)
guest_children() {
	call exec '{"argv":["sh","-c","for p in /proc/[0-9]*; do n=${p#/proc/}; [ $n = 1 ] && continue; [ $n = $PPID ] && continue; [ \"$(cat $p/comm 2>/dev/null)\" = spaced-guest ] || continue; echo $n; done"]}' |
	    $SPC get body.result.stdout
}

# ---- the channel opened ahead (docs/jail.md "Kept channels") ----
# At the first connection (sbx-manager opens one as soon as the execution
# serves) the serving process opens one channel, so the first exec finds
# its guest child forked and the user. It is a kept channel like any other:
# idle, it ends after SPACE_OPCHAN_IDLE_MS, so a sandbox keeps only PID 1
# and the process manager (density). Counted from the host: the processes
# of the sandbox user (host uid uid-base + 1000).
user_procs() { ps -e -o ruid= | awk -v u=$((UB + 1000)) '$1 == u { n++ } END { print n + 0 }'; }
n=$(user_procs)
check "before any connection, nothing but the process manager is the user ($n)" test "$n" -le 1
check "... and no channel was opened ahead" sh -c "! grep -q 'operation channel opened ahead' '$W/log'"
is "the first exec is served" \
    "$(f "$(call exec '{"argv":["sh","-c","echo first"]}')" body.result.stdout)" "first"
check "the serving process opened an operation channel ahead at that connection" \
    eventually 10 grep -q "an operation channel opened ahead at the first connection" "$W/log"
i=0; n=9
while [ $i -lt 20 ]; do
	n=$(user_procs)
	[ "$n" -le 1 ] && break
	sleep 0.5; i=$((i + 1))
done
is "idle, its channels end: the sandbox user has only the process manager" "$n" "1"

head -c 4096 /dev/urandom >"$W/a"
head -c 5000 /dev/urandom >"$W/b"
head -c $((8 * 1048576)) /dev/urandom >"$W/big"
is "write a" "$(f "$(call fs.write '{"path":"/home/user/a"}' "$W/a")" body.result.size)" "4096"
is "write b" "$(f "$(call fs.write '{"path":"/home/user/b"}' "$W/b")" body.result.size)" "5000"
is "write big" "$(f "$(call fs.write '{"path":"/home/user/big"}' "$W/big")" body.result.size)" "8388608"

# ---- sequential operations of every reusable kind, each with its own answer ----
python3 - "$SOCK" "$SB" "$C" "$W" >"$W/seq" <<'EOF'
import json, sys
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
sock, sbx, claims, w = sys.argv[1:5]
want = {"a": open(w + "/a", "rb").read(), "b": open(w + "/b", "rb").read()}
bad = 0
for i in range(30):
    name = "ab"[i % 2]
    out = w + "/got"
    fr, doc, n, ended = spc.call(sock, "fs.read", sbx, claims, {"path": "/home/user/" + name}, outfile=out)
    if fr != "RESPONSE" or not ended or open(out, "rb").read() != want[name]:
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.stat", sbx, claims, {"path": "/home/user/" + name})
    if fr != "RESPONSE" or doc["result"]["size"] != len(want[name]):
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.read", sbx, claims, {"path": "/home/user/none%d" % i})
    if fr != "ERROR" or doc["status"] != 404:
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.mkdir", sbx, claims, {"path": "/home/user/d%d" % i})
    if fr != "RESPONSE":
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.rename", sbx, claims, {"from": "/home/user/d%d" % i, "to": "/home/user/e%d" % i})
    if fr != "RESPONSE":
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.list", sbx, claims, {"path": "/home/user/e%d" % i})
    if fr != "RESPONSE" or doc["result"]["entries"] != []:
        bad += 1
    fr, doc, n, ended = spc.call(sock, "fs.remove", sbx, claims, {"path": "/home/user/e%d" % i})
    if fr != "RESPONSE":
        bad += 1
print(bad)
EOF
is "210 operations in a row (reads, stats, 404s, mkdir, rename, list, remove): every answer its own" "$(cat "$W/seq")" "0"
kids=$(guest_children | grep -c "^[0-9]")
# the process manager is one of them
check "at most 2 waiting children plus the process manager ($kids)" test "$kids" -ge 1 -a "$kids" -le 3

# ---- concurrent reads: more channels, then no more than the bound wait ----
python3 - "$SOCK" "$SB" "$C" "$W" >"$W/par" <<'EOF'
import sys, threading
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
sock, sbx, claims, w = sys.argv[1:5]
want = open(w + "/big", "rb").read()
bad = []
def one(k):
    out = "%s/par%d" % (w, k)
    fr, doc, n, ended = spc.call(sock, "fs.read", sbx, claims, {"path": "/home/user/big"}, outfile=out)
    if fr != "RESPONSE" or not ended or open(out, "rb").read() != want:
        bad.append(k)
ts = [threading.Thread(target=one, args=(k,)) for k in range(6)]
[t.start() for t in ts]
[t.join() for t in ts]
print(len(bad))
EOF
is "6 concurrent 8 MiB reads all whole" "$(cat "$W/par")" "0"
rm -f "$W"/par?
kids=$(guest_children | grep -c "^[0-9]")
check "after them, still at most 2 waiting children plus the process manager ($kids)" test "$kids" -ge 1 -a "$kids" -le 3

# ---- a client that leaves in the middle of a read ----
python3 - "$SOCK" "$SB" "$C" >"$W/cut" <<'EOF'
import json, socket, sys
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
sock, sbx, claims = sys.argv[1:4]
for _ in range(3):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sock)
    spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
    spc.recv_frame(s)
    spc.send_frame(s, "REQUEST", json.dumps({"op": "fs.read", "sandbox": sbx,
                                             "claims": json.loads(claims), "args": {"path": "/home/user/big"}}))
    name, _ = spc.recv_frame(s)
    name2, _ = spc.recv_frame(s)       # one DATA, then gone
    s.close()
print("ok")
EOF
is "three reads cut after their first DATA" "$(cat "$W/cut")" "ok"
o=$(call fs.read '{"path":"/home/user/a"}' "" "$W/got")
is "the next read is whole and its own" "$(f "$o" ended) $(cmp -s "$W/a" "$W/got" && echo same)" "true same"

# ---- from the sandbox's side ----
# a waiting child runs as the user with nothing more: no capabilities, not
# dumpable, so the user cannot look into it or take its descriptors
call fs.stat '{"path":"/home/user/a"}' >/dev/null
pids=$(guest_children)
probe=$(call exec "{\"argv\":[\"sh\",\"-c\",\"for p in $(echo $pids); do awk '/^(Uid|CapEff|CapPrm):/ { printf \\\"%s %s \\\", \$1, \$2 } END { print \\\"\\\" }' /proc/\$p/status; ls /proc/\$p/fd >/dev/null 2>&1 && echo FD-READABLE; done\"]}" | $SPC get body.result.stdout)
diag "waiting children: $(echo $pids); $probe"
check "the children run as the user (uid 1000) with no capabilities" sh -c "printf '%s\n' '$probe' | grep -v '^$' | grep -v 'Uid: 1000 CapPrm: 0000000000000000 CapEff: 0000000000000000' | { ! grep -q .; }"
check "the user cannot list their descriptors (not dumpable)" sh -c "! printf '%s\n' '$probe' | grep -q FD-READABLE"
# the user kills every waiting child (and the process manager; PID 1
# starts another): the next operations get fresh channels
o=$(call exec "{\"argv\":[\"sh\",\"-c\",\"kill -9 $(echo $pids) 2>&1; echo done\"]}")
is "the user kills the waiting children" "$(f "$o" body.result.stdout)" "done"
o=$(call fs.read '{"path":"/home/user/b"}' "" "$W/got")
is "a read after that is whole" "$(f "$o" ended) $(cmp -s "$W/b" "$W/got" && echo same)" "true same"
is "and a stat" "$(f "$(call fs.stat '{"path":"/home/user/b"}')" body.result.size)" "5000"

# a file that reports no size (/proc) is still read to its end
o=$(call fs.read '{"path":"/proc/self/status"}' "" "$W/st")
check "fs.read of /proc/self/status (size 0 in stat) has its content" grep -q '^Uid:.*1000' "$W/st"
# a refused request never reaches a kept channel: claims for another sandbox
C2=$($SPC claims --sandbox other --gen 1 --worker w1 --resident r1)
o=$($SPC call "$SOCK" fs.read "$SB" "$C2" '{"path":"/home/user/a"}')
is "a capability of another sandbox is refused at the bridge" "$(f "$o" frame) $(f "$o" body.status)" "ERROR 403"
is "the bridge still serves" "$(f "$(call fs.stat '{"path":"/home/user/a"}')" body.result.size)" "4096"

# ---- kept connections: one connection, several operations ----
# sbx-manager keeps a bridge connection for the next operation of the same
# execution (docs/jail.md "Kept connections"): after HELLO, REQUEST after
# REQUEST, each decoded and admitted on its own; a refused one, an upload
# or a frame that is not a REQUEST ends the connection. Small reads come as
# RESPONSE, DATA and END together: sizes around that bound, and an empty
# file, must still read whole.
head -c 65536 /dev/urandom >"$W/s64"
head -c 65537 /dev/urandom >"$W/s64p"
: >"$W/empty"
is "write a 64 KiB file" "$(f "$(call fs.write '{"path":"/home/user/s64"}' "$W/s64")" body.result.size)" "65536"
is "write 64 KiB + 1" "$(f "$(call fs.write '{"path":"/home/user/s64p"}' "$W/s64p")" body.result.size)" "65537"
is "write an empty file" "$(f "$(call fs.write '{"path":"/home/user/empty"}' "$W/empty")" body.result.size)" "0"
python3 - "$SOCK" "$SB" "$C" "$C2" "$W" >"$W/kept" <<'EOF'
import json, socket, sys
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
sock, sbx, claims, other, w = sys.argv[1:6]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock)
    spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
    assert spc.recv_frame(s)[0] == "HELLO"
    return s
def req(s, op, args, cl=claims):
    spc.send_frame(s, "REQUEST", json.dumps({"op": op, "sandbox": sbx, "claims": json.loads(cl), "args": args}))
def answer(s, download=False):
    name, body = spc.recv_frame(s)
    data, ended = b"", False
    doc = json.loads(body) if body else None
    if name == "RESPONSE" and download:
        while True:
            n2, b2 = spc.recv_frame(s)
            if n2 == "END":
                ended = True
                break
            if n2 != "DATA":
                break
            data += b2
    return name, doc, data, ended
def closed(s):
    try:
        return s.recv(1) == b""
    except OSError:
        return True
want = {k: open(w + "/" + k, "rb").read() for k in ("a", "b", "s64", "s64p", "empty")}
out = []
s = conn()
for k in ("a", "s64", "s64p", "empty", "b", "a"):
    req(s, "fs.read", {"path": "/home/user/" + k})
    name, doc, data, ended = answer(s, True)
    out.append("read-%s:%s" % (k, "ok" if name == "RESPONSE" and ended and data == want[k] else "BAD"))
req(s, "fs.stat", {"path": "/home/user/b"})
name, doc, _, _ = answer(s)
out.append("stat:%s" % (doc["result"]["size"] if name == "RESPONSE" else name))
req(s, "exec", {"argv": ["sh", "-c", "echo kept"]})
name, doc, _, _ = answer(s)
out.append("exec:%s" % (doc["result"]["stdout"].strip() if name == "RESPONSE" else name))
req(s, "fs.read", {"path": "/home/user/none"})
name, doc, _, _ = answer(s, True)
out.append("404:%s" % (doc["status"] if name == "ERROR" else name))
req(s, "fs.read", {"path": "/home/user/b"})
name, doc, data, ended = answer(s, True)
out.append("after-404:%s" % ("ok" if ended and data == want["b"] else "BAD"))
# a refused request (claims of another sandbox) ends the connection
req(s, "fs.read", {"path": "/home/user/a"}, other)
name, doc, _, _ = answer(s)
out.append("refused:%s:%s" % (doc["status"] if name == "ERROR" else name, closed(s)))
s.close()
# an upload ends it (DATA of a refused upload may still be in flight)
s = conn()
req(s, "fs.write", {"path": "/home/user/up"})
spc.send_frame(s, "DATA", b"x")
spc.send_frame(s, "END")
name, doc, _, _ = answer(s)
out.append("write:%s:%s" % (doc["result"]["size"] if name == "RESPONSE" else name, closed(s)))
s.close()
# a second frame that is not a REQUEST: 400 and the end
s = conn()
req(s, "fs.stat", {"path": "/home/user/a"})
answer(s)
spc.send_frame(s, "DATA", b"zz")
name, doc, _, _ = answer(s)
out.append("not-request:%s:%s" % (doc["status"] if name == "ERROR" else name, closed(s)))
s.close()
print(" ".join(out))
EOF
is "one connection carries reads (4 KiB, 64 KiB, 64 KiB + 1, empty), a stat, an exec, a 404 and a read, each its own; a refused request ends it" \
    "$(cat "$W/kept")" \
    "read-a:ok read-s64:ok read-s64p:ok read-empty:ok read-b:ok read-a:ok stat:5000 exec:kept 404:404 after-404:ok refused:403:True write:1:True not-request:400:True"
is "the bridge still serves after them" "$(f "$(call fs.stat '{"path":"/home/user/b"}')" body.result.size)" "5000"
# ---- exec on kept channels (docs/jail.md "Kept channels") ----
# execs in a row are served by the same waiting child (the command's
# parent stays the same), each with its own cwd, environment and output,
# nothing of one left for the next; the command inherits no socket (not
# the channel, not the process manager's)
python3 - "$SOCK" "$SB" "$C" >"$W/ex" <<'EOF'
import sys
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
sock, sbx, claims = sys.argv[1:4]
def ex(args):
    fr, doc, n, ended = spc.call(sock, "exec", sbx, claims, args)
    return doc["result"] if fr == "RESPONSE" else {"error": doc}
out, parents = [], set()
for i in range(6):
    r = ex({"argv": ["sh", "-c", "echo $PPID; pwd; echo ${X:-unset}; ls -l /proc/self/fd | grep -c socket:; exit %d" % i],
            "env": {"X": "x%d" % i} if i % 2 else {}, "cwd": "/tmp" if i % 2 else "/home/user"})
    lines = r.get("stdout", "").split("\n")
    parents.add(lines[0])
    want = ["/tmp" if i % 2 else "/home/user", "x%d" % i if i % 2 else "unset"]
    # no socket among its descriptors: neither the channel nor the
    # process manager's
    out.append("ok" if r.get("exit_code") == i and lines[1:3] == want and lines[3].strip() == "0" else "BAD:%r" % r)
r = ex({"argv": ["sh", "-c", "cd /; exec nonexistent-program"]})
out.append("127" if r.get("exit_code") == 127 else "BAD:%r" % r)
r = ex({"argv": ["no-such-program"]})
out.append(str(r.get("error", {}).get("status")))
r = ex({"argv": ["sh", "-c", "echo after"]})
out.append(r.get("stdout", "").strip())
# a bad cwd is an error of the request; a script without "#!" runs under
# sh (execvpe's rule, kept with vfork)
r = ex({"argv": ["true"], "cwd": "/no/such/dir"})
out.append(str(r.get("error", {}).get("status")))
ex({"argv": ["sh", "-c", "printf 'echo plain $1' > /home/user/plain; chmod +x /home/user/plain"]})
r = ex({"argv": ["/home/user/plain", "script"]})
out.append(r.get("stdout", "").strip().replace(" ", "-"))
print(" ".join(out), len(parents))
EOF
is "six execs on one kept child (cwd, env, exit code, no inherited socket), then a failing one, a 404, one more, a bad cwd, a script without #!" \
    "$(cat "$W/ex")" "ok ok ok ok ok ok 127 404 after 404 plain-script 1"
# the command kills the child that waits for it: that exec has no answer
# (500), its channel is not kept, and the next exec gets a fresh child
o=$(call exec '{"argv":["sh","-c","kill -9 $PPID; sleep 1"]}')
is "an exec that kills its waiting child is answered 500" "$(f "$o" frame) $(f "$o" body.status)" "ERROR 500"
is "the next exec is served" "$(f "$(call exec '{"argv":["sh","-c","echo fresh"]}')" body.result.stdout)" "fresh"
# an idle channel is closed after SPACE_OPCHAN_IDLE_MS (1 s) and its child
# ends: polled (bounded) until only the process manager is left besides
# the probe's own child
i=0; kids=9
while [ $i -lt 10 ]; do
	sleep 2
	kids=$(guest_children | grep -c "^[0-9]")
	[ "$kids" -le 1 ] && break
	i=$((i + 1))
done
is "idle channels end: the guest keeps only the process manager" "$kids" "1"
done_testing
