#!/bin/sh
# spaced-host as sbx-manager sees it: ready line, HELLO/REQUEST, the
# comparator on every request (nothing forwarded on refusal), exec, the
# guest challenge, no reconnect after the guest dies, clean stop.
. "$SPACE_TOP/tests/lib.sh"
SPC="python3 $SPACE_TOP/tests/tools/spc.py"
W=$(mktemp -d)
HOSTS=""
cleanup() {
	for p in $HOSTS; do kill "$p" 2>/dev/null; done
	for p in $HOSTS; do i=0; while kill -0 "$p" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; done
	rm -rf "$W"
}
trap cleanup EXIT INT TERM

# a uid range of our own, away from other tests running at the same time
UB=$((1000000 + ($$ % 4000) * 65536))
SB=b$$
# start_host NAME UIDBASE [extra args]: sets PID_<NAME>, leaves RUN/LAYER in
# $W/NAME (DIR=... picks another directory, LAYER=... another layer)
start_host() {
	n=$1; ub=$2; shift 2
	d=${DIR:-$n}
	mkdir -p "$W/$d/layer" && rm -rf "$W/$d/run" && mkdir -m 700 "$W/$d/run"
	# an earlier bridge's ready line must not pass for this one's: the
	# redirection below empties the file only once the child runs
	: >"$W/$d/ready"
	"$SPACE_BIN/spaced-host" --sandbox "$n" --generation 3 --activation 2 --worker w1 \
	    --resident r1 --substrate jail --template host --run-dir "$W/$d/run" \
	    --layer-dir "${LAYER:-$W/$d/layer}" --uid-base "$ub" --disk-mb 64 --memory-mb 256 --pids 128 "$@" \
	    >"$W/$d/ready" 2>"$W/$d/log" &
	eval "PID_$n=$!"
	HOSTS="$HOSTS $!"
	i=0
	while [ $i -lt 100 ]; do
		[ -s "$W/$d/ready" ] && break
		kill -0 "$(eval echo \$PID_$n)" 2>/dev/null || break
		sleep 0.1; i=$((i + 1))
	done
}
# valid for 30 minutes: a loaded machine must not expire the test's capability
# (a test's own --exp-in comes later and wins)
claims() { $SPC claims --sandbox "$SB" --gen 3 --worker w1 --resident r1 --act 2 --exp-in 1800 "$@"; }
call() { $SPC call "$W/$SB/run/bridge.sock" "$@"; }
get() { $SPC get "$1"; }

start_host "$SB" "$UB"
is "spaced-host says ready (and names its serving process)" "$(sed 's/ [0-9][0-9]*$//' "$W/$SB/ready")" "ready"
check "bridge.sock is a socket" test -S "$W/$SB/run/bridge.sock"
is "bridge.sock is owner-only (0600)" "$(stat -c %a "$W/$SB/run/bridge.sock")" "600"
# the claims used throughout: valid for an hour, so that a slow machine
# does not turn the later checks into expiry refusals (the bridge checks
# exp against its clock, not exp - iat; expiry has its own checks below)
C=$(claims --exp-in 3600)

# ---- exec ----
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","echo hello; echo err >&2; exit 3"]}')
is "exec: stdout" "$(printf "%s\n" "$out" | get body.result.stdout)" "hello"
is "exec: stderr" "$(printf "%s\n" "$out" | get body.result.stderr)" "err"
is "exec: exit code" "$(printf "%s\n" "$out" | get body.result.exit_code)" "3"
is "exec: serving is the bridge's route identity" "$(printf "%s\n" "$out" | get body.serving)" \
    "{\"sandbox\": \"$SB\", \"generation\": 3, \"worker\": \"w1\", \"substrate\": \"jail\", \"activation\": 2, \"resident\": \"r1\"}"
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","id -u; id -g; pwd; echo $HOME:$PATH:$FOO; cat"],"env":{"FOO":"bar"},"stdin":"in put"}')
is "exec: runs as uid 1000 in /home/user with env and stdin" "$(printf "%s\n" "$out" | get body.result.stdout)" \
    "$(printf '1000\n1000\n/home/user\n/home/user:/usr/local/bin:/usr/bin:/bin:bar\nin put')"
out=$(call exec "$SB" "$C" '{"argv":["pwd"],"cwd":"/tmp"}')
is "exec: cwd" "$(printf "%s\n" "$out" | get body.result.stdout)" "/tmp"
out=$(call exec "$SB" "$C" '{"argv":["sleep","30"],"timeout":1}')
is "exec: timeout kills the command" "$(printf "%s\n" "$out" | get body.result.timed_out),$(printf "%s\n" "$out" | get body.result.signal)" "true,9"
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","sleep 30 & sleep 30; echo never"],"timeout":1}')
is "exec: timeout kills the whole process group" "$(printf "%s\n" "$out" | get body.result.timed_out)" "true"
# the group is killed; its processes are gone once the guest reaped them
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","n() { ps -e -o stat=,comm= | awk '"'"'$1 !~ /^Z/ && $2 == \"sleep\"'"'"' | wc -l; }; i=0; while [ $(n) -gt 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; n"]}')
is "exec: nothing of the timed-out group survives" "$(printf "%s\n" "$out" | get body.result.stdout)" "0"
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","head -c 3000000 /dev/zero | tr \\\\0 a"]}')
is "exec: large output is truncated and flagged" "$(printf "%s\n" "$out" | get body.result.stdout_truncated)" "true"
check "exec: truncated output still arrives" test "$(printf "%s\n" "$out" | get body.result.stdout | wc -c)" -gt 10000
out=$(call exec "$SB" "$C" '{"argv":["printf","\\377\\376"]}')
is "exec: non-UTF-8 output comes as stdout_b64" "$(printf "%s\n" "$out" | get body.result.stdout_b64)" "//4="
out=$(call exec "$SB" "$C" '{"argv":["no-such-program"]}')
is "exec: unknown program is 404" "$(printf "%s\n" "$out" | get body.status),$(printf "%s\n" "$out" | get body.error)" "404,not_found"
out=$(call exec "$SB" "$C" '{"argv":["true"],"bogus":1}')
is "exec: unknown argument is 400" "$(printf "%s\n" "$out" | get body.status)" "400"
out=$(call exec "$SB" "$C" '{"argv":[]}')
is "exec: empty argv is 400" "$(printf "%s\n" "$out" | get body.status)" "400"
out=$(call exec "$SB" "$C" '{"argv":["true"],"timeout":999999}')
is "exec: timeout over the maximum is 400" "$(printf "%s\n" "$out" | get body.status)" "400"

# ---- concurrent operations: one thread per connection, one guest child each ----
# each exec marks itself and waits (at most 60 s) until all 8 are running
# at once: only a bridge that serves them in parallel lets them all see 8
k=0; pids=""
while [ $k -lt 8 ]; do
	( call exec "$SB" "$C" "{\"argv\":[\"sh\",\"-c\",\"mkdir -p /tmp/conc; touch /tmp/conc/c$k; i=0; while [ \$(ls /tmp/conc | wc -l) -lt 8 ] && [ \$i -lt 600 ]; do sleep 0.1; i=\$((i + 1)); done; [ \$(ls /tmp/conc | wc -l) -ge 8 ] && echo c$k || echo c$k alone\"]}" >"$W/conc.$k" ) &
	pids="$pids $!"; k=$((k + 1))
done
for p in $pids; do wait "$p"; done
good=0 together=0; k=0
while [ $k -lt 8 ]; do
	o=$(get body.result.stdout <"$W/conc.$k")
	case "$o" in "c$k"*) good=$((good + 1)) ;; esac
	[ "$o" = "c$k" ] && together=$((together + 1))
	k=$((k + 1))
done
is "8 concurrent execs all answered" "$good" "8"
is "... in parallel (all 8 ran at the same time)" "$together" "8"

# ---- the comparator refuses, and forwards nothing ----
# every refused request would create a marker file if it reached the guest
refused() { # what want_status want_error want_reason claims [sandbox] [op]
	what=$1; st=$2; er=$3; rs=$4; cl=$5; sb=${6:-$SB}; op=${7:-exec}
	if [ "$op" = exec ]; then a='{"argv":["touch","/home/user/forwarded"]}'; else a='{"path":"/home/user/forwarded"}'; fi
	if [ "$op" = fs.write ]; then printf x >"$W/one"; o=$(call "$op" "$sb" "$cl" "$a" --in "$W/one")
	else o=$(call "$op" "$sb" "$cl" "$a"); fi
	is "refused: $what" "$(printf "%s\n" "$o" | get frame) $(printf "%s\n" "$o" | get body.status) $(printf "%s\n" "$o" | get body.error) $(printf "%s\n" "$o" | get body.reason)" \
	    "ERROR $st $er $rs"
}
refused "request for another sandbox" 403 deny receiver_sandbox_mismatch \
    "$($SPC claims --sandbox other --gen 3 --worker w1 --resident r1 --act 2)" other
refused "claims of another sandbox" 403 deny sandbox_mismatch \
    "$($SPC claims --sandbox other --gen 3 --worker w1 --resident r1 --act 2)"
refused "older generation" 409 refresh_route generation_mismatch \
    "$($SPC claims --sandbox "$SB" --gen 2 --worker w1 --resident r1 --act 2)"
refused "other worker" 409 refresh_route worker_mismatch \
    "$($SPC claims --sandbox "$SB" --gen 3 --worker w2 --resident r1 --act 2)"
refused "other resident" 409 refresh_route resident_mismatch \
    "$($SPC claims --sandbox "$SB" --gen 3 --worker w1 --resident r2 --act 2)"
refused "other activation" 409 refresh_route activation_mismatch \
    "$($SPC claims --sandbox "$SB" --gen 3 --worker w1 --resident r1 --act 1)"
refused "other substrate" 409 refresh_route substrate_mismatch \
    "$($SPC claims --sandbox "$SB" --gen 3 --worker w1 --resident r1 --act 2 --substrate firecracker)"
refused "exec without exec access" 403 deny access_denied "$(claims --acc fs:r,fs:w)"
refused "fs.write without fs:w" 403 deny access_denied "$(claims --acc exec,fs:r)" "$SB" fs.write
refused "fs.read without fs:r" 403 deny access_denied "$(claims --acc exec,fs:w)" "$SB" fs.read
refused "expired capability" 401 capability_expired expired "$(claims --exp-in -30 --iat-in -150)"
refused "capability from the future" 401 capability_expired issued_in_future "$(claims --iat-in 600 --exp-in 720)"
refused "claims that are not claims" 403 deny bad_claims '{"iss":"space-control"}'
refused "claims with an unknown claim" 403 deny bad_claims \
    "$(claims | sed 's/}$/,"adm":true}/')"
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","ls -a /home/user | grep -c forwarded"]}')
is "no refused request reached the guest" "$(printf "%s\n" "$out" | get body.result.stdout)" "0"
out=$(python3 - "$W/$SB/run/bridge.sock" <<'EOF'
import sys, json, socket
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1})); spc.recv_frame(s)
spc.send_frame(s, "REQUEST", json.dumps({"op": "exec", "sandbox": "x", "claims": "{}", "args": {}, "extra": 1}))
print(json.loads(spc.recv_frame(s)[1])["status"])
EOF
)
is "unknown field in REQUEST is 400" "$out" "400"
out=$(python3 - "$W/$SB/run/bridge.sock" "$SB" "$(claims)" <<'EOF'
import sys, json, socket
sys.path.insert(0, __import__("os").environ["SPACE_TOP"] + "/tests/tools")
import spc
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1})); spc.recv_frame(s)
# valid claims, but as their JSON text inside a string: one spelling only
spc.send_frame(s, "REQUEST", json.dumps({"op": "exec", "sandbox": sys.argv[2], "claims": sys.argv[3],
    "args": {"argv": ["true"]}}))
name, body = spc.recv_frame(s)
print(name, json.loads(body)["status"])
EOF
)
is "claims as a string inside the REQUEST (a second spelling) -> 400" "$out" "ERROR 400"

# ---- only root may connect (SO_PEERCRED), even if the directory were open ----
chmod 755 "$W" "$W/$SB" "$W/$SB/run"; chmod 666 "$W/$SB/run/bridge.sock"
out=$(python3 - "$W/$SB/run/bridge.sock" <<'EOF'
import os, sys, json, socket
sys.path.insert(0, os.environ["SPACE_TOP"] + "/tests/tools")
import spc
os.setgid(65534); os.setuid(65534)
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    spc.send_frame(s, "HELLO", json.dumps({"role": "sbx-manager", "min": 1, "max": 1}))
    print(spc.recv_frame(s)[0])
except Exception as e:
    print("closed")
EOF
)
chmod 700 "$W" "$W/$SB/run"; chmod 600 "$W/$SB/run/bridge.sock"
is "a non-root peer is closed without an answer" "$out" "closed"

# ---- the guest challenge ----
# test doubles of the guest (tests/doubles/fake_guest.c), started exactly
# as spaced-guest is: one claims another sandbox, one has a wrong secret
DOUBLES=$(dirname "$SPACE_BIN")/tests/doubles
start_host "c1$$" $((UB + 65536)) --guest "$DOUBLES/guest-other-sandbox"
sleep 0.5
check "guest reporting another sandbox: no ready line" test ! -s "$W/c1$$/ready"
check "guest reporting another sandbox: bridge exited" sh -c "! kill -0 $(eval echo \$PID_c1$$) 2>/dev/null"
check "guest reporting another sandbox: logged" grep -q "guest reports another identity" "$W/c1$$/log"
check "guest reporting another sandbox: no socket" test ! -e "$W/c1$$/run/bridge.sock"
start_host "c2$$" $((UB + 2 * 65536)) --guest "$DOUBLES/guest-bad-secret"
sleep 0.5
check "guest with a wrong secret: no ready line" test ! -s "$W/c2$$/ready"
check "guest with a wrong secret: MAC refused" grep -q "challenge MAC does not verify" "$W/c2$$/log"
check "failed launch leaves no cgroup" sh -c "! ls -d /sys/fs/cgroup/pids/space/c2$$.g3 2>/dev/null"
check "failed launch leaves no layer mount" sh -c "! grep -q ' $W/c2$$/run/rw ' /proc/mounts"
check "unit test of the MAC exists and passes" sh -c "$SPACE_BIN/../tests/unit/test_guestmac >/dev/null"

# ---- layer persists across bridges of the same layer ----
call exec "$SB" "$C" '{"argv":["sh","-c","echo kept > /home/user/persist"]}' >/dev/null
# its loop device reads and writes the image with direct I/O (docs/jail.md,
# "Disk limit") where the image's file system takes O_DIRECT: the layer
# is cached once, in the sandbox's own charge
IMG=$(readlink -f "$W/$SB/layer/disk.img")
LD=
for l in /sys/block/loop*/loop; do
	[ "$(cat "$l/backing_file" 2>/dev/null)" = "$IMG" ] && LD=$l
done
check "the serving layer is on a loop device backed by its image" test -n "$LD"
if dd if=/dev/zero of="$W/$SB/layer/.dio" bs=4096 count=1 oflag=direct 2>/dev/null; then
	is "... which does direct I/O" "$(cat "$LD/dio" 2>/dev/null)" 1
else
	diag "the layer's file system refuses O_DIRECT: the loop device uses the page cache"
	is "... which uses the page cache, as its file system allows no other" "$(cat "$LD/dio" 2>/dev/null)" 0
fi
rm -f "$W/$SB/layer/.dio"
HP=$(eval echo \$PID_$SB)
DIR=dup LAYER="$W/$SB/layer" start_host "$SB" $((UB + 3 * 65536))
sleep 0.3
check "a second bridge of the same execution is refused" test ! -s "$W/dup/ready"
check "... and says why" grep -q "in use by another bridge" "$W/dup/log"
out=$(call exec "$SB" "$C" '{"argv":["cat","/home/user/persist"]}')
is "... and the first one still serves" "$(printf "%s\n" "$out" | get body.result.stdout)" "kept"
eval "PID_$SB=$HP"

# ---- guest death: no reconnect, 503, exit non-zero ----
HP=$(eval echo \$PID_$SB)
# the bridge's children: its serving process (named on the ready line) and the guest
SP=$(cut -d' ' -f2 "$W/$SB/ready")
GP=$(pgrep -P "$HP" | grep -vx "$SP" | head -1)
( call exec "$SB" "$C" '{"argv":["sleep","20"]}' >"$W/inflight" ) &
CP=$!
# the operation is in flight once its sleep runs in the sandbox
i=0; while ! ps -eo uid=,comm= | awk -v u="$UB" '$1 >= u && $1 < u + 65536 && $2 == "sleep"' | grep -q . && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
kill -9 "$GP"
wait "$CP"
is "in-flight operation fails with 503 when the guest dies" "$(get body.status <"$W/inflight") $(get body.error <"$W/inflight")" "503 unavailable"
i=0; while kill -0 "$HP" 2>/dev/null && [ $i -lt 80 ]; do sleep 0.1; i=$((i + 1)); done
check "bridge exits when its guest is gone" sh -c "! kill -0 $HP 2>/dev/null"
wait "$HP"; rc=$?
check "bridge exit status is non-zero after guest death (got $rc)" test "$rc" -ne 0
check "no guest was relaunched" sh -c "! ps -eo uid= | awk '\$1 >= $UB && \$1 < $UB + 65536' | grep -q ."
check "layer unmounted after guest death" sh -c "! grep -q ' $W/$SB/run/rw ' /proc/mounts"

# ---- a bridge killed with SIGKILL: its jail waits (bounded) for the next
# activation's bridge (docs/jail.md); none comes, it ends; the next bridge
# recovers the layer ----
start_host "$SB" "$UB" --orphan-wait-s 2
HP=$(eval echo \$PID_$SB)
is "a bridge with --orphan-wait-s 2 is ready" "$(cut -d" " -f1 "$W/$SB/ready")" "ready"
out=$(call exec "$SB" "$C" '{"argv":["sh","-c","echo again >> /home/user/persist"]}')
is "... and its guest appends to a file of the layer" "$(printf "%s\n" "$out" | get body.result.exit_code)" "0"
check "the guest listens on RUNDIR/jail.sock, owner-only" test "$(stat -c %a "$W/$SB/run/jail.sock")" = 600
kill -9 "$HP"; wait "$HP" 2>/dev/null
i=0; while ! grep -q "waiting up to 2 s for the next bridge" "$W/$SB/log" && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
check "SIGKILL of the bridge: its guest waits for the next activation's bridge" \
	grep -q "waiting up to 2 s for the next bridge" "$W/$SB/log"
grep -q "waiting up to 2 s for the next bridge" "$W/$SB/log" || sed 's/^/# log: /' "$W/$SB/log" | tail -20
i=0; while ps -eo uid= | awk -v u=$UB '$1 >= u && $1 < u + 65536' | grep -q . && [ $i -lt 300 ]; do sleep 0.1; i=$((i + 1)); done
check "... none came: the jail ended by itself" sh -c "! ps -eo uid= | awk '\$1 >= $UB && \$1 < $UB + 65536' | grep -q ."
check "... and said why" grep -q "no bridge came back within 2 s: the jail ends" "$W/$SB/log"
check "... and leaves its layer mounted" grep -q " $W/$SB/run/rw " /proc/mounts
DIR=second LAYER="$W/$SB/layer" start_host "$SB" "$UB"
is "a new bridge (new run dir) starts on the same layer" "$(cut -d" " -f1 "$W/second/ready")" "ready"
check "the dead bridge's mount of the layer was detached" sh -c "! grep -q ' $W/$SB/run/rw ' /proc/mounts"
is "the image is mounted once" "$(grep -c " $W/second/run/rw " /proc/mounts)" "1"
HP=$(eval echo \$PID_$SB)
kill -TERM "$HP"; wait "$HP"

# ---- restart on the same layer, then SIGTERM ----
start_host "$SB" "$UB"
HP=$(eval echo \$PID_$SB)
out=$(call exec "$SB" "$C" '{"argv":["cat","/home/user/persist"]}')
is "the writable layer survives bridge restarts" "$(printf "%s\n" "$out" | get body.result.stdout | sed '/^$/d' | paste -sd' ' -)" "kept again"
kill -TERM "$HP"
wait "$HP"; rc=$?
is "SIGTERM: exit 0" "$rc" "0"
check "SIGTERM: socket removed" test ! -e "$W/$SB/run/bridge.sock"
check "SIGTERM: cgroup removed" sh -c "! ls -d /sys/fs/cgroup/pids/space/$SB.g3 2>/dev/null"
check "SIGTERM: layer unmounted" sh -c "! grep -q ' $W/$SB/run/rw ' /proc/mounts"
check "SIGTERM: no process of the sandbox left" sh -c "! ps -eo uid= | awk '\$1 >= $UB && \$1 < $UB + 65536' | grep -q ."
done_testing
