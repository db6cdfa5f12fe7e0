#!/usr/bin/env python3
"""A tiny DNS responder for tests (UDP only): answers A queries for the
names given as NAME=ADDR, NXDOMAIN for every other name. Runs inside a
network namespace the test made; prints "ready" once bound.

    dnsd.py --bind 203.0.113.53 web.test=203.0.113.10 ...
"""
import socket
import struct
import sys


def qname(msg, off):
    labels = []
    while True:
        n = msg[off]
        off += 1
        if n == 0:
            return ".".join(labels).lower(), off
        if n & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(msg[off:off + n].decode("ascii", "replace"))
        off += n


def answer(msg, names):
    ident, flags, qd = struct.unpack(">HHH", msg[:6])
    if qd != 1:
        return None
    name, end = qname(msg, 12)
    qtype, qclass = struct.unpack(">HH", msg[end:end + 4])
    question = msg[12:end + 4]
    rd = flags & 0x0100
    addr = names.get(name)
    if addr is None:
        return struct.pack(">HHHHHH", ident, 0x8183 | rd, 1, 0, 0, 0) + question
    if qtype != 1:
        return struct.pack(">HHHHHH", ident, 0x8180 | rd, 1, 0, 0, 0) + question
    rr = struct.pack(">HHHIH", 0xC00C, 1, 1, 60, 4) + socket.inet_aton(addr)
    return struct.pack(">HHHHHH", ident, 0x8180 | rd, 1, 1, 0, 0) + question + rr


def main():
    args = sys.argv[1:]
    bind = "0.0.0.0"
    if args[:1] == ["--bind"]:
        bind, args = args[1], args[2:]
    names = dict(a.split("=", 1) for a in args)
    names = {k.lower().rstrip("."): v for k, v in names.items()}
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((bind, 53))
    print("ready", flush=True)
    while True:
        msg, peer = s.recvfrom(512)
        try:
            out = answer(msg, names)
        except (ValueError, IndexError, struct.error):
            out = None
        if out is not None:
            s.sendto(out, peer)


if __name__ == "__main__":
    main()
