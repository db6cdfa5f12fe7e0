#!/usr/bin/env python3
"""What a CLI process costs before it does anything: `space version` beside
`true`, side by side.

  python3 bench/startup.py --bin BUILD/bin [--rounds N] [--md FILE]

Each round spawns `true` and `space version` (posix_spawn, stdout to
/dev/null, waitpid), alternating, so that both see the same machine. Wall
time is from the spawn to the reaped exit; CPU time is the child's user +
system time from wait4. Prints the medians and the ratios; --md writes them
as a Markdown table. Nothing asserts a timing: the figures are printed.
"""
import argparse
import os
import shutil
import statistics
import sys
import time


def spawn(argv):
    fa = [(os.POSIX_SPAWN_OPEN, 1, os.devnull, os.O_WRONLY, 0)]
    t0 = time.perf_counter_ns()
    pid = os.posix_spawn(argv[0], argv, os.environ, file_actions=fa)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter_ns() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError("%s: exit status %d" % (" ".join(argv), status))
    return wall / 1e3, (ru.ru_utime + ru.ru_stime) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rounds", type=int, default=400)
    ap.add_argument("--md")
    a = ap.parse_args()
    true = shutil.which("true") or "/bin/true"
    cmds = [("true", [true]),
            ("space version", [os.path.join(a.bin, "space"), "version"])]
    for _, argv in cmds:                 # warm the page cache, discarded
        for _ in range(20):
            spawn(argv)
    wall = {k: [] for k, _ in cmds}
    cpu = {k: [] for k, _ in cmds}
    for _ in range(a.rounds):
        for k, argv in cmds:
            w, c = spawn(argv)
            wall[k].append(w)
            cpu[k].append(c)
    mw = {k: statistics.median(v) for k, v in wall.items()}
    mc = {k: statistics.median(v) for k, v in cpu.items()}
    rw = mw["space version"] / mw["true"]
    rc = mc["space version"] / mc["true"] if mc["true"] > 0 else float("nan")
    print("== process start: `space version` beside `true` (%d interleaved rounds; "
          "microseconds, medians)" % a.rounds)
    print("%-16s %12s %12s" % ("", "wall", "cpu"))
    for k, _ in cmds:
        print("%-16s %12.0f %12.0f" % (k, mw[k], mc[k]))
    print("%-16s %11.2fx %11.2fx" % ("ratio", rw, rc))
    if a.md:
        with open(a.md, "w") as f:
            f.write("| process start (%d rounds, medians) | wall | cpu (user+sys) |\n"
                    "|---|---|---|\n" % a.rounds)
            for k, _ in cmds:
                f.write("| `%s` | %.0f us | %.0f us |\n" % (k, mw[k], mc[k]))
            f.write("| ratio | %.2fx | %.2fx |\n" % (rw, rc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
