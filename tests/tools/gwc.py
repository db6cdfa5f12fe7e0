#!/usr/bin/python3
"""A netgtw client for the tests: the gateway hello (docs/network.md), then
traffic.

  gwc.py HOST:PORT CAP PORT PROTO http PATH
      hello, then GET PATH over HTTP/1.1; prints "ok STATUS BODY-FIRST-LINE"
      or "error CODE MESSAGE"
  gwc.py HOST:PORT CAP PORT PROTO echo TEXT
      hello, then TEXT; prints "ok " + the line the server sends back
  gwc.py HOST:PORT CAP PORT PROTO hold FILE
      hello (http), then a WebSocket upgrade; writes "open" to FILE once
      the 101 arrived, then waits (30 s at most) for the end of the
      connection and prints how it ended: "close CODE" (a WebSocket close
      frame), "reset", "eof" or "timeout"
  gwc.py HOST:PORT raw HEXBYTES
      sends the bytes, prints the answer frame (or "closed")
"""
import json
import socket
import struct
import time
import sys


def frame(obj):
    b = json.dumps(obj, separators=(",", ":")).encode()
    return b"SGW1" + struct.pack(">I", len(b)) + b


def read_frame(s):
    hdr = b""
    while len(hdr) < 8:
        c = s.recv(8 - len(hdr))
        if not c:
            return None
        hdr += c
    n = struct.unpack(">I", hdr[4:])[0]
    body = b""
    while len(body) < n:
        c = s.recv(n - len(body))
        if not c:
            return None
        body += c
    return json.loads(body)


def connect(addr):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    return s


def hello(s, cap, port, proto):
    s.sendall(frame({"capability": cap, "port": int(port), "proto": proto}))
    a = read_frame(s)
    if a is None:
        print("closed")
        return False
    if a.get("ok") is not True:
        print("error %s %s" % (a.get("error"), a.get("message")))
        return False
    return True


def main(argv):
    if len(argv) >= 3 and argv[2] == "raw":
        s = connect(argv[1])
        s.sendall(bytes.fromhex(argv[3]))
        try:
            a = read_frame(s)
        except (ConnectionError, socket.timeout):
            a = None
        print("closed" if a is None else "error %s %s" % (a.get("error"), a.get("message")))
        return 0
    addr, cap, port, proto, mode, arg = argv[1:7]
    s = connect(addr)
    if not hello(s, cap, port, proto):
        return 0
    if mode == "http":
        s.sendall(("GET %s HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n" % arg).encode())
        data = b""
        while True:
            c = s.recv(65536)
            if not c:
                break
            data += c
        head, _, body = data.partition(b"\r\n\r\n")
        status = head.split(b"\r\n")[0].split(b" ")[1].decode()
        print("ok %s %s" % (status, body.split(b"\n")[0].decode(errors="replace")))
    elif mode == "echo":
        s.sendall(arg.encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            c = s.recv(4096)
            if not c:
                break
            data += c
        print("ok " + data.decode(errors="replace").strip())
    elif mode == "hold":
        s.sendall(b"GET / HTTP/1.1\r\nHost: sandbox\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  b"Sec-WebSocket-Version: 13\r\n\r\n")
        data = b""
        while b"\r\n\r\n" not in data:
            c = s.recv(4096)
            if not c:
                print("eof")
                return 0
            data += c
        if b" 101 " not in data.split(b"\r\n")[0]:
            print("no-upgrade")
            return 0
        rest = data.partition(b"\r\n\r\n")[2]
        with open(arg, "w") as f:
            f.write("open\n")
        s.settimeout(30)
        try:
            while True:
                if len(rest) >= 4 and rest[0] & 0x0F == 0x8:
                    code = struct.unpack(">H", rest[2:4])[0]
                    print("close %d" % code)
                    return 0
                c = s.recv(4096)
                if not c:
                    print("eof")
                    return 0
                rest += c
        except ConnectionResetError:
            print("reset")
        except socket.timeout:
            print("timeout")
    elif mode == "finrst":
        # half-close, then reset: the gateway is left with a connection
        # whose client is gone and whose service says nothing
        s.shutdown(socket.SHUT_WR)
        time.sleep(float(arg))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        print("reset sent")
    elif mode == "holdtcp":
        with open(arg, "w") as f:
            f.write("open\n")
        s.settimeout(30)
        try:
            while True:
                c = s.recv(4096)
                if not c:
                    print("eof")
                    return 0
        except ConnectionResetError:
            print("reset")
        except socket.timeout:
            print("timeout")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
