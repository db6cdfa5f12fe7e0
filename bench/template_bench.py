"""Templates (docs/templates.md), measured by bench/platform.py on its
platform, each figure beside the `host` template in the same run:

  build time            `space template build` of the test template (the
                        Debian minbase of tests/integration/69_templates.sh,
                        same inputs, so the same cache key): cached (the
                        image is in the cache: digest, upload, naming) and,
                        with --template-uncached, from nothing (mmdebstrap
                        against the machine's apt source, mksquashfs) into
                        a fresh cache directory, which is then thrown away
  create to first exec  POST sandboxes {"template":"deb"} against {} (the
                        host template), alternated, GET ?until=running, the first
                        exec of `true` over node-api
  idle memory           10 idle sandboxes on the template against 10 on
                        host: PSS and RSS of each one's processes, its
                        memory cgroup's charge, and the page cache the
                        squashfs image holds on the host

The cache directory is $SPACE_TEMPLATE_CACHE or the tests' default
(/var/cache/space-test-templates): the first `make bench` or test run on a
machine builds the image once (about 3 minutes), every later one reuses it.
"""
import json
import os
import shutil
import subprocess
import tempfile
import time

NAME = "deb"
BUILD_ARGS = ["template", "build", NAME, "--env", "LANG=C.UTF-8", "--workdir", "/home/user"]


def cache_dir():
    return os.environ.get("SPACE_TEMPLATE_CACHE") or "/var/cache/space-test-templates"


def build(P, plat, cache):
    t0 = time.time()
    r = subprocess.run([os.path.join(plat.bin, "space")] + BUILD_ARGS + ["--cache", cache],
                       env=plat.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=1200)
    t = time.time() - t0
    if r.returncode != 0:
        raise RuntimeError("space template build: exit %d: %s" % (
            r.returncode, r.stderr.decode(errors="replace")[-800:]))
    return t, r.stderr.decode(errors="replace")


def bench_build(P, plat, runs, uncached):
    cache = cache_dir()
    first, err = build(P, plat, cache)
    was_cached = "are cached in" in err
    cached = []
    for _ in range(runs):
        t, err = build(P, plat, cache)
        if "are cached in" not in err:
            raise RuntimeError("the template was built again, not taken from %s" % cache)
        cached.append(t)
    unc = None
    if uncached:
        d = tempfile.mkdtemp(prefix="space-bench-tplcache.")
        try:
            unc, _ = build(P, plat, d)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    elif not was_cached:
        unc = first         # the cache was empty: that was a real build
    img = [f for f in os.listdir(cache) if f.endswith(".img")]
    size = max((os.path.getsize(os.path.join(cache, f)) for f in img), default=0)
    P.log("")
    P.log("== template build: %s (Debian minbase, the test template; image %.1f MiB), seconds" % (
        NAME, size / 1048576.0))
    P.log("%-62s %9.2f (%d runs, min %.2f)" % ("cached (inputs' digest found: upload + name)",
                                               P.pct(cached, 50), len(cached), min(cached)))
    if unc is not None:
        P.log("%-62s %9.1f" % ("uncached (mmdebstrap + mksquashfs + upload)", unc))
    else:
        P.log("uncached: not run (it takes minutes and fetches packages): BENCH_ARGS=--template-uncached")
    P.ROWS.append(("template build (test template, Debian minbase)",
                   "cached %.2f s" % P.pct(cached, 50),
                   ("uncached %.0f s" % unc) if unc is not None else "uncached: not run (--template-uncached)",
                   ("%.3fx" % (P.pct(cached, 50) / unc)) if unc else "-"))


def bench_create(P, plat, runs):
    ctl = P.Http("127.0.0.1:%d" % plat.port)
    res = {"host": ([], []), "tpl": ([], [])}
    for _ in range(runs):
        for k, body in (("host", "{}"), ("tpl", json.dumps({"template": NAME}))):
            a, b = P.api_create_exec(plat, ctl, body)
            res[k][0].append(a)
            res[k][1].append(b)
    P.log("")
    P.log("== create to first exec, template %s against host (milliseconds, %d runs each, alternated;"
          " API, GET ?until=running)" % (NAME, runs))
    P.log("%-62s %9s %9s %9s" % ("what", "median", "p90", "max"))
    for label, k in (("template host: to running", "host"), ("template %s: to running" % NAME, "tpl")):
        xs = res[k][0]
        P.log("%-62s %9.1f %9.1f %9.1f" % (label, P.pct(xs, 50) / 1000, P.pct(xs, 90) / 1000, max(xs) / 1000))
    for label, k in (("template host: to the first exec done", "host"),
                     ("template %s: to the first exec done" % NAME, "tpl")):
        xs = res[k][1]
        P.log("%-62s %9.1f %9.1f %9.1f" % (label, P.pct(xs, 50) / 1000, P.pct(xs, 90) / 1000, max(xs) / 1000))
    h, t = P.pct(res["host"][1], 50), P.pct(res["tpl"][1], 50)
    P.ROWS.append(("create to first exec, template %s (API), median" % NAME, "%.0f ms" % (t / 1000),
                   "host template %.0f ms" % (h / 1000), "%.2fx" % (t / h)))


def page_cache_kb(path):
    """KiB of path's pages in the page cache (fincore)."""
    r = subprocess.run(["fincore", "-b", "-n", "-o", "RES", path], stdout=subprocess.PIPE,
                       stderr=subprocess.DEVNULL)
    try:
        return int(r.stdout.split()[0]) // 1024
    except (ValueError, IndexError):
        return None


def idle(P, plat, n, template):
    sbxs, per, cg = P.idle_sandboxes(plat, n, template, wait=180)
    for s in sbxs:
        plat.space("kill", s, check=False)
    return per, cg


def bench_memory(P, plat, n):
    out = {}
    for k, t in (("host", None), ("tpl", NAME)):
        out[k] = idle(P, plat, n, t)
        time.sleep(1)
    imgs = []
    tdir = os.path.join(plat.data, "w1", "templates")
    if os.path.isdir(tdir):
        imgs = [os.path.join(tdir, f) for f in os.listdir(tdir) if f.endswith(".img")]
    pc = [page_cache_kb(f) for f in imgs]

    def avg(xs, i):
        return sum(x[i] for x in xs) / len(xs) / 1024.0
    P.log("")
    P.log("== idle memory, %d sandboxes on template %s against %d on host (MiB per sandbox)" % (n, NAME, n))
    P.log("%-62s %9s %9s %9s %9s" % ("what", "PSS", "RSS", "procs", "cgroup"))
    for label, k in (("template host", "host"), ("template %s" % NAME, "tpl")):
        per, cg = out[k]
        P.log("%-62s %9.2f %9.2f %9.1f %9s" % (label, avg(per, 0), avg(per, 1), avg(per, 2) * 1024,
                                               ("%.2f" % (sum(cg) / len(cg) / 1024.0)) if cg else "-"))
    if imgs:
        P.log("the worker's cached image, in the page cache after them (shared by all): %s" % ", ".join(
            "%.1f of %.1f MiB" % ((c or 0) / 1024.0, os.path.getsize(f) / 1048576.0) for f, c in zip(imgs, pc)))
    h, t = out["host"][0], out["tpl"][0]
    P.ROWS.append(("idle memory per sandbox on template %s, PSS (RSS)" % NAME,
                   "%.2f MiB (%.2f)" % (avg(t, 0), avg(t, 1)),
                   "host template %.2f MiB (%.2f)" % (avg(h, 0), avg(h, 1)),
                   "%.2fx" % (avg(t, 0) / avg(h, 0))))
