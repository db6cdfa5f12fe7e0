#!/usr/bin/python3
"""An independent WebSocket client for node-api's streams (Debian's
python3-websockets for the protocol, raw sockets for frames no library
would send). Prints one line per thing it saw; the test compares them.

  ws_probe.py status URL [TOKEN]
      the opening handshake only: prints the HTTP status (101 when it
      opened) and, on a refusal, the error code of the body
  ws_probe.py run URL TOKEN [MSG...]
      opens (subprotocol space.v1), prints "first <json>" for the first
      message, sends each MSG (hex of a binary message, or "text:" + JSON),
      then prints every message: "out <kind> <bytes as repr>", "exit
      <code> <signal> <flags>", "event <type> <path>", and finally
      "close <code>"
  ws_probe.py raw URL TOKEN CASE
      opens with a raw socket, sends one malformed frame, prints
      "close <code>" of the server's close frame. CASE: unmasked,
      oversized, continuation, badutf8, badkind, outkind, reserved
  ws_probe.py churn
      reads lines "LABEL URL TOKEN" from stdin, opens all those streams
      at once (each a process printing sequence numbers 0, 1, ... one a
      line), and prints for each "LABEL close CODE count N inorder yes|no"
      once all ended (inorder: the lines are exactly 0..N-1); "open LABEL"
      on stderr as each stream opens
  ws_probe.py hold URL TOKEN SECONDS
      opens, waits SECONDS while reading, prints what run prints
  ws_probe.py floodreset URL TOKEN
  ws_probe.py pingflood URL TOKEN     (pings, never reading the answers)
      opens with a raw socket, sends stdin until the stream stops taking
      it, then resets the connection; prints "reset after N"
"""
import asyncio
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.parse

import websockets

KINDS = {1: "stdout", 2: "stderr", 3: "pty", 8: "exit", 9: "event"}


def describe(m):
    if isinstance(m, str):
        return "text " + m
    k = m[0] if m else 0
    if k in (1, 2, 3):
        return "out %s %r" % (KINDS[k], m[1:])
    if k == 8:
        return "exit %d %d %d" % (m[3], m[2], m[1])
    if k == 9:
        (pl,) = struct.unpack(">H", m[3:5])
        return "event %d %s" % (m[1], m[5:5 + pl].decode())
    return "bin %s" % m.hex()


async def run(url, token, msgs, hold=None):
    hdrs = {"Authorization": "Bearer " + token} if token else {}
    try:
        ws = await websockets.connect(url, extra_headers=hdrs, subprotocols=["space.v1"],
                                      max_size=1 << 20, open_timeout=20)
    except websockets.exceptions.InvalidStatusCode as e:
        print("status %d" % e.status_code)
        return
    first = await ws.recv()
    print("first " + first, flush=True)
    for m in msgs:
        if m.startswith("text:"):
            await ws.send(m[5:])
        elif m.startswith("sleep:"):
            await asyncio.sleep(float(m[6:]))
        else:
            await ws.send(bytes.fromhex(m))
    try:
        while True:
            if hold is not None:
                m = await asyncio.wait_for(ws.recv(), hold)
            else:
                m = await asyncio.wait_for(ws.recv(), 30)
            print(describe(m), flush=True)
    except websockets.exceptions.ConnectionClosed:
        pass
    except asyncio.TimeoutError:
        print("timeout", flush=True)
        await ws.close()
    print("close %s" % ws.close_code, flush=True)


async def one_seq(label, url, token, out):
    buf = b""
    code = None
    try:
        ws = await websockets.connect(url, extra_headers={"Authorization": "Bearer " + token},
                                      subprotocols=["space.v1"], open_timeout=30)
    except Exception as e:
        out.append("%s open-failed %s" % (label, e))
        return
    try:
        await ws.recv()
        print("open " + label, file=sys.stderr, flush=True)
        while True:
            m = await asyncio.wait_for(ws.recv(), 120)
            if isinstance(m, bytes) and m and m[0] == 1:
                buf += m[1:]
    except websockets.exceptions.ConnectionClosed:
        pass
    except asyncio.TimeoutError:
        await ws.close()
    code = ws.close_code
    lines = buf.decode(errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    inorder = all(l == str(i) for i, l in enumerate(lines))
    out.append("%s close %s count %d inorder %s" % (label, code, len(lines), "yes" if inorder else "no"))


async def churn():
    out, tasks = [], []
    for line in sys.stdin:
        f = line.split()
        if len(f) == 3:
            tasks.append(one_seq(f[0], f[1], f[2], out))
    await asyncio.gather(*tasks)
    for l in sorted(out):
        print(l)


def status(url, token):
    u = urllib.parse.urlsplit(url)
    s = socket.create_connection((u.hostname, u.port), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    path = u.path + ("?" + u.query if u.query else "")
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n" % (path, u.netloc, key))
    if token:
        req += "Authorization: Bearer %s\r\n" % token
    s.sendall((req + "\r\n").encode())
    return s


def read_head(s):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            break
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head.decode(errors="replace"), rest


def frame(op, payload, mask=True, fin=True, rsv=0):
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    if n < 126:
        h = struct.pack(">BB", b0, (0x80 if mask else 0) | n)
    elif n < 65536:
        h = struct.pack(">BBH", b0, (0x80 if mask else 0) | 126, n)
    else:
        h = struct.pack(">BBQ", b0, (0x80 if mask else 0) | 127, n)
    if not mask:
        return h + payload
    k = os.urandom(4)
    return h + k + bytes(c ^ k[i % 4] for i, c in enumerate(payload))


def read_frames(s, rest):
    """yields (opcode, payload) of server frames until the socket ends"""
    buf = rest
    while True:
        while len(buf) < 2 or len(buf) < hdr_len(buf) + plen(buf):
            try:
                d = s.recv(65536)
            except socket.timeout:
                return
            if not d:
                return
            buf += d
        hl, pl = hdr_len(buf), plen(buf)
        yield buf[0] & 0x0f, buf[hl:hl + pl]
        buf = buf[hl + pl:]


def hdr_len(b):
    n = b[1] & 0x7f
    return 2 + (2 if n == 126 else 8 if n == 127 else 0)


def plen(b):
    n = b[1] & 0x7f
    if n == 126:
        return struct.unpack(">H", b[2:4])[0] if len(b) >= 4 else 1 << 30
    if n == 127:
        return struct.unpack(">Q", b[2:10])[0] if len(b) >= 10 else 1 << 30
    return n


def opened(url, token):
    """a raw socket past the opening handshake and the bytes after it, or
    None after printing the status it got instead"""
    s = status(url, token)
    head, rest = read_head(s)
    code = head.split(" ")[1] if " " in head else "?"
    if code != "101":
        print("status " + code)
        return None, None
    return s, rest


def raw(url, token, case):
    s, rest = opened(url, token)
    if s is None:
        return
    bad = {
        "unmasked": frame(2, b"\x04abc", mask=False),
        "oversized": frame(2, b"\x04" + b"x" * (300 << 10)),
        "continuation": frame(0, b"\x04abc"),
        "badutf8": frame(1, b"\xff\xfe{"),
        "badkind": frame(2, b"\x63abc"),
        "outkind": frame(2, b"\x01abc"),
        "reserved": frame(2, b"\x04abc", rsv=0x40),
        "badjson": frame(1, b'{"type":"stdin","data":"x","extra":1}'),
    }[case]
    s.sendall(bad)
    for op, p in read_frames(s, rest):
        if op == 8:
            print("close %d" % (struct.unpack(">H", p[:2])[0] if len(p) >= 2 else 1005))
            return
    print("close none")


def push(s, chunk, patience, limit=None):
    """sends chunk over and over on a non-blocking socket until it takes
    nothing for patience tries 10 ms apart (or limit bytes went); then
    resets the connection. The bytes sent."""
    s.setblocking(False)
    sent, off, stuck = 0, 0, 0
    while stuck < patience and (limit is None or sent < limit):
        try:
            n = s.send(chunk[off:])
        except BlockingIOError:
            stuck += 1
            time.sleep(0.01)
            continue
        stuck = 0
        sent += n
        off = (off + n) % len(chunk)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return sent


def flood_reset(url, token):
    """opens, sends stdin (binary kind 4, 60 KiB each) until the stream
    stops taking it (its process never reads stdin), then resets the
    connection; prints how many messages went"""
    s, _ = opened(url, token)
    if s is None:
        return
    msg = frame(2, b"\x04" + b"x" * (60 << 10))
    print("reset after %d" % (push(s, msg, 100) // len(msg)))   # 1 s without progress: held


def ping_flood(url, token):
    """opens, then sends empty pings and never reads, up to 32 MiB of
    them or until the stream stops taking them for 2 s; prints how many
    bytes went, then resets the connection"""
    s, _ = opened(url, token)
    if s is None:
        return
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    print("sent %d" % push(s, frame(9, b"") * 4096, 200, 32 << 20))


def main():
    if sys.argv[1] == "churn":
        asyncio.run(churn())
        return
    mode, url = sys.argv[1], sys.argv[2]
    token = sys.argv[3] if len(sys.argv) > 3 else ""
    if mode == "status":
        s = status(url, token)
        head, rest = read_head(s)
        parts = head.split(" ")
        code = parts[1] if len(parts) > 1 else "?"
        body = rest
        if code != "101":
            try:
                s.settimeout(2)
                while True:
                    d = s.recv(4096)
                    if not d:
                        break
                    body += d
                    if body.rstrip().endswith(b"}"):
                        break
            except socket.timeout:
                pass
            try:
                print(code, json.loads(body.decode()).get("error", ""))
            except ValueError:
                print(code)
        else:
            print(code)
    elif mode == "run":
        asyncio.run(run(url, token, sys.argv[4:]))
    elif mode == "hold":
        asyncio.run(run(url, token, [], hold=float(sys.argv[4])))
    elif mode == "raw":
        raw(url, token, sys.argv[4])
    elif mode == "floodreset":
        flood_reset(url, token)
    elif mode == "pingflood":
        ping_flood(url, token)


main()
