#!/usr/bin/python3
"""space-control's CPU per create on its SQLite store, two builds alternated.

  /usr/bin/python3 bench/store_cpu.py BIN_A [BIN_B] [--rounds N] [--creates N]

Runs the stores bench's SQLite set-up (bench/control_bench.py: one
space-control, simulated workers long-polling and reporting, 8 client
threads creating) with each build in turn, and reports the CPU
space-control spent (utime + stime from /proc) from the first create until
every sandbox was reported serving, per create, and the creates per
second. Rounds alternate A, B, A, B... so the machine's load falls on
both alike; medians at the end."""
import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import control_bench  # noqa: E402


class P:
    @staticmethod
    def now_us():
        return time.monotonic_ns() // 1000

    @staticmethod
    def pct(v, p):
        v = sorted(v)
        return v[min(len(v) - 1, int(len(v) * p / 100))] if v else 0

    @staticmethod
    def log(*a):
        print(*a, flush=True)


def cpu_s(pid):
    with open("/proc/%d/stat" % pid) as f:
        x = f.read().rsplit(")", 1)[1].split()
    return (int(x[11]) + int(x[12])) / os.sysconf("SC_CLK_TCK")


def one(bindir, creates, clients):
    procs = []
    real_popen, real_load = subprocess.Popen, control_bench.load
    marks = []

    def popen(*a, **k):
        p = real_popen(*a, **k)
        if "--listen" in (a[0] if a else k.get("args", ())):
            procs.append(p)
        return p

    def load(P_, ports, cred, n_clients, n, fn):
        # the first load is the creates; CPU from its start until the
        # next load (routes) starts, i.e. after every install was served
        marks.append(cpu_s(procs[0].pid))
        return real_load(P_, ports, cred, n_clients, n, fn)

    subprocess.Popen, control_bench.load = popen, load
    try:
        r = control_bench.run_setup(P, bindir, "sqlite", 1, None, creates, 0, clients)
    finally:
        subprocess.Popen, control_bench.load = real_popen, real_load
    cps, _, errs = r["creates"]
    if errs:
        raise RuntimeError("errors: %s" % errs[:3])
    return (marks[1] - marks[0]) * 1000 / creates, cps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("bins", nargs="+")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--creates", type=int, default=300)
    ap.add_argument("--clients", type=int, default=8)
    a = ap.parse_args()
    res = {b: [] for b in a.bins}
    for i in range(a.rounds):
        for b in a.bins:
            ms, cps = one(b, a.creates, a.clients)
            res[b].append((ms, cps))
            print("round %d %s: %.2f ms CPU per create, %.0f creates/s" % (i + 1, b, ms, cps), flush=True)
    for b in a.bins:
        print("%s: median %.2f ms CPU per create (%s), %.0f creates/s" % (
            b, statistics.median(x[0] for x in res[b]),
            " ".join("%.2f" % x[0] for x in res[b]), statistics.median(x[1] for x in res[b])))
    if len(a.bins) == 2:
        m = [statistics.median(x[0] for x in res[b]) for b in a.bins]
        print("ratio %s / %s: %.2f" % (a.bins[0], a.bins[1], m[0] / m[1]))


if __name__ == "__main__":
    main()
