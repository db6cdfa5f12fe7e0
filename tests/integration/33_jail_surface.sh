#!/bin/sh
# The kernel surface a sandbox reaches, probed from inside: socket families
# and netlink protocols off the allow list, calls that reach another
# process or rarely used kernel code, and /proc files that describe the host
# or the other sandboxes. Then that ordinary programs still work.
. "$SPACE_TOP/tests/lib.sh"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
W=$(mktemp -d)
HOST=""
cleanup() {
	[ -n "$HOST" ] && kill "$HOST" 2>/dev/null
	i=0; while [ -n "$HOST" ] && kill -0 "$HOST" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

UB=$((1000000 + (($$ + 2333) % 4000) * 65536))
S=js$$
mkdir -p "$W/layer" && mkdir -m 700 "$W/run"
"$SPACE_BIN/spaced-host" --sandbox "$S" --generation 1 --activation 1 --worker w1 \
    --resident r1 --substrate jail --template host --run-dir "$W/run" \
    --layer-dir "$W/layer" --uid-base "$UB" --disk-mb 64 --memory-mb 256 --pids 64 \
    >"$W/ready" 2>"$W/log" &
HOST=$!
i=0; while [ $i -lt 100 ] && [ ! -s "$W/ready" ]; do sleep 0.1; i=$((i + 1)); done
is "sandbox ready" "$(cut -d" " -f1 "$W/ready")" "ready"

# exec ARGV-JSON: the stdout of one command inside
exec_in() {
	c=$($SPC claims --sandbox "$S" --gen 1 --worker w1 --resident r1)
	$SPC call "$W/run/bridge.sock" exec "$S" "$c" "{\"argv\":$1,\"timeout\":60}" |
	    $SPC get body.result.stdout
}
py() { exec_in "$(python3 -c 'import json,sys; print(json.dumps(["python3","-c",sys.argv[1]]))' "$1")"; }
sh_in() { exec_in "$(python3 -c 'import json,sys; print(json.dumps(["sh","-c",sys.argv[1]]))' "$1")"; }
# the second word of the line of OUT that starts with NAME
res() { printf '%s\n' "$1" | awk -v t="$2" '$1 == t { print $2 }'; }

# ---- socket families and netlink protocols ----
o=$(py '
import errno, socket
def try_socket(name, fam, ty, proto=0):
    try:
        s = socket.socket(fam, ty, proto); print(name, "OK"); s.close()
    except OSError as e:
        print(name, errno.errorcode.get(e.errno, e.errno))
try_socket("vsock-stream", 40, socket.SOCK_STREAM)
try_socket("vsock-dgram", 40, socket.SOCK_DGRAM)
try_socket("alg", 38, socket.SOCK_SEQPACKET)
try_socket("bluetooth", 31, socket.SOCK_STREAM)
try_socket("unspec", 0, socket.SOCK_STREAM)
try_socket("family-1000", 1000, socket.SOCK_STREAM)
try_socket("netlink-uevent", 16, socket.SOCK_DGRAM, 15)
try_socket("netlink-sock-diag", 16, socket.SOCK_DGRAM, 4)
try_socket("netlink-audit", 16, socket.SOCK_RAW, 9)
try_socket("netlink-netfilter", 16, socket.SOCK_RAW, 12)
try_socket("inet-raw", 2, socket.SOCK_RAW, 1)
try_socket("inet6-raw", 10, socket.SOCK_RAW, 58)
try_socket("packet", 17, socket.SOCK_RAW)
try_socket("netlink-route", 16, socket.SOCK_RAW, 0)
try_socket("unix", 1, socket.SOCK_STREAM)
try_socket("inet6-stream", 10, socket.SOCK_STREAM)
try_socket("inet-tcp", 2, socket.SOCK_STREAM, 6)
try_socket("inet-udp", 2, socket.SOCK_DGRAM, 17)
try_socket("inet6-udp", 10, socket.SOCK_DGRAM, 17)
try_socket("inet-sctp-stream", 2, socket.SOCK_STREAM, 132)
try_socket("inet6-sctp-stream", 10, socket.SOCK_STREAM, 132)
try_socket("inet-mptcp", 2, socket.SOCK_STREAM, 262)
try_socket("inet-udplite", 2, socket.SOCK_DGRAM, 136)
try_socket("inet6-dgram-tcp", 10, socket.SOCK_DGRAM, 6)
')
for t in vsock-stream vsock-dgram alg bluetooth packet unspec family-1000; do
	is "socket family refused: $t" "$(res "$o" "$t")" "EAFNOSUPPORT"
done
# IP sockets of other protocols than TCP, UDP and ping's ICMP: the kernel
# would load their modules (SCTP, ...) for the asking
for t in netlink-uevent netlink-sock-diag netlink-audit netlink-netfilter inet-raw inet6-raw \
    inet-sctp-stream inet6-sctp-stream inet-mptcp inet-udplite inet6-dgram-tcp; do
	is "socket refused: $t" "$(res "$o" "$t")" "EPERM"
done
for t in netlink-route unix inet6-stream inet-tcp inet-udp inet6-udp; do
	is "socket allowed: $t" "$(res "$o" "$t")" "OK"
done

# ---- calls that reach another process or rarely used kernel code ----
# pidfd_getfd on a child of our own: the same uid, so only the filter stops it
o=$(py '
import ctypes, errno, os, subprocess, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def r(name, rc):
    print(name, "OK" if rc >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"))
rd, wr = os.pipe()
child = subprocess.Popen(["sleep", "30"], stdout=wr, pass_fds=(wr,))
pidfd = libc.syscall(434, child.pid, 0)
r("pidfd_open", pidfd)
r("pidfd_getfd", libc.syscall(438, pidfd, 1, 0))
r("pidfd_send_signal", libc.syscall(424, pidfd, 0, None, 0))
child.kill(); child.wait()
buf = ctypes.create_string_buffer(16)
r("modify_ldt", libc.syscall(154, 0, buf, 16))
r("memfd_secret", libc.syscall(447, 0))
r("mbind", libc.syscall(237, 0, 0, 0, 0, 0, 0))
r("set_mempolicy", libc.syscall(238, 0, 0, 0))
r("get_mempolicy", libc.syscall(239, 0, 0, 0, 0, 0))
r("kcmp", libc.syscall(312, os.getpid(), os.getpid(), 0, 0, 0))
r("process_vm_readv", libc.syscall(310, os.getpid(), 0, 0, 0, 0, 0))
r("io_uring_setup", libc.syscall(425, 1, buf))
r("io_setup", libc.syscall(206, 1, buf))
r("userfaultfd", libc.syscall(323, 0))
r("name_to_handle_at", libc.syscall(303, -100, b"/", buf, buf, 0))
r("chroot", libc.chroot(b"/tmp"))
r("sethostname", libc.sethostname(b"x", 1))
r("adjtimex", libc.syscall(159, buf))
r("clone3", libc.syscall(435, 0, 0))
r("clone-newns", libc.syscall(56, 0x00020000 | 17, 0, 0, 0, 0))
import fcntl, termios
m = os.open("/dev/ptmx", os.O_RDWR | os.O_NOCTTY)
try:
    fcntl.ioctl(m, termios.TIOCSTI, b"x"); print("tiocsti OK")
except OSError as e:
    print("tiocsti", errno.errorcode.get(e.errno))
# the kernel reads the command as 32 bits: set bits above must not pass
r("tiocsti-high-bits", libc.syscall(16, m, (1 << 32) | termios.TIOCSTI, b"x"))
r("ioctl-fionread", libc.syscall(16, m, termios.FIONREAD, buf))
r("vsock-high-bits", libc.syscall(41, (1 << 32) | 40, 1, 0))
libc.personality.argtypes = [ctypes.c_ulong]
r("personality-query", libc.personality(0xffffffff))
r("personality-readimpliesexec", libc.personality(0x0400000))
')
for t in pidfd_getfd modify_ldt memfd_secret mbind set_mempolicy get_mempolicy kcmp process_vm_readv \
    io_uring_setup userfaultfd name_to_handle_at chroot sethostname adjtimex clone-newns \
    personality-readimpliesexec; do
	is "denied: $t" "$(res "$o" "$t")" "EPERM"
done
is "denied: ioctl TIOCSTI" "$(res "$o" tiocsti)" "EPERM"
is "denied: ioctl TIOCSTI with bits above 32 set" "$(res "$o" tiocsti-high-bits)" "EPERM"
is "allowed: other ioctls (FIONREAD)" "$(res "$o" ioctl-fionread)" "OK"
check "denied: AF_VSOCK with bits above 32 set ($(res "$o" vsock-high-bits))" test "$(res "$o" vsock-high-bits)" != OK
is "legacy AIO looks absent (ENOSYS)" "$(res "$o" io_setup)" "ENOSYS"
is "clone3 looks absent (ENOSYS), libc falls back to clone" "$(res "$o" clone3)" "ENOSYS"
for t in pidfd_open pidfd_send_signal personality-query; do
	is "allowed: $t" "$(res "$o" "$t")" "OK"
done

# ---- /proc: nothing about the host's disks, boot, configuration, kernel ----
masked="cmdline config.gz diskstats partitions swaps locks kallsyms modules keys key-users timer_list interrupts iomem ioports slabinfo zoneinfo buddyinfo"
o=$(sh_in 'for f in '"$masked"'; do
	[ -e /proc/$f ] || { echo "$f absent"; continue; }
	n=$(cat /proc/$f 2>/dev/null | wc -c); echo "$f $n"
done
for d in fs bus irq acpi scsi driver pressure; do
	[ -e /proc/$d ] || { echo "$d absent"; continue; }
	echo "$d $(ls -A /proc/$d 2>/dev/null | wc -l)"
done
(echo x > /proc/sysrq-trigger) 2>/dev/null && echo "sysrq-trigger writable" || echo "sysrq-trigger refused"
grep -q " /proc/sys ro[, ]" /proc/self/mountinfo && echo "proc-sys ro" || echo "proc-sys rw"
grep -c loop /proc/self/mountinfo /proc/diskstats /proc/partitions 2>/dev/null | grep -v ":0$" | grep -v mountinfo | wc -l | sed "s/^/loop-lines /"')
for f in $masked; do
	v=$(res "$o" "$f")
	# absent on this kernel is as good as empty
	check "/proc/$f reads empty inside ($v)" sh -c '[ "$1" = 0 ] || [ "$1" = absent ]' - "$v"
done
for d in fs bus irq acpi scsi driver pressure; do
	v=$(res "$o" "$d")
	check "/proc/$d is empty inside ($v entries)" sh -c '[ "$1" = 0 ] || [ "$1" = absent ]' - "$v"
done
# the masks are one empty read-only file system, bound over each directory
o2=$(sh_in 'ds=""; for d in fs bus irq acpi scsi driver pressure; do [ -d /proc/$d ] && ds="$ds /proc/$d"; done
echo "dirs $(echo $ds | wc -w)"; echo "devs $(stat -c %d $ds | sort -u | wc -l)"
for d in $ds; do touch $d/x 2>/dev/null && echo "wrote $d"; mkdir $d/y 2>/dev/null && echo "made $d"; done; echo end')
check "masked directories present on this kernel ($(res "$o2" dirs))" test "$(res "$o2" dirs)" -ge 2
is "... all one file system" "$(res "$o2" devs)" 1
is "... none writable (no file, no directory made)" "$(printf '%s\n' "$o2" | grep -c '^wrote\|^made')" 0
is "/proc/sysrq-trigger cannot be written" "$(res "$o" sysrq-trigger)" "refused"
is "/proc/sys is mounted read-only" "$(res "$o" proc-sys)" "ro"
is "no file lists the host's loop devices" "$(res "$o" loop-lines)" "0"
# what must still be there for ps, free, top and friends
o=$(sh_in 'for f in cpuinfo meminfo stat uptime loadavg self/status self/mountinfo; do [ "$(cat /proc/$f | wc -c)" -gt 0 ] && echo "$f ok"; done; ps -e -o comm= | grep -c .')
for f in cpuinfo meminfo stat uptime loadavg self/status self/mountinfo; do
	is "/proc/$f still readable" "$(res "$o" "$f")" "ok"
done
check "ps lists the sandbox's processes" test "$(printf '%s\n' "$o" | tail -n 1)" -ge 2

# ---- ordinary programs still work ----
is "sh, pipes, fifos" "$(sh_in 'cd /tmp && mkfifo f && (echo through-fifo > f &) && cat f | tr a-z A-Z')" "THROUGH-FIFO"
o=$(py '
import os, socket, subprocess, threading
a, b = socket.socketpair(); a.send(b"pair"); print("socketpair", b.recv(4).decode())
u = socket.socket(socket.AF_UNIX); u.bind("/tmp/u.sock"); u.listen()
c = socket.socket(socket.AF_UNIX); c.connect("/tmp/u.sock"); print("unix", "OK")
for fam, addr in ((socket.AF_INET, "127.0.0.1"), (socket.AF_INET6, "::1")):
    s = socket.socket(fam); s.bind((addr, 0)); s.listen()
    k = socket.create_connection(s.getsockname()[:2]); n, _ = s.accept()
    k.send(b"hi"); print("loopback-%d" % fam, n.recv(2).decode())
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); d.bind(("127.0.0.1", 0))
d.sendto(b"dg", d.getsockname()); print("udp", d.recv(2).decode())
print("getaddrinfo", socket.getaddrinfo("localhost", 80, type=socket.SOCK_STREAM)[0][4][1])
print("ifaddrs", " ".join(sorted(n for _, n in socket.if_nameindex())))
t = threading.Thread(target=lambda: print("thread", "OK")); t.start(); t.join()
print("subprocess", subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
print("fork", "OK" if os.waitpid(os.fork() or os._exit(0), 0) else "")
')
is "AF_UNIX socketpair" "$(res "$o" socketpair)" "pair"
is "AF_UNIX path socket" "$(res "$o" unix)" "OK"
is "AF_INET on loopback" "$(res "$o" loopback-2)" "hi"
is "AF_INET6 on loopback" "$(res "$o" loopback-10)" "hi"
is "UDP on loopback" "$(res "$o" udp)" "dg"
is "getaddrinfo" "$(res "$o" getaddrinfo)" "80"
is "interfaces over NETLINK_ROUTE" "$(printf '%s\n' "$o" | awk '$1 == "ifaddrs" { $1 = ""; print substr($0, 2) }')" "lo"
is "threads" "$(res "$o" thread)" "OK"
is "subprocess (clone3 falls back to clone)" "$(res "$o" subprocess)" "sub"
is "fork" "$(res "$o" fork)" "OK"
if command -v ip >/dev/null 2>&1; then
	check "ip addr over NETLINK_ROUTE shows lo" sh -c 'printf "%s" "$1" | grep -q "inet 127.0.0.1"' - "$(sh_in 'ip addr 2>&1')"
fi
is "the bridge still serves" "$(sh_in 'echo alive')" "alive"
done_testing
