#!/usr/bin/env python3
"""The platform measured against baselines taken in the same run.

  python3 bench/platform.py --bin BUILD/bin [--admit FILE] [--quick]

Starts `space up` (one worker) on private copies of the binaries, on
127.0.0.1 with free ports and a data directory under a fresh temporary
directory, and measures, each figure next to its baseline:

  exec / 4 KiB read round trip   HTTP to node-api (full path) vs the same
                                 operation framed straight to the bridge
                                 socket of the same execution vs the host
                                 (posix_spawn `true` / open+read+close);
                                 GET /healthz for the client's own share
  create to first exec           `space create` + `space exec SBX -- true`
                                 vs `bwrap --unshare-all ... true`
  idle memory                    PSS/RSS of each sandbox's processes vs an
                                 idle `bwrap ... sleep` and a bare `sleep`;
                                 the daemons
  large file read                512 MiB through node-api (curl), through
                                 the bridge, vs `cat` on the host

then, on set-ups of their own: the network into a sandbox port through
space-edge and netgtw vs a direct connection in the sandbox's network
namespace, and a move to the edge URL serving again (bench/net_bench.py,
`space up --workers 2`); creates and capability issues per second on
SQLite, PostgreSQL and three replicas (bench/control_bench.py).

The client is this Python process with measurement loops that stay in the
process (no fork per sample, except where a process start is what is
measured). Nothing asserts timing: the figures are printed, that is all.
--admit FILE adds bench_admit's lines to the final table.
"""
import argparse
import http.client
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import urllib.parse
import tempfile
import time

TOP = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# this file's directory goes last: its name must not hide the standard
# library's `platform` (uuid, imported by websockets, uses it)
_here = os.path.dirname(os.path.abspath(__file__))
sys.path = [d for d in sys.path if os.path.abspath(d or ".") != _here] + [_here]
sys.path.insert(0, os.path.join(TOP, "tests", "tools"))
import spc  # noqa: E402  (the frame client the bridge tests use)
import stream_bench  # noqa: E402  (bench/stream_bench.py)
import template_bench  # noqa: E402  (bench/template_bench.py)
import create_bench  # noqa: E402  (bench/create_bench.py)
import net_bench  # noqa: E402  (bench/net_bench.py)
import control_bench  # noqa: E402  (bench/control_bench.py)
import move_bench  # noqa: E402  (bench/move_bench.py)
import density_bench  # noqa: E402  (bench/density_bench.py)

P = sys.modules[__name__]   # the helpers below, for stream_bench

BWRAP_ARGS = ["--unshare-all", "--die-with-parent", "--new-session",
              "--ro-bind", "/usr", "/usr",
              "--symlink", "usr/bin", "/bin", "--symlink", "usr/sbin", "/sbin",
              "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64", "/lib64",
              "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
              "--tmpfs", "/home/user", "--chdir", "/home/user",
              "--hostname", "sandbox", "--uid", "1000", "--gid", "1000"]

ROWS = []          # final table: (measure, platform, baseline, ratio)


def log(*a):
    print(*a, flush=True)


def pct(xs, p):
    """the nearest-rank percentile: the smallest sample with at least p %
    of all at or below it (of 100 samples, p99 is the 99th, not the
    largest)"""
    s = sorted(xs)
    if not s:
        return float("nan")
    k = max(0, min(len(s) - 1, math.ceil(p / 100.0 * len(s) - 1e-9) - 1))
    return s[k]


def stats(xs):
    return pct(xs, 50), pct(xs, 90), pct(xs, 99)


def fmt_us(xs):
    a, b, c = stats(xs)
    return "%9.1f %9.1f %9.1f" % (a, b, c)


class Platform:
    """`space up` with one worker in a private directory; stop() undoes all."""

    def __init__(self, binsrc, capacity=16, workers=1, jail_pool=-1, checkpoint_mb=-1, disk_mb=-1):
        self.capacity = capacity
        self.disk_mb = disk_mb
        self.jail_pool = jail_pool
        self.checkpoint_mb = checkpoint_mb
        self.workers = workers
        self.t = tempfile.mkdtemp(prefix="space-bench.")
        os.chmod(self.t, 0o711)     # node-api (nobody) reaches DIR/w1/run
        self.bin = os.path.join(self.t, "bin")
        # a private copy: a rebuild of the tree during the run must not
        # replace the bridge binary under a running execution
        shutil.copytree(binsrc, self.bin)
        self.data = os.path.join(self.t, "data")
        self.up = None
        self.env = dict(os.environ)
        self.env.pop("SPACE_API_URL", None)
        self.env.pop("SPACE_API_KEY", None)
        self.env["PATH"] = self.bin + ":" + self.env.get("PATH", "")
        # the CLI's route cache goes here, not into the caller's home
        self.env["XDG_STATE_HOME"] = os.path.join(self.t, "state")

    @staticmethod
    def _port_free(p):
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False
        finally:
            s.close()

    def start(self):
        for _ in range(10):
            # below the ephemeral range: no outgoing connection takes it
            base = random.randrange(20000, 30000)
            # space up's ports: the control plane, a node-api per worker,
            # a gateway per worker (BASE+40+i), space-edge (BASE+80, 81)
            ports = ([base + i for i in range(self.workers + 1)] +
                     [base + 40 + i for i in range(1, self.workers + 1)] + [base + 80, base + 81])
            if not all(self._port_free(p) for p in ports):
                continue
            self.port = base
            self.uplog = open(os.path.join(self.t, "up.log"), "w+")
            self.up = subprocess.Popen(
                [os.path.join(self.bin, "space"), "up", "--data-dir", self.data,
                 "--workers", str(self.workers), "--capacity", str(self.capacity), "--port", str(base)] +
                (["--jail-pool", str(self.jail_pool)] if self.jail_pool >= 0 else []) +
                (["--checkpoint-mb", str(self.checkpoint_mb)] if self.checkpoint_mb >= 0 else []) +
                (["--disk-mb", str(self.disk_mb)] if self.disk_mb >= 0 else []),
                stdout=self.uplog, stderr=subprocess.STDOUT, env=self.env)
            end = time.time() + 90
            while time.time() < end:
                with open(self.uplog.name) as f:
                    text = f.read()
                if "space is up" in text:
                    break
                if self.up.poll() is not None:
                    break
                time.sleep(0.1)
            else:
                raise RuntimeError("space up did not come up in 90 s")
            if self.up.poll() is None:
                break
            self.up = None
            if "choose another --port" not in text:
                raise RuntimeError("space up failed:\n" + text[-2000:])
        else:
            raise RuntimeError("no free ports")
        with open(os.path.join(self.data, "env")) as f:
            for line in f:
                k, _, v = line.strip().partition("=")
                if k:
                    self.env[k] = v

    def space(self, *args, timeout=120, check=True):
        r = subprocess.run([os.path.join(self.bin, "space")] + list(args),
                           env=self.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise RuntimeError("space %s: exit %d: %s" % (
                " ".join(args), r.returncode, r.stderr.decode(errors="replace")))
        return r.stdout.decode(errors="replace")

    def children(self):
        return pids_where(lambda p: ppid(p) == self.up.pid) if self.up else []

    def bridges(self, top=False):
        """the bridges' processes; top: only those whose parent is not one
        (a bridge's own children, e.g. its serving child or a template's
        root monitor, are in its tree)"""
        tag = "--run-dir " + self.data + "/w"
        ps = pids_where(lambda p: "spaced-host" in cmdline(p) and tag in cmdline(p))
        if top:
            ps = [p for p in ps if ppid(p) not in ps]
        return ps

    def serving(self, sbxs):
        """those of sbxs that a bridge of this platform still serves"""
        left = set(sbxs)
        out = set()
        for b in self.bridges():
            out.update(a for a in cmdline(b).split() if a in left)
        return out

    def wait_unserved(self, sbxs, wait):
        """waits (at most wait s) until no bridge serves any of sbxs; those
        still served then"""
        end = time.time() + wait
        while True:
            left = self.serving(sbxs)
            if not left or time.time() > end:
                return left
            time.sleep(0.5)

    def stop(self):
        if self.up and self.up.poll() is None:
            self.up.send_signal(signal.SIGTERM)
            try:
                self.up.wait(25)
            except subprocess.TimeoutExpired:
                self.up.kill()
                self.up.wait()
        # bridges live in their own session (they outlive an sbx-manager
        # restart): SIGTERM lets each remove its cgroup, mount and socket
        left = self.bridges()
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 2.0)):
            for p in left:
                try:
                    os.kill(p, sig)
                except OSError:
                    pass
            end = time.time() + wait
            while left and time.time() < end:
                time.sleep(0.1)
                left = self.bridges()
            if not left:
                break
        time.sleep(0.2)
        mounts = []
        with open("/proc/mounts") as f:
            for line in f:
                m = line.split()[1]
                if m.startswith(self.t + "/"):
                    mounts.append(m)
        for m in sorted(mounts, reverse=True):
            subprocess.run(["umount", "-l", m], stderr=subprocess.DEVNULL)
        # SPACE_BENCH_LOGS=DIR: the daemons' logs kept there (DIR must not exist)
        keep = os.environ.get("SPACE_BENCH_LOGS")
        if keep:
            shutil.copytree(os.path.join(self.data, "logs"), keep, dirs_exist_ok=False)
        shutil.rmtree(self.t, ignore_errors=True)


# ---- /proc helpers ----

def cmdline(p):
    try:
        with open("/proc/%d/cmdline" % p, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def comm(p):
    """the process's name (its comm), "" for a process gone"""
    try:
        with open("/proc/%d/comm" % p) as f:
            return f.read().strip()
    except OSError:
        return ""


def ppid(p):
    try:
        with open("/proc/%d/stat" % p) as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def pids_where(pred):
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit() and pred(int(d)):
            out.append(int(d))
    return out


def tree(root):
    """root and all its descendants."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            kids.setdefault(ppid(int(d)), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out


def mem_kb(p):
    """(PSS, RSS) in KiB from smaps_rollup; (0, 0) for a process gone."""
    pss = rss = 0
    try:
        with open("/proc/%d/smaps_rollup" % p) as f:
            for line in f:
                if line.startswith("Pss:"):
                    pss = int(line.split()[1])
                elif line.startswith("Rss:"):
                    rss = int(line.split()[1])
    except OSError:
        pass
    return pss, rss


def mem_tree(root):
    pss = rss = n = 0
    for p in tree(root):
        a, b = mem_kb(p)
        pss += a
        rss += b
        n += 1
    return pss, rss, n


def cgroup_mem_kb(root, procs=None):
    """What the memory cgroup of root's descendants is charged (KiB; kernel
    memory and page cache included), or None when they share root's group.
    procs: root's tree when the caller has it already (tree(root))."""
    v1 = os.path.exists("/sys/fs/cgroup/memory/memory.usage_in_bytes")
    def group(p):
        try:
            with open("/proc/%d/cgroup" % p) as f:
                for line in f:
                    h, ctl, path = line.rstrip("\n").split(":", 2)
                    if (v1 and ctl == "memory") or (not v1 and h == "0"):
                        return path
        except (OSError, ValueError):
            pass
        return None
    mine = group(root)
    for p in (procs if procs is not None else tree(root))[1:]:
        g = group(p)
        if g and g != mine:
            f = ("/sys/fs/cgroup/memory%s/memory.usage_in_bytes" % g if v1
                 else "/sys/fs/cgroup%s/memory.current" % g)
            try:
                with open(f) as fh:
                    return int(fh.read()) // 1024
            except (OSError, ValueError):
                return None
    return None


# ---- clients ----

class Http:
    """One persistent HTTP/1.1 connection (reopened when the server closes)."""

    def __init__(self, hostport):
        self.hostport = hostport
        self.c = None

    def req(self, method, path, body=None, headers=None, sink=None):
        for attempt in (0, 1):
            if self.c is None:
                self.c = http.client.HTTPConnection(self.hostport, timeout=120)
            try:
                self.c.request(method, path, body=body, headers=headers or {})
                r = self.c.getresponse()
                if sink is None:
                    data = r.read()
                    n = len(data)
                else:
                    n = 0
                    while True:
                        b = r.read(1 << 20)
                        if not b:
                            break
                        n += len(b)
                    data = None
                if r.getheader("Connection", "").lower() == "close":
                    self.c.close()
                    self.c = None
                return r.status, data, n
            except (http.client.HTTPException, OSError):
                self.c.close()
                self.c = None
                if attempt:
                    raise


class Route:
    """A capability for SBX, fetched again before it gets old (valid 120 s)."""

    def __init__(self, plat, sbx, access="exec,fs:r"):
        self.plat, self.sbx, self.t, self.access = plat, sbx, 0, access

    def get(self):
        if time.time() - self.t > 60:
            r = json.loads(self.plat.space("route", self.sbx, "--access", self.access, "--json"))
            self.cap = r["capability"]
            self.endpoint = r["endpoint"]
            self.route = r["route"]
            self.t = time.time()
        return self.cap


def bridge_sock(plat, route):
    return os.path.join(plat.data, "w1", "run", "%s.g%d" % (route["sandbox"], route["generation"]),
                        "bridge.sock")


def layer_path(plat, route, path):
    rw = os.path.join(plat.data, "w1", "run", "%s.g%d" % (route["sandbox"], route["generation"]), "rw")
    assert path.startswith("/home/user/")
    return os.path.join(rw, "home", path[len("/home/user/"):])


def bridge_call(sock, sbx, claims, op, args):
    name, doc, n, ended = spc.call(sock, op, sbx, claims, args, timeout=120)
    if name != "RESPONSE":
        raise RuntimeError("bridge %s: %s %s" % (op, name, doc))
    return doc, n


def bridge_read_null(sock, sbx, claims, path):
    """fs.read straight to the bridge; the bytes are counted and dropped."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(120)
    s.connect(sock)
    try:
        spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
        spc.recv_frame(s)
        if isinstance(claims, str):
            claims = json.loads(claims)     # the object, not its text
        spc.send_frame(s, "REQUEST", json.dumps({"op": "fs.read", "sandbox": sbx,
                                                 "claims": claims, "args": {"path": path}}))
        name, body = spc.recv_frame(s)
        if name != "RESPONSE":
            raise RuntimeError("bridge fs.read: %s %s" % (name, body[:200]))
        f = s.makefile("rb", buffering=1 << 20)
        n = 0
        hdr = spc.HDR
        while True:
            h = f.read(hdr.size)
            if len(h) < hdr.size:
                raise RuntimeError("bridge fs.read: stream cut")
            _, _, _, ftype, _, ln = hdr.unpack(h)
            if spc.TYPES.get(ftype) == "END":
                return n
            if spc.TYPES.get(ftype) != "DATA":
                raise RuntimeError("bridge fs.read: frame %s" % spc.TYPES.get(ftype))
            left = ln
            while left:
                b = f.read(min(left, 1 << 20))
                if not b:
                    raise RuntimeError("bridge fs.read: stream cut")
                left -= len(b)
            n += ln
    finally:
        s.close()


# ---- CPU time by process, for the large transfers ----

def proc_cpu(p):
    """(name, CPU seconds of the process and its reaped children) from
    /proc/PID/stat; None for a process gone."""
    try:
        with open("/proc/%d/stat" % p) as f:
            st = f.read()
    except OSError:
        return None
    name = st[st.index("(") + 1:st.rindex(")")]
    f = st.rsplit(")", 1)[1].split()
    # fields 14-17 of proc(5): utime stime cutime cstime
    return name, sum(int(x) for x in f[11:15]) / os.sysconf("SC_CLK_TCK")


def tree_cpu(root):
    """{pid: (name, CPU seconds)} of root and its descendants, each with the
    children it reaped (so a short-lived ip or mkfs counts under the process
    that waited for it)"""
    out = {}
    for q in tree(root):
        r = proc_cpu(q)
        if r:
            out[q] = r
    return out


def machine_cpu():
    """(busy, idle) CPU seconds of the whole machine since its boot
    (/proc/stat's first line: idle and iowait count as idle)"""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(v) - v[3] - v[4]) / tick, (v[3] + v[4]) / tick


def disk_written():
    """sectors written and I/Os in flight, summed over the whole disks
    (/proc/diskstats; partitions, loop and device-mapper devices left out)"""
    w = inflight = 0
    with open("/proc/diskstats") as f:
        for line in f:
            x = line.split()
            name = x[2]
            if name.startswith(("loop", "dm-", "ram", "zram")) or not os.path.exists("/sys/block/" + name):
                continue
            w += int(x[9])
            inflight += int(x[11])
    return w, inflight


def settle(label, limit=60.0):
    """Before a timed part: what the part before left to the machine (the
    write-back of the large files' part, a killed sandbox's teardown) is
    waited out, so that it does not fall on one part's samples and not
    another's: everything synced, then until the disks wrote nothing and
    the CPUs were 90 % idle over one second (at most `limit` s). Logged."""
    t0 = time.time()
    os.sync()
    w0, _ = disk_written()
    b0, i0 = machine_cpu()
    while time.time() - t0 < limit:
        time.sleep(1)
        w1, fl = disk_written()
        b1, i1 = machine_cpu()
        busy = (b1 - b0) / max(1e-9, (b1 - b0) + (i1 - i0))
        if w1 == w0 and fl == 0 and busy <= 0.10:
            break
        w0, b0, i0 = w1, b1, i1
    log("settle before %s: %.1f s (synced; the disks quiet and the CPUs 90 %% idle over a second)"
        % (label, time.time() - t0))


def platform_cpu(plat, extra=()):
    """CPU seconds by process name over every process of the platform (the
    daemons, the bridges and what runs under them: the guests), and extra
    pids by their own names."""
    pids = set(tree(plat.up.pid)) if plat.up else set()
    for b in plat.bridges(top=True):
        pids.update(tree(b))
    pids.update(extra)
    out = {}
    for q in pids:
        r = proc_cpu(q)
        if r:
            out[r[0]] = out.get(r[0], 0.0) + r[1]
    return out


def client_cpu():
    t = os.times()
    return t.children_user + t.children_system


def metered(fn, acc, plat, extra=()):
    """fn, with the CPU it made each process spend added to acc
    (name -> seconds; "client" is this process's children: curl, cat)."""
    def run():
        a, c = platform_cpu(plat, extra), client_cpu()
        fn()
        b, d = platform_cpu(plat, extra), client_cpu()
        for k in b:
            acc[k] = acc.get(k, 0.0) + max(0.0, b[k] - a.get(k, 0.0))
        acc["client"] = acc.get("client", 0.0) + d - c
    return run


def log_cpu(title, accs, nbytes):
    """CPU milliseconds per GiB moved, by process, for each variant."""
    gib = nbytes / float(1 << 30)
    log("")
    log("== %s: CPU ms per GiB moved, by process (summed over the runs; load-robust where wall time is not)" % title)
    for label, acc in accs:
        if not acc:
            continue
        parts = sorted(((v / gib * 1000, k) for k, v in acc.items() if v > 0), reverse=True)
        tot = sum(x for x, _ in parts)
        log("%-40s total %6.0f: %s" % (label, tot, ", ".join("%s %.0f" % (k, x) for x, k in parts if x >= 1)))


def now_us():
    return time.perf_counter_ns() / 1000.0


def interleave(n, fns):
    """n rounds; each round runs every fn once, in a shuffled order, so
    that drift and bursts of noise fall on every variant alike."""
    res = {k: [] for k in fns}
    keys = list(fns)
    for _ in range(n):
        random.shuffle(keys)
        for k in keys:
            t0 = now_us()
            fns[k]()
            res[k].append(now_us() - t0)
    return res


# ---- the measurements ----

def bench_roundtrips(plat, sbx, iters):
    rt = Route(plat, sbx)
    rt.get()
    ep = rt.endpoint.split("://", 1)[1].rstrip("/")
    h = Http(ep)
    health = Http(ep)
    sock = bridge_sock(plat, rt.route)
    r = rt.route
    def claims():
        # the bridge runs the comparator on these (no signature: sbx-manager
        # verified it on the full path); same identity, fresh lifetime
        return spc.make_claims(r["sandbox"], r["generation"], r["worker"], r["resident"],
                               r["activation"], r["substrate"], ["exec", "fs:r"])
    cl = [claims(), time.time()]
    def cur_claims():
        if time.time() - cl[1] > 60:
            cl[0], cl[1] = claims(), time.time()
        return cl[0]

    # the small file, written by the sandbox user
    doc, _ = bridge_call(sock, sbx, cur_claims(), "exec",
                         {"argv": ["sh", "-c", "head -c 4096 /dev/urandom > /home/user/f4k"]})
    assert doc["result"]["exit_code"] == 0, doc
    hostf = layer_path(plat, r, "/home/user/f4k")
    assert os.path.getsize(hostf) == 4096

    body = json.dumps({"argv": ["true"]})
    def http_exec():
        st, data, _ = h.req("POST", "/v1/sandboxes/%s/exec" % sbx, body,
                            {"Authorization": "Bearer " + rt.get(), "Content-Type": "application/json"})
        if st != 200 or json.loads(data)["exit_code"] != 0:
            raise RuntimeError("exec over HTTP: %d %s" % (st, data[:200]))
    def http_read():
        st, data, n = h.req("GET", "/v1/sandboxes/%s/files?path=/home/user/f4k" % sbx, None,
                            {"Authorization": "Bearer " + rt.get()})
        if st != 200 or n != 4096:
            raise RuntimeError("read over HTTP: %d" % st)
    def http_health():
        st, _, _ = health.req("GET", "/healthz")
        if st != 200:
            raise RuntimeError("healthz: %d" % st)
    def br_exec():
        doc, _ = bridge_call(sock, sbx, cur_claims(), "exec", {"argv": ["true"]})
        if doc["result"]["exit_code"] != 0:
            raise RuntimeError("bridge exec: %s" % doc)
    def br_read():
        _, n = bridge_call(sock, sbx, cur_claims(), "fs.read", {"path": "/home/user/f4k"})
        if n != 4096:
            raise RuntimeError("bridge read: %d bytes" % n)
    def host_true():
        pid = os.posix_spawn("/usr/bin/true", ["true"], {})
        _, st = os.waitpid(pid, 0)
        if st != 0:
            raise RuntimeError("true: %d" % st)
    def host_read():
        fd = os.open(hostf, os.O_RDONLY | os.O_CLOEXEC)
        try:
            if len(os.read(fd, 65536)) != 4096:
                raise RuntimeError("host read")
        finally:
            os.close(fd)
    def br_hello():
        # the bare frame round trip an operation starts with: connect,
        # HELLO, the bridge's HELLO (its peer checks), no guest
        c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        c.settimeout(30)
        try:
            c.connect(sock)
            spc.send_frame(c, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
            if spc.recv_frame(c)[0] != "HELLO":
                raise RuntimeError("bridge HELLO")
        finally:
            c.close()
    fns = {"http_exec": http_exec, "bridge_exec": br_exec, "host_true": host_true,
           "bridge_hello": br_hello,
           "http_read": http_read, "bridge_read": br_read, "host_read": host_read,
           "healthz": http_health}
    interleave(max(5, iters // 10), fns)          # warm-up, discarded
    res = interleave(iters, fns)

    # the CLI as a user runs it: process start, route from space-control,
    # then the data request (a fresh process and connection each time)
    ctl = Http("127.0.0.1:%d" % plat.port)
    def api_route():
        st, data, _ = ctl.req("POST", "/v1/sandboxes/%s/routes" % sbx, '{"access":["exec"]}',
                              {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"],
                               "Content-Type": "application/json"})
        if st not in (200, 201):
            raise RuntimeError("route: %d %s" % (st, data[:200]))
    cli = {"cli_exec": lambda: plat.space("exec", sbx, "--", "true"),
           "api_route": api_route,
           "cli_version": lambda: plat.space("version"),
           "cli_read": lambda: plat.space("fs", "read", sbx, "/home/user/f4k"),
           "cli_route": lambda: plat.space("route", sbx, "--access", "exec"),
           "spawn_true": host_true}
    res.update(interleave(max(10, iters // 5), cli))
    cli_rounds = max(10, iters // 5)

    log("")
    log("== exec and 4 KiB read round trip (microseconds; %d interleaved rounds, client: python3 in-process loops)" % iters)
    log("%-62s %9s %9s %9s" % ("path", "median", "p90", "p99"))
    lines = [
        ("exec `true`: HTTP to node-api (full path to the guest)", "http_exec"),
        ("exec `true`: frames straight to the bridge socket", "bridge_exec"),
        ("`true` on the host: posix_spawn + waitpid", "host_true"),
        ("read 4 KiB: HTTP GET files (full path)", "http_read"),
        ("read 4 KiB: fs.read straight to the bridge socket", "bridge_read"),
        ("read 4 KiB on the host: open + read + close (layer file)", "host_read"),
        ("bare frame round trip to the bridge: connect + HELLO, no guest", "bridge_hello"),
        ("HTTP GET /healthz on node-api (client + HTTP only)", "healthz"),
        ("CLI `space exec SBX -- true` (process, route, exec)", "cli_exec"),
        ("CLI `space fs read SBX f4k`", "cli_read"),
        ("CLI `space route SBX` (process + space-control only)", "cli_route"),
        ("POST routes to space-control over HTTP (python, no process)", "api_route"),
        ("CLI `space version` (the process alone: exec, link, exit)", "cli_version"),
        ("`true` on the host (same rounds as the CLI rows)", "spawn_true"),
    ]
    for label, k in lines:
        if k == "cli_exec":
            log("-- %d interleaved rounds of:" % cli_rounds)
        log("%-62s %s" % (label[:62], fmt_us(res[k])))
    m = {k: pct(v, 50) for k, v in res.items()}
    log("ratios of medians: exec full/bridge %.2f, bridge/host %.2f, full/host %.2f;"
        " read full/bridge %.2f, bridge/host %.1f" % (
            m["http_exec"] / m["bridge_exec"], m["bridge_exec"] / m["host_true"],
            m["http_exec"] / m["host_true"], m["http_read"] / m["bridge_read"],
            m["bridge_read"] / m["host_read"]))
    log("hop costs (medians): node-api + sbx-manager (admission, bridge checks, relay) on exec %.0f us,"
        " on read %.0f us; of which client+HTTP (healthz) %.0f us" % (
            m["http_exec"] - m["bridge_exec"], m["http_read"] - m["bridge_read"], m["healthz"]))
    ROWS.append(("exec `true` round trip, HTTP full path, median (p99)",
                 "%.0f us (%.0f)" % (m["http_exec"], pct(res["http_exec"], 99)),
                 "bridge %.0f us (%.0f); host spawn %.0f us (%.0f)" % (
                     m["bridge_exec"], pct(res["bridge_exec"], 99), m["host_true"], pct(res["host_true"], 99)),
                 "%.2fx / %.1fx" % (m["http_exec"] / m["bridge_exec"], m["http_exec"] / m["host_true"])))
    ROWS.append(("4 KiB read round trip, HTTP full path, median (p99)",
                 "%.0f us (%.0f)" % (m["http_read"], pct(res["http_read"], 99)),
                 "bridge %.0f us (%.0f); host read %.1f us (%.1f)" % (
                     m["bridge_read"], pct(res["bridge_read"], 99), m["host_read"], pct(res["host_read"], 99)),
                 "%.2fx / %.0fx" % (m["http_read"] / m["bridge_read"], m["http_read"] / m["host_read"])))
    ROWS.append(("client + HTTP share: GET /healthz, median", "%.0f us" % m["healthz"], "-", "-"))
    ROWS.append(("4 KiB read at the bridge (issue 17: within 3x of a bare frame round trip)",
                 "%.0f us" % m["bridge_read"], "connect + HELLO %.0f us" % m["bridge_hello"],
                 "%.1fx" % (m["bridge_read"] / m["bridge_hello"])))
    ROWS.append(("HTTP read vs bridge read + bare HTTP (issue 17: within 1.2x)",
                 "%.0f us" % m["http_read"], "%.0f + %.0f = %.0f us" % (
                     m["bridge_read"], m["healthz"], m["bridge_read"] + m["healthz"]),
                 "%.2fx" % (m["http_read"] / (m["bridge_read"] + m["healthz"]))))
    ROWS.append(("CLI `space exec SBX -- true`, median", "%.1f ms" % (m["cli_exec"] / 1000),
                 "`space version` %.1f ms; host spawn `true` %.2f ms" % (
                     m["cli_version"] / 1000, m["spawn_true"] / 1000),
                 "%.1fx / %.0fx" % (m["cli_exec"] / m["cli_version"], m["cli_exec"] / m["spawn_true"])))
    return rt


def bridge_alone(plat, i):
    """The jail substrate without the control plane and sbx-manager:
    spaced-host started by hand on a fresh layer (mkfs, cgroup, loop mount,
    namespaces, guest challenge) until "ready", then one exec `true` over its
    socket. Returns microseconds to the end of that exec; the stop is not
    counted (nor is it for `space create`)."""
    d = os.path.join(plat.t, "alone", str(i))
    run, layer = os.path.join(d, "run"), os.path.join(d, "layer")
    os.makedirs(layer)
    os.mkdir(run, 0o700)
    sbx = "sbx_benchalone%04d" % i
    # a uid range of its own, far from sbx-manager's windows (200000 + ...)
    # and from the integration tests' (1000000 + ...)
    ub = 3000000000 + ((os.getpid() + i) % 1000) * 65536
    t0 = now_us()
    p = subprocess.Popen([os.path.join(plat.bin, "spaced-host"), "--sandbox", sbx, "--generation", "1",
                          "--activation", "1", "--worker", "wb", "--resident", "rb", "--substrate", "jail",
                          "--template", "host", "--run-dir", run, "--layer-dir", layer,
                          "--uid-base", str(ub)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=open(os.path.join(d, "log"), "w"))
    try:
        line = p.stdout.readline()
        if not line.startswith(b"ready "):
            with open(os.path.join(d, "log")) as f:
                raise RuntimeError("spaced-host alone: no ready line: " + f.read()[-500:])
        claims = spc.make_claims(sbx, 1, "wb", "rb", 1, "jail", ["exec"])
        doc, _ = bridge_call(os.path.join(run, "bridge.sock"), sbx, claims, "exec", {"argv": ["true"]})
        t1 = now_us()
        if doc["result"]["exit_code"] != 0:
            raise RuntimeError("spaced-host alone: exec: %s" % doc)
        return t1 - t0
    finally:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
        p.stdout.close()
        shutil.rmtree(d, ignore_errors=True)


def api_create_exec(plat, ctl, body="{}", one=False):
    """create + first exec over the HTTP APIs. one=False: four requests, the
    state waited for as a GET (?until=running&wait=S: space-control answers
    once it runs), then POST routes; one=True: the create itself waits and
    brings the route ({"wait": S, "access": ["exec"]}, what the CLI and the
    E2B front send). Returns (to running, to exec done) in us."""
    auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"], "Content-Type": "application/json"}
    if one:
        o = json.loads(body)
        o.update({"wait": 30, "access": ["exec"]})
        body = json.dumps(o)
    t0 = now_us()
    st, data, _ = ctl.req("POST", "/v1/sandboxes", body, auth)
    if st != 201:
        raise RuntimeError("POST /v1/sandboxes: %d %s" % (st, data[:200]))
    o = json.loads(data)
    sbx = o["id"]
    try:
        end = time.time() + 60
        while not one or "route" not in o:
            st, data, _ = ctl.req("GET", "/v1/sandboxes/%s?until=running&wait=30" % sbx, None, auth)
            o = json.loads(data) if st == 200 else {}
            state = o.get("state")
            if state == "running" and (o.get("execution") or {}).get("state") == "serving":
                break
            if state not in ("creating", "running") or time.time() > end:
                raise RuntimeError("sandbox %s: %d %s" % (sbx, st, data[:200]))
        t1 = now_us()
        if "route" in o:
            r = o["route"]
        else:
            if one:
                raise RuntimeError("sandbox %s: running without a route after a create that waited" % sbx)
            st, data, _ = ctl.req("POST", "/v1/sandboxes/%s/routes" % sbx, '{"access":["exec"]}', auth)
            if st != 200 and st != 201:
                raise RuntimeError("route: %d %s" % (st, data[:200]))
            r = json.loads(data)
        na = Http(r["endpoint"].split("://", 1)[1].rstrip("/"))
        st, data, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}',
                             {"Authorization": "Bearer " + r["capability"],
                              "Content-Type": "application/json"})
        t2 = now_us()
        if na.c:
            na.c.close()
        if st != 200 or json.loads(data)["exit_code"] != 0:
            raise RuntimeError("first exec: %d %s" % (st, data[:200]))
        return t1 - t0, t2 - t0
    finally:
        ctl.req("DELETE", "/v1/sandboxes/" + sbx, None, auth)


def mkfs_alone(plat, i):
    """The layer image alone: a sparse 1 GiB file and the same mkfs.ext4 the
    bridge runs on a fresh layer (part of spaced-host's start)."""
    img = os.path.join(plat.t, "mkfs%d.img" % i)
    t0 = now_us()
    with open(img, "wb") as f:
        f.truncate(1 << 30)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-E", "root_owner=3000000000:3000000000", "-m", "0", img],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, check=True)
    t1 = now_us()
    os.unlink(img)
    return t1 - t0


# the pause after a measured create's kill, before the next measurement
SETTLE_S = 0.5


def bench_create(plat, runs):
    bw = shutil.which("bwrap")
    plat_t, create_t, exec_t, bw_t, alone_t = [], [], [], [], []
    order = []
    for i in range(runs):
        order += [("space", i), ("api", i), ("api1", i), ("alone", i), ("mkfs", i), ("bwrap", i)]
    mkfs_t = []
    ctl = Http("127.0.0.1:%d" % plat.port)
    api_run, api_t, api1_run, api1_t = [], [], [], []
    # alternate the two, so that both see the same machine state
    for what, i in order:
        if what == "space":
            t0 = now_us()
            sbx = plat.space("create").strip()
            t1 = now_us()
            plat.space("exec", sbx, "--", "true")
            t2 = now_us()
            plat_t.append(t2 - t0)
            create_t.append(t1 - t0)
            exec_t.append(t2 - t1)
            plat.space("kill", sbx)
            # the killed sandbox's teardown (and a pool's refill) runs after
            # kill returns: the next measured start does not share the
            # cores with it (bwrap's teardown is inside its own timing)
            time.sleep(SETTLE_S)
        elif what == "api":
            a, b = api_create_exec(plat, ctl)
            api_run.append(a)
            api_t.append(b)
            time.sleep(SETTLE_S)
        elif what == "api1":
            a, b = api_create_exec(plat, ctl, one=True)
            api1_run.append(a)
            api1_t.append(b)
            time.sleep(SETTLE_S)
        elif what == "mkfs":
            mkfs_t.append(mkfs_alone(plat, i))
        elif what == "alone":
            alone_t.append(bridge_alone(plat, i))
        elif bw:
            t0 = now_us()
            r = subprocess.run([bw] + BWRAP_ARGS + ["true"], stdin=subprocess.DEVNULL)
            t1 = now_us()
            if r.returncode != 0:
                raise RuntimeError("bwrap true: exit %d" % r.returncode)
            bw_t.append(t1 - t0)
    log("")
    log("== create to first exec (milliseconds, %d runs each, alternated; %.1f s after each"
        " sandbox's kill before the next run)" % (runs, SETTLE_S))
    log("%-62s %9s %9s %9s" % ("what", "median", "p90", "max"))
    def row(label, xs):
        log("%-62s %9.1f %9.1f %9.1f" % (label, pct(xs, 50) / 1000, pct(xs, 90) / 1000, max(xs) / 1000))
    row("space create + space exec -- true (two CLI processes)", plat_t)
    row("  of which space create (until running)", create_t)
    row("  of which the first space exec -- true", exec_t)
    row("API: POST sandboxes {wait, access} (route in the answer), POST exec `true`", api1_t)
    row("  of which the create (until running, with its route)", api1_run)
    row("API: POST sandboxes, GET ?until=running, route, POST exec `true`", api_t)
    row("  of which until the state is running", api_run)
    row("spaced-host alone: fresh layer to ready + exec `true` (socket)", alone_t)
    row("  of that: mkfs.ext4 of the 1 GiB sparse layer image, alone", mkfs_t)
    if bw_t:
        row("bwrap --unshare-all ... true", bw_t)
        ROWS.append(("create to first exec (API, a create that waits and brings its route), median",
                     "%.1f ms" % (pct(api1_t, 50) / 1000),
                     "bwrap %.1f ms; spaced-host alone %.0f ms" % (pct(bw_t, 50) / 1000, pct(alone_t, 50) / 1000),
                     "%.2fx / %.2fx" % (pct(api1_t, 50) / pct(bw_t, 50), pct(api1_t, 50) / pct(alone_t, 50))))
        ROWS.append(("create to first exec (API, a create that waits and brings its route), p99 of %d"
                     " (issue 17: within 3x of bwrap's median)" % len(api1_t),
                     "%.1f ms" % (pct(api1_t, 99) / 1000), "bwrap median %.1f ms" % (pct(bw_t, 50) / 1000),
                     "%.2fx" % (pct(api1_t, 99) / pct(bw_t, 50))))
        ROWS.append(("create to first exec (API, four requests: POST, GET ?until=running, POST routes, exec),"
                     " median (p99)", "%.1f ms (%.1f)" % (pct(api_t, 50) / 1000, pct(api_t, 99) / 1000),
                     "bwrap %.1f ms" % (pct(bw_t, 50) / 1000),
                     "%.2fx (%.2fx)" % (pct(api_t, 50) / pct(bw_t, 50), pct(api_t, 99) / pct(bw_t, 50))))
        ROWS.append(("create to first exec (CLI), median", "%.0f ms" % (pct(plat_t, 50) / 1000),
                     "bwrap %.1f ms" % (pct(bw_t, 50) / 1000), "%.1fx" % (pct(plat_t, 50) / pct(bw_t, 50))))
    else:
        log("bwrap: not installed (Debian package bubblewrap), no baseline")
        ROWS.append(("create to first exec, median", "%.0f ms" % (pct(plat_t, 50) / 1000), "no bwrap", "-"))


def daemon_mem(plat):
    out = {}
    for c in plat.children():
        cl = cmdline(c)
        for name in ("space-control", "sbx-manager", "node-api"):
            if os.path.basename(cl.split(" ", 1)[0]) == name:
                out[name] = mem_kb(c)
    out["space up (supervisor)"] = mem_kb(plat.up.pid)
    return out


def idle_sandboxes(plat, n, template=None, wait=120):
    """n sandboxes started (on template, else the host template) and
    running, each after one exec, as a used sandbox would have had, then
    idle 2 s. Returns their ids, (PSS, RSS, procs) of each one's bridge
    tree and the charges of their memory cgroups. The caller kills them;
    they are killed here when they do not all come up."""
    tpl = ["--template", template] if template else []
    sbxs = [plat.space("create", "--no-wait", *tpl).strip() for _ in range(n)]
    try:
        end = time.time() + wait
        while time.time() < end:
            lst = json.loads(plat.space("list", "--json"))
            states = {s["id"]: s["state"] for s in lst.get("sandboxes", lst if isinstance(lst, list) else [])}
            if all(states.get(s) == "running" for s in sbxs):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError("sandboxes not running after %d s" % wait)
        for s in sbxs:
            plat.space("exec", s, "--", "true")
        time.sleep(2)
        per, cg = [], []
        for b in plat.bridges(top=True):
            if any(s in cmdline(b) for s in sbxs):
                per.append(mem_tree(b))
                cg.append(cgroup_mem_kb(b))
        if len(per) != n:
            raise RuntimeError("found %d bridges for %d sandboxes" % (len(per), n))
        return sbxs, per, [c for c in cg if c is not None]
    except BaseException:
        for s in sbxs:
            plat.space("kill", s, check=False)
        raise


def bench_memory(plat, n):
    before = daemon_mem(plat)
    sbxs, per, cgv = idle_sandboxes(plat, n)
    # baselines: an idle bwrap sandbox (same namespaces) and a bare sleep
    bw = shutil.which("bwrap")
    base = []
    if bw:
        procs = [subprocess.Popen([bw] + BWRAP_ARGS + ["sleep", "600"], stdin=subprocess.DEVNULL)
                 for _ in range(n)]
        time.sleep(1)
        base = [mem_tree(p.pid) for p in procs]
        for p in procs:
            p.kill()
            p.wait()
    sl = [subprocess.Popen(["sleep", "600"]) for _ in range(n)]
    time.sleep(0.5)
    sleeps = [mem_tree(p.pid) for p in sl]
    for p in sl:
        p.kill()
        p.wait()
    daemons = daemon_mem(plat)

    def avg(xs, i, scale=1024.0):
        return sum(x[i] for x in xs) / len(xs) / scale
    log("")
    log("== idle memory per sandbox (MiB, %d sandboxes idle, each after one exec; PSS and RSS summed over the tree)" % n)
    log("%-62s %9s %9s %9s" % ("what", "PSS", "RSS", "procs"))
    log("%-62s %9.2f %9.2f %9.1f" % ("space sandbox: spaced-host + spaced-guest + children", avg(per, 0), avg(per, 1), avg(per, 2, 1)))
    if base:
        log("%-62s %9.2f %9.2f %9.1f" % ("bwrap --unshare-all ... sleep", avg(base, 0), avg(base, 1), avg(base, 2, 1)))
    log("%-62s %9.2f %9.2f %9.1f" % ("bare sleep", avg(sleeps, 0), avg(sleeps, 1), avg(sleeps, 2, 1)))
    if cgv:
        log("space sandbox: its memory cgroup's charge (kernel memory and page cache"
            " included), mean %.2f MiB, max %.2f" % (sum(cgv) / len(cgv) / 1024.0, max(cgv) / 1024.0))
    log("per daemon (one worker), PSS and RSS with 1 sandbox, then with %d:" % (n + 1))
    for k, (pss, rss) in sorted(daemons.items()):
        b = before.get(k, (0, 0))
        log("  %-60s %9.2f %9.2f -> %6.2f %6.2f" % (k, b[0] / 1024.0, b[1] / 1024.0, pss / 1024.0, rss / 1024.0))
    ROWS.append(("idle memory per sandbox, PSS (RSS)", "%.2f MiB (%.2f)" % (avg(per, 0), avg(per, 1)),
                 ("bwrap+sleep %.2f MiB (%.2f)" % (avg(base, 0), avg(base, 1))) if base else
                 ("sleep %.2f MiB" % avg(sleeps, 0)),
                 "%.1fx" % (avg(per, 0) / (avg(base, 0) if base else avg(sleeps, 0)))))
    ROWS.append(("daemons PSS: space-control / sbx-manager / node-api",
                 " / ".join("%.1f" % (daemons.get(k, (0, 0))[0] / 1024.0)
                            for k in ("space-control", "sbx-manager", "node-api")) + " MiB", "-", "-"))
    for s in sbxs:
        plat.space("kill", s, check=False)


def bench_bigfile(plat, sbx, rt, mib, runs, framecat):
    size = mib << 20
    rt.get()
    r = rt.route
    sock = bridge_sock(plat, r)
    claims = spc.make_claims(r["sandbox"], r["generation"], r["worker"], r["resident"],
                             r["activation"], r["substrate"], ["exec", "fs:r"], exp_in=600)
    doc, _ = bridge_call(sock, sbx, claims, "exec", {
        "argv": ["sh", "-c", "head -c %d /dev/zero | tr '\\0' x > /home/user/big" % size],
        "timeout": 300})
    assert doc["result"]["exit_code"] == 0, doc
    hostf = layer_path(plat, r, "/home/user/big")
    assert os.path.getsize(hostf) == size
    ep = rt.endpoint.rstrip("/")
    url = "%s/v1/sandboxes/%s/files?path=/home/user/big" % (ep, sbx)

    def curl():
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                              "-H", "Authorization: Bearer " + rt.get(), url],
                             stdout=subprocess.PIPE, check=True).stdout.decode().split()
        if out != ["200", str(size)]:
            raise RuntimeError("curl: %s" % out)
    httpget = os.path.join(os.path.dirname(framecat or ""), "bench_httpget")
    def lean():
        u = urllib.parse.urlsplit(url)
        out = subprocess.run([httpget, u.hostname, str(u.port), "%s?%s" % (u.path, u.query),
                              "Bearer " + rt.get()], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != str(size):
            raise RuntimeError("bench_httpget: %s bytes" % out)
    # node-api's local socket (`space up` maps each endpoint to one in
    # SPACE_ENDPOINT_SOCKETS, which the CLI takes); the CLI over TCP beside it
    usock = endpoint_socket(plat.env, ep)
    def lean_unix():
        u = urllib.parse.urlsplit(url)
        out = subprocess.run([httpget, usock, "-", "%s?%s" % (u.path, u.query),
                              "Bearer " + rt.get()], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != str(size):
            raise RuntimeError("bench_httpget through %s: %s bytes" % (usock, out))
    tcp_env = env_over_tcp(plat.env)
    def cli(env=plat.env):
        with open(os.devnull, "wb") as nul:
            subprocess.run([os.path.join(plat.bin, "space"), "fs", "read", sbx, "/home/user/big"],
                           env=env, stdout=nul, check=True)
    def bridge():
        if bridge_read_null(sock, sbx, claims, "/home/user/big") != size:
            raise RuntimeError("bridge: short read")
    def bridge_c():
        out = subprocess.run([framecat, sock, sbx, claims, "/home/user/big"],
                             stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != str(size):
            raise RuntimeError("bench_framecat: %s bytes" % out)
    def cat():
        with open(os.devnull, "wb") as nul:
            subprocess.run(["cat", hostf], stdout=nul, check=True)
    cpu_full, cpu_lean, cpu_ceil, cpu_ceil_lean, cpu_raw, cpu_cat = {}, {}, {}, {}, {}, {}
    cpu_unix = {}
    fns = {"curl": metered(curl, cpu_full, plat), "cli": cli, "bridge": bridge,
           "cat": metered(cat, cpu_cat, plat)}
    if usock:
        fns["cli_tcp"] = lambda: cli(tcp_env)
    if framecat and os.access(framecat, os.X_OK):
        fns["bridge_c"] = bridge_c
    if os.access(httpget, os.X_OK):
        fns["lean"] = metered(lean, cpu_lean, plat)
        if usock:
            fns["lean_unix"] = metered(lean_unix, cpu_unix, plat)
    ceil = Ceiling(os.path.join(os.path.dirname(framecat or ""), "bench_sendfile"), hostf,
                   layer_path(plat, r, "/home/user/ceildst"), httpget)
    if ceil.start():
        fns["ceil"] = metered(ceil.get, cpu_ceil, plat, [ceil.p.pid])
        if os.access(httpget, os.X_OK):
            fns["ceil_lean"] = metered(ceil.get_lean, cpu_ceil_lean, plat, [ceil.p.pid])
            fns["raw"] = metered(lambda: ceil.get_lean(raw=True), cpu_raw, plat, [ceil.p.pid])
    cat()               # page cache warm: every variant reads cached pages
    try:
        res = interleave(runs, fns)
    except BaseException:
        ceil.stop()
        raise
    mbs = {k: [size / 1e6 / (t / 1e6) for t in v] for k, v in res.items()}
    log("")
    log("== large file read: %d MiB, page cache warm, %d interleaved runs (MB/s, 1 MB = 10^6 bytes)" % (mib, runs))
    log("%-62s %9s %9s %9s" % ("path", "median", "min", "max"))
    for label, k in (("curl GET files -> /dev/null (full path)", "curl"),
                     ("GET files, C client with a 1 MiB buffer (full path, bench_httpget)", "lean"),
                     ("the same C client through node-api's local socket", "lean_unix"),
                     ("space fs read > /dev/null (CLI, with its route request)" +
                      (", local socket" if usock else ""), "cli"),
                     ("space fs read > /dev/null, over TCP", "cli_tcp"),
                     ("fs.read straight to the bridge socket (python client)", "bridge"),
                     ("fs.read straight to the bridge socket (C, bench_framecat)", "bridge_c"),
                     ("curl GET from a bare sendfile server (bench_sendfile)", "ceil"),
                     ("C client GET from the bare sendfile server", "ceil_lean"),
                     ("C client GET from a raw socket, file in memory (TCP's own)", "raw"),
                     ("cat of the layer file on the host > /dev/null", "cat")):
        if k in mbs:
            log("%-62s %9.0f %9.0f %9.0f" % (label, pct(mbs[k], 50), min(mbs[k]), max(mbs[k])))
    m = {k: pct(v, 50) for k, v in mbs.items()}
    br = m.get("bridge_c", m["bridge"])
    log("ratios of medians: full path (curl) / cat %.2f, bridge / cat %.2f, full / bridge %.2f" % (
        m["curl"] / m["cat"], br / m["cat"], m["curl"] / br))
    if "ceil" in m:
        log("ceiling (curl from a bare sendfile server) / cat %.2f, full path / ceiling %.2f" % (
            m["ceil"] / m["cat"], m["curl"] / m["ceil"]))
        ROWS.append(("%d MiB read, bare sendfile server, median" % mib, "curl %.0f MB/s" % m["curl"],
                     "curl from bench_sendfile %.0f MB/s" % m["ceil"],
                     "%.2fx of the bare server" % (m["curl"] / m["ceil"])))
    if "lean" in m:
        log("full path with the C client / cat %.2f" % (m["lean"] / m["cat"]))
    if "lean_unix" in m:
        log("full path with the C client through the local socket / cat %.2f" % (m["lean_unix"] / m["cat"]))
    if "cli_tcp" in m:
        log("space fs read: local socket / cat %.2f, over TCP / cat %.2f" % (
            m["cli"] / m["cat"], m["cli_tcp"] / m["cat"]))
    if "ceil_lean" in m:
        log("C client from the bare sendfile server / cat %.2f" % (m["ceil_lean"] / m["cat"]))
    if "raw" in m:
        log("C client from a raw socket sending from memory / cat %.2f (loopback TCP's ceiling)"
            % (m["raw"] / m["cat"]))
        if "lean" in m:
            log("full path with the C client / raw socket %.2f" % (m["lean"] / m["raw"]))
    log_cpu("large file read", [("full path (curl GET files)", cpu_full),
                                ("full path (C client GET files)", cpu_lean),
                                ("full path (C client GET files, local socket)", cpu_unix),
                                ("bare sendfile server (curl GET)", cpu_ceil),
                                ("bare sendfile server (C client GET)", cpu_ceil_lean),
                                ("raw socket from memory (C client GET)", cpu_raw),
                                ("cat > /dev/null", cpu_cat)], size * runs)
    if "lean" in m:
        ROWS.append(("%d MiB read, C client (1 MiB buffer), median" % mib, "%.0f MB/s" % m["lean"],
                     "cat %.0f MB/s" % m["cat"] + ("; raw TCP socket %.0f MB/s" % m["raw"] if "raw" in m else ""),
                     "%.2fx of cat" % (m["lean"] / m["cat"]) +
                     (" / %.2fx of raw TCP" % (m["lean"] / m["raw"]) if "raw" in m else "")))
    if "lean_unix" in m:
        ROWS.append(("%d MiB read, C client through the local socket, median" % mib,
                     "%.0f MB/s" % m["lean_unix"], "cat %.0f MB/s" % m["cat"],
                     "%.2fx of cat" % (m["lean_unix"] / m["cat"])))
    if "cli_tcp" in m:
        ROWS.append(("%d MiB read, space fs read, median" % mib, "local socket %.0f MB/s" % m["cli"],
                     "TCP %.0f MB/s; cat %.0f MB/s" % (m["cli_tcp"], m["cat"]),
                     "%.2fx / %.2fx of cat" % (m["cli"] / m["cat"], m["cli_tcp"] / m["cat"])))
    ROWS.append(("%d MiB read throughput, median" % mib, "curl %.0f MB/s" % m["curl"],
                 "cat %.0f MB/s; bridge socket %.0f MB/s" % (m["cat"], br),
                 "%.2fx of cat / %.2fx of bridge" % (m["curl"] / m["cat"], m["curl"] / br)))
    try:
        bench_bigwrite(plat, sbx, sock, claims, hostf, size, mib, runs, ceil)
    finally:
        ceil.stop()
    bridge_call(sock, sbx, claims, "exec", {"argv": ["rm", "-f", "/home/user/big"]})


def env_over_tcp(env):
    """env without the mapping of endpoints to local sockets: the CLI over TCP"""
    env = dict(env)
    env.pop("SPACE_ENDPOINT_SOCKETS", None)
    return env


def endpoint_socket(env, endpoint):
    """the local socket SPACE_ENDPOINT_SOCKETS maps endpoint to, or None"""
    for item in env.get("SPACE_ENDPOINT_SOCKETS", "").split(","):
        ep, _, path = item.partition("=")
        if ep.rstrip("/") == endpoint.rstrip("/") and path:
            return path
    return None


class Ceiling:
    """bench/bench_sendfile: the large file over HTTP (libmicrohttpd, as in
    node-api) with no hop behind it; GET sends src with sendfile, PUT writes
    dst and fsyncs before answering."""
    def __init__(self, binary, src, dst, httpget=None):
        self.bin, self.src, self.dst, self.p, self.httpget = binary, src, dst, None, httpget

    def start(self):
        if not os.access(self.bin, os.X_OK):
            log("bench: bigfile: no %s (make bench builds it): no ceiling line" % self.bin)
            return False
        self.port = control_bench.free_port()
        self.p = subprocess.Popen([self.bin, str(self.port), self.src, self.dst],
                                  stdout=subprocess.PIPE)
        line = self.p.stdout.readline().split()
        if len(line) != 2 or line[0] != b"ready":
            self.stop()
            return False
        self.raw_port = int(line[1])
        return True

    def url(self):
        return "http://127.0.0.1:%d/f" % self.port

    def get(self):
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                              self.url()], stdout=subprocess.PIPE, check=True).stdout.decode().split()
        if out[0] != "200":
            raise RuntimeError("bench_sendfile GET: %s" % out)

    def get_lean(self, raw=False):
        out = subprocess.run([self.httpget, "127.0.0.1", str(self.raw_port if raw else self.port), "/f"],
                             stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != str(os.path.getsize(self.src)):
            raise RuntimeError("bench_httpget from bench_sendfile: %s bytes" % out)

    def put(self):
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", self.src,
                              self.url()], stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != "200":
            raise RuntimeError("bench_sendfile PUT: %s" % out)

    def stop(self):
        if self.p:
            self.p.kill()
            self.p.wait()
            self.p = None
        try:
            os.unlink(self.dst)
        except OSError:
            pass


def bench_bigwrite(plat, sbx, sock, claims, src, size, mib, runs, ceil=None):
    """The same file uploaded (curl PUT, the full path) beside `cat SRC >
    FILE` on the host into the same layer directory, and beside that cat
    followed by an fsync of FILE (fs.write acknowledges only once the
    bytes and the name are on disk). The source is the host's copy of
    the read's file, page cache warm."""
    wt = Route(plat, sbx, access="exec,fs:r,fs:w")
    wt.get()
    ep = wt.endpoint.rstrip("/")
    url = "%s/v1/sandboxes/%s/files?path=/home/user/up" % (ep, sbx)
    dst = layer_path(plat, wt.route, "/home/user/catdst")

    def curl():
        out = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-T", src,
                              "-H", "Authorization: Bearer " + wt.get(), url],
                             stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        if out != "200":
            raise RuntimeError("curl PUT: %s" % out)
    usock = endpoint_socket(plat.env, ep)
    tcp_env = env_over_tcp(plat.env)
    def cli(env=plat.env):
        with open(src, "rb") as f:
            subprocess.run([os.path.join(plat.bin, "space"), "fs", "write", sbx, "/home/user/upcli"],
                           env=env, stdin=f, stdout=subprocess.DEVNULL, check=True)
    def cat():
        with open(dst, "wb") as f:
            subprocess.run(["cat", src], stdout=f, check=True)
    def cat_fsync():
        with open(dst, "wb") as f:
            subprocess.run(["cat", src], stdout=f, check=True)
            os.fsync(f.fileno())
    # the sandbox's own write ending in fsync (a build, a package
    # install), beside the same dd on the host into the same file system
    dd = "dd if=/dev/zero of=%%s bs=1M count=%d conv=fsync" % mib

    def sbx_dd():
        doc, _ = bridge_call(sock, sbx, claims, "exec", {
            "argv": ["sh", "-c", (dd % "/home/user/dd") + " 2>/dev/null"], "timeout": 300})
        if doc["result"]["exit_code"] != 0:
            raise RuntimeError("dd in the sandbox: %s" % doc)
    def host_dd():
        subprocess.run((dd % dst).split(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
    cpu_full, cpu_ceil, cpu_cat = {}, {}, {}
    cpu_cli = {}
    fns = {"curl": metered(curl, cpu_full, plat), "cli": metered(cli, cpu_cli, plat), "cat": cat,
           "cat_fsync": metered(cat_fsync, cpu_cat, plat), "sbx_dd": sbx_dd, "host_dd": host_dd}
    if usock:
        fns["cli_tcp"] = lambda: cli(tcp_env)
    if ceil and ceil.p:
        fns["ceil"] = metered(ceil.put, cpu_ceil, plat, [ceil.p.pid])
    res = interleave(runs, fns)
    if os.path.getsize(layer_path(plat, wt.route, "/home/user/up")) != size or \
            os.path.getsize(layer_path(plat, wt.route, "/home/user/upcli")) != size:
        raise RuntimeError("upload: wrong size")
    mbs = {k: [size / 1e6 / (t / 1e6) for t in v] for k, v in res.items()}
    log("")
    log("== large file write: %d MiB, source in the page cache, %d interleaved runs (MB/s)" % (mib, runs))
    log("%-62s %9s %9s %9s" % ("path", "median", "min", "max"))
    for label, k in (("curl PUT files (full path, fsync before the answer)", "curl"),
                     ("space fs write < SRC (CLI, with its route request)" +
                      (", local socket" if usock else ""), "cli"),
                     ("space fs write < SRC, over TCP", "cli_tcp"),
                     ("curl PUT to a bare server, write + fsync (bench_sendfile)", "ceil"),
                     ("cat SRC > FILE in the layer directory on the host", "cat"),
                     ("cat SRC > FILE, then fsync(FILE)", "cat_fsync"),
                     ("in the sandbox: dd bs=1M conv=fsync (exec, bridge socket)", "sbx_dd"),
                     ("on the host: the same dd into the layer directory", "host_dd")):
        if k in mbs:
            log("%-62s %9.0f %9.0f %9.0f" % (label, pct(mbs[k], 50), min(mbs[k]), max(mbs[k])))
    m = {k: pct(v, 50) for k, v in mbs.items()}
    log("ratios of medians: upload / cat %.2f, upload / (cat + fsync) %.2f" % (
        m["curl"] / m["cat"], m["curl"] / m["cat_fsync"]))
    if "ceil" in m:
        log("ceiling (curl PUT to a bare server) / cat %.2f, upload / ceiling %.2f" % (
            m["ceil"] / m["cat"], m["curl"] / m["ceil"]))
    log("dd conv=fsync in the sandbox / on the host %.2f" % (m["sbx_dd"] / m["host_dd"]))
    if "cli_tcp" in m:
        log("space fs write: local socket / (cat + fsync) %.2f, over TCP / (cat + fsync) %.2f" % (
            m["cli"] / m["cat_fsync"], m["cli_tcp"] / m["cat_fsync"]))
    log_cpu("large file write", [("full path (curl PUT files)", cpu_full),
                                 ("space fs write (CLI%s)" % (", local socket" if usock else ""), cpu_cli),
                                 ("bare server (curl PUT, write + fsync)", cpu_ceil),
                                 ("cat SRC > FILE + fsync", cpu_cat)], size * runs)
    ROWS.append(("%d MiB write throughput, median" % mib, "curl PUT %.0f MB/s" % m["curl"],
                 "cat > file %.0f MB/s; with fsync %.0f MB/s" % (m["cat"], m["cat_fsync"]),
                 "%.2fx of cat / %.2fx of cat+fsync" % (m["curl"] / m["cat"], m["curl"] / m["cat_fsync"])))
    if "cli_tcp" in m:
        ROWS.append(("%d MiB write, space fs write, median" % mib, "local socket %.0f MB/s" % m["cli"],
                     "TCP %.0f MB/s; cat + fsync %.0f MB/s" % (m["cli_tcp"], m["cat_fsync"]),
                     "%.2fx / %.2fx of cat+fsync" % (m["cli"] / m["cat_fsync"], m["cli_tcp"] / m["cat_fsync"])))
    ROWS.append(("%d MiB dd conv=fsync in the sandbox, median" % mib, "%.0f MB/s" % m["sbx_dd"],
                 "the same dd on the host into the layer directory %.0f MB/s" % m["host_dd"],
                 "%.2fx" % (m["sbx_dd"] / m["host_dd"])))
    os.unlink(dst)
    bridge_call(sock, sbx, claims, "exec", {"argv": ["rm", "-f", "/home/user/up", "/home/user/upcli",
                                                     "/home/user/dd"]})


def admit_rows(path):
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return
    med = {}
    for ln in lines:
        for key in ("raw crypto_sign_verify_detached (300 B)", "cold: verifier_check", "warm: admit_token"):
            if ln.startswith(key):
                try:
                    med[key] = (float(ln.split()[-3]), float(ln.split()[-1]))
                except (ValueError, IndexError):
                    pass
    raw = med.get("raw crypto_sign_verify_detached (300 B)")
    if not raw:
        return
    for key, label in (("cold: verifier_check", "admission cold (empty cache), median (p99)"),
                       ("warm: admit_token", "admission warm (cached token), median (p99)")):
        if key in med:
            ROWS.append((label, "%.2f us (%.2f)" % med[key],
                         "Ed25519 verify %.2f us (%.2f)" % raw, "%.3fx" % (med[key][0] / raw[0])))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(TOP, "build", "bin"))
    ap.add_argument("--admit", help="bench_admit's output, for the final table")
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--create-runs", type=int, default=100,
                    help="creates to first exec, each way (p99 is the 99th of 100: fewer make it the largest;"
                    " the timeline part takes at most 20)")
    ap.add_argument("--jail-pool", type=int, default=-1,
                    help="prepared jails the worker keeps (space up --jail-pool; 0: none;"
                    " default: space up's own, 2)")
    ap.add_argument("--idle", type=int, default=10)
    ap.add_argument("--big-mib", type=int, default=512)
    ap.add_argument("--big-runs", type=int, default=5)
    ap.add_argument("--stream-iters", type=int, default=300, help="rounds of the stream latency")
    ap.add_argument("--stream-mib", type=int, default=128, help="MiB of stdout for the stream throughput")
    ap.add_argument("--stream-runs", type=int, default=3)
    ap.add_argument("--streams", type=int, default=1000, help="idle streams to open")
    ap.add_argument("--concurrent", type=int, default=100, help="sandboxes created at once")
    ap.add_argument("--template-runs", type=int, default=10, help="create runs per template")
    ap.add_argument("--template-uncached", action="store_true",
                    help="also build the test template from nothing (minutes; fetches packages)")
    ap.add_argument("--no-templates", action="store_true", help="leave the template measures out")
    ap.add_argument("--net-rounds", type=int, default=5, help="interleaved rounds of the network paths")
    ap.add_argument("--net-reqs", type=int, default=300, help="requests of a latency run (one connection)")
    ap.add_argument("--net-tput", type=int, default=3000, help="requests of a throughput run")
    ap.add_argument("--net-conns", type=int, default=8, help="connections of a throughput run")
    ap.add_argument("--tcp-mib", type=int, default=256, help="MiB through one raw TCP connection")
    ap.add_argument("--moves", type=int, default=5, help="moves timed to the edge URL serving again")
    ap.add_argument("--move-mib", type=int, default=1024, help="MiB in the layer of a moved sandbox")
    ap.add_argument("--move-runs", type=int, default=3, help="moves of the last sandbox of each kind of data (median)")
    ap.add_argument("--move-firsts", type=int, default=3, help="sandboxes of each kind of data moved once (first moves, median)")
    ap.add_argument("--ctl-creates", type=int, default=200, help="creates per store set-up")
    ap.add_argument("--ctl-routes", type=int, default=600, help="capability issues per store set-up")
    ap.add_argument("--ctl-clients", type=int, default=8, help="client threads of the store set-ups")
    ap.add_argument("--density", type=int, default=1000,
                    help="idle sandboxes on one worker (the density part, at most 1022)")
    ap.add_argument("--density-steps", default="1,100,500",
                    help="levels measured on the way to --density")
    ap.add_argument("--density-rounds", type=int, default=200, help="latency rounds per level")
    ap.add_argument("--density-creates", type=int, default=31,
                    help="creates timed per level (at 1000 their times spread from 0.9x to 2x of the median:"
                    " 15 left the median moving by a tenth between runs)")
    ap.add_argument("--only", default="", help="comma-separated parts to run: roundtrips,bigfile,"
                    "create,timeline,concurrent,memory,templates,streams,idlestreams,network,concurrentpool,stores,move,movecheckpoint,"
                    "density (default all)")
    ap.add_argument("--quick", action="store_true", help="few iterations (a smoke run)")
    ap.add_argument("--summary-md", help="also write the final table there, as Markdown")
    a = ap.parse_args()
    if a.quick:
        a.iters, a.create_runs, a.idle, a.big_mib, a.big_runs = 20, 3, 3, 64, 1
        a.stream_iters, a.stream_mib, a.stream_runs, a.streams = 20, 32, 1, 100
        a.template_runs = 3
        a.concurrent = 10
        a.density, a.density_steps, a.density_rounds, a.density_creates = 20, "1,10", 20, 2
        a.net_rounds, a.net_reqs, a.net_tput, a.tcp_mib, a.moves = 1, 50, 400, 32, 1
        a.ctl_creates, a.ctl_routes = 40, 120
        a.move_mib, a.move_runs, a.move_firsts = 64, 1, 1
    parts = set(a.only.split(",")) if a.only else None
    def want(part):
        return parts is None or part in parts
    if os.geteuid() != 0:
        log("bench: platform: needs root (namespaces, cgroups); skipped")
        return 1
    if a.admit:
        admit_rows(a.admit)
    need = ("space", "space-control", "sbx-manager", "node-api", "spaced-host", "spaced-guest")
    missing = [n for n in need if not os.access(os.path.join(a.bin, n), os.X_OK)]
    if missing:
        log("bench: platform: %s: missing %s (build first: make all)" % (a.bin, ", ".join(missing)))
        return 1
    # room for the concurrent creates beside the sandbox kept for the rest
    # no checkpoints (--checkpoint-mb 0): the 512 MiB file of the bulk
    # part would be checkpointed in the middle of its runs; what a
    # checkpoint costs and gives is the movecheckpoint part's
    plat = Platform(a.bin, max(16, a.concurrent + 2), jail_pool=a.jail_pool, checkpoint_mb=0)
    def on_signal(sig, _frm):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    rc = 0
    t0 = time.time()
    load0 = os.getloadavg()
    spent = []          # (part, seconds): where the run's time went
    last = [t0]

    def done(part):
        spent.append((part, time.time() - last[0]))
        last[0] = time.time()
    main_parts = ("roundtrips", "bigfile", "create", "timeline", "concurrent", "memory", "templates",
                  "streams", "idlestreams")
    try:
        if not any(want(x) for x in main_parts):
            raise StopIteration
        plat.start()
        log("platform: space up, one worker, ports %d-%d, data in %s" % (plat.port, plat.port + 1, plat.data))
        sbx = plat.space("create").strip()
        plat.space("exec", sbx, "--", "true")
        rt = Route(plat, sbx)
        done("start")
        if want("roundtrips"):
            rt = bench_roundtrips(plat, sbx, a.iters)
            done("roundtrips")
        if want("bigfile"):
            bench_bigfile(plat, sbx, rt, a.big_mib, a.big_runs,
                          os.path.join(os.path.dirname(os.path.abspath(a.bin)), "bench", "bench_framecat"))
            done("bigfile")
        if want("create"):
            settle("create")
            bench_create(plat, a.create_runs)
            done("create")
        if want("timeline"):
            settle("timeline")
            create_bench.bench_timeline(P, plat, min(20, a.create_runs))
            done("timeline")
        if want("concurrent"):
            settle("concurrent")
            create_bench.bench_concurrent(P, plat, a.concurrent)
            done("concurrent")
        if want("memory"):
            bench_memory(plat, a.idle)
            done("memory")
        if want("templates") and not a.no_templates:
            template_bench.bench_build(P, plat, 3 if not a.quick else 1, a.template_uncached)
            template_bench.bench_create(P, plat, a.template_runs)
            template_bench.bench_memory(P, plat, a.idle)
            done("templates")
        if (want("streams") or want("idlestreams")) and stream_bench.websockets is None:
            log("bench: streams: no python3-websockets (Debian's, for /usr/bin/python3): skipped")
        elif want("streams") or want("idlestreams"):
            if want("streams"):
                srt = Route(plat, sbx, "exec,fs:r,pty")
                stream_bench.bench_latency(P, plat, sbx, srt, a.stream_iters)
                stream_bench.bench_throughput(P, plat, sbx, srt, a.stream_mib, a.stream_runs)
                done("streams")
            if want("idlestreams"):
                per = 63
                stream_bench.bench_idle_streams(P, plat, a.streams, per,
                                                max(1, -(-a.streams // per)),
                                                probe=(sbx, Route(plat, sbx, "exec,fs:r,pty")),
                                                probe_iters=max(20, a.stream_iters // 2))
                done("idlestreams")
    except (RuntimeError, AssertionError, OSError, subprocess.SubprocessError, KeyError, ValueError) as e:
        log("bench: platform: %s: %s" % (type(e).__name__, e))
        try:
            with open(os.path.join(plat.t, "up.log")) as f:
                log("".join(f.readlines()[-15:]))
        except OSError:
            pass
        rc = 1
    except KeyboardInterrupt:
        log("bench: platform: interrupted")
        rc = 1
    except StopIteration:
        pass
    finally:
        plat.stop()
    # the parts with set-ups of their own (two workers; the stores)
    try:
        # the density part first: its ratios compare measures taken
        # minutes apart, which the parts below would start on a machine
        # still writing back their GiBs (moves) and PostgreSQL clusters
        # (stores)
        if want("density") and a.density > 0:
            density_bench.bench_density(P, a.bin, min(a.density, 1022),
                                        [int(x) for x in a.density_steps.split(",") if x.strip()],
                                        a.density_rounds, a.density_creates)
            done("density")
        if want("network"):
            net_bench.bench_network(P, a.bin, os.path.join(os.path.dirname(os.path.abspath(a.bin)), "bench",
                                                           "bench_netsvc"),
                                    a.net_rounds, a.net_reqs, a.net_tput, a.net_conns, a.tcp_mib, a.moves)
            done("network")
        if want("concurrentpool") and a.jail_pool < 0 and a.concurrent > 0:
            # the burst again, on a worker that keeps as many prepared
            # jails as the burst has creates (an operator's --jail-pool;
            # the platform above keeps space up's default)
            pp = Platform(a.bin, max(16, a.concurrent + 2), jail_pool=min(256, a.concurrent))
            try:
                pp.start()
                create_bench.bench_concurrent(P, pp, a.concurrent,
                                              ", --jail-pool %d" % min(256, a.concurrent))
            finally:
                pp.stop()
            done("concurrentpool")
        if want("move"):
            move_bench.bench_moves(P, a.bin, a.move_mib, a.move_runs, a.move_firsts)
            done("move")
        if want("movecheckpoint"):
            move_bench.bench_checkpoint_moves(P, a.bin, a.move_mib, a.move_firsts)
            done("movecheckpoint")
        if want("stores"):
            control_bench.bench_stores(P, a.bin, a.ctl_creates, a.ctl_routes, a.ctl_clients)
            done("stores")
    except (RuntimeError, AssertionError, OSError, subprocess.SubprocessError, KeyError, ValueError) as e:
        log("bench: platform: %s: %s" % (type(e).__name__, e))
        rc = 1
    except KeyboardInterrupt:
        log("bench: platform: interrupted")
        rc = 1
    log("")
    load1 = os.getloadavg()
    log("== summary (%s, %d CPUs, %.0f s; load average %.1f %.1f %.1f at the start, %.1f %.1f %.1f at the end)" % (
        os.uname().release, os.cpu_count(), time.time() - t0, load0[0], load0[1], load0[2],
        load1[0], load1[1], load1[2]))
    log("time per part: " + ", ".join("%s %.0f s" % x for x in spent))
    w = [max(len(r[i]) for r in ROWS + [("measure", "space", "baseline (same run)", "ratio")]) for i in range(4)]
    for r in [("measure", "space", "baseline (same run)", "ratio")] + ROWS:
        log("%-*s  %-*s  %-*s  %s" % (w[0], r[0], w[1], r[1], w[2], r[2], r[3]))
    if a.summary_md:
        with open(a.summary_md, "w") as f:
            f.write("Load average %.1f at the start, %.1f at the end (1 min), %d CPUs.\n\n" % (
                load0[0], load1[0], os.cpu_count()))
            f.write("| measure | space | baseline (same run) | ratio |\n|---|---|---|---|\n")
            for r in ROWS:
                f.write("| %s |\n" % " | ".join(r))
    return rc


if __name__ == "__main__":
    sys.exit(main())
