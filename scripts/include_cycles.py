#!/usr/bin/env python3
"""Import cycles between the sources of src/, from their #include "..." lines.

  python3 scripts/include_cycles.py [SRC_DIR]

Three graphs, each of which must be acyclic:
  files       a header that includes itself through others;
  modules     foo.c with foo.h is one module; module A imports B when a
              file of A includes B's header: A needs B and B needs A is a
              cycle even when no header includes itself;
  components  the directories under src/ (libspace and one per program):
              a component includes only from itself and from those below it.
An include "..." that resolves to no file (beside the including file, then
src/libspace, the -I of the Makefile) is an error too. Prints TAP, one test
per graph plus one for the resolution, and exits non-zero on any failure.
"""
import os
import re
import sys

INC = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.M)


def sources(src):
    out = []
    for d, _, names in os.walk(src):
        for n in names:
            if n.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(d, n), src))
    return sorted(out)


def resolve(src, frm, name):
    for base in (os.path.dirname(frm), "libspace"):
        p = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(src, p)):
            return p
    return None


def cycles(graph):
    """Strongly connected components of more than one node, or with a
    self-loop (Tarjan, iterative), each as a sorted list."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1 or v in graph.get(v, ()):
                    out.append(sorted(comp))
    return out


def path_in(graph, comp):
    """One closed walk through the component, for the message."""
    members = set(comp)
    start = comp[0]
    prev, queue, seen = {}, [start], {start}
    while queue:
        v = queue.pop(0)
        for w in sorted(graph.get(v, ())):
            if w == start:
                walk = [v]
                while walk[-1] != start:
                    walk.append(prev[walk[-1]])
                return list(reversed(walk)) + [start]
            if w in members and w not in seen:
                seen.add(w)
                prev[w] = v
                queue.append(w)
    return comp


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "src")
    files = sources(src)
    fgraph = {f: set() for f in files}
    unresolved = []
    for f in files:
        with open(os.path.join(src, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        for name in INC.findall(text):
            p = resolve(src, f, name)
            if p is None:
                unresolved.append("%s: \"%s\"" % (f, name))
            else:
                fgraph[f].add(p)

    def module(f):
        return os.path.splitext(f)[0]

    def component(f):
        return f.split(os.sep, 1)[0]

    mgraph, cgraph = {}, {}
    for f, deps in fgraph.items():
        for d in deps:
            mgraph.setdefault(module(f), set())
            if module(d) != module(f):
                mgraph[module(f)].add(module(d))
            cgraph.setdefault(component(f), set())
            if component(d) != component(f):
                cgraph[component(f)].add(component(d))

    n, failed = 0, 0

    def report(ok, what, lines):
        nonlocal n, failed
        n += 1
        print("%s %d - %s" % ("ok" if ok else "not ok", n, what))
        if not ok:
            failed += 1
            for line in lines:
                print("#   " + line)

    report(not unresolved, "every #include \"...\" of src/ names a file (%d files)" % len(files),
           unresolved)
    for label, graph in (("files", fgraph), ("modules", mgraph), ("components", cgraph)):
        found = cycles(graph)
        report(not found, "no include cycle between %s (%d nodes)" % (label, len(graph)),
               [" -> ".join(path_in(graph, c)) for c in found])
    print("1..%d" % n)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
