#!/usr/bin/env python3
"""bulkframes: fs.write uploads that break the frame rules in the middle of
a large body, sent straight to a bridge socket as sbx-manager would (the
bridge and the guest relay large DATA payloads with splice after checking
each header: these are the headers and lengths they must still refuse).

  bulkframes.py SOCK SANDBOX CLAIMS_JSON PATH MODE

MODE:
  truncated  a DATA header announcing 512 KiB, 100 KiB of it, then close
  oversized  a DATA header announcing 1 MiB + 1 (over the DATA limit)
  wrongtype  two good 256 KiB DATA frames, then a REQUEST frame
  badmagic   a good 256 KiB DATA frame, then a header with a bad magic

Prints one line: "closed" when the bridge closed without an answer,
"ERROR <status> <error>" when it answered with an ERROR, or
"RESPONSE <size>" when it acknowledged the upload (a failure of the check).
"""
import json
import os
import socket
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spc  # noqa: E402


def answer(s):
    try:
        name, body = spc.recv_frame(s)
    except (spc.ProtoError, OSError, struct.error):
        return "closed"
    doc = json.loads(body) if body else {}
    if name == "RESPONSE":
        return "RESPONSE %s" % doc.get("result", {}).get("size")
    return "%s %s %s" % (name, doc.get("status"), doc.get("error"))


def main():
    sock, sbx, claims, path, mode = sys.argv[1:6]
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sock)
    spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
    name, _ = spc.recv_frame(s)
    assert name == "HELLO"
    req = {"op": "fs.write", "sandbox": sbx, "claims": json.loads(claims), "args": {"path": path}}
    spc.send_frame(s, "REQUEST", json.dumps(req))
    chunk = os.urandom(256 << 10)
    hdr = spc.HDR
    try:
        if mode == "truncated":
            s.sendall(hdr.pack(spc.MAGIC, spc.VERSION, 0, spc.T["DATA"], 0, 512 << 10) + chunk[:100 << 10])
            s.shutdown(socket.SHUT_WR)
        elif mode == "oversized":
            s.sendall(hdr.pack(spc.MAGIC, spc.VERSION, 0, spc.T["DATA"], 0, (1 << 20) + 1) + chunk)
        elif mode == "wrongtype":
            spc.send_frame(s, "DATA", chunk)
            spc.send_frame(s, "DATA", chunk)
            spc.send_frame(s, "REQUEST", json.dumps(req))
        elif mode == "badmagic":
            spc.send_frame(s, "DATA", chunk)
            s.sendall(hdr.pack(0x5351, spc.VERSION, 0, spc.T["DATA"], 0, 256 << 10) + chunk)
        else:
            raise SystemExit("unknown mode")
    except (BrokenPipeError, ConnectionResetError):
        pass
    print(answer(s))
    s.close()


if __name__ == "__main__":
    main()
