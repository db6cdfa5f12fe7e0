#!/usr/bin/env python3
"""streams: drives the stream operations of a bridge (docs/protocol.md,
"Streams") as sbx-manager would, and prints one TAP-like line per check
("ok - what" / "not ok - what" with "#" details) for
tests/integration/35_streams.sh to number.

  streams.py SOCK SANDBOX CLAIMS_ALL CLAIMS_EXEC_ONLY

The STREAM payload codec here is written from the wire table of
docs/protocol.md, independently of src/libspace/msg_stream.c.
"""
import base64
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spc  # noqa: E402

spc.TYPES[11] = "STREAM"
spc.T["STREAM"] = 11
STREAM_MAX = 64 << 10
STDOUT, STDERR, PTY, STDIN, STDIN_EOF, RESIZE, SIGNAL, EXIT, EVENT = range(1, 10)
EVENTS = {1: "create", 2: "write", 3: "remove", 4: "rename", 5: "chmod", 6: "overflow"}
WAIT = 20   # seconds any one expected thing may take before the check fails

_orig_recv_frame = spc.recv_frame


def recv_frame(sock):
    magic, ver, z1, ftype, z2, length = spc.HDR.unpack(spc.recv_exact(sock, spc.HDR.size))
    if magic != spc.MAGIC or ver != spc.VERSION or z1 or z2 or ftype not in spc.TYPES:
        raise spc.ProtoError("bad frame header")
    return spc.TYPES[ftype], spc.recv_exact(sock, length)


def decode(p):
    k = p[0]
    if k in (STDOUT, STDERR, PTY):
        return {"kind": {STDOUT: "stdout", STDERR: "stderr", PTY: "pty"}[k], "data": p[1:]}
    if k == EXIT:
        assert len(p) == 4
        return {"kind": "exit", "timed_out": bool(p[1] & 1), "oom_killed": bool(p[1] & 2),
                "signal": p[2], "exit_code": p[3]}
    if k == EVENT:
        t, fl, pl = p[1], p[2], struct.unpack(">H", p[3:5])[0]
        path = p[5:5 + pl].decode()
        tl = struct.unpack(">H", p[5 + pl:7 + pl])[0]
        to = p[7 + pl:7 + pl + tl].decode()
        assert len(p) == 7 + pl + tl
        return {"kind": "event", "type": EVENTS[t], "dir": bool(fl & 1), "path": path, "to": to}
    raise ValueError("unexpected kind %d" % k)


class Stream:
    def __init__(self, sock_path, sandbox, claims, op, args):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(WAIT)
        self.s.connect(sock_path)
        spc.send_frame(self.s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
        name, _ = recv_frame(self.s)
        assert name == "HELLO"
        spc.send_frame(self.s, "REQUEST", json.dumps(
            {"op": op, "sandbox": sandbox, "claims": json.loads(claims), "args": args}))
        self.name, body = recv_frame(self.s)
        self.body = json.loads(body) if body else {}
        self.out = {"stdout": b"", "stderr": b"", "pty": b""}
        self.events = []
        self.exit = None
        self.ended = False
        self.error = None

    def send(self, kind, data=b""):
        spc.send_frame(self.s, "STREAM", bytes([kind]) + data)

    def raw(self, b):
        self.s.sendall(b)

    def one(self):
        """read one frame; False when the stream has ended"""
        try:
            name, body = recv_frame(self.s)
        except (spc.ProtoError, OSError):
            self.ended = True
            return False
        if name == "STREAM":
            m = decode(body)
            if m["kind"] == "exit":
                self.exit = m
            elif m["kind"] == "event":
                self.events.append(m)
            else:
                self.out[m["kind"]] += m["data"]
            return True
        if name == "END":
            self.ended = True
            return False
        if name == "ERROR":
            self.error = json.loads(body)
            self.ended = True
            return False
        raise spc.ProtoError("unexpected %s" % name)

    def until(self, pred):
        """read until pred() holds or the stream ends / WAIT passes"""
        deadline = time.monotonic() + WAIT
        while not pred():
            if self.ended or time.monotonic() > deadline:
                return False
            if not self.one():
                return pred()
        return True

    def close(self):
        self.s.close()


results = []


def check(what, cond, detail=""):
    print("%s - %s" % ("ok" if cond else "not ok", what))
    if not cond and detail:
        print("#   " + str(detail).replace("\n", "\n#   "))
    sys.stdout.flush()
    results.append(cond)


def hold(sock, sbx, claims):
    """a stream on a long process, kept open until it is cut"""
    s = Stream(sock, sbx, claims, "proc.start", {"argv": ["sleep", "7777"]})
    print("started %s" % s.body.get("result", {}).get("pid"), flush=True)
    s.s.settimeout(None)
    while s.one():
        pass
    print("ended %s" % json.dumps(s.error), flush=True)


def main():
    if sys.argv[1] == "hold":
        return hold(*sys.argv[2:5])
    sock, sbx, claims, claims_exec = sys.argv[1:5]

    def unary(op, args, cl=claims):
        s = Stream(sock, sbx, cl, op, args)
        s.close()
        return s.name, s.body

    def start(args, cl=claims):
        return Stream(sock, sbx, cl, "proc.start", args)

    def listing():
        n, b = unary("proc.list", {})
        return {p["pid"]: p for p in b["result"]["processes"]} if n == "RESPONSE" else {}

    # ---- pipes: stdout and stderr apart, as produced; stdin; exit code ----
    s = start({"argv": ["sh", "-c", "echo out1; echo err1 >&2; read x; echo got:$x; exit 3"]})
    check("proc.start answers a pid", s.name == "RESPONSE" and s.body["result"]["pid"] > 1, s.body)
    check("proc.start answer carries serving", s.body.get("serving", {}).get("sandbox") == sbx)
    ok = s.until(lambda: b"out1" in s.out["stdout"] and b"err1" in s.out["stderr"])
    check("stdout and stderr arrive apart while the process waits for input", ok and
          b"err1" not in s.out["stdout"] and b"out1" not in s.out["stderr"], s.out)
    s.send(STDIN, b"hello\n")
    s.until(lambda: s.exit is not None)
    check("stdin reaches the process", b"got:hello" in s.out["stdout"], s.out)
    check("EXIT carries the exit code", s.exit and s.exit["exit_code"] == 3 and s.exit["signal"] == 0, s.exit)
    s.until(lambda: s.ended)
    check("END follows EXIT", s.ended and s.error is None, s.error)
    s.close()

    s = start({"argv": ["cat"]})
    s.send(STDIN, b"abc")
    s.send(STDIN_EOF)
    s.until(lambda: s.exit is not None)
    check("STDIN_EOF closes stdin (cat ends)", s.out["stdout"] == b"abc" and s.exit and
          s.exit["exit_code"] == 0, (s.out, s.exit))
    s.close()

    big = 300000
    s = start({"argv": ["head", "-c", str(big), "/dev/zero"]})
    s.until(lambda: s.exit is not None)
    check("output larger than the socket buffers arrives whole", len(s.out["stdout"]) == big,
          len(s.out["stdout"]))
    s.close()

    s = start({"argv": ["sh", "-c", "exit 0"], "stdin": False, "env": {"A": "b"}, "cwd": "/tmp"})
    s.until(lambda: s.exit is not None)
    check("env, cwd and a closed stdin are accepted", s.exit and s.exit["exit_code"] == 0, (s.body, s.exit))
    s.close()
    s = start({"argv": ["sh", "-c", "echo $A $PWD; cat"], "stdin": False, "env": {"A": "b"}, "cwd": "/tmp"})
    s.until(lambda: s.exit is not None)
    check("env and cwd reach the process; closed stdin reads EOF", s.out["stdout"] == b"b /tmp\n", s.out)
    s.close()

    # ---- timeout ----
    s = start({"argv": ["sleep", "30"], "timeout": 1})
    s.until(lambda: s.exit is not None)
    check("a timeout kills and says so", s.exit and s.exit["timed_out"] and s.exit["signal"] == 9, s.exit)
    s.close()

    # ---- a terminal ----
    s = start({"argv": ["sh"], "pty": {"rows": 24, "cols": 80, "term": "xterm"}})
    check("a PTY process starts", s.name == "RESPONSE", s.body)
    s.send(STDIN, b"stty size; tty; echo T=$TERM\n")
    s.until(lambda: b"T=xterm" in s.out["pty"].replace(b"$TERM", b""))
    check("PTY output comes through the terminal (PTY kind, stty size 24 80)",
          b"24 80" in s.out["pty"] and b"/dev/pts/" in s.out["pty"] and not s.out["stdout"], s.out)
    s.send(RESIZE, struct.pack(">HH", 40, 132))
    s.send(STDIN, b"stty size\n")
    s.until(lambda: b"40 132" in s.out["pty"])
    check("RESIZE changes stty size", b"40 132" in s.out["pty"], s.out["pty"][-200:])
    s.send(STDIN, b"exit 5\n")
    s.until(lambda: s.exit is not None)
    check("a PTY shell's exit status", s.exit and s.exit["exit_code"] == 5, s.exit)
    s.close()

    # ---- background, list, re-attach with replay, proc.stdin ----
    s = start({"argv": ["sh", "-c", "for i in 0 1 2 3 4; do echo line$i; done; read x; echo after:$x"],
               "attach": False})
    bg = s.body.get("result", {}).get("pid")
    s.until(lambda: s.ended)
    check("attach:false answers a pid and ends the operation", bg and s.ended and s.error is None, s.body)
    s.close()
    time.sleep(0.3)
    lst = listing()
    check("proc.list shows the background process running, not attached",
          bg in lst and lst[bg]["state"] == "running" and not lst[bg]["attached"] and
          lst[bg]["argv"][0] == "sh" and lst[bg]["exit_code"] is None, lst.get(bg))
    a = Stream(sock, sbx, claims, "proc.attach", {"pid": bg})
    a.until(lambda: b"line4" in a.out["stdout"])
    check("attach replays what the process wrote while detached",
          a.out["stdout"].startswith(b"line0\nline1\nline2\nline3\nline4\n"), a.out)
    check("proc.list says attached", listing().get(bg, {}).get("attached") is True)
    n, b = unary("proc.stdin", {"pid": bg, "data_b64": base64.b64encode(b"zz\n").decode()})
    check("proc.stdin queues input by pid", n == "RESPONSE" and b["result"]["written"] == 3, b)
    a.until(lambda: a.exit is not None)
    check("the attached client sees the reply and the exit", b"after:zz" in a.out["stdout"] and
          a.exit and a.exit["exit_code"] == 0, (a.out, a.exit))
    a.close()
    lst = listing()
    check("proc.list keeps the exited process with its status",
          lst.get(bg, {}).get("state") == "exited" and lst[bg]["exit_code"] == 0, lst.get(bg))

    # detach, the process runs on, attach again
    s = start({"argv": ["sh", "-c", "echo first; read x; echo second:$x"]})
    pid = s.body["result"]["pid"]
    s.until(lambda: b"first" in s.out["stdout"])
    s.send_end = spc.send_frame(s.s, "END")
    s.until(lambda: s.ended)
    check("END detaches: the guest answers END", s.ended and s.error is None and s.exit is None, s.error)
    s.close()
    check("the detached process runs on", listing().get(pid, {}).get("state") == "running")
    a = Stream(sock, sbx, claims, "proc.attach", {"pid": pid})
    a.send(STDIN, b"again\n")
    a.until(lambda: a.exit is not None)
    check("re-attach: replay, stdin and exit", a.out["stdout"].startswith(b"first\n") and
          b"second:again" in a.out["stdout"] and a.exit["exit_code"] == 0, a.out)
    a.close()

    # a second attach takes over
    s = start({"argv": ["sleep", "100"]})
    pid = s.body["result"]["pid"]
    a = Stream(sock, sbx, claims, "proc.attach", {"pid": pid})
    s.until(lambda: s.ended)
    check("a second attach takes the process over (409 attached_elsewhere)",
          s.error and s.error["status"] == 409 and s.error["error"] == "attached_elsewhere", s.error)
    s.close()
    # ---- signals ----
    a.send(SIGNAL, bytes([2]))
    a.until(lambda: a.exit is not None)
    check("SIGNAL in the stream (INT)", a.exit and a.exit["signal"] == 2, a.exit)
    a.close()
    s = start({"argv": ["sleep", "100"], "attach": False})
    pid = s.body["result"]["pid"]
    s.close()
    n, b = unary("proc.signal", {"pid": pid, "signal": 15})
    check("proc.signal by pid", n == "RESPONSE", b)
    a = Stream(sock, sbx, claims, "proc.attach", {"pid": pid})
    a.until(lambda: a.exit is not None)
    check("... the process died of it", a.exit and a.exit["signal"] == 15, a.exit)
    a.close()
    n, b = unary("proc.signal", {"pid": pid, "signal": 9})
    check("signal to an exited process: 409", n == "ERROR" and b["status"] == 409, b)
    n, b = unary("proc.signal", {"pid": 1, "signal": 9})
    check("signal to a pid not in the table (PID 1): 404", n == "ERROR" and b["status"] == 404, b)
    n, b = unary("proc.attach", {"pid": 999999})
    check("attach to an unknown pid: 404", n == "ERROR" and b["status"] == 404, b)
    n, b = unary("proc.start", {"argv": ["/no/such/program"]})
    check("a program that does not exist: 404", n == "ERROR" and b["status"] == 404, b)
    n, b = unary("proc.start", {"argv": ["true"], "user": "root"})
    check("another user: 400", n == "ERROR" and b["status"] == 400, b)

    # ---- access ----
    n, b = unary("proc.start", {"argv": ["sh"], "pty": {"rows": 24, "cols": 80}}, claims_exec)
    check("a PTY needs the pty access bit (403)", n == "ERROR" and b["status"] == 403, b)
    n, b = unary("fs.watch", {"path": "/home/user"}, claims_exec)
    check("a watch needs the watch access bit (403)", n == "ERROR" and b["status"] == 403, b)
    n, b = unary("proc.list", {}, claims_exec)
    check("proc.list with exec only", n == "RESPONSE", b)

    # ---- watches ----
    unary("fs.mkdir", {"path": "/home/user/w"})
    w = Stream(sock, sbx, claims, "fs.watch", {"path": "/home/user/w", "recursive": True})
    check("fs.watch answers its path", w.name == "RESPONSE" and w.body["result"]["path"] == "/home/user/w", w.body)
    p = start({"argv": ["sh", "-c", "cd /home/user/w && echo hi > a && mv a b && chmod 600 b && "
                        "mkdir d && sleep 0.2 && echo x > d/e && rm b"], "attach": True})
    p.until(lambda: p.exit is not None)
    p.close()

    def have(t, path, to=""):
        return any(e["type"] == t and e["path"] == path and e["to"] == to for e in w.events)
    w.until(lambda: have("remove", "/home/user/w/b"))
    ev = w.events
    check("watch: create", have("create", "/home/user/w/a"), ev)
    check("watch: write", have("write", "/home/user/w/a"), ev)
    check("watch: rename with both paths", have("rename", "/home/user/w/a", "/home/user/w/b"), ev)
    check("watch: chmod", have("chmod", "/home/user/w/b"), ev)
    check("watch: a new directory (is_dir)", any(e["type"] == "create" and e["dir"] and
                                                 e["path"] == "/home/user/w/d" for e in ev), ev)
    check("watch: recursive, inside the new directory", have("create", "/home/user/w/d/e") and
          have("write", "/home/user/w/d/e"), ev)
    check("watch: remove", have("remove", "/home/user/w/b"), ev)
    spc.send_frame(w.s, "END")
    w.until(lambda: w.ended)
    check("watch: END ends it", w.ended and w.error is None, w.error)
    w.close()

    unary("fs.mkdir", {"path": "/home/user/ov"})
    w = Stream(sock, sbx, claims, "fs.watch", {"path": "/home/user/ov"})
    # a reader that does not read: events pile up in the guest's queue
    p = start({"argv": ["sh", "-c", "cd /home/user/ov && seq 1 20000 | xargs touch"]})
    p.until(lambda: p.exit is not None)
    p.close()
    w.until(lambda: any(e["type"] == "overflow" for e in w.events))
    check("watch: a full queue says OVERFLOW", any(e["type"] == "overflow" for e in w.events),
          "%d events" % len(w.events))
    check("watch: the queue was bounded (events lost, not buffered)",
          len([e for e in w.events if e["type"] == "create"]) < 20000, len(w.events))
    w.close()

    # ---- malformed, oversized, out of order: a clear error, nothing else harmed ----
    bgp = start({"argv": ["sleep", "100"], "attach": False}).body["result"]["pid"]

    def bad(what, action, status=400):
        s = start({"argv": ["sleep", "100"]})
        action(s)
        s.until(lambda: s.ended)
        check(what, s.error is not None and s.error["status"] == status, s.error)
        s.close()
        return s
    bad("an output kind sent as input: 400", lambda s: s.send(STDOUT, b"x"))
    bad("an unknown kind: 400", lambda s: s.send(42, b"x"))
    bad("a short RESIZE: 400", lambda s: s.send(RESIZE, b"\x00\x18"))
    bad("RESIZE of a pipe process: 409", lambda s: s.send(RESIZE, struct.pack(">HH", 10, 10)), 409)
    bad("a DATA frame in a stream (out of order): 400", lambda s: spc.send_frame(s.s, "DATA", b"x"))
    bad("a second REQUEST in a stream: 400", lambda s: spc.send_frame(s.s, "REQUEST", "{}"))
    bad("an empty STREAM: 400", lambda s: s.raw(spc.HDR.pack(spc.MAGIC, 1, 0, 11, 0, 0)))
    bad("an oversized STREAM frame: 400",
        lambda s: s.raw(spc.HDR.pack(spc.MAGIC, 1, 0, 11, 0, STREAM_MAX + 1) + b"\x04" * 100))
    bad("a signal not allowed: 400", lambda s: s.send(SIGNAL, bytes([11])))
    lst = listing()
    check("after the bad frames the bridge and guest still serve, the process runs on",
          lst.get(bgp, {}).get("state") == "running", lst.get(bgp))
    unary("proc.signal", {"pid": bgp, "signal": 9})
    running = [p for p in listing().values() if p["state"] == "running"]
    for p in running:
        unary("proc.signal", {"pid": p["pid"], "signal": 9})
    sys.exit(0 if all(results) else 1)


if __name__ == "__main__":
    main()
