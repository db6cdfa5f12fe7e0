"""The control plane alone on its stores (docs/control-plane.md), measured
by bench/platform.py, the same load on three set-ups one after the other in
the same run:

  sqlite   one space-control on SQLite (the default store)
  pg1      one space-control on PostgreSQL
  pg3      three space-control replicas on one PostgreSQL, the clients
           spread over them (client i talks to replica i mod 3)

PostgreSQL is the tests' own (tests/lib_pg.sh through bench/pg.sh: a fresh
cluster in a temporary directory, as the user postgres, loopback), with
fsync on, as SQLite's store commits with synchronous=FULL; both on the
same filesystem.

The load, the same for each: C client threads (Python, http.client, one
kept-alive connection each) released together. First N creates (POST
/v1/sandboxes {}, until its 201: placement, generation and assignment
committed); then, once every sandbox is reported serving, M capability
issues (POST /v1/sandboxes/{id}/routes {"access":["exec"]}, the sandboxes
taken in turn), then M GET /healthz (the HTTP floor of the same client and
server). Per set-up: operations per second (count over the time from the
release to the last answer) and the latency of each (median, p99).

Workers are simulated (two Python threads, one per worker, as
tests/integration/2r_control_pg_replicas.sh does): each registers, long-
polls its assignments at one replica (w1 at the first, w2 at the second)
and reports each install serving. Real workers would start a jail per
create (about 50 ms each, one after the other per worker): the figure
would then be the workers', the same for every store.
"""
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Conn:
    def __init__(self, port, cred):
        self.port, self.cred, self.c = port, cred, None

    def req(self, method, path, body=None, timeout=60):
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
            try:
                h = {"Authorization": "Bearer " + self.cred}
                if body is not None:
                    h["Content-Type"] = "application/json"
                self.c.request(method, path, body, h)
                r = self.c.getresponse()
                data = r.read()
                if r.getheader("Connection", "").lower() == "close":
                    self.c.close()
                    self.c = None
                return r.status, data
            except (OSError, http.client.HTTPException):
                if self.c:
                    self.c.close()
                self.c = None
                if attempt:
                    raise

    def close(self):
        if self.c:
            self.c.close()


class Worker(threading.Thread):
    """a simulated worker: long-polls its assignments, reports installs serving"""

    def __init__(self, wid, cred, port):
        super().__init__(daemon=True)
        self.wid, self.conn, self.stop = wid, Conn(port, cred), threading.Event()
        self.served, self.err = set(), None
        st, data = self.conn.req("POST", "/v1/workers/%s/register" % wid, json.dumps(
            {"incarnation": "bench-" + wid, "endpoint": "http://127.0.0.1:9", "capacity": 100000}))
        if st != 200:
            raise RuntimeError("register %s: %d %s" % (wid, st, data[:200]))

    def run(self):
        cur = 0
        try:
            while not self.stop.is_set():
                st, data = self.conn.req("GET", "/v1/workers/%s/assignments?after=%d&wait=1" % (self.wid, cur))
                if st != 200:
                    raise RuntimeError("assignments %s: %d %s" % (self.wid, st, data[:200]))
                a = json.loads(data)
                for x in a["assignments"]:
                    if x["action"] == "install":
                        st, data = self.conn.req("POST", "/v1/workers/%s/status" % self.wid, json.dumps(
                            {"identity": x["identity"], "state": "serving"}))
                        if st not in (200, 204):
                            raise RuntimeError("status %s: %d %s" % (self.wid, st, data[:200]))
                        self.served.add(x["identity"]["sandbox"])
                cur = a["revision"]
        except Exception as e:     # noqa: BLE001 (reported by the main thread)
            self.err = e


def load(P, ports, cred, clients, n, one):
    """n calls of one(conn, i) from `clients` threads released together;
    client k uses replica k mod len(ports). (ops/s, latencies in us, errors)"""
    go = threading.Event()
    lat, errs = [], []
    def client(k):
        c = Conn(ports[k % len(ports)], cred)
        mine = range(k, n, clients)
        go.wait()
        for i in mine:
            t0 = P.now_us()
            try:
                ok = one(c, i)
            except (OSError, http.client.HTTPException) as e:
                ok = str(e)
            if ok is True:
                lat.append(P.now_us() - t0)
            else:
                errs.append(ok)
        c.close()
    th = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
    for t in th:
        t.start()
    time.sleep(0.2)
    t0 = P.now_us()
    go.set()
    for t in th:
        t.join()
    wall = (P.now_us() - t0) / 1e6
    return len(lat) / wall, lat, errs


def pg_commits(port):
    """transactions committed in database space so far (every statement
    sent outside a transaction counts as one); the statistics are flushed
    within a second"""
    time.sleep(1.2)
    r = subprocess.run(["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(port), "-U", "space", "-d", "space",
                        "-c", "SELECT xact_commit FROM pg_stat_database WHERE datname = 'space'"],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=30)
    try:
        return int(r.stdout.decode().strip())
    except ValueError:
        return None


def run_setup(P, bindir, name, replicas, store, creates, routes, clients, pgport=None):
    d = tempfile.mkdtemp(prefix="space-bench-ctl.")
    env = dict(os.environ)
    env.pop("SPACE_CONTROL_STORE", None)
    if store:
        env["SPACE_CONTROL_STORE"] = store
    ctl = os.path.join(bindir, "space-control")
    procs, workers = [], []

    def sub(*args):
        r = subprocess.run([ctl] + list(args) + ["--data-dir", d], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=60)
        if r.returncode != 0:
            raise RuntimeError("space-control %s: %s" % (" ".join(args), r.stderr.decode()[-300:]))
        return r.stdout.decode().strip()
    try:
        key = sub("apikey", "add", "bench")
        wcred = [sub("worker", "add", "w%d" % i) for i in (1, 2)]
        ports = []
        for i in range(replicas):
            p = free_port()
            log = open(os.path.join(d, "replica%d.log" % i), "w")
            procs.append(subprocess.Popen([ctl, "--data-dir", d, "--listen", "127.0.0.1:%d" % p,
                                           "--heartbeat-timeout", "3600"], env=env,
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=log))
            ports.append(p)
            end = time.time() + 20
            while True:
                try:
                    if Conn(p, "").req("GET", "/healthz", timeout=2)[0] == 200:
                        break
                except (OSError, http.client.HTTPException):
                    pass
                if time.time() > end or procs[-1].poll() is not None:
                    with open(log.name) as f:
                        raise RuntimeError("space-control %s replica %d did not start: %s" % (
                            name, i, f.read()[-500:]))
                time.sleep(0.1)
        for i, cred in enumerate(wcred):
            w = Worker("w%d" % (i + 1), cred, ports[i % replicas])
            w.start()
            workers.append(w)
        ids = [None] * creates

        def create(c, i):
            st, data = c.req("POST", "/v1/sandboxes", "{}")
            if st != 201:
                return "create %d %s" % (st, data[:120])
            ids[i] = json.loads(data)["id"]
            return True
        c0 = pg_commits(pgport) if pgport else None
        cps, clat, cerr = load(P, ports, key, clients, creates, create)
        c1 = pg_commits(pgport) if pgport else None
        end = time.time() + 120
        made = set(x for x in ids if x)
        while time.time() < end:
            served = set().union(*(w.served for w in workers))
            if made <= served or any(w.err for w in workers):
                break
            time.sleep(0.05)
        for w in workers:
            if w.err:
                raise RuntimeError("simulated worker: %s" % w.err)
        if not made <= served:
            raise RuntimeError("%d of %d sandboxes not serving after 120 s" % (len(made - served), len(made)))
        ready = sorted(made)

        def route(c, i):
            st, data = c.req("POST", "/v1/sandboxes/%s/routes" % ready[i % len(ready)], '{"access":["exec"]}')
            return True if st in (200, 201) else "route %d %s" % (st, data[:120])
        c2 = pg_commits(pgport) if pgport else None
        rps, rlat, rerr = load(P, ports, key, clients, routes, route)
        c3 = pg_commits(pgport) if pgport else None

        def health(c, i):
            st, data = c.req("GET", "/healthz")
            return True if st == 200 else "healthz %d" % st
        hps, hlat, herr = load(P, ports, key, clients, routes, health)
        races = 0
        for i in range(replicas):
            with open(os.path.join(d, "replica%d.log" % i)) as f:
                races += sum(1 for ln in f if "serialization races" in ln)
        commits = None
        if None not in (c0, c1, c2, c3):
            # the simulated workers' polls and reports are in the first
            commits = ((c1 - c0) / max(1, creates), (c3 - c2) / max(1, routes))
        return {"creates": (cps, clat, cerr), "routes": (rps, rlat, rerr), "healthz": (hps, hlat, herr),
                "races": races, "commits": commits}
    finally:
        for w in workers:
            w.stop.set()
        for w in workers:
            w.join(5)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(d, ignore_errors=True)


def pg_start():
    r = subprocess.run(["sh", os.path.join(TOP, "bench", "pg.sh"), "start"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    if r.returncode != 0:
        raise RuntimeError("bench/pg.sh start: %s" % r.stderr.decode()[-500:])
    pgt, port, url = r.stdout.decode().split()
    return pgt, url, int(port)


def pg_stop(pgt):
    subprocess.run(["sh", os.path.join(TOP, "bench", "pg.sh"), "stop", pgt], timeout=60)


def bench_stores(P, bindir, creates, routes, clients):
    setups = [("sqlite", "SQLite, one space-control", 1, False),
              ("pg1", "PostgreSQL, one space-control", 1, True),
              ("pg3", "PostgreSQL, three replicas (clients spread)", 3, True)]
    res = {}
    for key, label, replicas, pg in setups:
        pgt = None
        try:
            store = port = None
            if pg:
                pgt, store, port = pg_start()
            res[key] = run_setup(P, bindir, key, replicas, store, creates, routes, clients, port)
        finally:
            if pgt:
                pg_stop(pgt)
    P.log("")
    P.log("== the control plane on its stores: %d creates, then %d capability issues, then %d GET /healthz;"
          " %d client threads (kept-alive connections), simulated workers" % (creates, routes, routes, clients))
    P.log("%-46s %9s %9s %9s %9s %9s %9s %9s" % ("set-up", "create/s", "p50 ms", "p99 ms",
                                                 "route/s", "p50 ms", "p99 ms", "healthz/s"))
    for key, label, _, _ in setups:
        r = res[key]
        (cps, clat, cerr), (rps, rlat, rerr), (hps, _, herr) = r["creates"], r["routes"], r["healthz"]
        P.log("%-46s %9.0f %9.1f %9.1f %9.0f %9.1f %9.1f %9.0f" % (
            label, cps, P.pct(clat, 50) / 1000, P.pct(clat, 99) / 1000,
            rps, P.pct(rlat, 50) / 1000, P.pct(rlat, 99) / 1000, hps))
        errs = cerr + rerr + herr
        if errs:
            P.log("  %s: %d errors, e.g. %s" % (key, len(errs), "; ".join(sorted(set(errs))[:3])))
        if r["races"]:
            P.log("  %s: %d transactions gave up after losing 20 serialization races (503)" % (key, r["races"]))
        if r["commits"]:
            P.log("  %s: PostgreSQL transactions per create %.1f (with the workers' polls and reports),"
                  " per capability issue %.1f" % ((key,) + r["commits"]))
    s = res["sqlite"]
    for key in ("pg1", "pg3"):
        r = res[key]
        P.log("ratios to SQLite, %s: creates %.2f, routes %.2f" % (
            key, r["creates"][0] / s["creates"][0], r["routes"][0] / s["routes"][0]))
    p1, p3 = res["pg1"], res["pg3"]
    P.ROWS.append(("creates/s (control plane, simulated workers), PostgreSQL 1 / 3 replicas",
                   "%.0f / %.0f" % (p1["creates"][0], p3["creates"][0]),
                   "SQLite %.0f" % s["creates"][0],
                   "%.2fx / %.2fx" % (p1["creates"][0] / s["creates"][0], p3["creates"][0] / s["creates"][0])))
    P.ROWS.append(("routes/s (capability issues), PostgreSQL 1 / 3 replicas",
                   "%.0f / %.0f" % (p1["routes"][0], p3["routes"][0]),
                   "SQLite %.0f; /healthz %.0f" % (s["routes"][0], s["healthz"][0]),
                   "%.2fx / %.2fx" % (p1["routes"][0] / s["routes"][0], p3["routes"][0] / s["routes"][0])))
