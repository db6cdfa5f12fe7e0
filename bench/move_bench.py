"""Moves of a sandbox with a full layer (issue 17, target 5), measured by
bench/platform.py on a platform of its own (`space up --workers 2`):

  a move of MiB of data   a sandbox writes --move-mib MiB into its layer
                          (/home/user/data), once incompressible
                          (/dev/urandom) and once compressible (the text
                          of `seq`, about 9x with zstd); then POST move to
                          the other worker, timed to the sandbox running
                          there (API, 20 ms polls). --move-firsts
                          sandboxes of each kind are moved once (a first
                          move: the whole layer travels); the last is
                          moved --move-runs times in all, back and forth
                          (the later moves are incremental); after its
                          moves each file's SHA-256 inside the sandbox
                          must be the one before; a small file changes
                          before each move, so every move makes and
                          transfers a new archive
  baseline                `cp` of a host file of the same size and kind in
                          the platform's data directory (same disk), and
                          `sync` of the copy (a move's archive is stored
                          durably by the control plane before it is
                          reported, so the copy is made durable
                          too), alternated with the moves

  two halves at once      (incompressible data) a first move's halves are
                          timed apart: POST to its archive stored by the
                          control plane (a new DIGEST.snap in its
                          archives), and stored to running elsewhere;
                          then two more sandboxes, one on each worker,
                          are moved the other way round, the second
                          posted the moment the first's archive is
                          stored, so the first's restore half runs beside
                          the second's upload half: the time both take
                          at once is about the least a move could take
                          here if its restore ran while its upload
                          arrived. Beside it, two copies at once (`cp` +
                          `sync` of the host file to two places): a first
                          move writes its data durably twice (the
                          store's copy, the restored layer)

The page cache is not dropped for either (the host file is read from
memory; the layer's data, written through a loop device in direct-I/O
mode, is read from the disk by the archive). Each move and each copy
starts on a quiet disk: an untimed `sync` of everything comes first, so
neither pays for what the other left to write. What a move leaves to
write after the sandbox runs again (the sending worker's cached copy of
the archive, never fsync'd) is timed on its own, as a `sync` right after
the move, and reported beside it. Each move also reports the archive's
size (what travels).
MOVE_BENCH_LOGS=DIR keeps the daemons' logs of each kind there (log
timestamps show where a move's time went).

CPU: each first move and each copy is also measured in CPU-seconds,
the whole machine's (/proc/stat: the platform's processes, the kernel's
writeback and loop-device workers, everything) and the platform's own by
process name. The machine's CPU-seconds over its CPUs is the shortest
that work could take here however well it overlapped (a move's sending
worker, control plane and receiving worker share this machine's CPUs,
where a deployment gives each its own); it is reported beside the
measured time, as the share of the move's wall time the CPUs were busy.
"""
import json
import os
import shutil
import subprocess
import time

KINDS = (
    ("incompressible", "head -c {mib}M /dev/urandom"),
    ("compressible", "seq 1 999999999 | head -c {mib}M"),
)


ROUTE_HOLD_S = 2.1


def _exec(plat, sbx, script, timeout=600):
    return plat.space("exec", sbx, "--timeout", str(timeout), "--", "sh", "-c", script, timeout=timeout + 30)


def _api(P, plat, ctl, method, path, body=None):
    auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"], "Content-Type": "application/json"}
    st, data, _ = ctl.req(method, path, body, auth)
    return st, json.loads(data) if data else {}


def _snaps(plat):
    """the archives the control plane keeps (DIGEST.snap: each appears
    when its upload is stored, fsync'd and checked)"""
    d = os.path.join(plat.data, "control", "archives")
    return set(f for f in os.listdir(d) if f.endswith(".snap")) if os.path.isdir(d) else set()


def _other(P, plat, ctl, sbx):
    """the worker a move of sbx goes to: the one it does not run on"""
    st, s = _api(P, plat, ctl, "GET", "/v1/sandboxes/" + sbx)
    return "w2" if s["execution"]["worker"] == "w1" else "w1"


def _post_move(P, plat, ctl, sbx, dst):
    st, body = _api(P, plat, ctl, "POST", "/v1/sandboxes/%s/move" % sbx, json.dumps({"to": dst}))
    if st != 202:
        raise RuntimeError("move: %d %s" % (st, body))


def _running_on(P, plat, ctl, sbx, dst):
    """whether sbx runs on dst; raises if it failed"""
    st, s = _api(P, plat, ctl, "GET", "/v1/sandboxes/" + sbx)
    if st == 200 and s.get("state") in ("failed", "killed"):
        raise RuntimeError("move: the sandbox is %s: %s" % (s.get("state"), s))
    return st == 200 and s.get("state") == "running" and (s.get("execution") or {}).get("worker") == dst


def _move(P, plat, ctl, sbx, cpu=None, halves=None):
    """one move, timed from POST to running on the other worker; halves,
    if given, gets (upload, restore): POST to the archive stored, and
    stored to running (the control plane's archives, listed every poll)"""
    dst = _other(P, plat, ctl, sbx)
    before = _snaps(plat) if halves is not None else None
    t_st = None
    if cpu is not None:
        p0, m0 = P.platform_cpu(plat), P.machine_cpu()[0]
    t0 = time.time()
    _post_move(P, plat, ctl, sbx, dst)
    end = t0 + 600
    while True:
        if before is not None and t_st is None and _snaps(plat) - before:
            t_st = time.time()
        if _running_on(P, plat, ctl, sbx, dst):
            break
        if time.time() > end:
            raise RuntimeError("move: not running on %s after 600 s" % dst)
        time.sleep(0.02)
    t = time.time() - t0
    if cpu is not None:
        _cpu_add(cpu, P.machine_cpu()[0] - m0, p0, P.platform_cpu(plat))
    if halves is not None and t_st is not None:
        halves.append((t_st - t0, t0 + t - t_st))
    # the newest archive the control plane keeps: this move's
    d = os.path.join(plat.data, "control", "archives")
    snaps = [os.path.join(d, f) for f in os.listdir(d) if f.endswith(".snap")] if os.path.isdir(d) else []
    size = os.path.getsize(max(snaps, key=os.path.getmtime)) if snaps else None
    return t, size


def _cpu_add(cpu, machine, p0=None, p1=None):
    """one measure's CPU-seconds into cpu: the machine's, and by process
    name the platform's (p0, p1: platform_cpu before and after)"""
    cpu.setdefault("machine", []).append(machine)
    if p0 is not None:
        for k in p1:
            cpu.setdefault("by", {}).setdefault(k, []).append(max(0.0, p1[k] - p0.get(k, 0.0)))


def _cp(P, src, dst, cpu=None):
    os.sync()           # a quiet disk at the start (untimed)
    if cpu is not None:
        m0 = P.machine_cpu()[0]
    t0 = time.time()
    subprocess.run(["cp", src, dst], check=True)
    subprocess.run(["sync", dst], check=True)
    t = time.time() - t0
    if cpu is not None:
        _cpu_add(cpu, P.machine_cpu()[0] - m0)
    os.unlink(dst)
    return t


def _cp2(P, src, dst):
    """two copies of src at once, each `cp` + `sync` of its own
    destination: the durable writes a first move makes (the store's
    copy of its archive, the restored layer), side by side"""
    os.sync()
    t0 = time.time()
    ps = [subprocess.Popen(["sh", "-c", "cp \"$1\" \"$2\" && sync \"$2\"", "cp2", src, d])
          for d in (dst + ".1", dst + ".2")]
    if any(p.wait() != 0 for p in ps):
        raise RuntimeError("two copies at once failed")
    t = time.time() - t0
    for d in (dst + ".1", dst + ".2"):
        os.unlink(d)
    return t


def _fill(plat, g):
    """a sandbox whose layer holds the data; its SHA-256 inside"""
    sbx = plat.space("create").strip()
    out = _exec(plat, sbx, "%s >/home/user/data && sha256sum /home/user/data" % g)
    return sbx, out.split()[0]


def _pair(P, plat, ctl, g):
    """Two first moves the other way round, the second posted the moment
    the first's archive is stored: the first's restore half runs beside
    the second's upload half, as one move's halves would if the restore
    began while the upload arrived. The least such an overlapped move
    could take here is the time both halves take at once. Returns
    (the first's restore half, the second's upload half, both done),
    seconds from the first's archive stored."""
    a, wa = _fill(plat, g)
    b, wb = _fill(plat, g)
    if _other(P, plat, ctl, a) == _other(P, plat, ctl, b):
        _move(P, plat, ctl, b)  # both on one worker: one goes (untimed)
        time.sleep(ROUTE_HOLD_S)
    for s in (a, b):
        _exec(plat, s, "echo pair >/home/user/stamp")
    time.sleep(ROUTE_HOLD_S)
    da, db = _other(P, plat, ctl, a), _other(P, plat, ctl, b)
    os.sync()
    before = _snaps(plat)
    t0 = time.time()
    _post_move(P, plat, ctl, a, da)
    t_ast = t_arun = t_bpost = t_bst = None
    while True:
        now = time.time()
        new = _snaps(plat) - before
        if t_ast is None and new:
            t_ast = now
            _post_move(P, plat, ctl, b, db)
            t_bpost = time.time()
        if t_bpost is not None and t_bst is None and len(new) >= 2:
            t_bst = now
        if t_ast is not None and t_arun is None and _running_on(P, plat, ctl, a, da):
            t_arun = now
        if t_arun is not None and t_bst is not None and _running_on(P, plat, ctl, b, db):
            break
        if now > t0 + 600:
            raise RuntimeError("two moves at once: not done after 600 s")
        time.sleep(0.02)
    _check(plat, a, wa, "two moves at once, the first")
    _check(plat, b, wb, "two moves at once, the second")
    for s in (a, b):
        plat.space("kill", s, check=False)
    return t_arun - t_ast, t_bst - t_bpost, max(t_arun, t_bst) - t_ast


def _timed_move(P, plat, ctl, sbx, i, cpu=None, halves=None):
    # a new archive every time (a few bytes change, as in a sandbox that
    # ran): a move back to a worker that still caches the archive of the
    # same files would skip the transfer
    _exec(plat, sbx, "echo %d >/home/user/stamp" % i)
    # that exec's cached route named the worker of before the last move:
    # its repair holds the route for --route-hold-ms (2 s), and a move
    # waits that hold out (docs/recovery.md); the move is timed after it
    time.sleep(ROUTE_HOLD_S)
    os.sync()           # a quiet disk at the start (untimed)
    t, size = _move(P, plat, ctl, sbx, cpu, halves)
    t0 = time.time()
    os.sync()           # what the move left to write, timed on its own
    return t, size, time.time() - t0


def _check(plat, sbx, want, what):
    got = _exec(plat, sbx, "sha256sum /home/user/data").split()[0]
    if got != want:
        raise RuntimeError("%s: the data changed: %s, was %s" % (what, got, want))


def bench_moves(P, binsrc, mib, runs, firsts=3):
    """its own platform: two workers, started and stopped here. Per kind
    of data: `firsts` sandboxes moved once each (a first move archives
    the whole layer), then the last of them moved runs - 1 more times
    (incremental); every move alternated with a cp of the same size."""
    # no checkpoints here (--checkpoint-mb 0): these first moves carry the
    # whole layer; bench_checkpoint_moves measures them after one
    plat = P.Platform(binsrc, capacity=4, workers=2, checkpoint_mb=0)
    firsts = max(1, firsts)
    try:
        plat.start()
        P.log("")
        P.log("moves: space up, two workers, ports %d.., data in %s" % (plat.port, plat.data))
        ctl = P.Http("127.0.0.1:%d" % plat.port)
        for kind, gen in KINDS:
            g = gen.format(mib=mib)
            host = os.path.join(plat.t, "cp-src")
            subprocess.run(["sh", "-c", "%s >'%s'" % (g, host)], check=True)
            if os.path.getsize(host) != mib << 20:
                raise RuntimeError("the host file is %d bytes" % os.path.getsize(host))
            first, later, cps, sizes, left = [], [], [], [], []
            mcpu, ccpu, halves = {}, {}, []
            for j in range(firsts):
                sbx, want = _fill(plat, g)
                t, size, tail = _timed_move(P, plat, ctl, sbx, 0, mcpu, halves)
                first.append(t)
                left.append(tail)
                sizes.append(size)
                cps.append(_cp(P, host, os.path.join(plat.t, "cp-dst"), ccpu))
                if j < firsts - 1:
                    _check(plat, sbx, want, "%s, sandbox %d after its first move" % (kind, j + 1))
                    plat.space("kill", sbx, check=False)
            # the first move archived the layer whole; each later one is
            # incremental (a delta of the archive the layer was restored
            # from, restored onto the image the other worker kept of it)
            for i in range(1, runs):
                t, size, _ = _timed_move(P, plat, ctl, sbx, i)
                later.append(t)
                sizes.append(size)
                cps.append(_cp(P, host, os.path.join(plat.t, "cp-dst")))
            _check(plat, sbx, want, "%s, after %d moves" % (kind, runs))
            plat.space("kill", sbx, check=False)
            pair = _pair(P, plat, ctl, g) if kind == "incompressible" else None
            cp2 = _cp2(P, host, os.path.join(plat.t, "cp-dst")) if pair else None
            os.unlink(host)
            keep = os.environ.get("MOVE_BENCH_LOGS")
            if keep:
                # where each move's time went: the daemons' logs (timestamps)
                shutil.copytree(os.path.join(plat.data, "logs"), os.path.join(keep, kind), dirs_exist_ok=True)
            m1, c = P.pct(first, 50), P.pct(cps, 50)
            mb = lambda s: "?" if not s else ("%.1f MiB" % (s / 1048576.0)) if s >= 1 << 20 else "%d bytes" % s
            P.log("")
            P.log("== a move of %d MiB of %s data in the layer (seconds; median, min, max)" % (mib, kind))
            P.log("%-62s %9.2f %9.2f %9.2f" % ("first moves (%d sandboxes), whole archive: POST move to running" % len(first),
                                               m1, min(first), max(first)))
            P.log("%-62s %9.2f %9.2f %9.2f" % ("  after a first move: sync of what it left to write",
                                               P.pct(left, 50), min(left), max(left)))
            if later:
                m = P.pct(later, 50)
                P.log("%-62s %9.2f %9.2f %9.2f" % ("later moves (%d), incremental: POST move to running" % len(later),
                                                   m, min(later), max(later)))
            P.log("%-62s %9.2f %9.2f %9.2f" % ("baseline: cp of the same size and kind + sync (%d, alternated)" % len(cps),
                                               c, min(cps), max(cps)))
            P.log("archives (what travels): %s; the data intact after every move (SHA-256 inside)" % (
                ", ".join(mb(s) for s in sizes)))
            if halves:
                hu, hr = P.pct([h[0] for h in halves], 50), P.pct([h[1] for h in halves], 50)
                P.log("a first move's halves (median): POST to its archive stored %.2f, stored to running"
                      " elsewhere %.2f" % (hu, hr))
            if pair and halves:
                P.log("two first moves at once, the other way round, the second posted as the first's archive is"
                      " stored: the first's restore half %.2f beside the second's upload half %.2f, both done"
                      " after %.2f (%.2f one after the other, as above)" % (pair[0], pair[1], pair[2], hu + hr))
                P.log("baseline: two copies at once (cp + sync of the same file to two places, side by side) %.2f,"
                      " one %.2f" % (cp2, c))
            ncpu = os.cpu_count() or 1
            mm, cm = P.pct(mcpu["machine"], 50), P.pct(ccpu["machine"], 50)
            meds = sorted(((P.pct(v, 50), k) for k, v in mcpu.get("by", {}).items()), reverse=True)
            by = ", ".join("%s %.2f" % (k, v) for v, k in meds if v >= 0.01)
            P.log("CPU-seconds of a first move (median): the machine %.2f (%.2f s on its %d CPUs, busy %.0f %% of"
                  " the move); the platform's: %s" % (mm, mm / ncpu, ncpu, 100.0 * mm / ncpu / m1, by))
            P.log("CPU-seconds of the copy (median): the machine %.2f (busy %.0f %% of its %d CPUs during it)" % (
                cm, 100.0 * cm / ncpu / c, ncpu))
            P.ROWS.append(("first move of %d MiB %s data (whole archive), median of %d" % (mib, kind, len(first)),
                           "%.2f s" % m1, "cp + sync %.2f s" % c, "%.2fx" % (m1 / c)))
            ml = P.pct(left, 50)
            P.ROWS.append(("  the same with the sync of what it left to write", "%.2f s" % (m1 + ml),
                           "cp + sync %.2f s" % c, "%.2fx" % ((m1 + ml) / c)))
            P.ROWS.append(("  its CPU-seconds (the whole machine's) over its %d CPUs: the least the same work takes here" % ncpu,
                           "%.2f s" % (mm / ncpu), "cp + sync %.2f s" % c, "%.2fx" % (mm / ncpu / c)))
            if pair and halves:
                P.ROWS.append(("  its two halves at once (two moves the other way round): the least a move overlapping"
                               " them would take here", "%.2f s" % pair[2], "cp + sync %.2f s" % c,
                               "%.2fx" % (pair[2] / c)))
                P.ROWS.append(("  the same two halves at once / two copies at once (a first move writes the data"
                               " durably twice)", "%.2f s" % pair[2], "2 x (cp + sync) at once %.2f s" % cp2,
                               "%.2fx" % (pair[2] / cp2)))
            if later:
                P.ROWS.append(("later moves of %d MiB %s data (incremental), median of %d" % (mib, kind, len(later)),
                               "%.2f s" % m, "cp + sync %.2f s" % c, "%.2fx" % (m / c)))
    finally:
        plat.stop()


def _checkpointed(P, plat, ctl, sbx, timeout=300):
    """seconds until the control plane recorded a checkpoint of sbx (its
    first snapshot, taken while it runs)"""
    t0 = time.time()
    while time.time() < t0 + timeout:
        st, body = _api(P, plat, ctl, "GET", "/v1/sandboxes/%s/snapshots" % sbx)
        if st == 200 and body.get("snapshots"):
            return time.time() - t0
        time.sleep(0.1)
    raise RuntimeError("no checkpoint of %s after %d s" % (sbx, timeout))


def bench_checkpoint_moves(P, binsrc, mib, firsts=3):
    """First moves after a checkpoint (docs/worker.md, "Checkpoints"), on a
    platform of its own whose workers checkpoint a layer grown by a
    quarter of the data: a sandbox writes MiB of incompressible data, its
    worker checkpoints the layer while it runs (timed from the write's
    end to the control plane's record), a small file changes, and the
    move is timed as in bench_moves; it carries a delta of the
    checkpoint, and the receiving worker restores the checkpoint and the
    delta from the control plane. Alternated with cp + sync; 2 x firsts
    sandboxes, every other one moved right after an untimed copy and
    compared with a copy right after another (the memory in use in
    both)."""
    plat = P.Platform(binsrc, capacity=4, workers=2, checkpoint_mb=max(16, mib // 4))
    firsts = max(1, firsts)
    try:
        plat.start()
        P.log("")
        P.log("moves after a checkpoint: space up --checkpoint-mb %d, two workers" % max(16, mib // 4))
        ctl = P.Http("127.0.0.1:%d" % plat.port)
        g = KINDS[0][1].format(mib=mib)
        host = os.path.join(plat.t, "cp-src")
        subprocess.run(["sh", "-c", "%s >'%s'" % (g, host)], check=True)
        moves, cps, warm, wmoves, waits, sizes, left = [], [], [], [], [], [], []
        mcpu, ccpu = {}, {}
        for j in range(2 * firsts):
            # every other one right after an untimed copy, as the copy
            # after it: a copy after a pause takes fresh pages from the
            # host and is up to twice as long (docs/benchmarks.md set
            # 20), so the move and the copy are also timed both with
            # that memory in use already
            hot = j % 2 == 1
            sbx, want = _fill(plat, g)
            waits.append(_checkpointed(P, plat, ctl, sbx))
            if hot:
                _exec(plat, sbx, "echo 0 >/home/user/stamp")
                time.sleep(ROUTE_HOLD_S)
                _cp(P, host, os.path.join(plat.t, "cp-dst"))
                t, size = _move(P, plat, ctl, sbx)
                wmoves.append(t)
                warm.append(_cp(P, host, os.path.join(plat.t, "cp-dst")))
            else:
                t, size, tail = _timed_move(P, plat, ctl, sbx, 0, mcpu)
                moves.append(t)
                left.append(tail)
                cps.append(_cp(P, host, os.path.join(plat.t, "cp-dst"), ccpu))
            sizes.append(size)
            _check(plat, sbx, want, "incompressible, sandbox %d after its move after a checkpoint" % (j + 1))
            plat.space("kill", sbx, check=False)
        os.unlink(host)
        m, c, w = P.pct(moves, 50), P.pct(cps, 50), P.pct(waits, 50)
        ncpu = os.cpu_count() or 1
        mm = P.pct(mcpu["machine"], 50)
        P.log("")
        P.log("== a first move of %d MiB of incompressible data after its checkpoint (seconds; median, min,"
              " max)" % mib)
        P.log("%-62s %9.2f %9.2f %9.2f" % ("the write's end to the checkpoint recorded (%d)" % len(waits),
                                           w, min(waits), max(waits)))
        P.log("%-62s %9.2f %9.2f %9.2f" % ("first moves after it, incremental: POST move to running",
                                           m, min(moves), max(moves)))
        P.log("%-62s %9.2f %9.2f %9.2f" % ("  after it: sync of what it left to write",
                                           P.pct(left, 50), min(left), max(left)))
        P.log("%-62s %9.2f %9.2f %9.2f" % ("baseline: cp of the same size and kind + sync (alternated)",
                                           c, min(cps), max(cps)))
        cw, mw = P.pct(warm, 50), P.pct(wmoves, 50)
        P.log("%-62s %9.2f %9.2f %9.2f" % ("the same, right after an untimed copy (memory in use)",
                                           mw, min(wmoves), max(wmoves)))
        P.log("%-62s %9.2f %9.2f %9.2f" % ("baseline: cp + sync right after another (memory in use)",
                                           cw, min(warm), max(warm)))
        P.log("archives of the moves (what travels): %s bytes; the data intact after every move" % (
            ", ".join(str(s) for s in sizes)))
        P.log("CPU-seconds of such a move (median): the machine %.2f (%.2f s on its %d CPUs)" % (
            mm, mm / ncpu, ncpu))
        P.ROWS.append(("first move of %d MiB incompressible data after its checkpoint (incremental), median of"
                       " %d" % (mib, len(moves)), "%.2f s" % m, "cp + sync %.2f s" % c, "%.2fx" % (m / c)))
        P.ROWS.append(("  the same, each right after an untimed copy (the memory in use), median of %d"
                       % len(wmoves), "%.2f s" % mw, "cp + sync after a copy %.2f s" % cw, "%.2fx" % (mw / cw)))
        P.ROWS.append(("  the checkpoint, recorded after the data was written (the sandbox running)",
                       "%.2f s" % w, "cp + sync %.2f s" % c, "%.2fx" % (w / c)))
    finally:
        plat.stop()
