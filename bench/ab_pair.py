#!/usr/bin/env python3
"""Two builds at once on create to first exec: a platform of each runs side
by side (bench/platform.py's Platform, one worker each, prepared jails), and
their creates are alternated in a random order per round, so that both see
the same machine at nearly the same moment. ab_create.sh alternates whole
runs minutes apart; on this machine the hour moves a create by more than the
changes it compares, and pairing the creates removes that.

  python3 bench/ab_pair.py BEFORE/bin AFTER/bin [ROUNDS]

Per create: POST /v1/sandboxes {"wait": 30, "access": ["exec"]} (the answer
brings the route), then the first and a second exec of `true` on a new
connection to node-api; then a create without wait (what the control plane's
POST costs alone). Medians, 90th and 99th percentiles (nearest rank) per
build and their ratios. docs/benchmarks.md,
"Ninth round"."""
import importlib.util
import json
import os
import random
import sys
import time

# bench/platform.py under a name of its own (the standard library has a
# module "platform")
_spec = importlib.util.spec_from_file_location(
    "space_bench_platform", os.path.join(os.path.dirname(os.path.abspath(__file__)), "platform.py"))
bp = importlib.util.module_from_spec(_spec)
sys.modules["space_bench_platform"] = bp
_spec.loader.exec_module(bp)

NAMES = ["create + first exec", "create (wait, route)", "first exec", "second exec",
         "POST without wait"]


def one(plat, ctl, res, key):
    auth = {"Authorization": "Bearer " + plat.env["SPACE_API_KEY"],
            "Content-Type": "application/json"}
    t0 = time.perf_counter()
    st, data, _ = ctl.req("POST", "/v1/sandboxes", '{"wait":30,"access":["exec"]}', auth)
    t1 = time.perf_counter()
    if st != 201:
        raise RuntimeError("%s: POST /v1/sandboxes: %d %s" % (key, st, data[:200]))
    o = json.loads(data)
    sbx, r = o["id"], o["route"]
    na = bp.Http(r["endpoint"].split("://", 1)[1].rstrip("/"))
    hx = {"Authorization": "Bearer " + r["capability"], "Content-Type": "application/json"}
    st1, _, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}', hx)
    t2 = time.perf_counter()
    st2, _, _ = na.req("POST", "/v1/sandboxes/%s/exec" % sbx, '{"argv":["true"]}', hx)
    t3 = time.perf_counter()
    if na.c:
        na.c.close()
    if st1 != 200 or st2 != 200:
        raise RuntimeError("%s: exec: %d, %d" % (key, st1, st2))
    t4 = time.perf_counter()
    st, data, _ = ctl.req("POST", "/v1/sandboxes", "{}", auth)
    t5 = time.perf_counter()
    if st != 201:
        raise RuntimeError("%s: POST /v1/sandboxes without wait: %d" % (key, st))
    other = json.loads(data)["id"]
    for name, v in zip(NAMES, (t2 - t0, t1 - t0, t2 - t1, t3 - t2, t5 - t4)):
        res.setdefault((key, name), []).append(v * 1e3)
    ctl.req("DELETE", "/v1/sandboxes/" + sbx, None, auth)
    time.sleep(0.3)
    ctl.req("DELETE", "/v1/sandboxes/" + other, None, auth)
    # the kills' teardown and the pools' refill before the next create
    time.sleep(0.5)


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    bins = {"before": sys.argv[1], "after": sys.argv[2]}
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 60
    plats, ctl, res = {}, {}, {}
    try:
        for key in ("before", "after"):
            plats[key] = bp.Platform(bins[key])
            plats[key].start()
            ctl[key] = bp.Http("127.0.0.1:%d" % plats[key].port)
        for _ in range(rounds):
            for key in random.sample(["before", "after"], 2):
                one(plats[key], ctl[key], res, key)
    finally:
        for p in plats.values():
            p.stop()
    print("%-22s %10s %8s %9s %8s %8s %9s %8s %8s %9s" % (
        "ms (%d each)" % rounds, "median bef", "after", "after/bef", "p90 bef", "after", "after/bef",
        "p99 bef", "after", "after/bef"))
    for name in NAMES:
        row = []
        for p in (50, 90, 99):
            a = bp.pct(res[("before", name)], p)
            b = bp.pct(res[("after", name)], p)
            row += [a, b, b / a]
        print("%-22s %10.2f %8.2f %8.2fx %8.2f %8.2f %8.2fx %8.2f %8.2f %8.2fx" % tuple([name] + row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
