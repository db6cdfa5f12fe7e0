#!/usr/bin/env python3
"""spc: a small client of the internal frame protocol (docs/protocol.md
section 1), for tests that talk to a bridge (spaced-host) directly.

It speaks as sbx-manager: HELLO, one REQUEST {"op","sandbox","claims","args"},
DATA/END streaming, then prints the answer. It also crafts capability claims
JSON, so tests can hand the bridge claims that are wrong in one field.

  spc.py claims --sandbox S --gen G --worker W --resident R [--act A]
         [--substrate jail] [--acc exec,fs:r] [--exp-in 120] [--iat-in 0]
  spc.py call SOCK OP SANDBOX CLAIMS_JSON ARGS_JSON [--in FILE] [--out FILE]
  spc.py get DOTTED.PATH < answer.json   (prints a string raw, else JSON)

`call` prints one JSON line: {"frame":"RESPONSE"|"ERROR", "body":{...},
"data_bytes":N, "ended":true|false}. With --out the DATA of fs.read is
written to FILE (streamed, never held in memory); with --in FILE the file is
sent as DATA frames (fs.write). Exit status 0 when a RESPONSE came, 1 for an
ERROR frame, 2 for a protocol or transport failure.
"""
import argparse
import datetime
import json
import os
import secrets
import socket
import struct
import sys

MAGIC = 0x5350
VERSION = 1
HDR = struct.Struct(">HBBHHI")
TYPES = {1: "HELLO", 2: "REQUEST", 3: "RESPONSE", 4: "DATA", 5: "END",
         6: "ERROR", 7: "CHALLENGE", 8: "CHALLENGE_REPLY", 9: "CANCEL",
         10: "OPEN"}
T = {v: k for k, v in TYPES.items()}
CHUNK = 256 << 10
JSON_MAX = 64 << 10
OP_MAX = 4 << 20   # REQUEST and RESPONSE (exec stdin and outputs)
DATA_MAX = 1 << 20


class ProtoError(Exception):
    pass


def send_frame(sock, ftype, payload=b""):
    if isinstance(payload, str):
        payload = payload.encode()
    sock.sendall(HDR.pack(MAGIC, VERSION, 0, T[ftype], 0, len(payload)) + payload)


def recv_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ProtoError("connection closed after %d of %d bytes" % (len(buf), n))
        buf += chunk
    return bytes(buf)


def recv_frame(sock):
    magic, ver, z1, ftype, z2, length = HDR.unpack(recv_exact(sock, HDR.size))
    if magic != MAGIC or ver != VERSION or z1 or z2 or ftype not in TYPES:
        raise ProtoError("bad frame header")
    limit = {"DATA": DATA_MAX, "END": 0, "REQUEST": OP_MAX, "RESPONSE": OP_MAX}.get(TYPES[ftype], JSON_MAX)
    if length > limit:
        raise ProtoError("frame too long")
    return TYPES[ftype], recv_exact(sock, length)


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def make_claims(sandbox, gen, worker, resident, act=1, substrate="jail",
                acc=("exec", "fs:r", "fs:w"), exp_in=120, iat_in=0, now=None):
    now = int(now if now is not None else datetime.datetime.now().timestamp())
    return json.dumps({
        "iss": "space-control", "sub": "p_test",
        "jti": secrets.token_urlsafe(16), "aud": "node-api", "pur": "control",
        "iat": rfc3339(now + iat_in), "exp": rfc3339(now + exp_in),
        "sbx": sandbox, "gen": gen, "wrk": worker, "sst": substrate,
        "act": act, "res": resident, "acc": list(acc)}, separators=(",", ":"))


def call(path, op, sandbox, claims, args, infile=None, outfile=None, timeout=600):
    """One operation; returns (frame name, body dict, data bytes, ended)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(timeout)
    s.connect(path)
    try:
        send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
        name, body = recv_frame(s)
        if name != "HELLO":
            return name, json.loads(body), 0, False
        # claims travel as the claims object itself (docs/protocol.md);
        # text that is not JSON is sent as a string, which the bridge
        # refuses as a malformed REQUEST
        try:
            cl = json.loads(claims)
        except ValueError:
            cl = claims
        req = {"op": op, "sandbox": sandbox, "claims": cl, "args": args}
        send_frame(s, "REQUEST", json.dumps(req))
        if infile is not None:
            try:
                with open(infile, "rb") as f:
                    while True:
                        b = f.read(CHUNK)
                        if not b:
                            break
                        send_frame(s, "DATA", b)
                send_frame(s, "END")
            except (BrokenPipeError, ConnectionResetError):
                pass    # the bridge answered early (an ERROR follows)
        name, body = recv_frame(s)
        doc = json.loads(body) if body else {}
        total, ended = 0, False
        if name == "RESPONSE" and op == "fs.read":
            out = open(outfile, "wb") if outfile else None
            try:
                while True:
                    try:
                        n2, b2 = recv_frame(s)
                    except ProtoError:
                        break
                    if n2 == "DATA":
                        total += len(b2)
                        if out:
                            out.write(b2)
                    elif n2 == "END":
                        ended = True
                        break
                    else:
                        name, doc = n2, json.loads(b2)
                        break
            finally:
                if out:
                    out.close()
        return name, doc, total, ended
    finally:
        s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("claims")
    c.add_argument("--sandbox", required=True)
    c.add_argument("--gen", type=int, required=True)
    c.add_argument("--worker", required=True)
    c.add_argument("--resident", required=True)
    c.add_argument("--act", type=int, default=1)
    c.add_argument("--substrate", default="jail")
    c.add_argument("--acc", default="exec,fs:r,fs:w")
    c.add_argument("--exp-in", type=int, default=120)
    c.add_argument("--iat-in", type=int, default=0)
    k = sub.add_parser("call")
    k.add_argument("sock")
    k.add_argument("op")
    k.add_argument("sandbox")
    k.add_argument("claims")
    k.add_argument("args")
    k.add_argument("--in", dest="infile")
    k.add_argument("--out", dest="outfile")
    k.add_argument("--timeout", type=float, default=600)
    g = sub.add_parser("get")
    g.add_argument("path")
    a = ap.parse_args()
    if a.cmd == "get":
        v = json.load(sys.stdin)
        for part in a.path.split("."):
            if isinstance(v, dict):
                v = v.get(part)
            elif isinstance(v, list) and part.isdigit() and int(part) < len(v):
                v = v[int(part)]
            else:
                v = None
        print(v if isinstance(v, str) else json.dumps(v))
        return 0
    if a.cmd == "claims":
        print(make_claims(a.sandbox, a.gen, a.worker, a.resident, a.act, a.substrate,
                          [x for x in a.acc.split(",") if x], a.exp_in, a.iat_in))
        return 0
    try:
        name, doc, total, ended = call(a.sock, a.op, a.sandbox, a.claims, json.loads(a.args),
                                       a.infile, a.outfile, a.timeout)
    except (OSError, ProtoError, ValueError) as e:
        print(json.dumps({"frame": None, "failure": str(e)}))
        return 2
    print(json.dumps({"frame": name, "body": doc, "data_bytes": total, "ended": ended}))
    return 0 if name == "RESPONSE" else 1


if __name__ == "__main__":
    sys.exit(main())
