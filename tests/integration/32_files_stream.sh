#!/bin/sh
# File operations through the bridge: every op, the errno mapping of
# docs/protocol.md, and a 1 GiB file streamed both ways with the bridge's
# and the guest's memory staying bounded.
. "$SPACE_TOP/tests/lib.sh"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
W=$(mktemp -d)
HP=""
cleanup() {
	[ -n "$HP" ] && kill "$HP" 2>/dev/null
	[ -n "$SAMPLER" ] && kill "$SAMPLER" 2>/dev/null
	i=0; while [ -n "$HP" ] && kill -0 "$HP" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

UB=$((1000000 + (($$ + 3111) % 4000) * 65536))
SB=f$$
mkdir -p "$W/layer" && mkdir -m 700 "$W/run"
# ASan keeps freed memory in a 256 MiB quarantine: a sanitizer build needs
# room for it, and its VmHWM says nothing about our buffers
MEM=256
[ "${SPACE_SAN:-0}" = 1 ] && MEM=2048
"$SPACE_BIN/spaced-host" --sandbox "$SB" --generation 1 --activation 1 --worker w1 \
    --resident r1 --substrate jail --template host --run-dir "$W/run" --layer-dir "$W/layer" \
    --uid-base "$UB" --disk-mb 1400 --memory-mb "$MEM" --pids 64 >"$W/ready" 2>"$W/log" &
HP=$!
i=0; while [ $i -lt 200 ] && [ ! -s "$W/ready" ]; do sleep 0.1; i=$((i + 1)); done
is "bridge ready" "$(cut -d" " -f1 "$W/ready")" "ready"
# a capability lives two minutes: one is minted again before each long part,
# so a slow machine does not see it expire midway
fresh() { C=$($SPC claims --sandbox "$SB" --gen 1 --worker w1 --resident r1); }
fresh
call() { $SPC call "$W/run/bridge.sock" "$1" "$SB" "$C" "$2" ${3:+--in "$3"} ${4:+--out "$4"}; }
f() { printf '%s\n' "$1" | $SPC get "$2"; }
# err OP ARGS -> "status code"
err() { o=$(call "$1" "$2" "$3"); echo "$(f "$o" body.status) $(f "$o" body.error)"; }

# ---- every operation ----
printf 'hello file\n' >"$W/small"
o=$(call fs.write '{"path":"/home/user/a.txt","mode":384}' "$W/small")
is "fs.write answers the size" "$(f "$o" body.result.size)" "11"
is "fs.write answer carries serving" "$(f "$o" body.serving.sandbox)" "$SB"
o=$(call fs.read '{"path":"a.txt"}' "" "$W/back")
is "fs.read (relative path) answers the size" "$(f "$o" body.result.size)" "11"
is "fs.read streams the bytes then END" "$(f "$o" ended) $(cmp -s "$W/small" "$W/back" && echo same)" "true same"
o=$(call fs.stat '{"path":"/home/user/a.txt"}')
is "fs.stat" "$(f "$o" body.result.name) $(f "$o" body.result.type) $(f "$o" body.result.size) $(f "$o" body.result.mode)" "a.txt file 11 384"
check "fs.stat mtime is RFC 3339" sh -c "printf '%s' '$(f "$o" body.result.mtime)' | grep -qE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z$'"
is "fs.mkdir parents" "$(f "$(call fs.mkdir '{"path":"/home/user/d1/d2/d3","parents":true}')" body.status)" "200"
is "fs.mkdir parents on an existing dir is fine" "$(f "$(call fs.mkdir '{"path":"/home/user/d1/d2","parents":true}')" body.status)" "200"
is "fs.rename" "$(f "$(call fs.rename '{"from":"/home/user/a.txt","to":"/home/user/d1/b.txt"}')" body.status)" "200"
o=$(call fs.list '{"path":"/home/user/d1"}')
is "fs.list" "$(printf '%s\n' "$o" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(sorted(e["name"]+":"+e["type"] for e in d["body"]["result"]["entries"])))')" "b.txt:file d2:dir"
is "fs.remove a file" "$(f "$(call fs.remove '{"path":"/home/user/d1/b.txt"}')" body.status)" "200"
is "fs.remove recursive" "$(f "$(call fs.remove '{"path":"/home/user/d1","recursive":true}')" body.status)" "200"
is "... gone" "$(err fs.stat '{"path":"/home/user/d1"}')" "404 not_found"
o=$(call fs.write '{"path":"/tmp/t.txt"}' "$W/small")
is "fs.write to /tmp" "$(f "$o" body.result.size)" "11"
is "written files belong to the sandbox user" "$(stat -c %u "$W/run/rw/tmp/t.txt")" "$((UB + 1000))"

# ---- errno mapping (docs/protocol.md) ----
call fs.mkdir '{"path":"/home/user/full"}' >/dev/null
call fs.write '{"path":"/home/user/full/x"}' "$W/small" >/dev/null
is "read a missing file: 404" "$(err fs.read '{"path":"/home/user/nope"}')" "404 not_found"
is "read a directory: 409" "$(err fs.read '{"path":"/home/user/full"}')" "409 is_a_directory"
is "write onto a directory: 409" "$(err fs.write '{"path":"/home/user/full"}' "$W/small")" "409 is_a_directory"
is "list a file: 409" "$(err fs.list '{"path":"/home/user/full/x"}')" "409 not_a_directory"
is "mkdir an existing path: 409" "$(err fs.mkdir '{"path":"/home/user/full"}')" "409 exists"
is "remove a non-empty dir without recursive: 409" "$(err fs.remove '{"path":"/home/user/full"}')" "409 not_empty"
is "write into a missing directory: 404" "$(err fs.write '{"path":"/home/user/no/dir/x"}' "$W/small")" "404 not_found"
is "read /root (not the user's): 403" "$(err fs.list '{"path":"/root"}')" "403 permission_denied"
is "write into the read-only template: 403" "$(err fs.write '{"path":"/usr/bin/evil"}' "$W/small")" "403 permission_denied"
is "write /etc/passwd: 403" "$(err fs.write '{"path":"/etc/passwd"}' "$W/small")" "403 permission_denied"
n250=$(python3 -c 'print("/home/user/" + "n" * 250)')
o=$(call fs.write "{\"path\":\"$n250\"}" "$W/small")
is "fs.write of a 250-character name" "$(f "$o" body.result.size)" "11"
long=$(python3 -c 'print("/home/user/" + "a" * 300)')
is "a name over NAME_MAX: 400" "$(err fs.stat "{\"path\":\"$long\"}")" "400 bad_request"
huge=$(python3 -c 'print("/" + "a/" * 2100)')
is "a path over SPACE_PATH_MAX: 400" "$(err fs.stat "{\"path\":\"$huge\"}")" "400 bad_request"
is "a path with a NUL: 400" "$(err fs.stat '{"path":"/home/user/a\u0000b"}')" "400 bad_request"
is "an unknown argument: 400" "$(err fs.stat '{"path":"/home/user","x":1}')" "400 bad_request"
is "a missing path: 400" "$(err fs.stat '{}')" "400 bad_request"
is "mode out of range: 400" "$(err fs.write '{"path":"/home/user/m","mode":4095}' "$W/small")" "400 bad_request"
check "a refused write leaves no temporary file" sh -c "! ls -a '$W/run/rw/home' | grep -q space-"

# ---- large bodies: spliced through, every header still checked ----
# the bridge and the guest pass large DATA payloads with splice after
# reading each frame header themselves (src/libspace/fsplice.h); the bytes
# must arrive whole, and a body that breaks the frame rules in the middle
# must leave nothing behind
head -c $((48 * 1048576)) /dev/urandom >"$W/mid"
fresh
o=$(call fs.write '{"path":"/home/user/mid"}' "$W/mid")
is "48 MiB fs.write acknowledged with its size" "$(f "$o" body.result.size)" "50331648"
is "48 MiB: the layer file hashes as the upload" \
	"$(sha256sum <"$W/run/rw/home/mid" | cut -d' ' -f1)" "$(sha256sum <"$W/mid" | cut -d' ' -f1)"
o=$(call fs.read '{"path":"/home/user/mid"}' "" "$W/mid.back")
is "48 MiB fs.read streamed to the end" "$(f "$o" data_bytes) $(f "$o" ended)" "50331648 true"
is "48 MiB: the download hashes as the upload" \
	"$(sha256sum <"$W/mid.back" | cut -d' ' -f1)" "$(sha256sum <"$W/mid" | cut -d' ' -f1)"
rm -f "$W/mid" "$W/mid.back"
BF="python3 $SPACE_TOP/tests/tools/bulkframes.py"
is "upload cut inside a DATA frame: no answer" \
	"$($BF "$W/run/bridge.sock" "$SB" "$C" /home/user/cut truncated)" "closed"
is "a DATA header over the limit mid-upload: refused" \
	"$($BF "$W/run/bridge.sock" "$SB" "$C" /home/user/cut oversized)" "closed"
is "a REQUEST among the DATA frames: 400" \
	"$($BF "$W/run/bridge.sock" "$SB" "$C" /home/user/cut wrongtype)" "ERROR 400 bad_request"
is "a bad magic after a large DATA frame: refused" \
	"$($BF "$W/run/bridge.sock" "$SB" "$C" /home/user/cut badmagic)" "closed"
i=0; while [ $i -lt 50 ] && ls -a "$W/run/rw/home" | grep -q space-; do sleep 0.1; i=$((i + 1)); done
check "the broken uploads left no file and no temporary file" \
	sh -c "! ls -a '$W/run/rw/home' | grep -q -e space- -e '^cut\$'"
is "the bridge serves after them" "$(f "$(call fs.stat '{"path":"/home/user/mid"}')" body.result.size)" "50331648"
call fs.remove '{"path":"/home/user/mid"}' >/dev/null

# ---- 1 GiB both ways, memory bounded ----
head -c $((1024 * 1048576)) /dev/urandom >"$W/big"
# the bridge: its monitor and its serving process (named on the ready line,
# the one that relays the data); the guest is the monitor's other child
SP=$(cut -d" " -f2 "$W/ready")
GP=$(pgrep -P "$HP" | grep -vx "$SP" | head -1)
# sample VmHWM of both bridge processes and of the guest's tree
# (the guest forks one child per operation; that child does the I/O)
(
	while :; do
		for p in "$HP" "$SP"; do
			awk '/^VmHWM:/ { print "bridge", $2 }' "/proc/$p/status" 2>/dev/null
		done
		for p in $(pgrep -P "$GP") "$GP"; do
			awk '/^VmHWM:/ { print "guest", $2 }' "/proc/$p/status" 2>/dev/null
		done
		sleep 0.2
	done >"$W/hwm"
) &
SAMPLER=$!
t0=$(date +%s)
fresh
o=$(call fs.write '{"path":"/home/user/big"}' "$W/big")
t1=$(date +%s)
is "1 GiB fs.write acknowledged with its size" "$(f "$o" body.result.size)" "1073741824"
fresh
o=$(call fs.read '{"path":"/home/user/big"}' "" "$W/big.back")
t2=$(date +%s)
kill "$SAMPLER"; SAMPLER=""
is "1 GiB fs.read streamed to the end" "$(f "$o" body.result.size) $(f "$o" data_bytes) $(f "$o" ended)" "1073741824 1073741824 true"
check "1 GiB read back equals what was written" cmp -s "$W/big" "$W/big.back"
rm -f "$W/big" "$W/big.back"
host_hwm=$(awk '$1 == "bridge" { if ($2 > m) m = $2 } END { print m + 0 }' "$W/hwm")
guest_hwm=$(awk '$1 == "guest" { if ($2 > m) m = $2 } END { print m + 0 }' "$W/hwm")
diag "1 GiB write $((t1 - t0)) s, read $((t2 - t1)) s; VmHWM bridge ${host_hwm} KiB, guest side max ${guest_hwm} KiB"
if [ "${SPACE_SAN:-0}" = 1 ]; then
	check "VmHWM sampled (bound not checked under ASan)" test "$host_hwm" -gt 0 -a "$guest_hwm" -gt 0
else
	check "bridge VmHWM ${host_hwm} KiB stays under 64 MiB" test "$host_hwm" -gt 0 -a "$host_hwm" -lt 65536
	check "guest VmHWM ${guest_hwm} KiB stays under 64 MiB" test "$guest_hwm" -gt 0 -a "$guest_hwm" -lt 65536
fi
fresh
is "bridge still serves" "$(f "$(call fs.stat '{"path":"/home/user/big"}')" body.result.size)" "1073741824"
done_testing
