#!/usr/bin/python3
"""memscan.py [--rw-private] PID NEEDLE...: how many times the needles
occur in the memory of process PID, read through /proc/PID/mem (root reads
any process's memory this way, as an attacker with root would). A needle is
hex:HEX (bytes), file:PATH (a file's bytes, surrounding whitespace stripped)
or any other text (its UTF-8 bytes). --rw-private looks only at writable
private memory (heap, anonymous maps, thread stacks), not at the binary's
mapped files. Prints the total."""
import sys

CHUNK = 1 << 20


def needle(arg):
    if arg.startswith("hex:"):
        return bytes.fromhex(arg[4:])
    if arg.startswith("file:"):
        with open(arg[5:], "rb") as f:
            return f.read().strip()
    return arg.encode()


def wanted(fields, rw_private):
    if rw_private:
        return fields[1][:2] == "rw" and not (
            len(fields) > 5 and (not fields[5].startswith("[") or fields[5].startswith("[v")))
    return fields[1][0] == "r"


def main(argv):
    rw_private = argv[:1] == ["--rw-private"]
    if rw_private:
        argv = argv[1:]
    if len(argv) < 2:
        sys.exit(__doc__)
    pid, needles = int(argv[0]), [needle(a) for a in argv[1:]]
    if not all(needles):
        sys.exit("memscan: an empty needle")
    keep = max(len(x) for x in needles) - 1
    n = 0
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", 0) as mem:
        for line in maps:
            f = line.split()
            if not wanted(f, rw_private):
                continue
            a, b = (int(x, 16) for x in f[0].split("-"))
            if b - a > (1 << 32):
                continue        # sanitizer shadow: reserved, not data
            tail = b""
            while a < b:
                try:
                    mem.seek(a)
                    data = tail + mem.read(min(CHUNK, b - a))
                except (OSError, ValueError, OverflowError):
                    break
                n += sum(data.count(x) for x in needles)
                tail = data[-keep:] if keep else b""
                a += CHUNK
    print(n)


main(sys.argv[1:])
