#!/usr/bin/python3
"""Runs inside a sandbox for tests/integration/72_netgtw.sh: servers on
127.0.0.1 only (the gateway connects there inside the sandbox's network
namespace).
  8080  HTTP: GET / answers "hello from the sandbox"
  8081  raw TCP: echoes each line as "echo: LINE"
  8082  HTTP that switches protocols (101) on an Upgrade request, then
        keeps the connection open
  8083  HTTP too, never declared: the gateway must refuse it anyway
  8084  raw TCP that accepts and then says nothing, and never closes
"""
import http.server
import socket
import socketserver
import threading


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        b = b"hello from the sandbox\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def log_message(self, *a):
        pass


class Echo(socketserver.StreamRequestHandler):
    def handle(self):
        for line in self.rfile:
            self.wfile.write(b"echo: " + line)


class Upgrade(socketserver.BaseRequestHandler):
    def handle(self):
        data = b""
        while b"\r\n\r\n" not in data:
            c = self.request.recv(4096)
            if not c:
                return
            data += c
        self.request.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                             b"Connection: Upgrade\r\n"
                             b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
        while self.request.recv(4096):
            pass


class Silent(socketserver.BaseRequestHandler):
    def handle(self):
        threading.Event().wait()


class TS(socketserver.ThreadingMixIn, socketserver.TCPServer):
    allow_reuse_address = True
    daemon_threads = True


def serve(port, handler):
    TS(("127.0.0.1", port), handler).serve_forever()


for p, h in ((8081, Echo), (8082, Upgrade), (8083, Hello), (8084, Silent)):
    threading.Thread(target=serve, args=(p, h), daemon=True).start()
serve(8080, Hello)
