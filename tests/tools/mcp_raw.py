#!/usr/bin/env python3
"""mcp_raw: `space mcp` from the attacker's side of its stdin. Writes raw
bytes (bad JSON, messages out of order, invalid requests, unknown methods,
bad params, a cancellation) and checks each answer, that nothing but
JSON-RPC messages reaches stdout, and that the server stays up.

  mcp_raw.py SPACE_BIN SANDBOX_ID

SANDBOX_ID: a running sandbox (the cancellation runs a command in it).
Prints "ok - ..." / "not ok - ..." lines; 70_mcp.sh numbers them.
"""
import json
import os
import select
import subprocess
import sys
import time

failed = 0


def ok(cond, what, detail=None):
    global failed
    print(("ok" if cond else "not ok") + " - " + what)
    if not cond:
        failed += 1
        if detail is not None:
            print("# " + str(detail)[:400])
    sys.stdout.flush()
    return cond


class Server:
    def __init__(self, binary):
        self.p = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.buf = b""
        self.seen = []          # every message received
        self.garbage = []       # stdout lines that are not JSON-RPC

    def send(self, raw):
        if isinstance(raw, (dict, list)):
            raw = json.dumps(raw)
        if isinstance(raw, str):
            raw = raw.encode()
        self.p.stdin.write(raw + b"\n")
        self.p.stdin.flush()

    def _lines(self, deadline):
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            r, _, _ = select.select([self.p.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.p.stdout.fileno(), 65536)
            if not chunk:
                return None
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            m = json.loads(line)
            if not isinstance(m, dict) or m.get("jsonrpc") != "2.0":
                raise ValueError
        except ValueError:
            self.garbage.append(line)
            return {}
        self.seen.append(m)
        return m

    def next(self, wait=30):
        """the next message that is not a progress notification"""
        deadline = time.monotonic() + wait
        while True:
            m = self._lines(deadline)
            if m is None or m.get("method") != "notifications/progress":
                return m

    def answer(self, mid, wait=30):
        deadline = time.monotonic() + wait
        while True:
            m = self._lines(deadline)
            if m is None or ("id" in m and m["id"] == mid and "method" not in m):
                return m

    def alive(self):
        return self.p.poll() is None


def init(s, version="2025-06-18", mid=1):
    s.send({"jsonrpc": "2.0", "id": mid, "method": "initialize",
            "params": {"protocolVersion": version, "capabilities": {},
                       "clientInfo": {"name": "raw", "version": "1"}}})
    return s.answer(mid)


def err(m):
    return (m or {}).get("error", {}).get("code")


def main():
    binary, sbx = sys.argv[1], sys.argv[2]
    s = Server(binary)

    # out of order: a request before initialize
    s.send({"jsonrpc": "2.0", "id": 10, "method": "tools/list"})
    m = s.next()
    ok(err(m) == -32600 and m.get("id") == 10, "tools/list before initialize: -32600, with its id", m)
    s.send({"jsonrpc": "2.0", "id": 11, "method": "ping"})
    m = s.next()
    ok(m and m.get("id") == 11 and m.get("result") == {}, "ping is answered before initialize", m)

    # bytes that are not JSON
    for raw, what in ((b"{not json", "bad JSON"), (b'{"jsonrpc":"2.0","id":1', "a cut message"),
                      (b"\xff\xfe\x00garbage", "binary garbage"),
                      (b'{"jsonrpc":"2.0","id":12,"method":"ping","id":13}', "a duplicate key")):
        s.send(raw)
        m = s.next()
        ok(err(m) == -32700 and m.get("id") is None, what + ": -32700 parse error, id null", m)

    # a line longer than the limit (16 MiB): refused, the next line served
    s.send(b'{"jsonrpc":"2.0","id":3,"method":"ping","params":{"a":"' + b"x" * (17 << 20) + b'"}}')
    m = s.next()
    ok(err(m) == -32600 and "too large" in m["error"]["message"], "a 17 MiB line: -32600 message too large", m)
    s.send({"jsonrpc": "2.0", "id": 4, "method": "ping"})
    m = s.next()
    ok(m and m.get("id") == 4 and "result" in m, "and the next line is served", m)

    # JSON that is not a valid request
    for raw, what in (([], "an empty batch"),
                      ([{"jsonrpc": "2.0", "id": 1, "method": "ping"}], "a batch"),
                      ("42", "a number"),
                      ({"jsonrpc": "1.0", "id": 14, "method": "ping"}, "jsonrpc 1.0"),
                      ({"id": 15, "method": "ping"}, "no jsonrpc member"),
                      ({"jsonrpc": "2.0", "id": None, "method": "ping"}, "a null id"),
                      ({"jsonrpc": "2.0", "id": 1.5, "method": "ping"}, "a fractional id"),
                      ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}, "an object id"),
                      ({"jsonrpc": "2.0", "id": 16, "method": 7}, "a method that is a number"),
                      ({"jsonrpc": "2.0", "id": 17, "method": "ping", "params": "x"}, "string params"),
                      ({"jsonrpc": "2.0"}, "neither method nor id")):
        s.send(raw)
        m = s.next()
        ok(err(m) == -32600, what + ": -32600 invalid request", m)

    # initialize, version negotiation
    m = init(s, "2025-03-26")
    ok(m and m.get("result", {}).get("protocolVersion") == "2025-03-26",
       "initialize 2025-03-26: answered with the client's revision", m)
    ok(m and "tools" in m["result"].get("capabilities", {}), "initialize: tools capability", m)
    s.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    m = init(s, "2025-06-18", mid=2)
    ok(err(m) == -32600, "a second initialize: -32600", m)

    s.send({"jsonrpc": "2.0", "id": 20, "method": "resources/list"})
    m = s.next()
    ok(err(m) == -32601 and m.get("id") == 20, "an unknown method: -32601", m)
    s.send({"jsonrpc": "2.0", "method": "notifications/unknown"})
    s.send({"jsonrpc": "2.0", "id": 21, "result": {}})     # a response to nothing
    s.send({"jsonrpc": "2.0", "id": 22, "method": "ping"})
    m = s.next()
    ok(m and m.get("id") == 22, "an unknown notification and a stray response are not answered", m)

    # bad params
    for params, what in ((None, "tools/call without params"),
                         ({"arguments": {}}, "tools/call without a name"),
                         ({"name": 5}, "a name that is a number"),
                         ({"name": "run_command", "arguments": [1]}, "arguments that are an array"),
                         ({"name": "no_such_tool"}, "an unknown tool")):
        msg = {"jsonrpc": "2.0", "id": 30, "method": "tools/call"}
        if params is not None:
            msg["params"] = params
        s.send(msg)
        m = s.next()
        ok(err(m) == -32602 and m.get("id") == 30, what + ": -32602", m)
    s.send({"jsonrpc": "2.0", "id": 31, "method": "tools/call",
            "params": {"name": "read_file", "arguments": {"sandbox": "../x", "path": "/etc"}}})
    m = s.next()
    ok(m and m.get("result", {}).get("isError") is True and
       "sandbox: does not match" in m["result"]["content"][0]["text"],
       "arguments the schema refuses: a tool result with isError", m)

    # cancellation: a long command with a progress token; cancelled once
    # it reported progress (so it surely runs)
    s.send({"jsonrpc": "2.0", "id": 40, "method": "tools/call",
            "params": {"name": "run_command", "_meta": {"progressToken": "p40"},
                       "arguments": {"sandbox": sbx, "command": "sleep 30", "timeout": 60}}})
    deadline = time.monotonic() + 30
    prog = None
    while prog is None:
        m = s._lines(deadline)
        if m is None:
            break
        if m.get("method") == "notifications/progress":
            prog = m
    ok(prog and prog["params"].get("progressToken") == "p40" and
       isinstance(prog["params"].get("progress"), (int, float)),
       "a running call sends notifications/progress with the request's token", prog)
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 40, "reason": "test"}})
    s.send({"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "list_sandboxes", "arguments": {}}})
    m = s.answer(41)
    ok(m and m.get("result", {}).get("isError") is False, "a call after the cancellation is answered", m)
    ok(not any(x.get("id") == 40 and "method" not in x for x in s.seen),
       "the cancelled call is never answered")
    s.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 999}})
    s.send({"jsonrpc": "2.0", "id": 42, "method": "ping"})
    m = s.next()
    ok(m and m.get("id") == 42, "a cancellation of an unknown request is ignored", m)

    ok(s.alive(), "the server is still up")
    ok(not s.garbage, "nothing but JSON-RPC messages on stdout", s.garbage[:3])
    s.p.stdin.close()
    try:
        rc = s.p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        s.p.kill()
        rc = None
    ok(rc == 0, "it exits 0 when stdin closes", rc)

    # negotiation: an older revision, and one it does not know
    for want, got in (("2024-11-05", "2024-11-05"), ("1999-01-01", "2025-06-18")):
        s2 = Server(binary)
        m = init(s2, want)
        ok(m and m.get("result", {}).get("protocolVersion") == got,
           "initialize %s: answered %s" % (want, got), m)
        s2.p.stdin.close()
        s2.p.wait(timeout=30)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
