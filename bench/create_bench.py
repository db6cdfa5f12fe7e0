"""Many creates at once (issue 17, target 2), measured by bench/platform.py
on its platform beside the same number of `bwrap ... true` started at once
in the same run.

N threads each POST /v1/sandboxes (64 MiB of memory and a 10 % CPU cap each) on a
connection of their own, 10 per client address, all released together;
each then waits for its sandbox as the CLI does (GET ?until=running on
the same connection, held by space-control until the state is committed).
With SPACE_BENCH_POLL_S=S instead one poller lists all the sandboxes every
S seconds and notes when each is first `running` (the figures before the
sixth round of "Where a create's time goes" in docs/benchmarks.md were
taken so, with S 0.01). Per sandbox: from its POST to running seen
(p50, p99, max); in all: from the release to the last running, and creates
per second (N over that). The sandboxes are then killed and their removal
waited for. The baseline: N `bwrap --unshare-all ... true` started at once
(posix_spawn from N threads), each timed to its exit.
"""
import calendar
import http.client
import json
import os
import re
import shutil
import subprocess
import threading
import time


# placement counts each sandbox's memory and CPU cap against the worker's:
# 100 of the defaults (512 MiB, 100 %) do not fit on a small machine (2
# CPUs with the default tenfold CPU overcommit hold 20), 100 of 64 MiB and
# 10 % do
BODY = json.dumps({"resources": {"memory_mb": 64, "cpu_percent": 10}})


def _cpu_split(before, after, n):
    """CPU per create by process name over the burst: a process alive at both
    snapshots counts its difference, one started during the burst all of it"""
    by = {}
    for p, (name, s) in after.items():
        b = before.get(p)
        d = s - (b[1] if b and b[0] == name else 0.0)
        k = by.setdefault(name, [0.0, 0])
        k[0] += d
        k[1] += 1
    return sorted(((v[0] * 1e3 / n, name, v[1]) for name, v in by.items() if v[0] > 0), reverse=True)


def _prom(plat, names):
    out = {}
    try:
        with open(os.path.join(plat.data, "w1", "metrics.prom")) as f:
            for line in f:
                k = line.split(" ", 1)[0]
                if k in names:
                    out[k] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    return out


def _wait_jail_pool(P, plat, want):
    """wait (at most 600 s) until the worker holds `want` prepared jails
    (made minus claimed, from its metrics); say how long it took and what
    the platform's processes hold then (PSS, density bench's method)"""
    names = ("space_sbxmgr_jail_pool_made_total", "space_sbxmgr_jail_pool_claimed_total")
    t0, have = time.time(), 0
    while time.time() < t0 + 600:
        m = _prom(plat, names)
        have = m.get(names[0], 0) - m.get(names[1], 0)
        if have >= want:
            break
        time.sleep(0.5)
    time.sleep(0.5)
    pss = sum(P.mem_kb(p)[0] for p in P.tree(plat.up.pid))
    return ("prepared jails before the burst: %d of %d after %.1f s; the platform's processes "
            "then: %.1f MiB PSS in all" % (have, want, time.time() - t0, pss / 1024.0))


def bench_concurrent(P, plat, n, label=""):
    auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"], "Content-Type": "application/json"}
    hp = "127.0.0.1:%d" % plat.port
    go = threading.Event()
    t_post, ids, errs = {}, {}, []
    poll_s = os.environ.get("SPACE_BENCH_POLL_S")   # the list poll instead of each client's wait
    t_run, t_fail = {}, {}

    def one(i):
        # 10 clients per address (127.0.0.2, .3, ...): space-control closes
        # the oldest of more than 16 connections of one address still
        # sending their head (--http-heads-per-ip), a guard against slow
        # clients that 100 creates from one address at once would trip
        c = http.client.HTTPConnection("127.0.0.1", plat.port, timeout=120,
                                       source_address=("127.0.0.%d" % (2 + i // 10), 0))
        go.wait()
        t_post[i] = P.now_us()
        try:
            c.request("POST", "/v1/sandboxes", BODY, auth)
            r = c.getresponse()
            data = r.read()
            if r.status != 201:
                errs.append("POST: %d %s" % (r.status, data[:200]))
            else:
                ids[i] = json.loads(data)["id"]
            end = time.time() + 120
            while not poll_s and i in ids and time.time() < end:
                # held by space-control until the state is committed (the CLI's wait)
                c.request("GET", "/v1/sandboxes/%s?until=running&wait=30" % ids[i], None, auth)
                r = c.getresponse()
                data = r.read()
                now = P.now_us()
                o = json.loads(data) if r.status == 200 else {}
                if o.get("state") == "running" and (o.get("execution") or {}).get("state") == "serving":
                    t_run[ids[i]] = now
                    break
                if o.get("state") not in ("creating", "running"):
                    t_fail[ids[i]] = o.get("state") or "GET %d" % r.status
                    break
        except (OSError, http.client.HTTPException, ValueError) as e:
            errs.append("POST or GET: %s" % e)
        c.close()
    pool_note = None
    if getattr(plat, "jail_pool", -1) > 0:
        pool_note = _wait_jail_pool(P, plat, plat.jail_pool)
    th = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in th:
        t.start()
    time.sleep(0.3)
    ctl = P.Http(hp)
    split0 = P.tree_cpu(plat.up.pid)
    mach0 = P.machine_cpu()
    mark = os.environ.get("SPACE_BENCH_MARK")  # CLOCK_MONOTONIC of the burst, for perf --time
    if mark:
        with open(mark, "w") as f:
            f.write("%.6f" % time.monotonic())
    t0 = P.now_us()
    go.set()
    running, failed = {}, {}
    end = time.time() + 180
    def listed():
        # every page of the sandboxes not killed, and the failed ones among them
        out, after = [], ""
        for _ in range(50):
            st, data, _ = ctl.req("GET", "/v1/sandboxes?live=true" + ("&after=" + after if after else ""),
                                  None, auth)
            if st != 200:
                return st, out
            d = json.loads(data)
            out += d.get("sandboxes", [])
            if not d.get("next"):
                break
            after = d["next"]
        return 200, out

    while poll_s and time.time() < end:
        st, sbxs = listed()
        now = P.now_us()
        if st == 200:
            for s in sbxs:
                if s["state"] == "running" and s["id"] not in running:
                    running[s["id"]] = now
                elif s["state"] in ("failed", "killed") and s["id"] in ids.values():
                    failed[s["id"]] = s["state"]
        mine = set(ids.values())
        if all(not t.is_alive() for t in th) and len(mine & set(running)) + len(failed) >= len(ids):
            break
        time.sleep(float(poll_s))  # the list poll (client side)
    for t in th:
        t.join()
    if not poll_s:
        running, failed = t_run, t_fail
    mach1 = P.machine_cpu()
    split1 = P.tree_cpu(plat.up.pid)
    cpu0 = sum(s for _, s in split0.values())
    cpu1 = sum(s for _, s in split1.values())
    if mark:
        with open(mark, "a") as f:
            f.write(",%.6f\n" % time.monotonic())
    lat = [running[s] - t_post[i] for i, s in ids.items() if s in running]
    wall = (max(running[s] for s in ids.values() if s in running) - t0) if lat else float("nan")
    phases = _concurrent_phases(plat, list(ids.values()))
    # records.db's group commit: how many records each transaction carried
    # (sbx-manager rewrites its metrics every 2 s)
    time.sleep(2.5)
    commits = {}
    try:
        with open(os.path.join(plat.data, "w1", "metrics.prom")) as f:
            for line in f:
                for k in ("space_sbxmgr_record_commits_total", "space_sbxmgr_records_written_total"):
                    if line.startswith(k + " "):
                        commits[k] = int(line.split()[1])
    except (OSError, ValueError):
        pass
    # kill them all, wait until the worker has let them go
    for s in ids.values():
        ctl.req("DELETE", "/v1/sandboxes/" + s, None, auth)
    plat.wait_unserved(ids.values(), 120)

    bw = shutil.which("bwrap")
    blat, bwall = [], float("nan")
    if bw:
        go2 = threading.Event()
        def bone():
            go2.wait()
            a = P.now_us()
            subprocess.run([bw] + P.BWRAP_ARGS + ["true"], stdin=subprocess.DEVNULL)
            blat.append(P.now_us() - a)
        bt = [threading.Thread(target=bone) for _ in range(n)]
        for t in bt:
            t.start()
        time.sleep(0.3)
        b0 = P.now_us()
        go2.set()
        for t in bt:
            t.join()
        bwall = P.now_us() - b0

    P.log("")
    P.log("== %d concurrent creates%s (API, until running; milliseconds)" % (n, label))
    P.log("each client waits with GET ?until=running" if not poll_s else
          "one poller lists the sandboxes every %s s" % poll_s)
    if pool_note:
        P.log(pool_note)
    if errs or failed or len(lat) < n:
        P.log("of %d: %d running, %d failed (%s), errors: %s" % (
            n, len(lat), len(failed), ",".join(sorted(set(failed.values()))), "; ".join(errs[:3]) or "-"))
    P.log("%-62s %9s %9s %9s" % ("what", "median", "p99", "max"))
    if lat:
        P.log("%-62s %9.0f %9.0f %9.0f" % ("space: POST to running, per sandbox", P.pct(lat, 50) / 1000,
                                           P.pct(lat, 99) / 1000, max(lat) / 1000))
    if blat:
        P.log("%-62s %9.0f %9.0f %9.0f" % ("bwrap --unshare-all ... true, per process", P.pct(blat, 50) / 1000,
                                           P.pct(blat, 99) / 1000, max(blat) / 1000))
    P.log("all running after %.2f s: %.1f creates per second; %d bwrap done after %.2f s: %.0f per second" % (
        wall / 1e6, len(lat) / (wall / 1e6) if lat else 0, len(blat), bwall / 1e6,
        len(blat) / (bwall / 1e6) if blat else 0))
    for k, xs in phases:
        if xs:
            P.log("%-62s %9.0f %9.0f %9.0f" % (k, P.pct(xs, 50), P.pct(xs, 99), max(xs)))
    if lat:
        P.log("CPU of the platform's processes (space up and all below it, reaped children "
              "included) during the burst: %.2f s, %.1f ms per create" % (
                  cpu1 - cpu0, (cpu1 - cpu0) * 1e3 / len(lat)))
        busy, idle = mach1[0] - mach0[0], mach1[1] - mach0[1]
        P.log("the whole machine during the burst (/proc/stat, this client and processes outside "
              "the tree included): %.2f s of CPU busy, %.0f %% of all CPUs, %.1f ms per create" % (
                  busy, 100.0 * busy / max(1e-9, busy + idle), busy * 1e3 / len(lat)))
        P.log("  by process name (ms per create; processes, reaped children under their parent):")
        P.log("  " + ", ".join("%s %.1f (%d)" % (name, ms, k)
                               for ms, name, k in _cpu_split(split0, split1, len(lat)) if ms >= 0.05))
    if len(commits) == 2:
        P.log("worker records.db since its start: %d records in %d commits (%.2f per commit)" % (
            commits["space_sbxmgr_records_written_total"], commits["space_sbxmgr_record_commits_total"],
            commits["space_sbxmgr_records_written_total"] / max(1, commits["space_sbxmgr_record_commits_total"])))
    if lat:
        P.ROWS.append(("%d concurrent creates%s: p99 to running (issue 17: under 1 s)" % (n, label),
                       "%.0f ms (median %.0f); %.1f creates/s" % (P.pct(lat, 99) / 1000, P.pct(lat, 50) / 1000,
                                                              len(lat) / (wall / 1e6)),
                       ("bwrap p99 %.0f ms; %.0f/s" % (P.pct(blat, 99) / 1000, len(blat) / (bwall / 1e6)))
                       if blat else "no bwrap",
                       ("%.2fx" % (P.pct(lat, 99) / P.pct(blat, 99))) if blat else "-"))


def _log_events(logdir, sbx):
    """the daemons' log lines about sbx (space up's logs: DATA/logs/*.log):
    a list of (wall seconds, prog, msg), in time order"""
    out = []
    for name in ("space-control.log", "w1-sbx-manager.log"):
      with open(os.path.join(logdir, name), errors="replace") as f:
        for line in f:
            if sbx not in line or not line.startswith("{"):
                continue
            try:
                d = json.loads(line)
            except ValueError:
                continue
            ts = d.get("ts", "")
            try:
                t = calendar.timegm(time.strptime(ts[:19], "%Y-%m-%dT%H:%M:%S")) + float(ts[19:-1] or 0)
            except ValueError:
                continue
            out.append((t, d.get("prog", ""), d.get("msg", "")))
    return sorted(out)


def _ms_after(msg, label):
    m = re.search(re.escape(label) + r" ([0-9.]+)", msg)
    return float(m.group(1)) if m else None


def _concurrent_phases(plat, sbxs):
    """per sandbox, from the daemons' logs (ms): the store's commit to the
    install's start (long-poll, lane queue), the install, and the serving
    line to the control plane's record of the report"""
    logdir = os.path.join(plat.data, "logs")
    wait, inst, rep = [], [], []
    for sbx in sbxs:
        ev = _log_events(logdir, sbx)
        created = next((t for t, p, m in ev if p == "space-control" and "created" in m), None)
        reported = next((t for t, p, m in ev if p == "space-control" and m.endswith(": serving")), None)
        mgr = next(((t, m) for t, p, m in ev if p == "sbx-manager" and m.startswith("serving ") and "after" in m), None)
        if mgr is None:
            continue
        total = _ms_after(mgr[1], "after")
        if total is None:
            continue
        inst.append(total)
        if created is not None:
            wait.append((mgr[0] - total / 1e3 - created) * 1e3)
        if reported is not None:
            rep.append((reported - mgr[0]) * 1e3)
    return [("  of which: created to the install's start (long-poll, lanes)", wait),
            ("  of which: the install (records, bridge, network)", inst),
            ("  of which: serving to the report recorded by space-control", rep)]


def bench_timeline(P, plat, runs):
    """Where one create's time goes: `runs` creates through the API, one at
    a time (state polled every 2 ms, then the route and one exec of `true`),
    each split into phases by the client's clock and the daemons' log lines
    (space up's log: wall clock, milliseconds; sbx-manager and spaced-host
    log their own phases in milliseconds). Medians per phase."""
    auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"], "Content-Type": "application/json"}
    ctl = P.Http("127.0.0.1:%d" % plat.port)
    logp = os.path.join(plat.data, "logs")
    rows = {}

    def add(k, v):
        if v is not None:
            rows.setdefault(k, []).append(v)
    for _ in range(runs):
        t0 = time.time()
        st, data, _ = ctl.req("POST", "/v1/sandboxes", "{}", auth)
        t1 = time.time()
        if st != 201:
            raise RuntimeError("POST /v1/sandboxes: %d %s" % (st, data[:200]))
        sbx = json.loads(data)["id"]
        end = time.time() + 60
        while True:
            # held by space-control until it runs (the CLI's wait)
            st, data, _ = ctl.req("GET", "/v1/sandboxes/%s?until=running&wait=30" % sbx, None, auth)
            o = json.loads(data) if st == 200 else {}
            state = o.get("state")
            if state == "running" and (o.get("execution") or {}).get("state") == "serving":
                break
            if state not in ("creating", "running") or time.time() > end:
                raise RuntimeError("sandbox %s: %d %s" % (sbx, st, data[:200]))
        t2 = time.time()
        st, data, _ = ctl.req("POST", "/v1/sandboxes/%s/routes" % sbx, '{"access":["exec"]}', auth)
        r = json.loads(data)
        t2r = time.time()
        na = P.Http(r["endpoint"].split("://", 1)[1].rstrip("/"))
        hx = {"Authorization": "Bearer " + r["capability"], "Content-Type": "application/json"}
        st, data, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}', hx)
        t3 = time.time()
        # the same exec again on the same connection: what a warm one costs
        na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}', hx)
        t4 = time.time()
        if na.c:
            na.c.close()
        ctl.req("DELETE", "/v1/sandboxes/" + sbx, None, auth)
        time.sleep(0.3)     # its log lines are written
        ev = _log_events(logp, sbx)
        created = next((t for t, p, m in ev if p == "space-control" and "created" in m), None)
        reported = next((t for t, p, m in ev if p == "space-control" and m.endswith(": serving")), None)
        mgr = next(((t, m) for t, p, m in ev if p == "sbx-manager" and m.startswith("serving ") and "after" in m), None)
        jail = next((m for t, p, m in ev if p == "spaced-host" and m.startswith("jail of")), None)
        ready = next((m for t, p, m in ev if p == "spaced-host" and m.startswith("serving ")), None)
        sstart = next((m for t, p, m in ev if p == "spaced-host" and m.startswith("start of the serving process")), None)
        claim = next((m for t, p, m in ev if p == "sbx-manager" and ": claimed a prepared jail" in m), None)
        bound = next((m for t, p, m in ev if p == "spaced-host" and m.startswith("jail of") and " claimed: " in m), None)
        add("total: POST to the first exec done", (t3 - t0) * 1e3)
        # a prepared jail (sbx-manager --jail-pool) handed over and bound
        add("creates that claimed a prepared jail (count, not ms)", 1.0 if claim and bound else 0.0)
        if claim and bound:
            mc = re.search(r"\) ([0-9.]+) ms$", claim)
            add("    claimed a prepared jail (directories renamed)", float(mc.group(1)) if mc else None)
        add("API: POST answered (auth, placement, store commit)", (t1 - t0) * 1e3)
        if mgr:
            tm, m = mgr
            total = _ms_after(m, "after")
            start = tm - total / 1e3
            if created is not None:
                add("long-poll wake + assignment to sbx-manager's lane", (start - created) * 1e3)
            add("sbx-manager: assignment checks + first record commit", _ms_after(m, "assignment to its record"))
            add("sbx-manager: record 'starting' commit", _ms_after(m, "record starting"))
            spawn = _ms_after(m, "bridge spawned to ready and checked")
            add("sbx-manager: bridge spawned to ready and checked", spawn)
            sp = next((m2 for t2_, p2, m2 in ev if p2 == "sbx-manager" and m2.startswith("bridge of ")
                       and " spawned in " in m2), None)
            if sp:
                add("  network namespace (made or claimed)", _ms_after(sp, "network namespace"))
                add("  template image ensured", _ms_after(sp, "template"))
                add("  fork (or spawn) of spaced-host", _ms_after(sp, "fork"))
                add("  exec to ready (incl. spaced-host main to ready)", _ms_after(sp, "exec to ready"))
                add("  sbx-manager's checks after ready", _ms_after(sp, "checks"))
            if ready:
                rd = _ms_after(ready, "ready")
                add("  spaced-host exec + sbx-manager's checks of it", spawn - rd if spawn and rd else None)
                add("  spaced-host: main to ready", rd)
                add("    guest challenge + serving process ready", _ms_after(ready, "ms after the start,"))
            if sstart:
                add("      serving process: privileges dropped + seccomp filter", _ms_after(sstart, "privileges and filter"))
                add("      guest challenge (round trip to the guest)", _ms_after(sstart, "guest challenge"))
            if jail:
                add("    jail: cgroup", _ms_after(jail, "cgroup"))
                add("    jail: layer (mkfs + loop mount + dirs)", _ms_after(jail, "layer"))
                add("      of which mkfs", _ms_after(jail, "mkfs"))
                add("    jail: clone + id maps + cgroup join", _ms_after(jail, "clone and id maps"))
                add("    jail: setup in the child to the guest's exec", _ms_after(jail, "guest's exec"))
            add("sbx-manager: record 'serving' commit", _ms_after(m, "record serving"))
            add("sbx-manager: network attach", _ms_after(m, "network attach"))
            if reported is not None:
                add("report to space-control (commit)", (reported - tm) * 1e3)
        if reported is not None:
            add("running seen by the client (GET ?until=running)", (t2 - reported) * 1e3)
        add("route + first exec `true`", (t3 - t2) * 1e3)
        add("  route (POST routes to space-control)", (t2r - t2) * 1e3)
        add("  first exec `true` (new connection to node-api)", (t3 - t2r) * 1e3)
        add("  second exec `true` (same connection)", (t4 - t3) * 1e3)
    P.log("")
    P.log("== where a create's time goes (milliseconds, %d creates one at a time; medians; "
          "log times in microseconds)" % runs)
    P.log("%-62s %9s %9s" % ("phase", "median", "p90"))
    order = ["total: POST to the first exec done", "API: POST answered (auth, placement, store commit)",
             "long-poll wake + assignment to sbx-manager's lane",
             "sbx-manager: assignment checks + first record commit", "sbx-manager: record 'starting' commit",
             "sbx-manager: bridge spawned to ready and checked",
             "  network namespace (made or claimed)", "  template image ensured",
             "  fork (or spawn) of spaced-host", "  exec to ready (incl. spaced-host main to ready)",
             "  sbx-manager's checks after ready",
             "  spaced-host exec + sbx-manager's checks of it", "  spaced-host: main to ready",
             "    jail: cgroup", "    jail: layer (mkfs + loop mount + dirs)", "      of which mkfs",
             "    jail: clone + id maps + cgroup join", "    jail: setup in the child to the guest's exec",
             "    guest challenge + serving process ready",
             "      serving process: privileges dropped + seccomp filter",
             "      guest challenge (round trip to the guest)",
             "    claimed a prepared jail (directories renamed)",
             "sbx-manager: record 'serving' commit", "sbx-manager: network attach",
             "report to space-control (commit)", "running seen by the client (GET ?until=running)",
             "route + first exec `true`", "  route (POST routes to space-control)",
             "  first exec `true` (new connection to node-api)", "  second exec `true` (same connection)"]
    for k in order:
        if k in rows:
            P.log("%-62s %9.1f %9.1f" % (k, P.pct(rows[k], 50), P.pct(rows[k], 90)))
    k = "creates that claimed a prepared jail (count, not ms)"
    if k in rows:
        P.log("%-62s %9d of %d" % ("creates that claimed a prepared jail", sum(rows[k]), len(rows[k])))
