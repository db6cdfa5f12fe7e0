"""Streams (docs/protocol.md, "Streams"), measured by bench/platform.py on
its platform, each figure beside a baseline taken in the same run:

  interactive latency   one byte written to a process and read back: a PTY
                        session (`stty raw -echo; exec cat`) and a pipe
                        (`cat`) through node-api's WebSocket (full path)
                        and straight to the bridge socket, against the same
                        command on a local PTY, under `script`, and through
                        local pipes
  pipe throughput       MB/s of `head -c N /dev/zero` on stdout through the
                        WebSocket, the bridge socket and the CLI (`space
                        exec`), against the same command piped locally
  idle streams          RSS (and PSS, threads) of node-api, sbx-manager and
                        the bridges with 1 and with N (1,000) idle streams
                        open (each a `cat` waiting on its stdin), per stream

The WebSocket client is Debian's python3-websockets (asyncio); the bridge
client is the frame client of tests/tools/streams.py. Each sample times
itself inside the coroutine or function that makes it, so an event loop's
start is in no figure.
"""
import asyncio
import json
import os
import socket
import subprocess
import time
import urllib.parse

import spc        # noqa: E402  (tests/tools, put on sys.path by platform.py)
import streams    # noqa: E402  (the bridge's stream client of tests 35)

STDOUT, STDERR, PTY, STDIN, STDIN_EOF = 1, 2, 3, 4, 5
PTY_CMD = "stty raw -echo; echo READY; exec cat"
# streams opened at once while going to 1,000: node-api closes the oldest
# of more than 16 connections of one address still sending their head
# (--http-heads-per-ip)
BATCH = 10

try:
    import websockets
except ImportError:     # Debian's python3-websockets, /usr/bin/python3
    websockets = None


def now_us():
    return time.perf_counter_ns() / 1000.0


def ws_url(endpoint, sbx, args):
    ep = endpoint.rstrip("/").replace("http://", "ws://", 1)
    return "%s/v1/sandboxes/%s/processes/stream?args=%s" % (
        ep, sbx, urllib.parse.quote(json.dumps(args, separators=(",", ":")), safe=""))


async def ws_open(url, cap, src=None):
    """One stream; src: the local address to connect from (node-api limits
    connections per client address)."""
    kw = {}
    if src:
        u = urllib.parse.urlsplit(url)
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind((src, 0))
        s.settimeout(30)
        s.connect((u.hostname, u.port))
        s.setblocking(False)
        kw["sock"] = s
    ws = await websockets.connect(url, extra_headers={"Authorization": "Bearer " + cap},
                                  subprotocols=["space.v1"], compression=None,
                                  ping_interval=None, max_size=1 << 17,
                                  open_timeout=60, close_timeout=5, **kw)
    first = await ws.recv()
    if not isinstance(first, str) or "result" not in json.loads(first):
        raise RuntimeError("stream: first message %r" % first[:200])
    return ws


async def ws_until(ws, kind, needle):
    got = b""
    while needle not in got:
        m = await ws.recv()
        if isinstance(m, bytes) and m and m[0] == kind:
            got += m[1:]
    return got


class WsEcho:
    """A stream kept open; sample() writes one byte and waits for it back."""

    def __init__(self, loop, url, cap, kind):
        self.loop, self.kind = loop, kind
        self.ws = loop.run_until_complete(ws_open(url, cap))
        if kind == PTY:
            loop.run_until_complete(ws_until(self.ws, PTY, b"READY"))

    async def _one(self):
        t0 = now_us()
        await self.ws.send(bytes([STDIN]) + b"x")
        await ws_until(self.ws, self.kind, b"x")
        return now_us() - t0

    def sample(self):
        return self.loop.run_until_complete(self._one())

    def close(self):
        self.loop.run_until_complete(self.ws.close())


class BridgeEcho:
    """The same, framed straight to the bridge socket (streams.Stream)."""

    def __init__(self, sock, sbx, claims, args, kind):
        self.kind = kind
        self.st = streams.Stream(sock, sbx, claims, "proc.start", args)
        if self.st.name != "RESPONSE":
            raise RuntimeError("bridge proc.start: %s %s" % (self.st.name, self.st.body))
        self.key = {STDOUT: "stdout", PTY: "pty"}[kind]
        if kind == PTY:
            self._wait(b"READY")

    def _wait(self, needle):
        while needle not in self.st.out[self.key]:
            if not self.st.one():
                raise RuntimeError("bridge stream ended: %s" % self.st.error)
        self.st.out[self.key] = b""

    def sample(self):
        t0 = now_us()
        self.st.send(STDIN, b"x")
        self._wait(b"x")
        return now_us() - t0

    def close(self):
        self.st.close()


class LocalEcho:
    """The baselines: a local PTY (forkpty), `script` (a relay process and
    its own PTY, as a terminal server would have), local pipes."""

    def __init__(self, how):
        self.how = how
        self.buf = b""
        if how == "pty":
            pid, fd = os.forkpty()
            if pid == 0:
                try:
                    os.execvp("sh", ["sh", "-c", PTY_CMD])
                finally:
                    os._exit(127)
            self.pid, self.wfd, self.rfd = pid, fd, fd
            self.p = None
        else:
            argv = ["script", "-q", "-c", PTY_CMD, "/dev/null"] if how == "script" else ["cat"]
            self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
            self.wfd, self.rfd = self.p.stdin.fileno(), self.p.stdout.fileno()
        if how != "pipe":
            self._wait(b"READY")

    def _wait(self, needle):
        while needle not in self.buf:
            b = os.read(self.rfd, 4096)
            if not b:
                raise RuntimeError("local %s: ended" % self.how)
            self.buf += b
        self.buf = b""

    def sample(self):
        t0 = now_us()
        os.write(self.wfd, b"x")
        self._wait(b"x")
        return now_us() - t0

    def close(self):
        if self.p:
            self.p.kill()
            self.p.wait()
        else:
            os.kill(self.pid, 9)
            os.waitpid(self.pid, 0)
            os.close(self.wfd)


def interleave_self_timed(n, fns, P):
    """Like platform.interleave, but each fn returns its own sample."""
    import random
    res = {k: [] for k in fns}
    keys = list(fns)
    for _ in range(n):
        random.shuffle(keys)
        for k in keys:
            res[k].append(fns[k]())
    return res


def bench_latency(P, plat, sbx, rt, iters):
    rt.get()
    r = rt.route
    sock = P.bridge_sock(plat, r)
    claims = spc.make_claims(r["sandbox"], r["generation"], r["worker"], r["resident"],
                             r["activation"], r["substrate"], ["exec", "fs:r", "pty"], exp_in=600)
    pty_args = {"argv": ["sh", "-c", PTY_CMD], "pty": {"rows": 24, "cols": 80}}
    pipe_args = {"argv": ["cat"]}
    loop = asyncio.new_event_loop()
    ends = []
    try:
        e = {
            "ws_pty": WsEcho(loop, ws_url(rt.endpoint, sbx, pty_args), rt.get(), PTY),
            "ws_pipe": WsEcho(loop, ws_url(rt.endpoint, sbx, pipe_args), rt.get(), STDOUT),
            "br_pty": BridgeEcho(sock, sbx, claims, pty_args, PTY),
            "br_pipe": BridgeEcho(sock, sbx, claims, pipe_args, STDOUT),
            "loc_pty": LocalEcho("pty"),
            "loc_script": LocalEcho("script"),
            "loc_pipe": LocalEcho("pipe"),
        }
        ends = list(e.values())
        for x in ends:          # warm every path once
            x.sample()
        res = interleave_self_timed(iters, {k: v.sample for k, v in e.items()}, P)
    finally:
        for x in ends:
            try:
                x.close()
            except Exception:   # noqa: BLE001 (cleanup of a failed run)
                pass
        loop.close()
    P.log("")
    P.log("== interactive latency: one byte to a process and back (microseconds; %d interleaved rounds)" % iters)
    P.log("%-62s %9s %9s %9s" % ("path", "median", "p90", "p99"))
    for label, k in (("PTY: WebSocket to node-api (full path), `cat` in raw mode", "ws_pty"),
                     ("PTY: STREAM frames straight to the bridge socket", "br_pty"),
                     ("PTY: `script` on the host (relay process + its PTY)", "loc_script"),
                     ("PTY: a local PTY (forkpty), same command", "loc_pty"),
                     ("pipes: WebSocket to node-api (full path), `cat`", "ws_pipe"),
                     ("pipes: STREAM frames straight to the bridge socket", "br_pipe"),
                     ("pipes: `cat` through local pipes", "loc_pipe")):
        P.log("%-62s %s" % (label, P.fmt_us(res[k])))
    m = {k: P.pct(v, 50) for k, v in res.items()}
    q = {k: P.pct(v, 99) for k, v in res.items()}
    P.ROWS.append(("keystroke echo through a PTY (WebSocket), median (p99)",
                   "%.0f us (%.0f)" % (m["ws_pty"], q["ws_pty"]),
                   "bridge %.0f us (%.0f); `script` %.0f us (%.0f); local PTY %.0f us" % (
                       m["br_pty"], q["br_pty"], m["loc_script"], q["loc_script"], m["loc_pty"]),
                   "%.1fx of script / %.1fx of bridge" % (m["ws_pty"] / m["loc_script"],
                                                          m["ws_pty"] / m["br_pty"])))
    P.ROWS.append(("a byte through pipes (WebSocket), median (p99)",
                   "%.0f us (%.0f)" % (m["ws_pipe"], q["ws_pipe"]),
                   "bridge %.0f us; local pipes %.0f us (%.0f)" % (m["br_pipe"], m["loc_pipe"], q["loc_pipe"]),
                   "%.0fx / %.1fx" % (m["ws_pipe"] / m["loc_pipe"], m["ws_pipe"] / m["br_pipe"])))


async def ws_drain(url, cap):
    t0 = now_us()
    ws = await ws_open(url, cap)
    n = 0
    code = None
    try:
        async for m in ws:
            if isinstance(m, bytes) and m and m[0] == STDOUT:
                n += len(m) - 1
            elif isinstance(m, bytes) and m and m[0] == 8:
                code = m[3]
    except websockets.exceptions.ConnectionClosed:
        pass
    t1 = now_us()
    if code != 0:
        raise RuntimeError("stream: exit %s" % code)
    return n, t1 - t0


def bridge_drain(sock, sbx, claims, args):
    t0 = now_us()
    st = streams.Stream(sock, sbx, claims, "proc.start", args)
    if st.name != "RESPONSE":
        raise RuntimeError("bridge proc.start: %s" % st.body)
    f = st.s.makefile("rb", buffering=1 << 20)
    n = 0
    hdr = spc.HDR
    try:
        while True:
            h = f.read(hdr.size)
            if len(h) < hdr.size:
                raise RuntimeError("bridge stream cut")
            _, _, _, ftype, _, ln = hdr.unpack(h)
            body = f.read(ln)
            if spc.TYPES.get(ftype) == "END":
                break
            if body[0] == STDOUT:
                n += ln - 1
    finally:
        st.close()
    return n, now_us() - t0


def bench_throughput(P, plat, sbx, rt, mib, runs):
    size = mib << 20
    rt.get()
    r = rt.route
    sock = P.bridge_sock(plat, r)
    claims = spc.make_claims(r["sandbox"], r["generation"], r["worker"], r["resident"],
                             r["activation"], r["substrate"], ["exec", "fs:r", "pty"], exp_in=600)
    args = {"argv": ["head", "-c", str(size), "/dev/zero"], "stdin": False}
    loop = asyncio.new_event_loop()

    def ws():
        n, t = loop.run_until_complete(ws_drain(ws_url(rt.endpoint, sbx, args), rt.get()))
        if n != size:
            raise RuntimeError("stream: %d bytes of %d" % (n, size))
        return t

    def bridge():
        n, t = bridge_drain(sock, sbx, claims, args)
        if n != size:
            raise RuntimeError("bridge stream: %d bytes of %d" % (n, size))
        return t

    def cli():
        t0 = now_us()
        with open(os.devnull, "wb") as nul:
            subprocess.run([os.path.join(plat.bin, "space"), "exec", sbx, "--", "head", "-c", str(size),
                            "/dev/zero"], env=plat.env, stdin=subprocess.DEVNULL, stdout=nul, check=True)
        return now_us() - t0

    def local():
        t0 = now_us()
        p = subprocess.Popen(["head", "-c", str(size), "/dev/zero"], stdout=subprocess.PIPE, bufsize=0)
        n = 0
        fd = p.stdout.fileno()
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            n += len(b)
        p.wait()
        if n != size:
            raise RuntimeError("local pipe: %d bytes" % n)
        return now_us() - t0

    def local_sh():
        t0 = now_us()
        subprocess.run(["sh", "-c", "head -c %d /dev/zero | cat >/dev/null" % size], check=True)
        return now_us() - t0

    # a file of the same size in the sandbox: `cat` of it as a stream
    # against the file read API (GET .../files?path=), the pair
    fpath = "/tmp/bench-stream.bin"
    subprocess.run([os.path.join(plat.bin, "space"), "exec", sbx, "--", "sh", "-c",
                    "head -c %d /dev/zero >%s" % (size, fpath)], env=plat.env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)

    def ws_cat():
        n, t = loop.run_until_complete(ws_drain(ws_url(rt.endpoint, sbx, {"argv": ["cat", fpath],
                                                                          "stdin": False}), rt.get()))
        if n != size:
            raise RuntimeError("cat stream: %d bytes of %d" % (n, size))
        return t

    def file_api():
        u = urllib.parse.urlsplit(rt.endpoint)
        t0 = now_us()
        c = socket.create_connection((u.hostname, u.port))
        c.sendall(("GET /v1/sandboxes/%s/files?path=%s HTTP/1.1\r\nHost: %s\r\n"
                   "Authorization: Bearer %s\r\nConnection: close\r\n\r\n"
                   % (sbx, urllib.parse.quote(fpath, safe=""), u.netloc, rt.get())).encode())
        n, head, buf = 0, None, b""
        while True:
            b = c.recv(1 << 16)
            if not b:
                break
            if head is None:
                buf += b
                i = buf.find(b"\r\n\r\n")
                if i < 0:
                    continue
                head, b = buf[:i], buf[i + 4:]
                if not head.startswith(b"HTTP/1.1 200"):
                    raise RuntimeError("file read: %s" % head.split(b"\r\n")[0])
            n += len(b)
        c.close()
        if n != size:
            raise RuntimeError("file read: %d bytes of %d" % (n, size))
        return now_us() - t0

    try:
        res = interleave_self_timed(runs, {"ws": ws, "bridge": bridge, "cli": cli,
                                           "local": local, "local_sh": local_sh,
                                           "ws_cat": ws_cat, "file_api": file_api}, P)
    finally:
        loop.close()
    mbs = {k: [size / 1e6 / (t / 1e6) for t in v] for k, v in res.items()}
    P.log("")
    P.log("== pipe throughput: `head -c %d MiB /dev/zero` on stdout, %d interleaved runs (MB/s, 1 MB = 10^6 bytes)"
          % (mib, runs))
    P.log("%-62s %9s %9s %9s" % ("path", "median", "min", "max"))
    for label, k in (("WebSocket from node-api, python3-websockets client", "ws"),
                     ("STREAM frames straight from the bridge socket (python)", "bridge"),
                     ("space exec SBX -- head ... > /dev/null (CLI, wslay, C)", "cli"),
                     ("the same command through a local pipe, python reader", "local"),
                     ("head ... | cat > /dev/null on the host (C reader)", "local_sh"),
                     ("cat FILE in the sandbox, WebSocket stream (python3-websockets)", "ws_cat"),
                     ("the same FILE by the file read API (GET files?path=, python)", "file_api")):
        P.log("%-62s %9.0f %9.0f %9.0f" % (label, P.pct(mbs[k], 50), min(mbs[k]), max(mbs[k])))
    m = {k: P.pct(v, 50) for k, v in mbs.items()}
    P.ROWS.append(("stdout throughput of a stream, median",
                   "WebSocket %.0f MB/s; CLI %.0f MB/s" % (m["ws"], m["cli"]),
                   "local pipe (python) %.0f MB/s; `| cat` %.0f MB/s; bridge %.0f MB/s" % (
                       m["local"], m["local_sh"], m["bridge"]),
                   "%.2fx / %.2fx of local" % (m["ws"] / m["local"], m["cli"] / m["local_sh"])))
    P.ROWS.append(("`cat` of a file as a stream vs the file read API, median",
                   "stream %.0f MB/s" % m["ws_cat"], "file read API %.0f MB/s" % m["file_api"],
                   "%.2fx" % (m["ws_cat"] / m["file_api"])))


# ---- idle streams ----

def threads(p):
    try:
        with open("/proc/%d/status" % p) as f:
            for line in f:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def hop_mem(P, plat, bridges):
    """{hop: (pss KiB, rss KiB, threads, procs)} for node-api, sbx-manager,
    the bridges (spaced-host), the guests' own processes (spaced-guest and
    the per-operation children it forks) and the commands of the streams."""
    out = {}
    def add(k, p):
        pss, rss = P.mem_kb(p)
        a = out.get(k, (0, 0, 0, 0))
        out[k] = (a[0] + pss, a[1] + rss, a[2] + threads(p), a[3] + 1)
    for c in plat.children():
        name = os.path.basename(P.cmdline(c).split(" ", 1)[0])
        if name in ("node-api", "sbx-manager"):
            add(name, c)
    for b in bridges:
        for p in P.tree(b):
            n = P.comm(p)
            add({"spaced-host": "bridges (spaced-host)", "spaced-guest": "guests (spaced-guest)"}.get(
                n, "commands (cat)"), p)
    return out


def idle_sandboxes(P, plat, n):
    sbxs = [plat.space("create", "--no-wait").strip() for _ in range(n)]
    end = time.time() + 120
    while time.time() < end:
        lst = json.loads(plat.space("list", "--json"))
        states = {s["id"]: s["state"] for s in lst.get("sandboxes", lst if isinstance(lst, list) else [])}
        if all(states.get(s) == "running" for s in sbxs):
            return sbxs
        time.sleep(0.5)
    raise RuntimeError("sandboxes not running after 120 s")


def bench_idle_streams(P, plat, target, per_sbx, nsbx, probe=None, probe_iters=200):
    """target idle streams over nsbx sandboxes, per_sbx at most on each
    (the bridge serves SPACE_STREAMS_PER_SBX operations at once).
    probe: (sandbox, Route) of another sandbox on the worker, whose pipe
    echo through the WebSocket is timed with no idle stream and with all
    of them open."""
    sbxs = idle_sandboxes(P, plat, nsbx)
    routes = [P.Route(plat, s) for s in sbxs]
    for s in sbxs:
        plat.space("exec", s, "--", "true")
    bridges = [b for b in plat.bridges(top=True) if any(s in P.cmdline(b) for s in sbxs)]
    loop = asyncio.new_event_loop()
    opened, why = [], None
    args = {"argv": ["cat"]}
    for rt in routes:
        rt.get()
    urls = [ws_url(rt.endpoint, s, args) for rt, s in zip(routes, sbxs)]

    async def open_some(k0, k1):
        async def one(k):
            i = k % len(sbxs)
            # node-api limits connections per client address: spread the
            # client over 127.0.0.2, .3, ... (all loopback), 200 each
            return await ws_open(urls[i], routes[i].get(), src="127.0.0.%d" % (2 + k // 200))
        return await asyncio.gather(*[one(k) for k in range(k0, k1)], return_exceptions=True)

    samples = {}
    lat = {}
    echo = None
    t_open = None

    def time_echo(k):
        if echo is None:
            return
        for _ in range(10):
            echo.sample()
        lat[k] = [echo.sample() for _ in range(probe_iters)]
    try:
        if probe:       # open before the baseline: it is in every sample
            cap = probe[1].get()
            echo = WsEcho(loop, ws_url(probe[1].endpoint, probe[0], {"argv": ["cat"]}), cap, STDOUT)
            time_echo(0)
        time.sleep(1)
        samples[0] = hop_mem(P, plat, bridges)
        for goal in (1, target):
            t0 = time.time()
            while len(opened) < goal and why is None:
                k0 = len(opened)
                got = loop.run_until_complete(open_some(k0, min(goal, k0 + BATCH)))
                for g in got:
                    if isinstance(g, Exception):
                        why = "%s: %s" % (type(g).__name__, g)
                    else:
                        opened.append(g)
            if goal > 1:
                t_open = time.time() - t0
            time.sleep(2)
            samples[len(opened)] = hop_mem(P, plat, bridges)
            if goal > 1:
                time_echo(len(opened))
            if why:
                break
    finally:
        if echo is not None:
            try:
                echo.close()
            except Exception:   # noqa: BLE001 (cleanup)
                pass

        async def close_all():
            await asyncio.gather(*[w.close() for w in opened], return_exceptions=True)
        loop.run_until_complete(close_all())
        loop.close()
        for s in sbxs:
            plat.space("kill", s, check=False)
    top = max(samples)
    P.log("")
    P.log("== idle streams: `cat` waiting on stdin, over %d sandboxes (at most %d each); MiB, threads"
          % (nsbx, per_sbx))
    if why:
        P.log("reached %d streams of %d: the next open failed: %s" % (len(opened), target, why))
    if t_open:
        P.log("opened %d streams in %.1f s (%d at a time)" % (top - 1, t_open, BATCH))
    hops = ("node-api", "sbx-manager", "bridges (spaced-host)", "guests (spaced-guest)", "commands (cat)")
    P.log("%-30s %s" % ("hop", "  ".join("%22s" % ("%d streams: RSS PSS thr" % k) for k in sorted(samples))))
    for h in hops:
        P.log("%-30s %s" % (h, "  ".join("%8.1f %6.1f %6d" % (samples[k].get(h, (0,) * 4)[1] / 1024.0,
                                                             samples[k].get(h, (0,) * 4)[0] / 1024.0,
                                                             samples[k].get(h, (0,) * 4)[2])
                                        for k in sorted(samples))))

    def per(k, hs, i):
        tot = sum(samples[k].get(h, (0,) * 4)[i] - samples[0].get(h, (0,) * 4)[i] for h in hs)
        return tot / float(k)
    plat_hops = hops[:3]
    if len(lat) == 2:
        a, b = lat[0], lat[max(lat)]
        P.log("a byte through pipes on another sandbox's stream (WebSocket, %d rounds), us: median %.0f p99 %.0f"
              " with no idle stream; median %.0f p99 %.0f with %d open" % (
                  probe_iters, P.pct(a, 50), P.pct(a, 99), P.pct(b, 50), P.pct(b, 99), max(lat)))
        P.ROWS.append(("a byte through pipes (WebSocket) beside %d idle streams, median (p99)" % max(lat),
                       "%.0f us (%.0f)" % (P.pct(b, 50), P.pct(b, 99)),
                       "no idle stream %.0f us (%.0f)" % (P.pct(a, 50), P.pct(a, 99)),
                       "%.2fx" % (P.pct(b, 50) / P.pct(a, 50))))
    if top > 1 and 1 in samples:
        P.log("per stream, RSS (KiB): node-api + sbx-manager + bridges: at 1 %.0f, at %d %.0f;"
              " with the guests' side %.0f, at %d %.0f; threads per stream at %d: %.2f"
              % (per(1, plat_hops, 1), top, per(top, plat_hops, 1), per(1, hops[:4], 1), top,
                 per(top, hops[:4], 1), top, per(top, hops[:4], 2)))
        for h in hops:
            P.log("  %-28s at %d: %6.1f KiB RSS %6.1f KiB PSS per stream" % (
                h, top, per(top, (h,), 1), per(top, (h,), 0)))
        P.ROWS.append(("memory per idle stream, RSS of node-api + sbx-manager + bridges",
                       "%.0f KiB at %d streams%s" % (per(top, plat_hops, 1), top,
                                                     "" if top >= target else " (of %d: %s)" % (target, why)),
                       "%.0f KiB at 1 stream" % per(1, plat_hops, 1),
                       "%.2fx" % (per(top, plat_hops, 1) / max(per(1, plat_hops, 1), 1e-9))))
        P.ROWS.append(("... threads per idle stream (node-api, sbx-manager, bridge); spaced-guest's growth",
                       "%.2f; %.0f KiB per stream" % (per(top, plat_hops, 2), per(top, hops[3:4], 1)),
                       "-", "-"))
