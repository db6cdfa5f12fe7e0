#!/usr/bin/python3
"""WebSocket through netgtw for the tests, with an independent WebSocket
library (Debian's python3-websockets, hence /usr/bin/python3).

  gwws.py server PORT
      a WebSocket echo server on 127.0.0.1:PORT (every message sent back)
  gwws.py once HOST:PORT CAP PORT
      the gateway hello (docs/network.md), a WebSocket, one message and
      its echo; prints "ok echo" or "error CODE MESSAGE" (the gateway's
      refusal) or "close CODE"
  gwws.py keep HOST:PORT CAP PORT DIR
      the same, then one message every 0.1 s and its echo, for as long as
      DIR/stop does not exist; DIR/open is written once the WebSocket is
      open, DIR/count holds the number of echoes so far. Prints how it
      ended: "open N" (stopped by DIR/stop, the connection still up, N
      echoes), "close CODE" (a close frame from the other side), "eof",
      "reset" or "mismatch"
"""
import asyncio
import json
import os
import socket
import struct
import sys

import websockets


def frame(obj):
    b = json.dumps(obj, separators=(",", ":")).encode()
    return b"SGW1" + struct.pack(">I", len(b)) + b


def read_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            return None
        b += c
    return b


def hello(addr, cap, port):
    host, p = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(p)), timeout=10)
    s.sendall(frame({"capability": cap, "port": int(port), "proto": "http"}))
    hdr = read_exact(s, 8)
    body = read_exact(s, struct.unpack(">I", hdr[4:])[0]) if hdr else None
    if body is None:
        print("closed")
        return None
    a = json.loads(body)
    if a.get("ok") is not True:
        print("error %s %s" % (a.get("error"), a.get("message")))
        return None
    s.setblocking(False)
    return s


def put(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def closed(e):
    rcvd = getattr(e, "rcvd", None)
    return "close %s" % (rcvd.code if rcvd is not None else "none")


async def client(addr, cap, port, d):
    s = hello(addr, cap, port)
    if s is None:
        return
    try:
        async with websockets.connect("ws://sandbox/", sock=s, open_timeout=10,
                                      ping_interval=None, close_timeout=2) as ws:
            if d is not None:
                put(os.path.join(d, "open"), "open\n")
            n = 0
            while True:
                await ws.send("m%d" % n)
                r = await asyncio.wait_for(ws.recv(), 10)
                if r != "m%d" % n:
                    print("mismatch")
                    return
                n += 1
                if d is None:
                    print("ok echo")
                    return
                put(os.path.join(d, "count"), "%d\n" % n)
                if os.path.exists(os.path.join(d, "stop")):
                    print("open %d" % n)
                    return
                await asyncio.sleep(0.1)
    except websockets.ConnectionClosed as e:
        print(closed(e))
    except ConnectionResetError:
        print("reset")
    except (EOFError, asyncio.IncompleteReadError):
        print("eof")
    except asyncio.TimeoutError:
        print("timeout")


async def echo(ws, path=None):
    async for m in ws:
        await ws.send(m)


async def server(port):
    async with websockets.serve(echo, "127.0.0.1", port, ping_interval=None):
        await asyncio.Future()


def main(argv):
    if argv[1] == "server":
        asyncio.run(server(int(argv[2])))
    elif argv[1] == "once":
        asyncio.run(client(argv[2], argv[3], argv[4], None))
    elif argv[1] == "keep":
        asyncio.run(client(argv[2], argv[3], argv[4], argv[5]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
