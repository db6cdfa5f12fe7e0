#!/usr/bin/env python3
"""A stand-in control plane that answers a worker with hostile bodies.

usage: hostile_control.py PORT COUNT_FILE

Registration and heartbeats get 200. Every other answer is one of the
bodies below, in turn: bytes that are not JSON, a JSON answer larger than
any the worker takes, JSON nested deeper than a parser should follow, an
assignments envelope with more assignments than the limit, a string of a
megabyte where an id belongs, a key "bundle" of garbage and of the wrong
type, an archives answer naming non-digests. COUNT_FILE holds the number of
hostile answers sent so far (the test waits on it)."""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORT, COUNT = int(sys.argv[1]), sys.argv[2]

IDENT = '{"sandbox":"sbx_x","generation":1,"worker":"w2","substrate":"jail","activation":1,"resident":"inc_x"}'
ONE = '{"revision":%d,"action":"retire","identity":' + IDENT + ',"spec":{}}'
BODIES = [
    b'\x00\xff garbage, not JSON \x01\x02',
    b'{"revision":1,"assignments":[' + b'0,' * (3 << 20) + b'0]}',      # over 4 MiB
    b'[' * 200000 + b']' * 200000,                                       # deep nesting
    ('{"revision":2000,"assignments":[' + ','.join(ONE % (i + 1) for i in range(1001)) + ']}').encode(),
    ('{"revision":3,"assignments":[{"revision":3,"action":"install","identity":{"sandbox":"'
     + 'A' * (1 << 20) + '"}}]}').encode(),
    b'{"bundle":' + b'"v4.public.' + b'\x7f' * 100 + b'"}',
    b'{"bundle":12345}',
    b'{"collect":["../../etc/passwd", 7, null, "' + b'a' * 63 + b'G"]}',
    b'{"revision":-1,"assignments":{}}',
    b'\xef\xbb\xbf{"revision":1e999,"assignments":[]}',
]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    n = 0

    def log_message(self, *a):
        pass

    def answer(self, body, status=200):
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def hostile(self):
        body = BODIES[H.n % len(BODIES)]
        H.n += 1
        with open(COUNT + ".tmp", "w") as f:
            f.write(str(H.n))
        import os
        os.replace(COUNT + ".tmp", COUNT)
        self.answer(body)

    def do_GET(self):
        self.hostile()

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0") or 0)
        if n:
            self.rfile.read(n)
        if self.path.endswith("/register") or self.path.endswith("/heartbeat"):
            self.answer(b"{}")
        else:
            self.hostile()


ThreadingHTTPServer(("127.0.0.1", PORT), H).serve_forever()
