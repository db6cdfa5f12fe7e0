"""The network into a sandbox (docs/network.md), measured by
bench/platform.py on a platform of its own (`space up --workers 2`: a move
needs a second worker), each path beside a direct connection in the same
run:

  HTTP latency and      GET / of a small C server in the sandbox
  throughput            (bench_netsvc serve, on the sandbox's 127.0.0.1),
                        by a C client (bench_netsvc http) over three paths:
                        direct (the client enters the sandbox's network
                        namespace, setns on /proc/PID/ns/net of the server,
                        and connects to 127.0.0.1:8080), through netgtw
                        alone (the worker's gateway listener, hello with a
                        service capability) and through space-edge (Host
                        8080-SBX.localhost:EDGE, a public port, so no
                        credential: edge -> netgtw listener -> gateway).
                        Latency: one connection, requests one after the
                        other, kept alive or a fresh connection each.
                        Throughput: 8 connections at once, kept alive or
                        fresh (each request its own connection).
  TCP throughput        256 MiB one way through one raw TCP connection
                        (bench_netsvc tcp), upload and download, direct
                        and through netgtw (space-edge serves HTTP only)
  a move to the URL     POST move, the sandbox running on the other
                        worker, the server started again there (nothing
                        runs across a move), and the first 200 at the same
                        edge URL (the edge's one rebuilt attempt); that
                        first request beside the next one (cached route)

SPACE_BENCH_EDGE_BASELINE=BIN adds a fourth HTTP path: a second space-edge
from that binary (an earlier build, to compare against) beside space up's,
on the same platform, control plane and credential, in the same rounds.

Rounds are interleaved: every round runs each path once, in shuffled
order. Figures are medians over the rounds of each round's figure, and the
best round (the least disturbed by the rest of the machine).
"""
import http.client
import json
import os
import random
import socket
import subprocess
import time

SVC = "/home/user/bench_netsvc"
HTTP_PORT, TCP_PORT = 8080, 8081


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2.0


def parse(out):
    return {k: float(v) for k, v in (w.split("=", 1) for w in out.split())}


class Net:
    def __init__(self, P, plat, sbx, tool):
        self.P, self.plat, self.sbx, self.tool = P, plat, sbx, tool
        self.auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"],
                     "Content-Type": "application/json"}
        self.ctl = P.Http("127.0.0.1:%d" % plat.port)
        edge = plat.env["SPACE_EDGE_URL"].split("://", 1)[1].rstrip("/")
        self.edge = "127.0.0.1:" + edge.rsplit(":", 1)[1]
        self.host = "%d-%s.%s" % (HTTP_PORT, sbx, plat.env["SPACE_EDGE_DOMAIN"])
        self.paths = list(PATHS)
        self.edges = {"edge": (self.edge, self.host)}
        self.base_proc = None
        self.caps = {}

    def api(self, method, path, body=None):
        st, data, _ = self.ctl.req(method, path, body, self.auth)
        return st, json.loads(data) if data else {}

    def cap(self, port, proto):
        """a service capability and the gateway it names, fetched again
        before it gets old"""
        k = (port, proto)
        c = self.caps.get(k)
        if c is None or time.time() - c[2] > 45:
            st, r = self.api("POST", "/v1/sandboxes/%s/routes" % self.sbx,
                             json.dumps({"port": port, "proto": proto}))
            if st not in (200, 201):
                raise RuntimeError("service route: %d %s" % (st, r))
            c = self.caps[k] = (r["capability"], r["endpoint"].split("://", 1)[1], time.time())
        return c

    def server_pid(self, not_pid=None):
        """the server's pid inside the sandbox (its network namespace is
        the sandbox's), the newest but not_pid (the server before a move;
        a namespace's inode number is no use there: the kernel reuses a
        freed one)"""
        best = None
        for p in self.P.pids_where(lambda q: self.P.cmdline(q).startswith(SVC + " serve")):
            try:
                ns = os.readlink("/proc/%d/ns/net" % p)
                st = os.stat("/proc/%d" % p).st_mtime
            except OSError:
                continue
            if p != not_pid and (best is None or st > best[1]):
                best = (p, st, ns)
        return best

    def start_server(self, not_pid=None, wait=30):
        self.plat.space("exec", self.sbx, "--background", "--timeout", "3600", "--",
                        SVC, "serve", str(HTTP_PORT), str(TCP_PORT))
        end = time.time() + wait
        b = r = None
        while time.time() < end:
            b = self.server_pid(not_pid)
            if b:
                self.pid, self.ns = b[0], b[2]
                self.netns = "/proc/%d/ns/net" % self.pid
                r = subprocess.run(self.http_argv("direct", 1, 1, "keep"), stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE)
                if r.returncode == 0:
                    return
            time.sleep(0.02)
        ps = self.plat.space("exec", self.sbx, "--", "ps", "ax", check=False)
        raise RuntimeError("the server in the sandbox did not answer in %d s (server %s, client %s); in"
                           " the sandbox:\n%s" % (wait, b, r and (r.stdout + r.stderr).decode()[-200:], ps))

    def http_argv(self, path, conns, reqs, mode):
        if path == "direct":
            where = ["127.0.0.1:%d" % HTTP_PORT, "sandbox", str(conns), str(reqs), mode,
                     self.netns, "-", "0"]
        elif path == "netgtw":
            cap, gw, _ = self.cap(HTTP_PORT, "http")
            where = [gw, "sandbox", str(conns), str(reqs), mode, "-", cap, str(HTTP_PORT)]
        else:
            addr, host = self.edges[path]
            where = [addr, host, str(conns), str(reqs), mode, "-", "-", "0"]
        return [self.tool, "http"] + where

    def http(self, path, conns, reqs, mode):
        r = subprocess.run(self.http_argv(path, conns, reqs, mode), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("bench_netsvc http %s %s: exit %d: %s %s" % (
                path, mode, r.returncode, r.stdout.decode(), r.stderr.decode()[-300:]))
        return parse(r.stdout.decode())

    def tcp(self, path, direction, nbytes):
        if path == "direct":
            where = ["127.0.0.1:%d" % TCP_PORT, direction, str(nbytes), self.netns, "-", "0"]
        else:
            cap, gw, _ = self.cap(TCP_PORT, "tcp")
            where = [gw, direction, str(nbytes), "-", cap, str(TCP_PORT)]
        r = subprocess.run([self.tool, "tcp"] + where, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        if r.returncode != 0:
            raise RuntimeError("bench_netsvc tcp %s %s: exit %d: %s" % (
                path, direction, r.returncode, r.stderr.decode()[-300:]))
        return parse(r.stdout.decode())

    def edge_get(self):
        """one GET at the edge URL on a fresh connection: (status, us)"""
        c = http.client.HTTPConnection(self.edge, timeout=30)
        t0 = self.P.now_us()
        try:
            c.request("GET", "/", headers={"Host": self.host})
            r = c.getresponse()
            r.read()
            return r.status, self.P.now_us() - t0
        except (OSError, http.client.HTTPException):
            return 0, self.P.now_us() - t0
        finally:
            c.close()

    def start_baseline(self, binary):
        """a second space-edge from another binary, on a free port"""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        self.base_proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:%d" % port, "--control", self.plat.env["SPACE_API_URL"],
             "--domain", "localhost:%d" % port, "--edge-credential-file",
             os.path.join(self.plat.data, "edge", "credential"), "--user", "nobody"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            try:
                c = http.client.HTTPConnection("127.0.0.1:%d" % port, timeout=2)
                c.request("GET", "/healthz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        else:
            raise RuntimeError("the baseline space-edge %s did not answer" % binary)
        self.edges["edge_base"] = ("127.0.0.1:%d" % port, "%d-%s.localhost:%d" % (HTTP_PORT, self.sbx, port))
        self.paths.append("edge_base")

    def stop_baseline(self):
        if self.base_proc:
            self.base_proc.terminate()
            self.base_proc.wait()

    def rebuilt(self):
        return self.metric("space_edge_route_rebuilt_total")

    def metric(self, name):
        """a counter of the edge's /metrics; -1 when it cannot be read"""
        c = http.client.HTTPConnection(self.edge, timeout=10)
        try:
            c.request("GET", "/metrics", headers={"Host": self.plat.env["SPACE_EDGE_DOMAIN"]})
            for ln in c.getresponse().read().decode().splitlines():
                if ln.startswith(name + " "):
                    return int(float(ln.split()[1]))
        except (OSError, http.client.HTTPException, ValueError):
            pass
        finally:
            c.close()
        return -1


PATHS = ("direct", "netgtw", "edge")
LABELS = {"direct": "direct (client in the sandbox's netns, 127.0.0.1)",
          "netgtw": "netgtw alone (listener + gateway, hello per conn.)",
          "edge": "space-edge -> netgtw (Host name, public port)",
          "edge_base": "the same, SPACE_BENCH_EDGE_BASELINE's space-edge"}


def bench_http(P, n, rounds, lat_reqs, tput_reqs, conns):
    shapes = (("lat_keep", 1, lat_reqs, "keep"), ("lat_fresh", 1, max(20, lat_reqs // 3), "fresh"),
              ("tput_keep", conns, tput_reqs, "keep"), ("tput_fresh", conns, max(conns, tput_reqs // 4), "fresh"))
    PATHS = n.paths     # noqa: N806 (with the baseline edge when there is one)
    for p in PATHS:             # warm-up: routes cached, capabilities fetched
        n.http(p, 1, 20, "keep")
    res = {(p, s[0]): [] for p in PATHS for s in shapes}
    counters = ("space_edge_connections_total", "space_edge_route_resolves_total",
                "space_edge_route_cache_hits_total")
    before = [n.metric(c) for c in counters]
    for _ in range(rounds):
        order = [(p, s) for p in PATHS for s in shapes]
        random.shuffle(order)
        for p, (name, c, r, mode) in order:
            res[(p, name)].append(n.http(p, c, r, mode))
    after = [n.metric(c) for c in counters]
    m = lambda p, s, k: median([x[k] for x in res[(p, s)]])     # noqa: E731
    P.log("")
    P.log("== HTTP into a sandbox port: GET / of a C server in the sandbox, C client (bench_netsvc);"
          " %d interleaved rounds, medians over rounds" % rounds)
    P.log("-- latency, one connection, requests one after the other (microseconds per request;"
          " %d kept alive, %d each on a fresh connection)" % (lat_reqs, max(20, lat_reqs // 3)))
    lo = lambda p, s, k: min(x[k] for x in res[(p, s)])     # noqa: E731
    hi = lambda p, s, k: max(x[k] for x in res[(p, s)])     # noqa: E731
    P.log("(best: the least disturbed round, min p50 or max r/s: the machine's load shows most in the others)")
    P.log("%-52s %8s %8s %8s %8s %8s %8s" % ("path", "keep p50", "best", "p99", "fresh p50", "best", "p99"))
    for p in PATHS:
        P.log("%-52s %8.1f %8.1f %8.0f %8.1f %8.1f %8.0f" % (
            LABELS[p], m(p, "lat_keep", "p50"), lo(p, "lat_keep", "p50"), m(p, "lat_keep", "p99"),
            m(p, "lat_fresh", "p50"), lo(p, "lat_fresh", "p50"), m(p, "lat_fresh", "p99")))
    P.log("-- throughput, %d connections at once (requests per second; %d requests kept alive,"
          " %d each on a fresh connection; p99 in microseconds)" % (conns, tput_reqs, max(conns, tput_reqs // 4)))
    P.log("%-52s %8s %8s %8s %8s %8s %8s" % ("path", "keep r/s", "best", "p99", "fresh r/s", "best", "p99"))
    for p in PATHS:
        P.log("%-52s %8.0f %8.0f %8.0f %8.0f %8.0f %8.0f" % (
            LABELS[p], m(p, "tput_keep", "rps"), hi(p, "tput_keep", "rps"), m(p, "tput_keep", "p99"),
            m(p, "tput_fresh", "rps"), hi(p, "tput_fresh", "rps"), m(p, "tput_fresh", "p99")))
    P.log("the edge during these runs: %d connections, %d route resolutions at space-control, %d routes"
          " from its cache" % tuple(b - a for a, b in zip(before, after)))
    d, g, e = (m(p, "lat_keep", "p50") for p in ("direct", "netgtw", "edge"))
    P.log("ratios of medians, kept-alive latency: edge/direct %.1f, netgtw/direct %.1f, edge/netgtw %.2f;"
          " fresh: edge/direct %.1f, netgtw/direct %.1f" % (
              e / d, g / d, e / g, m("edge", "lat_fresh", "p50") / m("direct", "lat_fresh", "p50"),
              m("netgtw", "lat_fresh", "p50") / m("direct", "lat_fresh", "p50")))
    P.ROWS.append(("HTTP GET latency, kept alive, median (p99) [best round]",
                   "edge %.0f us (%.0f) [%.0f]; netgtw %.0f us (%.0f) [%.0f]" % (
                       e, m("edge", "lat_keep", "p99"), lo("edge", "lat_keep", "p50"),
                       g, m("netgtw", "lat_keep", "p99"), lo("netgtw", "lat_keep", "p50")),
                   "direct in the netns %.0f us (%.0f) [%.0f]" % (d, m("direct", "lat_keep", "p99"),
                                                                 lo("direct", "lat_keep", "p50")),
                   "%.1fx / %.1fx" % (e / d, g / d)))
    fe, fg, fd = (m(p, "lat_fresh", "p50") for p in ("edge", "netgtw", "direct"))
    P.ROWS.append(("HTTP GET latency, fresh connection, median",
                   "edge %.0f us; netgtw %.0f us" % (fe, fg) +
                   ("; baseline edge %.0f us" % m("edge_base", "lat_fresh", "p50") if "edge_base" in PATHS else ""),
                   "direct %.0f us" % fd, "%.1fx / %.1fx" % (fe / fd, fg / fd)))
    te, tg, td = (m(p, "tput_keep", "rps") for p in ("edge", "netgtw", "direct"))
    P.ROWS.append(("HTTP requests/s, %d kept-alive connections, median" % conns,
                   "edge %.0f; netgtw %.0f" % (te, tg), "direct %.0f" % td,
                   "%.2fx / %.2fx" % (te / td, tg / td)))
    te, tg, td = (m(p, "tput_fresh", "rps") for p in ("edge", "netgtw", "direct"))
    P.ROWS.append(("HTTP requests/s, %d clients, a fresh connection each, median" % conns,
                   "edge %.0f; netgtw %.0f" % (te, tg), "direct %.0f" % td,
                   "%.2fx / %.2fx" % (te / td, tg / td)))


def bench_tcp(P, n, rounds, mib):
    nbytes = mib << 20
    res = {(p, d): [] for p in ("direct", "netgtw") for d in ("put", "get")}
    n.tcp("netgtw", "put", 1 << 20)
    for _ in range(rounds):
        order = list(res)
        random.shuffle(order)
        for p, d in order:
            res[(p, d)].append(n.tcp(p, d, nbytes)["mbs"])
    P.log("")
    P.log("== raw TCP into a sandbox port: %d MiB through one connection, %d interleaved rounds"
          " (MB/s, 1 MB = 10^6 bytes; median, min, max)" % (mib, rounds))
    for p, d in sorted(res):
        xs = res[(p, d)]
        P.log("%-58s %9.0f %9.0f %9.0f" % ("%s, %s" % (
            "direct (netns)" if p == "direct" else "through netgtw",
            "upload (client -> sandbox)" if d == "put" else "download (sandbox -> client)"),
            median(xs), min(xs), max(xs)))
    up = median(res[("netgtw", "put")]) / median(res[("direct", "put")])
    down = median(res[("netgtw", "get")]) / median(res[("direct", "get")])
    P.log("ratios of medians, netgtw/direct: upload %.2f, download %.2f" % (up, down))
    P.ROWS.append(("%d MiB raw TCP through netgtw, median, up / down" % mib,
                   "%.0f / %.0f MB/s" % (median(res[("netgtw", "put")]), median(res[("netgtw", "get")])),
                   "direct %.0f / %.0f MB/s" % (median(res[("direct", "put")]), median(res[("direct", "get")])),
                   "%.2fx / %.2fx" % (up, down)))


def bench_moves(P, n, moves):
    running, served, first, steady, total, attempts, rebuilt = [], [], [], [], [], [], []
    res0 = n.metric("space_edge_route_resolves_total")
    for _ in range(moves):
        st, s = n.api("GET", "/v1/sandboxes/" + n.sbx)
        src = s["execution"]["worker"]
        dst = "w2" if src == "w1" else "w1"
        old_pid = n.pid
        r0 = n.rebuilt()
        t0 = P.now_us()
        st, body = n.api("POST", "/v1/sandboxes/%s/move" % n.sbx, json.dumps({"to": dst}))
        if st != 202:
            raise RuntimeError("move: %d %s" % (st, body))
        end = time.time() + 120
        while True:
            st, s = n.api("GET", "/v1/sandboxes/" + n.sbx)
            if st == 200 and s.get("state") == "running" and (s.get("execution") or {}).get("worker") == dst:
                break
            if time.time() > end:
                raise RuntimeError("move: not running on %s after 120 s: %s" % (dst, s))
            time.sleep(0.01)
        t1 = P.now_us()
        n.start_server(not_pid=old_pid)
        t2 = P.now_us()
        k = 0
        while True:
            k += 1
            code, us = n.edge_get()
            if code == 200:
                break
            if k > 200:
                raise RuntimeError("the edge URL did not serve after the move: %d" % code)
            time.sleep(0.01)
        t3 = P.now_us()
        code, us2 = n.edge_get()
        running.append((t1 - t0) / 1000)
        served.append((t2 - t1) / 1000)
        first.append(us / 1000)
        steady.append(us2 / 1000)
        total.append((t3 - t0) / 1000)
        attempts.append(k)
        rebuilt.append(n.rebuilt() - r0)
    P.log("")
    P.log("== a move to the edge URL serving again (milliseconds, %d moves between w1 and w2; median, min, max)" % moves)
    for label, xs in (("POST move to running on the other worker (API, 10 ms polls)", running),
                      ("running to the server answering in the sandbox (our restart)", served),
                      ("the first GET at the same edge URL (rebuilt route)", first),
                      ("the next GET (cached route), fresh connection: baseline", steady),
                      ("POST move to the first 200 at the edge URL", total)):
        P.log("%-62s %9.1f %9.1f %9.1f" % (label, median(xs), min(xs), max(xs)))
    P.log("edge requests until the first 200: %s; rebuilt attempts counted by the edge per move: %s;"
          " route resolutions at space-control during the moves: %d" % (
              ",".join(map(str, attempts)), ",".join(map(str, rebuilt)),
              n.metric("space_edge_route_resolves_total") - res0))
    P.ROWS.append(("move to the edge URL serving again, median",
                   "%.0f ms (move %.0f, restart %.0f, first GET %.1f)" % (
                       median(total), median(running), median(served), median(first)),
                   "next GET %.1f ms" % median(steady),
                   "first GET %.1fx" % (median(first) / median(steady))))


def bench_network(P, binsrc, tool, rounds, lat_reqs, tput_reqs, conns, tcp_mib, moves):
    """its own platform: two workers (a move), started and stopped here"""
    if not os.access(tool, os.X_OK):
        raise RuntimeError("%s: missing (make bench builds it)" % tool)
    plat = P.Platform(binsrc, capacity=4, workers=2)
    try:
        plat.start()
        P.log("")
        P.log("network: space up, two workers, ports %d.. (edge %s), data in %s" % (
            plat.port, plat.env.get("SPACE_EDGE_URL"), plat.data))
        sbx = plat.space("create").strip()
        n = Net(P, plat, sbx, tool)
        plat.space("port", "expose", sbx, str(HTTP_PORT), "--public")
        plat.space("port", "expose", sbx, str(TCP_PORT))
        with open(tool, "rb") as f:
            r = subprocess.run([os.path.join(plat.bin, "space"), "fs", "write", sbx, SVC], stdin=f,
                               env=plat.env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise RuntimeError("space fs write: %s" % r.stderr.decode())
        plat.space("exec", sbx, "--", "chmod", "755", SVC)
        n.pid = None
        n.start_server()
        if os.environ.get("SPACE_BENCH_EDGE_BASELINE"):
            n.start_baseline(os.environ["SPACE_BENCH_EDGE_BASELINE"])
        try:
            bench_http(P, n, rounds, lat_reqs, tput_reqs, conns)
        finally:
            n.stop_baseline()
        bench_tcp(P, n, rounds, tcp_mib)
        if moves > 0:
            bench_moves(P, n, moves)
    finally:
        plat.stop()
