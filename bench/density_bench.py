"""Many idle sandboxes on one worker (issue 17, target 6), measured by
bench/platform.py on a platform of its own (`space up --workers 1
--capacity N`), with `--only density` (and in a full run):

  levels          sandboxes are created up to each level of --density-steps
                  (default 1,100,500,N), 20 at a time over the API, each
                  running and given one exec `true` (as a used sandbox
                  would have had), then left idle 2 s and until the CPUs
                  were 90 % idle over a second (at most 60 s) before the
                  level is measured
  memory          per sandbox: PSS and RSS summed over all its processes
                  (its bridge's tree: spaced-host, spaced-guest and any
                  child; and its netgtw gateway, a child of sbx-manager),
                  shared pages counted proportionally; its memory cgroup's
                  charge; the daemons' PSS (space-control, sbx-manager,
                  node-api, netgtw's listener, space up) and its growth per
                  sandbox since the first level
  latency         at each level, on the first sandbox, interleaved rounds
                  of: admission (POST exec with a capability that lacks
                  `exec`: node-api and sbx-manager verify the signature,
                  compare it with the record and refuse it, 403, nothing
                  reaches the bridge), a 4 KiB read (HTTP GET files, full
                  path), and GET /healthz on node-api (the client and HTTP
                  alone); then --density-creates creates to first exec
                  (API, the state waited for with GET ?until=running, the sandbox killed after,
                  then SETTLE_S for its teardown and the pool's refill),
                  each of the same sizes but a whole CPU (CREATE_BODY); the
                  worker's pools prepare jails of that disk size (space up
                  --disk-mb DISK_MB), so every create claims one
  drain           after the last level every sandbox but the first is
                  killed and waited for until its bridge is gone, the
                  machine settles, and the first level's measures are taken
                  again: the baseline "at 1" is the samples of both, before
                  the fill and after the drain, so that the machine's own
                  drift over the minutes of the fill (healthz alone moved
                  by a fifth and more between levels on a 2-core virtual
                  machine) falls on both sides of each ratio; both are
                  shown apart as well
  machine         then, with the platform still at its first sandbox, as
                  many idle processes as the top level had sandboxes are
                  started outside the platform, each in a network namespace
                  of its own (`unshare -n sleep`), and the same measures are
                  taken once more: what the machine alone does with that
                  many namespaces (this machine's PID 1 works more with
                  every network namespace that holds a process, kdamond with
                  every process), without the platform's per-sandbox state;
                  the control is said beside the target's ratio, not in it
  logs            DENSITY_BENCH_LOGS=DIR keeps the daemons' logs there
                  (their timestamps show where a create's time went)
  host            loop devices, network namespaces (nsfs mounts) and
                  mounts of the platform at each level, and once stopped
                  (what teardown left)

Every sandbox asks for 16 MiB of memory, 1 % of a CPU and a 256 MiB layer:
placement counts the declared sizes against the worker's (memory not
overcommitted, CPU tenfold, disk twofold), so 1,000 of the defaults (512
MiB, 100 %, 4 GiB) do not fit on a 24 GiB, 2-core, 250 GB machine
(docs/benchmarks.md, section "Density", has the numbers each limit
allows). The time of the whole part is said at its end; on 2 cores under
a load of about 5 the 1,000 took about ten minutes.
"""
import concurrent.futures
import json
import os
import shutil
import subprocess
import time

# the layer size of every sandbox here, and the size the worker's pools
# prepare (space up --disk-mb): a create claims a prepared jail at every
# level, as a create of the deployment's usual size does
DISK_MB = 256
BODY = json.dumps({"resources": {"memory_mb": 16, "cpu_percent": 1, "disk_mb": DISK_MB}})
# the timed creates: the same sizes, a whole CPU. At 1 % the first exec
# waits out 3 to 8 periods of the sandbox's own quota (100 ms each), which
# varied more from one create to the next (0.3 to 0.8 s) than the count
# of sandboxes changed anything: the platform's create path is what is
# measured here, not the quota
CREATE_BODY = json.dumps({"resources": {"memory_mb": 16, "cpu_percent": 100, "disk_mb": DISK_MB}})


def _auth(plat):
    return {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"], "Content-Type": "application/json"}


def _create_batch(P, plat, ctl, n, wait=600):
    """n sandboxes POSTed, then waited for until running; their ids"""
    ids = []
    for _ in range(n):
        st, data, _ = ctl.req("POST", "/v1/sandboxes", BODY, _auth(plat))
        if st != 201:
            raise RuntimeError("POST /v1/sandboxes: %d %s" % (st, data[:300]))
        ids.append(json.loads(data)["id"])
    left = set(ids)
    end = time.time() + wait
    while left:
        for s in list(left):
            st, data, _ = ctl.req("GET", "/v1/sandboxes/" + s, None, _auth(plat))
            state = json.loads(data).get("state") if st == 200 else None
            if state == "running":
                left.discard(s)
            elif state not in ("creating",):
                raise RuntimeError("sandbox %s: %d %s" % (s, st, data[:300]))
        if left and time.time() > end:
            raise RuntimeError("%d sandboxes not running after %d s" % (len(left), wait))
        if left:
            time.sleep(0.2)
    return ids


def _route(plat, ctl, sbx, access):
    st, data, _ = ctl.req("POST", "/v1/sandboxes/%s/routes" % sbx, json.dumps({"access": access}),
                          _auth(plat))
    if st not in (200, 201):
        raise RuntimeError("route %s: %d %s" % (sbx, st, data[:300]))
    return json.loads(data)


def _exec_true(P, plat, ctl, sbx):
    if ctl is None:
        ctl = P.Http("127.0.0.1:%d" % plat.port)     # a thread's own connection
    r = _route(plat, ctl, sbx, ["exec"])
    na = P.Http(r["endpoint"].split("://", 1)[1].rstrip("/"))
    st, data, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}',
                         {"Authorization": "Bearer " + r["capability"], "Content-Type": "application/json"})
    if na.c:
        na.c.close()
    if st != 200 or json.loads(data)["exit_code"] != 0:
        raise RuntimeError("exec in %s: %d %s" % (sbx, st, data[:300]))


def _gateways(P, plat):
    """sandbox id -> pid of its netgtw gateway (children of sbx-manager)"""
    out = {}
    for p in P.pids_where(lambda p: " gateway " in P.cmdline(p) and "--sandbox" in P.cmdline(p)):
        a = P.cmdline(p).split()
        if plat.bin not in a[0]:
            continue
        try:
            out[a[a.index("--sandbox") + 1]] = p
        except (ValueError, IndexError):
            pass
    return out


def _daemons(P, plat):
    out = {}
    for k, v in P.daemon_mem(plat).items():
        out[k] = v
    for p in P.pids_where(lambda p: " listen " in P.cmdline(p) and "netgtw" in P.cmdline(p).split(" ", 1)[0]):
        if plat.bin in P.cmdline(p):
            a, b = P.mem_kb(p)
            pss, rss = out.get("netgtw listen", (0, 0))
            out["netgtw listen"] = (pss + a, rss + b)
    return out


def _kdamonds():
    """the pids of the kernel's DAMON threads (kdamond.N): a host may run
    DAMON with a pageout scheme, whose page checks walk every mapping of a
    page, so its cost grows with the processes of idle sandboxes"""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/comm" % d) as f:
                    if f.read().startswith("kdamond"):
                        out.append(int(d))
            except OSError:
                pass
    return out


def _busy_pct(m0, m1):
    """how busy the machine's CPUs were between two machine_cpu() readings,
    in percent of all of them"""
    busy, idle = m1[0] - m0[0], m1[1] - m0[1]
    return 100.0 * busy / (busy + idle) if busy + idle > 0 else 100.0


def _cpu_s(P, pids):
    """CPU seconds of pids (the kernel's DAMON threads, which reap no
    children; the machine's PID 1)"""
    return sum(r[1] for r in map(P.proc_cpu, pids) if r)


def _settle(P, idle=0.9, limit=60.0):
    """waits until the machine's CPUs were at least `idle` idle over one
    second (at most `limit` s); the seconds waited"""
    t0 = time.time()
    b0, i0 = P.machine_cpu()
    while time.time() - t0 < limit:
        time.sleep(1)
        b1, i1 = P.machine_cpu()
        if _busy_pct((b0, i0), (b1, i1)) <= 100.0 * (1 - idle):
            break
        b0, i0 = b1, i1
    return time.time() - t0


def _host_counts(plat):
    loops = 0
    try:
        for d in os.listdir("/sys/block"):
            if d.startswith("loop"):
                try:
                    with open("/sys/block/%s/loop/backing_file" % d) as f:
                        if f.read().startswith(plat.t + "/"):
                            loops += 1
                except OSError:
                    pass
    except OSError:
        pass
    mounts = nsfs = 0
    with open("/proc/self/mountinfo") as f:
        for line in f:
            parts = line.split()
            if parts[4].startswith(plat.t + "/"):
                mounts += 1
                if " - nsfs " in line:
                    nsfs += 1
    return loops, nsfs, mounts


def _measure(P, plat, ids, gws):
    """(per-sandbox list of (PSS, RSS, procs) in KiB, cgroup charges KiB)"""
    bridges = {}
    for b in plat.bridges(top=True):
        cl = P.cmdline(b)
        for tok in cl.split():
            if tok.startswith("sbx_"):
                bridges[tok] = b
                break
    per, cg = [], []
    by = {}         # process name -> [PSS KiB, RSS KiB, count], summed
    # the parent map once per level, each process read once: P.tree walks
    # all of /proc per call, quadratic at a thousand sandboxes
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            kids.setdefault(P.ppid(int(d)), []).append(int(d))

    def tree(root):
        out, todo = [], [root]
        while todo:
            q = todo.pop()
            out.append(q)
            todo.extend(kids.get(q, []))
        return out
    for s in ids:
        b = bridges.get(s)
        if b is None:
            raise RuntimeError("no bridge for %s" % s)
        pss = rss = n = 0
        procs = tree(b)
        g = gws.get(s)
        for q in procs + ([g] if g is not None else []):
            try:
                with open("/proc/%d/comm" % q) as f:
                    name = f.read().strip()
            except OSError:
                continue
            a, c = P.mem_kb(q)
            pss, rss, n = pss + a, rss + c, n + 1
            e = by.setdefault(name, [0, 0, 0])
            e[0], e[1], e[2] = e[0] + a, e[1] + c, e[2] + 1
        per.append((pss, rss, n))
        c = P.cgroup_mem_kb(b, procs)
        if c is not None:
            cg.append(c)
    return per, cg, by


def bench_density(P, binsrc, count, steps, rounds, creates):
    t_start = time.time()
    load0 = os.getloadavg()
    levels = sorted(set([1] + [s for s in steps if 1 <= s <= count] + [count]))
    plat = P.Platform(binsrc, capacity=min(1024, count + creates + 2), workers=1, disk_mb=DISK_MB)
    results = []
    try:
        plat.start()
        P.log("")
        P.log("density: space up, one worker, capacity %d, data in %s; levels %s" % (
            plat.capacity, plat.data, ",".join(map(str, levels))))
        ctl = P.Http("127.0.0.1:%d" % plat.port)
        ids = []
        state = {"f4k": False}
        for lvl in levels:
            t0 = time.time()
            while len(ids) < lvl:
                batch = _create_batch(P, plat, ctl, min(20, lvl - len(ids)))
                # one exec in each, at once: at 1 % of a CPU an exec takes
                # over a second of wall time, one after the other the fill
                # took half an hour
                with concurrent.futures.ThreadPoolExecutor(len(batch)) as ex:
                    for f in [ex.submit(_exec_true, P, plat, None, s) for s in batch]:
                        f.result()
                ids += batch
            results.append(_measure_level(P, plat, ctl, ids, lvl, time.time() - t0, rounds, creates, state,
                                          "fill"))
            _report_level(P, results[-1])
        if len(ids) > 1:
            # back to the first sandbox alone: the others killed and gone
            # from the worker, the machine settled again, the same
            # measures. A baseline taken both before the fill and after
            # the drain brackets the levels in time, so that the machine's
            # own drift over the minutes between (its speed moves by a
            # fifth and more on this virtual machine: healthz, which does
            # nothing per sandbox) falls on both sides of the ratio.
            t0 = time.time()
            _drain(P, plat, ctl, ids[1:])
            # the kernel frees what the killed jails held (network
            # namespaces above all) in its own time, partly waiting on
            # RCU rather than a CPU: a grace beyond the settle's idle CPUs
            time.sleep(DRAIN_GRACE_S)
            results.append(_measure_level(P, plat, ctl, ids[:1], 1, time.time() - t0, rounds, creates, state,
                                          "drain"))
            _report_level(P, results[-1])
            # the machine's share: the top level's count of network
            # namespaces, each holding one idle process, none of them the
            # platform's
            t0 = time.time()
            procs = _machine_start(P, len(ids))
            try:
                results.append(_measure_level(P, plat, ctl, ids[:1], 1, time.time() - t0, rounds, creates,
                                              state, "machine", len(procs)))
            finally:
                _machine_stop(procs)
            _report_level(P, results[-1])
    finally:
        keep = os.environ.get("DENSITY_BENCH_LOGS")
        if keep:
            # where each create's time went: the daemons' logs (timestamps)
            shutil.copytree(os.path.join(plat.data, "logs"), keep, dirs_exist_ok=True)
        before = time.time()
        plat.stop()
        t_stop = time.time() - before
    left = _host_counts(plat)
    _report(P, results, left, t_stop, time.time() - t_start, load0)


def _measure_level(P, plat, ctl, ids, lvl, t_fill, rounds, creates, state, kind, others=0):
    """one level (kind: "fill", "drain" for the first again after the
    drain, "machine" for the first beside `others` namespaces of the
    machine's): the memory and host objects of ids, then the latencies on
    ids[0] (state["f4k"]: its 4 KiB file is written)"""
    time.sleep(2)
    # idle sandboxes: what the fill set going (the last first execs at 1 %
    # of a CPU, the pools' refills, the layers' writeback) is waited out
    # before anything is measured
    t_settle = _settle(P)
    gws = _gateways(P, plat)
    per, cg, by = _measure(P, plat, ids, gws)
    daemons = _daemons(P, plat)
    host = _host_counts(plat)
    # latency on the first sandbox: admission (refused for its access), a
    # 4 KiB read, the client + HTTP alone
    probe = ids[0]
    rr = _route(plat, ctl, probe, ["exec", "fs:r"])
    if not state["f4k"]:
        _exec_via(P, rr, probe, "head -c 4096 /dev/urandom > /home/user/f4k")
        state["f4k"] = True
    rn = _route(plat, ctl, probe, ["fs:r"])
    hp = rr["endpoint"].split("://", 1)[1].rstrip("/")
    h, hh = P.Http(hp), P.Http(hp)
    t_routes = [time.time()]

    def fresh():
        if time.time() - t_routes[0] > 60:
            rr.update(_route(plat, ctl, probe, ["exec", "fs:r"]))
            rn.update(_route(plat, ctl, probe, ["fs:r"]))
            t_routes[0] = time.time()

    def admit():
        fresh()
        st, data, _ = h.req("POST", "/v1/sandboxes/%s/exec" % probe, '{"argv":["true"]}',
                            {"Authorization": "Bearer " + rn["capability"],
                             "Content-Type": "application/json"})
        if st != 403:
            raise RuntimeError("exec without the exec right: %d %s" % (st, data[:200]))

    def read():
        fresh()
        st, _, n = h.req("GET", "/v1/sandboxes/%s/files?path=/home/user/f4k" % probe, None,
                         {"Authorization": "Bearer " + rr["capability"]})
        if st != 200 or n != 4096:
            raise RuntimeError("read 4 KiB: %d, %d bytes" % (st, n))

    def health():
        st, _, _ = hh.req("GET", "/healthz")
        if st != 200:
            raise RuntimeError("healthz: %d" % st)
    fns = {"admit": admit, "read": read, "healthz": health}
    P.interleave(max(5, rounds // 10), fns)
    # what the machine, and the kernel's DAMON, spent while this level was
    # measured (the figures below are taken beside it)
    kd = _kdamonds()
    # and the machine's PID 1, not the platform's: a host's process
    # manager may work more with every sandbox (docs/benchmarks.md)
    m0, k0, i0, w0 = P.machine_cpu(), _cpu_s(P, kd), _cpu_s(P, [1]), time.time()
    lat = P.interleave(rounds, fns)
    cr = []
    for _ in range(creates):
        _, b = P.api_create_exec(plat, ctl, CREATE_BODY)
        cr.append(b)
        # as bench_create: the killed sandbox's teardown and the pool's
        # refill (in the worker's next idle moment) are not the next
        # measured create's (at every level alike)
        time.sleep(P.SETTLE_S)
    m1, k1, i1, w1 = P.machine_cpu(), _cpu_s(P, kd), _cpu_s(P, [1]), time.time()
    return {"level": lvl, "per": per, "cg": cg, "daemons": daemons, "host": host,
            "lat": lat, "create": cr, "fill": t_fill, "settle": t_settle,
            "load": os.getloadavg()[0], "busy": _busy_pct(m0, m1),
            "kdamond": 100.0 * (k1 - k0) / max(1e-9, w1 - w0) if kd else -1.0,
            "init": 100.0 * (i1 - i0) / max(1e-9, w1 - w0), "init_name": P.comm(1) or "?",
            "gws": len(gws), "by": by, "kind": kind, "others": others}


DRAIN_GRACE_S = 10


def _drain(P, plat, ctl, ids, wait=300):
    """ids killed (DELETE), 20 at a time, and waited for until no bridge
    of the worker serves any of them"""
    def kill(s):
        c = P.Http("127.0.0.1:%d" % plat.port)
        st, data, _ = c.req("DELETE", "/v1/sandboxes/" + s, None, _auth(plat))
        if c.c:
            c.c.close()
        if st not in (200, 202, 204):
            raise RuntimeError("DELETE %s: %d %s" % (s, st, data[:300]))
    with concurrent.futures.ThreadPoolExecutor(20) as ex:
        for f in [ex.submit(kill, s) for s in ids]:
            f.result()
    left = plat.wait_unserved(ids, wait)
    if left:
        raise RuntimeError("%d killed sandboxes still have a bridge after %d s" % (len(left), wait))


def _machine_start(P, n):
    """n idle processes outside the platform, each in a network namespace
    of its own (util-linux's unshare, as root), started and running"""
    procs = []
    try:
        for _ in range(n):
            procs.append(subprocess.Popen(["unshare", "--net", "sleep", "3600"], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        # each is in its namespace once unshare has exec'd sleep
        deadline = time.time() + 60
        for p in procs:
            while P.comm(p.pid) not in ("sleep", "") and time.time() < deadline:
                time.sleep(0.01)
            if p.poll() is not None:
                raise RuntimeError("unshare --net sleep exited %d" % p.returncode)
    except BaseException:
        _machine_stop(procs)
        raise
    return procs


def _machine_stop(procs):
    for p in procs:
        if p.poll() is None:
            p.kill()
    for p in procs:
        p.wait()


def _exec_via(P, r, sbx, script):
    na = P.Http(r["endpoint"].split("://", 1)[1].rstrip("/"))
    st, data, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, json.dumps({"argv": ["sh", "-c", script]}),
                         {"Authorization": "Bearer " + r["capability"], "Content-Type": "application/json"})
    if na.c:
        na.c.close()
    if st != 200 or json.loads(data)["exit_code"] != 0:
        raise RuntimeError("exec in %s: %d %s" % (sbx, st, data[:300]))


def _avg(xs, i):
    return sum(x[i] for x in xs) / len(xs) if xs else 0.0


# a level's kind: its name's suffix, its tag in the table, what came before
# its measure (%d: the count of the machine's namespaces)
KINDS = {"fill": ("", "", "filled"),
         "drain": (" after the drain", " after", "drained"),
         "machine": (" beside %d namespaces of the machine's", " +%dns", "namespaces started")}


def _kind(r, i):
    t = KINDS[r["kind"]][i]
    return t % r["others"] if "%d" in t else t


def _level_name(r):
    return "%d sandboxes%s" % (r["level"], _kind(r, 0))


def _level_tag(r):
    return "%d%s" % (r["level"], _kind(r, 1))


def _med(P, r, k):
    """the median of a level's measure k (admit, read, healthz, create)"""
    return P.pct(r["create"] if k == "create" else r["lat"][k], 50)


def _report_level(P, r):
    per = r["per"]
    P.log("density: %s (%s in %.0f s, settled in %.0f s, load %.1f): per sandbox PSS %.2f MiB, RSS %.2f, %.1f procs"
          " (%d with a gateway); cgroup %.2f MiB; admit %.0f us, read 4 KiB %.0f us, healthz %.0f us,"
          " create %.0f ms; loop devices %d, netns %d, mounts %d" % (
              _level_name(r), _kind(r, 2), r["fill"], r["settle"], r["load"], _avg(per, 0) / 1024, _avg(per, 1) / 1024, _avg(per, 2),
              r["gws"], (sum(r["cg"]) / len(r["cg"]) / 1024) if r["cg"] else 0,
              _med(P, r, "admit"), _med(P, r, "read"), _med(P, r, "healthz"),
              _med(P, r, "create") / 1000, r["host"][0], r["host"][1], r["host"][2]))
    P.log("density: %s: while measured, the CPUs were %.0f %% busy; the kernel's DAMON (kdamond) %s;"
          " the machine's PID 1 (%s) %.1f %% of one CPU" % (
              _level_name(r), r["busy"], "%.1f %% of one CPU" % r["kdamond"] if r["kdamond"] >= 0 else "not running",
              r["init_name"], r["init"]))


def _report(P, results, left, t_stop, total, load0):
    if not results:
        return
    P.log("")
    P.log("== density: idle sandboxes on one worker (medians; memory in MiB per sandbox, PSS summed over its"
          " processes: bridge, guest, gateway)")
    P.log("%10s %8s %8s %6s %8s %10s %10s %10s %10s %6s %6s %8s %6s" % (
        "sandboxes", "PSS", "RSS", "procs", "cgroup", "admit us", "read us", "healthz us", "create ms",
        "load", "busy%", "kdamond%", "pid1%"))
    for r in results:
        per = r["per"]
        P.log("%10s %8.2f %8.2f %6.1f %8.2f %10.0f %10.0f %10.0f %10.1f %6.1f %6.0f %8.1f %6.1f" % (
            _level_tag(r), _avg(per, 0) / 1024, _avg(per, 1) / 1024, _avg(per, 2),
            (sum(r["cg"]) / len(r["cg"]) / 1024) if r["cg"] else 0,
            P.pct(r["lat"]["admit"], 50), P.pct(r["lat"]["read"], 50), P.pct(r["lat"]["healthz"], 50),
            P.pct(r["create"], 50) / 1000, r["load"], r["busy"], r["kdamond"], r["init"]))
    a = results[0]
    z = max((r for r in results if r["kind"] == "fill"), key=lambda r: r["level"])
    b = next((r for r in results if r["kind"] == "drain"), None)
    m = next((r for r in results if r["kind"] == "machine"), None)
    P.log("per process of a sandbox at %d (by name; PSS and RSS in MiB per sandbox):" % z["level"])
    for name, (pss, rss, n) in sorted(z["by"].items(), key=lambda kv: -kv[1][0]):
        P.log("  %-30s %8.2f %8.2f   (%d processes)" % (name, pss / 1024.0 / z["level"],
                                                       rss / 1024.0 / z["level"], n))
    P.log("daemons' PSS (MiB) at %d -> at %d sandboxes, growth per sandbox (KiB):" % (a["level"], z["level"]))
    dn = max(1, z["level"] - a["level"])
    growth = 0.0
    for k in sorted(set(a["daemons"]) | set(z["daemons"])):
        x, y = a["daemons"].get(k, (0, 0))[0], z["daemons"].get(k, (0, 0))[0]
        growth += (y - x) / dn
        P.log("  %-30s %8.2f -> %8.2f   %+7.1f" % (k, x / 1024, y / 1024, (y - x) / dn))
    P.log("host objects of the platform at %d: loop devices %d, nsfs mounts %d, mounts %d;"
          " after the stop (%.0f s): %d, %d, %d" % (z["level"], z["host"][0], z["host"][1], z["host"][2],
                                                  t_stop, left[0], left[1], left[2]))
    P.log("density part: %.0f s in all; load average %.1f at the start, %.1f at the end" % (
        total, load0[0], os.getloadavg()[0]))
    # the baseline at 1: the samples before the fill and after the drain
    # together (the drift of the machine between them is said)
    base = {k: a["lat"][k] + (b["lat"][k] if b else []) for k in a["lat"]}
    base["create"] = a["create"] + (b["create"] if b else [])
    if b:
        P.log("at 1 sandbox before the fill / after the drain: admit %.0f / %.0f us, read %.0f / %.0f us,"
              " healthz %.0f / %.0f us, create %.0f / %.0f ms; healthz at %d against both together: %.2fx"
              " (the machine's own drift: node-api's healthz does nothing per sandbox)" % (
                  P.pct(a["lat"]["admit"], 50), P.pct(b["lat"]["admit"], 50),
                  P.pct(a["lat"]["read"], 50), P.pct(b["lat"]["read"], 50),
                  P.pct(a["lat"]["healthz"], 50), P.pct(b["lat"]["healthz"], 50),
                  P.pct(a["create"], 50) / 1000, P.pct(b["create"], 50) / 1000,
                  z["level"], P.pct(z["lat"]["healthz"], 50) / P.pct(base["healthz"], 50)))
        P.log("admission / 4 KiB read / create at %d against the baseline before the fill alone: %.2fx / %.2fx /"
              " %.2fx; against the one after the drain alone: %.2fx / %.2fx / %.2fx" % (
                  z["level"], *[_med(P, z, k) / _med(P, r, k)
                                for r in (a, b) for k in ("admit", "read", "create")]))

    def ratio(k):
        return _med(P, z, k) / P.pct(base[k], 50)
    mem = _avg(z["per"], 0) / 1024 + growth / 1024
    P.ROWS.append(("idle memory per sandbox at %d: PSS of its processes + daemons' growth (cgroup charge)"
                   % z["level"], "%.2f + %.2f MiB (%.2f)" % (
                       _avg(z["per"], 0) / 1024, growth / 1024,
                       (sum(z["cg"]) / len(z["cg"]) / 1024) if z["cg"] else 0),
                   "issue 17: at most 1 MiB", "%.2f MiB" % mem))
    P.ROWS.append(("admission / 4 KiB read / create at %d vs at %d sandboxes%s, medians" % (
                   z["level"], a["level"], " (before the fill and after the drain)" if b else ""),
                   "%.0f us / %.0f us / %.0f ms" % (P.pct(z["lat"]["admit"], 50), P.pct(z["lat"]["read"], 50),
                                                    P.pct(z["create"], 50) / 1000),
                   "%.0f us / %.0f us / %.0f ms" % (P.pct(base["admit"], 50), P.pct(base["read"], 50),
                                                    P.pct(base["create"], 50) / 1000),
                   "%.2fx / %.2fx / %.2fx" % (ratio("admit"), ratio("read"), ratio("create"))))
    if m:
        # the machine's share: at 1 beside the top level's count of
        # namespaces of idle processes (none of the platform's), against
        # the baseline; and the top level against that control
        P.log("at 1 sandbox beside %d network namespaces of idle processes outside the platform: admit %.0f us,"
              " read %.0f us, healthz %.0f us, create %.0f ms; against the baseline %.2fx / %.2fx / %.2fx"
              " (healthz %.2fx): the machine's part; %d sandboxes against it: %.2fx / %.2fx / %.2fx" % (
                  m["others"], _med(P, m, "admit"), _med(P, m, "read"), _med(P, m, "healthz"), _med(P, m, "create") / 1000,
                  *[_med(P, m, k) / P.pct(base[k], 50) for k in ("admit", "read", "create")],
                  _med(P, m, "healthz") / P.pct(base["healthz"], 50), z["level"],
                  *[_med(P, z, k) / _med(P, m, k) for k in ("admit", "read", "create")]))
        P.ROWS.append(("the machine alone: admission / 4 KiB read / create at 1 beside %d network namespaces"
                       " of idle processes (not the platform's) vs at 1" % m["others"],
                       "%.0f us / %.0f us / %.0f ms" % (_med(P, m, "admit"), _med(P, m, "read"), _med(P, m, "create") / 1000),
                       "%.0f us / %.0f us / %.0f ms" % (P.pct(base["admit"], 50), P.pct(base["read"], 50),
                                                        P.pct(base["create"], 50) / 1000),
                       "%.2fx / %.2fx / %.2fx" % tuple(_med(P, m, k) / P.pct(base[k], 50)
                                                       for k in ("admit", "read", "create"))))
